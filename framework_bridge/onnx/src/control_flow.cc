// Control flow: If, Loop and Scan. Subgraphs go through the same translation
// (the same op table, the same graph): an If becomes the branch its condition
// picks, a Loop and a Scan their body unrolled once per iteration. A
// condition or trip count known at load decides at load; one computed from
// tensor values is asked for with Translator::runtime_value, so the model
// runs in stages (Model::stage): the graph up to the decision runs, the value
// is read back, and the rest is translated for it (cached per value by
// Session). Compiled groups on either side stay compiled.
#include <algorithm>
#include <string>
#include <vector>

#include "converters.hpp"
#include "hal/common/dtype.hpp"
#include "tensor_proto.hpp"

namespace hal::onnx::detail {

namespace {

using V = Graph::Value;

// More iterations than this are refused (each is a copy of the body).
constexpr int64_t kMaxUnrolledIterations = 4096;

}  // namespace

Graph::Value take(Translator& t, Graph::Value v, int64_t axis, int64_t i) {
  std::vector<int64_t> shape = t.spec(v).shape;
  Graph::Value index = t.constant(int_tensor(HAL_DTYPE_INT64, {i}, {1}));
  Graph::Value one = t.emit1("index_select", {v, index}, {Attr::i("dim", axis)});
  shape.erase(shape.begin() + axis);
  return reshape_to(t, one, shape);
}

// Translates subgraph G with its inputs bound to INPUTS and returns its
// outputs; names it defines are forgotten afterwards, the outer node is
// restored. CONTEXT starts the messages of its nodes.
std::vector<Slot> run_subgraph(Translator& t, const ::onnx::GraphProto& g, const std::vector<Slot>& inputs,
                               const std::string& context) {
  if (static_cast<size_t>(g.input_size()) != inputs.size())
    t.invalid(context + "the subgraph declares " + std::to_string(g.input_size()) + " inputs; the operator gives it " +
              std::to_string(inputs.size()));
  const Translator::NodeState outer = t.node_state();
  t.push_scope();
  std::vector<Slot> outs;
  try {
    for (const auto& init : g.initializer()) {
      Slot s;
      s.host = tensor_from_proto(init, "", "subgraph initializer '" + init.name() + "'");
      s.spec = {s.host->dtype, s.host->shape};
      t.define(init.name(), std::move(s));
    }
    for (size_t i = 0; i < inputs.size(); ++i) t.define(g.input(static_cast<int>(i)).name(), inputs[i]);
    t.set_context(outer.context + context);
    translate_graph(t, g, outer.opset);
    for (const auto& o : g.output()) outs.push_back(t.slot(o.name()));
  } catch (...) {
    t.pop_scope();
    t.restore(outer);
    throw;
  }
  t.pop_scope();
  t.restore(outer);
  return outs;
}

namespace {

// The graph value a subgraph output stands for (a constant for a value known at load).
V slot_value(Translator& t, const Slot& s, const std::string& what) {
  if (s.value.valid()) return s.value;
  if (!s.host) t.unimplemented(what + " is shape arithmetic over run-time dims, used as a tensor");
  return t.constant(*s.host);
}

const ::onnx::GraphProto& graph_attr(Translator& t, const char* name) {
  const ::onnx::AttributeProto* a = t.attr(name);
  if (a == nullptr || !a->has_g()) t.invalid(std::string("needs the graph attribute '") + name + "'");
  return a->g();
}

// A one-element bool (or integer) value known at load or when the model runs.
bool truth(Translator& t, const Slot& s, const std::string& name, const std::string& what) {
  const HostTensor h = t.known_slot(s, name, what);
  auto v = int_values(h);
  if (!v || v->size() != 1)
    t.invalid(what + " ('" + name + "') must be one bool or integer, not " + common::dtype_name(h.dtype) + " " +
              shape_text(h.shape));
  return (*v)[0] != 0;
}

void if_op(Translator& t, const OpRule&) {
  const bool cond = truth(t, t.in(0), t.input_name(0), "If's condition");
  const char* branch = cond ? "then_branch" : "else_branch";
  std::vector<Slot> outs = run_subgraph(t, graph_attr(t, branch), {}, "in the " + std::string(branch) + " of " + t.where() + ": ");
  if (outs.size() != t.output_count())
    t.invalid(std::string(branch) + " has " + std::to_string(outs.size()) + " outputs; the node has " + std::to_string(t.output_count()));
  for (size_t i = 0; i < outs.size(); ++i) t.alias_output(i, outs[i]);
}

// Values stacked along a new dim AXIS (the scan outputs of Loop and Scan);
// every iteration must give the same shape.
V stack_along(Translator& t, const std::vector<V>& vs, int64_t axis, const std::string& what) {
  for (const V& v : vs)
    if (t.spec(v).shape != t.spec(vs[0]).shape)
      t.invalid(what + " changes shape between iterations (" + shape_text(t.spec(vs[0]).shape) + ", then " +
                shape_text(t.spec(v).shape) + ")");
  return t.emit1("stack", vs, {Attr::i("dim", axis)});
}

// Loop: the body once per iteration while the trip count and the condition
// allow, loop-carried values threaded through, scan outputs stacked.
void loop(Translator& t, const OpRule&) {
  const ::onnx::GraphProto& body = graph_attr(t, "body");
  const size_t n = t.input_count() < 2 ? 0 : t.input_count() - 2;
  if (static_cast<size_t>(body.input_size()) != n + 2)
    t.invalid("the body takes " + std::to_string(body.input_size()) + " inputs; the node carries " + std::to_string(n) +
              " values (the body takes iteration_num, cond and them)");
  if (static_cast<size_t>(body.output_size()) < n + 1)
    t.invalid("the body gives " + std::to_string(body.output_size()) + " outputs; cond and " + std::to_string(n) +
              " loop-carried values are needed");
  const size_t k = static_cast<size_t>(body.output_size()) - 1 - n;
  std::optional<int64_t> trip;
  if (t.has_input(0)) {
    std::vector<int64_t> m = t.known_ints(0, "Loop's trip count M");
    if (m.size() != 1) t.invalid("the trip count M has " + std::to_string(m.size()) + " elements (one)");
    if (m[0] < 0) t.invalid("the trip count M is negative (" + std::to_string(m[0]) + ")");
    trip = m[0];
  }
  const bool has_cond = t.has_input(1);
  if (!trip && !has_cond) t.unimplemented("neither a trip count nor a condition (an infinite loop)");
  std::vector<Slot> carried;
  for (size_t j = 0; j < n; ++j) carried.push_back(t.in(2 + j));
  Slot cond;
  if (has_cond) cond = t.in(1);
  std::vector<std::vector<V>> scans(k);
  const std::string here = t.where();
  for (int64_t it = 0;; ++it) {
    if (trip && it >= *trip) break;
    if (has_cond && !truth(t, cond, it == 0 ? t.input_name(1) : body.output(0).name(), "Loop's condition")) break;
    if (it >= kMaxUnrolledIterations)
      t.unimplemented("more than " + std::to_string(kMaxUnrolledIterations) + " iterations (the body is unrolled)");
    Slot iter;
    iter.host = int_tensor(HAL_DTYPE_INT64, {it}, {});
    iter.spec = {HAL_DTYPE_INT64, {}};
    Slot cond_in = cond;
    if (!has_cond) {
      cond_in = Slot{};
      cond_in.host = int_tensor(HAL_DTYPE_BOOL, {1}, {});
      cond_in.spec = {HAL_DTYPE_BOOL, {}};
    }
    std::vector<Slot> ins{iter, cond_in};
    ins.insert(ins.end(), carried.begin(), carried.end());
    std::vector<Slot> outs = run_subgraph(t, body, ins, "in the body of " + here + ", iteration " + std::to_string(it) + ": ");
    for (size_t j = 0; j < n; ++j) {
      if (outs[1 + j].spec.dtype != carried[j].spec.dtype)
        t.invalid("the body changes loop-carried value " + std::to_string(j) + " ('" + t.input_name(2 + j) + "') from " +
                  common::dtype_name(carried[j].spec.dtype) + " to " + common::dtype_name(outs[1 + j].spec.dtype));
      carried[j] = outs[1 + j];
    }
    cond = outs[0];
    for (size_t s = 0; s < k; ++s) scans[s].push_back(slot_value(t, outs[1 + n + s], "scan output " + std::to_string(s)));
  }
  for (size_t j = 0; j < n; ++j) t.alias_output(j, carried[j]);
  for (size_t s = 0; s < k; ++s) {
    if (scans[s].empty()) t.unimplemented("scan output " + std::to_string(s) + " of a Loop that runs no iteration (its shape is unknown)");
    t.set_output(n + s, stack_along(t, scans[s], 0, "scan output " + std::to_string(s)));
  }
}

// Scan (8: a leading batch dim on everything, sequence_lens; 9+: none): the
// body once per sequence element (per batch entry for 8), states threaded
// through, scan inputs sliced along their axes (reversed ones from the end),
// scan outputs stacked along theirs.
void scan(Translator& t, const OpRule&) {
  const ::onnx::GraphProto& body = graph_attr(t, "body");
  const bool v8 = t.opset() < 9;
  const size_t first = v8 ? 1 : 0;  // Scan-8's input 0 is sequence_lens
  const int64_t m = t.attr_int("num_scan_inputs", -1);
  const size_t given = t.input_count() > first ? t.input_count() - first : 0;
  if (m <= 0 || static_cast<size_t>(m) > given)
    t.invalid("num_scan_inputs " + std::to_string(m) + " for " + std::to_string(given) + " inputs");
  const size_t n = given - static_cast<size_t>(m);
  const size_t k = static_cast<size_t>(body.output_size()) < n ? 0 : static_cast<size_t>(body.output_size()) - n;
  if (static_cast<size_t>(body.output_size()) < n) t.invalid("the body gives fewer outputs than the " + std::to_string(n) + " states");
  std::vector<int64_t> in_axes = v8 ? std::vector<int64_t>(static_cast<size_t>(m), 0) : ints_or(t, "scan_input_axes", static_cast<size_t>(m), 0, "values");
  std::vector<int64_t> in_dirs = ints_or(t, v8 ? "directions" : "scan_input_directions", static_cast<size_t>(m), 0, "values");
  std::vector<int64_t> out_axes = v8 ? std::vector<int64_t>(k, 0) : ints_or(t, "scan_output_axes", k, 0, "values");
  std::vector<int64_t> out_dirs = v8 ? std::vector<int64_t>(k, 0) : ints_or(t, "scan_output_directions", k, 0, "values");
  // Scan inputs: their axis normalised (Scan-8: the sequence is dim 1, after the batch).
  std::vector<V> xs;
  int64_t len = -1;
  for (size_t j = 0; j < static_cast<size_t>(m); ++j) {
    V x = t.value(first + n + j);
    const std::vector<int64_t>& shape = t.spec(x).shape;
    int64_t axis = v8 ? 1 : norm_axis(t, in_axes[j], shape.size(), "scan_input_axes entry");
    in_axes[j] = axis;
    if (static_cast<size_t>(axis) >= shape.size()) t.invalid("scan input " + std::to_string(j) + " has rank " + std::to_string(shape.size()));
    const int64_t l = shape[static_cast<size_t>(axis)];
    if (l < 0) t.unimplemented("a sequence length only known at run time (the body is unrolled)");
    if (len >= 0 && l != len) t.invalid("scan inputs have sequence lengths " + std::to_string(len) + " and " + std::to_string(l));
    len = l;
    xs.push_back(x);
  }
  if (len > kMaxUnrolledIterations) t.unimplemented("a sequence of " + std::to_string(len) + " (at most " + std::to_string(kMaxUnrolledIterations) + ", the body is unrolled)");
  int64_t batch = 1;
  if (v8) {
    batch = t.spec(xs[0]).shape[0];
    if (batch < 0) t.unimplemented("a batch only known at run time");
    if (t.has_input(0)) {
      std::vector<int64_t> lens = t.known_ints(0, "Scan's sequence_lens");
      for (int64_t l : lens)
        if (l != len) t.unimplemented("sequence_lens shorter than the sequence (" + std::to_string(l) + " of " + std::to_string(len) + ")");
    }
  }
  const std::string here = t.where();
  std::vector<std::vector<V>> final_states(n);
  std::vector<std::vector<V>> per_batch_outs(k);  // Scan-8: one stacked output per batch entry
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Slot> states;
    for (size_t j = 0; j < n; ++j) {
      Slot s = t.in(first + j);
      if (v8) {
        Slot sb;
        sb.value = take(t, t.value(first + j), 0, b);
        sb.spec = {t.spec(sb.value).dtype, t.spec(sb.value).shape};
        s = sb;
      }
      states.push_back(s);
    }
    std::vector<V> xb = xs;  // Scan-8: batch entry B's scan inputs, taken once
    if (v8)
      for (V& x : xb) x = take(t, x, 0, b);
    std::vector<std::vector<V>> outs_k(k);
    for (int64_t it = 0; it < len; ++it) {
      std::vector<Slot> ins = states;
      for (size_t j = 0; j < xb.size(); ++j) {
        V x = xb[j];
        const int64_t axis = v8 ? 0 : in_axes[j];
        Slot sl;
        sl.value = take(t, x, axis, in_dirs[j] ? len - 1 - it : it);
        sl.spec = {t.spec(sl.value).dtype, t.spec(sl.value).shape};
        ins.push_back(sl);
      }
      std::vector<Slot> outs = run_subgraph(t, body, ins, "in the body of " + here + ", iteration " + std::to_string(it) + ": ");
      for (size_t j = 0; j < n; ++j) {
        if (outs[j].spec.dtype != states[j].spec.dtype)
          t.invalid("the body changes state " + std::to_string(j) + " from " + common::dtype_name(states[j].spec.dtype) + " to " +
                    common::dtype_name(outs[j].spec.dtype));
        states[j] = outs[j];
      }
      for (size_t s = 0; s < k; ++s) outs_k[s].push_back(slot_value(t, outs[n + s], "scan output " + std::to_string(s)));
    }
    for (size_t j = 0; j < n; ++j) final_states[j].push_back(slot_value(t, states[j], "state " + std::to_string(j)));
    for (size_t s = 0; s < k; ++s) {
      if (outs_k[s].empty()) t.unimplemented("scan output " + std::to_string(s) + " of an empty sequence (its shape is unknown)");
      if (out_dirs[s]) std::reverse(outs_k[s].begin(), outs_k[s].end());
      const int64_t rank = static_cast<int64_t>(t.spec(outs_k[s][0]).shape.size()) + 1;
      int64_t axis = out_axes[s];
      if (axis < -rank || axis >= rank) t.invalid("scan_output_axes entry " + std::to_string(axis) + " for rank " + std::to_string(rank));
      if (axis < 0) axis += rank;
      per_batch_outs[s].push_back(stack_along(t, outs_k[s], axis, "scan output " + std::to_string(s)));
    }
  }
  for (size_t j = 0; j < n; ++j) {
    if (!v8) t.set_output(j, final_states[j][0]);
    else t.set_output(j, t.emit1("stack", final_states[j], {Attr::i("dim", 0)}));
  }
  for (size_t s = 0; s < k; ++s) {
    if (!v8) t.set_output(n + s, per_batch_outs[s][0]);
    else t.set_output(n + s, t.emit1("stack", per_batch_outs[s], {Attr::i("dim", 0)}));
  }
}

}  // namespace

const std::vector<OpRule>& control_flow_rows() {
  static const std::vector<OpRule> rows = {
      {"If", 1, 25, "(the branch taken)", if_op, "a condition known at load or computed while the model runs (staged); tensor outputs"},
      {"Loop", 1, 25, "(the body unrolled)+stack", loop, "tensor values; at most 4096 iterations"},
      {"Scan", 8, 25, "(the body unrolled)+index_select+stack", scan, "sequence length known at load; at most 4096 iterations; Scan-8 without shorter sequence_lens"},
  };
  return rows;
}

}  // namespace hal::onnx::detail
