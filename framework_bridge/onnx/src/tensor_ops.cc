// Tensor operators composed from catalog ops.
#include <string>
#include <vector>

#include "converters.hpp"

namespace hal::onnx::detail {

const std::vector<OpRule>& tensor_rows() {
  static const std::vector<OpRule> rows = {};
  return rows;
}

}  // namespace hal::onnx::detail
