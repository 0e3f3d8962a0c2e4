#include "hal/runtime/stream.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "hal/runtime/device.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {
namespace {
const detail::LoadedPlugin& plugin_of(const std::shared_ptr<Device>& d) { return d->plugin(); }

// Waits until IDLE() (the plugin's query) is true, at most DEVICE's
// wait_timeout_ms: the ABI's synchronize entries take no timeout, so a
// wait that may not end is a poll. The plugin's synchronize runs after it
// (at once: the work is done) and reports the work's errors. Polls back off
// from yields to 100 µs sleeps: a long wait costs little CPU and ends at
// most ~100 µs late. Without a query entry, or with no timeout, the plugin
// waits as it will.
template <class Idle>
void wait_bounded(Device& device, const char* what, const Idle& idle) {
  const uint64_t limit_ms = device.wait_timeout_ms();
  if (limit_ms == 0 || idle()) return;
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::milliseconds(limit_ms);
  std::chrono::microseconds pause(0);
  while (!idle()) {
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited >= limit)
      throw Error(HAL_STATUS_TIMEOUT, device.id() + ": " + what + " did not finish within " +
                                          std::to_string(limit_ms) +
                                          " ms (hal.toml wait_timeout_ms; the device may be hung)");
    if (pause.count() == 0 && waited < std::chrono::microseconds(50)) {
      std::this_thread::yield();
      continue;
    }
    pause = std::min(std::chrono::microseconds(100), std::max(std::chrono::microseconds(10), pause * 2));
    std::this_thread::sleep_for(pause);
  }
}
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
  if (p.stream.stream_query != nullptr) wait_bounded(*device_, "stream_synchronize", [&] { return query(); });
  device_->check(p.require(p.stream.stream_synchronize, "stream_synchronize")(h));
}

bool Stream::query() const {
  hal_stream_t* h = handle();
  const auto& p = plugin_of(device_);
  bool idle = false;
  device_->check(p.require(p.stream.stream_query, "stream_query")(h, &idle));
  return idle;
}

void Stream::enqueue_host_func(hal_host_func_t fn, void* user_data) const {
  hal_stream_t* h = handle();
  device_->check_usable("stream_enqueue_host_func");
  const auto& p = plugin_of(device_);
  device_->check(p.require(p.stream.stream_enqueue_host_func, "stream_enqueue_host_func")(h, fn, user_data));
}

void Stream::wait(const Event& event) const {
  hal_stream_t* h = handle();
  device_->check_usable("stream_wait_event");
  const auto& p = plugin_of(device_);
  device_->check(p.require(p.stream.stream_wait_event, "stream_wait_event")(h, event.handle()));
}

Event::Event(std::shared_ptr<Device> device, hal_event_t* handle)
    : OwnedHandle("event", device, handle,
                  device->plugin().require(device->plugin().stream.event_destroy, "event_destroy")) {}

void Event::record(const Stream& stream) const {
  hal_event_t* h = handle();
  device_->check_usable("event_record");
  const auto& p = plugin_of(device_);
  device_->check(p.require(p.stream.event_record, "event_record")(h, stream.handle()));
}

bool Event::query() const {
  hal_event_t* h = handle();
  const auto& p = plugin_of(device_);
  bool done = false;
  device_->check(p.require(p.stream.event_query, "event_query")(h, &done));
  return done;
}

void Event::synchronize() const {
  hal_event_t* h = handle();
  const auto& p = plugin_of(device_);
  if (p.stream.event_query != nullptr) wait_bounded(*device_, "event_synchronize", [&] { return query(); });
  device_->check(p.require(p.stream.event_synchronize, "event_synchronize")(h));
}

uint64_t Event::elapsed_ns(const Event& start, const Event& end) {
  hal_event_t* a = start.handle();
  hal_event_t* b = end.handle();
  const auto& p = plugin_of(end.device_);
  uint64_t ns = 0;
  end.device_->check(p.require(p.stream.event_elapsed_time, "event_elapsed_time")(a, b, &ns));
  return ns;
}

}  // namespace hal
