// HAL C++ SDK: write a plugin as C++ classes, register it with one macro.
//
//   class MyDevice : public hal::sdk::Device { ... };      // memory, streams
//   class MyPlugin : public hal::sdk::Plugin {
//    public:
//     explicit MyPlugin(const hal::sdk::Options& o) { add_device(...); }
//   };
//   HAL_SDK_PLUGIN(MyPlugin, "my", "My Vendor", "0.1.0")
//
// The SDK builds the C tables (hal/plugin.h), validates every handle and
// range before your code sees it (double frees, destroyed streams and copies
// past a buffer's end become INVALID_ARGUMENT / OUT_OF_RANGE statuses), and
// converts every exception into a status at the boundary: no C++ exception
// or type crosses the ABI. Build plugins with hidden visibility (the
// hal::sdk CMake target does) so that only the entry point is exported.
// Header-only.
#ifndef HAL_SDK_PLUGIN_HPP_
#define HAL_SDK_PLUGIN_HPP_

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hal/common/extension.hpp"
#include "hal/hal.h"
#include "hal/sdk/graph.hpp"
#include "hal/sdk/op_registry.hpp"
#include "hal/sdk/op_schema.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk {

class Device;
class Event;
class Stream;

// Options handed to a plugin's constructor (hal.toml [plugin.options]).
// Owned by the SDK for the duration of the constructor call.
class Options {
 public:
  Options() = default;
  Options(const hal_option_t* options, size_t count) {
    for (size_t i = 0; i < count; ++i) entries_.emplace_back(options[i].key, options[i].value);
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  std::string get(const std::string& key, const std::string& fallback) const {
    const std::string* v = find(key);
    return v ? *v : fallback;
  }
  // Integer option; throws INVALID_ARGUMENT naming key and value when the
  // value is not an integer within [min, max].
  int64_t get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
    const std::string* v = find(key);
    if (v == nullptr) return fallback;
    char* end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno != 0 || parsed < min || parsed > max)
      fail(HAL_STATUS_INVALID_ARGUMENT, "option '", key, "' = '", *v,
           "' is not an integer in [", min, ", ", max, "]");
    return parsed;
  }
  // Throws INVALID_ARGUMENT naming the first key not in KNOWN.
  void require_known(std::initializer_list<const char*> known) const {
    for (const auto& entry : entries_) {
      const std::string& key = entry.first;  // no structured binding: clang can't capture one
      bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return key == k; });
      if (!ok) fail(HAL_STATUS_INVALID_ARGUMENT, "unknown option '", key, "' = '", entry.second, "'");
    }
  }

 private:
  const std::string* find(const std::string& key) const {
    for (const auto& kv : entries_)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  std::vector<std::pair<std::string, std::string>> entries_;
};

// What Device::properties() reports. The SDK copies it into the caller's C
// struct respecting struct_size and always sets the DEVICE and MEMORY bits.
struct DeviceProperties {
  std::string name;
  std::string vendor;
  std::string driver_version;
  uint64_t total_memory_bytes = 0;
  uint32_t compute_units = 1;
  uint32_t capabilities = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY;
  uint64_t supported_dtypes = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32);
  uint64_t min_buffer_alignment = 64;
  uint32_t flags = 0;
};

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// A device allocation. Subclass to hold your native handle. Destroyed by the
// SDK on buffer_free (after the handle was validated).
class Buffer {
 public:
  Buffer(Device& device, uint64_t size) : device_(device), size_(size) {}
  virtual ~Buffer() = default;
  Device& device() const { return device_; }
  uint64_t size() const { return size_; }
  // Host address of byte 0 for host-accessible memory, else nullptr.
  virtual void* host_pointer() { return nullptr; }

 private:
  Device& device_;
  uint64_t size_;
};

