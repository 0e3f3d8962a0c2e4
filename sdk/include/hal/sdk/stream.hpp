// HAL C++ SDK: an in-order queue of device work (the object behind
// hal_stream_t; see hal/stream.h). Header-only.
#ifndef HAL_SDK_STREAM_HPP_
#define HAL_SDK_STREAM_HPP_

#include "hal/sdk/status.hpp"
#include "hal/stream.h"

namespace hal::sdk {

class Device;
class Event;

// Created by Device::create_stream, owned by the SDK, destroyed on
// stream_destroy: the destructor must wait for queued work. Every virtual
// may be called concurrently from several threads on the same stream (the
// C ABI allows it), never concurrently with the destructor. DEVICE outlives
// the stream.
class Stream {
 public:
  explicit Stream(Device& device) : device_(device) {}
  virtual ~Stream() = default;
  Device& device() const { return device_; }
  // Returns once everything queued so far has run.
  virtual void synchronize() = 0;
  // True when nothing queued is still pending; never blocks.
  virtual bool idle() = 0;
  // Queues FN(USER_DATA) (FN non-NULL); it runs on a plugin thread in stream
  // order and must not call back into this stream.
  virtual void enqueue_host_func(hal_host_func_t fn, void* user_data) = 0;
  // Later work waits until EVENT (of the same device; validated) completed.
  virtual void wait(Event& event) = 0;
  // Work queued through enqueue_host_func failed (e.g. a collective):
  // report ERROR at the stream's next synchronize, as a kernel's failure
  // is. Called on the thread running that work. The default drops it
  // (collectives keep it for comm_get_async_error as well).
  virtual void report_error(const Error& error) { (void)error; }

 private:
  Device& device_;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_STREAM_HPP_
