// HAL runtime: discovery, loading and the device list — the entry point for
// bridges and tools.
//
//   auto rt = hal::Runtime::create();            // hal.toml / env / defaults
//   for (auto& d : rt->devices()) ...             // every device of every plugin
//   hal::Buffer b = rt->default_device()->allocate(1 << 20);
//
// Where plugins come from, in order:
//   1. RuntimeOptions::plugin_paths (e.g. hal-info --plugin): only these.
//   2. The config file: RuntimeOptions::config_path, else $HAL_CONFIG.
//      Its [[plugin]] entries, then (discover = true) its search_paths.
//   3. $HAL_PLUGIN_PATH: ':'-separated directories (scanned) and .so files.
//   4. The install's plugin directory (<libdir>/hal/plugins next to libhal).
// Directories are scanned for files named libhal_plugin_<name>.so. A plugin
// that cannot be used never stops the others; it becomes a SkipRecord.
#ifndef HAL_RUNTIME_RUNTIME_HPP_
#define HAL_RUNTIME_RUNTIME_HPP_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "hal/runtime/config.hpp"
#include "hal/runtime/device.hpp"
#include "hal/runtime/error.hpp"
#include "hal/runtime/op.hpp"
#include "hal/runtime/plugin.hpp"
#include "hal/runtime/stream.hpp"

namespace hal {

namespace detail {
struct LayerInstance;
}

// One layer (hal/layer.h) in front of every plugin a runtime loaded.
struct LayerInfo {
  std::string name;         // "validation"
  std::string path;         // the layer .so, or "built-in"
  std::string description;  // one line, for hal-info
};

struct RuntimeOptions {
  std::optional<std::string> config_path;  // overrides $HAL_CONFIG
  std::vector<std::string> plugin_paths;   // load only these files
  bool use_environment = true;             // read HAL_CONFIG / HAL_PLUGIN_PATH
  bool use_install_dir = true;             // scan the install's plugin dir
  // Read $HAL_LAYERS (and the layers' own variables) even when
  // use_environment is false: layers are a per-process debugging choice,
  // not plugin discovery (hal-conformance --plugin honours them).
  bool use_layer_environment = true;
  // For tests of version negotiation: the ABI version the host announces.
  uint32_t host_abi_major = HAL_ABI_VERSION_MAJOR;
  uint32_t host_abi_minor = HAL_ABI_VERSION_MINOR;
};

// Owns the loaded plugins. Thread-safe after create(). Devices, buffers and
// streams keep their plugin loaded even if the Runtime is destroyed first.
class Runtime {
 public:
  // Loads everything. Throws ConfigError for a broken config file and
  // hal::Error naming the layer for a layer that cannot start (unknown
  // name, another ABI major, options or $HAL_FAULTS-style variables that do
  // not parse); plugin failures never throw, they are recorded in
  // skipped(). Layers: $HAL_LAYERS (comma-separated names or .so paths;
  // read when use_environment or use_layer_environment, and not empty) else
  // the config's `layers`.
  static std::shared_ptr<Runtime> create(const RuntimeOptions& options = {});

  const std::vector<std::shared_ptr<Plugin>>& plugins() const { return plugins_; }
  const std::vector<SkipRecord>& skipped() const { return skipped_; }
  const Config& config() const { return config_; }
  // Directories that were scanned, in order.
  const std::vector<std::string>& search_paths() const { return search_paths_; }

  std::vector<std::shared_ptr<Device>> devices() const;
  // "cpu:1" or "cpu" (device 0). Throws NOT_FOUND naming the spec and the
  // devices that exist.
  std::shared_ptr<Device> device(const std::string& spec) const;
  // Config's default_device, else the first device. Throws NOT_FOUND when
  // there is none.
  std::shared_ptr<Device> default_device() const;
  // Config's fallback_device, else the first "cpu" device; nullptr if none.
  std::shared_ptr<Device> fallback_device() const;
  // Config's failover (where work moves when a device is lost); nullptr when
  // not configured. Throws NOT_FOUND when it names no device.
  std::shared_ptr<Device> failover_device() const;
  // <libdir>/hal/plugins next to libhal.
  static std::string install_plugin_dir();
  // The layers in front of every plugin, outermost first.
  std::vector<LayerInfo> layers() const;

 private:
  Config config_;
  std::vector<std::string> search_paths_;
  std::vector<std::shared_ptr<Plugin>> plugins_;
  std::vector<SkipRecord> skipped_;
  std::vector<std::shared_ptr<detail::LayerInstance>> layers_;
};

}  // namespace hal

#endif  // HAL_RUNTIME_RUNTIME_HPP_
