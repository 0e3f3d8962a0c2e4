// Shape rules of the "linalg" group (matrix multiplication, convolution and pooling).
#ifndef HAL_SDK_SHAPES_LINALG_HPP_
#define HAL_SDK_SHAPES_LINALG_HPP_

#include "hal/sdk/shapes/common.hpp"

namespace hal::sdk::shape_rules {}  // namespace hal::sdk::shape_rules

#endif  // HAL_SDK_SHAPES_LINALG_HPP_
