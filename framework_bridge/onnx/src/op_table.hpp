// The ONNX -> catalog mapping table: one row per ONNX op_type and operator
// version range (as onnxruntime registers kernels), naming the catalog op(s) the node becomes and the converter that
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
// version range; converters branch on t.opset() where versions differ): reads its inputs, emits catalog nodes, binds its outputs.
// Throws hal::Error (UNIMPLEMENTED naming the node and the missing piece).
using ConvertFn = void (*)(Translator& t, const OpRule& rule);

struct OpRule {
  const char* op_type;    // ONNX op_type in the default domain
  int min_version;        // first and last operator version (an opset at which the
  int max_version;        //   operator's schema changed) the row translates, inclusive
  const char* catalog;    // the catalog op(s) it becomes ("add"; "where+gt+mul")
  ConvertFn convert;      // nullptr: one CATALOG node, inputs in order, no attributes
  const char* limits;     // what the row does not support ("" for nothing)
};

// The oldest ai.onnx opset a model may import (its nodes are still checked
// against the rows' operator versions: Add before 7, with its legacy
// broadcast attribute, is refused by node), and the newest the table knows
// (the pinned onnx wheel's, op_versions.inc).
constexpr int kOldestOpset = 1;
int newest_known_opset();
// The version of OP_TYPE in effect at OPSET (the newest of its versions <=
// OPSET), or 0 when OP_TYPE is not an ai.onnx operator at OPSET.
int operator_version(const std::string& op_type, int64_t opset);
// The last opset at which OP_TYPE's version VERSION is in effect (the opset
// before its next version), or newest_known_opset().
int last_opset_of_version(const std::string& op_type, int version);

// The table (static storage, thread-safe).
const std::vector<OpRule>& op_table();
// The row for OP_TYPE at OPSET (by the operator version in effect there), or nullptr.
const OpRule* find_rule(const std::string& op_type, int64_t opset);
// Translates the translator's current node through the table; UNIMPLEMENTED
// naming node, op_type and opset when no row covers it.
void translate_node(Translator& t);
// Translates G's nodes in order (translate_node each, in the default domain
// only); a subgraph's nodes see the names the translator defines so far.
void translate_graph(Translator& t, const ::onnx::GraphProto& g, int64_t opset);

}  // namespace hal::onnx::detail

#endif  // HAL_ONNX_SRC_OP_TABLE_HPP_
