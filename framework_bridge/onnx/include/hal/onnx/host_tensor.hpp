// HAL ONNX front end: tensors in host memory, as sessions take and return
// them (see session.hpp), and the ONNX <-> HAL dtype correspondence.
#ifndef HAL_ONNX_HOST_TENSOR_HPP_
#define HAL_ONNX_HOST_TENSOR_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "hal/types.h"

namespace hal::onnx {

// A tensor in host memory the session returns: row-major contiguous, DATA
// holds exactly numel * dtype size bytes. Owns its bytes; copyable.
struct HostTensor {
  hal_dtype_e dtype = HAL_DTYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// A tensor in the caller's host memory: row-major contiguous, numel * dtype
// size bytes at DATA. Does not own DATA, which is only read during the call
// it is passed to (nullptr only when numel is 0).
struct HostTensorRef {
  hal_dtype_e dtype = HAL_DTYPE_INVALID;
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

// The HAL dtype of ONNX TensorProto.DataType ELEM_TYPE; HAL_DTYPE_INVALID
// for types HAL has no dtype for (string, float8, 4-bit ints, unknown).
hal_dtype_e dtype_from_onnx(int32_t elem_type) noexcept;
// The ONNX TensorProto.DataType of DTYPE; 0 (UNDEFINED) for none.
int32_t dtype_to_onnx(hal_dtype_e dtype) noexcept;
// ONNX's name of ELEM_TYPE ("FLOAT", "INT64", ...; "type 99" when unknown).
std::string onnx_dtype_name(int32_t elem_type);

}  // namespace hal::onnx

#endif  // HAL_ONNX_HOST_TENSOR_HPP_
