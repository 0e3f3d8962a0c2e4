#include "cl_event.hpp"

#include "cl_device.hpp"
#include "cl_stream.hpp"

namespace hal::opencl {

ClEvent::ClEvent(ClDevice& device) : sdk::Event(device) {}

ClEvent::~ClEvent() {
  if (marker_ != nullptr) clReleaseEvent(marker_);
}

cl_event ClEvent::marker() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (marker_ != nullptr) clRetainEvent(marker_);
  return marker_;
}

void ClEvent::record(sdk::Stream& stream) {
  auto& s = static_cast<ClStream&>(stream);
  cl_command_queue q = s.queue().queue;
  cl_event marker = nullptr;
  cl_check(clEnqueueMarkerWithWaitList(q, 0, nullptr, &marker), "clEnqueueMarkerWithWaitList");
  clFlush(q);
  s.note_marker(marker);
  std::lock_guard<std::mutex> lock(mutex_);
  if (marker_ != nullptr) clReleaseEvent(marker_);
  marker_ = marker;
}

bool ClEvent::complete() {
  cl_event m = marker();
  if (m == nullptr) return true;
  cl_int status = CL_QUEUED;
  cl_int err = clGetEventInfo(m, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  clReleaseEvent(m);
  cl_check(err, "clGetEventInfo");
  return status == CL_COMPLETE || status < 0;
}

void ClEvent::synchronize() {
  cl_event m = marker();
  if (m == nullptr) return;
  cl_int err = clWaitForEvents(1, &m);
  clReleaseEvent(m);
  // A failed command in the stream shows here; the stream reports its cause.
  if (err != CL_SUCCESS && err != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) cl_check(err, "clWaitForEvents");
}

uint64_t ClEvent::nanoseconds_since(sdk::Event& start_event) {
  auto& start = static_cast<ClEvent&>(start_event);
  cl_event a = start.marker(), b = marker();
  auto release = [&] {
    if (a) clReleaseEvent(a);
    if (b) clReleaseEvent(b);
  };
  if (a == nullptr || b == nullptr) {
    release();
    sdk::fail(HAL_STATUS_FAILED_PRECONDITION, a == nullptr ? "start" : "end", " event was never recorded");
  }
  if (!start.complete() || !complete()) {
    release();
    sdk::fail(HAL_STATUS_FAILED_PRECONDITION, "an event has not completed yet");
  }
  cl_ulong ta = 0, tb = 0;
  cl_int err = clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_END, sizeof(ta), &ta, nullptr);
  if (err == CL_SUCCESS) err = clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof(tb), &tb, nullptr);
  release();
  cl_check(err, "clGetEventProfilingInfo");
  if (tb < ta) sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "end event precedes start event by ", ta - tb, " ns");
  return tb - ta;
}

}  // namespace hal::opencl