// An in-order queue. The destructor must wait for queued work.
class Stream {
 public:
  explicit Stream(Device& device) : device_(device) {}
  virtual ~Stream() = default;
  Device& device() const { return device_; }
  virtual void synchronize() = 0;
  virtual bool idle() = 0;
  virtual void enqueue_host_func(hal_host_func_t fn, void* user_data) = 0;
  virtual void wait(Event& event) = 0;

 private:
  Device& device_;
};

class Event {
 public:
  explicit Event(Device& device) : device_(device) {}
  virtual ~Event() = default;
  Device& device() const { return device_; }
  virtual void record(Stream& stream) = 0;
  virtual bool complete() = 0;
  virtual void synchronize() = 0;
  // Nanoseconds from START to this event; both completed (else throw
  // FAILED_PRECONDITION).
  virtual uint64_t nanoseconds_since(Event& start) = 0;

 private:
  Device& device_;
};

// One device. Arguments reaching these methods are already validated: live
// handles of this device, ranges inside buffers, size > 0 for allocations,
// alignment a power of two. STREAM is nullptr for synchronous calls.
class Device {
 public:
  virtual ~Device() = default;
  // Called once; the SDK caches the answer (properties are fixed for the
  // device's lifetime).
  virtual DeviceProperties properties() = 0;
  const DeviceProperties& cached_properties() {
    std::call_once(properties_once_, [this] { properties_ = properties(); });
    return properties_;
  }
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
  virtual void* host_allocate(uint64_t size) {
    void* p = std::aligned_alloc(64, (size + 63) / 64 * 64);
    if (p == nullptr) fail(HAL_STATUS_OUT_OF_MEMORY, "host_allocate of ", size, " bytes failed");
    return p;
  }
  virtual void host_free(void* pointer) { std::free(pointer); }
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

  // Graph compile (hal/sdk/graph.hpp; add HAL_CAPABILITY_GRAPH to the
  // plugin's kInterfaces). GRAPH is validated. partition_graph returns one
  // entry per node: 0 = not taken, k > 0 = taken, and nodes with the same k
  // are compiled together (keep each group convex). compile_graph gets one
  // such group as a self-contained graph. The defaults take nothing.
  virtual std::vector<uint32_t> partition_graph(const Graph& graph) {
    return std::vector<uint32_t>(graph.nodes.size(), 0);
  }
  virtual std::unique_ptr<Executable> compile_graph(const Graph& graph) {
    (void)graph;
    fail(HAL_STATUS_UNIMPLEMENTED, "this device does not compile graphs");
  }

 private:
  std::once_flag properties_once_;
  DeviceProperties properties_;
};

// A plugin instance: owns its devices. A subclass that implements streams
// and events (operators, graph compile) declares it by shadowing
// kInterfaces; only the tables named there are handed to the core.
class Plugin {
 public:
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY;

  virtual ~Plugin() = default;
  size_t device_count() const { return devices_.size(); }
  Device& device(size_t index) const { return *devices_.at(index); }
  // The ops this plugin implements (register them in the constructor and
  // add HAL_CAPABILITY_OPERATOR to kInterfaces).
  OpRegistry& ops() { return ops_; }
  const OpRegistry& ops() const { return ops_; }

 protected:
  Device& add_device(std::unique_ptr<Device> device) {
    devices_.push_back(std::move(device));
    return *devices_.back();
  }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
  OpRegistry ops_;
};

namespace detail {

enum class Kind { kPlugin, kDevice, kBuffer, kStream, kEvent, kHostMemory, kExecutable };

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kPlugin: return "plugin";
    case Kind::kDevice: return "device";
    case Kind::kBuffer: return "buffer";
    case Kind::kStream: return "stream";
    case Kind::kEvent: return "event";
    case Kind::kHostMemory: return "host allocation";
    case Kind::kExecutable: return "executable";
  }
  return "handle";
}

