// HAL runtime: the graph pipeline's passes (hal/graph/passes/) and the
// pipeline that runs them in order.
//
//   hal::PipelineOptions o;
//   o.supported = [&](const std::string& op) { return device_has(op); };
//   o.fold_device = device.get();
//   hal::Graph g2 = hal::run_pipeline(std::move(g), o);
//
// Every pass takes a graph verify() accepts and leaves one it accepts
// (value ids change: look values up by name or by graph input/output
// position afterwards). Graph inputs and outputs keep their order, dtypes,
// shapes and names. Passes are not thread-safe on one graph; distinct
// graphs may be processed concurrently.
//
// Not done here: layout adjustment. It needs a plugin-declared preferred
// layout (e.g. channels-last for convolutions), and the plugin ABI has no
// such declaration yet.
#ifndef HAL_RUNTIME_GRAPH_PASSES_HPP_
#define HAL_RUNTIME_GRAPH_PASSES_HPP_

#include <cstddef>
#include <functional>
#include <string>

#include "hal/runtime/device.hpp"
#include "hal/runtime/graph.hpp"

namespace hal {

// Removes the nodes no graph output depends on, then the values and
// constants nothing refers to. Returns the number of nodes removed.
size_t eliminate_dead_code(Graph& g);

// Merges nodes with the same op, the same inputs (value ids, after earlier
// merges), the same attributes (compared by name, type and value, in any
// order) and outputs of the same dtypes and shapes (symbols no graph input
// binds count as equal: they derive from the node's inputs) into the first:
// its outputs replace the later node's everywhere. (Shapes matter for ops
// whose outputs are declared, e.g. copies of one value to two targets.)
// Ops of the catalog's "random" group are never merged (two draws differ),
// nor nodes producing a graph output (outputs keep their values and names).
// Returns the number of nodes removed.
size_t eliminate_common_subexpressions(Graph& g);

// Removes each permute that permutes nothing: dims 0, 1, ..., or undoing
// the permute feeding it (permute(permute(x, p), q) with p[q[d]] == d, as
// a transposed matrix transposed back), its readers then reading the value
// it started from; and replaces a permute of a permute that does permute
// by one permute of the first one's input (dims composed: one copy, not
// two). A graph output is replaced only by a node's output that is not an
// output already (it keeps the output's place and name). Permutes feeding
// it stay (dead code removes them when nothing else reads them). Returns
// the number of permute nodes removed or replaced.
size_t fold_permutes(Graph& g);

// Replaces layer normalisation written out in elementwise ops and means (as
// ONNX exporters write it before opset 17: mean over trailing dims with
// keepdim, sub, pow by a constant 2, mean, add of a constant eps, sqrt,
// div, then optionally mul by a weight and add of a bias of shape
// normalized_shape) by one layer_norm node, when SUPPORTED (empty: every op)
// takes layer_norm, the normalised dims are concrete, the dtype is float32
// or float64, and no intermediate is read outside the pattern or is a graph
// output. Likewise GELU written out (no Gelu op before ONNX opset 20:
// mul(mul(x, add(erf(div(x, sqrt 2)), 1)), 0.5), operands of add and mul in
// either order, or x times 1/sqrt 2) becomes one gelu node when SUPPORTED
// takes gelu, and RMS normalisation written out (none before opset 23:
// x times rsqrt(mean(x², trailing dims, keepdim) + eps), or times the
// reciprocal of its sqrt, or divided by its sqrt; optionally times a weight
// of the normalised shape) one rms_norm node when SUPPORTED takes rms_norm.
// The result keeps its value's place and name. Returns the number of
// patterns replaced.
size_t fuse_patterns(Graph& g, const std::function<bool(const std::string& op)>& supported);

// Replaces each node whose inputs are all constants (or absent), whose op
// is not random and whose outputs are concrete, not graph outputs, and each
// at most MAX_BYTES, by constants holding its outputs, computed once on
// DEVICE: the node is compiled as a one-node graph (hal::compile), inputs
// are uploaded and outputs read back through hal::Buffer copies. Folded
// nodes feed later ones, so constant chains fold whole. A node DEVICE does
// not run (UNIMPLEMENTED, UNSUPPORTED_DTYPE) stays. Returns the number of
// nodes folded. Throws hal::Error when DEVICE fails otherwise on a node,
// prefixed "fold_constants: node 3 ('add')"; the graph then keeps the
// constants folded so far but none of the nodes is removed (still valid).
size_t fold_constants(Graph& g, Device& device, size_t max_bytes = size_t{64} << 20);

// Rewrites every node whose op SUPPORTED(op) rejects and which the
// decomposition table (hal/graph/passes/decompose.cc; docs/graph.md lists
// it) expresses in other catalog ops, each supported or itself decomposable;
// repeats on the new nodes. A rule applies only when its sub-graph gives the
// node's output dtypes and ranks exactly. Returns the number of nodes
// rewritten. The new nodes' shapes are inferred.
size_t decompose(Graph& g, const std::function<bool(const std::string& op)>& supported);

// The ops the decomposition table rewrites, sorted.
std::vector<std::string> decomposable_ops();

struct PipelineOptions {
  // Ops the target runs; empty = every op (no decomposition).
  std::function<bool(const std::string& op)> supported;
  // Where constants are folded; nullptr = no folding.
  Device* fold_device = nullptr;
  size_t fold_max_bytes = size_t{64} << 20;
  // Where each stage's dump() goes: DIR/<first 12 hex of the input graph's
  // hash>/<NN>_<stage>.txt. Empty = $HAL_GRAPH_DUMP_DIR; both empty = none.
  std::string dump_dir;
};

// verify -> decompose -> fold_constants -> fuse_patterns -> fold_permutes ->
// eliminate_common_subexpressions -> eliminate_dead_code -> verify, dumping
// each stage (00_input, 01_decompose, 02_fold_constants, 03_fuse_patterns,
// 04_fold_permutes, 05_cse, 06_dce). Throws what the stages
// throw (INVALID_ARGUMENT from verify naming the node), or hal::Error
// INTERNAL naming the file when a dump cannot be written.
Graph run_pipeline(Graph g, const PipelineOptions& options);

}  // namespace hal

#endif  // HAL_RUNTIME_GRAPH_PASSES_HPP_
