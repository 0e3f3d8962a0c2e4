// Shape rules of the "random" group (random numbers).
#ifndef HAL_SDK_SHAPES_RANDOM_HPP_
#define HAL_SDK_SHAPES_RANDOM_HPP_

#include "hal/sdk/shapes/common.hpp"

namespace hal::sdk::shape_rules {}  // namespace hal::sdk::shape_rules

#endif  // HAL_SDK_SHAPES_RANDOM_HPP_