// Live handles of this plugin library. A handle is dereferenced only after
// it was found here, so stale or foreign handles become errors, not crashes.
class Registry {
 public:
  void add(const void* p, Kind k, const void* owner = nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = {k, owner};
  }
  template <class T>
  T* get(const void* p, Kind k, const char* what) {
    if (p == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, what, " is NULL");
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end() || it->second.kind != k)
      fail(HAL_STATUS_INVALID_ARGUMENT, what, " ", p, " is not a live ", kind_name(k),
           " of this plugin (destroyed, freed twice, or never created)");
    return static_cast<T*>(const_cast<void*>(p));
  }
  const void* owner(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    return it == live_.end() ? nullptr : it->second.owner;
  }
  // Removes P if it is live and of kind K; returns whether it was.
  bool remove(const void* p, Kind k) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end() || it->second.kind != k) return false;
    live_.erase(it);
    return true;
  }

 private:
  struct Entry {
    Kind kind;
    const void* owner;
  };
  std::mutex mu_;
  std::unordered_map<const void*, Entry> live_;
};

inline Registry& registry() {
  static Registry* r = new Registry();  // leaked: outlives static destructors
  return *r;
}

struct Info {
  const char* name = "plugin";
  const hal_host_api_t* host = nullptr;
};
inline Info& info() {
  static Info i;
  return i;
}

template <class T>
T* as(const void* handle, Kind k, const char* what) {
  return registry().get<T>(handle, k, what);
}

inline void check_range(const Buffer& b, uint64_t offset, uint64_t size, const char* what) {
  if (offset > b.size() || size > b.size() - offset)
    fail(HAL_STATUS_OUT_OF_RANGE, what, " range [offset ", offset, ", +", size,
         ") exceeds the buffer's size ", b.size());
}

inline Stream* optional_stream(hal_stream_t* s, Device& device) {
  if (s == nullptr) return nullptr;
  auto* stream = as<Stream>(s, Kind::kStream, "stream");
  if (&stream->device() != &device)
    fail(HAL_STATUS_INVALID_ARGUMENT, "stream ", static_cast<void*>(s),
         " belongs to a different device than the buffer");
  return stream;
}

inline void copy_string(char* dst, size_t capacity, const std::string& src) {
  size_t n = std::min(capacity - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

template <class F>
hal_status_t* call(const char* name, F&& f) noexcept {
  return guard(info().name, name, std::forward<F>(f));
}

// ---- C table entries ------------------------------------------------------

inline hal_status_t* device_count(hal_plugin_t* p, uint32_t* out) {
  return call("device_count", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_count is NULL");
    *out = static_cast<uint32_t>(plugin->device_count());
  });
}

inline hal_status_t* device_get(hal_plugin_t* p, uint32_t index, hal_device_t** out) {
  return call("device_get", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_device is NULL");
    if (index >= plugin->device_count())
      fail(HAL_STATUS_OUT_OF_RANGE, "device index ", index, " >= device count ",
           plugin->device_count());
    *out = reinterpret_cast<hal_device_t*>(&plugin->device(index));
  });
}

inline hal_status_t* device_get_properties(hal_device_t* d, hal_device_properties_t* out) {
  return call("device_get_properties", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "properties is NULL");
    if (!HAL_STRUCT_HAS_FIELD(out, hal_device_properties_t, name))
      fail(HAL_STATUS_INVALID_ARGUMENT, "properties struct_size ", out->struct_size,
           " is too small");
    DeviceProperties p = device->cached_properties();
    p.capabilities |= HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY;
    using P = hal_device_properties_t;
#define HAL_SDK_SET_(field, value) \
  if (HAL_STRUCT_HAS_FIELD(out, P, field)) out->field = value
    copy_string(out->name, sizeof(out->name), p.name);
    if (HAL_STRUCT_HAS_FIELD(out, P, vendor)) copy_string(out->vendor, sizeof(out->vendor), p.vendor);
    if (HAL_STRUCT_HAS_FIELD(out, P, driver_version))
      copy_string(out->driver_version, sizeof(out->driver_version), p.driver_version);
    HAL_SDK_SET_(total_memory_bytes, p.total_memory_bytes);
    HAL_SDK_SET_(compute_units, p.compute_units);
    HAL_SDK_SET_(capabilities, p.capabilities);
    HAL_SDK_SET_(supported_dtypes, p.supported_dtypes);
    HAL_SDK_SET_(min_buffer_alignment, p.min_buffer_alignment);
    HAL_SDK_SET_(flags, p.flags);
#undef HAL_SDK_SET_
  });
}

