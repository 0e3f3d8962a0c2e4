// HAL C++ SDK, internal: the stream/event table's C entries (hal/stream.h).
#ifndef HAL_SDK_DETAIL_STREAM_ENTRIES_HPP_
#define HAL_SDK_DETAIL_STREAM_ENTRIES_HPP_

#include <cstdint>
#include <memory>

#include "hal/hal.h"
#include "hal/sdk/detail/call.hpp"
#include "hal/sdk/detail/registry.hpp"
#include "hal/sdk/device.hpp"
#include "hal/sdk/event.hpp"
#include "hal/sdk/stream.hpp"

namespace hal::sdk::detail {

inline hal_status_t* stream_create(hal_device_t* d, uint32_t flags, hal_stream_t** out) {
  return call("stream_create", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_stream is NULL");
    if (flags != 0) fail(HAL_STATUS_INVALID_ARGUMENT, "flags ", flags, " are not supported");
    std::unique_ptr<Stream> stream = device->create_stream();
    registry().add(stream.get(), Kind::kStream);
    *out = reinterpret_cast<hal_stream_t*>(stream.release());
  });
}

inline hal_status_t* stream_destroy(hal_stream_t* s) {
  return call("stream_destroy", [&] {
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    if (registry().remove(stream, Kind::kStream)) delete stream;
  });
}

inline hal_status_t* stream_synchronize(hal_stream_t* s) {
  return call("stream_synchronize", [&] { as<Stream>(s, Kind::kStream, "stream")->synchronize(); });
}

inline hal_status_t* stream_query(hal_stream_t* s, bool* out_idle) {
  return call("stream_query", [&] {
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    if (out_idle == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_idle is NULL");
    *out_idle = stream->idle();
  });
}

inline hal_status_t* stream_enqueue_host_func(hal_stream_t* s, hal_host_func_t fn, void* data) {
  return call("stream_enqueue_host_func", [&] {
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    if (fn == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "fn is NULL");
    stream->enqueue_host_func(fn, data);
  });
}

inline hal_status_t* stream_wait_event(hal_stream_t* s, hal_event_t* e) {
  return call("stream_wait_event", [&] {
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    auto* event = as<Event>(e, Kind::kEvent, "event");
    if (&event->device() != &stream->device())
      fail(HAL_STATUS_INVALID_ARGUMENT, "event and stream belong to different devices");
    stream->wait(*event);
  });
}

inline hal_status_t* event_create(hal_device_t* d, uint32_t flags, hal_event_t** out) {
  return call("event_create", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_event is NULL");
    if (flags != 0) fail(HAL_STATUS_INVALID_ARGUMENT, "flags ", flags, " are not supported");
    std::unique_ptr<Event> event = device->create_event();
    registry().add(event.get(), Kind::kEvent);
    *out = reinterpret_cast<hal_event_t*>(event.release());
  });
}

inline hal_status_t* event_destroy(hal_event_t* e) {
  return call("event_destroy", [&] {
    auto* event = as<Event>(e, Kind::kEvent, "event");
    if (registry().remove(event, Kind::kEvent)) delete event;
  });
}

inline hal_status_t* event_record(hal_event_t* e, hal_stream_t* s) {
  return call("event_record", [&] {
    auto* event = as<Event>(e, Kind::kEvent, "event");
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    if (&event->device() != &stream->device())
      fail(HAL_STATUS_INVALID_ARGUMENT, "event and stream belong to different devices");
    event->record(*stream);
  });
}

inline hal_status_t* event_query(hal_event_t* e, bool* out_complete) {
  return call("event_query", [&] {
    auto* event = as<Event>(e, Kind::kEvent, "event");
    if (out_complete == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_complete is NULL");
    *out_complete = event->complete();
  });
}

inline hal_status_t* event_synchronize(hal_event_t* e) {
  return call("event_synchronize", [&] { as<Event>(e, Kind::kEvent, "event")->synchronize(); });
}

inline hal_status_t* event_elapsed_time(hal_event_t* a, hal_event_t* b, uint64_t* out_ns) {
  return call("event_elapsed_time", [&] {
    auto* start = as<Event>(a, Kind::kEvent, "start event");
    auto* end = as<Event>(b, Kind::kEvent, "end event");
    if (out_ns == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_nanoseconds is NULL");
    if (&start->device() != &end->device())
      fail(HAL_STATUS_INVALID_ARGUMENT, "start and end events belong to different devices");
    *out_ns = end->nanoseconds_since(*start);
  });
}

inline const hal_stream_api_t kStreamApi = {
    sizeof(hal_stream_api_t), &stream_create,      &stream_destroy,    &stream_synchronize,
    &stream_query,            &stream_enqueue_host_func, &stream_wait_event, &event_create,
    &event_destroy,           &event_record,       &event_query,       &event_synchronize,
    &event_elapsed_time};

}  // namespace hal::sdk::detail

#endif  // HAL_SDK_DETAIL_STREAM_ENTRIES_HPP_
