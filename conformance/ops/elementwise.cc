// hal-conformance: the "elementwise" ops (sdk/catalog/ops/unary.toml and
// binary.toml) — cases and double-precision references.
//
// Every reference evaluates the op's formula in double over the broadcast
// inputs, after casting each input to the op's computing dtype (PyTorch's
// result_type, re-derived here); the runner rounds to the output dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2_Pi = 0.79788456080286535588;

constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32, F16 = HAL_DTYPE_FLOAT16, BF16 = HAL_DTYPE_BFLOAT16,
                      F64 = HAL_DTYPE_FLOAT64, I8 = HAL_DTYPE_INT8, U8 = HAL_DTYPE_UINT8, I16 = HAL_DTYPE_INT16,
                      I32 = HAL_DTYPE_INT32, I64 = HAL_DTYPE_INT64, BOOL = HAL_DTYPE_BOOL;

constexpr uint64_t bit(hal_dtype_e d) { return uint64_t{1} << d; }
constexpr uint64_t kFloats = bit(F32) | bit(F16) | bit(BF16) | bit(F64);
constexpr uint64_t kInts = bit(I8) | bit(U8) | bit(I16) | bit(I32) | bit(I64);
constexpr uint64_t kNumeric = kFloats | kInts;
constexpr uint64_t kSigned = kFloats | bit(I8) | bit(I16) | bit(I32) | bit(I64);
constexpr uint64_t kIntegral = kInts | bit(BOOL);
constexpr uint64_t kAll = kNumeric | bit(BOOL);
bool allows(uint64_t mask, hal_dtype_e d) { return (mask >> d) & 1u; }

// ---- reference machinery -------------------------------------------------------

// PyTorch's result_type over the present inputs: dimensioned tensors decide
// unless a 0-d tensor is of a higher category (bool < integer < floating).
hal_dtype_e result_type(const std::vector<const HostTensor*>& ins) {
  auto category = [](hal_dtype_e d) { return d == BOOL ? 0 : is_float(d) ? 2 : 1; };
  bool have_dim = false, have_zero = false;
  hal_dtype_e dim = BOOL, zero = BOOL;
  for (const HostTensor* t : ins) {
    if (t->rank() == 0) {
      zero = have_zero ? promote(zero, t->dtype) : t->dtype;
      have_zero = true;
    } else {
      dim = have_dim ? promote(dim, t->dtype) : t->dtype;
      have_dim = true;
    }
  }
  if (!have_dim) return zero;
  if (!have_zero) return dim;
  return category(zero) > category(dim) ? promote(dim, zero) : dim;
}

hal_dtype_e to_float(hal_dtype_e d) { return is_float(d) ? d : F32; }

// OUT (dtype OUT_DT, broadcast shape of INS) = F(x) with x[k] = INS[k]'s
// value cast to COMPUTE.
template <class F>
HostTensor eval(hal_dtype_e out_dt, hal_dtype_e compute, const std::vector<const HostTensor*>& ins, F f) {
  std::vector<int64_t> shape;
  for (const HostTensor* t : ins) shape = *broadcast_shape(shape, t->shape);
  HostTensor out(out_dt, shape);
  std::vector<double> x(ins.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, shape);
    for (size_t k = 0; k < ins.size(); ++k) x[k] = round_to(compute, broadcast_at(*ins[k], idx));
    out.values[i] = f(x.data());
  }
  return out;
}

std::vector<const HostTensor*> present_inputs(const OpCase& c) {
  std::vector<const HostTensor*> ins;
  for (const auto& t : c.inputs)
    if (t) ins.push_back(&*t);
  return ins;
}

// A bad-input case's reference is never compared; return what it expects.
#define HAL_REF_ERROR_GUARD(c) \
  if ((c).expect_error) return (c).outputs_for_error

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x * kSqrt1_2)); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(kSqrt2_Pi * (x + 0.044715 * x * x * x))); }

HostTensor values(hal_dtype_e dt, std::vector<double> v) {
  for (double& x : v) x = round_to(dt, x);
  int64_t n = static_cast<int64_t>(v.size());
  return HostTensor(dt, {n}, std::move(v));
}

// ---- unary ------------------------------------------------------------------------

enum class Out { kSame, kFloat, kBool, kPromoted, kDiv };

struct Domain {
  double lo = -2.0, hi = 2.0;
  bool nonzero = false;  // |x| >= lo (lo > 0), either sign
};

struct UnaryDef {
  const char* op;
  uint64_t dtypes;
  Out out;
  double (*f)(double);
  Domain domain;
  // Special float inputs whose results are well defined for the op.
  std::vector<double> specials;
  // A dtype the catalog refuses (tested as a bad input), or HAL_DTYPE_INVALID.
  hal_dtype_e refused = HAL_DTYPE_INVALID;
};

HostTensor unary_input(const UnaryDef& d, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  if (d.domain.nonzero) return random_nonzero(dt, std::move(shape), seed, d.domain.lo, d.domain.hi);
  return random(dt, std::move(shape), seed, d.domain.lo, d.domain.hi);
}

hal_dtype_e unary_out_dtype(Out rule, hal_dtype_e in) {
  return rule == Out::kFloat ? to_float(in) : rule == Out::kBool ? BOOL : in;
}

std::vector<OpCase> unary_cases(const UnaryDef& d, hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("[3,5]").in(unary_input(d, dt, {3, 5}, 1)),
      OpCase("0-d").in(unary_input(d, dt, {}, 2)),
      OpCase("zero-size [0,3]").in(unary_input(d, dt, {0, 3}, 3)),
      OpCase("long [7,37]").in(unary_input(d, dt, {7, 37}, 4)),
      OpCase("[2,3,4] wide range").in(random(dt, {2, 3, 4}, 5, -8.0, 8.0)),
  };
  if (is_float(dt) && !d.specials.empty()) cases.push_back(OpCase("special values").in(values(dt, d.specials)));
  if (is_int(dt)) cases.push_back(OpCase("mixed signs").in(values(dt, {-100, 100, 0, -1, 1, 7, -7})));
  if (dt == F32 && d.refused != HAL_DTYPE_INVALID)
    cases.push_back(OpCase("unsupported dtype")
                        .in(random(d.refused, {3}, 6))
                        .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(unary_out_dtype(d.out, d.refused), {3})},
                               {d.op, dtype_str(d.refused)}));
  return cases;
}

std::vector<HostTensor> unary_ref(const UnaryDef& d, const OpCase& c) {
  HAL_REF_ERROR_GUARD(c);
  const HostTensor& x = c.input(0);
  hal_dtype_e out = unary_out_dtype(d.out, x.dtype);
  hal_dtype_e compute = d.out == Out::kFloat ? out : x.dtype;
  return {eval(out, compute, {&x}, [&](const double* v) { return d.f(v[0]); })};
}

