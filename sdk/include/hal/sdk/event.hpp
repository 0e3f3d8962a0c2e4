// HAL C++ SDK: a point in a stream (the object behind hal_event_t; see
// hal/stream.h). Header-only.
#ifndef HAL_SDK_EVENT_HPP_
#define HAL_SDK_EVENT_HPP_

#include <cstdint>

namespace hal::sdk {

class Device;
class Stream;

// Created by Device::create_event, owned by the SDK, destroyed on
// event_destroy. Every virtual may be called concurrently from several
// threads on the same event, never concurrently with the destructor.
// DEVICE outlives the event.
class Event {
 public:
  explicit Event(Device& device) : device_(device) {}
  virtual ~Event() = default;
  Device& device() const { return device_; }
  // Marks the current end of STREAM (same device; validated).
  virtual void record(Stream& stream) = 0;
  // True once the recorded point has run (an unrecorded event is complete).
  virtual bool complete() = 0;
  // Returns once the recorded point has run.
  virtual void synchronize() = 0;
  // Nanoseconds from START to this event; both completed (else throw
  // FAILED_PRECONDITION).
  virtual uint64_t nanoseconds_since(Event& start) = 0;

 private:
  Device& device_;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_EVENT_HPP_
