// decompose: composite catalog ops rewritten into other catalog ops, by a
// table of rules. Each rule is data: the steps (an op, its inputs — the
// node's inputs, earlier steps' outputs or scalar constants — and its
// attributes, copied from the node or literal) and which step outputs
// replace the node's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <set>

#include "hal/runtime/graph_passes.hpp"
#include "rewrite.hpp"

namespace hal {
namespace {

struct Arg {
  enum Kind { kInput, kStep, kConst } kind;
  int index;     // node input or step
  double value;  // kConst: a 0-d constant in the node's compute dtype
};
Arg in(int i) { return {Arg::kInput, i, 0}; }
Arg step(int i) { return {Arg::kStep, i, 0}; }
Arg num(double v) { return {Arg::kConst, 0, v}; }

struct AttrArg {
  enum Kind { kCopy, kIntToInts, kTrue } kind;
  const char* name;  // on the step's op
  const char* from;  // on the node (kCopy, kIntToInts); absent there = the step op's default
};
AttrArg copy(const char* name, const char* from) { return {AttrArg::kCopy, name, from}; }
AttrArg as_ints(const char* name, const char* from) { return {AttrArg::kIntToInts, name, from}; }
AttrArg yes(const char* name) { return {AttrArg::kTrue, name, nullptr}; }

struct Step {
  const char* op;
  std::vector<Arg> inputs;
  std::vector<AttrArg> attrs;
};

struct Rule {
  const char* op;
  const char* when_attr;   // nullptr: always; else the node's string attr
  const char* when_value;  //   must be this (absent = the catalog default WHEN_DEFAULT)
  const char* when_default;
  std::vector<Step> steps;
  std::vector<int> outputs;  // step index per node output
};

const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);

// The table. docs/graph.md lists it; tests check each rule numerically.
const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
      // silu(x) = x * sigmoid(x)
      {"silu", nullptr, nullptr, nullptr, {{"sigmoid", {in(0)}, {}}, {"mul", {in(0), step(0)}, {}}}, {1}},
      // gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2)))
      {"gelu", "approximate", "none", "none",
       {{"mul", {in(0), num(M_SQRT1_2)}, {}},
        {"erf", {step(0)}, {}},
        {"add", {step(1), num(1)}, {}},
        {"mul", {in(0), step(2)}, {}},
        {"mul", {step(3), num(0.5)}, {}}},
       {4}},
      // gelu(x, 'tanh') = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
      {"gelu", "approximate", "tanh", "none",
       {{"mul", {in(0), in(0)}, {}},
        {"mul", {step(0), in(0)}, {}},
        {"mul", {step(1), num(0.044715)}, {}},
        {"add", {in(0), step(2)}, {}},
        {"mul", {step(3), num(kSqrt2OverPi)}, {}},
        {"tanh", {step(4)}, {}},
        {"add", {step(5), num(1)}, {}},
        {"mul", {in(0), step(6)}, {}},
        {"mul", {step(7), num(0.5)}, {}}},
       {8}},
      // sigmoid(x) = 1 / (1 + exp(-x))
      {"sigmoid", nullptr, nullptr, nullptr,
       {{"neg", {in(0)}, {}}, {"exp", {step(0)}, {}}, {"add", {step(1), num(1)}, {}}, {"reciprocal", {step(2)}, {}}},
       {3}},
      // rsqrt(x) = 1 / sqrt(x)
      {"rsqrt", nullptr, nullptr, nullptr, {{"sqrt", {in(0)}, {}}, {"reciprocal", {step(0)}, {}}}, {1}},
      // log_softmax(x, dim) = x - logsumexp(x, [dim], keepdim)
      {"log_softmax", nullptr, nullptr, nullptr,
       {{"logsumexp", {in(0)}, {as_ints("dim", "dim"), yes("keepdim")}}, {"sub", {in(0), step(0)}, {}}},
       {1}},
      // softmax(x, dim) = exp(x - logsumexp(x, [dim], keepdim))
      {"softmax", nullptr, nullptr, nullptr,
       {{"logsumexp", {in(0)}, {as_ints("dim", "dim"), yes("keepdim")}},
        {"sub", {in(0), step(0)}, {}},
        {"exp", {step(1)}, {}}},
       {2}},
      // addcmul(s, a, b, value) = s + value * (a * b); addcdiv likewise with a / b
      {"addcmul", nullptr, nullptr, nullptr,
       {{"mul", {in(1), in(2)}, {}}, {"add", {in(0), step(0)}, {copy("alpha", "value")}}},
       {1}},
      {"addcdiv", nullptr, nullptr, nullptr,
       {{"div", {in(1), in(2)}, {}}, {"add", {in(0), step(0)}, {copy("alpha", "value")}}},
       {1}},
      // lerp(s, e, w) = s + w * (e - s)
      {"lerp", nullptr, nullptr, nullptr,
       {{"sub", {in(1), in(0)}, {}}, {"mul", {in(2), step(0)}, {}}, {"add", {in(0), step(1)}, {}}},
       {2}},
  };
  return table;
}

