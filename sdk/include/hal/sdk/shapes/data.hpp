// Shape rules of the "data" group (data movement and creation).
#ifndef HAL_SDK_SHAPES_DATA_HPP_
#define HAL_SDK_SHAPES_DATA_HPP_

#include "hal/sdk/shapes/common.hpp"

namespace hal::sdk::shape_rules {}  // namespace hal::sdk::shape_rules

#endif  // HAL_SDK_SHAPES_DATA_HPP_
