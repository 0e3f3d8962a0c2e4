// HAL C++ SDK: host memory for the buffers of a device whose memory is the
// host's (the CPU plugin; any plugin whose host_pointer() is plain memory).
// Linux. Header-only.
//
// Large allocations are backed by a memfd, mapped shared, so that the host
// communicator of another process on this host can map them too
// (Buffer::shared_memory) and a collective reads and writes its peers'
// buffers in place instead of copying every byte through a segment. Small
// ones, and large ones when descriptors run short, come from
// posix_memalign: each memfd holds a descriptor for the buffer's life, so
// they are made only while the descriptor number stays below a quarter of
// RLIMIT_NOFILE's soft limit (the rest is the application's).
// $HAL_SHARED_DEVICE_MEMORY=0 turns memfds off (plain memory throughout).
//
// Semantics a user can see: a memfd mapping is MAP_SHARED, so a child made
// by fork() shares these buffers with its parent rather than getting a
// copy (device memory is not meant to be used across fork; PyTorch's CUDA
// forbids it outright).
#ifndef HAL_SDK_HOST_MEMORY_HPP_
#define HAL_SDK_HOST_MEMORY_HPP_

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "hal/sdk/buffer.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk {

// One allocation, owned (freed, or unmapped and its descriptor closed, on
// destruction); movable, not copyable. allocate() may be called from any
// thread; one object is not for concurrent moves.
class HostMemory {
 public:
  // Allocations from this size up are shareable (when descriptors allow).
  static constexpr uint64_t kSharedMinBytes = 1u << 20;

  // SIZE bytes aligned to ALIGNMENT (a power of two). Throws
  // OUT_OF_MEMORY naming both when no memory is left.
  static HostMemory allocate(uint64_t size, uint64_t alignment) {
    HostMemory m;
    m.size_ = size;
    static const bool enabled = [] {
      const char* e = std::getenv("HAL_SHARED_DEVICE_MEMORY");
      return e == nullptr || std::strcmp(e, "0") != 0;
    }();
    if (enabled && size >= kSharedMinBytes && alignment <= static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) &&
        m.map_shared())
      return m;
    alignment = std::max<uint64_t>(alignment, sizeof(void*));
    if (posix_memalign(&m.data_, alignment, size) != 0)
      fail(HAL_STATUS_OUT_OF_MEMORY, "cannot allocate ", size, " bytes aligned to ", alignment);
    return m;
  }

  HostMemory() = default;
  HostMemory(HostMemory&& o) noexcept { *this = std::move(o); }
  HostMemory& operator=(HostMemory&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(shared_, o.shared_);
    return *this;
  }
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  ~HostMemory() {
    if (shared_.fd >= 0) {
      munmap(data_, size_);
      close(shared_.fd);
    } else {
      std::free(data_);
    }
  }

  // The memory; null only for a moved-from object. Valid for this object's life.
  void* data() const { return data_; }
  // True, with the file, for a memfd-backed allocation (OUT non-null; its
  // descriptor is this object's, valid for its life).
  bool shared_memory(SharedMemory* out) const {
    if (shared_.fd < 0) return false;
    *out = shared_;
    return true;
  }

 private:
  bool map_shared() {
    const int fd = memfd_create("hal-device-memory", MFD_CLOEXEC);
    if (fd < 0) return false;
    rlimit limit{};
    struct stat st{};
    void* p = MAP_FAILED;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && static_cast<rlim_t>(fd) < limit.rlim_cur / 4 &&
        ftruncate(fd, static_cast<off_t>(size_)) == 0 && fstat(fd, &st) == 0)
      p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return false;
    }
    data_ = p;
    shared_.fd = fd;
    shared_.offset = 0;
    shared_.device = static_cast<uint64_t>(st.st_dev);
    shared_.inode = static_cast<uint64_t>(st.st_ino);
    return true;
  }

  void* data_ = nullptr;
  uint64_t size_ = 0;
  SharedMemory shared_;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_HOST_MEMORY_HPP_
