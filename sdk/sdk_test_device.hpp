// Test helpers of the SDK's own tests: a host-memory device that is enough
// for op_check/op_launch through the C entries, and status unwrapping.
#ifndef HAL_SDK_TEST_DEVICE_HPP_
#define HAL_SDK_TEST_DEVICE_HPP_

#include <memory>
#include <string>
#include <vector>

#include "hal/sdk/buffer.hpp"
#include "hal/sdk/device.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk::testing {

namespace sdk = hal::sdk;

// Takes ownership of S; returns "CODE_NAME: message" ("" for success).
inline std::string take(hal_status_t* s) {
  if (s == nullptr) return "";
  std::string m = std::string(sdk::status_code_name(s->code)) + ": " + s->message;
  s->destroy(s);
  return m;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class HostBuffer : public sdk::Buffer {
 public:
  HostBuffer(sdk::Device& d, uint64_t size) : Buffer(d, size), bytes_(size) {}
  void* host_pointer() override { return bytes_.data(); }

 private:
  std::vector<unsigned char> bytes_;
};

// Host memory only; enough for op_check/op_launch.
class TestDevice : public sdk::Device {
 public:
  sdk::DeviceProperties properties() override {
    sdk::DeviceProperties p;
    p.name = "SDK test device";
    p.total_memory_bytes = 1 << 20;
    return p;
  }
  std::unique_ptr<sdk::Buffer> allocate(uint64_t size, uint64_t) override {
    return std::make_unique<HostBuffer>(*this, size);
  }
  void copy_host_to_device(sdk::Buffer&, uint64_t, const void*, uint64_t, sdk::Stream*) override { unused(); }
  void copy_device_to_host(void*, sdk::Buffer&, uint64_t, uint64_t, sdk::Stream*) override { unused(); }
  void copy_device_to_device(sdk::Buffer&, uint64_t, sdk::Buffer&, uint64_t, uint64_t, sdk::Stream*) override {
    unused();
  }
  void fill(sdk::Buffer&, uint64_t, uint64_t, uint8_t, sdk::Stream*) override { unused(); }
  sdk::MemoryInfo memory_info() override { return {}; }

 private:
  [[noreturn]] static void unused() { sdk::fail(HAL_STATUS_UNIMPLEMENTED, "not used by this test"); }
};

}  // namespace hal::sdk::testing

#endif  // HAL_SDK_TEST_DEVICE_HPP_
