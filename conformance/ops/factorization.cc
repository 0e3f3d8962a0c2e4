// hal-conformance: the "factorization" group (sdk/catalog/ops/factorization.toml).
// References are textbook algorithms in long double, independent of LAPACK:
// Cholesky–Banachiewicz, Doolittle with partial pivoting, substitution, cyclic
// Jacobi (eigenvalues) and one-sided Jacobi (singular values), modified
// Gram–Schmidt (R up to row signs). Where the outputs are unique (Cholesky
// factor, LU with its pivots, triangular solves, eigenvalues, singular
// values) they are compared directly; eigenvectors, singular vectors and Q
// (unique only up to signs) are checked by their defining properties.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

using Shape = std::vector<int64_t>;
using Mat = std::vector<std::vector<long double>>;
constexpr hal_status_code_e kBad = HAL_STATUS_INVALID_ARGUMENT;
constexpr hal_dtype_e kI32 = HAL_DTYPE_INT32;

// ---- helpers ----------------------------------------------------------------------

int64_t batch_count(const Shape& s, size_t matrix_dims = 2) {
  int64_t b = 1;
  for (size_t d = 0; d + matrix_dims < s.size(); ++d) b *= s[d];
  return b;
}
Shape batch_dims(const Shape& s, size_t drop = 2) { return Shape(s.begin(), s.end() - static_cast<std::ptrdiff_t>(drop)); }
Shape with_tail(Shape s, std::initializer_list<int64_t> tail) {
  s.insert(s.end(), tail);
  return s;
}

// Matrix B of T ([..., rows, cols]) as rows x cols.
Mat matrix(const HostTensor& t, int64_t b) {
  const int64_t r = t.size(-2), c = t.size(-1);
  Mat m(static_cast<size_t>(r), std::vector<long double>(static_cast<size_t>(c)));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) m[i][j] = t.values[static_cast<size_t>(b * r * c + i * c + j)];
  return m;
}
void put(HostTensor& t, int64_t b, const Mat& m) {
  const int64_t r = t.size(-2), c = t.size(-1);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t.values[static_cast<size_t>(b * r * c + i * c + j)] = static_cast<double>(m[i][j]);
}

// The symmetric matrix a routine sees when it reads only one triangle of M.
Mat symmetric_from(const Mat& m, bool upper) {
  Mat s = m;
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m.size(); ++j) s[i][j] = (upper ? i <= j : i >= j) ? m[i][j] : m[j][i];
  return s;
}

// Symmetric positive-definite batch [..., n, n] (M·Mᵀ + n·I) whose triangle
// opposite UPPER's is overwritten with junk (it must not be read).
HostTensor spd(hal_dtype_e dt, Shape shape, uint64_t seed, bool junk_upper = true) {
  HostTensor m = random(dt, shape, seed, -1, 1), junk = random(dt, shape, seed + 100, -50, 50);
  HostTensor out(dt, shape);
  const int64_t n = shape.back();
  for (int64_t b = 0; b < batch_count(shape); ++b) {
    Mat a = matrix(m, b), s(n, std::vector<long double>(n, 0)), j = matrix(junk, b);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t l = 0; l < n; ++l) s[i][k] += a[i][l] * a[k][l];
        if (i == k) s[i][k] += n;
        if (junk_upper ? k > i : k < i) s[i][k] = j[i][k];
      }
    put(out, b, s);
  }
  for (double& v : out.values) v = round_to(dt, v);
  return out;
}

// Per-dtype scale of "close" for residual checks (relative to the data's size).
double eps(hal_dtype_e dt) { return dt == HAL_DTYPE_FLOAT64 ? 1e-11 : 2e-5; }

std::string where(int64_t b, int64_t i, int64_t j) {
  std::ostringstream s;
  s << "matrix " << b << " [" << i << ", " << j << "]";
  return s.str();
}

// "" when every |A[i,j] - B[i,j]| <= TOL, else the first miss.
std::string near(const char* what, const Mat& a, const Mat& b, long double tol, int64_t batch) {
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j)
      if (!(std::fabs(a[i][j] - b[i][j]) <= tol)) {
        std::ostringstream s;
        s << what << " at " << where(batch, i, j) << ": " << static_cast<double>(a[i][j]) << " vs "
          << static_cast<double>(b[i][j]) << " (tolerance " << static_cast<double>(tol) << ")";
        return s.str();
      }
  return "";
}

