// CPU kernels of the elementwise groups (unary, binary): one strided,
// broadcasting, multi-threaded map per op. Inputs whose dtype differs from
// the computing dtype are first cast to it (type promotion).
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "elementwise_fns.hpp"
#include "hal/sdk/kernel/special.hpp"
#include "vector_math.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
using sdk::kernel::compute_t;
using sdk::kernel::dispatch;

// Which storage types a kernel body is instantiated for; others cannot
// reach it (the catalog and the kernel's registered dtypes exclude them).
enum Types : uint64_t { kFloat = sdk::kFloatDtypes, kNumeric = sdk::kFloatDtypes | sdk::kIntDtypes,
                        kIntegral = sdk::kIntDtypes | HAL_DTYPE_BIT(HAL_DTYPE_BOOL), kAll = sdk::kAllDtypes };

template <uint64_t kTypes, class F>
decltype(auto) dispatch_in(uint32_t dtype, F&& f) {
  return dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr ((kTypes >> sdk::kernel::dtype_of<T>()) & 1u) {
      f(tag);
    } else {
      sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, "no kernel for dtype ", sdk::dtype_name(dtype));
    }
  });
}

// ---- unary --------------------------------------------------------------------

// out = F(self) computed in the output's dtype (integer inputs of float ops
// are cast first).
template <uint64_t kTypes, class F>
void unary(const OpCall& c, F f) {
  const Tensor& out = c.output(0);
  Tensor tmp;
  std::vector<unsigned char> storage;
  const Tensor& in = as_dtype(c.input(0), out.dtype, tmp, storage);
  dispatch_in<kTypes>(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    map<T, T>(out, {&in}, [&](compute_t<T> x) { return f(x); });
  });
}

// out (bool) = PRED(self) in the input's own dtype.
template <class F>
void predicate(const OpCall& c, F f) {
  const Tensor& in = c.input(0);
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    map<bool, T>(c.output(0), {&in}, [&](compute_t<T> x) { return f(x); });
  });
}

#define HAL_CPU_UNARY(NAME, TYPES, EXPR)                     \
  void NAME##_body(const OpCall& c) {                        \
    unary<TYPES>(c, [](auto x) {                             \
      using V = decltype(x);                                 \
      (void)sizeof(V);                                       \
      return EXPR;                                           \
    });                                                      \
  }                                                          \
  HAL_CPU_KERNEL(NAME##_kernel, NAME##_body)

HAL_CPU_SHARED_UNARY(HAL_CPU_UNARY)  // elementwise_fns.hpp: abs, neg, exp, ..., erfc

// The special functions compute in double whatever the dtype (float32 gets
// a correctly rounded result nearly always; these ops are rare, not hot).
namespace special = sdk::kernel::special;
HAL_CPU_UNARY(erfcx, kFloat, V(special::erfcx(double(x))))
HAL_CPU_UNARY(erfinv, kFloat, V(special::erfinv(double(x))))
HAL_CPU_UNARY(ndtri, kFloat, V(special::ndtri(double(x))))
HAL_CPU_UNARY(lgamma, kFloat, V(special::lgamma(double(x))))
HAL_CPU_UNARY(digamma, kFloat, V(special::digamma(double(x))))
HAL_CPU_UNARY(i0, kFloat, V(special::i0(double(x))))
HAL_CPU_UNARY(i0e, kFloat, V(special::i0e(double(x))))
HAL_CPU_UNARY(i1, kFloat, V(special::i1(double(x))))
HAL_CPU_UNARY(i1e, kFloat, V(special::i1e(double(x))))

HAL_CPU_UNARY(bessel_j0, kFloat, V(::j0(double(x))))  // POSIX j0/j1/y0/y1 (glibc), double precision
HAL_CPU_UNARY(bessel_j1, kFloat, V(::j1(double(x))))
HAL_CPU_UNARY(bessel_y0, kFloat, V(double(x) < 0 ? special::kNaN : ::y0(double(x))))
HAL_CPU_UNARY(bessel_y1, kFloat, V(double(x) < 0 ? special::kNaN : ::y1(double(x))))
HAL_CPU_UNARY(modified_bessel_k0, kFloat, V(special::bessel_k(0, double(x), false)))
HAL_CPU_UNARY(modified_bessel_k1, kFloat, V(special::bessel_k(1, double(x), false)))
HAL_CPU_UNARY(scaled_modified_bessel_k0, kFloat, V(special::bessel_k(0, double(x), true)))
HAL_CPU_UNARY(scaled_modified_bessel_k1, kFloat, V(special::bessel_k(1, double(x), true)))
HAL_CPU_UNARY(spherical_bessel_j0, kFloat, V(special::spherical_bessel_j0(double(x))))

void polygamma_body(const OpCall& c) {
  int64_t n = op::polygamma::n(c);
  if (n < 0) sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "polygamma: attribute 'n' is ", n, "; it must be >= 0");
  unary<kFloat>(c, [n](auto x) { return decltype(x)(special::polygamma(n, double(x))); });
}
HAL_CPU_KERNEL(polygamma_kernel, polygamma_body)