// Registers a unary suite from a UnaryDef (the def outlives registration:
// the lambdas copy it).
#define HAL_UNARY_SUITE(NAME, ...)                                                                 \
  const UnaryDef NAME##_def{#NAME, __VA_ARGS__};                                                   \
  HAL_CONFORMANCE_SUITE(                                                                           \
      NAME, [](hal_dtype_e dt) { return unary_cases(NAME##_def, dt); },                            \
      [](const OpCase& c) { return unary_ref(NAME##_def, c); }, NAME##_def.dtypes)

double f_abs(double x) { return std::fabs(x); }
double f_neg(double x) { return -x; }
double f_exp(double x) { return std::exp(x); }
double f_log(double x) { return std::log(x); }
double f_log1p(double x) { return std::log1p(x); }
double f_expm1(double x) { return std::expm1(x); }
double f_sqrt(double x) { return std::sqrt(x); }
double f_rsqrt(double x) { return 1.0 / std::sqrt(x); }
double f_reciprocal(double x) { return 1.0 / x; }
double f_sin(double x) { return std::sin(x); }
double f_cos(double x) { return std::cos(x); }
double f_tanh(double x) { return std::tanh(x); }
double f_relu(double x) { return std::isnan(x) ? x : x > 0 ? x : 0.0; }  // NaN propagates (clamp_min)
double f_silu(double x) { return x / (1.0 + std::exp(-x)); }
double f_erf(double x) { return std::erf(x); }
double f_floor(double x) { return std::floor(x); }
double f_ceil(double x) { return std::ceil(x); }
double f_round(double x) { return std::nearbyint(x); }  // default rounding: ties to even
double f_sign(double x) { return std::isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
double f_logical_not(double x) { return x == 0 ? 1.0 : 0.0; }
double f_isnan(double x) { return std::isnan(x) ? 1.0 : 0.0; }
double f_isinf(double x) { return std::isinf(x) ? 1.0 : 0.0; }

const std::vector<double> kSpecials = {kNaN, kInf, -kInf, 0.0, -0.0, 1e-3, -1e-3, 30.0, -30.0, 100.0, -100.0};
const std::vector<double> kFiniteSpecials = {kNaN, 0.0, -0.0, 1e-3, -1e-3, 30.0, -30.0, 100.0, -100.0};
const std::vector<double> kLogSpecials = {kNaN, kInf, -kInf, 0.0, -0.0, -1.0, -0.5, -3.0, 1e-3, 100.0};
const std::vector<double> kRoundSpecials = {kNaN, kInf, -kInf, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 1e3};

HAL_UNARY_SUITE(abs, kNumeric, Out::kSame, f_abs, {}, kSpecials, BOOL);
HAL_UNARY_SUITE(neg, kSigned, Out::kSame, f_neg, {}, kSpecials, U8);
HAL_UNARY_SUITE(exp, kAll, Out::kFloat, f_exp, {-4, 4}, {kNaN, kInf, -kInf, 0.0, 88.0, 89.0, -87.0, -104.0, 710.0, -750.0});
HAL_UNARY_SUITE(log, kAll, Out::kFloat, f_log, {0.05, 4}, kLogSpecials);
HAL_UNARY_SUITE(log1p, kAll, Out::kFloat, f_log1p, {-0.9, 3}, {kNaN, kInf, -1.0, -2.0, 1e-6, -1e-6, 0.0});
HAL_UNARY_SUITE(expm1, kAll, Out::kFloat, f_expm1, {-3, 3}, {kNaN, kInf, -kInf, 1e-6, -1e-6, 0.0, 50.0, -50.0});
HAL_UNARY_SUITE(sqrt, kAll, Out::kFloat, f_sqrt, {0, 4}, kLogSpecials);
HAL_UNARY_SUITE(rsqrt, kAll, Out::kFloat, f_rsqrt, {0.05, 4}, kLogSpecials);
HAL_UNARY_SUITE(reciprocal, kAll, Out::kFloat, f_reciprocal, {0.25, 4, true}, kSpecials);
HAL_UNARY_SUITE(sin, kAll, Out::kFloat, f_sin, {-4, 4}, {kNaN, kInf, -kInf, 0.0, 30.0, -30.0});
HAL_UNARY_SUITE(cos, kAll, Out::kFloat, f_cos, {-4, 4}, {kNaN, kInf, -kInf, 0.0, 30.0, -30.0});
HAL_UNARY_SUITE(tanh, kAll, Out::kFloat, f_tanh, {-5, 5}, kSpecials);
HAL_UNARY_SUITE(sigmoid, kAll, Out::kFloat, sigmoid, {-6, 6}, kSpecials);
HAL_UNARY_SUITE(relu, kNumeric, Out::kSame, f_relu, {}, kSpecials, BOOL);
HAL_UNARY_SUITE(silu, kFloats, Out::kSame, f_silu, {-6, 6}, kFiniteSpecials, I32);
HAL_UNARY_SUITE(erf, kAll, Out::kFloat, f_erf, {-3, 3}, kSpecials);
HAL_UNARY_SUITE(floor, kNumeric, Out::kSame, f_floor, {-4, 4}, kRoundSpecials, BOOL);
HAL_UNARY_SUITE(ceil, kNumeric, Out::kSame, f_ceil, {-4, 4}, kRoundSpecials, BOOL);
HAL_UNARY_SUITE(round, kNumeric, Out::kSame, f_round, {-4, 4}, kRoundSpecials, BOOL);
HAL_UNARY_SUITE(sign, kNumeric, Out::kSame, f_sign, {}, kSpecials, BOOL);
HAL_UNARY_SUITE(logical_not, kAll, Out::kBool, f_logical_not, {-1, 2}, kSpecials);
HAL_UNARY_SUITE(isnan, kAll, Out::kBool, f_isnan, {}, kSpecials);
HAL_UNARY_SUITE(isinf, kAll, Out::kBool, f_isinf, {}, kSpecials);

// ---- catalog 1.4: trigonometric, hyperbolic, logarithmic and special functions ----
// The references of the special functions are independent of the SDK's
// implementations (kernel/special.hpp): long double series, bisection, or
// known closed forms, so a shared mistake cannot pass.

double f_tan(double x) { return std::tan(x); }
double f_asin(double x) { return std::asin(x); }
double f_acos(double x) { return std::acos(x); }
double f_atan(double x) { return std::atan(x); }
double f_sinh(double x) { return std::sinh(x); }
double f_cosh(double x) { return std::cosh(x); }
double f_asinh(double x) { return std::asinh(x); }
double f_acosh(double x) { return std::acosh(x); }
double f_atanh(double x) { return std::atanh(x); }
double f_log2(double x) { return std::log2(x); }
double f_log10(double x) { return std::log10(x); }
double f_exp2(double x) { return std::exp2(x); }
double f_trunc(double x) { return std::trunc(x); }
double f_signbit(double x) { return std::signbit(x) ? 1.0 : 0.0; }
double f_erfc(double x) { return std::erfc(x); }
double f_lgamma(double x) {
  int sign;
  return static_cast<double>(::lgammal_r(static_cast<long double>(x), &sign));
}

// erfcx: e^(x²)·erfc(x) in long double below 50, the asymptotic series above.
double f_erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x == kInf) return 0.0;
  if (x < 50) {
    long double v = std::exp(static_cast<long double>(x) * x) * std::erfc(static_cast<long double>(x));
    return static_cast<double>(v);
  }
  long double y = 1.0L / (static_cast<long double>(x) * x), sum = 1, term = 1;
  for (int k = 1; k < 12; ++k) sum += (term *= -(2 * k - 1) * y / 2);
  return static_cast<double>(sum / (x * 1.7724538509055160273L));
}
// Root of the increasing G at TARGET in [lo, hi] by bisection in long double.
template <class G>
double bisect(G g, long double target, long double lo, long double hi) {
  for (int i = 0; i < 200 && lo < hi; ++i) {
    long double mid = (lo + hi) / 2;
    if (mid == lo || mid == hi) break;
    (g(mid) < target ? lo : hi) = mid;
  }
  return static_cast<double>((lo + hi) / 2);
}
double f_erfinv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return kNaN;
  if (y == 1 || y == -1) return std::copysign(kInf, y);
  return bisect([](long double x) { return std::erf(x); }, y, -7, 7);
}
double f_ndtri(double p) {
  if (std::isnan(p) || p < 0 || p > 1) return kNaN;
  if (p == 0) return -kInf;
  if (p == 1) return kInf;
  // Φ(x) = erfc(-x/√2)/2, accurate in both tails for the comparison.
  return bisect([](long double x) { return std::erfc(-x * 0.70710678118654752440L) / 2; }, p, -40, 40);
}
// ψ⁽ⁿ⁾ (n = 0: ψ) by recurrence to x >= 40 and the asymptotic series, in long double.
long double psi_n(int n, long double x) {
  long double acc = 0, fact = 1;
  for (int k = 2; k <= n; ++k) fact *= k;  // n!
  const long double sign = (n % 2) ? 1 : -1;  // ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x+1) + (-1)^(n+1) n! x^-(n+1)
  while (x < 40) {
    acc += n == 0 ? -1 / x : sign * fact / std::pow(x, static_cast<long double>(n + 1));
    x += 1;
  }
  // The n-th derivative of ln x - 1/(2x) - Σ B2k/(2k x^2k), term by term.
  const long double b2k[] = {1.0L / 6, -1.0L / 30, 1.0L / 42, -1.0L / 30, 5.0L / 66, -691.0L / 2730, 7.0L / 6};
  auto dpow = [&](long double a, int p) {  // a · d^n/dx^n x^(-p)
    long double c = 1;
    for (int k = 0; k < n; ++k) c *= -(p + k);
    return c * std::pow(x, static_cast<long double>(-p - n)) * a;
  };
  long double v = n == 0 ? std::log(x) : sign * (fact / n) / std::pow(x, static_cast<long double>(n));  // of ln x
  v += dpow(-0.5L, 1);
  for (int k = 1; k <= 7; ++k) v += dpow(-b2k[k - 1] / (2 * k), 2 * k);
  return acc + v;
}
double f_digamma(double x) {
  if (std::isnan(x)) return x;
  if (x == 0) return std::copysign(kInf, -x);
  if (x < 0 && x == std::trunc(x)) return kNaN;
  const long double pi = 3.14159265358979323846L;
  if (x < 0) return static_cast<double>(psi_n(0, 1.0L - x) - pi / std::tan(pi * static_cast<long double>(x)));
  return static_cast<double>(psi_n(0, x));
}
// I0, I1 by their power series in long double (positive terms).
double bessel_i(int nu, double x) {
  if (std::isnan(x)) return x;
  long double y = static_cast<long double>(x) * x / 4, term = nu == 0 ? 1.0L : x / 2.0L, sum = term;
  for (int k = 1; k < 400; ++k) sum += (term *= y / (k * static_cast<long double>(k + nu)));
  return static_cast<double>(sum);
}
double f_i0(double x) { return bessel_i(0, x); }
double f_i1(double x) { return bessel_i(1, x); }
double f_i0e(double x) { return static_cast<double>(bessel_i(0, x) * std::exp(-std::fabs(static_cast<long double>(x)))); }
double f_i1e(double x) { return static_cast<double>(bessel_i(1, x) * std::exp(-std::fabs(static_cast<long double>(x)))); }

const std::vector<double> kUnitSpecials = {kNaN, kInf, -kInf, 1.0, -1.0, 0.0, -0.0, 0.5, 1.5, -1.5};
const std::vector<double> kGammaSpecials = {kNaN, kInf, 0.0, -0.0, 1.0, 2.0, 0.5, -0.5, -1.0, -2.0, -2.5, 1e-3, 30.0};
HAL_UNARY_SUITE(tan, kAll, Out::kFloat, f_tan, {-1.5, 1.5}, {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, 30.0});
HAL_UNARY_SUITE(asin, kAll, Out::kFloat, f_asin, {-1, 1}, kUnitSpecials);
HAL_UNARY_SUITE(acos, kAll, Out::kFloat, f_acos, {-1, 1}, kUnitSpecials);
HAL_UNARY_SUITE(atan, kAll, Out::kFloat, f_atan, {-4, 4}, kSpecials);
HAL_UNARY_SUITE(sinh, kAll, Out::kFloat, f_sinh, {-4, 4}, {kNaN, kInf, -kInf, 0.0, -0.0, 1e-3, 30.0, -30.0, 89.0});
HAL_UNARY_SUITE(cosh, kAll, Out::kFloat, f_cosh, {-4, 4}, {kNaN, kInf, -kInf, 0.0, -0.0, 1e-3, 30.0, -30.0, 89.0});
HAL_UNARY_SUITE(asinh, kAll, Out::kFloat, f_asinh, {-4, 4}, kSpecials);
HAL_UNARY_SUITE(acosh, kAll, Out::kFloat, f_acosh, {1, 5}, {kNaN, kInf, -kInf, 1.0, 0.5, 0.0, 1.001, 100.0});
HAL_UNARY_SUITE(atanh, kAll, Out::kFloat, f_atanh, {-0.99, 0.99}, kUnitSpecials);
HAL_UNARY_SUITE(log2, kAll, Out::kFloat, f_log2, {0.05, 4}, {kNaN, kInf, -kInf, 0.0, -0.0, -1.0, 1.0, 8.0, 0.25});
HAL_UNARY_SUITE(log10, kAll, Out::kFloat, f_log10, {0.05, 4}, {kNaN, kInf, -kInf, 0.0, -0.0, -1.0, 1.0, 1000.0, 0.01});
HAL_UNARY_SUITE(exp2, kAll, Out::kFloat, f_exp2, {-4, 4}, {kNaN, kInf, -kInf, 0.0, 10.0, -3.0, 127.0, 128.0, -149.0});
HAL_UNARY_SUITE(trunc, kNumeric, Out::kSame, f_trunc, {-4, 4}, kRoundSpecials, BOOL);
HAL_UNARY_SUITE(signbit, kAll, Out::kBool, f_signbit, {-3, 3}, {kNaN, -kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0});
HAL_UNARY_SUITE(erfc, kAll, Out::kFloat, f_erfc, {-3, 3}, {kNaN, kInf, -kInf, 0.0, 5.0, 9.0, -5.0});
HAL_UNARY_SUITE(erfcx, kAll, Out::kFloat, f_erfcx, {-3, 5}, {kNaN, kInf, 0.0, 1.0, 10.0, 60.0, 1e4, -1.0, -9.0, -30.0});
HAL_UNARY_SUITE(erfinv, kAll, Out::kFloat, f_erfinv, {-0.99, 0.99}, {kNaN, 1.0, -1.0, 0.0, -0.0, 0.999, -0.5, 1.5, -2.0});
HAL_UNARY_SUITE(ndtri, kAll, Out::kFloat, f_ndtri, {0.01, 0.99}, {kNaN, 0.0, 1.0, 0.5, 1e-10, 0.999, 1.5, -0.5});
HAL_UNARY_SUITE(lgamma, kAll, Out::kFloat, f_lgamma, {0.1, 6}, kGammaSpecials);
HAL_UNARY_SUITE(digamma, kAll, Out::kFloat, f_digamma, {0.1, 6}, kGammaSpecials);
HAL_UNARY_SUITE(i0, kAll, Out::kFloat, f_i0, {-6, 6}, {kNaN, 0.0, -0.0, 1.0, 20.0, -20.0, 30.0});
HAL_UNARY_SUITE(i0e, kAll, Out::kFloat, f_i0e, {-6, 6}, {kNaN, 0.0, 1.0, 20.0, -20.0, 30.0});
HAL_UNARY_SUITE(i1, kAll, Out::kFloat, f_i1, {-6, 6}, {kNaN, 0.0, -0.0, 1.0, 20.0, -20.0, 30.0});
HAL_UNARY_SUITE(i1e, kAll, Out::kFloat, f_i1e, {-6, 6}, {kNaN, 0.0, 1.0, 20.0, -20.0, 30.0});

// polygamma: attribute n; known values check the series independently:
// ψ'(1) = π²/6, ψ''(1) = -2ζ(3), ψ⁽³⁾(1/2) = π⁴.
std::vector<OpCase> polygamma_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases;
  for (int64_t n : {0, 1, 2, 3, 4}) {
    std::string tag = "n=" + std::to_string(n);
    cases.push_back(OpCase(tag + " [3,5]").in(random(dt, {3, 5}, 10 + n, 0.2, 6)).attr(Attr::i("n", n)));
    if (is_float(dt)) {
      cases.push_back(OpCase(tag + " negative non-integers").in(values(dt, {-0.5, -1.5, -2.25, -3.75})).attr(Attr::i("n", n)));
      cases.push_back(OpCase(tag + " special values").in(values(dt, {kNaN, 1.0, 0.5, 30.0, 1e-3})).attr(Attr::i("n", n)));
    }
  }
  cases.push_back(OpCase("0-d").in(random(dt, {}, 20, 0.5, 3)).attr(Attr::i("n", 1)));
  cases.push_back(OpCase("zero-size [0,3]").in(random(dt, {0, 3}, 21)).attr(Attr::i("n", 2)));
  if (dt == F32) {
    cases.push_back(OpCase("negative n").in(random(dt, {3}, 22)).attr(Attr::i("n", -1))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"polygamma", "'n'", "-1"}));
    cases.push_back(OpCase("n missing").in(random(dt, {3}, 23))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"polygamma", "n"}));
    cases.push_back(OpCase("n of wrong type").in(random(dt, {3}, 24)).attr(Attr::f("n", 1.5))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"polygamma", "n"}));
  }
  return cases;
}
std::vector<HostTensor> polygamma_ref(const OpCase& c) {
  HAL_REF_ERROR_GUARD(c);
  const HostTensor& x = c.input(0);
  const int n = static_cast<int>(c.attr_int("n", 0));
  hal_dtype_e out = to_float(x.dtype);
  return {eval(out, out, {&x}, [&](const double* v) {
    double a = v[0];
    if (n == 0) return f_digamma(a);
    if (std::isnan(a)) return a;
    if (a == 1.0 && n == 1) return 1.6449340668482264;  // π²/6
    if (a == 1.0 && n == 2) return -2.4041138063191885;  // -2ζ(3)
    if (a == 0.5 && n == 3) return 97.409091034002437;   // π⁴
    if (a <= 0 && a == std::trunc(a)) return (n % 2) ? kInf : -kInf;  // the pole's sign of (-1)^(n+1)
    // Below 0: ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x + m) + (-1)^(n+1) n! Σ_{k<m} (x+k)^-(n+1) (no reflection).
    long double fact = 1, acc = 0, y = a;
    for (int k = 2; k <= n; ++k) fact *= k;
    for (; y < 0; y += 1) acc += ((n % 2) ? 1 : -1) * fact / std::pow(y, static_cast<long double>(n + 1));
    return static_cast<double>(psi_n(n, y) + acc);
  })};
}
HAL_CONFORMANCE_SUITE(polygamma, polygamma_cases, polygamma_ref, kAll);

