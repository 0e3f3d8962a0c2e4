// OpenCL plugin: one OpenCL device as a HAL device — cl_mem buffers, pinned
// host memory (CL_MEM_ALLOC_HOST_PTR, mapped), in-order command queues as
// streams (cl_stream.hpp), markers as events (cl_event.hpp), and the program
// cache its kernels come from. Its graph entries are graph/graph_hooks.cc
// (the device does not depend on the graph compiler).
#ifndef HAL_PLUGINS_OPENCL_CL_DEVICE_HPP_
#define HAL_PLUGINS_OPENCL_CL_DEVICE_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cl_error.hpp"
#include "cl_queue.hpp"
#include "cl_stream.hpp"
#include "hal/sdk/plugin.hpp"
#include "program_cache.hpp"

namespace hal::opencl {

class ClDevice;

// A device allocation: one cl_mem. A HAL (buffer, byte offset) pair reaches
// kernels as the cl_mem plus an element offset argument, never as a
// sub-buffer: sub-buffer origins must be multiples of
// CL_DEVICE_MEM_BASE_ADDR_ALIGN, tensor offsets need not be.
class ClBuffer final : public sdk::Buffer {
 public:
  ClBuffer(sdk::Device& device, uint64_t size, cl_mem mem) : sdk::Buffer(device, size), mem_(mem) {}
  ~ClBuffer() override { clReleaseMemObject(mem_); }
  cl_mem mem() const { return mem_; }

 private:
  cl_mem mem_;
};

struct DeviceInfo {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  uint32_t index = 0;  // among this plugin's devices
};

class ClDevice final : public sdk::Device {
 public:
  ClDevice(const DeviceInfo& info, const std::string& cache_directory);
  ~ClDevice() override;

  sdk::DeviceProperties properties() override;
  std::unique_ptr<sdk::Buffer> allocate(uint64_t size, uint64_t alignment) override;
  void copy_host_to_device(sdk::Buffer& dst, uint64_t dst_offset, const void* src, uint64_t size,
                           sdk::Stream* stream) override;
  void copy_device_to_host(void* dst, sdk::Buffer& src, uint64_t src_offset, uint64_t size,
                           sdk::Stream* stream) override;
  void copy_device_to_device(sdk::Buffer& dst, uint64_t dst_offset, sdk::Buffer& src, uint64_t src_offset,
                             uint64_t size, sdk::Stream* stream) override;
  void fill(sdk::Buffer& dst, uint64_t offset, uint64_t size, uint8_t value, sdk::Stream* stream) override;
  sdk::MemoryInfo memory_info() override;
  void* host_allocate(uint64_t size) override;
  void host_free(void* pointer) override;
  std::unique_ptr<sdk::Stream> create_stream() override;
  std::unique_ptr<sdk::Event> create_event() override;
  void check_op(const sdk::OpCall& call) override;
  // Graph compile: fused elementwise chains (graph/graph_hooks.cc).
  std::vector<uint32_t> partition_graph(const sdk::Graph& graph) override;
  std::unique_ptr<sdk::Executable> compile_graph(const sdk::Graph& graph) override;
  std::unique_ptr<sdk::Executable> deserialize_graph(const sdk::Graph& graph, const std::vector<uint8_t>& bytes) override;

  cl_context context() const { return context_; }
  cl_device_id id() const { return device_; }
  ProgramCache& programs() { return *programs_; }
  bool has_fp64() const { return fp64_; }
  uint64_t max_alloc_bytes() const { return max_alloc_; }
  size_t max_work_group_size() const { return max_work_group_; }
  uint64_t local_memory_bytes() const { return local_memory_; }

  // Runs ENQUEUE(queue) on STREAM's queue (flushed, so the device starts),
  // or — STREAM nullptr — on the device's own queue, then waits for it and
  // reports data errors before returning. Serialises synchronous callers.
  template <class Enqueue>
  void submit(sdk::Stream* stream, Enqueue&& enqueue);

  // Creates a cl_mem scratch buffer of SIZE bytes (released by the caller
  // right after enqueuing; OpenCL keeps it alive until its commands ran).
  cl_mem scratch(uint64_t size);

 private:
  void sync_finish();

  cl_platform_id platform_;
  cl_device_id device_;
  cl_context context_ = nullptr;
  Queue sync_;
  std::mutex sync_mutex_;
  std::unique_ptr<ProgramCache> programs_;
  bool fp64_ = false;
  bool fp16_ = false;
  uint64_t max_alloc_ = 0;
  uint64_t global_memory_ = 0;
  uint64_t local_memory_ = 0;
  size_t max_work_group_ = 1;
  uint32_t base_align_bytes_ = 128;
  std::mutex host_mutex_;
  std::map<void*, cl_mem> host_allocations_;  // pinned pointer -> its mapped buffer
};

inline ClBuffer& cl_buffer(sdk::Buffer& b) { return static_cast<ClBuffer&>(b); }
// The cl_mem of an op tensor's buffer. A zero-element tensor may have no
// buffer (op.h: hal_tensor_t.buffer is NULL only then): that gives NULL, which
// OpenCL accepts as a __global pointer argument; kernels index it for no
// element, so nothing dereferences it.
inline cl_mem mem_or_null(const sdk::Buffer* b) { return b ? static_cast<const ClBuffer*>(b)->mem() : nullptr; }

template <class Enqueue>
void ClDevice::submit(sdk::Stream* stream, Enqueue&& enqueue) {
  if (stream != nullptr) {
    auto* s = static_cast<ClStream*>(stream);
    s->note_work();
    enqueue(s->queue());
    cl_check(clFlush(s->queue().queue), "clFlush");
    return;
  }
  std::lock_guard<std::mutex> lock(sync_mutex_);
  try {
    enqueue(sync_);
  } catch (...) {
    // What was queued before the failure still completes; a data error it
    // reported is dropped with it (the caller sees the first failure).
    clFinish(sync_.queue);
    try {
      check_queue_status(sync_);
    } catch (...) {
    }
    throw;
  }
  sync_finish();
}

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_CL_DEVICE_HPP_
