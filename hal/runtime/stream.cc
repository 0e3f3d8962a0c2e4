#include "hal/runtime/stream.hpp"

#include "hal/runtime/device.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {
namespace {
const hal_stream_api_t& api(const std::shared_ptr<Device>& d) { return d->plugin().stream; }
template <class Fn>
Fn need(const std::shared_ptr<Device>& d, Fn fn, const char* call) {
  return d->plugin().require(fn, call);
}
}  // namespace

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (handle_ != nullptr) {
      try {
        destroy();
      } catch (...) {
      }
    }
    device_ = std::move(o.device_);
    handle_ = o.handle_;
    o.handle_ = nullptr;
  }
  return *this;
}

Stream::~Stream() {
  if (handle_ == nullptr) return;
  try {
    destroy();
  } catch (...) {  // a destructor has nowhere to report to
  }
}

Device& Stream::device() const {
  if (!device_) throw Error(HAL_STATUS_INVALID_ARGUMENT, "Stream::device: the stream was never created");
  return *device_;
}

hal_stream_t* Stream::handle() const {
  if (handle_ == nullptr)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "the stream was destroyed (or moved from, or never created)");
  return handle_;
}

void Stream::synchronize() const {
  throw_if_error(need(device_, api(device_).stream_synchronize, "stream_synchronize")(handle()));
}

bool Stream::query() const {
  hal_stream_t* h = handle();
  bool idle = false;
  throw_if_error(need(device_, api(device_).stream_query, "stream_query")(h, &idle));
  return idle;
}

void Stream::enqueue_host_func(hal_host_func_t fn, void* user_data) const {
  hal_stream_t* h = handle();
  throw_if_error(need(device_, api(device_).stream_enqueue_host_func, "stream_enqueue_host_func")(h, fn, user_data));
}

void Stream::wait(const Event& event) const {
  hal_stream_t* h = handle();
  throw_if_error(need(device_, api(device_).stream_wait_event, "stream_wait_event")(h, event.handle()));
}

void Stream::destroy() {
  hal_stream_t* h = handle();
  handle_ = nullptr;
  throw_if_error(need(device_, api(device_).stream_destroy, "stream_destroy")(h));
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (handle_ != nullptr) {
      try {
        destroy();
      } catch (...) {
      }
    }
    device_ = std::move(o.device_);
    handle_ = o.handle_;
    o.handle_ = nullptr;
  }
  return *this;
}

Event::~Event() {
  if (handle_ == nullptr) return;
  try {
    destroy();
  } catch (...) {
  }
}

hal_event_t* Event::handle() const {
  if (handle_ == nullptr)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "the event was destroyed (or moved from, or never created)");
  return handle_;
}

void Event::record(const Stream& stream) const {
  hal_event_t* h = handle();
  throw_if_error(need(device_, api(device_).event_record, "event_record")(h, stream.handle()));
}

bool Event::query() const {
  hal_event_t* h = handle();
  bool done = false;
  throw_if_error(need(device_, api(device_).event_query, "event_query")(h, &done));
  return done;
}

void Event::synchronize() const {
  hal_event_t* h = handle();
  throw_if_error(need(device_, api(device_).event_synchronize, "event_synchronize")(h));
}

uint64_t Event::elapsed_ns(const Event& start, const Event& end) {
  hal_event_t* a = start.handle();
  hal_event_t* b = end.handle();
  uint64_t ns = 0;
  throw_if_error(need(end.device_, api(end.device_).event_elapsed_time, "event_elapsed_time")(a, b, &ns));
  return ns;
}

void Event::destroy() {
  hal_event_t* h = handle();
  handle_ = nullptr;
  throw_if_error(need(device_, api(device_).event_destroy, "event_destroy")(h));
}

}  // namespace hal