// Bessel functions (catalog 1.5). References: glibc's long double j0l/j1l/y0l/y1l;
// K by the trapezoidal rule in long double (finer step than the SDK's) and the
// tabulated K0(1), K1(1), K0(2); j0 = sin x / x in long double.
double f_bessel_j0(double x) { return static_cast<double>(::j0l(x)); }
double f_bessel_j1(double x) { return static_cast<double>(::j1l(x)); }
double f_bessel_y0(double x) { return x < 0 || std::isnan(x) ? kNaN : static_cast<double>(::y0l(x)); }
double f_bessel_y1(double x) { return x < 0 || std::isnan(x) ? kNaN : static_cast<double>(::y1l(x)); }
double bessel_k_ref(int nu, double x, bool scaled) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return kInf;
  if (x == kInf) return 0;
  if (!scaled && x == 1) return nu == 0 ? 0.42102443824070833 : 0.60190723019723457;
  if (!scaled && x == 2 && nu == 0) return 0.11389387274953344;
  const long double h = std::min(0.05L, 0.25L / std::sqrt(static_cast<long double>(x)));
  long double sum = 0.5L;
  for (int k = 1; k < 400000; ++k) {
    long double t = k * h, e = std::exp(-static_cast<long double>(x) * (std::cosh(t) - 1));
    long double term = nu == 0 ? e : e * std::cosh(t);
    sum += term;
    if (term < 1e-22L * sum) break;
  }
  long double v = sum * h;
  return static_cast<double>(scaled ? v : v * std::exp(-static_cast<long double>(x)));
}
double f_modified_bessel_k0(double x) { return bessel_k_ref(0, x, false); }
double f_modified_bessel_k1(double x) { return bessel_k_ref(1, x, false); }
double f_scaled_modified_bessel_k0(double x) { return bessel_k_ref(0, x, true); }
double f_scaled_modified_bessel_k1(double x) { return bessel_k_ref(1, x, true); }
double f_spherical_bessel_j0(double x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return 0;
  if (x == 0) return 1;
  return static_cast<double>(std::sin(static_cast<long double>(x)) / x);
}
const std::vector<double> kBesselSpecials = {kNaN, kInf, 0.0, -0.0, 1.0, 2.0, 30.0, -1.0, 2.404825557695773};
HAL_UNARY_SUITE(bessel_j0, kAll, Out::kFloat, f_bessel_j0, {-10, 10}, kBesselSpecials);
HAL_UNARY_SUITE(bessel_j1, kAll, Out::kFloat, f_bessel_j1, {-10, 10}, kBesselSpecials);
HAL_UNARY_SUITE(bessel_y0, kAll, Out::kFloat, f_bessel_y0, {0.1, 10}, kBesselSpecials);
HAL_UNARY_SUITE(bessel_y1, kAll, Out::kFloat, f_bessel_y1, {0.1, 10}, kBesselSpecials);
HAL_UNARY_SUITE(modified_bessel_k0, kAll, Out::kFloat, f_modified_bessel_k0, {0.05, 8}, kBesselSpecials);
HAL_UNARY_SUITE(modified_bessel_k1, kAll, Out::kFloat, f_modified_bessel_k1, {0.05, 8}, kBesselSpecials);
HAL_UNARY_SUITE(scaled_modified_bessel_k0, kAll, Out::kFloat, f_scaled_modified_bessel_k0, {0.05, 8},
                {kNaN, kInf, 0.0, 1.0, 2.0, 30.0, -1.0, 500.0});
