// HAL C++ SDK: what a plugin with operators or graph compile adds to
// hal/sdk/plugin.hpp: the op catalog (hal::sdk::op::<op>, catalog::kOps),
// and the operator and graph tables. Include it in the TU that uses
// HAL_SDK_PLUGIN when the plugin's kInterfaces has HAL_CAPABILITY_OPERATOR
// or HAL_CAPABILITY_GRAPH (without it that TU does not compile); kernels
// need only hal/sdk/op_catalog.hpp. Header-only.
#ifndef HAL_SDK_OPS_HPP_
#define HAL_SDK_OPS_HPP_

#include "hal/sdk/detail/graph_entries.hpp"
#include "hal/sdk/detail/op_entries.hpp"
#include "hal/sdk/graph.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/op_registry.hpp"
#include "hal/sdk/plugin.hpp"

#endif  // HAL_SDK_OPS_HPP_
