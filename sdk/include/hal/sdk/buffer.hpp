// HAL C++ SDK: a device allocation (the object behind hal_buffer_t).
// Header-only.
#ifndef HAL_SDK_BUFFER_HPP_
#define HAL_SDK_BUFFER_HPP_

#include <cstdint>

namespace hal::sdk {

class Device;

// Where a host-accessible buffer's memory lies in a file another process of
// this host can map (a memfd, see host_memory.hpp): the descriptor in this
// process, the offset of byte 0 in the file, and the file's identity
// (st_dev, st_ino), by which a peer tells this file from another that
// reused the descriptor number.
// Also posted as is in the host communicator's shared segment, for
// processes of the same build: a fixed layout.
struct SharedMemory {
  int32_t fd = -1;  // -1: none
  uint32_t reserved = 0;
  uint64_t offset = 0;
  uint64_t device = 0, inode = 0;
};
static_assert(sizeof(SharedMemory) == 32);

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
  // The file behind host_pointer(), if there is one a peer process may map
  // (the host communicator then reads and writes peers' buffers in place);
  // false otherwise. Called from any thread; must not change over the
  // buffer's life. OUT is non-null and written only when true.
  virtual bool shared_memory(SharedMemory* /*out*/) { return false; }

 private:
  Device& device_;
  uint64_t size_;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_BUFFER_HPP_
