// HAL ONNX front end: which ONNX operators the loader translates, read from
// the mapping table itself (for docs/onnx.md, the node-test sweep and tools,
// so the list never drifts from the code).
#ifndef HAL_ONNX_OPERATORS_HPP_
#define HAL_ONNX_OPERATORS_HPP_

#include <string>
#include <vector>

namespace hal::onnx {

// One row of the ONNX -> catalog table (ai.onnx domain). Copyable value type.
struct OperatorSupport {
  std::string op_type;      // "Reshape"
  int min_opset = 0;        // the default-domain opsets the row translates (inclusive; from 7 to
  int max_opset = 0;        //   the newest the pinned onnx knows): those where the operator's
                            //   version in effect is one the row takes
  std::string catalog_ops;  // what it becomes: "reshape", "linear|addmm|mm" (one of), "gt+mul+where" (all);
                            // "" for ops resolved at load (Constant, Shape, Identity)
  std::string limits;       // what is not supported ("" for nothing)
};

// Every row, in table order. Thread-safe; never throws (but bad_alloc).
std::vector<OperatorSupport> supported_operators();

}  // namespace hal::onnx

#endif  // HAL_ONNX_OPERATORS_HPP_
