// CPU kernels of the "factorization" group (sdk/catalog/ops/factorization.toml)
// on OpenBLAS's LAPACK: each matrix of the batch is copied into a
// column-major buffer (LAPACK's layout, whatever the tensor's strides), run
// through the routine PyTorch's CPU backend uses for the same op (potrf,
// getrf, trsm, syevd, gesdd, geqrf + orgqr) and copied back. Matrices of a
// batch run in parallel; each task owns its buffers.
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "hal/sdk/kernel/batch.hpp"
#include "random_layout.hpp"

// LAPACK's Fortran interface (OpenBLAS exports it; Debian's openblas headers
// carry only CBLAS). Character arguments take gfortran's hidden lengths.
extern "C" {
using hal_flen = size_t;
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, hal_flen);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, hal_flen);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void strsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m, const int* n,
            const float* alpha, const float* a, const int* lda, float* b, const int* ldb, hal_flen, hal_flen, hal_flen,
            hal_flen);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m, const int* n,
            const double* alpha, const double* a, const int* lda, double* b, const int* ldb, hal_flen, hal_flen,
            hal_flen, hal_flen);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, hal_flen, hal_flen);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, hal_flen, hal_flen);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u,
             const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info, hal_flen);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info,
             hal_flen);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork,
             int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
}

namespace hal::cpu {
namespace {

namespace op = sdk::op;

// The s/d routine for T.
template <class T>
struct Lapack;

#define HAL_LAPACK_ROUTINES(T, P)                                                                                    \
  template <>                                                                                                        \
  struct Lapack<T> {                                                                                                 \
    static void potrf(char uplo, int n, T* a, int lda, int* info) { P##potrf_(&uplo, &n, a, &lda, info, 1); }        \
    static void getrf(int m, int n, T* a, int lda, int* ipiv, int* info) { P##getrf_(&m, &n, a, &lda, ipiv, info); } \
    static void trsm(char side, char uplo, char diag, int m, int n, const T* a, int lda, T* b, int ldb) {            \
      const T one = 1;                                                                                               \
      const char trans = 'N';                                                                                        \
      P##trsm_(&side, &uplo, &trans, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);                             \
    }                                                                                                                \
    static void syevd(char jobz, char uplo, int n, T* a, int lda, T* w, T* work, int lwork, int* iwork, int liwork,  \
                      int* info) {                                                                                   \
      P##syevd_(&jobz, &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, info, 1, 1);                             \
    }                                                                                                                \
    static void gesdd(char jobz, int m, int n, T* a, int lda, T* s, T* u, int ldu, T* vt, int ldvt, T* work,         \
                      int lwork, int* iwork, int* info) {                                                            \
      P##gesdd_(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info, 1);                        \
    }                                                                                                                \
    static void geqrf(int m, int n, T* a, int lda, T* tau, T* work, int lwork, int* info) {                          \
      P##geqrf_(&m, &n, a, &lda, tau, work, &lwork, info);                                                           \
    }                                                                                                                \
    static void orgqr(int m, int n, int k, T* a, int lda, const T* tau, T* work, int lwork, int* info) {             \
      P##orgqr_(&m, &n, &k, a, &lda, tau, work, &lwork, info);                                                       \
    }                                                                                                                \
  };
HAL_LAPACK_ROUTINES(float, s)
HAL_LAPACK_ROUTINES(double, d)
#undef HAL_LAPACK_ROUTINES

// LAPACK counts in int: a matrix dim beyond it (or a matrix whose elements
// overflow an int leading-dimension product) is refused before any work.
void require_lapack_size(const OpCall& c, int64_t rows, int64_t cols) {
  if (rows > INT_MAX || cols > INT_MAX || rows * cols > INT_MAX)
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, c.name(), ": a ", rows, "x", cols,
              " matrix exceeds LAPACK's 32-bit sizes (at most 2^31 - 1 elements)");
}

int lead(int64_t rows) { return static_cast<int>(std::max<int64_t>(rows, 1)); }

using sdk::kernel::matrix_batch;

// Row-major [rows, cols] at SRC -> column-major at DST (leading dim rows).
template <class T>
void to_columns(const T* src, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i + j * rows] = src[i * cols + j];
}

// Column-major [rows, cols] at SRC (leading dim LD) -> row-major at DST.
template <class T>
void from_columns(const T* src, int64_t ld, int64_t rows, int64_t cols, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i + j * ld];
}

template <class T>
void identity(T* dst, int64_t n) {
  std::fill(dst, dst + n * n, T(0));
  for (int64_t i = 0; i < n; ++i) dst[i * n + i] = T(1);
}

// Input 0 of a call as a contiguous row-major array of T (a copy when its
// strides or offset need one).
template <class T>
struct Factor {
  explicit Factor(const OpCall& call) : c(call) { a = contiguous_as<T>(c.input(0), c.input(0).dtype, tmp, storage); }
  const OpCall& c;
  Tensor tmp;
  std::vector<unsigned char> storage;
  const T* a = nullptr;
};

// Calls FN(lo, hi) over the batch of B matrices costing ~FLOPS each.
template <class Fn>
void for_matrices(int64_t b, double flops, Fn&& fn) {
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(2e5 / std::max(flops, 1.0)));
  parallel_for(b, grain, fn);
}

