// hal-conformance: the "nn" ops — cases and double-precision references.
// References are plain loops over row-major values: statistics computed in
// two passes, softmax via the max-shifted sum, losses from their textbook
// definitions (PyTorch's, including its mean and label-smoothing rules).
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

using Attr = hal::Attr;

// ---- layout helpers ---------------------------------------------------------------

// A tensor viewed as [outer, n, inner] around DIM.
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t at(int64_t o, int64_t j, int64_t i) const { return (o * n + j) * inner + i; }
};
Split split_at(const std::vector<int64_t>& shape, int dim) {
  Split s;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) (d < dim ? s.outer : d == dim ? s.n : s.inner) *= shape[d];
  return s;
}
int wrap_dim(int64_t dim, size_t rank) { return rank == 0 ? 0 : static_cast<int>(dim < 0 ? dim + static_cast<int64_t>(rank) : dim); }


HostTensor positive(hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  return random(dt, std::move(shape), seed, 0.5, 2.0);
}
HostTensor classes(std::vector<int64_t> shape, int64_t c, uint64_t seed) {
  return random(HAL_DTYPE_INT64, std::move(shape), seed, 0, static_cast<double>(c));
}

std::string reduction(const OpCase& c) { return c.attr_string("reduction", "mean"); }
// Reduces per-element LOSS (of SHAPE) as the case asks; DENOM for mean.
HostTensor reduce(hal_dtype_e dt, const std::vector<int64_t>& shape, const std::vector<double>& loss, const std::string& r,
                  double denom) {
  if (r == "none") return HostTensor(dt, shape, loss);
  double s = 0;
  for (double v : loss) s += v;
  return HostTensor(dt, {}, {r == "sum" ? s : s / denom});
}
// The upstream gradient of element I of a loss reduced by R over COUNT elements.
double upstream(const HostTensor& g, int64_t i, const std::string& r, double denom) {
  if (r == "none") return g.values[i];
  return r == "sum" ? g.values[0] : g.values[0] / denom;
}

// ---- softmax ----------------------------------------------------------------------------

// PyTorch's softmax: a row's maximum propagates NaN, then everything is
// shifted by it. So a NaN anywhere makes the whole row NaN, a +inf makes it
// NaN too (inf - inf), an all -inf row is NaN (-inf - -inf), and a -inf among
// finite values gives 0 (log_softmax: -inf). Huge values are safe: only
// e^(x - max) <= 1 is ever formed.
std::vector<HostTensor> softmax_impl(const OpCase& c, bool log) {
  const HostTensor& x = c.input(0);
  Split s = split_at(x.shape, wrap_dim(c.attr_int("dim", 0), x.shape.size()));
  HostTensor y(x.dtype, x.shape);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      double m = -INFINITY, z = 0;
      for (int64_t j = 0; j < s.n; ++j) {
        double v = x.values[s.at(o, j, i)];
        m = std::isnan(v) || std::isnan(m) ? NAN : std::max(m, v);
      }
      for (int64_t j = 0; j < s.n; ++j) z += std::exp(x.values[s.at(o, j, i)] - m);
      for (int64_t j = 0; j < s.n; ++j) {
        double v = x.values[s.at(o, j, i)] - m;
        y.values[s.at(o, j, i)] = log ? v - std::log(z) : std::exp(v) / z;
      }
    }
  return {y};
}
std::vector<HostTensor> softmax_ref(const OpCase& c) { return softmax_impl(c, false); }
std::vector<HostTensor> log_softmax_ref(const OpCase& c) { return softmax_impl(c, true); }

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// T's rows as columns.
HostTensor transposed(const HostTensor& t) {
  HostTensor r(t.dtype, {t.shape[1], t.shape[0]});
  for (int64_t i = 0; i < t.shape[0]; ++i)
    for (int64_t j = 0; j < t.shape[1]; ++j) r.at({j, i}) = t.at({i, j});
  return r;
}

// T with the element at IDX set to V.
HostTensor with_value(HostTensor t, const std::vector<int64_t>& idx, double v) {
  t.at(idx) = round_to(t.dtype, v);
  return t;
}

// ROWS rows of N values in [-2, 2) (rounded to DT), each then given the
// special values SPECIAL lists as {row, column, value}.
HostTensor rows_with(hal_dtype_e dt, int64_t rows, int64_t n, uint64_t seed,
                     const std::vector<std::tuple<int64_t, int64_t, double>>& special) {
  HostTensor t = random(dt, {rows, n}, seed);
  for (const auto& [r, j, v] : special) t.at({r, j}) = round_to(dt, v);
  return t;
}

// Rows of 21 (more than one SIMD vector, so a special value lands in a
// vectorised body or in the remainder) holding NaN, infinities and huge
// values, with an ordinary row around them; PyTorch's answers are in
// softmax_impl's comment.
std::vector<OpCase> softmax_special_cases(hal_dtype_e dt) {
  const int64_t n = 21;
  auto row_of = [&](HostTensor& t, int64_t r, double v) {
    for (int64_t j = 0; j < n; ++j) t.at({r, j}) = round_to(dt, v);
  };
  HostTensor nan_rows = rows_with(dt, 4, n, 201, {{1, 3, kNaN}, {2, 19, kNaN}, {2, 0, -kInf}});
  HostTensor inf_rows = rows_with(dt, 4, n, 202, {{1, 5, kInf}, {2, 0, kInf}, {2, 20, kInf}, {3, 18, kInf}, {3, 2, -kInf}});
  HostTensor masked = rows_with(dt, 3, n, 203, {{0, 1, -kInf}, {0, 7, -kInf}, {0, 17, -kInf}, {0, 20, -kInf}});
  row_of(masked, 1, -kInf);
  masked.at({1, 11}) = 0.5;  // one finite value: 1 there, 0 elsewhere
  HostTensor all_masked = random(dt, {3, n}, 204);
  row_of(all_masked, 1, -kInf);
  // Huge magnitudes: e^x overflows (x > 88.7 in float32, > 11.1 in float16)
  // or underflows for every x of the row unless the maximum is subtracted.
  HostTensor large = random(dt, {4, n}, 205, -1e4, 1e4);
  for (int64_t j = 0; j < n; ++j) {
    large.at({1, j}) = round_to(dt, 80.0 + 1.0 * j);          // 80 .. 100, 88.7 among them
    large.at({2, j}) = round_to(dt, -1e4 - 16.0 * (j % 5));   // all far below e^x's range
    large.at({3, j}) = round_to(dt, 1e4 - 16.0 * (j % 7));    // all far above it
  }
  large.at({1, 9}) = round_to(dt, 88.7);
  // Every kind of row at once, as columns (the non-last-dim path).
  HostTensor mixed = random(dt, {6, n}, 206);
  mixed.at({0, 4}) = kNaN;
  mixed.at({1, 13}) = kInf;
  mixed.at({2, 2}) = -kInf;
  mixed.at({2, 20}) = -kInf;
  row_of(mixed, 3, -kInf);
  for (int64_t j = 0; j < n; ++j) mixed.at({4, j}) = round_to(dt, j % 2 ? 1e4 : -1e4);
  return {
      OpCase("NaN in a row: the row is NaN").in(nan_rows).attr(Attr::i("dim", 1)),
      OpCase("+inf in a row: the row is NaN").in(inf_rows).attr(Attr::i("dim", -1)),
      OpCase("-inf among finite values: 0 there").in(masked).attr(Attr::i("dim", 1)),
      OpCase("all -inf row: NaN").in(all_masked).attr(Attr::i("dim", 1)),
      OpCase("large magnitudes").in(large).attr(Attr::i("dim", 1)),
      OpCase("NaN, +inf, -inf, all -inf, large as columns, dim 0").in(transposed(mixed)).attr(Attr::i("dim", 0)),
      OpCase("0-d +inf: NaN").in(scalar(dt, kInf)).attr(Attr::i("dim", 0)),
      OpCase("0-d -inf: NaN").in(scalar(dt, -kInf)).attr(Attr::i("dim", 0)),
  };
}