Mat product(const Mat& a, const Mat& b, bool transpose_a = false) {
  const size_t r = transpose_a ? (a.empty() ? 0 : a[0].size()) : a.size(), k = transpose_a ? a.size() : b.size();
  const size_t c = b.empty() ? 0 : b[0].size();
  Mat out(r, std::vector<long double>(c, 0));
  for (size_t i = 0; i < r; ++i)
    for (size_t l = 0; l < k; ++l) {
      const long double v = transpose_a ? a[l][i] : a[i][l];
      for (size_t j = 0; j < c; ++j) out[i][j] += v * b[l][j];
    }
  return out;
}
Mat eye(size_t n) {
  Mat m(n, std::vector<long double>(n, 0));
  for (size_t i = 0; i < n; ++i) m[i][i] = 1;
  return m;
}
Mat transpose(const Mat& a) {
  Mat t(a.empty() ? 0 : a[0].size(), std::vector<long double>(a.size()));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].size(); ++j) t[j][i] = a[i][j];
  return t;
}
long double max_abs(const Mat& a) {
  long double m = 0;
  for (const auto& r : a)
    for (long double v : r) m = std::max(m, std::fabs(v));
  return m;
}

// Columns of Q (rows when ROWS) orthonormal within TOL.
std::string orthonormal(const char* what, const Mat& q, bool rows, long double tol, int64_t b) {
  const Mat g = rows ? product(transpose(q), transpose(q), true) : product(q, q, true);
  return near((std::string(what) + (rows ? " rows not orthonormal" : " columns not orthonormal")).c_str(), g,
              eye(g.size()), tol, b);
}

// ---- linalg_cholesky ---------------------------------------------------------------

std::vector<OpCase> cholesky_cases(hal_dtype_e dt) {
  auto upper = [](bool u) { return Attr::b("upper", u); };
  std::vector<OpCase> cases = {
      OpCase("[4, 4]").in(spd(dt, {4, 4}, 1)),
      OpCase("batch [2, 3, 5, 5]").in(spd(dt, {2, 3, 5, 5}, 2)),
      OpCase("upper [3, 6, 6]").in(spd(dt, {3, 6, 6}, 3, false)).attr(upper(true)),
      OpCase("[1, 1]").in(spd(dt, {1, 1}, 4)),
      OpCase("[40, 40]").in(spd(dt, {40, 40}, 5)),
      OpCase("[0, 0]").in(HostTensor(dt, {0, 0})),
      OpCase("empty batch [0, 3, 3]").in(HostTensor(dt, {0, 3, 3})),
  };
  // Not positive definite at minor 2: info = 2, L unspecified.
  OpCase notpd("not positive definite: info 2");
  notpd.in(HostTensor(dt, {2, 3, 3}, {4, 0, 0, 0, -1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1})).cmp({Compare::kSkip});
  cases.push_back(notpd);
  const std::vector<HostTensor> outs = {HostTensor(dt, {3, 3}), HostTensor(kI32, {})};
  cases.push_back(OpCase("not square").in(random(dt, {3, 4}, 9)).error(kBad, outs, {"linalg_cholesky", "'self'", "square", "[3, 4]"}));
  cases.push_back(OpCase("rank 1").in(random(dt, {3}, 10)).error(kBad, outs, {"linalg_cholesky", "rank >= 2", "[3]"}));
  return cases;
}

std::vector<HostTensor> cholesky_ref(const OpCase& c) {
  const HostTensor& a = c.input(0);
  const bool upper = c.attr_bool("upper", false);
  const int64_t n = a.size(-1), batch = batch_count(a.shape);
  HostTensor l(a.dtype, a.shape), info(kI32, batch_dims(a.shape));
  for (int64_t b = 0; b < batch; ++b) {
    const Mat s = symmetric_from(matrix(a, b), upper);
    Mat f(n, std::vector<long double>(n, 0));
    int failed = 0;
    for (int64_t j = 0; j < n && !failed; ++j) {
      long double d = s[j][j];
      for (int64_t k = 0; k < j; ++k) d -= f[j][k] * f[j][k];
      if (!(d > 0)) {
        failed = static_cast<int>(j + 1);
        break;
      }
      f[j][j] = std::sqrt(d);
      for (int64_t i = j + 1; i < n; ++i) {
        long double v = s[i][j];
        for (int64_t k = 0; k < j; ++k) v -= f[i][k] * f[j][k];
        f[i][j] = v / f[j][j];
      }
    }
    put(l, b, upper ? transpose(f) : f);
    info.values[b] = failed;
  }
  return {l, info};
}
HAL_CONFORMANCE_SUITE(linalg_cholesky, cholesky_cases, cholesky_ref);

