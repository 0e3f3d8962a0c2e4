// HAL C++ SDK: the standard op catalog (generated hal/common/op_catalog.hpp)
// under its SDK names: hal::sdk::op::<op> (typed accessors, e.g.
// op::add::alpha(call)) and hal::sdk::catalog::kOps (every schema), plus a
// lookup by name. Only plugins with operators need this header (it pulls in
// the whole catalog and its shape rules). Header-only.
#ifndef HAL_SDK_OP_CATALOG_HPP_
#define HAL_SDK_OP_CATALOG_HPP_

#include "hal/common/op_catalog.hpp"
#include "hal/sdk/op_schema.hpp"
#include "hal/sdk/op_shapes.hpp"

namespace hal::sdk {

namespace catalog = common::catalog;
namespace op = common::op;

// The catalog schema named NAME (not NULL), or nullptr. Thread-safe; the
// schema has static storage.
using catalog::find_schema;

}  // namespace hal::sdk

#endif  // HAL_SDK_OP_CATALOG_HPP_
