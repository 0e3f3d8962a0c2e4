// HAL C++ SDK: the catalog's shape rules. Each op in sdk/catalog/ops/*.toml
// names a rule (`shape = "broadcast"`); the generated catalog points at
// hal::sdk::shape_rules::<rule>, so a rule the catalog names but nobody wrote
// is a compile error. A rule fills the outputs' shapes (their dtypes are
// preset from the catalog's dtype rules) or throws INVALID_ARGUMENT naming
// the op, the argument and the values. Rules read attributes by catalog
// position through the generated accessors. One header per op group.
#ifndef HAL_SDK_OP_SHAPES_HPP_
#define HAL_SDK_OP_SHAPES_HPP_

#include "hal/sdk/shapes/common.hpp"
#include "hal/sdk/shapes/data.hpp"
#include "hal/sdk/shapes/elementwise.hpp"
#include "hal/sdk/shapes/index.hpp"
#include "hal/sdk/shapes/linalg.hpp"
#include "hal/sdk/shapes/nn.hpp"
#include "hal/sdk/shapes/random.hpp"
#include "hal/sdk/shapes/reduction.hpp"
#include "hal/sdk/shapes/transformer.hpp"

#endif  // HAL_SDK_OP_SHAPES_HPP_
