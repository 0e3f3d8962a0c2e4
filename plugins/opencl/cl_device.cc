#include "cl_device.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "graph/fusion.hpp"

namespace hal::opencl {
namespace {

template <class T>
T device_value(cl_device_id device, cl_device_info what) {
  T value{};
  clGetDeviceInfo(device, what, sizeof(T), &value, nullptr);
  return value;
}

cl_mem status_buffer(cl_context context, cl_command_queue queue) {
  cl_int err = CL_SUCCESS;
  cl_mem status = clCreateBuffer(context, CL_MEM_READ_WRITE, kStatusWords * sizeof(cl_long), nullptr, &err);
  cl_check(err, "clCreateBuffer", " (stream status words)");
  const cl_long zeros[kStatusWords] = {};
  err = clEnqueueWriteBuffer(queue, status, CL_TRUE, 0, sizeof(zeros), zeros, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) clReleaseMemObject(status);
  cl_check(err, "clEnqueueWriteBuffer", " (stream status words)");
  return status;
}

cl_command_queue make_queue(cl_context context, cl_device_id device) {
  const cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  cl_int err = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueueWithProperties(context, device, props, &err);
  cl_check(err, "clCreateCommandQueueWithProperties");
  return q;
}

std::mutex& sites_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& sites() {
  static auto* s = new std::vector<std::string>{"(unknown)"};
  return *s;
}

}  // namespace

int64_t status_site(const std::string& text) {
  std::lock_guard<std::mutex> lock(sites_mutex());
  auto& s = sites();
  auto it = std::find(s.begin(), s.end(), text);
  if (it != s.end()) return it - s.begin();
  s.push_back(text);
  return static_cast<int64_t>(s.size() - 1);
}

void check_queue_status(const Queue& queue) {
  cl_long words[kStatusWords] = {};
  cl_check(clEnqueueReadBuffer(queue.queue, queue.status, CL_TRUE, 0, sizeof(words), words, 0, nullptr, nullptr),
           "clEnqueueReadBuffer", " (stream status words)");
  if (words[kStatusKind] == kStatusOk) return;
  const cl_long zeros[kStatusWords] = {};
  cl_check(clEnqueueWriteBuffer(queue.queue, queue.status, CL_TRUE, 0, sizeof(zeros), zeros, 0, nullptr, nullptr),
           "clEnqueueWriteBuffer", " (stream status words)");
  std::string site;
  {
    std::lock_guard<std::mutex> lock(sites_mutex());
    auto& s = sites();
    site = words[kStatusSite] >= 0 && static_cast<size_t>(words[kStatusSite]) < s.size() ? s[words[kStatusSite]]
                                                                                            : s[0];
  }
  if (words[kStatusKind] == kStatusIndexAt) {
    auto put = [&site](const std::string& key, cl_long v) {
      size_t at = site.find(key);
      if (at != std::string::npos) site.replace(at, key.size(), std::to_string(v));
    };
    put("{value}", words[kStatusValue]);
    put("{position}", words[kStatusBound]);
    sdk::fail(HAL_STATUS_OUT_OF_RANGE, site, "; no output was written");
  }
  if (words[kStatusKind] == kStatusValueOutOfRange || words[kStatusKind] == kStatusFloatOutOfRange) {
    double as_double = 0;
    std::memcpy(&as_double, &words[kStatusValue], sizeof(as_double));
    if (words[kStatusKind] == kStatusFloatOutOfRange)
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, site, ": ", as_double, " at position ", words[kStatusBound],
                "; no output was written");
    sdk::fail(HAL_STATUS_OUT_OF_RANGE, site, ": ", words[kStatusValue], " at position ", words[kStatusBound],
              "; no output was written");
  }
  // Value checks report the value and its row-major position in the input.
  if (words[kStatusKind] == kStatusInvalidValue || words[kStatusKind] == kStatusDivisionByZero)
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, site, " is ", words[kStatusValue], " at position ", words[kStatusBound],
              "; no output was written");
  sdk::fail(HAL_STATUS_OUT_OF_RANGE, site, ": index ", words[kStatusValue], " is out of range for a dimension of size ",
            words[kStatusBound], "; no output was written");
}

