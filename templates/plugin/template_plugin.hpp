// What the template plugin's two source files share: template_plugin.cc
// (plugin, device, memory) and template_ops.cc (the op kernels). Only
// forward declarations, so the memory part compiles without the op catalog.
#ifndef HAL_TEMPLATE_PLUGIN_HPP_
#define HAL_TEMPLATE_PLUGIN_HPP_

namespace hal::sdk {
class OpRegistry;
class Stream;
}  // namespace hal::sdk

namespace hal_template {

// Throws UNIMPLEMENTED unless STREAM is nullptr: this device has no streams,
// so every copy and kernel runs before returning (template_plugin.cc).
void require_no_stream(const hal::sdk::Stream* stream);

// Registers the plugin's op kernels in OPS (template_ops.cc). Called once,
// from the plugin's constructor; throws (hal::sdk::fail) on a duplicate op.
void register_template_ops(hal::sdk::OpRegistry& ops);

}  // namespace hal_template

#endif  // HAL_TEMPLATE_PLUGIN_HPP_
