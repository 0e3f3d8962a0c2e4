// HAL C++ SDK: write a plugin as C++ classes, register it with one macro.
//
//   class MyDevice : public hal::sdk::Device { ... };      // memory, streams
//   class MyPlugin : public hal::sdk::Plugin {
//    public:
//     explicit MyPlugin(const hal::sdk::Options& o) { add_device(...); }
//   };
//   HAL_SDK_PLUGIN(MyPlugin, "my", "My Vendor", "0.1.0")
//
// The SDK builds the C tables (hal/plugin.h), validates every handle and
// range before your code sees it (double frees, destroyed streams and copies
// past a buffer's end become INVALID_ARGUMENT / OUT_OF_RANGE statuses), and
// converts every exception into a status at the boundary: no C++ exception
// or type crosses the ABI. Build plugins with hidden visibility (the
// hal::sdk CMake target does) so that only the entry point is exported.
//
// One header per object: options.hpp, buffer.hpp, stream.hpp, event.hpp,
// device.hpp, graph.hpp, op_registry.hpp; this one adds Plugin and the
// macro. A plugin with operators or graph compile (HAL_CAPABILITY_OPERATOR /
// _GRAPH in kInterfaces) also includes hal/sdk/ops.hpp in the TU that uses
// HAL_SDK_PLUGIN; a memory-only plugin never includes the op catalog.
// Header-only.
#ifndef HAL_SDK_PLUGIN_HPP_
#define HAL_SDK_PLUGIN_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "hal/hal.h"
#include "hal/sdk/buffer.hpp"
#include "hal/sdk/device.hpp"
#include "hal/sdk/event.hpp"
#include "hal/sdk/op_registry.hpp"
#include "hal/sdk/options.hpp"
#include "hal/sdk/status.hpp"
#include "hal/sdk/stream.hpp"

namespace hal::sdk {

// A plugin instance: owns its devices (for its whole lifetime). Constructed
// by the SDK on create (from one thread), destroyed on destroy. The
// interfaces it implements are declared once, by shadowing kInterfaces:
// only the tables named there are handed to the core, and every device
// reports them as its capabilities (DEVICE and MEMORY are always set).
class Plugin {
 public:
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY;

  virtual ~Plugin() = default;
  // Thread-safe after construction (the device list is fixed then).
  size_t device_count() const { return devices_.size(); }
  Device& device(size_t index) const { return *devices_.at(index); }
  // The ops this plugin implements (register them in the constructor and
  // add HAL_CAPABILITY_OPERATOR to kInterfaces); read-only afterwards.
  OpRegistry& ops() { return ops_; }
  const OpRegistry& ops() const { return ops_; }

 protected:
  // Call from the constructor only. DEVICE non-null; the plugin owns it.
  Device& add_device(std::unique_ptr<Device> device) {
    devices_.push_back(std::move(device));
    return *devices_.back();
  }

 private:
  std::vector<std::unique_ptr<Device>> devices_;
  OpRegistry ops_;
};

}  // namespace hal::sdk

// The C entries; after Plugin, which they use (detail/*_entries.hpp that
// need Plugin include this header before their own guard for that reason).
#include "hal/sdk/detail/entry.hpp"

// Defines the plugin's one exported symbol. PLUGIN_CLASS derives from
// hal::sdk::Plugin and has a constructor taking const hal::sdk::Options&.
// NAME: [a-z0-9_]+, unique among plugins. Use once per shared object.
#define HAL_SDK_PLUGIN(PLUGIN_CLASS, NAME, VENDOR, VERSION)                                   \
  extern "C" HAL_EXPORT hal_status_t* hal_plugin_entry(const hal_host_api_t* host,            \
                                                       const hal_plugin_api_t** out_api) {    \
    return ::hal::sdk::detail::entry<PLUGIN_CLASS>(host, out_api, NAME, VENDOR, VERSION);     \
  }

#endif  // HAL_SDK_PLUGIN_HPP_
