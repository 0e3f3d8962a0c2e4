// HAL runtime: devices and the buffers allocated on them.
#ifndef HAL_RUNTIME_DEVICE_HPP_
#define HAL_RUNTIME_DEVICE_HPP_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "hal/hal.h"
#include "hal/runtime/caching_allocator.hpp"
#include "hal/runtime/error.hpp"

namespace hal {

class Buffer;
class Event;
class Plugin;
class Stream;
namespace detail {
struct LoadedPlugin;
}

// Whether a device still takes work (Device::state()).
enum class DeviceState {
  kOk,
  // Its plugin reported HAL_STATUS_DEVICE_LOST (at enumeration or from any
  // call): the core refuses new work on it with that error, for good.
  kLost,
};
const char* device_state_name(DeviceState state);  // "ok", "lost"

// One device of a loaded plugin. Owned by shared_ptr (the Plugin and every
// Buffer/Stream/Event made from it), so it lives as long as its last user.
// Thread-safe.
class Device : public std::enable_shared_from_this<Device> {
 public:
  Device(std::shared_ptr<detail::LoadedPlugin> plugin, uint32_t index, hal_device_t* handle,
         const hal_device_properties_t& properties, bool caching);
  ~Device();

  const std::string& plugin_name() const;
  uint32_t index() const { return index_; }
  std::string id() const;  // "cpu:0"
  const hal_device_properties_t& properties() const { return properties_; }
  bool supports(hal_capability_e capability) const {
    return (properties_.capabilities & capability) != 0;
  }
  hal_device_t* handle() const { return handle_; }
  const detail::LoadedPlugin& plugin() const { return *plugin_; }

  // Allocates SIZE bytes through the caching allocator for use on STREAM
  // (nullptr: synchronous use). Throws hal::Error (INVALID_ARGUMENT for 0,
  // OUT_OF_MEMORY, ...).
  Buffer allocate(uint64_t size, const Stream* stream = nullptr);
  CachingAllocator& allocator() { return *allocator_; }

  // Throws UNIMPLEMENTED when the plugin has no stream interface.
  Stream create_stream();
  Event create_event();

  // Free and total bytes as the plugin reports them.
  void memory_info(uint64_t* out_free, uint64_t* out_total) const;
  // The device libhal casts and runs ops on when this device cannot: the
  // runtime's fallback_device() (hal.toml fallback_device, else the first
  // "cpu" device) when that is another device; nullptr otherwise (this is
  // the fallback, or there is none). Set once by Runtime::create.
  std::shared_ptr<Device> fallback_device() const { return fallback_; }
  // For Runtime::create only (before the device is shared).
  void set_fallback_device(std::shared_ptr<Device> fallback) { fallback_ = std::move(fallback); }

  // ---- Device loss (a plugin's HAL_STATUS_DEVICE_LOST) ----------------------
  // kLost once any call on this device returned DEVICE_LOST (the runtime
  // checks every status it converts for this device) or mark_lost() was
  // called; never back to kOk. Thread-safe; one atomic load.
  DeviceState state() const {
    return lost_.load(std::memory_order_acquire) ? DeviceState::kLost : DeviceState::kOk;
  }
  // The plugin's message that lost the device ("" while kOk).
  std::string lost_reason() const;
  // Marks the device lost (the first REASON is kept) and returns the
  // memory its caching allocator holds unused to the plugin (errors
  // ignored: the device is gone). Thread-safe; idempotent.
  void mark_lost(const std::string& reason) const;
  // Throws hal::Error DEVICE_LOST for a lost device, naming it, CALL, the
  // reason and the failover device work can move to (hal.toml failover);
  // returns when kOk.
  void check_usable(const char* call) const {
    if (lost_.load(std::memory_order_acquire)) throw_lost(call);
  }
  // Converts a plugin STATUS for a call on this device (throw_if_error),
  // marking the device lost first when its code is DEVICE_LOST.
  void check(hal_status_t* status) const {
    if (status != nullptr) throw_status(status);
  }
  // Rethrows E after marking the device lost when it is a DEVICE_LOST
  // error (for errors raised by code that does not know the device).
  [[noreturn]] void rethrow(const Error& e) const;
  // The device work moves to when this one is lost: the runtime's
  // failover_device() (hal.toml failover) when that is another device;
  // nullptr otherwise. Set once by Runtime::create.
  std::shared_ptr<Device> failover_device() const { return failover_; }
  void set_failover_device(std::shared_ptr<Device> failover) { failover_ = std::move(failover); }
  // How long a host wait on this device (Stream/Event::synchronize) may
  // take before it fails with HAL_STATUS_TIMEOUT (hal.toml wait_timeout_ms;
  // 0 = for ever). Set once by Runtime::create.
  uint64_t wait_timeout_ms() const { return wait_timeout_ms_; }
  void set_wait_timeout_ms(uint64_t ms) { wait_timeout_ms_ = ms; }

 private:
  [[noreturn]] void throw_lost(const char* call) const;
  [[noreturn]] void throw_status(hal_status_t* status) const;

  std::shared_ptr<detail::LoadedPlugin> plugin_;
  uint32_t index_;
  hal_device_t* handle_;
  hal_device_properties_t properties_;
  std::unique_ptr<CachingAllocator> allocator_;
  // Never a cycle: the fallback device's own fallback is nullptr.
  std::shared_ptr<Device> fallback_;
  std::shared_ptr<Device> failover_;  // likewise
  uint64_t wait_timeout_ms_ = 0;
  mutable std::atomic<bool> lost_{false};
  mutable std::mutex lost_mu_;
  mutable std::string lost_reason_;
};

// Device memory from a Device's caching allocator. Move-only; frees itself
// (back to the cache) on destruction. Not thread-safe for concurrent
// free()/move; concurrent copies on distinct buffers are fine.
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::shared_ptr<Device> device, CachingAllocator::Block* block)
      : device_(std::move(device)), block_(block) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer() { release(); }

  bool valid() const { return block_ != nullptr; }
  uint64_t size() const;  // bytes asked for (0 when not valid)
  Device& device() const;
  hal_buffer_t* handle() const;  // the plugin buffer (may be larger than size())
  void* host_pointer() const;    // nullptr unless host-accessible memory

  // Stream-aware safety: the memory is not reused until STREAM's work queued
  // before the free has completed.
  void record_stream(const Stream& stream);

  // Each copies or fills [offset, offset+size) of this buffer; STREAM nullptr
  // = synchronous. Throws OUT_OF_RANGE naming the buffer size, offset and
  // size when the range leaves the buffer (nothing is copied), and
  // INVALID_ARGUMENT when the buffer was freed.
  void copy_from_host(const void* src, uint64_t size, uint64_t offset = 0,
                      const Stream* stream = nullptr);
  void copy_to_host(void* dst, uint64_t size, uint64_t offset = 0,
                    const Stream* stream = nullptr) const;
  void copy_from(const Buffer& src, uint64_t size, uint64_t dst_offset = 0,
                 uint64_t src_offset = 0, const Stream* stream = nullptr);
  void fill(uint8_t value, uint64_t size, uint64_t offset = 0, const Stream* stream = nullptr);

  // Returns the memory now. Throws INVALID_ARGUMENT if already freed.
  void free();

 private:
  void release() noexcept;
  void check_live(const char* call) const;
  void check_range(const char* call, uint64_t offset, uint64_t size) const;
  std::shared_ptr<Device> device_;
  CachingAllocator::Block* block_ = nullptr;
};

}  // namespace hal

#endif  // HAL_RUNTIME_DEVICE_HPP_
