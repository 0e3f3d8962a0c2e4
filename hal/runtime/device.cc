#include "hal/runtime/device.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "hal/runtime/stream.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {

Device::Device(std::shared_ptr<detail::LoadedPlugin> plugin, uint32_t index, hal_device_t* handle,
               const hal_device_properties_t& properties, bool caching)
    : plugin_(std::move(plugin)), index_(index), handle_(handle), properties_(properties) {
  allocator_ = std::make_unique<CachingAllocator>(handle_, &plugin_->memory, &plugin_->stream,
                                                  properties_.min_buffer_alignment, caching);
}

Device::~Device() = default;  // allocator returns its cache before the plugin may go

const char* device_state_name(DeviceState state) { return state == DeviceState::kLost ? "lost" : "ok"; }

std::string Device::lost_reason() const {
  std::lock_guard<std::mutex> lock(lost_mu_);
  return lost_reason_;
}

void Device::mark_lost(const std::string& reason) const {
  {
    std::lock_guard<std::mutex> lock(lost_mu_);
    if (lost_.load(std::memory_order_relaxed)) return;
    lost_reason_ = reason;
    lost_.store(true, std::memory_order_release);
  }
  std::fprintf(stderr, "hal: device %s was lost: %s\n", id().c_str(), reason.c_str());
  try {
    allocator_->empty_cache();
  } catch (const Error&) {  // a lost device may refuse even frees; what it keeps is gone with it
  }
}

void Device::throw_lost(const char* call) const {
  std::string where = failover_ ? "; move work to the failover device " + failover_->id() +
                                      (failover_->state() == DeviceState::kLost ? " (also lost)" : "")
                                : "; no failover device is configured (hal.toml: failover = \"cpu\")";
  throw Error(HAL_STATUS_DEVICE_LOST,
              "device " + id() + " was lost (" + lost_reason() + "): " + call + " refused" + where);
}

void Device::throw_status(hal_status_t* status) const {
  if (status->code == HAL_STATUS_DEVICE_LOST) mark_lost(status->message != nullptr ? status->message : "(no message)");
  throw_if_error(status);
  std::abort();  // not reached: STATUS is not NULL
}

void Device::rethrow(const Error& e) const {
  if (e.code() == HAL_STATUS_DEVICE_LOST) mark_lost(e.what());
  throw e;
}

const std::string& Device::plugin_name() const { return plugin_->name; }

std::string Device::id() const { return plugin_->name + ":" + std::to_string(index_); }

Buffer Device::allocate(uint64_t size, const Stream* stream) {
  check_usable("allocate");
  hal_stream_t* s = stream != nullptr ? stream->handle() : nullptr;
  try {
    return Buffer(shared_from_this(), allocator_->allocate(size, s));
  } catch (const Error& e) {
    rethrow(e);
  }
}

Stream Device::create_stream() {
  check_usable("stream_create");
  hal_stream_t* s = nullptr;
  check(plugin_->require(plugin_->stream.stream_create, "stream_create")(handle_, 0, &s));
  return Stream(shared_from_this(), s);
}

Event Device::create_event() {
  check_usable("event_create");
  hal_event_t* e = nullptr;
  check(plugin_->require(plugin_->stream.event_create, "event_create")(handle_, 0, &e));
  return Event(shared_from_this(), e);
}

void Device::memory_info(uint64_t* out_free, uint64_t* out_total) const {
  check(
      plugin_->require(plugin_->memory.memory_get_info, "memory_get_info")(handle_, out_free, out_total));
}

// ---- Buffer ----------------------------------------------------------------

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::move(other.device_);
    block_ = other.block_;
    other.block_ = nullptr;
  }
  return *this;
}

void Buffer::release() noexcept {
  if (block_ != nullptr) device_->allocator().release(block_);
  block_ = nullptr;
}

void Buffer::check_live(const char* call) const {
  if (block_ == nullptr)
    throw Error(HAL_STATUS_INVALID_ARGUMENT,
                std::string("Buffer::") + call + ": the buffer was freed (or moved from, or never allocated)");
}

void Buffer::check_range(const char* call, uint64_t offset, uint64_t size) const {
  check_live(call);
  if (offset > block_->requested || size > block_->requested - offset)
    throw Error(HAL_STATUS_OUT_OF_RANGE, device_->id() + ": Buffer::" + call + ": range [offset " +
                                             std::to_string(offset) + ", +" + std::to_string(size) +
                                             ") exceeds the buffer's size " + std::to_string(block_->requested));
}

uint64_t Buffer::size() const { return block_ ? block_->requested : 0; }

Device& Buffer::device() const {
  check_live("device");
  return *device_;
}

hal_buffer_t* Buffer::handle() const {
  check_live("handle");
  return block_->buffer;
}

void* Buffer::host_pointer() const {
  check_live("host_pointer");
  const auto& mem = device_->plugin().memory;
  if (mem.buffer_get_info == nullptr) return nullptr;
  hal_buffer_info_t info{};
  info.struct_size = sizeof(info);
  device_->check(mem.buffer_get_info(block_->buffer, &info));
  return info.host_pointer;
}

void Buffer::record_stream(const Stream& stream) {
  check_live("record_stream");
  device_->allocator().record_stream(block_, stream.handle());
}

static hal_stream_t* stream_handle(const Stream* s) { return s ? s->handle() : nullptr; }

void Buffer::copy_from_host(const void* src, uint64_t size, uint64_t offset, const Stream* stream) {
  check_range("copy_from_host", offset, size);
  device_->check_usable("copy_host_to_device");
  const auto& mem = device_->plugin().memory;
  device_->check(device_->plugin().require(mem.copy_host_to_device, "copy_host_to_device")(
      block_->buffer, offset, src, size, stream_handle(stream)));
}

void Buffer::copy_to_host(void* dst, uint64_t size, uint64_t offset, const Stream* stream) const {
  check_range("copy_to_host", offset, size);
  device_->check_usable("copy_device_to_host");
  const auto& mem = device_->plugin().memory;
  device_->check(device_->plugin().require(mem.copy_device_to_host, "copy_device_to_host")(
      dst, block_->buffer, offset, size, stream_handle(stream)));
}

void Buffer::copy_from(const Buffer& src, uint64_t size, uint64_t dst_offset, uint64_t src_offset,
                       const Stream* stream) {
  check_range("copy_from (dst)", dst_offset, size);
  src.check_range("copy_from (src)", src_offset, size);
  if (&src.device_->plugin() != &device_->plugin())
    throw Error(HAL_STATUS_UNIMPLEMENTED, "Buffer::copy_from: copies between plugins (" + src.device_->id() +
                                              " -> " + device_->id() + ") go through host memory");
  device_->check_usable("copy_device_to_device");
  const auto& mem = device_->plugin().memory;
  device_->check(device_->plugin().require(mem.copy_device_to_device, "copy_device_to_device")(
      block_->buffer, dst_offset, src.block_->buffer, src_offset, size, stream_handle(stream)));
}

void Buffer::fill(uint8_t value, uint64_t size, uint64_t offset, const Stream* stream) {
  check_range("fill", offset, size);
  device_->check_usable("buffer_fill");
  const auto& mem = device_->plugin().memory;
  device_->check(device_->plugin().require(mem.buffer_fill, "buffer_fill")(block_->buffer, offset, size, value,
                                                                           stream_handle(stream)));
}

void Buffer::free() {
  check_live("free");
  release();
}

}  // namespace hal