ClDevice::ClDevice(const DeviceInfo& info, const std::string& cache_directory)
    : platform_(info.platform), device_(info.device) {
  cl_int err = CL_SUCCESS;
  context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
  cl_check(err, "clCreateContext");
  sync_.queue = make_queue(context_, device_);
  sync_.status = status_buffer(context_, sync_.queue);
  programs_ = std::make_unique<ProgramCache>(context_, device_, ProgramCache::device_key(platform_, device_),
                                             cache_directory);
  std::string extensions = device_info_string(device_, CL_DEVICE_EXTENSIONS);
  fp64_ = extensions.find("cl_khr_fp64") != std::string::npos;
  fp16_ = extensions.find("cl_khr_fp16") != std::string::npos;
  max_alloc_ = device_value<cl_ulong>(device_, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  global_memory_ = device_value<cl_ulong>(device_, CL_DEVICE_GLOBAL_MEM_SIZE);
  local_memory_ = device_value<cl_ulong>(device_, CL_DEVICE_LOCAL_MEM_SIZE);
  max_work_group_ = device_value<size_t>(device_, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  base_align_bytes_ = std::max<cl_uint>(8, device_value<cl_uint>(device_, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
}

ClDevice::~ClDevice() {
  for (auto& [pointer, mem] : host_allocations_) {
    clEnqueueUnmapMemObject(sync_.queue, mem, pointer, 0, nullptr, nullptr);
    clReleaseMemObject(mem);
  }
  clFinish(sync_.queue);
  programs_.reset();
  clReleaseMemObject(sync_.status);
  clReleaseCommandQueue(sync_.queue);
  clReleaseContext(context_);
}

sdk::DeviceProperties ClDevice::properties() {
  sdk::DeviceProperties p;
  p.name = device_info_string(device_, CL_DEVICE_NAME);
  p.vendor = device_info_string(device_, CL_DEVICE_VENDOR);
  p.driver_version = device_info_string(device_, CL_DRIVER_VERSION) + " (" + device_info_string(device_, CL_DEVICE_VERSION) + ")";
  p.total_memory_bytes = global_memory_;
  p.compute_units = device_value<cl_uint>(device_, CL_DEVICE_MAX_COMPUTE_UNITS);
  // float16 would need cl_khr_fp16; no kernel is written for it yet, so it
  // is not claimed even where the device has the extension.
  p.supported_dtypes = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_INT8) |
                       HAL_DTYPE_BIT(HAL_DTYPE_UINT8) | HAL_DTYPE_BIT(HAL_DTYPE_INT16) |
                       HAL_DTYPE_BIT(HAL_DTYPE_INT32) | HAL_DTYPE_BIT(HAL_DTYPE_INT64) | HAL_DTYPE_BIT(HAL_DTYPE_BOOL);
  if (fp64_) p.supported_dtypes |= HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  p.min_buffer_alignment = base_align_bytes_;
  p.flags = 0;  // device memory is not host-addressable through the HAL
  return p;
}

std::unique_ptr<sdk::Buffer> ClDevice::allocate(uint64_t size, uint64_t alignment) {
  if (size > max_alloc_)
    sdk::fail(HAL_STATUS_OUT_OF_MEMORY, "size ", size, " bytes exceeds the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE of ",
              max_alloc_, " bytes (the largest single OpenCL buffer)");
  if (alignment > base_align_bytes_)
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "alignment ", alignment,
              " exceeds what OpenCL buffers guarantee on this device (CL_DEVICE_MEM_BASE_ADDR_ALIGN: ",
              base_align_bytes_, " bytes)");
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, size, nullptr, &err);
  cl_check(err, "clCreateBuffer", " of ", size, " bytes");
  return std::make_unique<ClBuffer>(*this, size, mem);
}

void ClDevice::copy_host_to_device(sdk::Buffer& dst, uint64_t dst_offset, const void* src, uint64_t size,
                                   sdk::Stream* stream) {
  submit(stream, [&](const Queue& q) {
    cl_check(clEnqueueWriteBuffer(q.queue, cl_buffer(dst).mem(), stream ? CL_FALSE : CL_TRUE, dst_offset, size, src,
                                  0, nullptr, nullptr),
             "clEnqueueWriteBuffer");
  });
}

void ClDevice::copy_device_to_host(void* dst, sdk::Buffer& src, uint64_t src_offset, uint64_t size,
                                   sdk::Stream* stream) {
  submit(stream, [&](const Queue& q) {
    cl_check(clEnqueueReadBuffer(q.queue, cl_buffer(src).mem(), stream ? CL_FALSE : CL_TRUE, src_offset, size, dst, 0,
                                 nullptr, nullptr),
             "clEnqueueReadBuffer");
  });
}

void ClDevice::copy_device_to_device(sdk::Buffer& dst, uint64_t dst_offset, sdk::Buffer& src, uint64_t src_offset,
                                     uint64_t size, sdk::Stream* stream) {
  cl_mem d = cl_buffer(dst).mem(), s = cl_buffer(src).mem();
  bool overlap = d == s && dst_offset < src_offset + size && src_offset < dst_offset + size;
  submit(stream, [&](const Queue& q) {
    if (!overlap) {
      cl_check(clEnqueueCopyBuffer(q.queue, s, d, src_offset, dst_offset, size, 0, nullptr, nullptr),
               "clEnqueueCopyBuffer");
      return;
    }
    // OpenCL refuses overlapping copies (CL_MEM_COPY_OVERLAP): go through a
    // temporary, which gives memmove's result.
    cl_mem tmp = scratch(size);
    cl_int err = clEnqueueCopyBuffer(q.queue, s, tmp, src_offset, 0, size, 0, nullptr, nullptr);
    if (err == CL_SUCCESS) err = clEnqueueCopyBuffer(q.queue, tmp, d, 0, dst_offset, size, 0, nullptr, nullptr);
    clReleaseMemObject(tmp);
    cl_check(err, "clEnqueueCopyBuffer", " (overlapping copy)");
  });
}

void ClDevice::fill(sdk::Buffer& dst, uint64_t offset, uint64_t size, uint8_t value, sdk::Stream* stream) {
  submit(stream, [&](const Queue& q) {
    cl_check(clEnqueueFillBuffer(q.queue, cl_buffer(dst).mem(), &value, 1, offset, size, 0, nullptr, nullptr),
             "clEnqueueFillBuffer");
  });
}

sdk::MemoryInfo ClDevice::memory_info() {
  // OpenCL has no query for free device memory; report the total for both.
  return {global_memory_, global_memory_};
}

void* ClDevice::host_allocate(uint64_t size) {
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, nullptr, &err);
  cl_check(err, "clCreateBuffer", " (pinned host memory of ", size, " bytes)");
  std::lock_guard<std::mutex> lock(sync_mutex_);
  void* p = clEnqueueMapBuffer(sync_.queue, mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, nullptr, nullptr,
                               &err);
  if (err != CL_SUCCESS) clReleaseMemObject(mem);
  cl_check(err, "clEnqueueMapBuffer", " (pinned host memory of ", size, " bytes)");
  std::lock_guard<std::mutex> host_lock(host_mutex_);
  host_allocations_[p] = mem;
  return p;
}

