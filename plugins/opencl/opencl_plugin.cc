// The OpenCL plugin: every device of the OpenCL platforms the ICD loader
// finds (PoCL in CI, any GPU driver elsewhere) as a HAL device, with
// OpenCL C kernels compiled on first use and cached on disk.
//
// Options (hal.toml [plugins.options]):
//   platform    = "Portable"  only platforms whose name contains this (case-insensitive)
//   device_type = "all"       all | cpu | gpu | accelerator
//   max_devices = N           at most N devices (default 64)
//   cache_dir   = "path"      program binary cache ("" disables; default
//                             $HAL_OPENCL_CACHE_DIR, else ~/.cache/hal/opencl)
//
// Graph compile (graph/partition.hpp, codegen.hpp, executable.hpp):
// elementwise chains, with a trailing sum/mean/amax/amin, become one
// generated kernel each. Environment:
//   HAL_OPENCL_DUMP_DIR=dir   write every fused kernel's OpenCL C source to
//                             dir/fused_<ops>_<hash>.cl when it is compiled
//
// With no platform (an ICD loader without vendor files) the plugin still
// loads, with zero devices, and logs why.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "cl_device.hpp"
#include "hal/sdk/collectives.hpp"
#include "hal/sdk/ops.hpp"
#include "ops/opencl_ops.hpp"

namespace hal::opencl {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string default_cache_dir() {
  if (const char* env = std::getenv("HAL_OPENCL_CACHE_DIR")) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/hal/opencl";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/hal/opencl";
  return "";
}

cl_device_type parse_device_type(const std::string& v) {
  if (v == "all") return CL_DEVICE_TYPE_ALL;
  if (v == "cpu") return CL_DEVICE_TYPE_CPU;
  if (v == "gpu") return CL_DEVICE_TYPE_GPU;
  if (v == "accelerator") return CL_DEVICE_TYPE_ACCELERATOR;
  sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "option 'device_type' = '", v,
            "' is not one of all, cpu, gpu, accelerator");
}

}  // namespace

class OpenClPlugin final : public sdk::Plugin {
 public:
  static constexpr uint32_t kInterfaces =
      HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | HAL_CAPABILITY_STREAM | HAL_CAPABILITY_COLLECTIVE |
      HAL_CAPABILITY_OPERATOR | HAL_CAPABILITY_GRAPH;

  explicit OpenClPlugin(const sdk::Options& options) {
    options.require_known({"platform", "device_type", "max_devices", "cache_dir"});
    std::string want_platform = lower(options.get("platform", ""));
    cl_device_type type = parse_device_type(options.get("device_type", "all"));
    int64_t max_devices = options.get_int("max_devices", 64, 0, 1024);
    std::string cache_dir = options.get("cache_dir", default_cache_dir());
    // The kernels convert each input to the compute dtype as they load it.
    ops().set_default_input_mode(sdk::InputMode::kMixed);
    // Generated kernels cover classes of dtypes (float, int, bool), registered
    // with the class's mask: each op keeps what the catalog allows.
    ops().narrow_to_catalog();
    register_opencl_ops(ops());

    cl_uint count = 0;
    cl_int err = clGetPlatformIDs(0, nullptr, &count);
    if (err != CL_SUCCESS || count == 0) {
      const char* vendors = std::getenv("OCL_ICD_VENDORS");
      sdk::log(HAL_LOG_WARNING, std::string("no devices: no OpenCL platform found (clGetPlatformIDs: ") +
                                    (err == CL_SUCCESS ? "0 platforms" : cl_error_name(err)) +
                                    "); the ICD loader found no vendor driver in " +
                                    (vendors ? vendors : "/etc/OpenCL/vendors") +
                                    " (install one, e.g. Debian's pocl-opencl-icd)");
      return;
    }
    std::vector<cl_platform_id> platforms(count);
    clGetPlatformIDs(count, platforms.data(), nullptr);
    std::vector<std::string> seen;
    for (cl_platform_id p : platforms) {
      std::string name = platform_info_string(p, CL_PLATFORM_NAME);
      seen.push_back(name);
      if (!want_platform.empty() && lower(name).find(want_platform) == std::string::npos) continue;
      cl_uint n = 0;
      if (clGetDeviceIDs(p, type, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
      std::vector<cl_device_id> ids(n);
      clGetDeviceIDs(p, type, n, ids.data(), nullptr);
      for (cl_device_id id : ids) {
        if (static_cast<int64_t>(device_count()) >= max_devices) break;
        add_device(std::make_unique<ClDevice>(DeviceInfo{p, id, static_cast<uint32_t>(device_count())}, cache_dir));
      }
    }
    if (device_count() == 0) {
      std::string list;
      for (const auto& s : seen) list += (list.empty() ? "" : ", ") + s;
      sdk::log(HAL_LOG_WARNING, "no devices: no OpenCL device matches the options (platforms: " + list + ")");
    }
  }

  ~OpenClPlugin() override {
    // Build statistics, for tests and tuning: $HAL_OPENCL_STATS names a file
    // that gets one line per plugin instance.
    uint64_t built = 0, loaded = 0;
    for (size_t i = 0; i < device_count(); ++i) {
      ProgramCacheStats s = static_cast<ClDevice&>(device(i)).programs().stats();
      built += s.built;
      loaded += s.loaded_from_disk;
    }
    sdk::log(HAL_LOG_DEBUG, "programs built from source: " + std::to_string(built) +
                                ", loaded from the disk cache: " + std::to_string(loaded));
    if (const char* path = std::getenv("HAL_OPENCL_STATS")) {
      std::ofstream out(path, std::ios::app);
      out << "programs_built=" << built << " programs_loaded=" << loaded << "\n";
    }
  }
};

}  // namespace hal::opencl

HAL_SDK_PLUGIN(hal::opencl::OpenClPlugin, "opencl", "HAL project (OpenCL through the ICD loader)", "0.2.0")
