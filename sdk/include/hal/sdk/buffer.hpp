// HAL C++ SDK: a device allocation (the object behind hal_buffer_t).
// Header-only.
#ifndef HAL_SDK_BUFFER_HPP_
#define HAL_SDK_BUFFER_HPP_

#include <cstdint>

namespace hal::sdk {

class Device;

// Subclass to hold your native handle. Created by Device::allocate, owned
// by the SDK from then on and destroyed on buffer_free (after the handle was
// validated; the caller promised no queued work still uses it). DEVICE
// outlives the buffer.
class Buffer {
 public:
  Buffer(Device& device, uint64_t size) : device_(device), size_(size) {}
  virtual ~Buffer() = default;
  Device& device() const { return device_; }
  uint64_t size() const { return size_; }
  // Host address of byte 0 for host-accessible memory, else nullptr.
  // Called concurrently from any thread (each op launch reads it): must not
  // change over the buffer's life.
  virtual void* host_pointer() { return nullptr; }

 private:
  Device& device_;
  uint64_t size_;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_BUFFER_HPP_