// ---- linalg_lu_factor --------------------------------------------------------------

std::vector<OpCase> lu_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("[4, 4]").in(random(dt, {4, 4}, 1)),
      OpCase("wide [3, 5]").in(random(dt, {3, 5}, 2)),
      OpCase("tall [6, 2]").in(random(dt, {6, 2}, 3)),
      OpCase("batch [2, 2, 4, 4]").in(random(dt, {2, 2, 4, 4}, 4)),
      OpCase("[33, 33]").in(random(dt, {33, 33}, 5)).tol(4),
      OpCase("[1, 1]").in(random(dt, {1, 1}, 6)),
      OpCase("zero columns [3, 0]").in(HostTensor(dt, {3, 0})),
      OpCase("empty batch [0, 2, 2]").in(HostTensor(dt, {0, 2, 2})),
      // Exactly singular: U[1, 1] is an exact zero after one elimination step (info = 2).
      OpCase("singular: info 2").in(HostTensor(dt, {2, 2}, {1, 2, 2, 4})),
  };
  const std::vector<HostTensor> outs = {HostTensor(dt, {3}), HostTensor(kI32, {0}), HostTensor(kI32, {})};
  cases.push_back(OpCase("rank 1").in(random(dt, {3}, 9)).error(kBad, outs, {"linalg_lu_factor", "rank >= 2", "[3]"}));
  return cases;
}

std::vector<HostTensor> lu_ref(const OpCase& c) {
  const HostTensor& a = c.input(0);
  const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n), batch = batch_count(a.shape);
  HostTensor lu(a.dtype, a.shape), piv(kI32, with_tail(batch_dims(a.shape), {k})), info(kI32, batch_dims(a.shape));
  for (int64_t b = 0; b < batch; ++b) {
    Mat u = matrix(a, b);
    int failed = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t p = j;
      for (int64_t i = j + 1; i < m; ++i)
        if (std::fabs(u[i][j]) > std::fabs(u[p][j])) p = i;
      std::swap(u[j], u[p]);
      piv.values[b * k + j] = static_cast<double>(p + 1);
      if (u[j][j] == 0) {
        if (!failed) failed = static_cast<int>(j + 1);
        continue;
      }
      for (int64_t i = j + 1; i < m; ++i) {
        u[i][j] /= u[j][j];
        for (int64_t l = j + 1; l < n; ++l) u[i][l] -= u[i][j] * u[j][l];
      }
    }
    put(lu, b, u);
    info.values[b] = failed;
  }
  return {lu, piv, info};
}
HAL_CONFORMANCE_SUITE(linalg_lu_factor, lu_cases, lu_ref);

// ---- linalg_solve_triangular -------------------------------------------------------

// A well-conditioned triangular-ish matrix: diagonal in ±[2, 3], the rest in [-0.5, 0.5].
HostTensor triangular_operand(hal_dtype_e dt, Shape shape, uint64_t seed) {
  HostTensor t = random(dt, shape, seed, -0.5, 0.5);
  const int64_t n = shape.back();
  for (int64_t b = 0; b < batch_count(shape); ++b)
    for (int64_t i = 0; i < n; ++i) {
      double& v = t.values[b * n * n + i * n + i];
      v = round_to(dt, (v < 0 ? -2.0 : 2.0) + v);
    }
  return t;
}

OpCase triangular(const std::string& name, hal_dtype_e dt, Shape a, Shape b, bool upper, bool left, bool unit,
                  uint64_t seed) {
  return OpCase(name).in(triangular_operand(dt, std::move(a), seed)).in(random(dt, std::move(b), seed + 1))
      .attr(Attr::b("upper", upper)).attr(Attr::b("left", left)).attr(Attr::b("unitriangular", unit));
}

