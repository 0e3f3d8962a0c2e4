// HAL shared layer (hal::common): the catalog's shape rules. Each op in sdk/catalog/ops/*.toml
// names a rule (`shape = "broadcast"`); the generated catalog points at
// hal::common::shape_rules::<rule>, so a rule the catalog names but nobody wrote
// is a compile error. A rule fills the outputs' shapes (their dtypes are
// preset from the catalog's dtype rules) or throws INVALID_ARGUMENT naming
// the op, the argument and the values. Rules read attributes by catalog
// position through the generated accessors. One header per op group.
#ifndef HAL_COMMON_OP_SHAPES_HPP_
#define HAL_COMMON_OP_SHAPES_HPP_

#include "hal/common/shapes/common.hpp"
#include "hal/common/shapes/data.hpp"
#include "hal/common/shapes/elementwise.hpp"
#include "hal/common/shapes/factorization.hpp"
#include "hal/common/shapes/index.hpp"
#include "hal/common/shapes/linalg.hpp"
#include "hal/common/shapes/nn.hpp"
#include "hal/common/shapes/random.hpp"
#include "hal/common/shapes/reduction.hpp"
#include "hal/common/shapes/rnn.hpp"
#include "hal/common/shapes/llm.hpp"
#include "hal/common/shapes/transformer.hpp"

#endif  // HAL_COMMON_OP_SHAPES_HPP_
