// Shape rules of the "nn" group (normalization, softmax and losses).
#ifndef HAL_SDK_SHAPES_NN_HPP_
#define HAL_SDK_SHAPES_NN_HPP_

#include "hal/sdk/shapes/common.hpp"

namespace hal::sdk::shape_rules {}  // namespace hal::sdk::shape_rules

#endif  // HAL_SDK_SHAPES_NN_HPP_
