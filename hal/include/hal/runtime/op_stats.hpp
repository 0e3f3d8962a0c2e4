// HAL runtime: what libhal did around op launches beyond the launch itself,
// per (device, op): inputs cast for uniform kernels (on the device through
// the plugin's copy op, or through the fallback device), and whole ops a
// bridge ran on the fallback device. Bridges and tools show these wherever
// they show fallback (the `hal` Python package: hal.op_stats()).
#ifndef HAL_RUNTIME_OP_STATS_HPP_
#define HAL_RUNTIME_OP_STATS_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace hal {

class Device;

struct OpStat {
  std::string device;  // "template:0": where the op was launched
  std::string op;      // catalog name
  uint64_t casts = 0;           // inputs cast on the device (its copy op)
  uint64_t fallback_casts = 0;  // inputs cast through the fallback device
  uint64_t cast_bytes = 0;      // bytes written by casts (both kinds)
  uint64_t fallbacks = 0;       // whole ops run on the fallback device (bridges)
  uint64_t fallback_bytes = 0;  // bytes copied between the devices for them
};

// A snapshot, sorted by device then op; only (device, op) pairs with a
// count. Thread-safe.
std::vector<OpStat> op_stats();
// Sets every count to zero. Thread-safe.
void reset_op_stats();

// For bridges that run an op of DEVICE on the fallback device themselves:
// counts one fallback of OP and BYTES copied for it. Thread-safe.
void record_fallback(const Device& device, const std::string& op, uint64_t bytes);

namespace detail {
// libhal's cast path: one cast of an input of OP on DEVICE writing BYTES.
void record_cast(const Device& device, const std::string& op, bool through_fallback, uint64_t bytes);
}  // namespace detail

}  // namespace hal

#endif  // HAL_RUNTIME_OP_STATS_HPP_