std::vector<OpCase> softmax_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("[3, 5] dim -1").in(random(dt, {3, 5}, 1)).attr(Attr::i("dim", -1)),
      OpCase("[2, 4, 3] dim 1").in(random(dt, {2, 4, 3}, 2)).attr(Attr::i("dim", 1)),
      OpCase("[4, 3] dim 0").in(random(dt, {4, 3}, 3)).attr(Attr::i("dim", 0)),
      OpCase("[2, 300] dim 1, wide range").in(random(dt, {2, 300}, 4, -20, 20)).attr(Attr::i("dim", 1)),
      OpCase("0-d").in(random(dt, {}, 5)).attr(Attr::i("dim", 0)),
      OpCase("zero-size [0, 5]").in(random(dt, {0, 5}, 6)).attr(Attr::i("dim", 1)),
      OpCase("dim out of range").in(random(dt, {3, 5}, 7)).attr(Attr::i("dim", 2))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3, 5})}, {"'dim' = 2"}),
  };
  if (is_float(dt))
    for (OpCase& c : softmax_special_cases(dt)) cases.push_back(std::move(c));
  return cases;
}
HAL_CONFORMANCE_SUITE(softmax, softmax_cases, softmax_ref);
HAL_CONFORMANCE_SUITE(log_softmax, softmax_cases, log_softmax_ref);

std::vector<HostTensor> softmax_backward_impl(const OpCase& c, bool log) {
  const HostTensor& g = c.input(0);
  const HostTensor& y = c.input(1);
  Split s = split_at(g.shape, wrap_dim(c.attr_int("dim", 0), g.shape.size()));
  HostTensor gi(g.dtype, g.shape);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      double dot = 0;
      for (int64_t j = 0; j < s.n; ++j) dot += g.values[s.at(o, j, i)] * (log ? 1.0 : y.values[s.at(o, j, i)]);
      for (int64_t j = 0; j < s.n; ++j) {
        int64_t k = s.at(o, j, i);
        gi.values[k] = log ? g.values[k] - std::exp(y.values[k]) * dot : y.values[k] * (g.values[k] - dot);
      }
    }
  return {gi};
}
std::vector<HostTensor> softmax_backward_ref(const OpCase& c) { return softmax_backward_impl(c, false); }
std::vector<HostTensor> log_softmax_backward_ref(const OpCase& c) { return softmax_backward_impl(c, true); }

// PyTorch's backward formulas as they are: a NaN in grad_output makes the
// row NaN (through the row's sum); an entry the forward masked (output 0,
// log_softmax's -inf) gets gradient 0 (log_softmax: grad_output there).
std::vector<OpCase> softmax_backward_special_cases(hal_dtype_e dt, bool log, double lo, double hi) {
  HostTensor g = random(dt, {3, 21}, 21), y = random(dt, {3, 21}, 22, lo, hi);
  g.at({1, 3}) = kNaN;
  HostTensor gm = random(dt, {3, 21}, 23), ym = random(dt, {3, 21}, 24, lo, hi);
  for (auto [r, j] : {std::pair<int64_t, int64_t>{0, 1}, {0, 18}, {2, 0}, {2, 5}, {2, 20}}) ym.at({r, j}) = log ? -kInf : 0.0;
  return {
      OpCase("NaN in grad_output: the row is NaN").in(g).in(y).attr(Attr::i("dim", 1)),
      OpCase(log ? "output -inf (masked): grad_output there" : "output 0 (masked): 0 there").in(gm).in(ym)
          .attr(Attr::i("dim", -1)),
      OpCase("masked, as columns, dim 0").in(transposed(gm)).in(transposed(ym)).attr(Attr::i("dim", 0)),
  };
}

// The forward's output Y is drawn from [0, 1) (softmax) or [-4, 0) (log_softmax).
std::vector<OpCase> softmax_backward_cases(hal_dtype_e dt, bool log) {
  const double lo = log ? -4 : 0, hi = log ? 0 : 1;
  std::vector<OpCase> cases = {
      OpCase("[3, 5] dim 1").in(random(dt, {3, 5}, 11)).in(random(dt, {3, 5}, 12, lo, hi)).attr(Attr::i("dim", 1)),
      OpCase("[2, 4, 3] dim -2").in(random(dt, {2, 4, 3}, 13)).in(random(dt, {2, 4, 3}, 14, lo, hi)).attr(Attr::i("dim", -2)),
      OpCase("0-d").in(random(dt, {}, 15)).in(random(dt, {}, 16, lo, hi)).attr(Attr::i("dim", 0)),
      OpCase("zero-size").in(random(dt, {4, 0}, 17)).in(random(dt, {4, 0}, 18, lo, hi)).attr(Attr::i("dim", 0)),
      OpCase("output shape differs").in(random(dt, {3, 5}, 19)).in(random(dt, {5, 3}, 20, lo, hi)).attr(Attr::i("dim", 1))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3, 5})}, {"'output' has shape [5, 3]"}),
  };
  if (is_float(dt))
    for (OpCase& c : softmax_backward_special_cases(dt, log, lo, hi)) cases.push_back(std::move(c));
  return cases;
}
HAL_CONFORMANCE_SUITE(softmax_backward, [](hal_dtype_e dt) { return softmax_backward_cases(dt, false); },
                      softmax_backward_ref);
HAL_CONFORMANCE_SUITE(log_softmax_backward, [](hal_dtype_e dt) { return softmax_backward_cases(dt, true); },
                      log_softmax_backward_ref);

// ---- layer_norm / rms_norm ----------------------------------------------------------------

// Rows of D trailing elements.
struct NormRows {
  int64_t m = 1, d = 1;
  std::vector<int64_t> stat_shape;
};
NormRows norm_rows(const HostTensor& x, const std::vector<int64_t>& ns) {
  NormRows r;
  size_t axis = x.shape.size() - ns.size();
  for (size_t k = 0; k < x.shape.size(); ++k) {
    (k < axis ? r.m : r.d) *= x.shape[k];
    r.stat_shape.push_back(k < axis ? x.shape[k] : 1);
  }
  return r;
}
double param_at(const OpCase& c, size_t i, int64_t k, double def) { return c.has_input(i) ? c.input(i).values[k] : def; }

