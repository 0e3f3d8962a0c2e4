#include "hal/runtime/shape_inference.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "hal/common/op_call_builder.hpp"
#include "hal/common/op_catalog.hpp"
#include "graph/catalog.hpp"
#include "hal/runtime/graph.hpp"

namespace hal {

std::string graph_detail::not_in_catalog(const std::string& name) {
  return "op '" + name + "' is not in the op catalog (version " + std::to_string(HAL_OP_CATALOG_VERSION_MAJOR) + "." +
         std::to_string(HAL_OP_CATALOG_VERSION_MINOR) + ")";
}

namespace {

using common::TensorMeta;

// The sizes symbols stand for: the first N primes from 101 on, times 240.
// Large enough that a rule's bounds checks (an index below a dim, a slice
// of 3) pass and that they rarely equal a model's concrete sizes; divisible
// by 2, 3, 4, 5, 6, 8, 10, 12, 15, 16 so that a derived size (a product
// split again by a head count, say) still divides like a real one; small
// enough that the product of four still fits the int64 arithmetic of the
// rules. Distinct primes keep the symbols apart.
std::vector<int64_t> primes(size_t n) {
  constexpr int64_t kScale = 240;
  std::vector<int64_t> out;
  for (int64_t c = 101; out.size() < n; c += 2) {
    bool prime = true;
    for (int64_t f = 3; f * f <= c && prime; f += 2) prime = c % f != 0;
    if (prime) out.push_back(c * kScale);
  }
  return out;
}

std::string symbol_label(const InferContext& ctx, int64_t symbol) {
  return ctx.symbol_name ? ctx.symbol_name(symbol) : "s" + std::to_string(-symbol);
}

// Runs OP's rule with every input dim D replaced by SUBST(D) (identity for
// concrete dims).
// MAX_NUMEL: a launch's bound for concrete runs; 2^62 for runs with primes
// (a tensor of several symbols exceeds 2^56 there, but no rule's arithmetic,
// bounded by a tensor's element count, overflows).
template <class Subst>
std::vector<TensorMeta> run_rule(const common::OpSchema& schema, const std::string& label,
                                 const std::vector<const ValueSpec*>& inputs, const std::vector<hal_attr_t>& attrs,
                                 size_t output_count, Subst subst, const std::vector<const ValueSpec*>& given = {},
                                 int64_t max_numel = int64_t{1} << 56) {
  // Input and given-output specs with SUBST applied.
  auto metas_of = [&](const std::vector<const ValueSpec*>& specs, std::vector<TensorMeta>& metas,
                      std::vector<const TensorMeta*>& ptrs) {
    metas.assign(specs.size(), TensorMeta{});
    ptrs.assign(specs.size(), nullptr);
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i] == nullptr) continue;
      metas[i].dtype = specs[i]->dtype;
      metas[i].rank = static_cast<int>(specs[i]->shape.size());
      for (int d = 0; d < metas[i].rank; ++d) metas[i].shape[d] = subst(specs[i]->shape[d]);
      ptrs[i] = &metas[i];
    }
  };
  std::vector<TensorMeta> metas, given_metas;
  std::vector<const TensorMeta*> ptrs, given_ptrs;
  metas_of(inputs, metas, ptrs);
  metas_of(given, given_metas, given_ptrs);
  return common::OpCallBuilder::infer(schema, label.c_str(), ptrs, attrs.data(), attrs.size(), output_count,
                                      given_ptrs, max_numel);
}

[[noreturn]] void rethrow(const common::Error& e, const std::string& label, const std::string& note = "") {
  std::string msg = e.what();
  if (msg.compare(0, label.size(), label) != 0) msg = label + ": " + msg;
  throw Error(e.code(), msg + note);
}

}  // namespace

