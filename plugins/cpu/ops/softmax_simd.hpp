// CPU plugin: float32 rows of a softmax in explicit SIMD (GCC/Clang vector
// extensions at the widest width -march allows): a row's max and Σ e^(x - max)
// as straight vector code with tree reductions. The auto-vectorised loops
// left the max sweep scalar and vmath::exp's overflow selects in the hot loop
// (0.7x PyTorch on 4096 x 4096 float32), and GCC's "omp simd" reductions add
// a vector's lanes one by one (a 16-deep chain per short row). Shared by the
// softmax kernels (nn.cc) and attention's online softmax (transformer.cc).
// Stateless; header-only.
#ifndef HAL_PLUGINS_CPU_OPS_SOFTMAX_SIMD_HPP_
#define HAL_PLUGINS_CPU_OPS_SOFTMAX_SIMD_HPP_

#include <cstdint>
#include <cstring>
#include <limits>

#include "nn_common.hpp"

namespace hal::cpu::simd {

#if defined(__AVX512F__)
inline constexpr int kW = 16;
#elif defined(__AVX__)
inline constexpr int kW = 8;
#else
inline constexpr int kW = 4;
#endif
typedef float VecF __attribute__((vector_size(kW * sizeof(float))));
typedef int32_t VecI __attribute__((vector_size(kW * sizeof(int32_t))));

HAL_NN_INLINE VecF load(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
HAL_NN_INLINE void store(float* p, VecF v) { std::memcpy(p, &v, sizeof v); }
HAL_NN_INLINE VecF splat(float f) { return VecF{} + f; }
// NaN lanes of A lose to B: NaNs reach the output through the sum instead.
HAL_NN_INLINE VecF max(VecF a, VecF b) { return a > b ? a : b; }
// Horizontal sum and max as trees (log2(kW) dependent steps, not kW - 1): a
// short row (64 floats: 4 vectors) is latency-bound on them.
HAL_NN_INLINE float hsum(VecF v) {
  float t[kW];
  std::memcpy(t, &v, sizeof t);
  for (int w = kW / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) t[j] += t[j + w];
  return t[0];
}
// NaN lanes lose where the other lane is a number (as the max sweep's).
HAL_NN_INLINE float hmax(VecF v) {
  float t[kW];
  std::memcpy(t, &v, sizeof t);
  for (int w = kW / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) t[j] = t[j + w] > t[j] ? t[j + w] : t[j];
  return t[0];
}

// e^x for x <= 0 or NaN (softmax's x - max): vmath::exp's reduction and
// polynomial without its overflow and subnormal handling. Results below
// FLT_MIN (x < ln FLT_MIN) are 0: next to the row's sum (>= 1) they are
// negligible, and masked -inf entries come out exactly 0.
HAL_NN_INLINE VecF exp_nonpositive(VecF x) {
  const float kMin = -87.3365478515625f;  // ln(FLT_MIN), rounded up
  VecF xc = x < kMin ? splat(kMin) : x;
  const float kShift = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  VecF n = (xc * 1.44269504088896341f + kShift) - kShift;
  VecF r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  VecF p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  VecF y = p * (r * r) + r + 1.0f;
  // 2^n for n in [-126, 0]: the exponent field directly (NaN lanes carry garbage, multiplied into NaN).
  VecI e = (__builtin_convertvector(n, VecI) + 127) << 23;
  VecF scale;
  std::memcpy(&scale, &e, sizeof scale);
  y = y * scale;
  return x < kMin ? VecF{} : y;
}

// A row of N split as BODY = N - N % kW elements loaded directly and the rest
// as one vector padded with -inf (whose e^(x - max) adds 0 to the sum).
struct Row {
  const float* x;
  int64_t n, body;
  VecF tail;
  Row(const float* x_, int64_t n_) : x(x_), n(n_), body(n_ - n_ % kW) {
    if (body == n) {  // no tail (a multiple of kW): skip the padded vector's loads and exp
      tail = splat(-std::numeric_limits<float>::infinity());
      return;
    }
    float buf[kW];
    for (int j = 0; j < kW; ++j) buf[j] = body + j < n ? x[body + j] : -std::numeric_limits<float>::infinity();
    tail = load(buf);
  }
  float max() const {
    VecF m0 = tail, m1 = tail;
    int64_t i = 0;
    for (; i + 2 * kW <= body; i += 2 * kW) {
      m0 = simd::max(m0, load(x + i));
      m1 = simd::max(m1, load(x + i + kW));
    }
    if (i < body) m0 = simd::max(m0, load(x + i));
    return hmax(simd::max(m0, m1));
  }
  // Σ e^(x - M); with kStore, stores the body's terms to Y too.
  template <bool kStore>
  float sum_exp(float m, float* y) const {
    VecF vm = splat(m), s0 = body < n ? exp_nonpositive(tail - vm) : VecF{}, s1 = {};
    int64_t i = 0;
    for (; i + 2 * kW <= body; i += 2 * kW) {
      VecF e0 = exp_nonpositive(load(x + i) - vm), e1 = exp_nonpositive(load(x + i + kW) - vm);
      if constexpr (kStore) {
        store(y + i, e0);
        store(y + i + kW, e1);
      }
      s0 += e0;
      s1 += e1;
    }
    if (i < body) {
      VecF e0 = exp_nonpositive(load(x + i) - vm);
      if constexpr (kStore) store(y + i, e0);
      s0 += e0;
    }
    return hsum(s0 + s1);
  }
};

}  // namespace hal::cpu::simd

#endif  // HAL_PLUGINS_CPU_OPS_SOFTMAX_SIMD_HPP_
