// The "template" HAL plugin: the copyable starting point for a chip vendor.
//
// It is a real, working device whose memory is host RAM and whose copies are
// synchronous memcpy/memset, with one op (add, template_ops.cc), so it loads
// in hal-info, moves bytes and passes hal-conformance for add before you
// change a line. Replace each TODO(vendor) with calls into your driver;
// README.md says how to copy and rename it. This file is the device, its
// memory and the plugin's constructor; it does not need the op catalog.
//
// The SDK (hal/sdk/plugin.hpp) builds the C tables, validates every handle,
// offset and size before these methods run, and turns exceptions into
// statuses: report errors with hal::sdk::fail(code, parts...).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "template_plugin.hpp"

namespace hal_template {

namespace sdk = hal::sdk;

// TODO(vendor): query the device's real memory size from your driver.
constexpr uint64_t kDeviceMemoryBytes = uint64_t{1} << 30;  // 1 GiB

// One allocation. TODO(vendor): hold your driver's native handle here
// (device pointer, memory object ...) instead of a host pointer.
class TemplateBuffer final : public sdk::Buffer {
 public:
  TemplateBuffer(sdk::Device& device, uint64_t size, void* data, std::atomic<uint64_t>& used)
      : sdk::Buffer(device, size), data_(data), used_(used) {}
  ~TemplateBuffer() override {
    std::free(data_);  // TODO(vendor): your driver's free call.
    used_ -= size();
  }
  // Host-visible memory only: return nullptr (and clear the flag in
  // properties()) when your memory cannot be read by the CPU.
  void* host_pointer() override { return data_; }
  unsigned char* bytes() const { return static_cast<unsigned char*>(data_); }

 private:
  void* data_;
  std::atomic<uint64_t>& used_;
};

unsigned char* bytes(sdk::Buffer& b) { return static_cast<TemplateBuffer&>(b).bytes(); }

// This device has no streams, so every call is synchronous. A non-null
// stream cannot reach us today (stream_create fails, so no stream of this
// plugin is live), but refusing it here keeps us honest the day someone
// adds streams without updating the copies.
// TODO(vendor): when you implement streams, enqueue the work on STREAM
// instead, and add HAL_CAPABILITY_STREAM to TemplatePlugin::kInterfaces so
// the SDK hands the stream table to the core (and reports the capability).
// (The SDK prefixes the message with "template: <call>: ".)
void require_no_stream(const sdk::Stream* stream) {
  if (stream != nullptr)
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, "streams are not implemented by this device; pass stream = NULL");
}

class TemplateDevice final : public sdk::Device {
 public:
  explicit TemplateDevice(uint32_t index) : index_(index) {}

  sdk::DeviceProperties properties() override {
    sdk::DeviceProperties p;
    // TODO(vendor): read these from your driver.
    p.name = "Template Device " + std::to_string(index_);
    p.vendor = "Example Vendor";
    p.driver_version = std::string("hal-template ") + kPluginVersion;
    p.total_memory_bytes = kDeviceMemoryBytes;
    p.compute_units = 1;
    // TODO(vendor): the dtypes your operators accept.
    p.supported_dtypes = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32);
    p.min_buffer_alignment = 64;
    p.flags = HAL_DEVICE_FLAG_HOST_ACCESSIBLE_MEMORY;  // see host_pointer()
    return p;
  }

  // SIZE > 0, ALIGNMENT a power of two and SIZE <= total memory are checked
  // by the SDK already; we still account for what is in use so that the
  // device runs out of memory like a real one.
  std::unique_ptr<sdk::Buffer> allocate(uint64_t size, uint64_t alignment) override {
    if (used_.fetch_add(size) + size > kDeviceMemoryBytes) {
      used_ -= size;
      sdk::fail(HAL_STATUS_OUT_OF_MEMORY, "cannot allocate ", size, " bytes: ",
                kDeviceMemoryBytes - used_.load(), " of ", kDeviceMemoryBytes, " bytes free");
    }
    // TODO(vendor): your driver's allocation call.
    void* data = nullptr;
    int err = posix_memalign(&data, std::max<uint64_t>(alignment, sizeof(void*)), size);
    if (err != 0) {
      used_ -= size;
      sdk::fail(HAL_STATUS_OUT_OF_MEMORY, "posix_memalign(", size, " bytes, alignment ", alignment,
                ") failed: ", std::strerror(err));
    }
    return std::make_unique<TemplateBuffer>(*this, size, data, used_);
  }

  // TODO(vendor): your driver's copy and fill calls. Ranges were checked by
  // the SDK.
  void copy_host_to_device(sdk::Buffer& dst, uint64_t dst_offset, const void* src, uint64_t size,
                           sdk::Stream* stream) override {
    require_no_stream(stream);
    std::memcpy(bytes(dst) + dst_offset, src, size);
  }
  void copy_device_to_host(void* dst, sdk::Buffer& src, uint64_t src_offset, uint64_t size,
                           sdk::Stream* stream) override {
    require_no_stream(stream);
    std::memcpy(dst, bytes(src) + src_offset, size);
  }
  void copy_device_to_device(sdk::Buffer& dst, uint64_t dst_offset, sdk::Buffer& src,
                             uint64_t src_offset, uint64_t size, sdk::Stream* stream) override {
    require_no_stream(stream);
    // memmove: the ABI allows overlapping ranges of the same buffer.
    std::memmove(bytes(dst) + dst_offset, bytes(src) + src_offset, size);
  }
  void fill(sdk::Buffer& dst, uint64_t offset, uint64_t size, uint8_t value,
            sdk::Stream* stream) override {
    require_no_stream(stream);
    std::memset(bytes(dst) + offset, value, size);
  }

  sdk::MemoryInfo memory_info() override {
    sdk::MemoryInfo m;  // TODO(vendor): ask your driver.
    m.total_bytes = kDeviceMemoryBytes;
    m.free_bytes = kDeviceMemoryBytes - used_.load();
    return m;
  }

  // TODO(vendor): return your sdk::Stream / sdk::Event subclasses here once
  // the device has queues (see plugins/cpu/cpu_stream.hpp for an example).
  std::unique_ptr<sdk::Stream> create_stream() override {
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, "streams are not implemented by this device");
  }
  std::unique_ptr<sdk::Event> create_event() override {
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, "events are not implemented by this device");
  }

  // TODO(vendor): graph compile (override partition_graph/compile_graph,
  // hal/sdk/graph.hpp, with HAL_CAPABILITY_GRAPH in kInterfaces).

 private:
  uint32_t index_;
  std::atomic<uint64_t> used_{0};
};

TemplatePlugin::TemplatePlugin(const sdk::Options& options) {
  // No options yet: refuse every key so a typo in hal.toml is an error.
  // TODO(vendor): list your option keys here and read them with get()/get_int().
  options.require_known({});
  // TODO(vendor): enumerate your driver's devices; a plugin may expose 0.
  add_device(std::make_unique<TemplateDevice>(0));
  register_template_ops(ops());
}

}  // namespace hal_template