HAL_UNARY_SUITE(scaled_modified_bessel_k1, kAll, Out::kFloat, f_scaled_modified_bessel_k1, {0.05, 8},
                {kNaN, kInf, 0.0, 1.0, 2.0, 30.0, -1.0, 500.0});
HAL_UNARY_SUITE(spherical_bessel_j0, kAll, Out::kFloat, f_spherical_bessel_j0, {-10, 10},
                {kNaN, kInf, -kInf, 0.0, -0.0, 1e-4, 0.49, 0.51, 3.141592653589793});

// gelu: unary with the approximate attribute.
std::vector<OpCase> gelu_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("[3,5]").in(random(dt, {3, 5}, 1, -4, 4)),
      OpCase("tanh [3,5]").in(random(dt, {3, 5}, 1, -4, 4)).attr(Attr::s("approximate", "tanh")),
      OpCase("none explicit").in(random(dt, {4}, 2, -4, 4)).attr(Attr::s("approximate", "none")),
      OpCase("0-d").in(random(dt, {}, 3)),
      OpCase("tanh 0-d").in(random(dt, {}, 3)).attr(Attr::s("approximate", "tanh")),
      OpCase("zero-size [0,3]").in(random(dt, {0, 3}, 4)),
      OpCase("long [7,37]").in(random(dt, {7, 37}, 5, -6, 6)),
      OpCase("tanh long [7,37]").in(random(dt, {7, 37}, 5, -6, 6)).attr(Attr::s("approximate", "tanh")),
      OpCase("special values").in(values(dt, kFiniteSpecials)),
      OpCase("tanh special values").in(values(dt, kFiniteSpecials)).attr(Attr::s("approximate", "tanh")),
  };
  if (dt == F32) {
    cases.push_back(OpCase("bad approximate choice")
                        .in(random(dt, {3}, 6))
                        .attr(Attr::s("approximate", "fast"))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"gelu", "approximate", "fast"}));
    cases.push_back(OpCase("approximate of wrong type")
                        .in(random(dt, {3}, 6))
                        .attr(Attr::i("approximate", 1))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"gelu", "approximate"}));
    cases.push_back(OpCase("unknown attribute")
                        .in(random(dt, {3}, 6))
                        .attr(Attr::s("approx", "tanh"))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"gelu", "unknown attribute 'approx'"}));
    cases.push_back(OpCase("unsupported dtype")
                        .in(random(I32, {3}, 6))
                        .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(I32, {3})}, {"gelu", "int32"}));
  }
  return cases;
}
std::vector<HostTensor> gelu_ref(const OpCase& c) {
  HAL_REF_ERROR_GUARD(c);
  bool tanh = c.attr_string("approximate", "none") == "tanh";
  const HostTensor& x = c.input(0);
  return {eval(x.dtype, x.dtype, {&x}, [&](const double* v) { return tanh ? gelu_tanh(v[0]) : gelu_exact(v[0]); })};
}
HAL_CONFORMANCE_SUITE(gelu, gelu_cases, gelu_ref, kFloats);

// ---- backward (grad_output, saved tensor) -------------------------------------------

struct BackwardDef {
  const char* op;
  double (*f)(double g, double x, bool tanh);
  Domain domain;  // of the saved tensor
  bool has_approximate = false;
};

std::vector<OpCase> backward_cases(const BackwardDef& d, hal_dtype_e dt) {
  auto saved = [&](std::vector<int64_t> s, uint64_t seed) { return random(dt, std::move(s), seed, d.domain.lo, d.domain.hi); };
  std::vector<OpCase> cases = {
      OpCase("[3,5]").in(random(dt, {3, 5}, 1)).in(saved({3, 5}, 2)),
      OpCase("0-d").in(random(dt, {}, 3)).in(saved({}, 4)),
      OpCase("zero-size [0,3]").in(random(dt, {0, 3}, 5)).in(saved({0, 3}, 6)),
      OpCase("long [7,37]").in(random(dt, {7, 37}, 7)).in(saved({7, 37}, 8)),
  };
  if (d.has_approximate) {
    cases.push_back(OpCase("tanh [3,5]").in(random(dt, {3, 5}, 1)).in(saved({3, 5}, 2))
                        .attr(Attr::s("approximate", "tanh")));
    cases.push_back(OpCase("tanh long [7,37]").in(random(dt, {7, 37}, 7)).in(saved({7, 37}, 8))
                        .attr(Attr::s("approximate", "tanh")));
  }
  if (dt == F32) {
    cases.push_back(OpCase("shape mismatch")
                        .in(random(dt, {2, 3}, 9))
                        .in(saved({3, 2}, 10))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {d.op, "[2, 3]", "[3, 2]"}));
    cases.push_back(OpCase("no broadcasting")
                        .in(random(dt, {2, 3}, 9))
                        .in(saved({3}, 10))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {d.op, "[3]"}));
    cases.push_back(OpCase("unsupported dtype")
                        .in(random(I32, {3}, 11))
                        .in(random(I32, {3}, 12))
                        .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(I32, {3})}, {d.op, "int32"}));
    if (d.has_approximate)
      cases.push_back(OpCase("bad approximate choice")
                          .in(random(dt, {3}, 9))
                          .in(saved({3}, 10))
                          .attr(Attr::s("approximate", "erf"))
                          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {d.op, "approximate", "erf"}));
  }
  return cases;
}

std::vector<HostTensor> backward_ref(const BackwardDef& d, const OpCase& c) {
  HAL_REF_ERROR_GUARD(c);
  bool tanh = c.attr_string("approximate", "none") == "tanh";
  const HostTensor& g = c.input(0);
  return {eval(g.dtype, g.dtype, {&g, &c.input(1)}, [&](const double* v) { return d.f(v[0], v[1], tanh); })};
}

