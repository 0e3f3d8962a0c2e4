#include "runner/storage.hpp"

#include <cmath>
#include <cstring>

#include "op_suite.hpp"

namespace hal::conformance {

size_t storage_size(hal_dtype_e dt) {
  switch (dt) {
    case HAL_DTYPE_FLOAT64: case HAL_DTYPE_INT64: return 8;
    case HAL_DTYPE_FLOAT32: case HAL_DTYPE_INT32: return 4;
    case HAL_DTYPE_FLOAT16: case HAL_DTYPE_BFLOAT16: case HAL_DTYPE_INT16: return 2;
    case HAL_DTYPE_INT8: case HAL_DTYPE_UINT8: case HAL_DTYPE_BOOL: return 1;
    default: return 0;
  }
}

uint16_t half_bits(double v) {
  v = round_to(HAL_DTYPE_FLOAT16, v);
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isnan(v)) return sign | 0x7E00;  // the sign of NaN is kept (signbit tests it)
  if (std::isinf(a)) return sign | 0x7C00;
  if (a == 0) return sign;
  if (a < std::ldexp(1.0, -14))  // subnormal: multiples of 2^-24
    return sign | static_cast<uint16_t>(std::lround(a / std::ldexp(1.0, -24)));
  int e;
  double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  uint16_t mant = static_cast<uint16_t>(std::lround((f * 2 - 1) * 1024));
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | mant;
}

double half_value(uint16_t bits) {
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  int exp = (bits >> 10) & 0x1F;
  int mant = bits & 0x3FF;
  if (exp == 0x1F) return mant ? std::copysign(std::nan(""), sign) : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

uint16_t bfloat16_bits(double v) {
  v = round_to(HAL_DTYPE_BFLOAT16, v);
  if (std::isnan(v)) return std::signbit(v) ? 0xFFC0 : 0x7FC0;
  // Rounded to bfloat16, the float32 value is exact and its low half zero.
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

double bfloat16_value(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void encode(hal_dtype_e dt, double v, void* dst) {
  v = round_to(dt, v);
  switch (dt) {
    case HAL_DTYPE_FLOAT64: std::memcpy(dst, &v, 8); break;
    case HAL_DTYPE_FLOAT32: { float f = static_cast<float>(v); std::memcpy(dst, &f, 4); break; }
    case HAL_DTYPE_FLOAT16: { uint16_t b = half_bits(v); std::memcpy(dst, &b, 2); break; }
    case HAL_DTYPE_BFLOAT16: { uint16_t b = bfloat16_bits(v); std::memcpy(dst, &b, 2); break; }
    case HAL_DTYPE_INT64: { int64_t x = static_cast<int64_t>(v); std::memcpy(dst, &x, 8); break; }
    case HAL_DTYPE_INT32: { int32_t x = static_cast<int32_t>(v); std::memcpy(dst, &x, 4); break; }
    case HAL_DTYPE_INT16: { int16_t x = static_cast<int16_t>(v); std::memcpy(dst, &x, 2); break; }
    case HAL_DTYPE_INT8: { int8_t x = static_cast<int8_t>(v); std::memcpy(dst, &x, 1); break; }
    case HAL_DTYPE_UINT8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(dst, &x, 1); break; }
    case HAL_DTYPE_BOOL: { uint8_t x = v != 0; std::memcpy(dst, &x, 1); break; }
    default: break;
  }
}

double decode(hal_dtype_e dt, const void* src) {
  switch (dt) {
    case HAL_DTYPE_FLOAT64: { double x; std::memcpy(&x, src, 8); return x; }
    case HAL_DTYPE_FLOAT32: { float x; std::memcpy(&x, src, 4); return x; }
    case HAL_DTYPE_FLOAT16: { uint16_t b; std::memcpy(&b, src, 2); return half_value(b); }
    case HAL_DTYPE_BFLOAT16: { uint16_t b; std::memcpy(&b, src, 2); return bfloat16_value(b); }
    case HAL_DTYPE_INT64: { int64_t x; std::memcpy(&x, src, 8); return static_cast<double>(x); }
    case HAL_DTYPE_INT32: { int32_t x; std::memcpy(&x, src, 4); return x; }
    case HAL_DTYPE_INT16: { int16_t x; std::memcpy(&x, src, 2); return x; }
    case HAL_DTYPE_INT8: { int8_t x; std::memcpy(&x, src, 1); return x; }
    case HAL_DTYPE_UINT8: { uint8_t x; std::memcpy(&x, src, 1); return x; }
    // Any non-zero byte reads as true; the comparison is on the logical value.
    case HAL_DTYPE_BOOL: { uint8_t x; std::memcpy(&x, src, 1); return x != 0; }
    default: return 0;
  }
}

bool glob_match(const std::string& p, const std::string& t) {
  size_t pi = 0, ti = 0, star = std::string::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (star != std::string::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace hal::conformance
