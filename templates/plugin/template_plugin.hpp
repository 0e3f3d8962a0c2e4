// What the template plugin's two source files share: template_plugin.cc
// (the device, its memory and the plugin's constructor) and template_ops.cc
// (the op kernels and the entry point). Needs hal/sdk/plugin.hpp only, so
// the memory part compiles without the op catalog.
#ifndef HAL_TEMPLATE_PLUGIN_HPP_
#define HAL_TEMPLATE_PLUGIN_HPP_

#include <cstdint>

#include "hal/sdk/plugin.hpp"

namespace hal_template {

// TODO(vendor): your plugin's version; bump it with every release.
inline constexpr const char* kPluginVersion = "0.1.0";

// The plugin: owns the devices and the op registry. Created once per load
// by the SDK (HAL_SDK_PLUGIN in template_ops.cc); the core calls into it
// from any thread, the SDK validating every handle first.
class TemplatePlugin final : public hal::sdk::Plugin {
 public:
  // The interfaces this plugin implements, declared once: the SDK hands the
  // matching C tables to the core and reports them as every device's
  // capabilities. Operators (template_ops.cc) on top of device and memory.
  // TODO(vendor): add HAL_CAPABILITY_STREAM once create_stream() works,
  // HAL_CAPABILITY_GRAPH with graph compile.
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | HAL_CAPABILITY_OPERATOR;

  // Reads OPTIONS (hal.toml's [plugin.options]), adds the devices and
  // registers the kernels; throws (hal::sdk::fail) to refuse the load.
  // Defined in template_plugin.cc.
  explicit TemplatePlugin(const hal::sdk::Options& options);
};

// Throws UNIMPLEMENTED unless STREAM is nullptr: this device has no streams,
// so every copy and kernel runs before returning (template_plugin.cc).
void require_no_stream(const hal::sdk::Stream* stream);

// Registers the plugin's op kernels in OPS (template_ops.cc). Called once,
// from the plugin's constructor; throws (hal::sdk::fail) on a duplicate op.
void register_template_ops(hal::sdk::OpRegistry& ops);

}  // namespace hal_template

#endif  // HAL_TEMPLATE_PLUGIN_HPP_
