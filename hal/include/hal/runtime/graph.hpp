// HAL runtime: building a graph of catalog ops and running it on a device,
// compiled where the device's plugin compiles graphs (the graph-compile
// interface) and op by op (the operator interface) elsewhere.
//
//   hal::Graph g;
//   int64_t n = g.symbol("batch");                           // a named symbolic dim
//   auto a = g.input(HAL_DTYPE_FLOAT32, {n, 4}, "a");
//   auto b = g.input(HAL_DTYPE_FLOAT32, {n, 4}, "b");
//   auto s = g.add_op("add", {a, b});                        // [batch, 4], inferred
//   auto p = g.add_op("mul", {s, b});
//   g.mark_output(p);
//   hal::CompiledGraph c = hal::compile(*device, g);
//   c.run({&a_view, &b_view}, {&p_view}, &stream);
//   c.stats();   // groups, kernels, op-by-op nodes
//
// Output dtypes and shapes are inferred from the catalog's rules
// (hal/runtime/shape_inference.hpp: symbolic dims propagate), or given by
// the caller (the add_node/add_op overloads taking ValueSpecs) and then
// checked by the plugin against the same rules (at compile for nodes whose
// shapes are concrete, at launch otherwise). Errors are hal::Error naming
// the node ("node 2 ('matmul')") or value and what is wrong.
#ifndef HAL_RUNTIME_GRAPH_HPP_
#define HAL_RUNTIME_GRAPH_HPP_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "hal/runtime/device.hpp"
#include "hal/runtime/op.hpp"
#include "hal/runtime/shape_inference.hpp"  // IWYU pragma: export (ValueSpec, infer_node, infer_shapes)
#include "hal/runtime/stream.hpp"

namespace hal {

// A graph under construction: values and nodes in the order added (so
// always topological). Copyable; not thread-safe while being built.
class Graph {
 public:
  // A value of this graph (an index); Value{} is "absent" (an optional input).
  struct Value {
    uint32_t id = HAL_GRAPH_NO_VALUE;
    bool valid() const { return id != HAL_GRAPH_NO_VALUE; }
  };
  struct Node {
    std::string op;                // catalog name
    std::vector<uint32_t> inputs;  // value ids; HAL_GRAPH_NO_VALUE = absent optional
    std::vector<uint32_t> outputs;
    std::vector<Attr> attrs;
  };

  // A graph input; inputs are fed to run() in the order they were made.
  // NAME (may be empty) is how front ends and messages call it ("input_ids").
  // Throws INVALID_ARGUMENT for an unknown dtype or a rank above
  // HAL_TENSOR_MAX_RANK.
  Value input(hal_dtype_e dtype, std::vector<int64_t> shape, std::string name = "");
  // A constant (an initializer: weights, folded values). The graph owns
  // BYTES: host memory, row-major contiguous, exactly numel * dtype size
  // bytes; copies of the graph share them (immutable). SHAPE must be
  // concrete. Plugins receive constants as inputs they may pre-pack.
  // Throws INVALID_ARGUMENT (unknown dtype, rank too large, a symbolic dim,
  // or a byte count that does not match, naming NAME and both sizes).
  Value constant(hal_dtype_e dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes, std::string name = "");
  // constant() with BYTES shared (not copied) with their other owners (a
  // pass moving a constant between graphs). BYTES must not be null.
  Value shared_constant(hal_dtype_e dtype, std::vector<int64_t> shape,
                        std::shared_ptr<const std::vector<uint8_t>> bytes, std::string name = "");
  // The bytes of constant ID; nullptr when ID is not a constant (or out of
  // range). Valid while any copy of this graph lives.
  const std::vector<uint8_t>* constant_data(uint32_t id) const;
  bool is_constant(uint32_t id) const { return constant_data(id) != nullptr; }
  // Value ids of the constants, in the order made.
  const std::vector<uint32_t>& constants() const { return constants_; }

