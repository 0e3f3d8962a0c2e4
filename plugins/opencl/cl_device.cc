#include "cl_device.hpp"

#include <algorithm>
#include <vector>

#include "cl_event.hpp"

namespace hal::opencl {
namespace {

template <class T>
T device_value(cl_device_id device, cl_device_info what) {
  T value{};
  clGetDeviceInfo(device, what, sizeof(T), &value, nullptr);
  return value;
}

}  // namespace

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

}  // namespace hal::opencl
