// fuse_patterns: one forward walk matching each mean node against the
// layer normalisation exporters write without a LayerNormalization op
// (ONNX before opset 17, PyTorch's TorchScript exporter):
//
//   m = mean(x, trailing dims, keepdim)   d = sub(x, m)   p = pow(d, 2)
//   v = mean(p, same dims, keepdim)       s = sqrt(add(v, eps))   n = div(d, s)
//   [y = mul(n, weight)]  [z = add(y, bias)]
//
// RMS normalisation (no RMSNormalization op before opset 23):
//
//   x * rsqrt(mean(x^2, trailing dims, keepdim) + eps) [* weight]
//
// and each erf node against GELU written out (no Gelu op before opset 20):
//
//   y = mul(mul(x, add(erf(div(x, sqrt(2))), 1)), 0.5)
//
// replacing each by one layer_norm / rms_norm / gelu node (the reverse of
// decompose).
#include <cmath>
#include <cstring>
#include <memory>

#include "hal/runtime/graph_passes.hpp"
#include "rewrite.hpp"

namespace hal {
namespace {

const Attr* find(const Graph::Node& n, const char* name) {
  for (const Attr& a : n.attrs)
    if (a.name() == name) return &a;
  return nullptr;
}

// A scalar-typed attribute's value (int or float), DEFAULT when absent.
double scalar_attr(const Graph::Node& n, const char* name, double dflt) {
  const Attr* a = find(n, name);
  if (a == nullptr) return dflt;
  const hal_attr_t c = a->c_attr();
  if (c.type == HAL_ATTR_TYPE_FLOAT) return c.value.f;
  if (c.type == HAL_ATTR_TYPE_INT || c.type == HAL_ATTR_TYPE_BOOL) return static_cast<double>(c.value.i);
  return dflt - 1;  // not a scalar: never the default
}

// The value of a one-element float constant, or false.
bool constant_scalar(const Graph& g, uint32_t v, double& out) {
  const std::vector<uint8_t>* bytes = g.constant_data(v);
  if (bytes == nullptr) return false;
  const ValueSpec& s = g.values()[v];
  for (int64_t d : s.shape)
    if (d != 1) return false;
  if (s.dtype == HAL_DTYPE_FLOAT32 && bytes->size() == 4) {
    float f;
    std::memcpy(&f, bytes->data(), 4);
    out = f;
    return true;
  }
  if (s.dtype == HAL_DTYPE_FLOAT64 && bytes->size() == 8) {
    std::memcpy(&out, bytes->data(), 8);
    return true;
  }
  return false;
}

struct Walker {
  Graph& g;
  std::vector<std::vector<size_t>> readers;
  std::vector<bool> output;
  std::vector<int64_t> producer;

  explicit Walker(Graph& graph)
      : g(graph), readers(graph.values().size()), output(graph.values().size(), false),
        producer(graph.values().size(), -1) {
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      for (uint32_t v : g.nodes()[i].inputs)
        if (v != HAL_GRAPH_NO_VALUE) readers[v].push_back(i);
      for (uint32_t v : g.nodes()[i].outputs) producer[v] = static_cast<int64_t>(i);
    }
    for (uint32_t v : g.outputs()) output[v] = true;
  }
  // The node reading V when exactly one does and V is no graph output.
  const Graph::Node* sole(uint32_t v, size_t* index = nullptr) const {
    if (output[v] || readers[v].size() != 1) return nullptr;
    if (index) *index = readers[v][0];
    return &g.nodes()[readers[v][0]];
  }
  // The other input of binary node N besides V (V read once), or NO_VALUE.
  static uint32_t other(const Graph::Node& n, uint32_t v) {
    if (n.inputs.size() != 2) return HAL_GRAPH_NO_VALUE;
    if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
    if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
    return HAL_GRAPH_NO_VALUE;
  }
};

// mean over the trailing K dims of its input with keepdim (no dtype), or 0.
size_t trailing_mean(const Graph& g, const Graph::Node& n) {
  if (n.op != "mean" || n.inputs.size() != 1 || n.outputs.size() != 1) return 0;
  const Attr* dims = find(n, "dim");
  const Attr* keep = find(n, "keepdim");
  const Attr* dtype = find(n, "dtype");
  if (dims == nullptr || keep == nullptr || keep->c_attr().value.i == 0) return 0;
  if (dtype != nullptr && static_cast<hal_dtype_e>(dtype->c_attr().value.i) != HAL_DTYPE_INVALID) return 0;
  const hal_attr_t c = dims->c_attr();
  const int64_t rank = static_cast<int64_t>(g.values()[n.inputs[0]].shape.size());
  if (c.type != HAL_ATTR_TYPE_INTS || c.count == 0 || static_cast<int64_t>(c.count) > rank) return 0;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t k = 0; k < c.count; ++k) {
    int64_t d = c.value.ints[k] < 0 ? c.value.ints[k] + rank : c.value.ints[k];
    if (d < rank - static_cast<int64_t>(c.count) || d >= rank || seen[static_cast<size_t>(d)]) return 0;
    seen[static_cast<size_t>(d)] = true;
  }
  return c.count;
}