  // A named symbolic dim: the same NAME gives the same negative number (the
  // first name gets -1, the next -2, ...; numbers a caller used directly in
  // a shape are skipped). Throws INVALID_ARGUMENT for an empty name.
  int64_t symbol(const std::string& name);
  // The name of SYMBOL (< 0): the name given to symbol(), else "s<-symbol>"
  // ("s3" for -3).
  std::string symbol_name(int64_t symbol) const;

  // The name of value ID ("" when unnamed); names are for people and front
  // ends, never for identity. Throws INVALID_ARGUMENT for an id out of range.
  const std::string& value_name(uint32_t id) const;
  void set_value_name(uint32_t id, std::string name);
  // Applies catalog op OP to INPUTS (Value{} for an absent optional input)
  // and returns one new value per entry of OUTPUTS (dtype and shape the
  // catalog's rules give). Throws INVALID_ARGUMENT for a value of another
  // graph, an unknown dtype or a rank too large; the op itself is checked
  // by the plugin at compile or launch.
  std::vector<Value> add_node(const std::string& op, const std::vector<Value>& inputs,
                              const std::vector<Attr>& attrs, const std::vector<ValueSpec>& outputs);
  // add_node for an op with one output.
  Value add_op(const std::string& op, const std::vector<Value>& inputs, const ValueSpec& output,
               const std::vector<Attr>& attrs = {});
  // Applies catalog op OP to INPUTS with ATTRS; the outputs' dtypes and
  // shapes are inferred by infer_node (hal/runtime/shape_inference.hpp), so
  // a graph built only this way is always consistent. Output dims that
  // derive from symbols become new named symbols "node<N>_d<D>" (output 0)
  // or "node<N>_o<I>_d<D>" (node N's output I, dim D). OUTPUT_COUNT 0 = the
  // catalog's count (give it for a variadic output, e.g. split). Throws
  // hal::Error (UNIMPLEMENTED: OP is not in the catalog; UNSUPPORTED_DTYPE;
  // INVALID_ARGUMENT: a value of another graph, wrong attributes or shapes)
  // naming the node ("node 3 ('matmul')") and its input values by name and
  // symbolic shape; the graph is left unchanged (but for symbols made).
  std::vector<Value> add_node(const std::string& op, const std::vector<Value>& inputs,
                              const std::vector<Attr>& attrs, size_t output_count = 0);
  // The attributes of the inferring add_op: a std::vector<Attr> or a braced
  // list of Attrs. A type of its own so that add_op(op, inputs, {dtype, {}})
  // still means the ValueSpec overload (a std::vector<Attr> parameter would
  // also accept that list, as a count and an allocator).
  class Attrs {
   public:
    Attrs() = default;
    Attrs(std::initializer_list<Attr> attrs) : attrs_(attrs) {}
    Attrs(std::vector<Attr> attrs) : attrs_(std::move(attrs)) {}  // NOLINT: implicit on purpose
    const std::vector<Attr>& get() const { return attrs_; }

   private:
    std::vector<Attr> attrs_;
  };
  // The inferring add_node for an op with one output.
  Value add_op(const std::string& op, const std::vector<Value>& inputs, const Attrs& attrs = {});
  // Marks V as an output; outputs are written by run() in the order
  // marked. V must be produced by a node and marked once. A non-empty NAME
  // renames the value.
  void mark_output(Value v, std::string name = "");

  // SHAPE as text with symbols by name: "[batch, 4]".
  std::string shape_string(const std::vector<int64_t>& shape) const;

  // ---- rewriting (for passes; verify() afterwards) ------------------------
  // Makes input INDEX of node NODE read V (Value{} = absent). Checks only
  // that NODE, INDEX and V are in range (INVALID_ARGUMENT otherwise): the
  // op's rules, dangling reads and cycles are verify()'s.
  void set_node_input(size_t node, size_t index, Value v);
  // Makes every node input and graph output that reads FROM read TO instead
  // (same checks as set_node_input; outputs must stay node-produced, so TO
  // must be a node's output when FROM is a graph output; an unnamed TO then
  // takes FROM's name, by which front ends find outputs).
  void replace_uses(Value from, Value to);

