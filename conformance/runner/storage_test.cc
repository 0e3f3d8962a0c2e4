// Unit tests of the runner's own conversions and glob (its reference for
// what float16/bfloat16 bits mean must itself be right).
#include "runner/storage.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "op_suite.hpp"
#include "runner/case_runner.hpp"

namespace hal::conformance {

TEST_CASE("half bits: known patterns and round trips") {
  CHECK(half_bits(1.0) == 0x3C00);
  CHECK(half_bits(-2.0) == 0xC000);
  CHECK(half_bits(65504.0) == 0x7BFF);
  CHECK(half_bits(1e6) == 0x7C00);  // overflows to inf
  CHECK(half_bits(std::ldexp(1.0, -24)) == 0x0001);  // smallest subnormal
  CHECK(half_bits(0.0) == 0x0000);
  CHECK(half_bits(-0.0) == 0x8000);
  CHECK(half_bits(1.0 + std::ldexp(1.0, -11)) == 0x3C00);  // tie rounds to even
  CHECK(half_bits(1.0 + 3 * std::ldexp(1.0, -11)) == 0x3C02);
  CHECK(std::isnan(half_value(half_bits(std::nan("")))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7C00) == 0x7C00 && (b & 0x3FF)) continue;  // NaNs
    REQUIRE(half_bits(half_value(static_cast<uint16_t>(b))) == b);
  }
}

TEST_CASE("bfloat16 bits") {
  CHECK(bfloat16_bits(1.0) == 0x3F80);
  CHECK(bfloat16_bits(-3.0) == 0xC040);
  CHECK(bfloat16_bits(1.0 + std::ldexp(1.0, -8)) == 0x3F80);  // tie to even
  CHECK(bfloat16_value(0x4049) == doctest::Approx(3.140625));
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    if ((b & 0x7F80) == 0x7F80 && (b & 0x7F)) continue;
    REQUIRE(bfloat16_bits(bfloat16_value(static_cast<uint16_t>(b))) == b);
  }
}

TEST_CASE("encode/decode every dtype") {
  unsigned char buf[8];
  struct {
    hal_dtype_e dt;
    double in, out;
  } cases[] = {{HAL_DTYPE_INT8, 130, -126},  {HAL_DTYPE_UINT8, -1, 255},      {HAL_DTYPE_INT16, 7.9, 7},
               {HAL_DTYPE_INT32, -5, -5},    {HAL_DTYPE_INT64, 1e15, 1e15},  {HAL_DTYPE_BOOL, 0.5, 1},
               {HAL_DTYPE_FLOAT32, 0.1, static_cast<float>(0.1)},           {HAL_DTYPE_FLOAT64, 0.1, 0.1},
               {HAL_DTYPE_FLOAT16, 0.1, 0.0999755859375},                  {HAL_DTYPE_BFLOAT16, 0.1, 0.10009765625}};
  for (const auto& c : cases) {
    CAPTURE(dtype_str(c.dt));
    std::memset(buf, 0, sizeof buf);
    encode(c.dt, c.in, buf);
    CHECK(decode(c.dt, buf) == c.out);
  }
}

TEST_CASE("glob") {
  CHECK(glob_match("add", "add"));
  CHECK_FALSE(glob_match("add", "addmm"));
  CHECK(glob_match("add*", "addmm"));
  CHECK(glob_match("op.add.float*", "op.add.float16"));
  CHECK_FALSE(glob_match("op.add.float*", "op.add.bfloat16"));
  CHECK(glob_match("*.float?6", "op.mul.float16"));
  CHECK(glob_match("*", ""));
  CHECK_FALSE(glob_match("?", ""));
}

TEST_CASE("tolerances are DIOPI's defaults") {
  CHECK(default_tolerance(HAL_DTYPE_FLOAT32).atol == 1e-5);
  CHECK(default_tolerance(HAL_DTYPE_FLOAT16).rtol == 1e-3);
  CHECK(default_tolerance(HAL_DTYPE_BFLOAT16).atol == 1e-2);
  CHECK(default_tolerance(HAL_DTYPE_FLOAT64).rtol == 1e-10);
  CHECK(default_tolerance(HAL_DTYPE_INT32).atol == 0);
}

}  // namespace hal::conformance
