// Internal: one plugin library that passed every check, with its normalised
// tables and its initialised instance.
#ifndef HAL_LOADER_LOADED_PLUGIN_HPP_
#define HAL_LOADER_LOADED_PLUGIN_HPP_

#include <boost/dll/shared_library.hpp>
#include <memory>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "hal/runtime/error.hpp"

namespace hal::detail {

struct LoadedPlugin {
  // Declared first so it is destroyed last: the instance and every status
  // the plugin made must be gone before the code is unmapped.
  boost::dll::shared_library library;
  std::string path, name, vendor, version;
  int64_t priority = 0;
  uint32_t abi_major = 0, abi_minor = 0, negotiated_minor = 0;
  uint32_t interfaces = 0;  // HAL_CAPABILITY_* bits for tables present
  // Copies of the plugin's tables, zero-filled past its struct_size (api.next:
  // only when negotiated_minor >= 3, ABI 1.3, and then a well-formed chain).
  hal_plugin_api_t api{};
  hal_device_api_t device{};
  hal_memory_api_t memory{};
  hal_stream_api_t stream{};
  hal_op_api_t op{};  // entries only when negotiated_minor >= 1 (ABI 1.1)
  std::string op_note;  // why a present op table is not used ("" otherwise)
  // Warnings the plugin logged while create() ran (e.g. why it found no
  // devices), kept for hal-info. Written only during create (one thread).
  std::vector<std::string> startup_warnings;
  bool in_create = false;
  // Entries only when negotiated_minor >= 2 (ABI 1.2); executable_serialize
  // and executable_deserialize only when >= 5 (ABI 1.5).
  hal_graph_api_t graph{};
  std::string graph_note;   // why a present graph table is not used ("" otherwise)
  // Entries only when negotiated_minor >= 6 (ABI 1.6) and the table covers
  // HAL_COLLECTIVE_API_1_6_SIZE; else all NULL.
  hal_collective_api_t collective{};
  std::string collective_note;  // why a present collective table is not used ("" otherwise)
  // hal.toml's disabled_ops for this plugin: ops the core treats as not
  // implemented (OpRunner refuses them, graph partition passes them on).
  std::vector<std::string> disabled_ops;
  bool op_disabled(const std::string& op) const {
    for (const std::string& d : disabled_ops)
      if (d == op) return true;
    return false;
  }
  hal_host_api_t host{};  // handed to the plugin; must outlive it
  hal_plugin_t* instance = nullptr;
  // The layers in front of the tables above (layers/layer_stack.hpp), with
  // the plugin's own tables; null when no layer is enabled.
  std::shared_ptr<struct LayerChain> layers;

  ~LoadedPlugin() {
    if (instance != nullptr) api.destroy(instance);
  }

  // Returns ENTRY or throws UNIMPLEMENTED naming the plugin and CALL.
  template <class Fn>
  Fn require(Fn entry, const char* call) const {
    if (entry == nullptr)
      throw Error(HAL_STATUS_UNIMPLEMENTED, name + ": " + call + " is not implemented by this plugin");
    return entry;
  }
};

}  // namespace hal::detail

#endif  // HAL_LOADER_LOADED_PLUGIN_HPP_
