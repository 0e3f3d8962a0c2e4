// HAL C++ SDK, kernel helpers: float16 and bfloat16 storage types. Kernels
// compute in float (compute_t<T>) and round to nearest-even on store.
// Header-only, no intrinsics: usable by any plugin's host code.
#ifndef HAL_SDK_KERNEL_HALF_HPP_
#define HAL_SDK_KERNEL_HALF_HPP_

#include <cstdint>
#include <type_traits>

#include "hal/sdk/kernel/bits.hpp"

namespace hal::sdk::kernel {

// IEEE 754 binary16.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a float type
  operator float() const { return to_float(bits); }

  static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf/nan
    if (exp == 0) {
      if (man == 0) return bits_float(sign);
      // subnormal: value = man * 2^-24
      float v = static_cast<float>(man) * 5.9604644775390625e-8f;
      return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112) << 23) | (man << 13));
  }
  static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u);  // nan/inf
    if (a >= 0x477ff000u) return sign | 0x7c00u;                                // overflow -> inf
    if (a < 0x38800000u) {  // below the smallest normal half: subnormal or 0
      // Adding 0.5 (2^-1 as float) aligns the half's subnormal ulp (2^-24) to
      // the float's last mantissa bit, so the FPU rounds to nearest-even.
      float r = bits_float(a) + 0.5f;
      return sign | static_cast<uint16_t>(float_bits(r) - 0x3f000000u);
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
    return sign | static_cast<uint16_t>(a >> 13);
  }
};

// bfloat16: the top half of a float32.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT
  operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }

  static uint16_t from_float(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet nan
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    return static_cast<uint16_t>(u >> 16);
  }
};

// The type a kernel computes in for storage type T.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_HALF_HPP_