std::vector<OpCase> solve_triangular_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      triangular("lower [4, 4] \\ [4, 3]", dt, {4, 4}, {4, 3}, false, true, false, 1),
      triangular("upper [5, 5] \\ [5, 2]", dt, {5, 5}, {5, 2}, true, true, false, 3),
      triangular("unitriangular lower", dt, {4, 4}, {4, 4}, false, true, true, 5),
      triangular("right: X·A = B, upper", dt, {3, 3}, {2, 3}, true, false, false, 7),
      triangular("right, unitriangular lower", dt, {4, 4}, {5, 4}, false, false, true, 9),
      triangular("batch broadcast [2, 1, 3, 3] and [4, 3, 2]", dt, {2, 1, 3, 3}, {4, 3, 2}, false, true, false, 11),
      triangular("one A for a batch of B", dt, {3, 3}, {2, 3, 3}, true, true, false, 13),
      triangular("[30, 30] \\ [30, 7]", dt, {30, 30}, {30, 7}, false, true, false, 15),
      triangular("zero columns", dt, {3, 3}, {3, 0}, false, true, false, 17),
  };
  const std::vector<HostTensor> outs = {HostTensor(dt, {3, 2})};
  cases.push_back(triangular("B rows differ", dt, {3, 3}, {4, 2}, false, true, false, 20)
                      .error(kBad, outs, {"linalg_solve_triangular", "rows (4)", "size 3"}));
  cases.push_back(triangular("A not square", dt, {3, 3}, {3, 2}, false, true, false, 22)
                      .error(kBad, outs, {"linalg_solve_triangular", "'self'", "square"}));
  cases.back().inputs[0] = random(dt, {3, 4}, 23);
  cases.push_back(triangular("batches do not broadcast", dt, {2, 3, 3}, {3, 3, 2}, false, true, false, 24)
                      .error(kBad, {HostTensor(dt, {3, 3, 2})}, {"linalg_solve_triangular", "do not broadcast"}));
  const hal_dtype_e other = dt == HAL_DTYPE_FLOAT32 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32;
  cases.push_back(triangular("B of another dtype", dt, {3, 3}, {3, 2}, false, true, false, 26)
                      .error(kBad, outs, {"linalg_solve_triangular", "'b'", "must match"}));
  cases.back().inputs[1] = random(other, {3, 2}, 27);
  return cases;
}

std::vector<HostTensor> solve_triangular_ref(const OpCase& c) {
  const HostTensor &a = c.input(0), &bt = c.input(1);
  const bool upper = c.attr_bool("upper", false), left = c.attr_bool("left", true), unit = c.attr_bool("unitriangular", false);
  const int64_t n = a.size(-1);
  // The broadcast batch shape.
  const Shape ba = batch_dims(a.shape), bb = batch_dims(bt.shape);
  Shape batch(std::max(ba.size(), bb.size()), 1);
  for (size_t d = 0; d < batch.size(); ++d) {
    const size_t r = batch.size() - d;
    const int64_t sa = r <= ba.size() ? ba[ba.size() - r] : 1, sb = r <= bb.size() ? bb[bb.size() - r] : 1;
    batch[d] = sa == 1 ? sb : sa;
  }
  HostTensor x(a.dtype, with_tail(batch, {bt.size(-2), bt.size(-1)}));
  const int64_t count = batch_count(x.shape);
  auto source = [&](const Shape& own, int64_t flat) {  // the broadcast matrix index in an operand
    int64_t idx = 0, stride = 1;
    for (int d = static_cast<int>(batch.size()) - 1, e = static_cast<int>(own.size()) - 1; d >= 0; --d, --e) {
      const int64_t i = flat % batch[d];
      flat /= batch[d];
      if (e >= 0) {
        if (own[e] != 1) idx += i * stride;
        stride *= own[e];
      }
    }
    return idx;
  };
  for (int64_t b = 0; b < count; ++b) {
    Mat am = matrix(a, source(ba, b)), bm = matrix(bt, source(bb, b));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (upper ? j < i : j > i) am[i][j] = 0;
    if (unit)
      for (int64_t i = 0; i < n; ++i) am[i][i] = 1;
    // Right-hand side X·A = B is Aᵀ·Xᵀ = Bᵀ.
    if (!left) {
      am = transpose(am);
      bm = transpose(bm);
    }
    const bool up = left ? upper : !upper;
    const int64_t cols = bm.empty() ? 0 : static_cast<int64_t>(bm[0].size());
    for (int64_t col = 0; col < cols; ++col)
      for (int64_t s = 0; s < n; ++s) {
        const int64_t i = up ? n - 1 - s : s;
        long double v = bm[i][col];
        for (int64_t k = 0; k < n; ++k)
          if (up ? k > i : k < i) v -= am[i][k] * bm[k][col];
        bm[i][col] = v / am[i][i];
      }
    put(x, b, left ? bm : transpose(bm));
  }
  return {x};
}
HAL_CONFORMANCE_SUITE(linalg_solve_triangular, solve_triangular_cases, solve_triangular_ref);

