// HAL C++ SDK: one device of a plugin (the object behind hal_device_t) and
// what it reports about itself. Header-only.
#ifndef HAL_SDK_DEVICE_HPP_
#define HAL_SDK_DEVICE_HPP_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hal/common/dim_order.hpp"
#include "hal/hal.h"
#include "hal/sdk/buffer.hpp"
#include "hal/sdk/collective/communicator.hpp"
#include "hal/sdk/event.hpp"
#include "hal/sdk/graph.hpp"
#include "hal/sdk/op_schema.hpp"
#include "hal/sdk/status.hpp"
#include "hal/sdk/stream.hpp"

namespace hal::sdk {

// What Device::properties() reports. The SDK copies it into the caller's C
// struct respecting struct_size. The device's capabilities are not here:
// the SDK reports the plugin's kInterfaces (plus DEVICE and MEMORY), so
// they are declared once, on the Plugin.
// Preferred dim orders of one op call's inputs and outputs (an empty entry:
// no preference). See Device::op_layouts.
struct OpLayouts {
  std::vector<common::DimOrder> inputs, outputs;
};

struct DeviceProperties {
  std::string name;
  std::string vendor;
  std::string driver_version;
  uint64_t total_memory_bytes = 0;
  uint32_t compute_units = 1;
  uint64_t supported_dtypes = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32);
  uint64_t min_buffer_alignment = 64;
  uint32_t flags = 0;
};

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// One device, owned by its Plugin (add_device) for the plugin's lifetime.
// Arguments reaching these methods are already validated: live handles of
// this device, ranges inside buffers, size > 0 for allocations, alignment a
// power of two. STREAM is nullptr for synchronous calls. Unless a method
// says otherwise, it may be called concurrently from several threads (the C
// ABI allows every entry to be), also for the same buffer or stream.
class Device {
 public:
  virtual ~Device() = default;
  // Called once (the SDK caches the answer: properties are fixed for the
  // device's lifetime), possibly on any thread.
  virtual DeviceProperties properties() = 0;
  const DeviceProperties& cached_properties() {
    std::call_once(properties_once_, [this] { properties_ = properties(); });
    return properties_;
  }
  // Returns a new buffer (never nullptr) or throws OUT_OF_MEMORY /
  // DEVICE_ERROR. The SDK owns it afterwards.
  virtual std::unique_ptr<Buffer> allocate(uint64_t size, uint64_t alignment) = 0;
  virtual void copy_host_to_device(Buffer& dst, uint64_t dst_offset, const void* src,
                                   uint64_t size, Stream* stream) = 0;
  virtual void copy_device_to_host(void* dst, Buffer& src, uint64_t src_offset,
                                   uint64_t size, Stream* stream) = 0;
  virtual void copy_device_to_device(Buffer& dst, uint64_t dst_offset, Buffer& src,
                                     uint64_t src_offset, uint64_t size, Stream* stream) = 0;
  virtual void fill(Buffer& dst, uint64_t offset, uint64_t size, uint8_t value,
                    Stream* stream) = 0;
  virtual MemoryInfo memory_info() = 0;
  // Pinned host memory; the default is 64-byte aligned ordinary memory.
  // The SDK tracks the pointer and calls host_free with it exactly once.
  virtual void* host_allocate(uint64_t size) {
    void* p = std::aligned_alloc(64, (size + 63) / 64 * 64);
    if (p == nullptr) fail(HAL_STATUS_OUT_OF_MEMORY, "host_allocate of ", size, " bytes failed");
    return p;
  }
  virtual void host_free(void* pointer) { std::free(pointer); }
  // Streams and events (add HAL_CAPABILITY_STREAM to the plugin's
  // kInterfaces). Return a new object (never nullptr); the SDK owns it.
  virtual std::unique_ptr<Stream> create_stream() {
    fail(HAL_STATUS_UNIMPLEMENTED, "this device has no streams");
  }
  virtual std::unique_ptr<Event> create_event() {
    fail(HAL_STATUS_UNIMPLEMENTED, "this device has no events");
  }
  // Device-specific refusal of a validated op call (op_check/op_launch run
  // it after the catalog's checks): throw UNSUPPORTED_DTYPE/UNIMPLEMENTED
  // with the reason. The default accepts everything the plugin registered.
  virtual void check_op(const OpCall& call) { (void)call; }
  // The layouts CALL's kernel runs fastest with (hal/op.h, LAYOUTS; ABI
  // 1.8, the op_get_layouts entry). OUT arrives with one empty entry per
  // input and output of CALL (validated as op_check does; buffers may be
  // null, input strides are those the host chose); set an entry to a dim
  // order (hal/common/dim_order.hpp, outermost first) for a tensor the
  // kernel prefers dense in that order. Empty entries are "no preference"
  // (the host then makes an output follow an input of its shape). The SDK
  // refuses an entry that is not a permutation of its tensor's rank
  // (INTERNAL). The default prefers nothing. Thread-safe as check_op.
  virtual void op_layouts(const OpCall& call, OpLayouts& out) {
    (void)call;
    (void)out;
  }

  // Graph compile (hal/sdk/graph.hpp; add HAL_CAPABILITY_GRAPH to the
  // plugin's kInterfaces). GRAPH is validated. partition_graph returns one
  // entry per node: 0 = not taken, k > 0 = taken, and nodes with the same k
  // are compiled together (keep each group convex). compile_graph gets one
  // such group as a self-contained graph and returns a new executable
  // (never nullptr) the SDK owns. The defaults take nothing.
  virtual std::vector<uint32_t> partition_graph(const Graph& graph) {
    return std::vector<uint32_t>(graph.nodes.size(), 0);
  }
  virtual std::unique_ptr<Executable> compile_graph(const Graph& graph) {
    (void)graph;
    fail(HAL_STATUS_UNIMPLEMENTED, "this device does not compile graphs");
  }
  // Rebuilds an executable from BYTES, what Executable::serialize returned
  // for an executable compile_graph made from GRAPH (validated; the same
  // subgraph). Throw INVALID_ARGUMENT for bytes you cannot use (truncated,
  // another device); the SDK already checked the plugin name, version and
  // a checksum. The default: executables are not serialisable.
  virtual std::unique_ptr<Executable> deserialize_graph(const Graph& graph, const std::vector<uint8_t>& bytes) {
    (void)graph;
    (void)bytes;
    fail(HAL_STATUS_UNIMPLEMENTED, "this device does not deserialise executables");
  }

  // Collectives (add HAL_CAPABILITY_COLLECTIVE to the plugin's kInterfaces
  // and include "hal/sdk/collectives.hpp" next to HAL_SDK_PLUGIN). The
  // defaults (nullopt / nullptr) select the SDK's host communicator, which
  // works for any device; override both for a native one. INIT is
  // validated (rank < world_size, a bootstrap when world_size > 1).
  virtual std::optional<hal_comm_unique_id_t> create_unique_id() { return std::nullopt; }
  virtual std::unique_ptr<Communicator> create_communicator(const CommInit& init) {
    (void)init;
    return nullptr;
  }

 private:
  std::once_flag properties_once_;
  DeviceProperties properties_;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_DEVICE_HPP_