template <class V>
V round_op(V x, int mode) {  // 0 floor, 1 ceil, 2 nearest-even, 3 toward zero
  if constexpr (std::is_floating_point_v<V>) {
    return mode == 0 ? std::floor(x) : mode == 1 ? std::ceil(x) : mode == 2 ? std::nearbyint(x) : std::trunc(x);
  } else {
    return x;
  }
}
HAL_CPU_UNARY(floor, kNumeric, round_op(x, 0))
HAL_CPU_UNARY(ceil, kNumeric, round_op(x, 1))
HAL_CPU_UNARY(round, kNumeric, round_op(x, 2))
HAL_CPU_UNARY(trunc, kNumeric, round_op(x, 3))

template <class V>
V sign_op(V x) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(x)) return x;
  }
  return V((V(0) < x) - (x < V(0)));
}
HAL_CPU_UNARY(sign, kNumeric, sign_op(x))

void gelu_body(const OpCall& c) {
  // One element function per variant: a branch inside it stops vectorisation.
  if (op::gelu::approximate(c) == "tanh") unary<kFloat>(c, [](auto x) { return vmath::gelu(x, true); });
  else unary<kFloat>(c, [](auto x) { return vmath::gelu(x, false); });
}
HAL_CPU_KERNEL(gelu_kernel, gelu_body)

void logical_not_body(const OpCall& c) {
  predicate(c, [](auto x) { return x == decltype(x)(0); });
}
HAL_CPU_KERNEL(logical_not_kernel, logical_not_body)
void isnan_body(const OpCall& c) {
  predicate(c, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>) return std::isnan(x);
    else return false;
  });
}
HAL_CPU_KERNEL(isnan_kernel, isnan_body)
void isinf_body(const OpCall& c) {
  predicate(c, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>) return std::isinf(x);
    else return false;
  });
}
HAL_CPU_KERNEL(isinf_kernel, isinf_body)

void signbit_body(const OpCall& c) {
  predicate(c, [](auto x) {
    using V = decltype(x);
    // float through its bits: GCC 12 fails (internal error) vectorising std::signbit of bfloat16→float.
    if constexpr (std::is_same_v<V, float>) return (sdk::kernel::float_bits(x) >> 31) != 0;
    else if constexpr (std::is_floating_point_v<V>) return std::signbit(x);
    else if constexpr (std::is_signed_v<V>) return x < V(0);
    else return false;
  });
}
HAL_CPU_KERNEL(signbit_kernel, signbit_body)

// ---- n-ary ----------------------------------------------------------------------

