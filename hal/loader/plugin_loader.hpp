// Internal: turns one plugin file into a LoadedPlugin or a SkipRecord.
#ifndef HAL_LOADER_PLUGIN_LOADER_HPP_
#define HAL_LOADER_PLUGIN_LOADER_HPP_

#include <boost/dll/shared_library.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "hal/runtime/config.hpp"
#include "hal/runtime/plugin.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal::detail {

struct LoadRequest {
  PluginSpec spec;  // spec.path resolved and absolute
  bool requested = false;
  bool allow_world_writable = false;  // config-wide permission
  // The hal.toml in use ("" when none): refusals name it as where
  // allow_world_writable would go.
  std::string config_path;
  uint32_t host_abi_major = HAL_ABI_VERSION_MAJOR;
  uint32_t host_abi_minor = HAL_ABI_VERSION_MINOR;
  // Returns the path of an already-loaded plugin with NAME, if any; checked
  // before create() so a duplicate never initialises.
  std::function<std::optional<std::string>(const std::string& name)> loaded_path_of;
};

struct LoadOutcome {
  std::shared_ptr<LoadedPlugin> plugin;  // set on success
  std::optional<SkipRecord> skip;        // set on failure
};

// Checks permissions and the sha256 pin, loads the library, calls the entry
// point, validates and normalises the tables and creates the instance.
// Never throws; every failure is a SkipRecord. A file name that is not
// libhal_plugin_<declared name>.so loads with a warning in
// LoadedPlugin::startup_warnings.
LoadOutcome load_plugin(const LoadRequest& request);

// Prints a log line of WHO (a plugin or layer) to stderr when LEVEL
// (hal_log_level_e) is at or above $HAL_LOG_LEVEL (debug, info, warning
// (default), error). Thread-safe.
void print_host_log(uint32_t level, const std::string& who, const char* message);

// "CODE_NAME: message" of STATUS, which is released.
std::string take_message(hal_status_t* status);

// How plugin and layer libraries are opened: now, local, and never unmapped
// (they keep process-lifetime statics, and so do the libraries they pull in;
// unmapping them under live references is unsafe).
boost::dll::load_mode::type module_load_mode();

// Lowercase hex SHA-256 of a file. Throws hal::Error (NOT_FOUND) when
// unreadable.
std::string sha256_file(const std::string& path);

}  // namespace hal::detail

#endif  // HAL_LOADER_PLUGIN_LOADER_HPP_