// A pattern found: the catalog node to put in its place (OP on INPUTS with
// ATTRS; its first output replaces RESULT; a norm's statistics outputs have
// RESULT's shape with the last K dims 1) and the nodes it replaces.
struct Match {
  std::string op;
  std::vector<Graph::Value> inputs;
  std::vector<Attr> attrs;
  uint32_t result = 0;
  size_t k = 0;
  size_t stats = 0;  // statistics outputs
  std::vector<size_t> nodes;
};

// The last K dims of SHAPE, when all concrete (else empty).
std::vector<int64_t> trailing(const std::vector<int64_t>& shape, size_t k) {
  std::vector<int64_t> dims(shape.end() - static_cast<std::ptrdiff_t>(k), shape.end());
  for (int64_t d : dims)
    if (d <= 0) return {};
  return dims;
}

// GELU written out around erf node E (the exporters' form, operands of add
// and mul in either order, div by sqrt(2) or mul by its inverse).
bool match_gelu(const Graph& g, const Walker& w, size_t e, Match& out) {
  const Graph::Node& erf = g.nodes()[e];
  if (erf.op != "erf" || erf.inputs.size() != 1 || erf.outputs.size() != 1) return false;
  const int64_t scaled_at = w.producer[erf.inputs[0]];
  if (scaled_at < 0 || w.sole(erf.inputs[0]) != &erf) return false;
  const Graph::Node& scaled = g.nodes()[static_cast<size_t>(scaled_at)];
  double c = 0;
  if (scaled.inputs.size() != 2 || !constant_scalar(g, scaled.inputs[1], c)) return false;
  const bool by_root2 = (scaled.op == "div" && std::fabs(c - 1.4142135623730951) < 1e-6) ||
                        (scaled.op == "mul" && std::fabs(c - 0.7071067811865476) < 1e-6);
  if (!by_root2) return false;
  const uint32_t x = scaled.inputs[0];
  const ValueSpec& xs = g.values()[x];
  if (xs.dtype != HAL_DTYPE_FLOAT32 && xs.dtype != HAL_DTYPE_FLOAT64) return false;
  size_t add_at = 0, mul_at = 0, half_at = 0;
  const Graph::Node* add = w.sole(erf.outputs[0], &add_at);
  double one = 0;
  if (!add || add->op != "add" || scalar_attr(*add, "alpha", 1) != 1 ||
      !constant_scalar(g, Walker::other(*add, erf.outputs[0]), one) || one != 1.0)
    return false;
  const Graph::Node* mul = w.sole(add->outputs[0], &mul_at);
  if (!mul || mul->op != "mul" || Walker::other(*mul, add->outputs[0]) != x) return false;
  const Graph::Node* half = w.sole(mul->outputs[0], &half_at);
  double h = 0;
  if (!half || half->op != "mul" || !constant_scalar(g, Walker::other(*half, mul->outputs[0]), h) || h != 0.5)
    return false;
  if (g.values()[half->outputs[0]] != xs) return false;
  out = Match{"gelu", {Graph::Value{x}}, {}, half->outputs[0], 0, 0,
              {static_cast<size_t>(scaled_at), e, add_at, mul_at, half_at}};
  return true;
}