double default_eps(hal_dtype_e dt) {
  switch (dt) {
    case HAL_DTYPE_FLOAT16: return 0.0009765625;
    case HAL_DTYPE_BFLOAT16: return 0.0078125;
    case HAL_DTYPE_FLOAT64: return 2.220446049250313e-16;
    default: return 1.1920928955078125e-07;
  }
}

std::vector<HostTensor> norm_ref(const OpCase& c, bool rms) {
  const HostTensor& x = c.input(0);
  NormRows r = norm_rows(x, c.attr_ints("normalized_shape", {}));
  double eps = c.attr_float("eps", rms ? -1.0 : 1e-5);
  if (eps < 0) eps = default_eps(x.dtype);
  HostTensor y(x.dtype, x.shape), mean(x.dtype, r.stat_shape), rstd(x.dtype, r.stat_shape);
  for (int64_t i = 0; i < r.m; ++i) {
    double mu = 0, var = 0;
    for (int64_t k = 0; k < r.d; ++k) mu += rms ? 0.0 : x.values[i * r.d + k] / r.d;
    for (int64_t k = 0; k < r.d; ++k) var += std::pow(x.values[i * r.d + k] - mu, 2) / r.d;
    double rs = 1 / std::sqrt(var + eps);
    mean.values[i] = mu;
    rstd.values[i] = rs;
    for (int64_t k = 0; k < r.d; ++k)
      y.values[i * r.d + k] = (x.values[i * r.d + k] - mu) * rs * param_at(c, 1, k, 1) + (rms ? 0.0 : param_at(c, 2, k, 0));
  }
  if (rms) return {y, rstd};
  return {y, mean, rstd};
}

// NaN, infinities and large magnitudes, as PyTorch answers them: a NaN
// makes its row NaN (y, mean, rstd); an infinity makes layer_norm's row and
// rstd NaN (x - mean is inf - inf), while its mean is NaN or ±inf depending
// on where the infinity sits (PyTorch's Welford update), so not compared;
// rms_norm's rstd is 0 there and y is 0 but NaN at the infinity (inf · 0).
// Large values: layer_norm around an offset where E[x²] - E[x]² cancels
// away the variance, rms_norm with squares beyond float16's range (PyTorch
// computes in float).
std::vector<OpCase> norm_special_cases(hal_dtype_e dt, bool rms) {
  const int64_t n = 21;
  auto affine = [&](OpCase c, uint64_t seed) {
    c.in(random(dt, {n}, seed + 1));
    if (!rms) c.in(random(dt, {n}, seed + 2));
    return c.attr(Attr::ints("normalized_shape", {n}));
  };
  HostTensor x_nan = rows_with(dt, 3, n, 211, {{1, 4, kNaN}, {2, 19, kNaN}});
  HostTensor x_inf = rows_with(dt, 3, n, 213, {{0, 2, kInf}, {2, 17, -kInf}});
  OpCase inf = affine(OpCase(rms ? "infinities: 0, NaN at the infinity" : "infinities: the row is NaN").in(x_inf), 213);
  if (!rms) inf.cmp({Compare::kDefault, Compare::kSkip, Compare::kDefault});
  double offset = dt == HAL_DTYPE_FLOAT64 ? 1e6 : 1e3;
  HostTensor big = rms ? random(dt, {3, n}, 215, -1000, 1000) : random(dt, {3, n}, 215, offset, offset + 64);
  return {
      affine(OpCase("NaN in a row: the row is NaN").in(x_nan), 211),
      std::move(inf),
      affine(OpCase(rms ? "large magnitudes (squares beyond float16)" : "large offset (E[x^2] - E[x]^2 cancels)").in(big), 215),
  };
}

std::vector<OpCase> norm_cases(hal_dtype_e dt, bool rms) {
  auto affine = [&](OpCase c, std::vector<int64_t> ns, uint64_t seed) {
    c.in(random(dt, ns, seed + 1));
    if (!rms) c.in(random(dt, ns, seed + 2));
    return c.attr(Attr::ints("normalized_shape", ns));
  };
  std::vector<OpCase> cases = {
      affine(OpCase("[4, 6] over [6], affine").in(random(dt, {4, 6}, 21)), {6}, 21),
      affine(OpCase("[2, 3, 40] over [3, 40], affine, eps 0.1").in(random(dt, {2, 3, 40}, 22)).attr(Attr::f("eps", 0.1)), {3, 40}, 22),
      OpCase("[3, 5] over [5], no affine").in(random(dt, {3, 5}, 23)).attr(Attr::ints("normalized_shape", {5})),
      OpCase("[5] over [5], weight only").in(random(dt, {5}, 24)).in(random(dt, {5}, 25)).attr(Attr::ints("normalized_shape", {5})),
      OpCase("zero-size [0, 4]").in(random(dt, {0, 4}, 26)).attr(Attr::ints("normalized_shape", {4})),
      OpCase("normalized_shape not a suffix").in(random(dt, {3, 5}, 27)).attr(Attr::ints("normalized_shape", {3}))
          .error(HAL_STATUS_INVALID_ARGUMENT,
                 rms ? std::vector<HostTensor>{HostTensor(dt, {3, 5}), HostTensor(dt, {3, 1})}
                     : std::vector<HostTensor>{HostTensor(dt, {3, 5}), HostTensor(dt, {3, 1}), HostTensor(dt, {3, 1})},
                 {"'normalized_shape' = [3]", "[3, 5]"}),
      OpCase("weight of the wrong shape").in(random(dt, {3, 5}, 28)).in(random(dt, {4}, 29)).attr(Attr::ints("normalized_shape", {5}))
          .error(HAL_STATUS_INVALID_ARGUMENT,
                 rms ? std::vector<HostTensor>{HostTensor(dt, {3, 5}), HostTensor(dt, {3, 1})}
                     : std::vector<HostTensor>{HostTensor(dt, {3, 5}), HostTensor(dt, {3, 1}), HostTensor(dt, {3, 1})},
                 {"'weight' has shape [4]", "[5]"}),
  };
  if (is_float(dt))
    for (OpCase& c : norm_special_cases(dt, rms)) cases.push_back(std::move(c));
  return cases;
}
HAL_CONFORMANCE_SUITE(layer_norm, [](hal_dtype_e dt) { return norm_cases(dt, false); },
                      [](const OpCase& c) { return norm_ref(c, false); });
HAL_CONFORMANCE_SUITE(rms_norm, [](hal_dtype_e dt) { return norm_cases(dt, true); },
                      [](const OpCase& c) { return norm_ref(c, true); });