// Defines kernel NAME running TYPED<float> or TYPED<double> by input 0's dtype.
#define HAL_FACTOR_KERNEL(NAME, TYPED)                                                 \
  void NAME##_body(const OpCall& c) {                                                  \
    if (c.input(0).dtype == HAL_DTYPE_FLOAT64) TYPED<double>(c); else TYPED<float>(c); \
  }                                                                                    \
  HAL_CPU_KERNEL(NAME, NAME##_body)

// ---- linalg_cholesky ------------------------------------------------------------

template <class T>
void cholesky_typed(const OpCall& c) {
  Factor<T> f(c);
  const Tensor& a = c.input(0);
  const int64_t n = a.shape[a.rank - 1], batch = matrix_batch(a);
  require_lapack_size(c, n, n);
  const bool upper = op::linalg_cholesky::upper(c);
  ContiguousOut<T> l(c.output(0));
  ContiguousOut<int32_t> info(c.output(1));
  for_matrices(batch, double(n) * n * n / 3, [&](int64_t lo, int64_t hi) {
    std::vector<T> col(static_cast<size_t>(n * n));
    for (int64_t b = lo; b < hi; ++b) {
      to_columns(f.a + b * n * n, n, n, col.data());
      int inf = 0;
      if (n > 0) Lapack<T>::potrf(upper ? 'U' : 'L', static_cast<int>(n), col.data(), lead(n), &inf);
      T* out = l.data() + b * n * n;
      from_columns(col.data(), n, n, n, out);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          if (upper ? j < i : j > i) out[i * n + j] = T(0);
      info.data()[b] = inf;
    }
  });
  l.finish();
  info.finish();
}

HAL_FACTOR_KERNEL(cholesky_kernel, cholesky_typed)

// ---- linalg_lu_factor -----------------------------------------------------------

template <class T>
void lu_factor_typed(const OpCall& c) {
  Factor<T> f(c);
  const Tensor& a = c.input(0);
  const int64_t m = a.shape[a.rank - 2], n = a.shape[a.rank - 1], k = std::min(m, n), batch = matrix_batch(a);
  require_lapack_size(c, m, n);
  ContiguousOut<T> lu(c.output(0));
  ContiguousOut<int32_t> piv(c.output(1)), info(c.output(2));
  for_matrices(batch, double(m) * n * k, [&](int64_t lo, int64_t hi) {
    std::vector<T> col(static_cast<size_t>(m * n));
    std::vector<int> ipiv(static_cast<size_t>(std::max<int64_t>(k, 1)));
    for (int64_t b = lo; b < hi; ++b) {
      to_columns(f.a + b * m * n, m, n, col.data());
      int inf = 0;
      if (k > 0) Lapack<T>::getrf(static_cast<int>(m), static_cast<int>(n), col.data(), lead(m), ipiv.data(), &inf);
      from_columns(col.data(), m, m, n, lu.data() + b * m * n);
      std::copy(ipiv.begin(), ipiv.begin() + k, piv.data() + b * k);
      info.data()[b] = inf;
    }
  });
  lu.finish();
  piv.finish();
  info.finish();
}

HAL_FACTOR_KERNEL(lu_factor_kernel, lu_factor_typed)

// ---- linalg_solve_triangular ----------------------------------------------------

// The element offset of matrix B of OUT's batch in the dense T (STRIDES from
// broadcast_batch_strides, in matrices).
int64_t broadcast_matrix_offset(const Tensor& t, const std::vector<int64_t>& strides, const Tensor& out, int64_t b) {
  int64_t matrix = 0;
  for (int d = out.rank - 3; d >= 0; --d) {
    matrix += (b % out.shape[d]) * strides[static_cast<size_t>(d)];
    b /= out.shape[d];
  }
  return matrix * t.shape[t.rank - 1] * t.shape[t.rank - 2];
}

template <class T>
void solve_triangular_typed(const OpCall& c) {
  Factor<T> f(c);
  Tensor tmp_b;
  std::vector<unsigned char> storage_b;
  const T* bp = contiguous_as<T>(c.input(1), c.input(1).dtype, tmp_b, storage_b);
  const Tensor &a = c.input(0), &bt = c.input(1), &x = c.output(0);
  const int64_t n = a.shape[a.rank - 1], rows = x.shape[x.rank - 2], cols = x.shape[x.rank - 1];
  const int64_t batch = matrix_batch(x);
  require_lapack_size(c, n, n);
  require_lapack_size(c, rows, cols);
  const bool upper = op::linalg_solve_triangular::upper(c), left = op::linalg_solve_triangular::left(c);
  const bool unit = op::linalg_solve_triangular::unitriangular(c);
  const std::vector<int64_t> a_strides = sdk::kernel::broadcast_batch_strides(a, x),
                             b_strides = sdk::kernel::broadcast_batch_strides(bt, x);
  ContiguousOut<T> out(x);
  for_matrices(batch, double(n) * n * (left ? cols : rows), [&](int64_t lo, int64_t hi) {
    std::vector<T> ca(static_cast<size_t>(n * n)), cb(static_cast<size_t>(rows * cols));
    for (int64_t b = lo; b < hi; ++b) {
      to_columns(f.a + broadcast_matrix_offset(a, a_strides, x, b), n, n, ca.data());
      to_columns(bp + broadcast_matrix_offset(bt, b_strides, x, b), rows, cols, cb.data());
      if (rows > 0 && cols > 0)
        Lapack<T>::trsm(left ? 'L' : 'R', upper ? 'U' : 'L', unit ? 'U' : 'N', static_cast<int>(rows),
                        static_cast<int>(cols), ca.data(), lead(n), cb.data(), lead(rows));
      from_columns(cb.data(), rows, rows, cols, out.data() + b * rows * cols);
    }
  });
  out.finish();
}

HAL_FACTOR_KERNEL(solve_triangular_kernel, solve_triangular_typed)

// ---- linalg_eigh ----------------------------------------------------------------

template <class T>
void eigh_typed(const OpCall& c) {
  Factor<T> f(c);
  const Tensor& a = c.input(0);
  const int64_t n = a.shape[a.rank - 1], batch = matrix_batch(a);
  require_lapack_size(c, n, n);
  const bool vectors = op::linalg_eigh::compute_v(c);
  const char jobz = vectors ? 'V' : 'N', uplo = op::linalg_eigh::upper(c) ? 'U' : 'L';
  ContiguousOut<T> w(c.output(0)), v(c.output(1));
  ContiguousOut<int32_t> info(c.output(2));
  // The workspace sizes syevd asks for (one query serves every matrix).
  int lwork = 1, liwork = 1;
  if (n > 0) {
    T wq = 0, dummy = 0;
    int iq = 0, inf = 0;
    Lapack<T>::syevd(jobz, uplo, static_cast<int>(n), &dummy, lead(n), &dummy, &wq, -1, &iq, -1, &inf);
    lwork = std::max(1, static_cast<int>(wq));
    liwork = std::max(1, iq);
  }
  for_matrices(batch, 9.0 * n * n * n, [&](int64_t lo, int64_t hi) {
    std::vector<T> col(static_cast<size_t>(n * n)), work(static_cast<size_t>(lwork));
    std::vector<int> iwork(static_cast<size_t>(liwork));
    for (int64_t b = lo; b < hi; ++b) {
      to_columns(f.a + b * n * n, n, n, col.data());
      int inf = 0;
      if (n > 0)
        Lapack<T>::syevd(jobz, uplo, static_cast<int>(n), col.data(), lead(n), w.data() + b * n, work.data(), lwork,
                         iwork.data(), liwork, &inf);
      if (vectors) from_columns(col.data(), n, n, n, v.data() + b * n * n);
      info.data()[b] = inf;
    }
  });
  w.finish();
  v.finish();
  info.finish();
}

HAL_FACTOR_KERNEL(eigh_kernel, eigh_typed)

// ---- linalg_svd -----------------------------------------------------------------

template <class T>
void svd_typed(const OpCall& c) {
  Factor<T> f(c);
  const Tensor& a = c.input(0);
  const int64_t m = a.shape[a.rank - 2], n = a.shape[a.rank - 1], k = std::min(m, n), batch = matrix_batch(a);
  require_lapack_size(c, m, n);
  require_lapack_size(c, std::max(m, n), std::max(m, n));
  const bool uv = op::linalg_svd::compute_uv(c), full = op::linalg_svd::full_matrices(c);
  const char jobz = !uv ? 'N' : full ? 'A' : 'S';
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  ContiguousOut<T> u(c.output(0)), s(c.output(1)), vh(c.output(2));
  ContiguousOut<int32_t> info(c.output(3));
  int lwork = 1;
  if (k > 0) {
    T wq = 0, dummy = 0;
    int inf = 0, iq = 0;
    Lapack<T>::gesdd(jobz, static_cast<int>(m), static_cast<int>(n), &dummy, lead(m), &dummy, &dummy, lead(m),
                     &dummy, lead(vrows), &wq, -1, &iq, &inf);
    lwork = std::max(1, static_cast<int>(wq));
  }
  for_matrices(batch, 12.0 * m * n * k, [&](int64_t lo, int64_t hi) {
    std::vector<T> col(static_cast<size_t>(m * n)), cu(static_cast<size_t>(uv ? m * ucols : 1)),
        cv(static_cast<size_t>(uv ? vrows * n : 1)), work(static_cast<size_t>(lwork));
    std::vector<int> iwork(static_cast<size_t>(std::max<int64_t>(8 * k, 1)));
    for (int64_t b = lo; b < hi; ++b) {
      int inf = 0;
      if (k > 0) {
        to_columns(f.a + b * m * n, m, n, col.data());
        Lapack<T>::gesdd(jobz, static_cast<int>(m), static_cast<int>(n), col.data(), lead(m), s.data() + b * k,
                         cu.data(), lead(m), cv.data(), lead(vrows), work.data(), lwork, iwork.data(), &inf);
        if (uv) {
          from_columns(cu.data(), m, m, ucols, u.data() + b * m * ucols);
          from_columns(cv.data(), vrows, vrows, n, vh.data() + b * vrows * n);
        }
      } else if (uv) {  // an empty matrix: the full factors are identities, as PyTorch's
        identity(u.data() + b * m * ucols, ucols == m ? m : 0);
        identity(vh.data() + b * vrows * n, vrows == n ? n : 0);
      }
      info.data()[b] = inf;
    }
  });
  u.finish();
  s.finish();
  vh.finish();
  info.finish();
}

HAL_FACTOR_KERNEL(svd_kernel, svd_typed)

// ---- linalg_qr ------------------------------------------------------------------

template <class T>
void qr_typed(const OpCall& c) {
  Factor<T> f(c);
  const Tensor& a = c.input(0);
  const int64_t m = a.shape[a.rank - 2], n = a.shape[a.rank - 1], k = std::min(m, n), batch = matrix_batch(a);
  require_lapack_size(c, m, std::max(m, n));
  const std::string& mode = op::linalg_qr::mode(c);
  const bool want_q = mode != "r", complete = mode == "complete";
  const int64_t qcols = complete ? m : k, rrows = complete ? m : k;
  ContiguousOut<T> q(c.output(0)), r(c.output(1));
  int lwork = 1;
  if (k > 0) {
    T wq = 0, dummy = 0;
    int inf = 0;
    Lapack<T>::geqrf(static_cast<int>(m), static_cast<int>(n), &dummy, lead(m), &dummy, &wq, -1, &inf);
    lwork = std::max(lwork, static_cast<int>(wq));
    if (want_q) {
      Lapack<T>::orgqr(static_cast<int>(m), static_cast<int>(qcols), static_cast<int>(k), &dummy, lead(m), &dummy,
                       &wq, -1, &inf);
      lwork = std::max(lwork, static_cast<int>(wq));
    }
  }
  for_matrices(batch, 4.0 * m * n * k, [&](int64_t lo, int64_t hi) {
    // Room for complete Q's m columns when m > n.
    std::vector<T> col(static_cast<size_t>(m * std::max(n, qcols))), tau(static_cast<size_t>(std::max<int64_t>(k, 1))),
        work(static_cast<size_t>(lwork));
    for (int64_t b = lo; b < hi; ++b) {
      to_columns(f.a + b * m * n, m, n, col.data());
      int inf = 0;
      if (k > 0) Lapack<T>::geqrf(static_cast<int>(m), static_cast<int>(n), col.data(), lead(m), tau.data(),
                                  work.data(), lwork, &inf);
      T* rout = r.data() + b * rrows * n;
      for (int64_t i = 0; i < rrows; ++i)
        for (int64_t j = 0; j < n; ++j) rout[i * n + j] = j >= i ? col[i + j * m] : T(0);
      if (!want_q) continue;
      if (k > 0) {
        Lapack<T>::orgqr(static_cast<int>(m), static_cast<int>(qcols), static_cast<int>(k), col.data(), lead(m),
                         tau.data(), work.data(), lwork, &inf);
        from_columns(col.data(), m, m, qcols, q.data() + b * m * qcols);
      } else {
        identity(q.data() + b * m * qcols, qcols == m ? m : 0);
      }
    }
  });
  q.finish();
  r.finish();
}

HAL_FACTOR_KERNEL(qr_kernel, qr_typed)

#undef HAL_FACTOR_KERNEL

}  // namespace

void register_factorization_ops(sdk::OpRegistry& ops) {
  ops.add<op::linalg_cholesky>(&cholesky_kernel);
  ops.add<op::linalg_lu_factor>(&lu_factor_kernel);
  ops.add<op::linalg_solve_triangular>(&solve_triangular_kernel);
  ops.add<op::linalg_eigh>(&eigh_kernel);
  ops.add<op::linalg_svd>(&svd_kernel);
  ops.add<op::linalg_qr>(&qr_kernel);
}

}  // namespace hal::cpu