// ---- linalg_eigh -------------------------------------------------------------------

// Eigenvalues (ascending) of symmetric S: cyclic Jacobi rotations.
std::vector<long double> jacobi_eigenvalues(Mat s) {
  const size_t n = s.size();
  for (int sweep = 0; sweep < 100; ++sweep) {
    long double off = 0;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = i + 1; j < n; ++j) off += s[i][j] * s[i][j];
    if (off < 1e-40L) break;
    for (size_t p = 0; p < n; ++p)
      for (size_t q = p + 1; q < n; ++q) {
        if (s[p][q] == 0) continue;
        const long double theta = (s[q][q] - s[p][p]) / (2 * s[p][q]);
        const long double t = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const long double cs = 1 / std::sqrt(t * t + 1), sn = t * cs;
        for (size_t k = 0; k < n; ++k) {  // columns p, q
          const long double a = s[k][p], b = s[k][q];
          s[k][p] = cs * a - sn * b;
          s[k][q] = sn * a + cs * b;
        }
        for (size_t k = 0; k < n; ++k) {  // rows p, q
          const long double a = s[p][k], b = s[q][k];
          s[p][k] = cs * a - sn * b;
          s[q][k] = sn * a + cs * b;
        }
      }
  }
  std::vector<long double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = s[i][i];
  std::sort(w.begin(), w.end());
  return w;
}

// A symmetric (in the triangle read) random batch, junk in the other triangle.
HostTensor symmetric(hal_dtype_e dt, Shape shape, uint64_t seed, bool upper) {
  HostTensor t = random(dt, shape, seed), junk = random(dt, shape, seed + 50, -30, 30);
  const int64_t n = shape.back();
  for (int64_t b = 0; b < batch_count(shape); ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (upper ? j < i : j > i) t.values[b * n * n + i * n + j] = junk.values[b * n * n + i * n + j];
  return t;
}

std::string eigh_check(const OpCase& c, const std::vector<HostTensor>& e, const std::vector<HostTensor>& got) {
  const HostTensor& a = c.input(0);
  const int64_t n = a.size(-1), batch = batch_count(a.shape);
  const bool upper = c.attr_bool("upper", false), vectors = c.attr_bool("compute_v", true);
  const double tol = eps(a.dtype) * std::max<int64_t>(n, 4);
  for (int64_t b = 0; b < batch; ++b) {
    const Mat s = symmetric_from(matrix(a, b), upper);
    const long double scale = std::max<long double>(max_abs(s), 1) * tol;
    for (int64_t i = 0; i < n; ++i)
      if (!(std::fabs(got[0].values[b * n + i] - e[0].values[b * n + i]) <= scale))
        return "eigenvalue " + std::to_string(i) + " of matrix " + std::to_string(b) + ": " +
               std::to_string(got[0].values[b * n + i]) + " vs " + std::to_string(e[0].values[b * n + i]);
    if (got[2].values[b] != 0) return "info of matrix " + std::to_string(b) + " is " + std::to_string(got[2].values[b]);
    if (!vectors) continue;
    const Mat v = matrix(got[1], b);
    if (std::string why = orthonormal("eigenvectors", v, false, tol, b); !why.empty()) return why;
    Mat lv = v;  // V·diag(w)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) lv[i][j] *= got[0].values[b * n + j];
    if (std::string why = near("A·V vs V·diag(w)", product(s, v), lv, scale, b); !why.empty()) return why;
  }
  return "";
}

std::vector<OpCase> eigh_cases(hal_dtype_e dt) {
  auto upper = [](bool u) { return Attr::b("upper", u); };
  std::vector<OpCase> cases = {
      OpCase("[4, 4]").in(symmetric(dt, {4, 4}, 1, false)),
      OpCase("upper [5, 5]").in(symmetric(dt, {5, 5}, 2, true)).attr(upper(true)),
      OpCase("batch [2, 3, 3, 3]").in(symmetric(dt, {2, 3, 3, 3}, 3, false)),
      OpCase("values only").in(symmetric(dt, {2, 6, 6}, 4, false)).attr(Attr::b("compute_v", false)),
      OpCase("[24, 24]").in(symmetric(dt, {24, 24}, 5, false)),
      OpCase("[1, 1]").in(symmetric(dt, {1, 1}, 6, false)),
      OpCase("[0, 0]").in(HostTensor(dt, {0, 0})),
  };
  for (OpCase& c : cases) c.custom_check = eigh_check;
  const std::vector<HostTensor> outs = {HostTensor(dt, {3}), HostTensor(dt, {3, 3}), HostTensor(kI32, {})};
  cases.push_back(OpCase("not square").in(random(dt, {3, 2}, 9)).error(kBad, outs, {"linalg_eigh", "square", "[3, 2]"}));
  return cases;
}

std::vector<HostTensor> eigh_ref(const OpCase& c) {
  const HostTensor& a = c.input(0);
  const int64_t n = a.size(-1), batch = batch_count(a.shape);
  const bool vectors = c.attr_bool("compute_v", true);
  HostTensor w(a.dtype, batch_dims(a.shape, 1)), v(a.dtype, vectors ? a.shape : Shape{0}), info(kI32, batch_dims(a.shape));
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<long double> ev = jacobi_eigenvalues(symmetric_from(matrix(a, b), c.attr_bool("upper", false)));
    for (int64_t i = 0; i < n; ++i) w.values[b * n + i] = static_cast<double>(ev[i]);
  }
  return {w, v, info};
}
HAL_CONFORMANCE_SUITE(linalg_eigh, eigh_cases, eigh_ref);