inline hal_status_t* buffer_allocate(hal_device_t* d, uint64_t size, uint64_t alignment,
                                     hal_buffer_t** out) {
  return call("buffer_allocate", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_buffer is NULL");
    if (size == 0) fail(HAL_STATUS_INVALID_ARGUMENT, "size 0 is not allowed");
    if (alignment != 0 && (alignment & (alignment - 1)) != 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, "alignment ", alignment, " is not a power of two");
    const DeviceProperties& props = device->cached_properties();
    if (alignment == 0) alignment = props.min_buffer_alignment;
    if (size > props.total_memory_bytes)
      fail(HAL_STATUS_OUT_OF_MEMORY, "size ", size, " bytes exceeds the device's memory of ",
           props.total_memory_bytes, " bytes");
    std::unique_ptr<Buffer> buffer = device->allocate(size, alignment);
    registry().add(buffer.get(), Kind::kBuffer);
    *out = reinterpret_cast<hal_buffer_t*>(buffer.release());
  });
}

inline hal_status_t* buffer_free(hal_buffer_t* b) {
  return call("buffer_free", [&] {
    auto* buffer = as<Buffer>(b, Kind::kBuffer, "buffer");
    if (registry().remove(buffer, Kind::kBuffer)) delete buffer;
  });
}

inline hal_status_t* buffer_get_info(hal_buffer_t* b, hal_buffer_info_t* out) {
  return call("buffer_get_info", [&] {
    auto* buffer = as<Buffer>(b, Kind::kBuffer, "buffer");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "info is NULL");
    using I = hal_buffer_info_t;
    if (HAL_STRUCT_HAS_FIELD(out, I, size)) out->size = buffer->size();
    if (HAL_STRUCT_HAS_FIELD(out, I, device))
      out->device = reinterpret_cast<hal_device_t*>(&buffer->device());
    if (HAL_STRUCT_HAS_FIELD(out, I, host_pointer)) out->host_pointer = buffer->host_pointer();
  });
}

inline hal_status_t* host_allocate(hal_device_t* d, uint64_t size, void** out) {
  return call("host_allocate", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_pointer is NULL");
    if (size == 0) fail(HAL_STATUS_INVALID_ARGUMENT, "size 0 is not allowed");
    void* p = device->host_allocate(size);
    registry().add(p, Kind::kHostMemory, device);
    *out = p;
  });
}

inline hal_status_t* host_free(hal_device_t* d, void* p) {
  return call("host_free", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    as<void>(p, Kind::kHostMemory, "pointer");
    if (registry().owner(p) != device)
      fail(HAL_STATUS_INVALID_ARGUMENT, "pointer ", p, " was allocated by another device");
    if (registry().remove(p, Kind::kHostMemory)) device->host_free(p);
  });
}

inline hal_status_t* copy_host_to_device(hal_buffer_t* d, uint64_t off, const void* src,
                                         uint64_t size, hal_stream_t* s) {
  return call("copy_host_to_device", [&] {
    auto* dst = as<Buffer>(d, Kind::kBuffer, "dst buffer");
    if (src == nullptr && size > 0) fail(HAL_STATUS_INVALID_ARGUMENT, "src is NULL");
    check_range(*dst, off, size, "dst");
    Stream* stream = optional_stream(s, dst->device());
    if (size > 0) dst->device().copy_host_to_device(*dst, off, src, size, stream);
  });
}