// RMS normalisation written out around mean node I (as exporters write it
// before ONNX opset 23): mean(pow(x, 2) or mul(x, x), trailing dims,
// keepdim) + eps, then x times its rsqrt (or reciprocal of its sqrt, or x
// divided by its sqrt), optionally times a weight of the normalised shape.
bool match_rms(const Graph& g, const Walker& w, size_t i, Match& out) {
  const Graph::Node& mean = g.nodes()[i];
  const size_t k = trailing_mean(g, mean);
  if (k == 0) return false;
  const int64_t sq_at = w.producer[mean.inputs[0]];
  if (sq_at < 0 || w.sole(mean.inputs[0]) != &mean) return false;
  const Graph::Node& sq = g.nodes()[static_cast<size_t>(sq_at)];
  double two = 0;
  if (sq.inputs.size() != 2) return false;
  const bool squares = (sq.op == "pow" && constant_scalar(g, sq.inputs[1], two) && two == 2.0) ||
                       (sq.op == "mul" && sq.inputs[0] == sq.inputs[1]);
  if (!squares) return false;
  const uint32_t x = sq.inputs[0];
  const ValueSpec& xs = g.values()[x];
  if (xs.dtype != HAL_DTYPE_FLOAT32 && xs.dtype != HAL_DTYPE_FLOAT64) return false;
  std::vector<size_t> nodes = {static_cast<size_t>(sq_at), i};
  size_t at = 0;
  const Graph::Node* add = w.sole(mean.outputs[0], &at);
  double eps = 0;
  if (!add || add->op != "add" || scalar_attr(*add, "alpha", 1) != 1 ||
      !constant_scalar(g, Walker::other(*add, mean.outputs[0]), eps) || !(eps >= 0))
    return false;
  nodes.push_back(at);
  // x * rsqrt(e), x * reciprocal(sqrt(e)) or x / sqrt(e)
  const Graph::Node* next = w.sole(add->outputs[0], &at);
  if (!next) return false;
  nodes.push_back(at);
  const Graph::Node* apply = nullptr;
  if (next->op == "rsqrt" || next->op == "sqrt") {
    const bool root = next->op == "sqrt";
    const Graph::Node* after = w.sole(next->outputs[0], &at);
    if (!after) return false;
    if (root && after->op == "reciprocal") {
      nodes.push_back(at);
      const uint32_t r = after->outputs[0];
      apply = w.sole(r, &at);
      if (!apply || apply->op != "mul" || Walker::other(*apply, r) != x) return false;
    } else if (root && after->op == "div" && after->inputs.size() == 2 && after->inputs[0] == x &&
               after->inputs[1] == next->outputs[0]) {
      apply = after;
    } else if (!root && after->op == "mul" && Walker::other(*after, next->outputs[0]) == x) {
      apply = after;
    } else {
      return false;
    }
  } else {
    return false;
  }
  nodes.push_back(at);
  uint32_t result = apply->outputs[0];
  if (g.values()[result] != xs) return false;
  const std::vector<int64_t> normalized = trailing(xs.shape, k);
  if (normalized.empty()) return false;
  Graph::Value weight{};
  if (const Graph::Node* mul = w.sole(result, &at); mul && mul->op == "mul") {
    const uint32_t wv = Walker::other(*mul, result);
    if (wv != HAL_GRAPH_NO_VALUE && g.values()[wv].dtype == xs.dtype && g.values()[wv].shape == normalized &&
        g.values()[mul->outputs[0]] == xs) {
      weight = Graph::Value{wv};
      nodes.push_back(at);
      result = mul->outputs[0];
    }
  }
  out = Match{"rms_norm", {Graph::Value{x}, weight},
              {Attr::ints("normalized_shape", normalized), Attr::f("eps", eps)}, result, k, 1, std::move(nodes)};
  return true;
}

