// ONNX TensorProto (initializers, Constant values) -> host bytes.
#ifndef HAL_ONNX_SRC_TENSOR_PROTO_HPP_
#define HAL_ONNX_SRC_TENSOR_PROTO_HPP_

#include <string>

#include "hal/onnx/host_tensor.hpp"
#include "onnx/onnx_pb.h"

namespace hal::onnx::detail {

// The bytes of TENSOR as a row-major HostTensor, read from whichever field
// holds them: raw_data, the typed field of its data type (float_data,
// int32_data for the <= 32-bit integer/bool/16-bit float types, int64_data,
// double_data, uint64_data), or external data under EXTERNAL_ROOT (see
// external_data.hpp; "" refuses external data). WHAT names the tensor in
// messages ("initializer 'fc.weight'"). Throws hal::Error INVALID_ARGUMENT
// for a data type HAL has none for (naming it), a negative dim, or a byte /
// element count that does not match the shape (naming both), and the
// errors of read_external_data.
HostTensor tensor_from_proto(const ::onnx::TensorProto& tensor, const std::string& external_root,
                             const std::string& what);

// The element count of SHAPE; throws INVALID_ARGUMENT naming WHAT for a
// negative dim or a count that overflows int64.
int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what);
// "[2, 3]" (symbolic dims as their negative numbers).
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace hal::onnx::detail

#endif  // HAL_ONNX_SRC_TENSOR_PROTO_HPP_