void ClDevice::host_free(void* pointer) {
  cl_mem mem = nullptr;
  {
    std::lock_guard<std::mutex> lock(host_mutex_);
    auto it = host_allocations_.find(pointer);
    if (it == host_allocations_.end()) return;
    mem = it->second;
    host_allocations_.erase(it);
  }
  std::lock_guard<std::mutex> lock(sync_mutex_);
  clEnqueueUnmapMemObject(sync_.queue, mem, pointer, 0, nullptr, nullptr);
  clFinish(sync_.queue);
  clReleaseMemObject(mem);
}

std::unique_ptr<sdk::Stream> ClDevice::create_stream() {
  cl_command_queue q = make_queue(context_, device_);
  cl_mem status = nullptr;
  try {
    status = status_buffer(context_, q);
  } catch (...) {
    clReleaseCommandQueue(q);
    throw;
  }
  return std::make_unique<ClStream>(*this, q, status);
}

std::unique_ptr<sdk::Event> ClDevice::create_event() { return std::make_unique<ClEvent>(*this); }

void ClDevice::check_op(const sdk::OpCall& call) {
  auto check = [&](const sdk::Tensor& t, const char* what, size_t i) {
    if (!t.defined) return;
    if (t.dtype == HAL_DTYPE_FLOAT64 && !fp64_)
      sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, call.name(), ": ", what, " ", i,
                " is float64 but the device lacks cl_khr_fp64");
    if (t.dtype == HAL_DTYPE_FLOAT16 || t.dtype == HAL_DTYPE_BFLOAT16)
      sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, call.name(), ": ", what, " ", i, " is ", sdk::dtype_name(t.dtype),
                ", which this plugin's kernels do not handle yet");
    if (t.byte_offset % t.element_size() != 0)
      sdk::fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": ", what, " ", i, " byte offset ", t.byte_offset,
                " is not a multiple of its element size ", t.element_size(),
                " (OpenCL kernels address whole elements)");
  };
  for (size_t i = 0; i < call.input_count(); ++i) check(call.input(i), "input", i);
  for (size_t i = 0; i < call.output_count(); ++i) check(call.output(i), "output", i);
}

std::vector<uint32_t> ClDevice::partition_graph(const sdk::Graph& graph) { return partition_fused(*this, graph); }
std::unique_ptr<sdk::Executable> ClDevice::compile_graph(const sdk::Graph& graph) { return compile_fused(*this, graph); }

cl_mem ClDevice::scratch(uint64_t size) {
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, std::max<uint64_t>(size, 1), nullptr, &err);
  cl_check(err, "clCreateBuffer", " (scratch of ", size, " bytes)");
  return mem;
}

void ClDevice::sync_finish() {
  cl_check(clFinish(sync_.queue), "clFinish");
  check_queue_status(sync_);
}

// ---- streams and events ------------------------------------------------------

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
