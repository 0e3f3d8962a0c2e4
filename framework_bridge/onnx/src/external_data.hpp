// Reading an initializer's external data (TensorProto.data_location =
// EXTERNAL) from a file under the model's folder, refusing paths that leave
// it.
#ifndef HAL_ONNX_SRC_EXTERNAL_DATA_HPP_
#define HAL_ONNX_SRC_EXTERNAL_DATA_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hal::onnx::detail {

// Reads LENGTH bytes (all bytes from OFFSET to the end when absent) at
// OFFSET of the file LOCATION names relative to ROOT, for initializer
// TENSOR (named in every message). Throws hal::Error:
//   INVALID_ARGUMENT  ROOT is empty (external data not allowed), LOCATION is
//                     empty or absolute, has a ".." component, or resolves
//                     (symlinks followed) outside ROOT; the file is shorter
//                     than OFFSET + LENGTH, or not a regular file.
//   NOT_FOUND         the file does not exist.
std::vector<uint8_t> read_external_data(const std::string& root, const std::string& location, uint64_t offset,
                                        std::optional<uint64_t> length, const std::string& tensor);

}  // namespace hal::onnx::detail

#endif  // HAL_ONNX_SRC_EXTERNAL_DATA_HPP_