#define HAL_BACKWARD_SUITE(NAME, ...)                                                              \
  const BackwardDef NAME##_def{#NAME, __VA_ARGS__};                                                \
  HAL_CONFORMANCE_SUITE(                                                                           \
      NAME, [](hal_dtype_e dt) { return backward_cases(NAME##_def, dt); },                         \
      [](const OpCase& c) { return backward_ref(NAME##_def, c); }, kFloats)

double relu_grad(double g, double x, bool) { return x <= 0 ? 0.0 : g; }  // PyTorch threshold_backward
double gelu_grad(double g, double x, bool tanh) {
  if (tanh) {
    double inner = kSqrt2_Pi * (x + 0.044715 * x * x * x);
    double t = std::tanh(inner);
    double dinner = kSqrt2_Pi * (1.0 + 3.0 * 0.044715 * x * x);
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner);
  }
  double cdf = 0.5 * (1.0 + std::erf(x * kSqrt1_2));
  double pdf = std::exp(-0.5 * x * x) * 0.39894228040143267794;
  return g * (cdf + x * pdf);
}
double silu_grad(double g, double x, bool) {
  double s = sigmoid(x);
  return g * s * (1.0 + x * (1.0 - s));
}
double sigmoid_grad(double g, double y, bool) { return g * y * (1.0 - y); }
double tanh_grad(double g, double y, bool) { return g * (1.0 - y * y); }

HAL_BACKWARD_SUITE(relu_backward, relu_grad, {-2, 2});
HAL_BACKWARD_SUITE(gelu_backward, gelu_grad, {-4, 4}, true);
HAL_BACKWARD_SUITE(silu_backward, silu_grad, {-6, 6});
HAL_BACKWARD_SUITE(sigmoid_backward, sigmoid_grad, {0, 1});
HAL_BACKWARD_SUITE(tanh_backward, tanh_grad, {-1, 1});

// ---- n-ary (broadcasting, promoting) ------------------------------------------------

// An n-ary op: F(x, case) over the inputs cast to the computing dtype.
struct NaryDef {
  const char* op;
  uint64_t dtypes;
  Out out;
  double (*f)(const double* x, const OpCase& c);
  int arity = 2;
  // Generator of input K for a case of dtype DT.
  HostTensor (*input)(int k, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) = nullptr;
  // Op-specific extra cases (attributes, special values, bad inputs).
  void (*extra)(hal_dtype_e dt, std::vector<OpCase>& cases) = nullptr;
};

HostTensor any_input(int, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  return random(dt, std::move(shape), seed, is_int(dt) ? -60.0 : -2.0, is_int(dt) ? 60.0 : 2.0);
}
// Divisor-like operand: input 1 never 0 (integer division by zero is
// undefined; float division by zero has its own case).
HostTensor divisor_input(int k, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  if (k == 1) return random_nonzero(dt, std::move(shape), seed, is_int(dt) ? 1.0 : 0.25, is_int(dt) ? 9.0 : 2.0);
  return any_input(k, dt, std::move(shape), seed);
}

hal_dtype_e nary_out_dtype(const NaryDef& d, hal_dtype_e common, const OpCase& c) {
  switch (d.out) {
    case Out::kBool: return BOOL;
    case Out::kFloat: return to_float(common);
    case Out::kDiv: return c.attr_string("rounding_mode", "none") == "none" ? to_float(common) : common;
    default: return common;
  }
}

std::vector<HostTensor> nary_ref(const NaryDef& d, const OpCase& c) {
  HAL_REF_ERROR_GUARD(c);
  std::vector<const HostTensor*> ins = present_inputs(c);
  hal_dtype_e common = result_type(ins);
  hal_dtype_e out = nary_out_dtype(d, common, c);
  // True division of integers computes in float.
  hal_dtype_e compute = d.out == Out::kDiv && out != common ? out : common;
  return {eval(out, compute, ins, [&](const double* x) { return d.f(x, c); })};
}

std::vector<HostTensor> nary_error_outputs(const NaryDef& d, hal_dtype_e dt, std::vector<int64_t> shape) {
  return {HostTensor(d.out == Out::kBool ? BOOL : d.out == Out::kDiv ? to_float(dt) : dt, std::move(shape))};
}

std::vector<OpCase> nary_cases(const NaryDef& d, hal_dtype_e dt) {
  auto in = [&](int k, std::vector<int64_t> shape, uint64_t seed) { return d.input(k, dt, std::move(shape), seed); };
  // One case of the shapes SHAPES (one per input).
  auto make = [&](std::string name, std::vector<std::vector<int64_t>> shapes, uint64_t seed) {
    OpCase c(std::move(name));
    for (int k = 0; k < d.arity; ++k) c.in(in(k, shapes[static_cast<size_t>(k) % shapes.size()], seed * 10 + k));
    return c;
  };
  std::vector<OpCase> cases = {
      make("same shape [3,4]", {{3, 4}}, 1),
      make("broadcast [3,1]x[4]", {{3, 1}, {4}, {1}}, 2),
      make("broadcast [2,1,5]x[3,1]", {{2, 1, 5}, {3, 1}, {1, 5}}, 3),
      make("0-d", {std::vector<int64_t>{}}, 4),
      make("0-d with [3,4]", {{3, 4}, {}}, 5),
      make("zero-size [0,4]x[4]", {{0, 4}, {4}, {1}}, 6),
      make("long [5,67]", {{5, 67}}, 7),
  };
  // Mixed dtypes (PyTorch promotion), grouped under the dtype they compute in.
  auto mixed = [&](std::string name, std::vector<HostTensor> first_two) {
    OpCase c(std::move(name));
    for (int k = 0; k < d.arity; ++k) c.in(k < 2 ? first_two[k] : in(k, {3, 4}, 90 + k));
    return c;
  };
  if (dt == F32 && allows(d.dtypes, I32))
    cases.push_back(mixed("int32 with float32", {d.input(0, I32, {3, 4}, 81), in(1, {3, 4}, 82)}));
  if (dt == F32 && allows(d.dtypes, I32))
    cases.push_back(mixed("0-d float32 with int32 tensor", {d.input(0, I32, {3, 4}, 83), in(1, {}, 84)}));
  if (dt == F32)
    cases.push_back(mixed("0-d float64 with float32 tensor", {in(0, {3, 4}, 85), d.input(1, F64, {}, 86)}));
  if (dt == F32 && allows(d.dtypes, F16) && allows(d.dtypes, BF16))
    cases.push_back(mixed("float16 with bfloat16", {d.input(0, F16, {3, 4}, 87), d.input(1, BF16, {4}, 88)}));
  if (dt == I16 && allows(d.dtypes, U8))
    cases.push_back(mixed("uint8 with int8", {d.input(0, U8, {3, 4}, 89), d.input(1, I8, {3, 4}, 90)}));
  if (dt == I64 && allows(d.dtypes, BOOL))
    cases.push_back(mixed("bool with int64", {d.input(0, BOOL, {3, 4}, 91), in(1, {3, 4}, 92)}));
  // Bad inputs common to every n-ary op, once per suite.
  hal_dtype_e first = allows(d.dtypes, F32) ? F32 : I32;
  if (dt == first) {
    OpCase c = make("broadcast-incompatible [2,3]x[4]", {{2, 3}, {4}}, 50);
    cases.push_back(c.error(HAL_STATUS_INVALID_ARGUMENT, nary_error_outputs(d, dt, {2, 3}),
                            {d.op, "does not broadcast", "[4]"}));
    OpCase u = make("unknown attribute", {{3}}, 51);
    cases.push_back(u.attr(Attr::f("bogus", 1.0))
                        .error(HAL_STATUS_INVALID_ARGUMENT, nary_error_outputs(d, dt, {3}),
                               {d.op, "unknown attribute 'bogus'"}));
    hal_dtype_e refused = !allows(d.dtypes, BOOL) ? BOOL : !allows(d.dtypes, F32) ? F32 : HAL_DTYPE_INVALID;
    if (refused != HAL_DTYPE_INVALID) {
      OpCase r("unsupported dtype");
      for (int k = 0; k < d.arity; ++k) r.in(random(refused, {3}, 52 + k));
      cases.push_back(r.error(HAL_STATUS_UNSUPPORTED_DTYPE, nary_error_outputs(d, refused, {3}),
                              {d.op, dtype_str(refused)}));
    }
  }
  if (d.extra) d.extra(dt, cases);
  return cases;
}

#define HAL_NARY_SUITE(NAME, ...)                                                                  \
  const NaryDef NAME##_def{#NAME, __VA_ARGS__};                                                    \
  HAL_CONFORMANCE_SUITE(                                                                           \
      NAME, [](hal_dtype_e dt) { return nary_cases(NAME##_def, dt); },                             \
      [](const OpCase& c) { return nary_ref(NAME##_def, c); }, NAME##_def.dtypes)

// Values producing special results, as a [N] tensor pair (SELF, OTHER).
OpCase special_pair(const char* name, hal_dtype_e dt, std::vector<double> a, std::vector<double> b) {
  return OpCase(name).in(values(dt, std::move(a))).in(values(dt, std::move(b)));
}

// Bad-attribute cases of a scalar attribute ATTR (wrong type).
void scalar_attr_cases(const char* op, const char* attr, hal_dtype_e dt, int arity, std::vector<OpCase>& cases) {
  OpCase c("attribute of wrong type");
  for (int k = 0; k < arity; ++k) c.in(random(dt, {3}, 60 + k));
  cases.push_back(c.attr(Attr::s(attr, "two")).error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {op, attr}));
}

// add / sub: self ± alpha·other; alpha integral for integer dtypes (as PyTorch requires).
double alpha_of(const OpCase& c) { return c.attr_float("alpha", 1.0); }
void alpha_extra(const char* op, hal_dtype_e dt, std::vector<OpCase>& cases) {
  double alpha = is_float(dt) ? 0.5 : dt == BOOL ? 1.0 : 3.0;
  cases.push_back(OpCase("alpha").in(any_input(0, dt, {3, 4}, 70)).in(any_input(1, dt, {4}, 71))
                      .attr(Attr::scalar("alpha", alpha)));
  if (dt != BOOL)
    cases.push_back(OpCase("alpha integer attr").in(any_input(0, dt, {3, 4}, 72)).in(any_input(1, dt, {3, 4}, 73))
                        .attr(Attr::i("alpha", -2)));
  if (is_float(dt)) cases.push_back(special_pair("inf and nan", dt, {kInf, -kInf, kNaN, kInf, 1}, {-kInf, 1, 2, kInf, kNaN}));
  if (dt == F32) scalar_attr_cases(op, "alpha", dt, 2, cases);
}

HAL_NARY_SUITE(add, kAll, Out::kPromoted,
               [](const double* x, const OpCase& c) { return x[0] + alpha_of(c) * x[1]; }, 2, any_input,
               [](hal_dtype_e dt, std::vector<OpCase>& cases) { alpha_extra("add", dt, cases); });
HAL_NARY_SUITE(sub, kNumeric, Out::kPromoted,
               [](const double* x, const OpCase& c) { return x[0] - alpha_of(c) * x[1]; }, 2, any_input,
               [](hal_dtype_e dt, std::vector<OpCase>& cases) { alpha_extra("sub", dt, cases); });
HAL_NARY_SUITE(mul, kAll, Out::kPromoted, [](const double* x, const OpCase&) { return x[0] * x[1]; }, 2, any_input,
               [](hal_dtype_e dt, std::vector<OpCase>& cases) {
                 if (is_float(dt)) cases.push_back(special_pair("inf and nan", dt, {kInf, 0, kNaN, -kInf}, {0, kInf, 1, 2}));
               });

double div_f(const double* x, const OpCase& c) {
  std::string mode = c.attr_string("rounding_mode", "none");
  double q = x[0] / x[1];
  return mode == "trunc" ? std::trunc(q) : mode == "floor" ? std::floor(q) : q;
}
HAL_NARY_SUITE(div, kAll, Out::kDiv, div_f, 2, divisor_input, [](hal_dtype_e dt, std::vector<OpCase>& cases) {
  if (dt != BOOL)
    for (const char* mode : {"trunc", "floor", "none"}) {
      std::string m(mode);
      cases.push_back(OpCase(m + " [3,4]x[4]").in(divisor_input(0, dt, {3, 4}, 74)).in(divisor_input(1, dt, {4}, 75))
                          .attr(Attr::s("rounding_mode", m)));
      cases.push_back(OpCase(m + " mixed signs").in(values(dt, {7, -7, 7, -7, 1, -1, 0}))
                          .in(values(dt, {2, 2, -2, -2, 3, 3, 5})).attr(Attr::s("rounding_mode", m)));
    }
  if (is_float(dt)) {
    cases.push_back(special_pair("division by zero", dt, {1, -1, 0, kInf, kNaN}, {0, 0, 0, 0, 0}));
    cases.push_back(special_pair("floor division by zero", dt, {1, -1, 0}, {0, -0.0, 0})
                        .attr(Attr::s("rounding_mode", "floor")));
  }
  if (is_int(dt))
    for (const char* mode : {"trunc", "floor"})
      cases.push_back(special_pair("integer division by zero", dt, {1, 2, 3}, {1, 0, 2})
                          .attr(Attr::s("rounding_mode", mode))
                          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"div", "division by zero", "position 1"}));
  if (dt == I32)
    cases.push_back(OpCase("true division of integers").in(values(I32, {7, -7, 1, 0})).in(values(I32, {2, 2, 3, 5})));
  if (dt == F32) {
    cases.push_back(OpCase("bad rounding_mode choice").in(random(dt, {3}, 76)).in(random_nonzero(dt, {3}, 77))
                        .attr(Attr::s("rounding_mode", "round"))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"div", "rounding_mode", "round"}));
    cases.push_back(OpCase("rounding_mode of wrong type").in(random(dt, {3}, 76)).in(random_nonzero(dt, {3}, 77))
                        .attr(Attr::i("rounding_mode", 1))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"div", "rounding_mode"}));
  }
});

// pow: integer exponents stay >= 0 for integer dtypes (PyTorch refuses negative ones).
HostTensor pow_input(int k, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  if (is_int(dt)) return k == 0 ? random(dt, std::move(shape), seed, -3, 4) : random(dt, std::move(shape), seed, 0, 4);
  return k == 0 ? random(dt, std::move(shape), seed, 0.1, 2) : random(dt, std::move(shape), seed, -2, 2);
}
HAL_NARY_SUITE(pow, kNumeric, Out::kPromoted, [](const double* x, const OpCase&) { return std::pow(x[0], x[1]); }, 2,
               pow_input, [](hal_dtype_e dt, std::vector<OpCase>& cases) {
                 if (is_float(dt)) {
                   cases.push_back(special_pair("negative base, integer exponent", dt, {-2, -2, -1.5, -3, 0, 0},
                                                {2, 3, -1, 0, 0, -1}));
                   cases.push_back(special_pair("nan and inf", dt, {kNaN, 1, -1.5, 2, 0.5}, {1, kNaN, 0.5, kInf, -kInf}));
                 }
                 if (is_int(dt) && dt != U8)  // PyTorch refuses negative integer exponents
                   cases.push_back(special_pair("negative integer exponent", dt, {2, 2, 3}, {1, 2, -1})
                                       .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})},
                                              {"pow", "negative integer powers", "position 2"}));
               });

