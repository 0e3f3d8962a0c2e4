#include "cl_stream.hpp"

#include <chrono>
#include <thread>

#include "cl_device.hpp"
#include "cl_event.hpp"

namespace hal::opencl {

ClStream::ClStream(ClDevice& device, cl_command_queue queue, cl_mem status) : sdk::Stream(device) {
  queue_.queue = queue;
  queue_.status = status;
}

ClStream::~ClStream() {
  clFinish(queue_.queue);
  if (tail_ != nullptr) clReleaseEvent(tail_);
  clReleaseMemObject(queue_.status);
  clReleaseCommandQueue(queue_.queue);
}

void ClStream::synchronize() {
  cl_check(clFinish(queue_.queue), "clFinish");
  {
    std::lock_guard<std::mutex> lock(tail_mutex_);
    if (tail_ != nullptr) clReleaseEvent(tail_);
    tail_ = nullptr;
    dirty_ = false;
  }
  check_queue_status(queue_);
  std::unique_ptr<sdk::Error> error;
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    error = std::move(error_);
  }
  if (error) throw *error;
}

void ClStream::report_error(const sdk::Error& error) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (!error_) error_ = std::make_unique<sdk::Error>(error);
}

void ClStream::note_work() {
  std::lock_guard<std::mutex> lock(tail_mutex_);
  if (tail_ != nullptr) clReleaseEvent(tail_);
  tail_ = nullptr;
  dirty_ = true;
}

void ClStream::note_marker(cl_event marker) {
  std::lock_guard<std::mutex> lock(tail_mutex_);
  clRetainEvent(marker);
  if (tail_ != nullptr) clReleaseEvent(tail_);
  tail_ = marker;
  dirty_ = false;
}

bool ClStream::idle() {
  // OpenCL cannot ask a queue whether it is empty. The queue is idle when
  // nothing was queued since the last synchronize, or when its last command
  // is a marker that completed; after other work, a marker is queued now
  // (and answers this and later queries exactly).
  cl_event marker = nullptr;
  {
    std::lock_guard<std::mutex> lock(tail_mutex_);
    if (tail_ == nullptr && !dirty_) return true;
    if (tail_ == nullptr) {
      cl_check(clEnqueueMarkerWithWaitList(queue_.queue, 0, nullptr, &tail_), "clEnqueueMarkerWithWaitList");
      clFlush(queue_.queue);
      dirty_ = false;
    }
    marker = tail_;
    clRetainEvent(marker);
  }
  cl_int status = CL_QUEUED;
  cl_int err = CL_SUCCESS;
  // A marker behind finished work completes within microseconds; give the
  // driver that moment (bounded: never waits on queued work).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
  do {
    err = clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
    if (err != CL_SUCCESS || status == CL_COMPLETE || status < 0) break;
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < deadline);
  clReleaseEvent(marker);
  cl_check(err, "clGetEventInfo");
  return status == CL_COMPLETE || status < 0;
}

namespace {
struct HostFunc {
  hal_host_func_t fn;
  void* user_data;
  cl_event gate;
};

void CL_CALLBACK run_host_func(cl_event, cl_int, void* data) {
  auto* f = static_cast<HostFunc*>(data);
  f->fn(f->user_data);
  clSetUserEventStatus(f->gate, CL_COMPLETE);
  clReleaseEvent(f->gate);
  delete f;
}
}  // namespace

void ClStream::enqueue_host_func(hal_host_func_t fn, void* user_data) {
  // The function runs from the completion callback of a marker; a user
  // event it completes holds back everything queued after it.
  auto& dev = static_cast<ClDevice&>(device());
  note_work();
  cl_int err = CL_SUCCESS;
  cl_event gate = clCreateUserEvent(dev.context(), &err);
  cl_check(err, "clCreateUserEvent");
  cl_event marker = nullptr;
  err = clEnqueueMarkerWithWaitList(queue_.queue, 0, nullptr, &marker);
  if (err != CL_SUCCESS) clReleaseEvent(gate);
  cl_check(err, "clEnqueueMarkerWithWaitList");
  err = clEnqueueBarrierWithWaitList(queue_.queue, 1, &gate, nullptr);
  auto* f = new HostFunc{fn, user_data, gate};
  cl_int cb = clSetEventCallback(marker, CL_COMPLETE, &run_host_func, f);
  clReleaseEvent(marker);
  if (cb != CL_SUCCESS) {
    clSetUserEventStatus(gate, CL_COMPLETE);
    clReleaseEvent(gate);
    delete f;
  }
  cl_check(err, "clEnqueueBarrierWithWaitList");
  cl_check(cb, "clSetEventCallback");
  clFlush(queue_.queue);
}

void ClStream::wait(sdk::Event& event) {
  cl_event marker = static_cast<ClEvent&>(event).marker();
  if (marker == nullptr) return;
  note_work();
  cl_int err = clEnqueueBarrierWithWaitList(queue_.queue, 1, &marker, nullptr);
  clReleaseEvent(marker);
  cl_check(err, "clEnqueueBarrierWithWaitList");
  clFlush(queue_.queue);
}

}  // namespace hal::opencl
