// The state of translating one ONNX graph into a hal::Graph: what each ONNX
// value name stands for (a graph value, a tensor known at load, integers
// that may be symbolic dims), the node being translated, and the helpers the
// op table's converters use (op_table.cc). Internal to hal_onnx.
#ifndef HAL_ONNX_SRC_TRANSLATOR_HPP_
#define HAL_ONNX_SRC_TRANSLATOR_HPP_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "hal/onnx/host_tensor.hpp"
#include "hal/runtime/graph.hpp"
#include "onnx/onnx_pb.h"

namespace hal::onnx::detail {

// One element of an integer tensor known at load (shape arithmetic): a
// number, a symbolic dim of the graph (VALUE is the symbol, < 0), or a
// number only known at run time.
struct Dim {
  enum Kind : uint8_t { kConst, kSym, kUnknown } kind = kConst;
  int64_t value = 0;
  static Dim of(int64_t v) { return {kConst, v}; }
  static Dim sym(int64_t s) { return {kSym, s}; }
  static Dim unknown() { return {kUnknown, 0}; }
  bool known() const { return kind == kConst; }
  bool operator==(const Dim& o) const { return kind == o.kind && value == o.value; }
};

// What an ONNX value name stands for: a tensor, or a sequence of them
// (SEQUENCE; ELEMENTS are its tensors, SPEC.dtype their element type).
struct Slot {
  ValueSpec spec;                     // dtype and shape (dims < 0: graph symbols)
  bool sequence = false;
  std::vector<Slot> elements;
  // An optional (Optional): ELEMENTS holds its one value, or nothing (empty).
  bool optional = false;
  Graph::Value value;                 // in the graph; invalid until needed for HOST
  std::optional<HostTensor> host;     // known at load: an initializer, a Constant, a folded result
  std::optional<std::vector<Dim>> ints;  // an integer tensor of rank <= 1 known element-wise at load
};

class Translator {
 public:
  explicit Translator(Graph& graph) : graph_(graph) {}

  Graph& graph() { return graph_; }
  void define(const std::string& name, Slot slot);
  bool defined(const std::string& name) const { return slots_.count(name) != 0; }
  // The slot NAME stands for; throws INVALID_ARGUMENT naming the current node
  // when NAME is undefined.
  const Slot& slot(const std::string& name) const;

  // ---- the node being translated ----
  void begin_node(const ::onnx::NodeProto& node, size_t index, int64_t opset);
  const ::onnx::NodeProto& node() const { return *node_; }
  int64_t opset() const { return opset_; }
  // "node 3 'attn/Reshape' (Reshape, ai.onnx opset 20)".
  std::string where() const;
  [[noreturn]] void unimplemented(const std::string& what) const;
  [[noreturn]] void invalid(const std::string& what) const;
  // UNIMPLEMENTED for a value the node needs known at load (a shape, axes, K)
  // that is computed at run time; remembered, so the model can instead be
  // translated once the inputs' values are known (Model::bind).
  [[noreturn]] void needs_value(const std::string& what) const;
  bool value_needed() const { return value_needed_; }

  // The name of input / output I; "" when absent or beyond the node's count
  // (a malformed node then fails on the missing value, never reads out of range).
  const std::string& input_name(size_t i) const;
  const std::string& output_name(size_t i) const;
  // Binds output I to what SLOT stands for (an alias: Identity, no-op reshapes).
  void alias_output(size_t i, const Slot& slot);

  // Inputs: the count given (trailing empty names dropped), whether input I
  // is present, its slot, and its graph value (a constant made on first use).
  size_t input_count() const;
  bool has_input(size_t i) const;
  const Slot& in(size_t i) const;
  Graph::Value value(size_t i);
  Graph::Value value_of(const std::string& name);
  // Input I's elements when it is an integer tensor known at load; nullopt
  // otherwise. Input I is required (INVALID_ARGUMENT when not given).
  std::optional<std::vector<Dim>> ints(size_t i) const;
  // As ints(), but every element concrete: otherwise its value when the
  // model runs (known_ints: a graph input bound per run, a computed value
  // by stages), or UNIMPLEMENTED naming the input and WHAT it is for
  // ("Reshape's shape") when it is shape arithmetic over run-time dims.
  std::vector<int64_t> const_ints(size_t i, const std::string& what);
  // Input I as a host tensor known at load, or nullptr.
  const HostTensor* host(size_t i) const;