const Attr* find_attr(const Graph::Node& node, const char* name) {
  for (const Attr& a : node.attrs)
    if (a.name() == name) return &a;
  return nullptr;
}

const Rule* rule_for(const Graph::Node& node) {
  for (const Rule& r : rules()) {
    if (node.op != r.op) continue;
    if (r.when_attr == nullptr) return &r;
    const Attr* a = find_attr(node, r.when_attr);
    hal_attr_t c = a ? a->c_attr() : hal_attr_t{};
    std::string v = a && c.type == HAL_ATTR_TYPE_STRING ? c.value.s : r.when_default;
    if (v == r.when_value) return &r;
  }
  return nullptr;
}

// Whether OP is supported or some rule for it uses only ops that are
// (recursively; the table has no loops, DEPTH bounds a bad edit of it).
bool expressible(const std::string& op, const std::function<bool(const std::string&)>& supported, int depth = 0) {
  if (supported(op)) return true;
  if (depth > 8) return false;
  return std::any_of(rules().begin(), rules().end(), [&](const Rule& r) {
    return op == r.op && std::all_of(r.steps.begin(), r.steps.end(),
                                     [&](const Step& s) { return expressible(s.op, supported, depth + 1); });
  });
}

// A 0-d constant of V in DTYPE's bytes; float16 is not converted here, so a
// float16 node takes a float32 0-d constant (result_type keeps float16 for a
// dimensioned float16 tensor; plan() refuses a 0-d one).
std::pair<hal_dtype_e, std::vector<uint8_t>> scalar(hal_dtype_e dtype, double v) {
  std::vector<uint8_t> b;
  auto put = [&](const auto& x) {
    b.resize(sizeof(x));
    std::memcpy(b.data(), &x, sizeof(x));
  };
  if (dtype == HAL_DTYPE_FLOAT64) {
    put(v);
    return {dtype, b};
  }
  if (dtype == HAL_DTYPE_BFLOAT16) {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    uint16_t h = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);  // round to nearest even
    put(h);
    return {dtype, b};
  }
  put(static_cast<float>(v));
  return {HAL_DTYPE_FLOAT32, b};
}

std::vector<Attr> step_attrs(const Step& s, const Graph::Node& node) {
  std::vector<Attr> out;
  for (const AttrArg& a : s.attrs) {
    if (a.kind == AttrArg::kTrue) {
      out.push_back(Attr::b(a.name, true));
      continue;
    }
    const Attr* from = find_attr(node, a.from);
    if (from == nullptr) continue;
    hal_attr_t c = from->c_attr();
    if (a.kind == AttrArg::kIntToInts) {
      out.push_back(Attr::ints(a.name, {c.value.i}));
    } else if (c.type == HAL_ATTR_TYPE_FLOAT) {
      out.push_back(Attr::f(a.name, c.value.f));
    } else {
      Attr copy = Attr::i(a.name, c.value.i);
      out.push_back(c.type == HAL_ATTR_TYPE_BOOL ? Attr::b(a.name, c.value.i != 0) : copy);
    }
  }
  return out;
}