// out = F(inputs...) over the broadcast shape, every input cast to the
// computing dtype CT (the output's dtype, or the common dtype for
// predicates, which write bool).
template <uint64_t kTypes, size_t N, class F>
void nary(const OpCall& c, hal_dtype_e compute, const std::array<const Tensor*, N>& inputs, F f) {
  const Tensor& out = c.output(0);
  std::array<Tensor, N> tmp;
  std::array<std::vector<unsigned char>, N> storage;
  std::array<const Tensor*, N> ins;
  for (size_t k = 0; k < N; ++k) ins[k] = &as_dtype(*inputs[k], compute, tmp[k], storage[k]);
  dispatch_in<kTypes>(compute, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto call_f = [&](auto... xs) { return f(static_cast<compute_t<T>>(xs)...); };
    auto run = [&](auto out_tag) {
      using O = typename decltype(out_tag)::type;
      if constexpr (N == 1) map<O, T>(out, ins, call_f);
      else if constexpr (N == 2) map<O, T, T>(out, ins, call_f);
      else map<O, T, T, T>(out, ins, call_f);
    };
    if (out.dtype == HAL_DTYPE_BOOL && compute != HAL_DTYPE_BOOL) run(sdk::kernel::TypeTag<bool>{});
    else run(tag);
  });
}

// Computing dtype of an op whose output dtype is the promoted one (or float
// for true division): the output's own dtype unless it is a bool predicate.
hal_dtype_e compute_dtype(const OpCall& c) {
  const Tensor& out = c.output(0);
  return out.dtype == HAL_DTYPE_BOOL ? c.common_dtype() : out.dtype;
}

template <uint64_t kTypes, class F>
void binary(const OpCall& c, F f) {
  nary<kTypes, 2>(c, compute_dtype(c), {&c.input(0), &c.input(1)}, f);
}

// ALPHA as each computing type, read once (not per element).
struct ScalarAs {
  double f;
  int64_t i;
  explicit ScalarAs(const sdk::Scalar& s) : f(s.to_double()), i(s.to_int()) {}
  template <class V>
  V as() const {
    if constexpr (std::is_same_v<V, bool>) return i != 0;
    else if constexpr (std::is_floating_point_v<V>) return static_cast<V>(f);
    else return static_cast<V>(i);
  }
};

// self + alpha·other; alpha == 1 (the common case) skips the multiply.
template <bool kSub>
void add_sub(const OpCall& c, const sdk::Scalar& alpha_attr) {
  ScalarAs alpha(alpha_attr);
  bool unit = alpha.f == 1.0 && alpha.i == 1;
  auto run = [&](auto f) { binary<(kSub ? kNumeric : kAll)>(c, f); };
  if (unit) {
    run([](auto a, auto b) {
      using V = decltype(a);
      if constexpr (std::is_same_v<V, bool>) return V(a || b);
      else return V(kSub ? a - b : a + b);
    });
  } else {
    run([alpha](auto a, auto b) {
      using V = decltype(a);
      if constexpr (std::is_same_v<V, bool>) return V(a || (b && alpha.i != 0));
      else return V(kSub ? a - alpha.as<V>() * b : a + alpha.as<V>() * b);
    });
  }
}

void add_body(const OpCall& c) { add_sub<false>(c, op::add::alpha(c)); }
HAL_CPU_KERNEL(add_kernel, add_body)

void sub_body(const OpCall& c) { add_sub<true>(c, op::sub::alpha(c)); }
HAL_CPU_KERNEL(sub_kernel, sub_body)

void mul_body(const OpCall& c) {
  binary<kAll>(c, [](auto a, auto b) {
    using V = decltype(a);
    if constexpr (std::is_same_v<V, bool>) return V(a && b);
    else return V(a * b);
  });
}
HAL_CPU_KERNEL(mul_kernel, mul_body)

// Integer division by zero and integer powers with a negative exponent are
// errors, as in PyTorch; found by scanning OTHER (input 1) before any output
// is written. BAD(v) says whether value v (in OTHER's dtype) is refused.
template <class Bad>
void check_other(const OpCall& c, Bad bad, const char* what) {
  if (!sdk::is_integral(compute_dtype(c))) return;
  const Tensor& t = c.input(1);
  sdk::kernel::StridedLoop<1> loop(t, {&t});
  dispatch(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t pos = 0;
    loop.run({static_cast<char*>(t.data)}, 0, loop.numel(), [&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        T v = *reinterpret_cast<const T*>(p[0] + i * s[0]);
        if (bad(v))
          sdk::fail(HAL_STATUS_INVALID_ARGUMENT, c.name(), ": ", what, ": 'other' is ", +compute_t<T>(v),
                    " at position ", pos + i);
      }
      pos += n;
    });
  });
}
void check_nonzero_divisor(const OpCall& c) {
  check_other(c, [](auto v) { return v == decltype(v)(0); }, "integer division by zero");
}