// layer_norm_backward (grad_out, input, mean, rstd, weight?) and
// rms_norm_backward (grad_out, input, rstd, weight?).
std::vector<HostTensor> norm_backward_ref(const OpCase& c, bool rms) {
  const HostTensor& g = c.input(0);
  const HostTensor& x = c.input(1);
  std::vector<int64_t> ns = c.attr_ints("normalized_shape", {});
  NormRows r = norm_rows(x, ns);
  size_t wi = rms ? 3 : 4;
  HostTensor gi(x.dtype, x.shape), gw(x.dtype, ns), gb(x.dtype, ns);
  for (int64_t i = 0; i < r.m; ++i) {
    double mu = rms ? 0.0 : c.input(2).values[i], rs = c.input(rms ? 2 : 3).values[i];
    double mean_g = 0, mean_gx = 0;
    for (int64_t k = 0; k < r.d; ++k) {
      double gk = g.values[i * r.d + k] * param_at(c, wi, k, 1), xhat = (x.values[i * r.d + k] - mu) * rs;
      mean_g += rms ? 0.0 : gk / r.d;
      mean_gx += gk * xhat / r.d;
      gw.values[k] += g.values[i * r.d + k] * xhat;
      gb.values[k] += g.values[i * r.d + k];
    }
    for (int64_t k = 0; k < r.d; ++k) {
      double gk = g.values[i * r.d + k] * param_at(c, wi, k, 1), xhat = (x.values[i * r.d + k] - mu) * rs;
      gi.values[i * r.d + k] = rs * (gk - mean_g - xhat * mean_gx);
    }
  }
  if (rms) return {gi, gw};
  return {gi, gw, gb};
}

std::vector<OpCase> norm_backward_cases(hal_dtype_e dt, bool rms) {
  auto make = [&](std::string name, std::vector<int64_t> shape, std::vector<int64_t> ns, bool weight, uint64_t seed) {
    std::vector<int64_t> stat = shape;
    for (size_t k = shape.size() - ns.size(); k < shape.size(); ++k) stat[k] = 1;
    OpCase c(std::move(name));
    c.in(random(dt, shape, seed)).in(random(dt, shape, seed + 1));
    if (!rms) c.in(random(dt, stat, seed + 2, -0.5, 0.5));
    c.in(positive(dt, stat, seed + 3));
    if (weight) c.in(random(dt, ns, seed + 4));
    return c.attr(Attr::ints("normalized_shape", ns));
  };
  OpCase bad = make("rstd of the wrong shape", {3, 4}, {4}, false, 36);
  bad.inputs[rms ? 2 : 3] = positive(dt, {4, 1}, 37);
  std::vector<HostTensor> outs = {HostTensor(dt, {3, 4}), HostTensor(dt, {4})};
  if (!rms) outs.push_back(HostTensor(dt, {4}));
  // A NaN in grad_output: its row of grad_input is NaN, and its column of
  // grad_weight and grad_bias (PyTorch's formulas as they are).
  OpCase nan = make("NaN in grad_output", {3, 21}, {21}, true, 38);
  nan.inputs[0]->at({1, 5}) = kNaN;
  return {
      std::move(nan),
      make("[4, 6] over [6], weight", {4, 6}, {6}, true, 31),
      make("[2, 3, 40] over [3, 40], weight", {2, 3, 40}, {3, 40}, true, 32).tol(4),
      make("[3, 5] over [5], no weight", {3, 5}, {5}, false, 33),
      make("zero-size [0, 4]", {0, 4}, {4}, true, 34),
      bad.error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'rstd' has shape [4, 1]", "[3, 1]"}),
  };
}
HAL_CONFORMANCE_SUITE(layer_norm_backward, [](hal_dtype_e dt) { return norm_backward_cases(dt, false); },
                      [](const OpCase& c) { return norm_backward_ref(c, false); });
HAL_CONFORMANCE_SUITE(rms_norm_backward, [](hal_dtype_e dt) { return norm_backward_cases(dt, true); },
                      [](const OpCase& c) { return norm_backward_ref(c, true); });

// ---- group_norm ----------------------------------------------------------------------------

// [N, C, HW] of an [N, C, *] shape.
struct Nchw {
  int64_t n, c, hw;
  int64_t at(int64_t i, int64_t ch, int64_t k) const { return (i * c + ch) * hw + k; }
};
Nchw nchw(const std::vector<int64_t>& shape) {
  Nchw s{shape[0], shape[1], 1};
  for (size_t d = 2; d < shape.size(); ++d) s.hw *= shape[d];
  return s;
}

std::vector<HostTensor> group_norm_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  Nchw s = nchw(x.shape);
  int64_t g = c.attr_int("num_groups", 1), cg = s.c / g;
  double eps = c.attr_float("eps", 1e-5);
  HostTensor y(x.dtype, x.shape), mean(x.dtype, {s.n, g}), rstd(x.dtype, {s.n, g});
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t gr = 0; gr < g; ++gr) {
      double mu = 0, var = 0, d = static_cast<double>(cg * s.hw);
      for (int64_t ch = gr * cg; ch < (gr + 1) * cg; ++ch)
        for (int64_t k = 0; k < s.hw; ++k) mu += x.values[s.at(i, ch, k)] / d;
      for (int64_t ch = gr * cg; ch < (gr + 1) * cg; ++ch)
        for (int64_t k = 0; k < s.hw; ++k) var += std::pow(x.values[s.at(i, ch, k)] - mu, 2) / d;
      double rs = 1 / std::sqrt(var + eps);
      mean.values[i * g + gr] = mu;
      rstd.values[i * g + gr] = rs;
      for (int64_t ch = gr * cg; ch < (gr + 1) * cg; ++ch)
        for (int64_t k = 0; k < s.hw; ++k)
          y.values[s.at(i, ch, k)] = (x.values[s.at(i, ch, k)] - mu) * rs * param_at(c, 1, ch, 1) + param_at(c, 2, ch, 0);
    }
  return {y, mean, rstd};
}

std::vector<OpCase> group_norm_cases(hal_dtype_e dt) {
  return {
      OpCase("[2, 4, 3] 2 groups, affine").in(random(dt, {2, 4, 3}, 41)).in(random(dt, {4}, 42)).in(random(dt, {4}, 43))
          .attr(Attr::i("num_groups", 2)),
      OpCase("[3, 6] 3 groups, eps 0.1").in(random(dt, {3, 6}, 44)).attr(Attr::i("num_groups", 3)).attr(Attr::f("eps", 0.1)),
      OpCase("[2, 4, 2, 5] 1 group, weight only").in(random(dt, {2, 4, 2, 5}, 45)).in(random(dt, {4}, 46))
          .attr(Attr::i("num_groups", 1)),
      OpCase("zero-size batch").in(random(dt, {0, 4, 3}, 47)).attr(Attr::i("num_groups", 2)),
      // PyTorch: the NaN's group (its outputs, mean and rstd) is NaN, the others are not.
      OpCase("NaN in one group").in(with_value(random(dt, {2, 4, 3}, 52), {0, 1, 2}, kNaN))
          .in(random(dt, {4}, 53)).in(random(dt, {4}, 54)).attr(Attr::i("num_groups", 2)),
      OpCase("num_groups does not divide C").in(random(dt, {2, 4, 3}, 48)).attr(Attr::i("num_groups", 3))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 4, 3}), HostTensor(dt, {2, 3}), HostTensor(dt, {2, 3})},
                 {"'num_groups' = 3"}),
      OpCase("bias not [C]").in(random(dt, {2, 4, 3}, 49)).in(random(dt, {4}, 50)).in(random(dt, {3}, 51))
          .attr(Attr::i("num_groups", 2))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 4, 3}), HostTensor(dt, {2, 2}), HostTensor(dt, {2, 2})},
                 {"'bias' has shape [3]"}),
  };
}
HAL_CONFORMANCE_SUITE(group_norm, group_norm_cases, group_norm_ref);

