// CPU plugin: a device whose memory is host RAM and whose streams are worker
// threads.
#ifndef HAL_PLUGINS_CPU_CPU_DEVICE_HPP_
#define HAL_PLUGINS_CPU_CPU_DEVICE_HPP_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "hal/sdk/host_memory.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::cpu {

class CpuBuffer final : public sdk::Buffer {
 public:
  CpuBuffer(sdk::Device& device, uint64_t size, sdk::HostMemory memory)
      : sdk::Buffer(device, size), memory_(std::move(memory)) {}
  void* host_pointer() override { return memory_.data(); }
  bool shared_memory(sdk::SharedMemory* out) override { return memory_.shared_memory(out); }
  unsigned char* bytes() const { return static_cast<unsigned char*>(memory_.data()); }

 private:
  sdk::HostMemory memory_;
};

class CpuDevice final : public sdk::Device {
 public:
  // OPS: the plugin's kernels (filled after construction, read-only once
  // the plugin is built), which its graph executables run. GRAPH_COMPILE
  // false: partition_graph claims nothing (every node op by op). FUSED_LOOPS
  // false: executables run elementwise chains node by node (the A/B
  // baseline of graph/elementwise_fusion.hpp).
  CpuDevice(const sdk::OpRegistry& ops, bool graph_compile, bool fused_loops)
      : ops_(ops), graph_compile_(graph_compile), fused_loops_(fused_loops) {}
  sdk::DeviceProperties properties() override;
  std::unique_ptr<sdk::Buffer> allocate(uint64_t size, uint64_t alignment) override;
  void copy_host_to_device(sdk::Buffer& dst, uint64_t dst_offset, const void* src, uint64_t size,
                           sdk::Stream* stream) override;
  void copy_device_to_host(void* dst, sdk::Buffer& src, uint64_t src_offset, uint64_t size,
                           sdk::Stream* stream) override;
  void copy_device_to_device(sdk::Buffer& dst, uint64_t dst_offset, sdk::Buffer& src,
                             uint64_t src_offset, uint64_t size, sdk::Stream* stream) override;
  void fill(sdk::Buffer& dst, uint64_t offset, uint64_t size, uint8_t value,
            sdk::Stream* stream) override;
  sdk::MemoryInfo memory_info() override;
  std::unique_ptr<sdk::Stream> create_stream() override;
  std::unique_ptr<sdk::Event> create_event() override;
  // Layouts (graph/graph_hooks.cc; ABI 1.8): channels-last in and out of
  // the convolutions oneDNN computes channels-last.
  void op_layouts(const sdk::OpCall& call, sdk::OpLayouts& out) override;
  // Graph compile (graph/graph_hooks.cc): the nodes its kernels run, as
  // host-graph executables with oneDNN fusions.
  std::vector<uint32_t> partition_graph(const sdk::Graph& graph) override;
  std::unique_ptr<sdk::Executable> compile_graph(const sdk::Graph& graph) override;
  std::unique_ptr<sdk::Executable> deserialize_graph(const sdk::Graph& graph,
                                                     const std::vector<uint8_t>& bytes) override;

 private:
  const sdk::OpRegistry& ops_;
  const bool graph_compile_;
  const bool fused_loops_;
};

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_CPU_DEVICE_HPP_
