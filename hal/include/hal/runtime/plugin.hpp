// HAL runtime: a loaded plugin and the record of one that could not be used.
#ifndef HAL_RUNTIME_PLUGIN_HPP_
#define HAL_RUNTIME_PLUGIN_HPP_

#include <memory>
#include <string>
#include <vector>

#include "hal/hal.h"

namespace hal {

class Device;

// Why a plugin was not used. Stable names via skip_reason_name().
enum class SkipReason {
  kFileNotFound,        // path or name did not resolve to a file
  kUnsafePermissions,   // file or its directory is world-writable
  kHashMismatch,        // sha256 pin did not match
  kLoadFailed,          // the dynamic loader refused it (not a shared object, ...)
  kMissingEntryPoint,   // no hal_plugin_entry symbol
  kEntryFailed,         // the entry point returned an error status
  kEntryThrew,          // the entry point let a C++ exception escape
  kNullTable,           // entry succeeded but returned no table
  kStructTooSmall,      // a table's struct_size is below the minimum
  kAbiMajorMismatch,    // built for another ABI MAJOR
  kInvalidPlugin,       // required field missing (name, create, device, memory), malformed extension chain
  kDuplicateName,       // another loaded plugin already has this name
  kInitFailed,          // create() or device enumeration failed
  kDisabled,            // enabled = false in the configuration
};

// "file_not_found", "abi_major_mismatch", ...
const char* skip_reason_name(SkipReason reason) noexcept;

struct SkipRecord {
  std::string path;     // file as resolved (may be empty for an unresolved name)
  std::string name;     // plugin name, when known
  SkipReason reason;
  std::string message;  // human-readable detail (dlopen error, status text)
  bool requested;       // named explicitly by the user (config, CLI, env)
};

namespace detail {
struct LoadedPlugin;
}

// A plugin that loaded, negotiated its ABI and initialised. Owned by the
// Runtime through shared_ptr; safe to read from any thread.
class Plugin {
 public:
  const std::string& name() const;
  const std::string& path() const;
  const std::string& vendor() const;
  const std::string& version() const;
  uint32_t abi_major() const;   // what the plugin was built with
  uint32_t abi_minor() const;
  uint32_t negotiated_minor() const;  // min(host MINOR, plugin MINOR)
  int64_t priority() const;
  // Interfaces the plugin's tables provide (HAL_CAPABILITY_* bits).
  uint32_t interfaces() const;
  // Ops the plugin implements (0 without an operator interface) and the op
  // catalog version it implements.
  uint32_t op_count() const;
  std::string op_catalog_version() const;  // "1.0"; "" without operators
  // Why the plugin's operator interface is not used ("" when it is, or
  // when the plugin has none), e.g. another op catalog MAJOR.
  const std::string& op_note() const;
  // Warnings the plugin logged while it started, in order (e.g. why it has
  // no devices: "no OpenCL platform found ..."), then the loader's own about
  // it (a file name that does not match the declared plugin name). Empty
  // when none.
  const std::vector<std::string>& startup_warnings() const;
  // Whether the plugin's graph-compile interface is used (ABI 1.2 entries
  // present), and why a graph table it has is not ("" otherwise).
  bool has_graph() const { return (interfaces() & HAL_CAPABILITY_GRAPH) != 0; }
  const std::string& graph_note() const;
  // Whether its compiled executables can be serialised (ABI 1.5 entries):
  // then the on-disk compile cache keeps them, else only the placement.
  bool serializes_executables() const;
  // Whether the plugin's collective interface is used (ABI 1.6 entries
  // present), and why a collective table it has is not ("" otherwise).
  bool has_collectives() const { return (interfaces() & HAL_CAPABILITY_COLLECTIVE) != 0; }
  const std::string& collective_note() const;
  // hal.toml's disabled_ops for this plugin: catalog ops the core treats as
  // not implemented by it (eager launches and graph partition), in the
  // config's order; empty when none.
  const std::vector<std::string>& disabled_ops() const;
  const std::vector<std::shared_ptr<Device>>& devices() const { return devices_; }

  // The normalised C tables (zero-filled past the plugin's struct_size, so a
  // NULL entry means "not implemented"). Valid while the Plugin lives. With
  // layers enabled (Runtime::layers()) the entries run through them.
  const hal_plugin_api_t& api() const;
  const hal_device_api_t& device_api() const;
  const hal_memory_api_t& memory_api() const;
  const hal_stream_api_t& stream_api() const;
  const hal_op_api_t& op_api() const;
  const hal_graph_api_t& graph_api() const;
  const hal_collective_api_t& collective_api() const;
  hal_plugin_t* handle() const;

  explicit Plugin(std::shared_ptr<detail::LoadedPlugin> loaded);
  ~Plugin();

 private:
  friend class Runtime;
  std::shared_ptr<detail::LoadedPlugin> loaded_;
  std::vector<std::shared_ptr<Device>> devices_;
};

}  // namespace hal

#endif  // HAL_RUNTIME_PLUGIN_HPP_
