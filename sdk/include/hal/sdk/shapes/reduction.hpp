// Shape rules of the "reduction" group (reductions and scans).
#ifndef HAL_SDK_SHAPES_REDUCTION_HPP_
#define HAL_SDK_SHAPES_REDUCTION_HPP_

#include "hal/sdk/shapes/common.hpp"

namespace hal::sdk::shape_rules {}  // namespace hal::sdk::shape_rules

#endif  // HAL_SDK_SHAPES_REDUCTION_HPP_