template <class V>
V floor_div(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    return std::floor(a / b);
  } else {
    if (b == 0) return V(0);  // integer division by zero: defined as 0 here
    V q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
}

void div_body(const OpCall& c) {
  const std::string& mode = op::div::rounding_mode(c);
  int m = mode == "trunc" ? 1 : mode == "floor" ? 2 : 0;
  if (m != 0) check_nonzero_divisor(c);
  binary<kAll>(c, [m](auto a, auto b) {
    using V = decltype(a);
    if constexpr (std::is_same_v<V, bool>) {
      return V(b && a);  // rounded bool division: a // true = a, a // false = 0 as for integers
    } else if constexpr (std::is_floating_point_v<V>) {
      V q = a / b;
      return m == 1 ? std::trunc(q) : m == 2 ? std::floor(q) : q;
    } else {
      if (b == 0) return V(0);
      return m == 1 ? V(a / b) : floor_div(a, b);
    }
  });
}
HAL_CPU_KERNEL(div_kernel, div_body)

template <class V>
V ipow(V base, V exp) {
  if (exp < 0) return base == 1 ? V(1) : base == V(-1) ? V((exp & 1) ? -1 : 1) : V(0);
  V result = 1;
  while (exp) {
    if (exp & 1) result = V(result * base);
    base = V(base * base);
    exp >>= 1;
  }
  return result;
}

void pow_body(const OpCall& c) {
  check_other(
      c,
      [](auto v) {
        if constexpr (std::is_unsigned_v<decltype(v)>) return false;
        else return v < decltype(v)(0);
      },
      "integers to negative integer powers are not allowed");
  binary<kNumeric>(c, [](auto a, auto b) {
    using V = decltype(a);
    if constexpr (std::is_floating_point_v<V>) {
      // Exponents with an exact cheaper form (RMSNorm's square and its
      // backward's power 1): a*a is pow's correctly rounded result, ~15x faster.
      if (b == V(2)) return V(a * a);
      if (b == V(1)) return a;
      return std::pow(a, b);
    } else if constexpr (std::is_same_v<V, bool>) return V(a || !b);
    else return ipow<V>(a, b);
  });
}
HAL_CPU_KERNEL(pow_kernel, pow_body)

template <bool kMax>
void extremum_body(const OpCall& c) {
  binary<kAll>(c, [](auto a, auto b) {
    using V = decltype(a);
    if constexpr (std::is_floating_point_v<V>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<V>::quiet_NaN();
    }
    return kMax ? (a > b ? a : b) : (a < b ? a : b);
  });
}
HAL_CPU_KERNEL(maximum_kernel, extremum_body<true>)
HAL_CPU_KERNEL(minimum_kernel, extremum_body<false>)

// fmax/fmin: a NaN operand yields the other one (C's fmax), unlike maximum.
template <bool kMax>
void fextremum_body(const OpCall& c) {
  binary<kAll>(c, [](auto a, auto b) {
    using V = decltype(a);
    if constexpr (std::is_floating_point_v<V>) return kMax ? std::fmax(a, b) : std::fmin(a, b);
    else return kMax ? (a > b ? a : b) : (a < b ? a : b);
  });
}
HAL_CPU_KERNEL(fmax_kernel, fextremum_body<true>)
HAL_CPU_KERNEL(fmin_kernel, fextremum_body<false>)

