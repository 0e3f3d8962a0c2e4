// Recurrent operators (RNN, GRU, LSTM) unrolled over the sequence.
#include <string>
#include <vector>

#include "converters.hpp"

namespace hal::onnx::detail {

const std::vector<OpRule>& recurrent_rows() {
  static const std::vector<OpRule> rows = {};
  return rows;
}

}  // namespace hal::onnx::detail
