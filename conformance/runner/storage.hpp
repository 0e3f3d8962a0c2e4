// hal-conformance: logical values <-> the bytes a dtype stores, written here
// (not taken from the SDK) so the runner checks the plugin's conversions
// instead of trusting them.
#ifndef HAL_CONFORMANCE_RUNNER_STORAGE_HPP_
#define HAL_CONFORMANCE_RUNNER_STORAGE_HPP_

#include <cstddef>
#include <cstdint>
#include <string>

#include "hal/hal.h"

namespace hal::conformance {

size_t storage_size(hal_dtype_e dt);
// Writes V (rounded to DT first) at DST in DT's storage format.
void encode(hal_dtype_e dt, double v, void* dst);
double decode(hal_dtype_e dt, const void* src);

// IEEE binary16 / bfloat16 bit patterns of a double, rounding to nearest
// even; and back.
uint16_t half_bits(double v);
double half_value(uint16_t bits);
uint16_t bfloat16_bits(double v);
double bfloat16_value(uint16_t bits);

// Shell-style glob: '*' any run, '?' one character. Whole-string match.
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace hal::conformance

#endif  // HAL_CONFORMANCE_RUNNER_STORAGE_HPP_
