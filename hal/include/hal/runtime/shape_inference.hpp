// HAL runtime: dtype and shape inference from the op catalog's rules, for
// graphs whose dims may be symbolic.
//
//   std::vector<const hal::ValueSpec*> in = {&x, &w};         // x: [s1, 4], w: [4, 8]
//   auto out = hal::infer_node("matmul", in, {}, 0);          // [{f32, [s1, 8]}]
//   auto shapes = hal::infer_shapes(graph, {{5, 4}});         // every value, s1 = 5
//
// The rules are the catalog's own (sdk/catalog/ops/*.toml, the C++ rules in
// hal/common/shapes/), the same code plugins run to check a launch, so a
// graph built from inferred specs is one every plugin accepts.
//
// SYMBOLIC DIMS (a dim < 0; the same number is the same size everywhere in
// a graph). A rule only computes with numbers, so a node with symbolic input
// dims is inferred twice: once with each symbol replaced by a distinct large
// prime (run A), once by other distinct large primes (run B). For each output
// dim:
//   - the same number in both runs: that concrete size (it does not depend
//     on any symbol, e.g. a matmul's N, or min(3, s) for a slice of 3);
//   - symbol k's prime in both runs: symbol k (it tracks the symbol: a
//     batch dim carried through, a broadcast with 1);
//   - anything else: a fresh symbol (a size derived from symbols: s1 + s2
//     for a concat, s - 1, s * 4, a conv's output size), made by the
//     caller's InferContext::fresh_symbol (hal::Graph names them
//     "node<N>_d<D>", "node<N>_o<I>_d<D>" for output I > 0).
// A fresh symbol is always sound: infer_shapes re-runs every rule with the
// bound, concrete sizes. Two assumptions are made: a symbol is large (a rule
// like min(3, s) gives 3), and distinct symbols are distinct sizes. When a
// rule refuses the distinct primes and the node has several symbols (e.g. a
// broadcast of [s1] with [s2], exported with two names for one size), it is
// run again with every symbol the same prime; an output tracking that prime
// is then the node's first symbol, and infer_shapes checks at run time that
// the sizes really agree. A rule that refuses even that (a split whose
// `sizes` must sum to a symbolic dim, a broadcast of a symbol against a
// concrete size > 1) is an INVALID_ARGUMENT naming the op and the symbols:
// give that dim concretely.
#ifndef HAL_RUNTIME_SHAPE_INFERENCE_HPP_
#define HAL_RUNTIME_SHAPE_INFERENCE_HPP_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "hal/runtime/op.hpp"

namespace hal {

class Graph;

// The dtype and shape of a value. A dim < 0 is a symbol: the same negative
// number is the same size everywhere in the graph, bound at run time by the
// graph's input and output tensors.
struct ValueSpec {
  hal_dtype_e dtype = HAL_DTYPE_FLOAT32;
  std::vector<int64_t> shape;

  bool operator==(const ValueSpec& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const ValueSpec& o) const { return !(*this == o); }
};

// How infer_node names things; every member may be left empty.
struct InferContext {
  // Prefixes every message ("node 3 ('matmul')"); empty: the op name.
  std::string label;
  // A new symbol for dim DIM of output OUTPUT (see SYMBOLIC DIMS above).
  // Empty: numbers below every symbol of the inputs (-k-1, -k-2, ... for a
  // lowest input symbol -k), distinct within the call only.
  std::function<int64_t(size_t output, size_t dim)> fresh_symbol;
  // The name of a symbol, for messages. Empty: "s<-symbol>".
  std::function<std::string(int64_t symbol)> symbol_name;
};

// The outputs (dtype and shape) catalog op OP gives for INPUTS (nullptr = an
// absent optional input; the vector and specs are only read during the call)
// and ATTRS (checked against the catalog: kinds, choices, required ones).
// OUTPUT_COUNT 0 = the catalog's count (an op with a variadic output, like
// split, needs it given). Thread-safe (CTX's callbacks are called on this
// thread). Throws hal::Error: UNIMPLEMENTED when OP is not in the catalog;
// UNSUPPORTED_DTYPE for an input dtype the catalog does not allow;
// INVALID_ARGUMENT for wrong counts, attributes or shapes, naming the op (or
// CTX.label), the argument and the sizes (and, for symbolic inputs, which
// primes stood for which symbols).
// GIVEN (empty, or one entry per output; nullptr = not given) are the
// caller's declared outputs: the rules of ops whose output shape or dtype is
// the caller's choice (copy: a broadcast target or a cast; fill) read them
// (and fail without them); other rules ignore them.
std::vector<ValueSpec> infer_node(const std::string& op, const std::vector<const ValueSpec*>& inputs,
                                  const std::vector<Attr>& attrs, size_t output_count,
                                  const InferContext& ctx = {}, const std::vector<const ValueSpec*>& given = {});

// Every value's concrete shape (indexed by value id) given the graph
// inputs' concrete shapes, in graph input order: binds each symbol to the
// size it has in the inputs, then re-runs every node's rule in node order
// with concrete sizes, binding symbols that first appear in a node's
// declared outputs and checking the declared ones. Values read by no node
// and produced by none keep their declared shape with bound symbols
// replaced (a dim still < 0 is a symbol nothing bound). Pure; thread-safe for
// concurrent readers of G. Throws hal::Error INVALID_ARGUMENT naming the
// input or node and the mismatch: a count or rank that differs, a negative
// size, a concrete dim that differs, a symbol bound to two sizes ("symbol
// 'seq' is 7 (graph input 0 ('ids') dim 1) but graph input 1 ('mask') dim 1
// is 9"), a node reading a value not computed before it, or a rule's error
// (prefixed "node 4 ('matmul')").
std::vector<std::vector<int64_t>> infer_shapes(const Graph& g, const std::vector<std::vector<int64_t>>& input_shapes);

}  // namespace hal

#endif  // HAL_RUNTIME_SHAPE_INFERENCE_HPP_
