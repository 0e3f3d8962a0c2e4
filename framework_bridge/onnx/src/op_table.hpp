// The ONNX -> catalog mapping table: one row per ONNX op_type and opset
// range, naming the catalog op(s) the node becomes and the converter that
// maps its inputs and attributes (composite ONNX ops expand into several
// catalog ops here; shape arithmetic known at load folds here). docs/onnx.md
// lists the rows (limits included).
#ifndef HAL_ONNX_SRC_OP_TABLE_HPP_
#define HAL_ONNX_SRC_OP_TABLE_HPP_

#include <string>
#include <vector>

#include "translator.hpp"

namespace hal::onnx::detail {

struct OpRule;
// Translates the translator's current node (already checked against RULE's
// opset range): reads its inputs, emits catalog nodes, binds its outputs.
// Throws hal::Error (UNIMPLEMENTED naming the node and the missing piece).
using ConvertFn = void (*)(Translator& t, const OpRule& rule);

struct OpRule {
  const char* op_type;    // ONNX op_type in the default domain
  int min_opset;          // first and last default-domain opset the row
  int max_opset;          //   translates (inclusive)
  const char* catalog;    // the catalog op(s) it becomes ("add"; "where+gt+mul")
  ConvertFn convert;      // nullptr: one CATALOG node, inputs in order, no attributes
  const char* limits;     // what the row does not support ("" for nothing)
};

// The table (static storage, thread-safe).
const std::vector<OpRule>& op_table();
// The row for OP_TYPE at OPSET, or nullptr.
const OpRule* find_rule(const std::string& op_type, int64_t opset);
// Translates the translator's current node through the table; UNIMPLEMENTED
// naming node, op_type and opset when no row covers it.
void translate_node(Translator& t);

}  // namespace hal::onnx::detail

#endif  // HAL_ONNX_SRC_OP_TABLE_HPP_