std::vector<ValueSpec> infer_node(const std::string& op, const std::vector<const ValueSpec*>& inputs,
                                  const std::vector<Attr>& attrs, size_t output_count, const InferContext& ctx,
                                  const std::vector<const ValueSpec*>& given) {
  const std::string& label = ctx.label.empty() ? op : ctx.label;
  const common::OpSchema* schema = common::catalog::find_schema(op.c_str());
  if (schema == nullptr)
    throw Error(HAL_STATUS_UNIMPLEMENTED, label + ": " + graph_detail::not_in_catalog(op));
  if (output_count == 0) {
    if (common::OpCallBuilder::variadic_outputs(*schema))
      throw Error(HAL_STATUS_INVALID_ARGUMENT, label + ": output '" + schema->outputs[0].name +
                                                   "' is variadic; give the number of outputs");
    output_count = schema->output_count;
  }
  std::vector<hal_attr_t> c_attrs;
  c_attrs.reserve(attrs.size());
  for (const Attr& a : attrs) c_attrs.push_back(a.c_attr());
  try {  // before the symbolic runs, so that these errors carry no note about them
    common::OpCallBuilder::check_input_count(*schema, label.c_str(), inputs.size());
    common::OpCallBuilder::check_output_count(*schema, label.c_str(), output_count);
    common::OpCallBuilder::parse_attrs(*schema, label.c_str(), c_attrs.data(), c_attrs.size());
  } catch (const common::Error& e) {
    rethrow(e, label);
  }
  std::vector<int64_t> symbols;  // in order of first appearance
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueSpec* v = inputs[i];
    if (v == nullptr) continue;
    if (common::dtype_size(v->dtype) == 0)
      throw Error(HAL_STATUS_UNSUPPORTED_DTYPE, label + ": input " + std::to_string(i) + " has unknown dtype value " +
                                                    std::to_string(v->dtype));
    if (v->shape.size() > HAL_TENSOR_MAX_RANK)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, label + ": input " + std::to_string(i) + " has rank " +
                                                   std::to_string(v->shape.size()) + " > HAL_TENSOR_MAX_RANK (" +
                                                   std::to_string(HAL_TENSOR_MAX_RANK) + ")");
    for (int64_t d : v->shape)
      if (d < 0 && std::find(symbols.begin(), symbols.end(), d) == symbols.end()) symbols.push_back(d);
  }
  for (const ValueSpec* v : given)  // a given output's symbols are substituted alike
    if (v != nullptr)
      for (int64_t d : v->shape)
        if (d < 0 && std::find(symbols.begin(), symbols.end(), d) == symbols.end()) symbols.push_back(d);
  auto to_specs = [](const std::vector<TensorMeta>& metas) {
    std::vector<ValueSpec> out;
    for (const TensorMeta& m : metas) out.push_back(ValueSpec{m.dtype, m.sizes()});
    return out;
  };
  if (symbols.empty()) {
    try {
      return to_specs(run_rule(*schema, label, inputs, c_attrs, output_count, [](int64_t d) { return d; }, given));
    } catch (const common::Error& e) {
      rethrow(e, label);
    }
  }

  // Runs A and B (see SYMBOLIC DIMS in the header). P[2k] stands for
  // symbols[k] in run A, P[2k + 1] in run B; UNIFIED: every symbol is P[0]
  // (A) and P[1] (B).
  const std::vector<int64_t> p = primes(2 * symbols.size());
  constexpr int64_t kSymbolicNumel = int64_t{1} << 62;
  auto subst = [&](bool b, bool unified) {
    return [&, b, unified](int64_t d) {
      if (d >= 0) return d;
      size_t k = unified ? 0 : static_cast<size_t>(std::find(symbols.begin(), symbols.end(), d) - symbols.begin());
      return p[2 * k + (b ? 1 : 0)];
    };
  };
  auto note = [&](bool unified) {
    std::string s = " (inferring with symbolic dims taken as ";
    for (size_t k = 0; k < symbols.size(); ++k)
      s += (k ? ", '" : "'") + symbol_label(ctx, symbols[k]) + "' = " + std::to_string(p[unified ? 0 : 2 * k]);
    return s + (unified ? ", all one size" : "") + ")";
  };
  std::vector<TensorMeta> a, b;
  bool unified = false;
  try {
    a = run_rule(*schema, label, inputs, c_attrs, output_count, subst(false, false), given, kSymbolicNumel);
    b = run_rule(*schema, label, inputs, c_attrs, output_count, subst(true, false), given, kSymbolicNumel);
  } catch (const common::Error& e) {
    if (symbols.size() < 2) rethrow(e, label, note(false));
    try {
      unified = true;
      a = run_rule(*schema, label, inputs, c_attrs, output_count, subst(false, true), given, kSymbolicNumel);
      b = run_rule(*schema, label, inputs, c_attrs, output_count, subst(true, true), given, kSymbolicNumel);
    } catch (const common::Error&) {
      rethrow(e, label, note(false));
    }
  }

  int64_t next_fresh = *std::min_element(symbols.begin(), symbols.end());
  std::vector<ValueSpec> out = to_specs(a);
  for (size_t o = 0; o < out.size(); ++o) {
    if (a[o].rank != b[o].rank || a[o].dtype != b[o].dtype)  // a rule whose rank depends on a size
      throw Error(HAL_STATUS_INVALID_ARGUMENT, label + ": output " + std::to_string(o) +
                                                   "'s rank or dtype depends on the symbolic sizes" + note(unified));
    for (int d = 0; d < a[o].rank; ++d) {
      int64_t va = a[o].shape[d], vb = b[o].shape[d];
      if (va == vb) continue;  // concrete
      int64_t dim = 0;
      for (size_t k = 0; k < (unified ? 1 : symbols.size()) && dim == 0; ++k)
        if (va == p[2 * k] && vb == p[2 * k + 1]) dim = symbols[k];
      if (dim == 0) dim = ctx.fresh_symbol ? ctx.fresh_symbol(o, static_cast<size_t>(d)) : --next_fresh;
      out[o].shape[d] = dim;
    }
  }
  return out;
}