// ---- linalg_svd --------------------------------------------------------------------

// Singular values (descending) of A: one-sided Jacobi on its columns.
std::vector<long double> jacobi_singular_values(Mat a) {
  if (!a.empty() && a.size() < a[0].size()) a = transpose(a);  // more rows than columns
  const size_t m = a.size(), n = m ? a[0].size() : 0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (size_t p = 0; p < n; ++p)
      for (size_t q = p + 1; q < n; ++q) {
        long double alpha = 0, beta = 0, gamma = 0;
        for (size_t i = 0; i < m; ++i) {
          alpha += a[i][p] * a[i][p];
          beta += a[i][q] * a[i][q];
          gamma += a[i][p] * a[i][q];
        }
        if (std::fabs(gamma) <= 1e-30L * std::sqrt(alpha * beta) || gamma == 0) continue;
        rotated = true;
        const long double zeta = (beta - alpha) / (2 * gamma);
        const long double t = (zeta >= 0 ? 1 : -1) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        const long double cs = 1 / std::sqrt(1 + t * t), sn = cs * t;
        for (size_t i = 0; i < m; ++i) {
          const long double x = a[i][p], y = a[i][q];
          a[i][p] = cs * x - sn * y;
          a[i][q] = sn * x + cs * y;
        }
      }
    if (!rotated) break;
  }
  std::vector<long double> s(n);
  for (size_t j = 0; j < n; ++j) {
    long double sum = 0;
    for (size_t i = 0; i < m; ++i) sum += a[i][j] * a[i][j];
    s[j] = std::sqrt(sum);
  }
  std::sort(s.rbegin(), s.rend());
  return s;
}

std::string svd_check(const OpCase& c, const std::vector<HostTensor>& e, const std::vector<HostTensor>& got) {
  const HostTensor& a = c.input(0);
  const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n), batch = batch_count(a.shape);
  const bool uv = c.attr_bool("compute_uv", true);
  const double tol = eps(a.dtype) * std::max<int64_t>(std::max(m, n), 4);
  for (int64_t b = 0; b < batch; ++b) {
    const Mat am = matrix(a, b);
    const long double scale = std::max<long double>(max_abs(am), 1) * tol;
    for (int64_t i = 0; i < k; ++i)
      if (!(std::fabs(got[1].values[b * k + i] - e[1].values[b * k + i]) <= scale))
        return "singular value " + std::to_string(i) + " of matrix " + std::to_string(b) + ": " +
               std::to_string(got[1].values[b * k + i]) + " vs " + std::to_string(e[1].values[b * k + i]);
    if (got[3].values[b] != 0) return "info of matrix " + std::to_string(b) + " is " + std::to_string(got[3].values[b]);
    if (!uv) continue;
    const Mat u = matrix(got[0], b), vh = matrix(got[2], b);
    if (std::string why = orthonormal("U", u, false, tol, b); !why.empty()) return why;
    if (std::string why = orthonormal("Vh", vh, true, tol, b); !why.empty()) return why;
    Mat us(m, std::vector<long double>(n, 0));  // U[:, :k]·diag(S)·Vh[:k, :]
    for (int64_t i = 0; i < m; ++i)
      for (int64_t l = 0; l < k; ++l)
        for (int64_t j = 0; j < n; ++j) us[i][j] += u[i][l] * got[1].values[b * k + l] * vh[l][j];
    if (std::string why = near("U·diag(S)·Vh vs A", us, am, scale, b); !why.empty()) return why;
  }
  return "";
}