// Whether RULE reproduces NODE's outputs (dtype, rank, concrete sizes):
// the steps inferred on the node's value specs, nothing added to G.
bool plan(const Graph& g, const Graph::Node& node, const Rule& rule) {
  std::deque<ValueSpec> steps;  // stable addresses
  ValueSpec ref = node.inputs.empty() || node.inputs[0] == HAL_GRAPH_NO_VALUE ? ValueSpec{}
                                                                            : g.values()[node.inputs[0]];
  if (ref.dtype == HAL_DTYPE_FLOAT16 && ref.shape.empty()) return false;
  std::deque<ValueSpec> consts;  // stable addresses
  try {
    for (const Step& s : rule.steps) {
      std::vector<const ValueSpec*> in;
      for (const Arg& a : s.inputs) {
        if (a.kind == Arg::kInput) {
          if (static_cast<size_t>(a.index) >= node.inputs.size() || node.inputs[a.index] == HAL_GRAPH_NO_VALUE)
            return false;
          in.push_back(&g.values()[node.inputs[a.index]]);
        } else if (a.kind == Arg::kStep) {
          in.push_back(&steps[a.index]);
        } else {
          consts.push_back(ValueSpec{scalar(ref.dtype, a.value).first, {}});
          in.push_back(&consts.back());
        }
      }
      std::vector<ValueSpec> out = infer_node(s.op, in, step_attrs(s, node), 0);
      if (out.size() != 1) return false;
      steps.push_back(out[0]);
    }
  } catch (const Error&) {
    return false;  // a rule for another dtype or shape: the node stays
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const ValueSpec& want = g.values()[node.outputs[o]];
    const ValueSpec& got = steps[rule.outputs[o]];
    if (want.dtype != got.dtype || want.shape.size() != got.shape.size()) return false;
    for (size_t d = 0; d < want.shape.size(); ++d)
      if (want.shape[d] >= 0 && got.shape[d] >= 0 && want.shape[d] != got.shape[d]) return false;
  }
  return rule.outputs.size() == node.outputs.size();
}

// Adds RULE's steps for node N to G and points the node's readers at them.
void apply(Graph& g, size_t n, const Rule& rule) {
  const Graph::Node node = g.nodes()[n];
  hal_dtype_e dtype = g.values()[node.inputs[0]].dtype;
  std::vector<Graph::Value> steps;
  for (const Step& s : rule.steps) {
    std::vector<Graph::Value> in;
    for (const Arg& a : s.inputs) {
      if (a.kind == Arg::kInput) {
        in.push_back(Graph::Value{node.inputs[a.index]});
      } else if (a.kind == Arg::kStep) {
        in.push_back(steps[a.index]);
      } else {
        auto [dt, bytes] = scalar(dtype, a.value);
        in.push_back(g.constant(dt, {}, std::move(bytes)));
      }
    }
    steps.push_back(g.add_op(s.op, in, step_attrs(s, node)));
  }
  for (size_t o = 0; o < node.outputs.size(); ++o)
    g.replace_uses(Graph::Value{node.outputs[o]}, steps[rule.outputs[o]]);
}

}  // namespace

std::vector<std::string> decomposable_ops() {
  std::set<std::string> ops;
  for (const Rule& r : rules()) ops.insert(r.op);
  return {ops.begin(), ops.end()};
}

size_t decompose(Graph& g, const std::function<bool(const std::string& op)>& supported) {
  if (!supported) return 0;
  size_t total = 0;
  for (int round = 0; round < 8; ++round) {  // rules make ops other rules rewrite; the table has no loops
    std::vector<bool> rewritten(g.nodes().size(), false);
    size_t count = 0;
    const size_t nodes = g.nodes().size();
    for (size_t n = 0; n < nodes; ++n) {
      const Graph::Node& node = g.nodes()[n];
      if (supported(node.op)) continue;
      const Rule* rule = rule_for(node);
      if (rule == nullptr || !plan(g, node, *rule)) continue;
      bool reachable = std::all_of(rule->steps.begin(), rule->steps.end(),
                                   [&](const Step& s) { return expressible(s.op, supported); });
      if (!reachable) continue;
      apply(g, n, *rule);
      rewritten[n] = true;
      ++count;
    }
    if (count == 0) break;
    detail::drop_replaced(g, std::move(rewritten));
    total += count;
  }
  return total;
}

}  // namespace hal