double max_f(const double* x, const OpCase&) { return std::isnan(x[0]) || std::isnan(x[1]) ? kNaN : std::max(x[0], x[1]); }
double min_f(const double* x, const OpCase&) { return std::isnan(x[0]) || std::isnan(x[1]) ? kNaN : std::min(x[0], x[1]); }
void nan_inf_pairs(hal_dtype_e dt, std::vector<OpCase>& cases) {
  if (is_float(dt))
    cases.push_back(special_pair("nan and inf", dt, {kNaN, 1, kNaN, kInf, -kInf, kInf, 0}, {1, kNaN, kNaN, 1, 1, -kInf, -0.0}));
}
HAL_NARY_SUITE(maximum, kAll, Out::kPromoted, max_f, 2, any_input, nan_inf_pairs);
HAL_NARY_SUITE(minimum, kAll, Out::kPromoted, min_f, 2, any_input, nan_inf_pairs);

void modulo_specials(const char* op, hal_dtype_e dt, std::vector<OpCase>& cases) {
  cases.push_back(special_pair("mixed signs", dt, {7, -7, 7, -7, 6, -6}, {3, 3, -3, -3, 3, -3}));
  if (is_int(dt))  // PyTorch: ZeroDivisionError
    cases.push_back(special_pair("integer division by zero", dt, {1, 2, 3, 4}, {1, 2, 0, 0})
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4})}, {op, "division by zero", "position 2"}));
  if (is_float(dt)) {
    cases.push_back(special_pair("by zero and inf", dt, {1, -1, kInf, 1, kNaN}, {0, 0, 2, kInf, 2}));
    cases.push_back(special_pair("fractions", dt, {5.5, -5.5, 5.5, -5.5}, {2, 2, -2, -2}));
  }
}
HAL_NARY_SUITE(fmod, kNumeric, Out::kPromoted, [](const double* x, const OpCase&) { return std::fmod(x[0], x[1]); }, 2,
               divisor_input, [](hal_dtype_e dt, std::vector<OpCase>& cases) { modulo_specials("fmod", dt, cases); });
double remainder_f(const double* x, const OpCase&) {
  double r = std::fmod(x[0], x[1]);
  return r != 0 && ((r < 0) != (x[1] < 0)) ? r + x[1] : r;
}
HAL_NARY_SUITE(remainder, kNumeric, Out::kPromoted, remainder_f, 2, divisor_input,
               [](hal_dtype_e dt, std::vector<OpCase>& cases) { modulo_specials("remainder", dt, cases); });

// atan2, hypot, fmax, fmin, nextafter, copysign, zeta (catalog 1.4).
void atan2_specials(hal_dtype_e dt, std::vector<OpCase>& cases) {
  if (is_float(dt))
    cases.push_back(special_pair("signed zeros, inf, nan", dt, {0.0, -0.0, 0.0, -0.0, 1, -1, kInf, kInf, kNaN, 1},
                                 {0.0, 0.0, -0.0, -0.0, 0, 0, kInf, -kInf, 1, kNaN}));
  if (dt == I32) cases.push_back(OpCase("integers give float32").in(values(I32, {1, -1, 0, 3})).in(values(I32, {1, 1, -2, 0})));
}
HAL_NARY_SUITE(atan2, kAll, Out::kFloat, [](const double* x, const OpCase&) { return std::atan2(x[0], x[1]); }, 2,
               any_input, atan2_specials);
