// Shape rules of the "index" group (indexing, gathering, scattering and sorting).
#ifndef HAL_SDK_SHAPES_INDEX_HPP_
#define HAL_SDK_SHAPES_INDEX_HPP_

#include "hal/sdk/shapes/common.hpp"

namespace hal::sdk::shape_rules {}  // namespace hal::sdk::shape_rules

#endif  // HAL_SDK_SHAPES_INDEX_HPP_
