// HAL C++ SDK: the catalog's shape rules (hal/common/op_shapes.hpp) under
// their SDK name, hal::sdk::shape_rules (conv_geometry, pool_geometry,
// normalize_dim, ... for kernels that need the same geometry). Header-only.
#ifndef HAL_SDK_OP_SHAPES_HPP_
#define HAL_SDK_OP_SHAPES_HPP_

#include "hal/common/op_shapes.hpp"
#include "hal/sdk/op_schema.hpp"

namespace hal::sdk {
namespace shape_rules = common::shape_rules;
}  // namespace hal::sdk

#endif  // HAL_SDK_OP_SHAPES_HPP_