// (grad_out, input, mean, rstd, weight?) -> grad_input, grad_weight, grad_bias.
std::vector<HostTensor> group_norm_backward_ref(const OpCase& c) {
  const HostTensor& dy = c.input(0);
  const HostTensor& x = c.input(1);
  Nchw s = nchw(x.shape);
  int64_t g = c.attr_int("num_groups", 1), cg = s.c / g;
  HostTensor gi(x.dtype, x.shape), gw(x.dtype, {s.c}), gb(x.dtype, {s.c});
  for (int64_t i = 0; i < s.n; ++i)
    for (int64_t gr = 0; gr < g; ++gr) {
      double mu = c.input(2).values[i * g + gr], rs = c.input(3).values[i * g + gr], d = static_cast<double>(cg * s.hw);
      double mean_g = 0, mean_gx = 0;
      for (int64_t ch = gr * cg; ch < (gr + 1) * cg; ++ch)
        for (int64_t k = 0; k < s.hw; ++k) {
          double dv = dy.values[s.at(i, ch, k)], xhat = (x.values[s.at(i, ch, k)] - mu) * rs;
          mean_g += dv * param_at(c, 4, ch, 1) / d;
          mean_gx += dv * param_at(c, 4, ch, 1) * xhat / d;
          gw.values[ch] += dv * xhat;
          gb.values[ch] += dv;
        }
      for (int64_t ch = gr * cg; ch < (gr + 1) * cg; ++ch)
        for (int64_t k = 0; k < s.hw; ++k) {
          double xhat = (x.values[s.at(i, ch, k)] - mu) * rs;
          gi.values[s.at(i, ch, k)] = rs * (dy.values[s.at(i, ch, k)] * param_at(c, 4, ch, 1) - mean_g - xhat * mean_gx);
        }
    }
  return {gi, gw, gb};
}

std::vector<OpCase> group_norm_backward_cases(hal_dtype_e dt) {
  auto make = [&](std::string name, std::vector<int64_t> shape, int64_t g, bool weight, uint64_t seed) {
    OpCase c(std::move(name));
    c.in(random(dt, shape, seed)).in(random(dt, shape, seed + 1));
    c.in(random(dt, {shape[0], g}, seed + 2, -0.5, 0.5)).in(positive(dt, {shape[0], g}, seed + 3));
    if (weight) c.in(random(dt, {shape[1]}, seed + 4));
    return c.attr(Attr::i("num_groups", g));
  };
  OpCase bad = make("mean not [N, num_groups]", {2, 4, 3}, 2, false, 56);
  bad.inputs[2] = random(dt, {2, 4}, 57);
  return {
      make("[2, 4, 3] 2 groups, weight", {2, 4, 3}, 2, true, 51),
      make("[3, 6] 3 groups", {3, 6}, 3, false, 52),
      make("[2, 4, 2, 5] 1 group, weight", {2, 4, 2, 5}, 1, true, 53).tol(2),
      make("zero-size batch", {0, 4, 3}, 2, true, 54),
      bad.error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 4, 3}), HostTensor(dt, {4}), HostTensor(dt, {4})},
                {"'mean' has shape [2, 4]", "[2, 2]"}),
  };
}
HAL_CONFORMANCE_SUITE(group_norm_backward, group_norm_backward_cases, group_norm_backward_ref);

// ---- batch_norm ----------------------------------------------------------------------------

// (input, weight?, bias?, running_mean?, running_var?) -> out, save_mean,
// save_invstd, running_mean_out, running_var_out.
std::vector<HostTensor> batch_norm_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  Nchw s = nchw(x.shape);
  bool training = c.attr_bool("training", false), running = c.has_input(3);
  double momentum = c.attr_float("momentum", 0.1), eps = c.attr_float("eps", 1e-5), count = double(s.n * s.hw);
  HostTensor y(x.dtype, x.shape), sm(x.dtype, {training ? s.c : 0}), si(x.dtype, {training ? s.c : 0}),
      rm(x.dtype, {running ? s.c : 0}), rv(x.dtype, {running ? s.c : 0});
  for (int64_t ch = 0; ch < s.c; ++ch) {
    double mu, invstd;
    if (training) {
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < s.n; ++i)
        for (int64_t k = 0; k < s.hw; ++k) sum += x.values[s.at(i, ch, k)];
      mu = count > 0 ? sum / count : 0.0;
      for (int64_t i = 0; i < s.n; ++i)
        for (int64_t k = 0; k < s.hw; ++k) sq += std::pow(x.values[s.at(i, ch, k)] - mu, 2);
      invstd = count > 0 ? 1 / std::sqrt(sq / count + eps) : 0.0;
      sm.values[ch] = mu;
      si.values[ch] = invstd;
      if (running) {
        rm.values[ch] = count > 0 ? (1 - momentum) * c.input(3).values[ch] + momentum * mu : c.input(3).values[ch];
        rv.values[ch] = count > 0 ? (1 - momentum) * c.input(4).values[ch] + momentum * sq / (count - 1) : c.input(4).values[ch];
      }
    } else {
      mu = c.input(3).values[ch];
      invstd = 1 / std::sqrt(c.input(4).values[ch] + eps);
      rm.values[ch] = c.input(3).values[ch];
      rv.values[ch] = c.input(4).values[ch];
    }
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t k = 0; k < s.hw; ++k)
        y.values[s.at(i, ch, k)] = (x.values[s.at(i, ch, k)] - mu) * invstd * param_at(c, 1, ch, 1) + param_at(c, 2, ch, 0);
  }
  return {y, sm, si, rm, rv};
}

