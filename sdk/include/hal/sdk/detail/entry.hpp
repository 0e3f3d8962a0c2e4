// HAL C++ SDK, internal: the entry point behind HAL_SDK_PLUGIN, plugin
// create/destroy, and the plugin table. The operator and graph tables are
// hooks (OpTable, GraphTable) completed by hal/sdk/ops.hpp, so a plugin
// without them never includes the op catalog.
// Before the guard: plugin.hpp includes this header after defining Plugin.
#include "hal/sdk/plugin.hpp"

#ifndef HAL_SDK_DETAIL_ENTRY_HPP_
#define HAL_SDK_DETAIL_ENTRY_HPP_

#include <memory>
#include <string>

#include "hal/common/extension.hpp"
#include "hal/hal.h"
#include "hal/sdk/detail/call.hpp"
#include "hal/sdk/detail/device_entries.hpp"
#include "hal/sdk/detail/memory_entries.hpp"
#include "hal/sdk/detail/registry.hpp"
#include "hal/sdk/detail/stream_entries.hpp"
#include "hal/sdk/op_registry.hpp"
#include "hal/sdk/options.hpp"

namespace hal::sdk::detail {

template <class P>
hal_status_t* plugin_create(const hal_plugin_create_args_t* args, hal_plugin_t** out) {
  return call("create", [&] {
    if (args == nullptr || out == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, "args or out_plugin is NULL");
    if (!HAL_STRUCT_HAS_FIELD(args, hal_plugin_create_args_t, option_count))
      fail(HAL_STATUS_ABI_MISMATCH, "create args struct_size ", args->struct_size, " is too small");
    common::require_well_formed_extension_chain(args->next, "hal_plugin_create_args_t.next");
    Options options(args->options, args->option_count);
    auto plugin = std::make_unique<P>(options);
    if constexpr ((P::kInterfaces & HAL_CAPABILITY_OPERATOR) == 0) {
      // Registered kernels the core could never reach: refuse the disagreement
      // at load (hal-info shows why) instead of loading without operators.
      const OpRegistry& ops = static_cast<const Plugin&>(*plugin).ops();
      if (ops.size() > 0) {
        std::string names;
        for (size_t i = 0; i < ops.size() && i < 4; ++i) names += std::string(i ? ", " : "") + ops.at(i).schema->name;
        if (ops.size() > 4) names += ", ...";
        fail(HAL_STATUS_FAILED_PRECONDITION, "the plugin registers ", ops.size(), " op(s) (", names,
             ") but does not declare the operator interface, so the core could never launch them: add "
             "HAL_CAPABILITY_OPERATOR to the plugin class's kInterfaces and include \"hal/sdk/ops.hpp\" in the "
             "file that has HAL_SDK_PLUGIN");
      }
    }
    registry().add(static_cast<Plugin*>(plugin.get()), Kind::kPlugin);
    for (size_t i = 0; i < plugin->device_count(); ++i)
      registry().add(&plugin->device(i), Kind::kDevice, static_cast<Plugin*>(plugin.get()));
    *out = reinterpret_cast<hal_plugin_t*>(static_cast<Plugin*>(plugin.release()));
  });
}

inline void plugin_destroy(hal_plugin_t* p) {
  hal_status_t* s = call("destroy", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    for (size_t i = 0; i < plugin->device_count(); ++i)
      registry().remove(&plugin->device(i), Kind::kDevice);
    registry().remove(plugin, Kind::kPlugin);
    delete plugin;
  });
  if (s != nullptr) s->destroy(s);  // destroy has no status to report through
}

// The op, graph and collective tables of plugin P: nullptr unless
// P::kInterfaces names them. The `true` cases are partial specializations
// that hal/sdk/ops.hpp (op, graph) and hal/sdk/collectives.hpp complete;
// without that header the primary template is used and its static_assert
// says which header the file with HAL_SDK_PLUGIN must include.
template <class P, bool = (P::kInterfaces & HAL_CAPABILITY_OPERATOR) != 0>
struct OpTable {
  static const hal_op_api_t* get() {
    static_assert((P::kInterfaces & HAL_CAPABILITY_OPERATOR) == 0,
                  "HAL_SDK_PLUGIN: the plugin declares HAL_CAPABILITY_OPERATOR in kInterfaces, so the file with "
                  "HAL_SDK_PLUGIN must #include \"hal/sdk/ops.hpp\" (the op catalog and the operator table)");
    return nullptr;
  }
};
template <class P, bool = (P::kInterfaces & HAL_CAPABILITY_GRAPH) != 0>
struct GraphTable {
  static const hal_graph_api_t* get() {
    static_assert((P::kInterfaces & HAL_CAPABILITY_GRAPH) == 0,
                  "HAL_SDK_PLUGIN: the plugin declares HAL_CAPABILITY_GRAPH in kInterfaces, so the file with "
                  "HAL_SDK_PLUGIN must #include \"hal/sdk/ops.hpp\" (the graph table)");
    return nullptr;
  }
};
template <class P, bool = (P::kInterfaces & HAL_CAPABILITY_COLLECTIVE) != 0>
struct CollectiveTable {
  static const hal_collective_api_t* get() {
    static_assert((P::kInterfaces & HAL_CAPABILITY_COLLECTIVE) == 0,
                  "HAL_SDK_PLUGIN: the plugin declares HAL_CAPABILITY_COLLECTIVE in kInterfaces, so the file with "
                  "HAL_SDK_PLUGIN must #include \"hal/sdk/collectives.hpp\" (the collective table)");
    return nullptr;
  }
};

template <class P>
hal_status_t* entry(const hal_host_api_t* host, const hal_plugin_api_t** out_api,
                    const char* name, const char* vendor, const char* version) noexcept {
  static const hal_plugin_api_t api = {sizeof(hal_plugin_api_t),
                                       HAL_ABI_VERSION_MAJOR,
                                       HAL_ABI_VERSION_MINOR,
                                       name,
                                       vendor,
                                       version,
                                       &plugin_create<P>,
                                       &plugin_destroy,
                                       &kDeviceApi,
                                       &kMemoryApi,
                                       (P::kInterfaces & HAL_CAPABILITY_STREAM) ? &kStreamApi : nullptr,
                                       CollectiveTable<P>::get(),
                                       OpTable<P>::get(),
                                       GraphTable<P>::get(),
                                       nullptr};
  info().name = name;
  info().version = version;
  info().interfaces = P::kInterfaces;
  return call("hal_plugin_entry", [&] {
    if (host == nullptr || out_api == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, "host or out_api is NULL");
    if (host->struct_size < HAL_STRUCT_SIZE_TO(hal_host_api_t, abi_version_minor))
      fail(HAL_STATUS_ABI_MISMATCH, "host api struct_size ", host->struct_size, " is too small");
    if (host->abi_version_major != HAL_ABI_VERSION_MAJOR)
      fail(HAL_STATUS_ABI_MISMATCH, "host ABI major ", host->abi_version_major,
           " but this plugin was built for major ", HAL_ABI_VERSION_MAJOR);
    if (host->abi_version_minor >= 3 && HAL_STRUCT_HAS_FIELD(host, hal_host_api_t, next))
      common::require_well_formed_extension_chain(host->next, "hal_host_api_t.next");
    info().host = host;
    *out_api = &api;
  });
}

}  // namespace hal::sdk::detail

#endif  // HAL_SDK_DETAIL_ENTRY_HPP_
