// Helpers the op table's converters share across files (op_table.cc and the
// per-family converter files: quantize.cc, recurrent.cc, ...). Each takes the
// translator of the node being converted; errors are hal::Error naming that
// node (Translator::invalid / unimplemented). Internal to hal_onnx.
#ifndef HAL_ONNX_SRC_CONVERTERS_HPP_
#define HAL_ONNX_SRC_CONVERTERS_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "op_table.hpp"
#include "translator.hpp"

namespace hal::onnx::detail {

// Axis AXIS of a rank-RANK tensor, negative counting from the end;
// INVALID_ARGUMENT naming WHAT when out of range.
int64_t norm_axis(Translator& t, int64_t axis, size_t rank, const char* what = "axis");
bool is_float(hal_dtype_e dt);
// A 0-d constant of dtype DT holding X (16-bit floats: a float32 constant,
// which does not promote a dimensioned operand).
Graph::Value scalar(Translator& t, hal_dtype_e dt, double x);
// A float32 constant of SHAPE holding VALUES.
Graph::Value float_constant(Translator& t, const std::vector<int64_t>& shape, const std::vector<float>& values);
// V in dtype DT (a copy when it differs).
Graph::Value as_dtype(Translator& t, Graph::Value v, hal_dtype_e dt);
// X with its dims in ORDER (X itself for the identity).
Graph::Value permuted(Translator& t, Graph::Value x, const std::vector<size_t>& order);
// A 2-D V transposed.
Graph::Value transpose2d(Translator& t, Graph::Value v);
// A reshape of V to OUT (symbolic dims handled as Reshape does).
Graph::Value reshape_to(Translator& t, Graph::Value v, const std::vector<int64_t>& out);
// V's elements [BEGIN, size - END) along AXIS.
Graph::Value crop(Translator& t, Graph::Value v, int64_t axis, int64_t begin, int64_t end);
// Element I of V along AXIS, the axis dropped (an index_select and a reshape).
Graph::Value take(Translator& t, Graph::Value v, int64_t axis, int64_t i);
// Attribute NAME (N ints) or N times FALLBACK; INVALID_ARGUMENT naming NAME
// when it has another count (OF names what the N are).
std::vector<int64_t> ints_or(Translator& t, const char* name, size_t n, int64_t fallback, const char* of = "spatial dims");
// The element count of SHAPE (every dim concrete).
inline int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
// Numpy broadcasting of two shapes whose dims may be symbols.
std::vector<int64_t> broadcast(Translator& t, const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// Conv's / pooling's pads over input 0's spatial dims, begin values then end
// values (the attribute, or what auto_pad gives).
std::vector<int64_t> conv_pads(Translator& t, size_t spatial, const std::vector<int64_t>& kernel,
                               const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations);
// A (non-transposed) Conv of X by WEIGHT (+ BIAS when valid) with the node's
// attributes (strides, pads, auto_pad, dilations, group): 1-D and 2-D.
Graph::Value conv_forward(Translator& t, Graph::Value x, Graph::Value weight, Graph::Value bias);

// Translates subgraph G (an If branch, a Loop / Scan / SequenceMap body)
// with its inputs bound to INPUTS; returns its outputs. Names it defines
// are forgotten afterwards and the outer node restored; CONTEXT starts the
// messages of its nodes ("in the body of node 3 ..., iteration 2: ").
std::vector<Slot> run_subgraph(Translator& t, const ::onnx::GraphProto& g, const std::vector<Slot>& inputs,
                               const std::string& context);

// Rows of the per-family converter files, appended to op_table.cc's.
const std::vector<OpRule>& quantize_rows();
const std::vector<OpRule>& recurrent_rows();
const std::vector<OpRule>& tensor_rows();
const std::vector<OpRule>& control_flow_rows();
const std::vector<OpRule>& sequence_rows();

}  // namespace hal::onnx::detail

#endif  // HAL_ONNX_SRC_CONVERTERS_HPP_
