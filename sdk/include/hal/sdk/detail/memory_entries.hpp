// HAL C++ SDK, internal: the memory table's C entries (hal/memory.h):
// validate handles and ranges, then call the Device.
#ifndef HAL_SDK_DETAIL_MEMORY_ENTRIES_HPP_
#define HAL_SDK_DETAIL_MEMORY_ENTRIES_HPP_

#include <cstdint>
#include <memory>

#include "hal/hal.h"
#include "hal/sdk/buffer.hpp"
#include "hal/sdk/detail/call.hpp"
#include "hal/sdk/detail/registry.hpp"
#include "hal/sdk/device.hpp"
#include "hal/sdk/stream.hpp"

namespace hal::sdk::detail {

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

inline const hal_memory_api_t kMemoryApi = {
    sizeof(hal_memory_api_t), &buffer_allocate,     &buffer_free,         &buffer_get_info,
    &host_allocate,           &host_free,           &copy_host_to_device, &copy_device_to_host,
    &copy_device_to_device,   &buffer_fill,         &memory_get_info};

}  // namespace hal::sdk::detail

#endif  // HAL_SDK_DETAIL_MEMORY_ENTRIES_HPP_