inline hal_status_t* copy_device_to_host(void* dst, hal_buffer_t* sb, uint64_t off,
                                         uint64_t size, hal_stream_t* s) {
  return call("copy_device_to_host", [&] {
    auto* src = as<Buffer>(sb, Kind::kBuffer, "src buffer");
    if (dst == nullptr && size > 0) fail(HAL_STATUS_INVALID_ARGUMENT, "dst is NULL");
    check_range(*src, off, size, "src");
    Stream* stream = optional_stream(s, src->device());
    if (size > 0) src->device().copy_device_to_host(dst, *src, off, size, stream);
  });
}

inline hal_status_t* copy_device_to_device(hal_buffer_t* db, uint64_t doff, hal_buffer_t* sb,
                                           uint64_t soff, uint64_t size, hal_stream_t* s) {
  return call("copy_device_to_device", [&] {
    auto* dst = as<Buffer>(db, Kind::kBuffer, "dst buffer");
    auto* src = as<Buffer>(sb, Kind::kBuffer, "src buffer");
    check_range(*dst, doff, size, "dst");
    check_range(*src, soff, size, "src");
    if (&dst->device() != &src->device())
      fail(HAL_STATUS_INVALID_ARGUMENT, "src and dst buffers belong to different devices");
    Stream* stream = optional_stream(s, dst->device());
    if (size > 0) dst->device().copy_device_to_device(*dst, doff, *src, soff, size, stream);
  });
}

inline hal_status_t* buffer_fill(hal_buffer_t* b, uint64_t off, uint64_t size, uint8_t value,
                                 hal_stream_t* s) {
  return call("buffer_fill", [&] {
    auto* dst = as<Buffer>(b, Kind::kBuffer, "buffer");
    check_range(*dst, off, size, "fill");
    Stream* stream = optional_stream(s, dst->device());
    if (size > 0) dst->device().fill(*dst, off, size, value, stream);
  });
}

inline hal_status_t* memory_get_info(hal_device_t* d, uint64_t* out_free, uint64_t* out_total) {
  return call("memory_get_info", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out_free == nullptr || out_total == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, "out_free/out_total is NULL");
    MemoryInfo m = device->memory_info();
    *out_free = m.free_bytes;
    *out_total = m.total_bytes;
  });
}

inline hal_status_t* stream_create(hal_device_t* d, uint32_t flags, hal_stream_t** out) {
  return call("stream_create", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_stream is NULL");
    if (flags != 0) fail(HAL_STATUS_INVALID_ARGUMENT, "flags ", flags, " are not supported");
    std::unique_ptr<Stream> stream = device->create_stream();
    registry().add(stream.get(), Kind::kStream);
    *out = reinterpret_cast<hal_stream_t*>(stream.release());
  });
}

inline hal_status_t* stream_destroy(hal_stream_t* s) {
  return call("stream_destroy", [&] {
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    if (registry().remove(stream, Kind::kStream)) delete stream;
  });
}

inline hal_status_t* stream_synchronize(hal_stream_t* s) {
  return call("stream_synchronize", [&] { as<Stream>(s, Kind::kStream, "stream")->synchronize(); });
}

inline hal_status_t* stream_query(hal_stream_t* s, bool* out_idle) {
  return call("stream_query", [&] {
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    if (out_idle == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_idle is NULL");
    *out_idle = stream->idle();
  });
}

inline hal_status_t* stream_enqueue_host_func(hal_stream_t* s, hal_host_func_t fn, void* data) {
  return call("stream_enqueue_host_func", [&] {
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    if (fn == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "fn is NULL");
    stream->enqueue_host_func(fn, data);
  });
}

inline hal_status_t* stream_wait_event(hal_stream_t* s, hal_event_t* e) {
  return call("stream_wait_event", [&] {
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    auto* event = as<Event>(e, Kind::kEvent, "event");
    if (&event->device() != &stream->device())
      fail(HAL_STATUS_INVALID_ARGUMENT, "event and stream belong to different devices");
    stream->wait(*event);
  });
}

inline hal_status_t* event_create(hal_device_t* d, uint32_t flags, hal_event_t** out) {
  return call("event_create", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_event is NULL");
    if (flags != 0) fail(HAL_STATUS_INVALID_ARGUMENT, "flags ", flags, " are not supported");
    std::unique_ptr<Event> event = device->create_event();
    registry().add(event.get(), Kind::kEvent);
    *out = reinterpret_cast<hal_event_t*>(event.release());
  });
}

