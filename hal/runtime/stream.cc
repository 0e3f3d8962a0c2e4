#include "hal/runtime/stream.hpp"

#include "hal/runtime/device.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {
namespace {
const detail::LoadedPlugin& plugin_of(const std::shared_ptr<Device>& d) { return d->plugin(); }
}  // namespace

Stream::Stream(std::shared_ptr<Device> device, hal_stream_t* handle)
    : OwnedHandle("stream", device, handle,
                  device->plugin().require(device->plugin().stream.stream_destroy, "stream_destroy")) {}

Device& Stream::device() const {
  if (!device_) throw Error(HAL_STATUS_INVALID_ARGUMENT, "Stream::device: the stream was never created");
  return *device_;
}

void Stream::synchronize() const {
  hal_stream_t* h = handle();
  const auto& p = plugin_of(device_);
  throw_if_error(p.require(p.stream.stream_synchronize, "stream_synchronize")(h));
}

bool Stream::query() const {
  hal_stream_t* h = handle();
  const auto& p = plugin_of(device_);
  bool idle = false;
  throw_if_error(p.require(p.stream.stream_query, "stream_query")(h, &idle));
  return idle;
}

void Stream::enqueue_host_func(hal_host_func_t fn, void* user_data) const {
  hal_stream_t* h = handle();
  const auto& p = plugin_of(device_);
  throw_if_error(p.require(p.stream.stream_enqueue_host_func, "stream_enqueue_host_func")(h, fn, user_data));
}

void Stream::wait(const Event& event) const {
  hal_stream_t* h = handle();
  const auto& p = plugin_of(device_);
  throw_if_error(p.require(p.stream.stream_wait_event, "stream_wait_event")(h, event.handle()));
}

Event::Event(std::shared_ptr<Device> device, hal_event_t* handle)
    : OwnedHandle("event", device, handle,
                  device->plugin().require(device->plugin().stream.event_destroy, "event_destroy")) {}

void Event::record(const Stream& stream) const {
  hal_event_t* h = handle();
  const auto& p = plugin_of(device_);
  throw_if_error(p.require(p.stream.event_record, "event_record")(h, stream.handle()));
}

bool Event::query() const {
  hal_event_t* h = handle();
  const auto& p = plugin_of(device_);
  bool done = false;
  throw_if_error(p.require(p.stream.event_query, "event_query")(h, &done));
  return done;
}

void Event::synchronize() const {
  hal_event_t* h = handle();
  const auto& p = plugin_of(device_);
  throw_if_error(p.require(p.stream.event_synchronize, "event_synchronize")(h));
}

uint64_t Event::elapsed_ns(const Event& start, const Event& end) {
  hal_event_t* a = start.handle();
  hal_event_t* b = end.handle();
  const auto& p = plugin_of(end.device_);
  uint64_t ns = 0;
  throw_if_error(p.require(p.stream.event_elapsed_time, "event_elapsed_time")(a, b, &ns));
  return ns;
}

}  // namespace hal
