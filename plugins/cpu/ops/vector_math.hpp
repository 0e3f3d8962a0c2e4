// CPU plugin: float transcendental functions the compiler can vectorise, shared by every kernel group.
// GCC does not vectorise calls to libm's expf/erff/tanhf, so the float32 (and
// float16/bfloat16, computed in float) paths of exp, tanh, sigmoid, silu, gelu
// and their backward ops use these branch-free versions: plain arithmetic,
// selects and bit casts only, accurate to a few ulp, correct at ±inf, NaN,
// overflow and underflow. The double overloads keep libm.
#ifndef HAL_PLUGINS_CPU_OPS_VECTOR_MATH_HPP_
#define HAL_PLUGINS_CPU_OPS_VECTOR_MATH_HPP_

#include <cmath>
#include <cstdint>
#include <limits>

#include "hal/sdk/kernel/bits.hpp"

// Forced: in a file with many kernels GCC stops inlining these calls, and an
// out-of-line call in the loop body stops vectorisation.
#define HAL_VMATH_INLINE inline __attribute__((always_inline))

namespace hal::cpu::vmath {

using sdk::kernel::bits_float;
using sdk::kernel::float_bits;

// C ? A : B as bit operations: GCC (with the default -ftrapping-math) does
// not if-convert float selects once it has sunk the work into branches.
HAL_VMATH_INLINE float select(bool c, float a, float b) {
  uint32_t m = 0u - static_cast<uint32_t>(c);
  return bits_float((float_bits(a) & m) | (float_bits(b) & ~m));
}

// e^x: Cody-Waite reduction x = n·ln2 + r (|r| <= ln2/2), a degree-6
// polynomial for e^r, and 2^n applied as two factors so that n = 128 and
// results down in the subnormal range stay exact.
HAL_VMATH_INLINE float exp(float x) {
  const float kMax = 88.72283935546875f;   // above: inf
  const float kMin = -103.97208404541015625f;  // below: 0
  float xc = select(x > kMax, kMax, x);
  xc = select(xc < kMin, kMin, xc);
  // Round xc·log2(e) to nearest with the 1.5·2^23 trick (no rounding-mode call).
  const float kShift = 12582912.0f;
  float n = (xc * 1.44269504088896341f + kShift) - kShift;
  float r = xc - n * 0.693359375f;  // ln2 split: high part exact in float
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  // Unsigned shifts: NaN / out-of-range lanes carry garbage exponents here
  // (selected away below), and shifting a negative int is undefined.
  y = y * bits_float(static_cast<uint32_t>(n1 + 127) << 23) * bits_float(static_cast<uint32_t>(n2 + 127) << 23);
  y = select(x > kMax, std::numeric_limits<float>::infinity(), y);
  y = select(x < kMin, 0.0f, y);
  return select(x != x, x, y);
}

// tanh: an odd polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel),
// else from exp; e^2x = inf gives exactly ±1.
HAL_VMATH_INLINE float tanh(float x) {
  float a = std::fabs(x);  // tanh is odd: work on |x|, then copy x's sign (keeps -0)
  float z = a * a;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = a + a * z * p;
  float big = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  return std::copysign(select(a < 0.625f, small, big), x);  // NaN takes BIG, which is NaN
}

// erf: x·P(x²)/Q(x²) on [-4, 4] (Eigen's rational approximation; |erf| rounds
// to 1 beyond).
HAL_VMATH_INLINE float erf(float x) {
  float xc = select(x > 4.0f, 4.0f, x);
  xc = select(xc < -4.0f, -4.0f, xc);
  float z = xc * xc;
  float p = -2.72614225801306e-10f;
  p = p * z + 2.77068142495902e-08f;
  p = p * z - 2.10102402082508e-06f;
  p = p * z - 5.69250639462346e-05f;
  p = p * z - 7.34990630326855e-04f;
  p = p * z - 2.95459980854025e-03f;
  p = p * z - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * z - 2.13374055278905e-04f;
  q = q * z - 1.68282697438203e-03f;
  q = q * z - 7.37332916720468e-03f;
  q = q * z - 1.42647390514189e-02f;
  float y = xc * p / q;
  return select(x != x, x, y);
}

HAL_VMATH_INLINE double select(bool c, double a, double b) { return c ? a : b; }
HAL_VMATH_INLINE double exp(double x) { return std::exp(x); }
HAL_VMATH_INLINE double tanh(double x) { return std::tanh(x); }
HAL_VMATH_INLINE double erf(double x) { return std::erf(x); }

// Composite functions, in the computing type V (float or double).
// 1/(1 + e^-x) for x >= 0, e^x/(1 + e^x) below: no overflow of e^-x, so
// tiny results keep their precision.
template <class V>
HAL_VMATH_INLINE V sigmoid(V x) {
  V e = vmath::exp(-std::fabs(x));
  V r = V(1) / (V(1) + e);
  return select(x < V(0), e * r, r);
}
// PyTorch's form: x / (1 + e^-x) (so silu(-inf) is NaN as in PyTorch).
template <class V>
HAL_VMATH_INLINE V silu(V x) {
  return x / (V(1) + vmath::exp(-x));
}
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2_Pi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kGeluTanhCoef = 0.044715;

template <class V>
HAL_VMATH_INLINE V gelu(V x, bool tanh_approx) {
  if (tanh_approx) return V(0.5) * x * (V(1) + vmath::tanh(V(kSqrt2_Pi) * (x + V(kGeluTanhCoef) * x * x * x)));
  return V(0.5) * x * (V(1) + vmath::erf(x * V(kSqrt1_2)));
}
template <class V>
HAL_VMATH_INLINE V gelu_grad(V g, V x, bool tanh_approx) {
  if (tanh_approx) {
    V inner = V(kSqrt2_Pi) * (x + V(kGeluTanhCoef) * x * x * x);
    V t = vmath::tanh(inner);
    V dinner = V(kSqrt2_Pi) * (V(1) + V(3 * kGeluTanhCoef) * x * x);
    return g * (V(0.5) * (V(1) + t) + V(0.5) * x * (V(1) - t * t) * dinner);
  }
  V cdf = V(0.5) * (V(1) + vmath::erf(x * V(kSqrt1_2)));
  V pdf = vmath::exp(V(-0.5) * x * x) * V(kInvSqrt2Pi);
  return g * (cdf + x * pdf);
}
template <class V>
HAL_VMATH_INLINE V silu_grad(V g, V x) {
  V s = sigmoid(x);
  return g * s * (V(1) + x * (V(1) - s));
}

}  // namespace hal::cpu::vmath

#endif  // HAL_PLUGINS_CPU_OPS_VECTOR_MATH_HPP_
