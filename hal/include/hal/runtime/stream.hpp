// HAL runtime: streams (in-order device work queues) and events.
#ifndef HAL_RUNTIME_STREAM_HPP_
#define HAL_RUNTIME_STREAM_HPP_

#include <cstdint>
#include <memory>

#include "hal/hal.h"
#include "hal/runtime/error.hpp"

namespace hal {

class Device;
class Event;

// Move-only owner of a plugin stream; destroys it (after its work) on
// destruction. Calls on one Stream may come from several threads, but not
// concurrently with destroy() or destruction.
class Stream {
 public:
  Stream() = default;
  Stream(std::shared_ptr<Device> device, hal_stream_t* handle)
      : device_(std::move(device)), handle_(handle) {}
  Stream(Stream&& o) noexcept { *this = std::move(o); }
  Stream& operator=(Stream&& o) noexcept;
  ~Stream();

  bool valid() const { return handle_ != nullptr; }
  Device& device() const;
  // The plugin handle; throws INVALID_ARGUMENT after destroy().
  hal_stream_t* handle() const;

  void synchronize() const;
  bool query() const;  // true when idle
  // Queues FN(USER_DATA) in stream order.
  void enqueue_host_func(hal_host_func_t fn, void* user_data) const;
  // Later work waits for EVENT's latest record.
  void wait(const Event& event) const;
  // Waits for queued work and destroys the plugin stream. A second call, or
  // any use afterwards, throws INVALID_ARGUMENT ("stream was destroyed").
  void destroy();

 private:
  std::shared_ptr<Device> device_;
  hal_stream_t* handle_ = nullptr;
};

// Move-only owner of a plugin event.
class Event {
 public:
  Event() = default;
  Event(std::shared_ptr<Device> device, hal_event_t* handle)
      : device_(std::move(device)), handle_(handle) {}
  Event(Event&& o) noexcept { *this = std::move(o); }
  Event& operator=(Event&& o) noexcept;
  ~Event();

  bool valid() const { return handle_ != nullptr; }
  hal_event_t* handle() const;
  void record(const Stream& stream) const;
  bool query() const;  // true when complete (or never recorded)
  void synchronize() const;
  // Nanoseconds from START to END (both recorded and complete).
  static uint64_t elapsed_ns(const Event& start, const Event& end);
  void destroy();

 private:
  std::shared_ptr<Device> device_;
  hal_event_t* handle_ = nullptr;
};

}  // namespace hal

#endif  // HAL_RUNTIME_STREAM_HPP_
