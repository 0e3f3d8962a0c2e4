// Shape rules of the "transformer" group (attention and positional embeddings).
#ifndef HAL_SDK_SHAPES_TRANSFORMER_HPP_
#define HAL_SDK_SHAPES_TRANSFORMER_HPP_

#include "hal/sdk/shapes/common.hpp"

namespace hal::sdk::shape_rules {}  // namespace hal::sdk::shape_rules

#endif  // HAL_SDK_SHAPES_TRANSFORMER_HPP_