#define HAL_CPU_FLOAT_BINARY(NAME, EXPR)                        \
  void NAME##_body(const OpCall& c) {                           \
    binary<kFloat>(c, [](auto a, auto b) {                      \
      using V = decltype(a);                                    \
      (void)sizeof(V);                                          \
      return EXPR;                                              \
    });                                                         \
  }                                                             \
  HAL_CPU_KERNEL(NAME##_kernel, NAME##_body)

HAL_CPU_FLOAT_BINARY(atan2, std::atan2(a, b))
HAL_CPU_FLOAT_BINARY(hypot, std::hypot(a, b))
HAL_CPU_FLOAT_BINARY(copysign, std::copysign(a, b))
HAL_CPU_FLOAT_BINARY(zeta, V(special::zeta(double(a), double(b))))
HAL_CPU_FLOAT_BINARY(igamma, V(special::incomplete_gamma(double(a), double(b), false)))
HAL_CPU_FLOAT_BINARY(igammac, V(special::incomplete_gamma(double(a), double(b), true)))
// In the storage type itself: float32 and float64 only are registered (a
// float16 step is not float's step).
HAL_CPU_FLOAT_BINARY(nextafter, std::nextafter(a, b))

void fmod_body(const OpCall& c) {
  check_nonzero_divisor(c);
  binary<kNumeric>(c, [](auto a, auto b) {
    using V = decltype(a);
    if constexpr (std::is_floating_point_v<V>) return std::fmod(a, b);
    else return b == 0 ? V(0) : V(a % b);
  });
}
HAL_CPU_KERNEL(fmod_kernel, fmod_body)

void remainder_body(const OpCall& c) {
  check_nonzero_divisor(c);
  binary<kNumeric>(c, [](auto a, auto b) {
    using V = decltype(a);
    if constexpr (std::is_floating_point_v<V>) {
      V r = std::fmod(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    } else {
      if (b == 0) return V(0);
      V r = V(a % b);
      return (r != 0 && ((r < 0) != (b < 0))) ? V(r + b) : r;
    }
  });
}
HAL_CPU_KERNEL(remainder_kernel, remainder_body)

#define HAL_CPU_BINARY(NAME, EXPR)                      \
  void NAME##_body(const OpCall& c) {                   \
    binary<kAll>(c, [](auto a, auto b) { return EXPR; }); \
  }                                                     \
  HAL_CPU_KERNEL(NAME##_kernel, NAME##_body)

HAL_CPU_BINARY(eq, a == b)
HAL_CPU_BINARY(ne, a != b)
HAL_CPU_BINARY(lt, a < b)
HAL_CPU_BINARY(le, a <= b)
HAL_CPU_BINARY(gt, a > b)
HAL_CPU_BINARY(ge, a >= b)
HAL_CPU_BINARY(logical_and, (a != decltype(a)(0)) && (b != decltype(b)(0)))
HAL_CPU_BINARY(logical_or, (a != decltype(a)(0)) || (b != decltype(b)(0)))
HAL_CPU_BINARY(logical_xor, (a != decltype(a)(0)) != (b != decltype(b)(0)))

template <int kOp>  // 0 and, 1 or, 2 xor
void bitwise_body(const OpCall& c) {
  binary<kIntegral>(c, [](auto a, auto b) {
    using V = decltype(a);
    if constexpr (std::is_floating_point_v<V>) {
      return a;  // the catalog admits integral dtypes only
    } else if constexpr (std::is_same_v<V, bool>) {
      return kOp == 0 ? (a && b) : kOp == 1 ? (a || b) : (a != b);
    } else {
      return V(kOp == 0 ? (a & b) : kOp == 1 ? (a | b) : (a ^ b));
    }
  });
}
HAL_CPU_KERNEL(bitwise_and_kernel, bitwise_body<0>)
HAL_CPU_KERNEL(bitwise_or_kernel, bitwise_body<1>)
HAL_CPU_KERNEL(bitwise_xor_kernel, bitwise_body<2>)

void where_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  Tensor tmp[2];
  std::vector<unsigned char> storage[2];
  const Tensor& a = as_dtype(c.input(1), out.dtype, tmp[0], storage[0]);
  const Tensor& b = as_dtype(c.input(2), out.dtype, tmp[1], storage[1]);
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    map<T, bool, T, T>(out, {&c.input(0), &a, &b}, [](bool cond, auto x, auto y) { return cond ? x : y; });
  });
}
HAL_CPU_KERNEL(where_kernel, where_body)

