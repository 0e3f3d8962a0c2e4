// HAL runtime: streams (in-order device work queues) and events.
#ifndef HAL_RUNTIME_STREAM_HPP_
#define HAL_RUNTIME_STREAM_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "hal/hal.h"
#include "hal/runtime/error.hpp"

namespace hal {

class Device;
class Event;

namespace detail {
// Move-only owner of one plugin object (stream or event) that releases it
// through the plugin's destroy entry. Keeps its Device (and so the plugin)
// alive. Not thread-safe against concurrent destroy()/move.
template <class Handle>
class OwnedHandle {
 public:
  using DestroyFn = hal_status_t* (*)(Handle*);

  bool valid() const { return handle_ != nullptr; }
  // The plugin handle; throws INVALID_ARGUMENT after destroy().
  Handle* handle() const {
    if (handle_ == nullptr)
      throw Error(HAL_STATUS_INVALID_ARGUMENT,
                  std::string("the ") + kind_ + " was destroyed (or moved from, or never created)");
    return handle_;
  }
  // Waits for the object's work (streams) and releases it. A second call,
  // or any use afterwards, throws INVALID_ARGUMENT.
  void destroy() {
    Handle* h = handle();
    handle_ = nullptr;
    throw_if_error(destroy_(h));
  }

 protected:
  OwnedHandle(const char* kind) : kind_(kind) {}
  OwnedHandle(const char* kind, std::shared_ptr<Device> device, Handle* handle, DestroyFn destroy)
      : device_(std::move(device)), handle_(handle), destroy_(destroy), kind_(kind) {}
  OwnedHandle(OwnedHandle&& o) noexcept : kind_(o.kind_) { *this = std::move(o); }
  OwnedHandle& operator=(OwnedHandle&& o) noexcept {
    if (this != &o) {
      release();
      device_ = std::move(o.device_);
      handle_ = std::exchange(o.handle_, nullptr);
      destroy_ = o.destroy_;
    }
    return *this;
  }
  ~OwnedHandle() { release(); }

  std::shared_ptr<Device> device_;

 private:
  void release() noexcept {
    if (handle_ == nullptr) return;
    try {
      destroy();
    } catch (...) {  // a destructor has nowhere to report to
    }
  }
  Handle* handle_ = nullptr;
  DestroyFn destroy_ = nullptr;
  const char* kind_;
};
}  // namespace detail

// Owner of a plugin stream; destroys it (after its work) on destruction.
// Calls on one Stream may come from several threads, but not concurrently
// with destroy() or destruction.
class Stream : public detail::OwnedHandle<hal_stream_t> {
 public:
  Stream() : OwnedHandle("stream") {}
  // Takes ownership of HANDLE, created on DEVICE.
  Stream(std::shared_ptr<Device> device, hal_stream_t* handle);

  Device& device() const;
  void synchronize() const;
  bool query() const;  // true when idle
  // Queues FN(USER_DATA) in stream order.
  void enqueue_host_func(hal_host_func_t fn, void* user_data) const;
  // Later work waits for EVENT's latest record.
  void wait(const Event& event) const;
};

// Owner of a plugin event.
class Event : public detail::OwnedHandle<hal_event_t> {
 public:
  Event() : OwnedHandle("event") {}
  Event(std::shared_ptr<Device> device, hal_event_t* handle);

  void record(const Stream& stream) const;
  bool query() const;  // true when complete (or never recorded)
  void synchronize() const;
  // Nanoseconds from START to END (both recorded and complete).
  static uint64_t elapsed_ns(const Event& start, const Event& end);
};

}  // namespace hal

#endif  // HAL_RUNTIME_STREAM_HPP_