namespace {

// "graph input 0 ('ids')", "value 7 ('h')", "value 7".
std::string value_label(const Graph& g, const char* what, uint32_t id) {
  const std::string& name = g.value_name(id);
  return std::string(what) + " " + std::to_string(id) + (name.empty() ? "" : " ('" + name + "')");
}

// Where a shape is checked: graph input INDEX, or output OUTPUT of node
// INDEX. Its text is only made for a message (a re-plan checks every
// value's shape, and most of its time went to these strings).
struct Site {
  bool input;
  size_t index;
  size_t output;
};

// "graph input 0 ('ids')", "node 3 ('matmul'): output 0 (value 7 ('h'))".
std::string site_text(const Graph& g, const Site& s) {
  if (s.input) {
    const std::string& name = g.value_name(g.inputs()[s.index]);
    return "graph input " + std::to_string(s.index) + (name.empty() ? "" : " ('" + name + "')");
  }
  const Graph::Node& node = g.nodes()[s.index];
  return "node " + std::to_string(s.index) + " ('" + node.op + "'): output " + std::to_string(s.output) + " (" +
         value_label(g, "value", node.outputs[s.output]) + ")";
}

// Symbol bindings of one infer_shapes call, each with where it was bound.
class Bindings {
 public:
  explicit Bindings(const Graph& g) : g_(g) {}

  // Checks or binds the declared dim DECLARED against ACTUAL, the size dim D
  // of the value at WHERE has.
  void bind(int64_t declared, int64_t actual, const Site& where, size_t d, const std::vector<int64_t>& declared_shape,
            const std::vector<int64_t>& actual_shape) {
    if (declared >= 0) {
      if (declared != actual)
        throw Error(HAL_STATUS_INVALID_ARGUMENT, site_text(g_, where) + " has shape " + dims(actual_shape) +
                                                     " but the value's is " + symbolic(declared_shape) + " (dim " +
                                                     std::to_string(d) + ")");
      return;
    }
    auto [it, fresh] = bound_.try_emplace(declared, Bound{actual, where, d});
    if (!fresh && it->second.size != actual)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "symbol '" + g_.symbol_name(declared) + "' is " +
                                                   std::to_string(it->second.size) + " (" +
                                                   site_text(g_, it->second.site) + " dim " + std::to_string(it->second.dim) +
                                                   ") but " + site_text(g_, where) + " dim " + std::to_string(d) + " is " +
                                                   std::to_string(actual));
  }
  // SHAPE with bound symbols replaced.
  std::vector<int64_t> substitute(std::vector<int64_t> shape) const {
    for (int64_t& d : shape) {
      auto it = d < 0 ? bound_.find(d) : bound_.end();
      if (it != bound_.end()) d = it->second.size;
    }
    return shape;
  }
  static std::string dims(const std::vector<int64_t>& s) {
    return common::shape_string(s.data(), static_cast<int>(s.size()));
  }
  std::string symbolic(const std::vector<int64_t>& s) const { return g_.shape_string(s); }

 private:
  struct Bound {
    int64_t size;
    Site site;
    size_t dim;
  };
  const Graph& g_;
  std::map<int64_t, Bound> bound_;
};

}  // namespace

