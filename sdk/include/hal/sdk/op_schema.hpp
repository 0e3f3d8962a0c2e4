// HAL C++ SDK: the op-call types under their SDK names. The types live in
// the shared layer (hal/common/op_schema.hpp, hal/common/dtype.hpp) because
// the core reads them too; plugin code names them hal::sdk::OpCall,
// hal::sdk::Tensor, hal::sdk::dtype_name, ... Header-only.
#ifndef HAL_SDK_OP_SCHEMA_HPP_
#define HAL_SDK_OP_SCHEMA_HPP_

#include "hal/common/dtype.hpp"
#include "hal/common/op_schema.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk {

using common::dtype_size;
using common::dtype_name;
using common::is_floating;
using common::is_integral;
using common::dtype_mask_names;
using common::promote_types;

using common::AttrKind;
using common::attr_kind_name;
using common::OutDtype;
using common::Alias;
using common::TensorSpec;
using common::AttrSpec;
using common::ShapeFn;
using common::OpSchema;
using common::Scalar;
using common::AttrValue;
using common::TensorMeta;
using common::shape_string;
using common::Tensor;
using common::TensorList;
using common::OpCall;

}  // namespace hal::sdk

#endif  // HAL_SDK_OP_SCHEMA_HPP_