// Layer normalisation written out around mean node I (see the top).
bool match_layer_norm(const Graph& g, const Walker& w, size_t i, Match& out) {
  const Graph::Node& m = g.nodes()[i];
  const size_t k = trailing_mean(g, m);
  if (k == 0) return false;
  const uint32_t x = m.inputs[0];
  const ValueSpec xs = g.values()[x];
  if (xs.dtype != HAL_DTYPE_FLOAT32 && xs.dtype != HAL_DTYPE_FLOAT64) return false;
  const std::vector<int64_t> normalized = trailing(xs.shape, k);
  if (normalized.empty()) return false;
  std::vector<size_t> nodes = {i};
  size_t at = 0;
  // d = x - m
  const Graph::Node* sub = w.sole(m.outputs[0], &at);
  if (!sub || sub->op != "sub" || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != m.outputs[0] ||
      scalar_attr(*sub, "alpha", 1) != 1)
    return false;
  nodes.push_back(at);
  const uint32_t d = sub->outputs[0];
  // d is read by the pow (or mul) and the div, nothing else.
  if (w.output[d] || w.readers[d].size() != 2) return false;
  const Graph::Node* sq = nullptr;
  const Graph::Node* dv = nullptr;
  size_t sq_at = 0, dv_at = 0;
  for (size_t r : w.readers[d]) {
    const Graph::Node& node = g.nodes()[r];
    if (node.op == "div" && node.inputs.size() == 2 && node.inputs[0] == d) {
      dv = &node;
      dv_at = r;
    } else {
      sq = &node;
      sq_at = r;
    }
  }
  double two = 0;
  if (!sq || !dv || !(sq->op == "pow" && sq->inputs.size() == 2 && sq->inputs[0] == d &&
                      constant_scalar(g, sq->inputs[1], two) && two == 2.0))
    return false;
  nodes.push_back(sq_at);
  // v = mean(p), same dims
  const Graph::Node* var = w.sole(sq->outputs[0], &at);
  if (!var || trailing_mean(g, *var) != k || find(*var, "dim")->c_attr().count != find(m, "dim")->c_attr().count)
    return false;
  nodes.push_back(at);
  // s = sqrt(v + eps)
  const Graph::Node* add = w.sole(var->outputs[0], &at);
  double eps = 0;
  if (!add || add->op != "add" || scalar_attr(*add, "alpha", 1) != 1 ||
      !constant_scalar(g, Walker::other(*add, var->outputs[0]), eps) || !(eps >= 0))
    return false;
  nodes.push_back(at);
  const Graph::Node* root = w.sole(add->outputs[0], &at);
  if (!root || root->op != "sqrt" || w.sole(root->outputs[0]) != dv || dv->inputs[1] != root->outputs[0]) return false;
  nodes.push_back(at);
  nodes.push_back(dv_at);
  uint32_t result = dv->outputs[0];
  // [* weight] [+ bias]: values of shape normalized_shape in x's dtype.
  auto param = [&](uint32_t v) {
    return v != HAL_GRAPH_NO_VALUE && g.values()[v].dtype == xs.dtype && g.values()[v].shape == normalized;
  };
  Graph::Value weight{}, bias{};
  if (const Graph::Node* mul = w.sole(result, &at);
      mul && mul->op == "mul" && param(Walker::other(*mul, result)) && g.values()[mul->outputs[0]].shape == xs.shape) {
    weight = Graph::Value{Walker::other(*mul, result)};
    nodes.push_back(at);
    result = mul->outputs[0];
    if (const Graph::Node* b = w.sole(result, &at);
        b && b->op == "add" && scalar_attr(*b, "alpha", 1) == 1 && param(Walker::other(*b, result)) &&
        g.values()[b->outputs[0]].shape == xs.shape) {
      bias = Graph::Value{Walker::other(*b, result)};
      nodes.push_back(at);
      result = b->outputs[0];
    }
  }
  if (g.values()[result].dtype != xs.dtype || g.values()[result].shape != xs.shape) return false;
  // Every intermediate is read only inside the pattern (checked through
  // sole() for all but d, whose two readers were taken).
  out = Match{"layer_norm", {Graph::Value{x}, weight, bias},
              {Attr::ints("normalized_shape", normalized), Attr::f("eps", eps)}, result, k, 2, std::move(nodes)};
  return true;
}

}  // namespace

size_t fuse_patterns(Graph& g, const std::function<bool(const std::string& op)>& supported) {
  auto walker = std::make_unique<Walker>(g);  // rebuilt after each replacement (readers move)
  std::vector<bool> removed(g.nodes().size(), false);
  size_t count = 0;
  const size_t n = g.nodes().size();
  auto wants = [&](const char* op) { return !supported || supported(op); };
  for (size_t i = 0; i < n; ++i) {
    if (removed[i]) continue;
    Match m;
    const bool found = (wants("gelu") && match_gelu(g, *walker, i, m)) ||
                       (wants("rms_norm") && match_rms(g, *walker, i, m)) ||
                       (wants("layer_norm") && match_layer_norm(g, *walker, i, m));
    if (!found) continue;
    bool free = true;
    for (size_t r : m.nodes) free = free && !removed[r];
    if (!free) continue;
    // The replacement: the result's spec, then statistics of its shape with the normalised dims 1.
    const ValueSpec result = g.values()[m.result];
    ValueSpec stat = result;
    for (size_t j = stat.shape.size() - m.k; j < stat.shape.size(); ++j) stat.shape[j] = 1;
    std::vector<ValueSpec> outputs(1 + m.stats, stat);
    outputs[0] = result;
    const std::vector<Graph::Value> made = g.add_node(m.op, m.inputs, m.attrs, outputs);
    g.replace_uses(Graph::Value{m.result}, made[0]);
    removed.resize(g.nodes().size(), false);
    for (size_t r : m.nodes) removed[r] = true;
    ++count;
    walker = std::make_unique<Walker>(g);
  }
  if (count > 0) detail::drop_replaced(g, std::move(removed));
  return count;
}

}  // namespace hal