std::vector<std::vector<int64_t>> infer_shapes(const Graph& g, const std::vector<std::vector<int64_t>>& input_shapes) {
  if (input_shapes.size() != g.inputs().size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "infer_shapes: got " + std::to_string(input_shapes.size()) +
                                                 " input shapes but the graph has " +
                                                 std::to_string(g.inputs().size()) + " inputs");
  const std::vector<ValueSpec>& values = g.values();
  std::vector<std::vector<int64_t>> shapes(values.size());
  std::vector<bool> known(values.size(), false);
  Bindings bindings(g);
  auto check = [&](const ValueSpec& spec, const std::vector<int64_t>& actual, const Site& where) {
    if (actual.size() != spec.shape.size())
      throw Error(HAL_STATUS_INVALID_ARGUMENT, site_text(g, where) + " has shape " + Bindings::dims(actual) + " (rank " +
                                                   std::to_string(actual.size()) + ") but the value's is " +
                                                   bindings.symbolic(spec.shape) + " (rank " +
                                                   std::to_string(spec.shape.size()) + ")");
    for (size_t d = 0; d < actual.size(); ++d) {
      if (actual[d] < 0)
        throw Error(HAL_STATUS_INVALID_ARGUMENT, site_text(g, where) + " has negative size " + std::to_string(actual[d]) +
                                                     " in dim " + std::to_string(d));
      bindings.bind(spec.shape[d], actual[d], where, d, spec.shape, actual);
    }
  };
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    uint32_t id = g.inputs()[i];
    check(values[id], input_shapes[i], Site{true, i, 0});
    shapes[id] = input_shapes[i];
    known[id] = true;
  }
  for (uint32_t id : g.constants()) {
    shapes[id] = values[id].shape;
    known[id] = true;
  }
  std::vector<const ValueSpec*> in;
  std::vector<ValueSpec> concrete;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const Graph::Node& node = g.nodes()[n];
    InferContext ctx;
    ctx.label = "node " + std::to_string(n) + " ('" + node.op + "')";
    concrete.assign(node.inputs.size(), ValueSpec{});
    in.assign(node.inputs.size(), nullptr);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      uint32_t id = node.inputs[i];
      if (id == HAL_GRAPH_NO_VALUE) continue;
      if (id >= values.size() || !known[id])
        throw Error(HAL_STATUS_INVALID_ARGUMENT,
                    ctx.label + ": input " + std::to_string(i) + " is " +
                        (id >= values.size() ? "value " + std::to_string(id) + ", not a value of the graph"
                                             : value_label(g, "value", id) +
                                                   ", which is not computed before the node (neither a graph input, "
                                                   "a constant nor an output of an earlier node)"));
      concrete[i] = ValueSpec{values[id].dtype, shapes[id]};
      in[i] = &concrete[i];
    }
    std::vector<ValueSpec> declared(node.outputs.size());
    std::vector<const ValueSpec*> given(node.outputs.size(), nullptr);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] >= values.size()) continue;
      declared[o] = ValueSpec{values[node.outputs[o]].dtype, bindings.substitute(values[node.outputs[o]].shape)};
      if (std::all_of(declared[o].shape.begin(), declared[o].shape.end(), [](int64_t d) { return d >= 0; }))
        given[o] = &declared[o];
    }
    std::vector<ValueSpec> out;
    try {
      out = infer_node(node.op, in, node.attrs, node.outputs.size(), ctx, given);
    } catch (const Error& e) {
      std::string unbound;  // declared outputs a rule like copy's would need, left out
      for (size_t o = 0; o < given.size(); ++o)
        if (given[o] == nullptr && node.outputs[o] < values.size())
          unbound += "; output " + std::to_string(o) + " is declared " + g.shape_string(values[node.outputs[o]].shape) +
                     " with a symbol nothing bound before this node";
      throw Error(unbound.empty() ? e.code() : HAL_STATUS_INVALID_ARGUMENT, e.what() + unbound);
    }
    for (size_t o = 0; o < out.size(); ++o) {
      uint32_t id = node.outputs[o];
      const Site where{false, n, o};
      if (out[o].dtype != values[id].dtype)
        throw Error(HAL_STATUS_INVALID_ARGUMENT, site_text(g, where) + " has dtype " + common::dtype_name(out[o].dtype) +
                                                     " by the catalog's rules but the value's is " +
                                                     common::dtype_name(values[id].dtype));
      check(values[id], out[o].shape, where);
      shapes[id] = out[o].shape;
      known[id] = true;
    }
  }
  for (size_t id = 0; id < values.size(); ++id)
    if (!known[id]) shapes[id] = bindings.substitute(values[id].shape);
  return shapes;
}

}  // namespace hal