  // Removes node N for every REMOVE[N] true (REMOVE has one entry per
  // node; INVALID_ARGUMENT otherwise); the others keep their order. The
  // values the removed nodes produced stay, produced by nobody: a read of
  // one left behind is a dangling value verify() refuses.
  void remove_nodes(const std::vector<bool>& remove);
  // Drops the values nothing refers to (not a graph input, graph output,
  // node input or node output) and the constants no node reads, and
  // renumbers the rest in their order (so Value ids change; names, symbols
  // and order stay). Returns how many values were dropped.
  size_t remove_unused_values();
  // Reorders the nodes topologically, keeping the current order where the
  // dependencies allow (a pass appends nodes after their readers). Throws
  // INVALID_ARGUMENT naming a node on a cycle (as verify() does).
  void sort_nodes();

  // ---- checking, printing, storing -----------------------------------------
  // Throws INVALID_ARGUMENT unless the graph is well formed: value ids in
  // range, inputs distinct and not constants, every value produced at most
  // once and never a graph input or constant, every node's op in the
  // catalog, no dangling read (a value neither a graph input, a constant
  // nor a node's output), no cycle, nodes in topological order, every graph
  // output produced by a node, and every node's declared outputs agreeing
  // with infer_node's (dtype, rank, concrete sizes; a declared symbol may
  // stand for a concrete or derived size, which infer_shapes checks at run
  // time; a size the rules tie to a symbol must not be declared concrete).
  // Messages name the node ("node 4 ('add')") and values (id and name).
  // Errors of the op's rules keep their code (UNIMPLEMENTED, UNSUPPORTED_DTYPE).
  void verify() const;
  // A readable, stable text form: one line per symbol, input, constant
  // (name, dtype, shape and the first 12 hex digits of the sha256 of its
  // bytes, never the bytes), node (outputs, op, inputs, attributes as
  // given) and output; symbols by name. Equal graphs give equal text.
  std::string dump() const;
  // A versioned binary form (see hal/graph/serialize.cc: magic "HALGRAPH",
  // format version, payload, sha256 of the payload) holding everything:
  // values, names, symbols, constants' bytes, nodes, inputs and outputs.
  std::string serialize() const;
  // The graph DATA[0, SIZE) holds (nullptr only with SIZE 0). Throws
  // INVALID_ARGUMENT for bytes that are truncated, corrupt (checksum), of
  // another format version or not a graph, naming the byte offset and what
  // was read, and for a graph verify() refuses. Never reads outside DATA;
  // every count is bounded by the bytes left, so hostile input is safe.
  static Graph deserialize(const void* data, size_t size);
  // Hex sha256 identifying what the graph computes: the serialised form
  // without value and symbol names (renaming does not change it), constants'
  // bytes included; attributes in the order given.
  std::string hash() const;

  const std::vector<ValueSpec>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<uint32_t>& inputs() const { return inputs_; }
  const std::vector<uint32_t>& outputs() const { return outputs_; }

 private:
  uint32_t add_value(const ValueSpec& spec, const std::string& what);
  std::vector<ValueSpec> values_;
  std::vector<std::string> names_;                                      // per value
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> constant_;  // per value; null: not a constant
  std::vector<uint32_t> constants_;
  std::vector<std::pair<int64_t, std::string>> symbols_;              // named symbols
  std::vector<Node> nodes_;
  std::vector<uint32_t> inputs_, outputs_;
  std::vector<int64_t> producer_;  // per value: node index, -1 input, -2 constant, -3 nobody
};

}  // namespace hal

#include "hal/runtime/compiled_graph.hpp"  // IWYU pragma: export (compile(), CompiledGraph)

#endif  // HAL_RUNTIME_GRAPH_HPP_