std::vector<OpCase> batch_norm_cases(hal_dtype_e dt) {
  auto outs = [dt](std::vector<int64_t> shape, int64_t sc, int64_t rc) {
    int64_t c = shape[1];
    return std::vector<HostTensor>{HostTensor(dt, shape), HostTensor(dt, {sc * c}), HostTensor(dt, {sc * c}),
                                   HostTensor(dt, {rc * c}), HostTensor(dt, {rc * c})};
  };
  return {
      OpCase("training [4, 3, 2], affine, running stats, momentum 0.2").in(random(dt, {4, 3, 2}, 61)).in(random(dt, {3}, 62))
          .in(random(dt, {3}, 63)).in(random(dt, {3}, 64)).in(positive(dt, {3}, 65))
          .attr(Attr::b("training", true)).attr(Attr::f("momentum", 0.2)),
      OpCase("training [5, 2, 2, 3] without running stats").in(random(dt, {5, 2, 2, 3}, 66)).absent().absent().absent().absent()
          .attr(Attr::b("training", true)).attr(Attr::f("eps", 0.01)),
      OpCase("eval [4, 3], affine").in(random(dt, {4, 3}, 67)).in(random(dt, {3}, 68)).in(random(dt, {3}, 69))
          .in(random(dt, {3}, 70)).in(positive(dt, {3}, 71)),
      // PyTorch: a NaN makes its channel NaN in training (output, saved and
      // running statistics), only its own output in eval.
      OpCase("training, NaN in one channel").in(with_value(random(dt, {4, 3, 2}, 80), {2, 1, 0}, kNaN))
          .in(random(dt, {3}, 81)).in(random(dt, {3}, 82)).in(random(dt, {3}, 83)).in(positive(dt, {3}, 84))
          .attr(Attr::b("training", true)),
      OpCase("eval, NaN in the input").in(with_value(random(dt, {4, 3}, 85), {1, 2}, kNaN)).absent().absent()
          .in(random(dt, {3}, 86)).in(positive(dt, {3}, 87)),
      OpCase("training, empty batch").in(random(dt, {0, 3}, 72)).absent().absent().in(random(dt, {3}, 73))
          .in(positive(dt, {3}, 74)).attr(Attr::b("training", true)),
      OpCase("eval without running stats").in(random(dt, {4, 3}, 75))
          .error(HAL_STATUS_INVALID_ARGUMENT, outs({4, 3}, 0, 0), {"running_mean", "training is false"}),
      OpCase("one value per channel in training").in(random(dt, {1, 3}, 76)).attr(Attr::b("training", true))
          .error(HAL_STATUS_INVALID_ARGUMENT, outs({1, 3}, 1, 0), {"more than 1 value per channel"}),
      OpCase("running_var not [C]").in(random(dt, {4, 3}, 77)).absent().absent().in(random(dt, {3}, 78))
          .in(positive(dt, {2}, 79))
          .error(HAL_STATUS_INVALID_ARGUMENT, outs({4, 3}, 0, 1), {"'running_var' has shape [2]", "[3]"}),
  };
}
HAL_CONFORMANCE_SUITE(batch_norm, batch_norm_cases, batch_norm_ref);

// (grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?) -> grad_input, grad_weight, grad_bias.
std::vector<HostTensor> batch_norm_backward_ref(const OpCase& c) {
  const HostTensor& dy = c.input(0);
  const HostTensor& x = c.input(1);
  Nchw s = nchw(x.shape);
  bool training = c.attr_bool("training", false);
  double eps = c.attr_float("eps", 1e-5), count = double(s.n * s.hw);
  HostTensor gi(x.dtype, x.shape), gw(x.dtype, {s.c}), gb(x.dtype, {s.c});
  for (int64_t ch = 0; ch < s.c; ++ch) {
    double mu = training ? c.input(5).values[ch] : c.input(3).values[ch];
    double rs = training ? c.input(6).values[ch] : 1 / std::sqrt(c.input(4).values[ch] + eps);
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t k = 0; k < s.hw; ++k) {
        sdy += dy.values[s.at(i, ch, k)];
        sdyx += dy.values[s.at(i, ch, k)] * (x.values[s.at(i, ch, k)] - mu);
      }
    gb.values[ch] = sdy;
    gw.values[ch] = sdyx * rs;
    double w = param_at(c, 2, ch, 1);
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t k = 0; k < s.hw; ++k) {
        double d = dy.values[s.at(i, ch, k)];
        if (training) d -= sdy / count + (x.values[s.at(i, ch, k)] - mu) * rs * rs * sdyx / count;
        gi.values[s.at(i, ch, k)] = d * rs * w;
      }
  }
  return {gi, gw, gb};
}

std::vector<OpCase> batch_norm_backward_cases(hal_dtype_e dt) {
  auto outs = [dt](std::vector<int64_t> shape) {
    return std::vector<HostTensor>{HostTensor(dt, shape), HostTensor(dt, {shape[1]}), HostTensor(dt, {shape[1]})};
  };
  return {
      OpCase("training [4, 3, 2], weight").in(random(dt, {4, 3, 2}, 81)).in(random(dt, {4, 3, 2}, 82)).in(random(dt, {3}, 83))
          .absent().absent().in(random(dt, {3}, 84, -0.5, 0.5)).in(positive(dt, {3}, 85)).attr(Attr::b("training", true)),
      OpCase("training [5, 2], no weight").in(random(dt, {5, 2}, 86)).in(random(dt, {5, 2}, 87)).absent().absent().absent()
          .in(random(dt, {2}, 88, -0.5, 0.5)).in(positive(dt, {2}, 89)).attr(Attr::b("training", true)),
      OpCase("eval [4, 3, 2], weight").in(random(dt, {4, 3, 2}, 90)).in(random(dt, {4, 3, 2}, 91)).in(random(dt, {3}, 92))
          .in(random(dt, {3}, 93)).in(positive(dt, {3}, 94)),
      OpCase("training without save_invstd").in(random(dt, {4, 3}, 95)).in(random(dt, {4, 3}, 96)).absent().absent().absent()
          .in(random(dt, {3}, 97)).attr(Attr::b("training", true))
          .error(HAL_STATUS_INVALID_ARGUMENT, outs({4, 3}), {"'save_invstd'", "training is true"}),
  };
}
HAL_CONFORMANCE_SUITE(batch_norm_backward, batch_norm_backward_cases, batch_norm_backward_ref);

// ---- class-index losses ------------------------------------------------------------------

// input [N, C, D] (or [C]) around the class dim.
struct Classes {
  int64_t n = 1, c = 1, d = 1;
  int64_t at(int64_t p, int64_t k) const { return (p / d) * c * d + k * d + p % d; }
};
Classes classes_of(const HostTensor& x) {
  Classes l;
  if (x.rank() == 1) {
    l.c = x.shape[0];
    return l;
  }
  l.n = x.shape[0];
  l.c = x.shape[1];
  for (int k = 2; k < x.rank(); ++k) l.d *= x.shape[k];
  return l;
}

// Per position: log-probabilities (log_softmax of logits when LOGITS).
std::vector<double> log_probs(const HostTensor& x, const Classes& l, int64_t p, bool logits) {
  std::vector<double> lp(static_cast<size_t>(l.c));
  double m = -INFINITY, z = 0;
  for (int64_t k = 0; k < l.c; ++k) m = std::max(m, x.values[l.at(p, k)]);
  for (int64_t k = 0; k < l.c; ++k) z += std::exp(x.values[l.at(p, k)] - m);
  for (int64_t k = 0; k < l.c; ++k) lp[k] = logits ? x.values[l.at(p, k)] - m - std::log(z) : x.values[l.at(p, k)];
  return lp;
}

