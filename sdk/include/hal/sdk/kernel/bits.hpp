// HAL C++ SDK, kernel helpers: a float32's IEEE 754 bit pattern and back
// (what Half/BFloat16 rounding and branch-free vector math are built on).
// Header-only, no intrinsics; pure functions, safe from any thread.
#ifndef HAL_SDK_KERNEL_BITS_HPP_
#define HAL_SDK_KERNEL_BITS_HPP_

#include <cstdint>
#include <cstring>

// Forced inline where the compiler allows: these sit in loops that must
// vectorise, and an out-of-line call stops that (GCC gives up inlining in
// files with many kernels).
#if defined(__GNUC__) || defined(__clang__)
#define HAL_SDK_KERNEL_INLINE inline __attribute__((always_inline))
#else
#define HAL_SDK_KERNEL_INLINE inline
#endif

namespace hal::sdk::kernel {

// The bits of F (memcpy: no aliasing UB; compiles to a register move).
HAL_SDK_KERNEL_INLINE uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The float whose bits are U.
HAL_SDK_KERNEL_INLINE float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_BITS_HPP_