void clamp_body(const OpCall& c) {
  const Tensor* lo = op::clamp::min(c);
  const Tensor* hi = op::clamp::max(c);
  hal_dtype_e dt = c.output(0).dtype;
  auto clamp_lo = [](auto x, auto l) {
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      if (std::isnan(x) || std::isnan(l)) return std::numeric_limits<decltype(x)>::quiet_NaN();
    }
    return x < l ? l : x;
  };
  auto clamp_hi = [](auto x, auto h) {
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      if (std::isnan(x) || std::isnan(h)) return std::numeric_limits<decltype(x)>::quiet_NaN();
    }
    return x > h ? h : x;
  };
  if (lo && hi)
    nary<kNumeric, 3>(c, dt, {&c.input(0), lo, hi}, [&](auto x, auto l, auto h) { return clamp_hi(clamp_lo(x, l), h); });
  else if (lo)
    nary<kNumeric, 2>(c, dt, {&c.input(0), lo}, clamp_lo);
  else if (hi)
    nary<kNumeric, 2>(c, dt, {&c.input(0), hi}, clamp_hi);
  else
    nary<kNumeric, 1>(c, dt, {&c.input(0)}, [](auto x) { return x; });
}
HAL_CPU_KERNEL(clamp_kernel, clamp_body)

void lerp_body(const OpCall& c) {
  nary<kFloat, 3>(c, c.output(0).dtype, {&c.input(0), &c.input(1), &c.input(2)},
          [](auto a, auto b, auto w) { return a + w * (b - a); });
}
HAL_CPU_KERNEL(lerp_kernel, lerp_body)

void addcmul_body(const OpCall& c) {
  ScalarAs value(op::addcmul::value(c));
  nary<kNumeric, 3>(c, c.output(0).dtype, {&c.input(0), &c.input(1), &c.input(2)}, [value](auto a, auto x, auto y) {
    using V = decltype(a);
    return V(a + value.as<V>() * x * y);
  });
}
HAL_CPU_KERNEL(addcmul_kernel, addcmul_body)

void addcdiv_body(const OpCall& c) {
  ScalarAs value(op::addcdiv::value(c));
  nary<kFloat, 3>(c, c.output(0).dtype, {&c.input(0), &c.input(1), &c.input(2)}, [value](auto a, auto x, auto y) {
    using V = decltype(a);
    return V(a + value.as<V>() * x / y);
  });
}
HAL_CPU_KERNEL(addcdiv_kernel, addcdiv_body)

// ---- backward -----------------------------------------------------------------

void relu_backward_body(const OpCall& c) {
  // PyTorch's threshold_backward: 0 where self <= 0 (NaN passes the gradient).
  binary<kFloat>(c, [](auto g, auto x) { return x <= decltype(x)(0) ? decltype(g)(0) : g; });
}
HAL_CPU_KERNEL(relu_backward_kernel, relu_backward_body)

void gelu_backward_body(const OpCall& c) {
  if (op::gelu_backward::approximate(c) == "tanh")
    binary<kFloat>(c, [](auto g, auto x) { return vmath::gelu_grad(g, x, true); });
  else
    binary<kFloat>(c, [](auto g, auto x) { return vmath::gelu_grad(g, x, false); });
}
HAL_CPU_KERNEL(gelu_backward_kernel, gelu_backward_body)

void silu_backward_body(const OpCall& c) {
  binary<kFloat>(c, [](auto g, auto x) { return vmath::silu_grad(g, x); });
}
HAL_CPU_KERNEL(silu_backward_kernel, silu_backward_body)

void sigmoid_backward_body(const OpCall& c) {
  binary<kFloat>(c, [](auto g, auto y) { return g * y * (decltype(y)(1) - y); });
}
HAL_CPU_KERNEL(sigmoid_backward_kernel, sigmoid_backward_body)

void tanh_backward_body(const OpCall& c) {
  binary<kFloat>(c, [](auto g, auto y) { return g * (decltype(y)(1) - y * y); });
}
HAL_CPU_KERNEL(tanh_backward_kernel, tanh_backward_body)

}  // namespace