HAL_NARY_SUITE(hypot, kFloats, Out::kPromoted, [](const double* x, const OpCase&) { return std::hypot(x[0], x[1]); }, 2,
               any_input, [](hal_dtype_e dt, std::vector<OpCase>& cases) {
                 cases.push_back(special_pair("inf beats nan, no overflow", dt, {kInf, kNaN, 3e38, 1e-30, -3, 0},
                                              {kNaN, -kInf, 3e38, 1e-30, 4, -0.0}));
               });
double fmax_f(const double* x, const OpCase&) { return std::fmax(x[0], x[1]); }
double fmin_f(const double* x, const OpCase&) { return std::fmin(x[0], x[1]); }
HAL_NARY_SUITE(fmax, kAll, Out::kPromoted, fmax_f, 2, any_input, nan_inf_pairs);
HAL_NARY_SUITE(fmin, kAll, Out::kPromoted, fmin_f, 2, any_input, nan_inf_pairs);
// nextafter: the reference steps in the case's own dtype (float32 or float64).
std::vector<OpCase> nextafter_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("[3,4]").in(random(dt, {3, 4}, 1)).in(random(dt, {3, 4}, 2)),
      OpCase("broadcast [3,1]x[4]").in(random(dt, {3, 1}, 3)).in(random(dt, {4}, 4)),
      OpCase("0-d").in(random(dt, {}, 5)).in(random(dt, {}, 6)),
      special_pair("specials", dt, {0.0, 0.0, 1.0, 1.0, kInf, kNaN, 1, -0.0, 1e-30}, {1.0, -1.0, 1.0, kInf, 0, 1, kNaN, 0.0, 0}),
  };
  if (dt == F32) {
    cases.push_back(OpCase("broadcast-incompatible [2,3]x[4]").in(random(dt, {2, 3}, 7)).in(random(dt, {4}, 8))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"nextafter", "does not broadcast"}));
    cases.push_back(OpCase("unsupported dtype").in(random(I32, {3}, 9)).in(random(I32, {3}, 10))
                        .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(I32, {3})}, {"nextafter", "int32"}));
  }
  return cases;
}
std::vector<HostTensor> nextafter_ref(const OpCase& c) {
  HAL_REF_ERROR_GUARD(c);
  std::vector<const HostTensor*> ins = present_inputs(c);
  hal_dtype_e dt = result_type(ins);
  return {eval(dt, dt, ins, [&](const double* x) {
    return dt == F32 ? static_cast<double>(std::nextafter(static_cast<float>(x[0]), static_cast<float>(x[1])))
                     : std::nextafter(x[0], x[1]);
  })};
}
HAL_CONFORMANCE_SUITE(nextafter, nextafter_cases, nextafter_ref, bit(F32) | bit(F64));
HAL_NARY_SUITE(copysign, kAll, Out::kFloat, [](const double* x, const OpCase&) { return std::copysign(x[0], x[1]); }, 2,
               any_input, [](hal_dtype_e dt, std::vector<OpCase>& cases) {
                 if (is_float(dt))
                   cases.push_back(special_pair("signed zeros, inf, nan", dt, {1, 1, kInf, kNaN, 0.0, -2},
                                                {-0.0, 0.0, -1, -1, -kInf, kNaN}));
               });
// zeta(s, q): s in [1.5, 5], q in [0.25, 4]; known values ζ(2, 1) = π²/6,
// ζ(4, 1) = π⁴/90, ζ(3, 2) = ζ(3) - 1, and PyTorch's special points.
HostTensor zeta_input(int k, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  if (is_int(dt)) return random(dt, std::move(shape), seed, k == 0 ? 2 : 1, 5);
  return random(dt, std::move(shape), seed, k == 0 ? 1.5 : 0.25, k == 0 ? 5.0 : 4.0);
}
double zeta_f(const double* x, const OpCase&) {
  double s = x[0], q = x[1];
  if (std::isnan(s) || std::isnan(q)) return kNaN;
  if (s == 1) return kInf;
  if (s < 1) return kNaN;
  if (q <= 0 && q == std::floor(q)) return kInf;
  if (q <= 0 && s != std::floor(s)) return kNaN;
  if (s == 2 && q == 1) return 1.6449340668482264;
  if (s == 4 && q == 1) return 1.0823232337111382;
  if (s == 3 && q == 2) return 0.20205690315959429;
  // Direct sum up to q + N >= 2000, then ∫ + half term + the B2 term, in long double.
  const long double ls = s;
  long double sum = 0, a = q;
  for (; a < 2000; a += 1) sum += std::pow(a, -ls);
  sum += std::pow(a, 1 - ls) / (ls - 1) + std::pow(a, -ls) / 2 + ls * std::pow(a, -ls - 1) / 12;
  return static_cast<double>(sum);
}
HAL_NARY_SUITE(zeta, kAll, Out::kFloat, zeta_f, 2, zeta_input, [](hal_dtype_e dt, std::vector<OpCase>& cases) {
  if (is_float(dt))
    cases.push_back(special_pair("known values and poles", dt, {2, 4, 3, 1, 0.5, 2, 2, 2.5, kNaN}, {1, 1, 2, 3, 3, 0, -2, -1.5, 1}));
});

// igamma / igammac (catalog 1.5): P(a, x) and Q = 1 - P. The reference sums
// P's power series in long double (positive terms) and uses the closed forms
// P(1, x) = 1 - e^-x and P(1/2, x) = erf(√x); PyTorch's special values.
HostTensor igamma_input(int k, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  if (is_int(dt)) return random(dt, std::move(shape), seed, k == 0 ? 1 : 0, k == 0 ? 6 : 9);
  return random(dt, std::move(shape), seed, k == 0 ? 0.1 : 0.0, k == 0 ? 6.0 : 10.0);
}
double incomplete_gamma_ref(double a, double x, bool upper) {
  if (std::isnan(a) || std::isnan(x) || a < 0 || x < 0) return kNaN;
  double p;
  if (a == 0) {
    if (x == 0) return kNaN;
    p = 1;
  } else if (x == 0) {
    p = 0;
  } else if (std::isinf(a)) {
    if (std::isinf(x)) return kNaN;
    p = 0;
  } else if (std::isinf(x)) {
    p = 1;
  } else if (a == 1) {
    p = -std::expm1(-x);
  } else if (a == 0.5) {
    p = std::erf(std::sqrt(x));
  } else {
    // P = x^a e^-x Σ x^n / Γ(a + n + 1)
    const long double la = a, lx = x;
    long double term = std::exp(la * std::log(lx) - lx - std::lgamma(la + 1)), sum = term;
    for (int n = 1; n < 2000; ++n) sum += (term *= lx / (la + n));
    p = static_cast<double>(sum);
  }
  return upper ? 1 - p : p;
}
void igamma_specials(hal_dtype_e dt, std::vector<OpCase>& cases) {
  if (is_float(dt))
    cases.push_back(special_pair("special values", dt, {0, 0, 1, -1, 1, kInf, kInf, 2, 0.5, 1, 0.5},
                                 {1, 0, 0, 1, -1, 1, kInf, kInf, kNaN, 3, 2}));
}
HAL_NARY_SUITE(igamma, kAll, Out::kFloat, [](const double* x, const OpCase&) { return incomplete_gamma_ref(x[0], x[1], false); },
               2, igamma_input, igamma_specials);
HAL_NARY_SUITE(igammac, kAll, Out::kFloat, [](const double* x, const OpCase&) { return incomplete_gamma_ref(x[0], x[1], true); },
               2, igamma_input, igamma_specials);

// Comparisons and logical ops: small ranges so equal values occur.
HostTensor small_input(int, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor t = random(dt, std::move(shape), seed, -3, 3);
  if (is_float(dt))
    for (double& v : t.values) v = std::round(v * 2) / 2;  // halves: ties between inputs are common
  return t;
}
void compare_specials(hal_dtype_e dt, std::vector<OpCase>& cases) {
  if (is_float(dt))
    cases.push_back(special_pair("nan, inf, -0", dt, {kNaN, kNaN, 1, kInf, -kInf, -0.0, kInf}, {kNaN, 1, kNaN, kInf, kInf, 0, 1}));
}
#define HAL_COMPARE_SUITE(NAME, EXPR)                                                                    \
  HAL_NARY_SUITE(NAME, kAll, Out::kBool, [](const double* x, const OpCase&) { return (EXPR) ? 1.0 : 0.0; }, 2, \
                 small_input, compare_specials)
HAL_COMPARE_SUITE(eq, x[0] == x[1]);
HAL_COMPARE_SUITE(ne, x[0] != x[1]);
HAL_COMPARE_SUITE(lt, x[0] < x[1]);
HAL_COMPARE_SUITE(le, x[0] <= x[1]);
HAL_COMPARE_SUITE(gt, x[0] > x[1]);
HAL_COMPARE_SUITE(ge, x[0] >= x[1]);
HAL_COMPARE_SUITE(logical_and, x[0] != 0 && x[1] != 0);
HAL_COMPARE_SUITE(logical_or, x[0] != 0 || x[1] != 0);
HAL_COMPARE_SUITE(logical_xor, (x[0] != 0) != (x[1] != 0));

