// CPU plugin: non-temporal (streaming) stores of float rows, shared by the
// memory-bound kernels (norms, llm ops). A large output that aliases no
// input and is not in cache costs no read-for-ownership this way (what
// memcpy does for large copies); small ones stay cached for the next op.
// Callers compute a row (or a piece of one) into a small cached buffer and
// stream it out, then call stream_fence() once before their chunk ends.
#ifndef HAL_PLUGINS_CPU_OPS_STREAM_STORE_HPP_
#define HAL_PLUGINS_CPU_OPS_STREAM_STORE_HPP_

#include <immintrin.h>

#include <cstdint>

namespace hal::cpu {

// Outputs at least this large (bytes) are worth streaming.
constexpr int64_t kStreamBytes = int64_t{32} << 20;

// DST[0, N) = SRC[0, N) with non-temporal stores where the ISA has them.
inline __attribute__((always_inline)) void stream_copy(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) || defined(__AVX__)
#if defined(__AVX512F__)
  constexpr int64_t kW = 16;
#else
  constexpr int64_t kW = 8;
#endif
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & (kW * 4 - 1)) != 0; ++i) dst[i] = src[i];
  for (; i + kW <= n; i += kW) {
#if defined(__AVX512F__)
    _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#else
    _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#endif
  }
#endif
  for (; i < n; ++i) dst[i] = src[i];
}

// Orders this thread's streaming stores before what follows.
inline __attribute__((always_inline)) void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_OPS_STREAM_STORE_HPP_