// Loss per position and the mean's denominator, of (input at FIRST, target, weight?).
double class_losses(const OpCase& c, size_t first, bool logits, std::vector<double>& loss) {
  const HostTensor& x = c.input(first);
  const HostTensor& t = c.input(first + 1);
  Classes l = classes_of(x);
  int64_t ignore = c.attr_int("ignore_index", -100);
  double eps = c.attr_float("label_smoothing", 0.0), denom = 0;
  loss.assign(static_cast<size_t>(l.n * l.d), 0.0);
  for (int64_t p = 0; p < l.n * l.d; ++p) {
    int64_t tc = static_cast<int64_t>(t.values[p]);
    if (tc == ignore) continue;
    std::vector<double> lp = log_probs(x, l, p, logits);
    double smooth = 0;
    for (int64_t k = 0; k < l.c; ++k) smooth -= param_at(c, first + 2, k, 1) * lp[k];
    // Without label smoothing the smoothing term is not formed at all (a
    // -inf logit would make it 0 · inf = NaN).
    loss[p] = (1 - eps) * -param_at(c, first + 2, tc, 1) * lp[tc] + (eps > 0 ? eps / l.c * smooth : 0.0);
    denom += param_at(c, first + 2, tc, 1);
  }
  return denom;
}

std::vector<HostTensor> class_loss_ref(const OpCase& c, bool logits) {
  std::vector<double> loss;
  double denom = class_losses(c, 0, logits, loss);
  return {reduce(c.input(0).dtype, c.input(1).shape, loss, reduction(c), denom)};
}

std::vector<HostTensor> class_loss_backward_ref(const OpCase& c, bool logits) {
  std::vector<double> loss;
  double denom = class_losses(c, 1, logits, loss);
  const HostTensor& x = c.input(1);
  const HostTensor& t = c.input(2);
  Classes l = classes_of(x);
  int64_t ignore = c.attr_int("ignore_index", -100);
  double eps = c.attr_float("label_smoothing", 0.0), wsum = 0;
  for (int64_t k = 0; k < l.c; ++k) wsum += param_at(c, 3, k, 1);
  HostTensor gi(x.dtype, x.shape);
  for (int64_t p = 0; p < l.n * l.d; ++p) {
    int64_t tc = static_cast<int64_t>(t.values[p]);
    if (tc == ignore) continue;
    double g = upstream(c.input(0), p, reduction(c), denom), wt = param_at(c, 3, tc, 1);
    std::vector<double> lp = log_probs(x, l, p, logits);
    for (int64_t k = 0; k < l.c; ++k) {
      double onehot = k == tc ? 1.0 : 0.0;
      gi.values[l.at(p, k)] = logits ? g * ((1 - eps) * wt * (std::exp(lp[k]) - onehot) +
                                            eps / l.c * (std::exp(lp[k]) * wsum - param_at(c, 3, k, 1)))
                                     : -g * wt * onehot;
    }
  }
  return {gi};
}

// Targets of SHAPE in [0, C) with every third one set to IGNORE.
HostTensor targets_with_ignored(std::vector<int64_t> shape, int64_t c, uint64_t seed, int64_t ignore) {
  HostTensor t = classes(std::move(shape), c, seed);
  for (size_t i = 0; i < t.values.size(); i += 3) t.values[i] = static_cast<double>(ignore);
  return t;
}

std::vector<OpCase> class_loss_cases(hal_dtype_e dt, bool backward, bool smoothing) {
  // Prepends grad_output of the loss's output shape for the backward op.
  auto make = [&](std::string name, HostTensor x, HostTensor t, std::optional<HostTensor> w, std::string red,
                  uint64_t seed) {
    OpCase c(std::move(name));
    if (backward) c.in(red == "none" ? random(dt, t.shape, seed + 7) : random(dt, {}, seed + 7));
    c.in(std::move(x)).in(std::move(t));
    if (w) c.in(std::move(*w));
    return c.attr(Attr::s("reduction", red));
  };
  std::vector<OpCase> cases = {
      make("[4, 5] mean", random(dt, {4, 5}, 101), classes({4}, 5, 102), std::nullopt, "mean", 100),
      make("[4, 5] weighted sum", random(dt, {4, 5}, 103), classes({4}, 5, 104), positive(dt, {5}, 105), "sum", 101),
      make("[2, 3, 4] none", random(dt, {2, 3, 4}, 106), classes({2, 4}, 3, 107), std::nullopt, "none", 102),
      make("[2, 3, 2, 2] weighted mean, ignore_index 1", random(dt, {2, 3, 2, 2}, 108),
           targets_with_ignored({2, 2, 2}, 3, 109, 1), positive(dt, {3}, 110), "mean", 103)
          .attr(Attr::i("ignore_index", 1)),
      make("[6, 4] none, ignore_index -100", random(dt, {6, 4}, 111), targets_with_ignored({6}, 4, 112, -100),
           std::nullopt, "none", 104),
      make("[5] with a 0-d target", random(dt, {5}, 113), classes({}, 5, 114), std::nullopt, "mean", 105),
      make("zero-size batch, sum", random(dt, {0, 5}, 115), classes({0}, 5, 116), std::nullopt, "sum", 106),
  };
  if (smoothing) {
    // Logits (cross_entropy): a -inf logit of a class other than the target
    // (a masked class) leaves the loss finite and gets gradient 0; a NaN
    // logit makes its position's loss (and gradient) NaN. As PyTorch.
    HostTensor t = classes({4}, 5, 130), x = random(dt, {4, 5}, 131);
    for (int64_t p : {0, 2, 3}) {
      int64_t tc = static_cast<int64_t>(t.values[p]);
      x.at({p, (tc + 1) % 5}) = -kInf;
      if (p != 3) x.at({p, (tc + 3) % 5}) = -kInf;
    }
    cases.push_back(make("-inf logits of other classes, mean", x, t, std::nullopt, "mean", 113));
    // Logits around 1e4: log_softmax must be (x - max) - log Σ as in PyTorch
    // (x - (max + log Σ) rounds at 1e4's magnitude first).
    cases.push_back(make("logits around 1e4, none", random(dt, {4, 5}, 132, 1e4 - 4, 1e4 + 4), classes({4}, 5, 133),
                         std::nullopt, "none", 114));
    cases.push_back(make("logits around 1e4, weighted mean, label_smoothing 0.1", random(dt, {4, 5}, 134, 1e4 - 4, 1e4 + 4),
                         classes({4}, 5, 135), positive(dt, {5}, 136), "mean", 115)
                        .attr(Attr::f("label_smoothing", 0.1)));
    x.at({1, 2}) = kNaN;
    cases.push_back(make("-inf logits of other classes, a NaN logit, none", x, t, std::nullopt, "none", 112));
    cases.push_back(make("[4, 5] mean, label_smoothing 0.2", random(dt, {4, 5}, 117), classes({4}, 5, 118), std::nullopt,
                         "mean", 107).attr(Attr::f("label_smoothing", 0.2)));
    cases.push_back(make("[3, 4, 2] weighted none, label_smoothing 0.1, ignored", random(dt, {3, 4, 2}, 119),
                         targets_with_ignored({3, 2}, 4, 120, -100), positive(dt, {4}, 121), "none", 108)
                        .attr(Attr::f("label_smoothing", 0.1)));
  }
  HostTensor bad = classes({4}, 5, 122);
  bad.values[2] = 5;
  std::vector<HostTensor> out = {backward ? HostTensor(dt, {4, 5}) : HostTensor(dt, {4})};
  cases.push_back(make("target out of range", random(dt, {4, 5}, 123), bad, std::nullopt, "none", 109)
                      .error(HAL_STATUS_OUT_OF_RANGE, out, {"target 5", "position 2", "[0, 5)"}));
  cases.push_back(make("weight not [C]", random(dt, {4, 5}, 124), classes({4}, 5, 125), positive(dt, {4}, 126), "none", 110)
                      .error(HAL_STATUS_INVALID_ARGUMENT, out, {"'weight' has shape [4]", "[5]"}));
  cases.push_back(make("target shape mismatch", random(dt, {4, 5}, 127), classes({5}, 5, 128), std::nullopt, "none", 111)
                      .error(HAL_STATUS_INVALID_ARGUMENT, out, {"'target' has shape [5]", "[4]"}));
  return cases;
}
HAL_CONFORMANCE_SUITE(cross_entropy, [](hal_dtype_e dt) { return class_loss_cases(dt, false, true); },
                      [](const OpCase& c) { return class_loss_ref(c, true); });