// Bitwise ops on the two's-complement values (bool: logical).
int64_t as_int(double v) { return static_cast<int64_t>(v); }
HostTensor bits_input(int, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  return random(dt, std::move(shape), seed, -128, 128);
}
#define HAL_BITWISE_SUITE(NAME, OP)                                                                       \
  HAL_NARY_SUITE(NAME, kIntegral, Out::kPromoted,                                                       \
                 [](const double* x, const OpCase&) { return static_cast<double>(as_int(x[0]) OP as_int(x[1])); }, \
                 2, bits_input)
HAL_BITWISE_SUITE(bitwise_and, &);
HAL_BITWISE_SUITE(bitwise_or, |);
HAL_BITWISE_SUITE(bitwise_xor, ^);

// where(condition, self, other): promotes self and other only.
std::vector<HostTensor> where_ref(const OpCase& c) {
  HAL_REF_ERROR_GUARD(c);
  hal_dtype_e common = result_type({&c.input(1), &c.input(2)});
  return {eval(common, common, {&c.input(0), &c.input(1), &c.input(2)},
               [&](const double* x) { return x[0] != 0 ? x[1] : x[2]; })};
}
std::vector<OpCase> where_cases(hal_dtype_e dt) {
  auto cond = [](std::vector<int64_t> s, uint64_t seed) { return random(BOOL, std::move(s), seed); };
  auto val = [&](std::vector<int64_t> s, uint64_t seed) { return any_input(1, dt, std::move(s), seed); };
  std::vector<OpCase> cases = {
      OpCase("same shape [3,4]").in(cond({3, 4}, 1)).in(val({3, 4}, 2)).in(val({3, 4}, 3)),
      OpCase("broadcast condition [3,1]").in(cond({3, 1}, 4)).in(val({3, 4}, 5)).in(val({4}, 6)),
      OpCase("broadcast values [2,1,4]").in(cond({4}, 7)).in(val({2, 1, 4}, 8)).in(val({3, 1}, 9)),
      OpCase("0-d").in(cond({}, 10)).in(val({}, 11)).in(val({}, 12)),
      OpCase("0-d values").in(cond({3, 4}, 13)).in(val({}, 14)).in(val({}, 15)),
      OpCase("zero-size").in(cond({0, 4}, 16)).in(val({4}, 17)).in(val({0, 1}, 18)),
      OpCase("long [5,67]").in(cond({5, 67}, 19)).in(val({5, 67}, 20)).in(val({5, 67}, 21)),
  };
  if (dt == F32) {
    cases.push_back(OpCase("int32 with 0-d float32").in(cond({3, 4}, 22)).in(any_input(1, I32, {3, 4}, 23))
                        .in(val({}, 24)));
    cases.push_back(OpCase("float16 with float64").in(cond({3, 4}, 22)).in(any_input(1, F16, {3, 4}, 23))
                        .in(any_input(1, F64, {4}, 24)));
    cases.push_back(OpCase("condition not bool").in(random(F32, {3}, 25)).in(val({3}, 26)).in(val({3}, 27))
                        .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(dt, {3})}, {"where", "condition", "float32"}));
    cases.push_back(OpCase("broadcast-incompatible").in(cond({2, 3}, 28)).in(val({3}, 29)).in(val({4}, 30))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"where", "does not broadcast"}));
  }
  return cases;
}
HAL_CONFORMANCE_SUITE(where, where_cases, where_ref, kAll);

// clamp(self, min?, max?): NaN in any present operand gives NaN; min > max gives max.
std::vector<HostTensor> clamp_ref(const OpCase& c) {
  HAL_REF_ERROR_GUARD(c);
  std::vector<const HostTensor*> ins = present_inputs(c);
  bool has_min = c.has_input(1), has_max = c.has_input(2);
  hal_dtype_e common = result_type(ins);
  return {eval(common, common, ins, [&](const double* x) {
    double v = x[0];
    int k = 1;
    if (has_min) {
      double lo = x[k++];
      if (std::isnan(v) || std::isnan(lo)) return kNaN;
      v = std::max(v, lo);
    }
    if (has_max) {
      double hi = x[k];
      if (std::isnan(v) || std::isnan(hi)) return kNaN;
      v = std::min(v, hi);
    }
    return v;
  })};
}
std::vector<OpCase> clamp_cases(hal_dtype_e dt) {
  auto x = [&](std::vector<int64_t> s, uint64_t seed) { return any_input(0, dt, std::move(s), seed); };
  double lo = is_int(dt) ? -20 : -0.5, hi = is_int(dt) ? 20 : 0.5;
  if (dt == U8) lo = 50, hi = 200;
  std::vector<OpCase> cases = {
      OpCase("min and max 0-d").in(x({3, 4}, 1)).in(scalar(dt, lo)).in(scalar(dt, hi)),
      OpCase("min only").in(x({3, 4}, 2)).in(scalar(dt, lo)).absent(),
      OpCase("max only").in(x({3, 4}, 3)).absent().in(scalar(dt, hi)),
      OpCase("tensor bounds broadcast").in(x({3, 4}, 4)).in(x({4}, 5)).in(x({3, 1}, 6)),
      OpCase("min tensor only").in(x({2, 3}, 7)).in(x({2, 3}, 8)).absent(),
      OpCase("min > max").in(x({5}, 9)).in(scalar(dt, hi)).in(scalar(dt, lo)),
      OpCase("0-d").in(x({}, 10)).in(scalar(dt, lo)).in(scalar(dt, hi)),
      OpCase("zero-size").in(x({0, 4}, 11)).in(scalar(dt, lo)).in(scalar(dt, hi)),
      OpCase("long [5,67]").in(x({5, 67}, 12)).in(scalar(dt, lo)).in(scalar(dt, hi)),
  };
  if (is_float(dt))
    cases.push_back(OpCase("nan").in(values(dt, {kNaN, 1, -1, kInf, -kInf})).in(values(dt, {0, kNaN, -2, 0, 0}))
                        .in(scalar(dt, 0.5)));
  if (dt == F32) {
    cases.push_back(OpCase("int32 with 0-d float bounds").in(any_input(0, I32, {3, 4}, 13)).in(scalar(F32, -10.5))
                        .in(scalar(F32, 10.5)));
    cases.push_back(OpCase("broadcast-incompatible").in(x({2, 3}, 14)).in(x({4}, 15)).absent()
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"clamp", "does not broadcast"}));
    cases.push_back(OpCase("unsupported dtype").in(random(BOOL, {3}, 16)).in(scalar(BOOL, 0)).absent()
                        .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(BOOL, {3})}, {"clamp", "bool"}));
  }
  return cases;
}
HAL_CONFORMANCE_SUITE(clamp, clamp_cases, clamp_ref, kNumeric);

// Ternary float/numeric ops.
HostTensor lerp_input(int k, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  return k == 2 ? random(dt, std::move(shape), seed, -0.5, 1.5) : any_input(k, dt, std::move(shape), seed);
}
HAL_NARY_SUITE(lerp, kFloats, Out::kPromoted,
               [](const double* x, const OpCase&) { return x[0] + x[2] * (x[1] - x[0]); }, 3, lerp_input);

double value_of(const OpCase& c) { return c.attr_float("value", 1.0); }
HostTensor addc_input(int k, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed) {
  if (k == 2) return divisor_input(1, dt, std::move(shape), seed);
  return random(dt, std::move(shape), seed, is_int(dt) ? -10.0 : -2.0, is_int(dt) ? 10.0 : 2.0);
}
void value_extra(const char* op, hal_dtype_e dt, std::vector<OpCase>& cases) {
  double value = is_float(dt) ? -0.5 : 3.0;
  cases.push_back(OpCase("value").in(addc_input(0, dt, {3, 4}, 80)).in(addc_input(1, dt, {4}, 81))
                      .in(addc_input(2, dt, {3, 1}, 82)).attr(Attr::scalar("value", value)));
  if (dt == F32) scalar_attr_cases(op, "value", dt, 3, cases);
}
HAL_NARY_SUITE(addcmul, kNumeric, Out::kPromoted,
               [](const double* x, const OpCase& c) { return x[0] + value_of(c) * x[1] * x[2]; }, 3, addc_input,
               [](hal_dtype_e dt, std::vector<OpCase>& cases) { value_extra("addcmul", dt, cases); });
HAL_NARY_SUITE(addcdiv, kFloats, Out::kPromoted,
               [](const double* x, const OpCase& c) { return x[0] + value_of(c) * x[1] / x[2]; }, 3, addc_input,
               [](hal_dtype_e dt, std::vector<OpCase>& cases) { value_extra("addcdiv", dt, cases); });

}  // namespace
}  // namespace hal::conformance