  // Attributes of the node (ONNX defaults when absent).
  const ::onnx::AttributeProto* attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  float attr_float(const std::string& name, float fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::optional<std::vector<int64_t>> attr_ints(const std::string& name) const;
  // UNIMPLEMENTED unless attribute NAME is absent or has value EXPECTED
  // (a limit of HAL's mapping, named in the message).
  void require_attr(const std::string& name, int64_t expected, int64_t fallback) const;

  // ---- values only known while the model runs ----
  // The value of input I as a host tensor: known at load (an initializer, a
  // Constant, folded integers) or computed at run time. A graph input's value
  // is then bound per run (needs_value: Model::bind) unless the translation
  // is staged already; any other value is asked for with runtime_value().
  // WHAT names it in messages ("Loop's trip count").
  HostTensor known(size_t i, const std::string& what);
  // known() for slot S (an input of a subgraph's node, a Loop's condition), NAME its value's name.
  HostTensor known_slot(const Slot& s, const std::string& name, const std::string& what);
  // known() as integers (INVALID_ARGUMENT naming WHAT for another dtype).
  std::vector<int64_t> known_ints(size_t i, const std::string& what);
  // The value V (of this graph) takes when the model runs: the K-th such
  // request of a translation returns the K-th bound value
  // (bind_runtime_values); past them the translation stops (UNIMPLEMENTED,
  // pending_request() set) and the model runs in stages: the graph so far
  // runs, V is read back, and the model is translated again with it bound
  // (Model::stage). Deterministic: the same values give the same graph.
  HostTensor runtime_value(Graph::Value v, const std::string& what);
  // SOURCE's first N rows (dim 0), N the integer scalar COUNT holds when the
  // model runs: a request of COUNT (as runtime_value) whose bound value only
  // sizes a new graph input, fed by the runner as a view of SOURCE's bytes
  // (rows_inputs()). With SYMBOLIC rows (bind_runtime_values) and N >= 2 its
  // dim 0 is a fresh symbol, so the translation is the same for every such
  // N and one compiled stage serves them all (re-planning is binding the
  // symbol, not translating again); N < 2 stays concrete (rules treat a
  // symbol as large: broadcasting a 1, an empty tensor). INVALID_ARGUMENT
  // naming WHAT when COUNT is not one integer in [0, SOURCE's rows].
  Graph::Value runtime_rows(Graph::Value source, Graph::Value count, const std::string& what);
  // SOURCE's elements as the shape the integer tensor TARGET holds when the
  // model runs (a Reshape to a computed target; ALLOWZERO as Reshape's): a
  // request of TARGET whose bound value, resolved by the runner against
  // SOURCE's run-time shape (resolve_reshape), only shapes a new graph
  // input fed as a view of SOURCE's bytes (rows_inputs()). Dims >= 2 are
  // fresh symbols, so one translation serves every target with the same
  // rank and the same dims below 2. Only with symbolic rows
  // (symbolic_rows()); otherwise a Reshape reads its target as a value.
  Graph::Value runtime_view(Graph::Value source, Graph::Value target, bool allowzero, const std::string& what);
  // The rank-1 integer tensor DIMS as sizes of shapes when the model runs
  // (a Range's length, the output dims of Tile or Expand, ConstantOfShape's
  // shape): a request of DIMS whose bound value is returned. With symbolic
  // rows its elements >= 2 are fresh symbols (hinted, as runtime_rows'),
  // bound by a graph input of shape [0, dims...] (no elements) the runner
  // feeds from the value read back, so one translation serves every value
  // whose elements below 2 are the same. CARRIER (when given) receives that
  // input (invalid without symbols): a node making a tensor of those sizes
  // must take it (sized_zeros in op_table.cc), since an executable binds
  // symbols from the tensors its nodes take and give. INVALID_ARGUMENT
  // naming WHAT when DIMS is not integers, and with NEGATIVE (else "WHAT
  // has element I = V") when an element is < 0.
  std::vector<int64_t> runtime_dims(Graph::Value dims, const std::string& what, const std::string& negative = "",
                                    Graph::Value* carrier = nullptr);
  bool symbolic_rows() const { return symbolic_rows_; }
  // A symbol runtime_rows or runtime_view made stands for element ELEMENT
  // of request REQUEST's bound value (a count, a view's resolved dim);
  // HINT is that element in the values this translation was made with.
  struct SymbolHint {
    size_t request;
    size_t element;
    int64_t hint;
  };
  // SYMBOL's hint, or nullopt for a symbol no read-back value gives (a
  // model input's dim_param, an op's data-dependent dim).
  std::optional<SymbolHint> hint(int64_t symbol) const;
  // The translation holds only while SYMBOL (one hint() knows) is in
  // [LO, HI] (a Slice's bounds clamped with the hint): Model::stage hands
  // the guards to the runner, which checks them before running the stage
  // with other values (ModelStage::guards).
  struct Guard {
    size_t request;
    size_t element;
    int64_t lo;
    int64_t hi;
  };
  void guard(int64_t symbol, int64_t lo, int64_t hi);
  const std::vector<Guard>& guards() const { return guards_; }
  // Whether input I is a value only known when the model runs, computed by
  // a node of this graph (known() would request it with runtime_value).
  bool computed_at_run_time(size_t i) const;
  // Whether input I is a model input or a node's result (not a constant):
  // a value the runner holds, which runtime_view can view.
  bool viewable(size_t i) const;
  // CONCRETE[K]: request K's value is taken as it is (runtime_dims makes
  // no symbols of it) even with SYMBOLIC_ROWS.
  void bind_runtime_values(std::vector<HostTensor> values, bool symbolic_rows = true, std::vector<bool> concrete = {}) {
    runtime_values_ = std::move(values);
    symbolic_rows_ = symbolic_rows;
    concrete_ = std::move(concrete);
    staged_ = true;
  }
  struct Request {
    Graph::Value value;          // invalid: DIMS instead
    std::string what;
    std::vector<int64_t> dims;   // shape arithmetic over run-time dims: numbers (>= 0) and symbols (< 0)
    std::vector<int64_t> shape;  // of the DIMS tensor
    bool rows = false;           // VALUE is a count of rows (runtime_rows)
    // VALUE is a view's target shape (runtime_view): the runner resolves it
    // against SOURCE's run-time shape before binding it.
    bool view = false;
    Graph::Value source;
    bool allowzero = false;
    bool sizes = false;          // VALUE is sizes of shapes (runtime_dims)
  };
  // The graph inputs runtime_rows made, in order: graph input INPUT is
  // SOURCE's first rows, as many as request REQUEST's value says.
  // VIEW: the whole shape is the request's (resolved) value (runtime_view).
  // SIZES: no elements, shape [0, the request's value...] (runtime_dims;
  // SOURCE is the requested value itself).
  struct RowsInput {
    uint32_t input;
    uint32_t source;
    size_t request;
    bool view = false;
    bool sizes = false;
  };
  const std::vector<RowsInput>& rows_inputs() const { return rows_inputs_; }
  const std::optional<Request>& pending_request() const { return pending_; }
  // The graph's node count when request K was made (every request so far).
  const std::vector<size_t>& request_cuts() const { return request_cuts_; }

  // ---- subgraphs (If branches, Loop and Scan bodies) ----
  // The node being translated and the context messages give it; restored
  // after a subgraph's nodes are translated (control_flow.cc).
  struct NodeState {
    const ::onnx::NodeProto* node;
    size_t index;
    int64_t opset;
    std::string context;
  };
  NodeState node_state() const { return {node_, index_, opset_, context_}; }
  void restore(const NodeState& s) {
    node_ = s.node;
    index_ = s.index;
    opset_ = s.opset;
    context_ = s.context;
  }
  // Messages about the nodes translated next start with CONTEXT ("in the
  // body of node 3 'loop' (Loop), iteration 2: ").
  void set_context(std::string context) { context_ = std::move(context); }
  // Names defined between push_scope() and pop_scope() are forgotten at
  // pop_scope() (a name they shadowed is visible again).
  void push_scope() { scopes_.emplace_back(); }
  void pop_scope();

  // ---- results ----
  size_t output_count() const;
  // Binds output I of the node to V / to a load-time tensor / to integers.
  void set_output(size_t i, Graph::Value v);
  void set_output_host(size_t i, HostTensor t);
  void set_output_ints(size_t i, hal_dtype_e dtype, std::vector<Dim> dims, bool scalar);
  // Emits catalog op OP (outputs inferred by the catalog's rules); errors
  // are rethrown naming the ONNX node.
  std::vector<Graph::Value> emit(const std::string& op, const std::vector<Graph::Value>& inputs,
                                 const std::vector<Attr>& attrs, size_t output_count = 0);
  Graph::Value emit1(const std::string& op, const std::vector<Graph::Value>& inputs,
                     const std::vector<Attr>& attrs = std::vector<Attr>{});
  // Emits OP with the output spec given (ops whose output shape is the
  // caller's: copy to a broadcast shape or dtype, fill, reshape).
  Graph::Value emit_as(const std::string& op, const std::vector<Graph::Value>& inputs, const std::vector<Attr>& attrs,
                       const ValueSpec& out);
  const ValueSpec& spec(Graph::Value v) const { return graph_.values().at(v.id); }
  // A graph constant holding T (named after the node).
  Graph::Value constant(const HostTensor& t);
  // A symbol for a dim only known at run time ("<node name>_d<dim>").
  int64_t fresh_symbol(size_t dim);
  // The graph's symbol NAME (a model input's dim_param); fresh symbols never
  // reuse a name given here.
  int64_t named_symbol(const std::string& name);

  // Flattens remembered: FLAT is ORIGIN ([d0, ..., dn, K], several dims only
  // known at run time) with its leading dims merged ([m, K]). Exporters
  // flatten around a Gemm and split the product again, which the catalog's
  // reshape cannot do from the product alone; the rows' computation runs on
  // ORIGIN instead (op_table.cc: gemm, reshape_to).
  void set_flatten_origin(Graph::Value flat, Graph::Value origin) { flatten_origin_[flat.id] = origin.id; }
  // ORIGIN of FLAT, or an invalid value.
  Graph::Value flatten_origin(Graph::Value flat) const {
    auto it = flatten_origin_.find(flat.id);
    return it == flatten_origin_.end() ? Graph::Value{} : Graph::Value{it->second};
  }

 private:
  std::map<uint32_t, uint32_t> flatten_origin_;
  Graph& graph_;
  std::map<std::string, Slot> slots_;
  const ::onnx::NodeProto* node_ = nullptr;
  size_t index_ = 0;
  int64_t opset_ = 0;
  mutable bool value_needed_ = false;
  size_t constants_made_ = 0;
  std::set<std::string> symbol_names_;
  std::vector<HostTensor> runtime_values_;
  bool symbolic_rows_ = true;
  std::vector<bool> concrete_;
  std::vector<RowsInput> rows_inputs_;
  std::map<int64_t, SymbolHint> hints_;
  std::vector<Guard> guards_;
  bool staged_ = false;
  size_t requests_made_ = 0;
  std::vector<size_t> request_cuts_;
  std::optional<Request> pending_;
  std::string context_;
  std::vector<std::map<std::string, std::optional<Slot>>> scopes_;
  // The next request's bound value, or (past them) R made pending and the
  // translation stopped (runtime_value and known_slot's dims).
  HostTensor request(Request r);
};

// Int64 host tensor of DIMS (all concrete) with SHAPE.
HostTensor int_tensor(hal_dtype_e dtype, const std::vector<int64_t>& values, std::vector<int64_t> shape);
// The elements of integer tensor T as int64 (nullopt for a non-integer dtype).
std::optional<std::vector<int64_t>> int_values(const HostTensor& t);
// The elements of a floating (16-bit included) or integer tensor T as
// doubles (nullopt for other dtypes).
std::optional<std::vector<double>> float_values(const HostTensor& t);
// Reshape's TARGET for an input of concrete shape IN (ONNX's rules: -1
// inferred once, 0 copies IN's dim unless ALLOWZERO): the dims, or why it
// does not fit ("cannot reshape [12] (12 elements) to [5, -1]").
std::variant<std::vector<int64_t>, std::string> resolve_reshape(const std::vector<int64_t>& in,
                                                                 const std::vector<int64_t>& target, bool allowzero);

}  // namespace hal::onnx::detail

#endif  // HAL_ONNX_SRC_TRANSLATOR_HPP_