inline hal_status_t* event_destroy(hal_event_t* e) {
  return call("event_destroy", [&] {
    auto* event = as<Event>(e, Kind::kEvent, "event");
    if (registry().remove(event, Kind::kEvent)) delete event;
  });
}

inline hal_status_t* event_record(hal_event_t* e, hal_stream_t* s) {
  return call("event_record", [&] {
    auto* event = as<Event>(e, Kind::kEvent, "event");
    auto* stream = as<Stream>(s, Kind::kStream, "stream");
    if (&event->device() != &stream->device())
      fail(HAL_STATUS_INVALID_ARGUMENT, "event and stream belong to different devices");
    event->record(*stream);
  });
}

inline hal_status_t* event_query(hal_event_t* e, bool* out_complete) {
  return call("event_query", [&] {
    auto* event = as<Event>(e, Kind::kEvent, "event");
    if (out_complete == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_complete is NULL");
    *out_complete = event->complete();
  });
}

inline hal_status_t* event_synchronize(hal_event_t* e) {
  return call("event_synchronize", [&] { as<Event>(e, Kind::kEvent, "event")->synchronize(); });
}

inline hal_status_t* event_elapsed_time(hal_event_t* a, hal_event_t* b, uint64_t* out_ns) {
  return call("event_elapsed_time", [&] {
    auto* start = as<Event>(a, Kind::kEvent, "start event");
    auto* end = as<Event>(b, Kind::kEvent, "end event");
    if (out_ns == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_nanoseconds is NULL");
    if (&start->device() != &end->device())
      fail(HAL_STATUS_INVALID_ARGUMENT, "start and end events belong to different devices");
    *out_ns = end->nanoseconds_since(*start);
  });
}

template <class P>
hal_status_t* plugin_create(const hal_plugin_create_args_t* args, hal_plugin_t** out) {
  return call("create", [&] {
    if (args == nullptr || out == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, "args or out_plugin is NULL");
    if (!HAL_STRUCT_HAS_FIELD(args, hal_plugin_create_args_t, option_count))
      fail(HAL_STATUS_ABI_MISMATCH, "create args struct_size ", args->struct_size, " is too small");
    if (auto e = common::extension_chain_error(args->next, "hal_plugin_create_args_t.next"))
      fail(HAL_STATUS_INVALID_ARGUMENT, *e);
    Options options(args->options, args->option_count);
    auto plugin = std::make_unique<P>(options);
    registry().add(static_cast<Plugin*>(plugin.get()), Kind::kPlugin);
    for (size_t i = 0; i < plugin->device_count(); ++i)
      registry().add(&plugin->device(i), Kind::kDevice, static_cast<Plugin*>(plugin.get()));
    *out = reinterpret_cast<hal_plugin_t*>(static_cast<Plugin*>(plugin.release()));
  });
}

inline void plugin_destroy(hal_plugin_t* p) {
  hal_status_t* s = call("destroy", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    for (size_t i = 0; i < plugin->device_count(); ++i)
      registry().remove(&plugin->device(i), Kind::kDevice);
    registry().remove(plugin, Kind::kPlugin);
    delete plugin;
  });
  if (s != nullptr) s->destroy(s);  // destroy has no status to report through
}

inline const hal_device_api_t kDeviceApi = {sizeof(hal_device_api_t), &device_count, &device_get,
                                            &device_get_properties};
inline const hal_memory_api_t kMemoryApi = {
    sizeof(hal_memory_api_t), &buffer_allocate,     &buffer_free,         &buffer_get_info,
    &host_allocate,           &host_free,           &copy_host_to_device, &copy_device_to_host,
    &copy_device_to_device,   &buffer_fill,         &memory_get_info};
inline const hal_stream_api_t kStreamApi = {
    sizeof(hal_stream_api_t), &stream_create,      &stream_destroy,    &stream_synchronize,
    &stream_query,            &stream_enqueue_host_func, &stream_wait_event, &event_create,
    &event_destroy,           &event_record,       &event_query,       &event_synchronize,
    &event_elapsed_time};

#include "hal/sdk/detail/op_entries.hpp"
#include "hal/sdk/detail/graph_entries.hpp"

// Logs through the host (no-op before the entry point ran).
inline void log(hal_log_level_e level, const std::string& message) noexcept {
  const hal_host_api_t* host = info().host;
  if (host != nullptr && HAL_STRUCT_HAS_FIELD(host, hal_host_api_t, log) && host->log != nullptr)
    host->log(host->host_context, level, message.c_str());
}

template <class P>
hal_status_t* entry(const hal_host_api_t* host, const hal_plugin_api_t** out_api,
                    const char* name, const char* vendor, const char* version) noexcept {
  static const hal_plugin_api_t api = {sizeof(hal_plugin_api_t),
                                       HAL_ABI_VERSION_MAJOR,
                                       HAL_ABI_VERSION_MINOR,
                                       name,
                                       vendor,
                                       version,
                                       &plugin_create<P>,
                                       &plugin_destroy,
                                       &kDeviceApi,
                                       &kMemoryApi,
                                       (P::kInterfaces & HAL_CAPABILITY_STREAM) ? &kStreamApi : nullptr,
                                       nullptr,
                                       (P::kInterfaces & HAL_CAPABILITY_OPERATOR) ? &kOpApi : nullptr,
                                       (P::kInterfaces & HAL_CAPABILITY_GRAPH) ? &kGraphApi : nullptr,
                                       nullptr};
  info().name = name;
  return call("hal_plugin_entry", [&] {
    if (host == nullptr || out_api == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, "host or out_api is NULL");
    if (host->struct_size < HAL_STRUCT_SIZE_TO(hal_host_api_t, abi_version_minor))
      fail(HAL_STATUS_ABI_MISMATCH, "host api struct_size ", host->struct_size, " is too small");
    if (host->abi_version_major != HAL_ABI_VERSION_MAJOR)
      fail(HAL_STATUS_ABI_MISMATCH, "host ABI major ", host->abi_version_major,
           " but this plugin was built for major ", HAL_ABI_VERSION_MAJOR);
    if (host->abi_version_minor >= 3 && HAL_STRUCT_HAS_FIELD(host, hal_host_api_t, next))
      if (auto e = common::extension_chain_error(host->next, "hal_host_api_t.next"))
        fail(HAL_STATUS_INVALID_ARGUMENT, *e);
    info().host = host;
    *out_api = &api;
  });
}

}  // namespace detail

using detail::log;

}  // namespace hal::sdk

// Defines the plugin's one exported symbol. PLUGIN_CLASS derives from
// hal::sdk::Plugin and has a constructor taking const hal::sdk::Options&.
// NAME: [a-z0-9_]+, unique among plugins. Use once per shared object.
#define HAL_SDK_PLUGIN(PLUGIN_CLASS, NAME, VENDOR, VERSION)                                   \
  extern "C" HAL_EXPORT hal_status_t* hal_plugin_entry(const hal_host_api_t* host,            \
                                                       const hal_plugin_api_t** out_api) {    \
    return ::hal::sdk::detail::entry<PLUGIN_CLASS>(host, out_api, NAME, VENDOR, VERSION);     \
  }

#endif  // HAL_SDK_PLUGIN_HPP_
