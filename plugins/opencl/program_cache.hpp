// OpenCL plugin: programs compiled on first use and kept — in memory for
// this process, and as program binaries on disk for the next one.
//
// The disk key is a SHA-256 of the source, the build options and the
// device's identity (platform, device name, device and driver versions), so
// a driver update or another device never loads a stale binary. Files are
// written to a temporary name and renamed, so concurrent processes sharing
// a cache directory never see half a binary. Thread-safe.
#ifndef HAL_PLUGINS_OPENCL_PROGRAM_CACHE_HPP_
#define HAL_PLUGINS_OPENCL_PROGRAM_CACHE_HPP_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cl_error.hpp"

namespace hal::opencl {

// One kernel of a built program. clSetKernelArg is not thread-safe on one
// cl_kernel, so launches hold MUTEX from the first argument to the enqueue.
struct KernelEntry {
  cl_kernel kernel = nullptr;
  std::mutex mutex;
  ~KernelEntry() {
    if (kernel != nullptr) clReleaseKernel(kernel);
  }
};

struct ProgramCacheStats {
  uint64_t built = 0;            // clBuildProgram from source (a real compile)
  uint64_t loaded_from_disk = 0;  // created from a cached binary
};

class ProgramCache {
 public:
  // DIRECTORY: where binaries live ("" = memory only). DEVICE_KEY: what
  // identifies the device and driver (see device_key()).
  ProgramCache(cl_context context, cl_device_id device, std::string device_key, std::string directory);
  ~ProgramCache();
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  // Kernel NAME of the program built from SOURCE with OPTIONS. Builds (or
  // loads) the program on first use. A build failure throws DEVICE_ERROR
  // whose message holds the compiler's build log; it is not cached, so the
  // next call tries again. The entry lives as long as this cache.
  KernelEntry& kernel(const std::string& source, const std::string& name, const std::string& options = "");

  ProgramCacheStats stats() const { return {built_.load(), loaded_.load()}; }
  const std::string& directory() const { return directory_; }

  // Platform name, device name, device version and driver version, joined.
  static std::string device_key(cl_platform_id platform, cl_device_id device);

 private:
  cl_program program(const std::string& source, const std::string& options);
  cl_program load_binary(const std::string& path, const std::string& options);
  void store_binary(cl_program program, const std::string& path);

  cl_context context_;
  cl_device_id device_;
  std::string device_key_;
  std::string directory_;
  std::mutex mutex_;
  std::map<std::string, cl_program> programs_;  // key: sha256(source + options)
  std::map<std::string, std::unique_ptr<KernelEntry>> kernels_;  // program key + name
  std::atomic<uint64_t> built_{0};
  std::atomic<uint64_t> loaded_{0};
};

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_PROGRAM_CACHE_HPP_