std::vector<OpCase> svd_cases(hal_dtype_e dt) {
  auto full = [](bool f) { return Attr::b("full_matrices", f); };
  std::vector<OpCase> cases = {
      OpCase("[4, 4]").in(random(dt, {4, 4}, 1)),
      OpCase("tall [6, 3]").in(random(dt, {6, 3}, 2)),
      OpCase("wide [2, 5]").in(random(dt, {2, 5}, 3)),
      OpCase("reduced tall [7, 3]").in(random(dt, {7, 3}, 4)).attr(full(false)),
      OpCase("reduced wide [3, 6]").in(random(dt, {3, 6}, 5)).attr(full(false)),
      OpCase("batch [2, 2, 4, 3]").in(random(dt, {2, 2, 4, 3}, 6)),
      OpCase("values only").in(random(dt, {3, 5, 4}, 7)).attr(Attr::b("compute_uv", false)),
      OpCase("rank deficient").in(HostTensor(dt, {3, 3}, {1, 2, 3, 2, 4, 6, 1, 0, 1})),
      OpCase("[30, 20]").in(random(dt, {30, 20}, 8)),
      OpCase("[1, 1]").in(random(dt, {1, 1}, 9)),
  };
  for (OpCase& c : cases) c.custom_check = svd_check;
  // An empty matrix: S is empty, the full factors are identities (compared directly).
  cases.push_back(OpCase("zero columns [3, 0]").in(HostTensor(dt, {3, 0})));
  const std::vector<HostTensor> outs = {HostTensor(dt, {3, 3}), HostTensor(dt, {3}), HostTensor(dt, {3, 3}),
                                        HostTensor(kI32, {})};
  cases.push_back(OpCase("rank 1").in(random(dt, {3}, 10)).error(kBad, outs, {"linalg_svd", "rank >= 2", "[3]"}));
  return cases;
}

std::vector<HostTensor> svd_ref(const OpCase& c) {
  const HostTensor& a = c.input(0);
  const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n), batch = batch_count(a.shape);
  const bool uv = c.attr_bool("compute_uv", true), full = c.attr_bool("full_matrices", true);
  const Shape bd = batch_dims(a.shape);
  HostTensor u(a.dtype, uv ? with_tail(bd, {m, full ? m : k}) : Shape{0}), s(a.dtype, with_tail(bd, {k}));
  HostTensor vh(a.dtype, uv ? with_tail(bd, {full ? n : k, n}) : Shape{0}), info(kI32, bd);
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<long double> sv = jacobi_singular_values(matrix(a, b));
    for (int64_t i = 0; i < k; ++i) s.values[b * k + i] = static_cast<double>(sv[i]);
    if (k == 0 && uv) {  // identities, as the catalog says for empty matrices
      if (full) put(u, b, eye(static_cast<size_t>(m)));
      if (full) put(vh, b, eye(static_cast<size_t>(n)));
    }
  }
  return {u, s, vh, info};
}
HAL_CONFORMANCE_SUITE(linalg_svd, svd_cases, svd_ref);

// ---- linalg_qr ---------------------------------------------------------------------