void register_elementwise_ops(sdk::OpRegistry& ops) {
  // The mask is of the common (promoted) dtype the call computes from.
#define HAL_REG(NAME, TYPES) ops.add<op::NAME>(&NAME##_kernel, TYPES)
  HAL_REG(abs, kNumeric); HAL_REG(neg, kNumeric); HAL_REG(relu, kNumeric); HAL_REG(floor, kNumeric);
  HAL_REG(ceil, kNumeric); HAL_REG(round, kNumeric); HAL_REG(sign, kNumeric);
  HAL_REG(exp, kAll); HAL_REG(log, kAll); HAL_REG(log1p, kAll); HAL_REG(expm1, kAll); HAL_REG(sqrt, kAll);
  HAL_REG(rsqrt, kAll); HAL_REG(reciprocal, kAll); HAL_REG(sin, kAll); HAL_REG(cos, kAll); HAL_REG(tanh, kAll);
  HAL_REG(sigmoid, kAll); HAL_REG(erf, kAll); HAL_REG(silu, kFloat); HAL_REG(gelu, kFloat);
  HAL_REG(logical_not, kAll); HAL_REG(isnan, kAll); HAL_REG(isinf, kAll); HAL_REG(signbit, kAll);
  HAL_REG(trunc, kNumeric);
  HAL_REG(tan, kAll); HAL_REG(asin, kAll); HAL_REG(acos, kAll); HAL_REG(atan, kAll); HAL_REG(sinh, kAll);
  HAL_REG(cosh, kAll); HAL_REG(asinh, kAll); HAL_REG(acosh, kAll); HAL_REG(atanh, kAll); HAL_REG(log2, kAll);
  HAL_REG(log10, kAll); HAL_REG(exp2, kAll); HAL_REG(erfc, kAll); HAL_REG(erfcx, kAll); HAL_REG(erfinv, kAll);
  HAL_REG(ndtri, kAll); HAL_REG(lgamma, kAll); HAL_REG(digamma, kAll); HAL_REG(polygamma, kAll);
  HAL_REG(i0, kAll); HAL_REG(i0e, kAll); HAL_REG(i1, kAll); HAL_REG(i1e, kAll);
  HAL_REG(bessel_j0, kAll); HAL_REG(bessel_j1, kAll); HAL_REG(bessel_y0, kAll); HAL_REG(bessel_y1, kAll);
  HAL_REG(modified_bessel_k0, kAll); HAL_REG(modified_bessel_k1, kAll); HAL_REG(scaled_modified_bessel_k0, kAll);
  HAL_REG(scaled_modified_bessel_k1, kAll); HAL_REG(spherical_bessel_j0, kAll);
  HAL_REG(relu_backward, kFloat); HAL_REG(gelu_backward, kFloat); HAL_REG(silu_backward, kFloat);
  HAL_REG(sigmoid_backward, kFloat); HAL_REG(tanh_backward, kFloat);
  HAL_REG(add, kAll); HAL_REG(sub, kNumeric); HAL_REG(mul, kAll); HAL_REG(div, kAll); HAL_REG(pow, kNumeric);
  HAL_REG(maximum, kAll); HAL_REG(minimum, kAll); HAL_REG(fmod, kNumeric); HAL_REG(remainder, kNumeric);
  HAL_REG(eq, kAll); HAL_REG(ne, kAll); HAL_REG(lt, kAll); HAL_REG(le, kAll); HAL_REG(gt, kAll); HAL_REG(ge, kAll);
  HAL_REG(logical_and, kAll); HAL_REG(logical_or, kAll); HAL_REG(logical_xor, kAll);
  HAL_REG(bitwise_and, kIntegral); HAL_REG(bitwise_or, kIntegral); HAL_REG(bitwise_xor, kIntegral);
  HAL_REG(where, kAll); HAL_REG(clamp, kNumeric); HAL_REG(lerp, kFloat); HAL_REG(addcmul, kNumeric);
  HAL_REG(addcdiv, kFloat);
  HAL_REG(atan2, kAll); HAL_REG(copysign, kAll); HAL_REG(zeta, kAll); HAL_REG(hypot, kFloat);
  HAL_REG(igamma, kAll); HAL_REG(igammac, kAll);
  HAL_REG(fmax, kAll); HAL_REG(fmin, kAll);
  ops.add<op::nextafter>(&nextafter_kernel, HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64));
#undef HAL_REG
}

}  // namespace hal::cpu
