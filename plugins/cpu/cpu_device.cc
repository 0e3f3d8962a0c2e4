#include "cpu_device.hpp"

#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "cpu_stream.hpp"

namespace hal::cpu {
namespace {

std::string cpuinfo_field(const char* key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

// Runs TASK now (STREAM null) or queued on STREAM.
template <class Task>
void run_on(sdk::Stream* stream, Task task) {
  if (stream == nullptr)
    task();
  else
    static_cast<CpuStream*>(stream)->enqueue(std::move(task));
}

unsigned char* bytes(sdk::Buffer& b) { return static_cast<CpuBuffer&>(b).bytes(); }

}  // namespace

sdk::DeviceProperties CpuDevice::properties() {
  sdk::DeviceProperties p;
  p.name = cpuinfo_field("model name");
  p.vendor = cpuinfo_field("vendor_id");
  struct utsname u {};
  uname(&u);
  p.driver_version = std::string("hal-cpu 0.2.0 on Linux ") + u.release;
  p.total_memory_bytes =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  p.compute_units = std::max(1u, std::thread::hardware_concurrency());
  for (hal_dtype_e d : {HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16, HAL_DTYPE_FLOAT64,
                        HAL_DTYPE_INT8, HAL_DTYPE_UINT8, HAL_DTYPE_INT16, HAL_DTYPE_INT32,
                        HAL_DTYPE_INT64, HAL_DTYPE_BOOL})
    p.supported_dtypes |= HAL_DTYPE_BIT(d);
  p.min_buffer_alignment = 64;
  p.flags = HAL_DEVICE_FLAG_HOST_ACCESSIBLE_MEMORY;
  return p;
}

std::unique_ptr<sdk::Buffer> CpuDevice::allocate(uint64_t size, uint64_t alignment) {
  return std::make_unique<CpuBuffer>(*this, size, sdk::HostMemory::allocate(size, alignment));
}

void CpuDevice::copy_host_to_device(sdk::Buffer& dst, uint64_t dst_offset, const void* src,
                                    uint64_t size, sdk::Stream* stream) {
  unsigned char* to = bytes(dst) + dst_offset;
  run_on(stream, [to, src, size] { std::memcpy(to, src, size); });
}

void CpuDevice::copy_device_to_host(void* dst, sdk::Buffer& src, uint64_t src_offset, uint64_t size,
                                    sdk::Stream* stream) {
  const unsigned char* from = bytes(src) + src_offset;
  run_on(stream, [dst, from, size] { std::memcpy(dst, from, size); });
}

void CpuDevice::copy_device_to_device(sdk::Buffer& dst, uint64_t dst_offset, sdk::Buffer& src,
                                      uint64_t src_offset, uint64_t size, sdk::Stream* stream) {
  unsigned char* to = bytes(dst) + dst_offset;
  const unsigned char* from = bytes(src) + src_offset;
  run_on(stream, [to, from, size] { std::memmove(to, from, size); });
}

void CpuDevice::fill(sdk::Buffer& dst, uint64_t offset, uint64_t size, uint8_t value,
                     sdk::Stream* stream) {
  unsigned char* to = bytes(dst) + offset;
  run_on(stream, [to, size, value] { std::memset(to, value, size); });
}

sdk::MemoryInfo CpuDevice::memory_info() {
  struct sysinfo si {};
  sysinfo(&si);
  sdk::MemoryInfo m;
  m.total_bytes = cached_properties().total_memory_bytes;
  m.free_bytes = static_cast<uint64_t>(si.freeram + si.bufferram) * si.mem_unit;
  return m;
}

std::unique_ptr<sdk::Stream> CpuDevice::create_stream() { return std::make_unique<CpuStream>(*this); }

std::unique_ptr<sdk::Event> CpuDevice::create_event() { return std::make_unique<CpuEvent>(*this); }

}  // namespace hal::cpu