std::string qr_check(const OpCase& c, const std::vector<HostTensor>& e, const std::vector<HostTensor>& got) {
  const HostTensor& a = c.input(0);
  const int64_t m = a.size(-2), n = a.size(-1), batch = batch_count(a.shape);
  const std::string mode = c.attr_string("mode", "reduced");
  const double tol = eps(a.dtype) * std::max<int64_t>(std::max(m, n), 4);
  for (int64_t b = 0; b < batch; ++b) {
    const Mat am = matrix(a, b), r = matrix(got[1], b), er = matrix(e[1], b);
    const long double scale = std::max<long double>(max_abs(am), 1) * tol;
    for (size_t i = 0; i < r.size(); ++i)
      for (size_t j = 0; j < r[i].size(); ++j) {
        if (j < i && r[i][j] != 0) return "R is not upper triangular at " + where(b, i, j);
        if (!(std::fabs(std::fabs(r[i][j]) - std::fabs(er[i][j])) <= scale))
          return "|R| differs from the reference at " + where(b, i, j) + ": " + std::to_string(double(r[i][j])) +
                 " vs ±" + std::to_string(double(er[i][j]));
      }
    if (mode == "r") continue;
    const Mat q = matrix(got[0], b);
    if (std::string why = orthonormal("Q", q, false, tol, b); !why.empty()) return why;
    if (std::string why = near("Q·R vs A", product(q, r), am, scale, b); !why.empty()) return why;
  }
  return "";
}

std::vector<OpCase> qr_cases(hal_dtype_e dt) {
  auto mode = [](const char* m) { return Attr::s("mode", m); };
  std::vector<OpCase> cases = {
      OpCase("[4, 4]").in(random(dt, {4, 4}, 1)),
      OpCase("tall [6, 3]").in(random(dt, {6, 3}, 2)),
      OpCase("wide [3, 5]").in(random(dt, {3, 5}, 3)),
      OpCase("complete tall [5, 2]").in(random(dt, {5, 2}, 4)).attr(mode("complete")),
      OpCase("complete wide [2, 4]").in(random(dt, {2, 4}, 5)).attr(mode("complete")),
      OpCase("r only [5, 3]").in(random(dt, {5, 3}, 6)).attr(mode("r")),
      OpCase("batch [2, 3, 4, 3]").in(random(dt, {2, 3, 4, 3}, 7)),
      OpCase("[25, 25]").in(random(dt, {25, 25}, 8)),
  };
  for (OpCase& c : cases) c.custom_check = qr_check;
  cases.push_back(OpCase("complete, zero columns [3, 0]").in(HostTensor(dt, {3, 0})).attr(mode("complete")));
  const std::vector<HostTensor> outs = {HostTensor(dt, {3, 3}), HostTensor(dt, {3, 3})};
  cases.push_back(OpCase("rank 1").in(random(dt, {3}, 10)).error(kBad, outs, {"linalg_qr", "rank >= 2", "[3]"}));
  cases.push_back(OpCase("unknown mode").in(random(dt, {3, 3}, 11)).attr(mode("economic")).error(kBad, outs, {"linalg_qr", "economic"}));
  return cases;
}

std::vector<HostTensor> qr_ref(const OpCase& c) {
  const HostTensor& a = c.input(0);
  const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n), batch = batch_count(a.shape);
  const std::string mode = c.attr_string("mode", "reduced");
  const bool complete = mode == "complete";
  const Shape bd = batch_dims(a.shape);
  HostTensor q(a.dtype, mode == "r" ? Shape{0} : with_tail(bd, {m, complete ? m : k}));
  HostTensor r(a.dtype, with_tail(bd, {complete ? m : k, n}));
  for (int64_t b = 0; b < batch; ++b) {
    // Modified Gram–Schmidt on the columns: R[i, j] = q_i · a_j (full column rank inputs).
    Mat am = matrix(a, b), rm(static_cast<size_t>(complete ? m : k), std::vector<long double>(n, 0));
    Mat qs(static_cast<size_t>(k), std::vector<long double>(m, 0));
    for (int64_t j = 0; j < n; ++j) {
      std::vector<long double> v(m);
      for (int64_t i = 0; i < m; ++i) v[i] = am[i][j];
      for (int64_t i = 0; i < std::min(j, k); ++i) {
        long double d = 0;
        for (int64_t l = 0; l < m; ++l) d += qs[i][l] * v[l];
        rm[i][j] = d;
        for (int64_t l = 0; l < m; ++l) v[l] -= d * qs[i][l];
      }
      if (j < k) {
        long double norm = 0;
        for (long double x : v) norm += x * x;
        norm = std::sqrt(norm);
        rm[j][j] = norm;
        for (int64_t l = 0; l < m; ++l) qs[j][l] = norm > 0 ? v[l] / norm : 0;
      }
    }
    put(r, b, rm);
    if (k == 0 && complete) put(q, b, eye(static_cast<size_t>(m)));
  }
  return {q, r};
}
HAL_CONFORMANCE_SUITE(linalg_qr, qr_cases, qr_ref);

}  // namespace
}  // namespace hal::conformance