HAL_CONFORMANCE_SUITE(cross_entropy_backward, [](hal_dtype_e dt) { return class_loss_cases(dt, true, true); },
                      [](const OpCase& c) { return class_loss_backward_ref(c, true); });
HAL_CONFORMANCE_SUITE(nll_loss, [](hal_dtype_e dt) { return class_loss_cases(dt, false, false); },
                      [](const OpCase& c) { return class_loss_ref(c, false); });
HAL_CONFORMANCE_SUITE(nll_loss_backward, [](hal_dtype_e dt) { return class_loss_cases(dt, true, false); },
                      [](const OpCase& c) { return class_loss_backward_ref(c, false); });

// ---- pointwise losses ----------------------------------------------------------------------

// Per element of input (at FIRST): the loss, and its derivative by input.
void pointwise(const OpCase& c, size_t first, bool bce, std::vector<double>& loss, std::vector<double>& grad) {
  const HostTensor& x = c.input(first);
  const HostTensor& t = c.input(first + 1);
  loss.assign(x.values.size(), 0.0);
  grad.assign(x.values.size(), 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double xi = x.values[i], ti = t.values[i];
    if (!bce) {
      loss[i] = (xi - ti) * (xi - ti);
      grad[i] = 2 * (xi - ti);
      continue;
    }
    std::vector<int64_t> idx = unravel(i, x.shape);
    double w = c.has_input(first + 2) ? broadcast_at(c.input(first + 2), idx) : 1.0;
    double pw = c.has_input(first + 3) ? broadcast_at(c.input(first + 3), idx) : 1.0;
    double log_sig = -std::log1p(std::exp(-xi)), log_one_minus = -xi + log_sig;  // log σ(x), log(1 - σ(x))
    loss[i] = -w * (pw * ti * log_sig + (1 - ti) * log_one_minus);
    double sig = 1 / (1 + std::exp(-xi));
    grad[i] = -w * (pw * ti * (1 - sig) - (1 - ti) * sig);
  }
}

std::vector<HostTensor> pointwise_ref(const OpCase& c, bool bce) {
  std::vector<double> loss, grad;
  pointwise(c, 0, bce, loss, grad);
  return {reduce(c.input(0).dtype, c.input(0).shape, loss, reduction(c), double(c.input(0).numel()))};
}
std::vector<HostTensor> pointwise_backward_ref(const OpCase& c, bool bce) {
  std::vector<double> loss, grad;
  pointwise(c, 1, bce, loss, grad);
  HostTensor gi(c.input(1).dtype, c.input(1).shape);
  for (int64_t i = 0; i < gi.numel(); ++i) gi.values[i] = grad[i] * upstream(c.input(0), i, reduction(c), double(gi.numel()));
  return {gi};
}

std::vector<OpCase> pointwise_cases(hal_dtype_e dt, bool backward, bool bce) {
  auto make = [&](std::string name, std::vector<int64_t> shape, std::string red, uint64_t seed) {
    OpCase c(std::move(name));
    if (backward) c.in(red == "none" ? random(dt, shape, seed + 5) : random(dt, {}, seed + 5));
    c.in(random(dt, shape, seed));
    c.in(bce ? random(dt, shape, seed + 1, 0, 1) : random(dt, shape, seed + 1));
    return c.attr(Attr::s("reduction", red));
  };
  std::vector<OpCase> cases = {
      make("[3, 4] mean", {3, 4}, "mean", 131),
      make("[2, 3, 5] sum", {2, 3, 5}, "sum", 132),
      make("[4, 3] none", {4, 3}, "none", 133),
      make("0-d none", {}, "none", 134),
      make("zero-size sum", {0, 3}, "sum", 135),
  };
  if (bce) {
    cases.push_back(make("[4, 3] mean, weight [3], pos_weight [3]", {4, 3}, "mean", 136)
                        .in(positive(dt, {3}, 137)).in(positive(dt, {3}, 138)));
    cases.push_back(make("[2, 3] none, pos_weight only", {2, 3}, "none", 139).absent().in(positive(dt, {3}, 140)));
    cases.push_back(make("weight does not broadcast", {2, 3}, "none", 141).in(positive(dt, {2}, 142))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"'weight' of shape [2]"}));
  }
  OpCase bad = make("target shape mismatch", {3, 4}, "none", 143);
  bad.inputs[backward ? 2 : 1] = random(dt, {4, 3}, 144);
  cases.push_back(bad.error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3, 4})}, {"'target' has shape [4, 3]"}));
  return cases;
}
HAL_CONFORMANCE_SUITE(mse_loss, [](hal_dtype_e dt) { return pointwise_cases(dt, false, false); },
                      [](const OpCase& c) { return pointwise_ref(c, false); });
HAL_CONFORMANCE_SUITE(mse_loss_backward, [](hal_dtype_e dt) { return pointwise_cases(dt, true, false); },
                      [](const OpCase& c) { return pointwise_backward_ref(c, false); });
HAL_CONFORMANCE_SUITE(binary_cross_entropy_with_logits, [](hal_dtype_e dt) { return pointwise_cases(dt, false, true); },
                      [](const OpCase& c) { return pointwise_ref(c, true); });
HAL_CONFORMANCE_SUITE(binary_cross_entropy_with_logits_backward,
                      [](hal_dtype_e dt) { return pointwise_cases(dt, true, true); },
                      [](const OpCase& c) { return pointwise_backward_ref(c, true); });

}  // namespace
}  // namespace hal::conformance
