// HAL runtime: hal.toml, the user's choice of plugins.
//
//   search_paths = ["plugins"]       # dirs scanned for libhal_plugin_*.so
//   discover = true                  # also load unlisted plugins found there
//   default_device = "cpu:0"
//   fallback_device = "cpu:0"
//   failover = "cpu"                 # where work moves when a device is lost
//                                    # (ONNX sessions re-partition onto it)
//   wait_timeout_ms = 600000         # host waits (stream/event synchronize)
//                                    # fail with TIMEOUT past this; 0 = none
//   allow_world_writable = false     # refuse plugins in world-writable dirs
//   caching_allocator = true
//   layers = ["validation", "trace"]  # interposed on every plugin's calls,
//                                    # first = outermost; $HAL_LAYERS (comma-
//                                    # separated) replaces this list
//
//   [layer_options.trace]            # options of one enabled layer, as strings
//   path = "hal-trace.json"
//
//   [[plugin]]
//   name = "cpu"                     # found as libhal_plugin_cpu.so ...
//   path = "lib/libhal_plugin_cpu.so"  # ... or given by path
//   priority = 10                    # higher loads first, wins name clashes
//   enabled = true
//   sha256 = "<64 hex digits>"       # checked before the file is loaded
//   allow_world_writable = false
//   options = { device_count = 2 }   # passed to the plugin as strings
//   disabled_ops = ["erf", "gelu"]   # catalog ops the core treats as not
//                                    # implemented by this plugin: op launch
//                                    # and graph partition pass them to the
//                                    # next device ("disabled by hal.toml")
//
// Relative paths are relative to the config file's directory. Unknown keys,
// wrong types, ops not in the catalog (disabled_ops) and malformed TOML are
// errors naming file:line:column.
#ifndef HAL_RUNTIME_CONFIG_HPP_
#define HAL_RUNTIME_CONFIG_HPP_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hal/runtime/error.hpp"

namespace hal {

// A configuration error; the message starts with "file:line:column: ".
// Code: HAL_STATUS_INVALID_ARGUMENT (or NOT_FOUND for an unreadable file).
class ConfigError : public Error {
 public:
  using Error::Error;
};

struct PluginSpec {
  std::string name;  // wanted plugin name; may be empty when path is set
  std::string path;  // absolute path, or empty to search by name
  int64_t priority = 0;
  bool enabled = true;
  std::optional<std::string> sha256;  // lowercase hex
  bool allow_world_writable = false;
  std::vector<std::pair<std::string, std::string>> options;
  // Catalog op names the core treats as not implemented by this plugin.
  std::vector<std::string> disabled_ops;
  // Where the user named it ("hal.toml:7:1", "--plugin", "HAL_PLUGIN_PATH"),
  // empty for plugins found by scanning a directory.
  std::string origin;
};

struct Config {
  std::string source;  // file path, or "<string>"
  std::vector<std::string> search_paths;  // absolute
  bool discover = true;
  std::string default_device;
  std::string fallback_device;
  // Device spec ("cpu", "cpu:1") that work moves to when a device is lost;
  // "" = none. Where it was written, for errors.
  std::string failover;
  std::string failover_origin;
  // Milliseconds a host wait (Stream/Event::synchronize) may take before it
  // fails with HAL_STATUS_TIMEOUT; 0 = wait for ever.
  uint64_t wait_timeout_ms = 600000;
  bool allow_world_writable = false;
  bool caching_allocator = true;
  std::vector<PluginSpec> plugins;
  // Layers (hal/layer.h) by name or .so path, outermost first; where the
  // list was written ("hal.toml:4:1") for errors.
  std::vector<std::string> layers;
  std::string layers_origin;
  // [layer_options.<name>]: key/value strings per layer.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> layer_options;

  // Parses TOML text; SOURCE names it in errors and anchors relative paths
  // (its directory). Throws ConfigError.
  static Config parse(const std::string& text, const std::string& source);
  // Reads and parses a file. Throws ConfigError (NOT_FOUND when unreadable).
  static Config load(const std::string& path);
};

}  // namespace hal

#endif  // HAL_RUNTIME_CONFIG_HPP_
