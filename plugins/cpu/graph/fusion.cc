#include "fusion.hpp"

#include <cstring>
#include <string>

#include "../ops/fused.hpp"
#include "hal/sdk/graph_uses.hpp"

namespace hal::cpu {
namespace {

using sdk::Graph;
using sdk::GraphNode;
using sdk::kNoValue;

bool is(const GraphNode& n, const char* op) { return std::strcmp(n.op(), op) == 0; }

using Uses = sdk::GraphUses;

bool float32(const Graph& g, uint32_t v) { return v == kNoValue || g.values[v].dtype == HAL_DTYPE_FLOAT32; }

bool same_shape(const Graph& g, uint32_t a, uint32_t b) {
  return g.values[a].dtype == g.values[b].dtype && g.values[a].shape == g.values[b].shape;
}

// conv2d [+ add(residual)] [+ relu], float32, batched: one oneDNN primitive.
void match_conv(sdk::Device& device, const Graph& g, const Uses& uses, size_t n, std::vector<bool>& taken,
                std::vector<sdk::HostGraphFusion>& out) {
  const GraphNode& conv = g.nodes[n];
  const uint32_t x = conv.inputs[0], w = conv.inputs[1], b = conv.inputs[2];  // padded to the schema's 3
  if (g.values[x].rank() != 4 || !float32(g, x) || !float32(g, w) || !float32(g, b)) return;
  sdk::HostGraphFusion f;
  f.nodes = {n};
  uint32_t last = conv.outputs[0];
  uint32_t residual = kNoValue;
  std::string label = "conv2d";
  int64_t m = uses.sole_reader(last);
  if (m >= 0 && !taken[m] && is(g.nodes[m], "add") && g.nodes[m].attrs[0].scalar.to_double() == 1.0) {
    const GraphNode& add = g.nodes[m];
    const uint32_t other = add.inputs[0] == last ? add.inputs[1] : add.inputs[0];
    if (other != last && same_shape(g, other, last) && same_shape(g, add.outputs[0], last)) {
      f.nodes.push_back(static_cast<size_t>(m));
      residual = other;
      last = add.outputs[0];
      label += "+add";
      m = uses.sole_reader(last);
    }
  }
  bool relu = false;
  if (m >= 0 && !taken[m] && is(g.nodes[m], "relu") && same_shape(g, g.nodes[m].outputs[0], last)) {
    f.nodes.push_back(static_cast<size_t>(m));
    last = g.nodes[m].outputs[0];
    relu = true;
    label += "+relu";
  }
  if (uses.output[last]) return;  // a graph output: the caller's layout
  for (size_t k : f.nodes) taken[k] = true;
  f.inputs = {x, w, b};
  if (residual != kNoValue) f.inputs.push_back(residual);
  f.outputs = {last};
  f.label = label;
  const bool weights_constant = g.constant(w) != nullptr;
  const sdk::OpSchema* schema = conv.schema;
  const std::vector<sdk::AttrValue> attrs = conv.attrs;
  const bool has_residual = residual != kNoValue;
  sdk::Device* dev = &device;  // outlives its executables
  auto call_of = [dev, schema, attrs](const std::vector<sdk::Tensor>& in) {
    return sdk::OpCallBuilder::assemble(*schema, *dev, std::vector<sdk::Tensor>(in.begin(), in.begin() + 3), attrs, {});
  };
  f.make = [call_of, has_residual, relu, weights_constant](const std::vector<sdk::Tensor>& in,
                                                           const std::vector<sdk::Tensor>& out) {
    return make_conv2d_step(*call_of(in), out[0], has_residual ? &in[3] : nullptr, relu, weights_constant);
  };
  // Channels-last where oneDNN computes it so: a chain of convolutions then
  // reorders nothing between its steps.
  f.output_orders = [call_of, has_residual, relu](const std::vector<sdk::Tensor>& in,
                                                  const std::vector<sdk::Tensor>&) {
    return std::vector<std::vector<int>>{conv2d_prefers_channels_last(*call_of(in), has_residual, relu)
                                             ? std::vector<int>{0, 2, 3, 1}
                                             : std::vector<int>{}};
  };
  out.push_back(std::move(f));
}

// max_pool2d reading a fused convolution's output, float32, batched, its
// indices unread: a step in the layout the convolution leaves (channels-last
// stays channels-last for the convolutions after it).
void match_max_pool(sdk::Device& device, const Graph& g, const Uses& uses, const std::vector<int64_t>& fused_conv_output,
                    size_t n, std::vector<bool>& taken, std::vector<sdk::HostGraphFusion>& out) {
  const GraphNode& pool = g.nodes[n];
  const uint32_t x = pool.inputs[0];
  if (g.values[x].rank() != 4 || !float32(g, x) || fused_conv_output[x] < 0) return;
  if (pool.outputs.size() != 2 || uses.output[pool.outputs[1]] || !uses.readers[pool.outputs[1]].empty()) return;
  taken[n] = true;
  sdk::HostGraphFusion f;
  f.nodes = {n};
  f.inputs = {x};
  f.outputs = {pool.outputs[0]};
  f.label = "max_pool2d";
  const sdk::OpSchema* schema = pool.schema;
  const std::vector<sdk::AttrValue> attrs = pool.attrs;
  sdk::Device* dev = &device;  // outlives its executables
  f.make = [dev, schema, attrs](const std::vector<sdk::Tensor>& in, const std::vector<sdk::Tensor>&) {
    return make_max_pool2d_step(*sdk::OpCallBuilder::assemble(*schema, *dev, std::vector<sdk::Tensor>{in[0]}, attrs, {}));
  };
  f.output_orders = [](const std::vector<sdk::Tensor>& in, const std::vector<sdk::Tensor>&) {
    const bool channels_last = in[0].strides[1] == 1 && in[0].shape[1] > 1;
    return std::vector<std::vector<int>>{channels_last ? std::vector<int>{0, 2, 3, 1} : std::vector<int>{}};
  };
  out.push_back(std::move(f));
}

// NODE as an activation a GEMM can apply to its result, or false.
bool gemm_activation(const GraphNode& node, GemmActivation& act) {
  if (is(node, "relu")) act = GemmActivation::kRelu;
  else if (is(node, "tanh")) act = GemmActivation::kTanh;
  else if (is(node, "sigmoid")) act = GemmActivation::kSigmoid;
  else if (is(node, "silu")) act = GemmActivation::kSilu;
  else if (is(node, "gelu") && !node.attrs.empty() && node.attrs[0].as_string() == "none") act = GemmActivation::kGelu;
  else if (is(node, "gelu") && !node.attrs.empty() && node.attrs[0].as_string() == "tanh") act = GemmActivation::kGeluTanh;
  else return false;
  return true;
}

// linear(x, w, b?), addmm(bias, a, b) or mm(a, b) + an activation (relu, gelu, tanh,
// sigmoid, silu), float32, the product read by nothing else: one oneDNN
// matmul with the bias and the activation as its post-op. A linear whose
// weight is a constant is a step even without an activation (its weight
// transposed once).
void match_gemm_activation(sdk::Device& device, const Graph& g, const Uses& uses, size_t n, std::vector<bool>& taken,
                           std::vector<sdk::HostGraphFusion>& out) {
  const GraphNode& gemm = g.nodes[n];
  if (gemm.outputs.size() != 1 || !float32(g, gemm.outputs[0])) return;
  for (uint32_t v : gemm.inputs)
    if (!float32(g, v)) return;
  // A linear's constant 2-D float32 weight of at most 1 MiB: kept transposed by the step (alone, without
  // an activation, too); a larger one is not held twice.
  bool weight_constant = is(gemm, "linear") && gemm.inputs.size() > 1 && gemm.inputs[1] != kNoValue &&
                         g.values[gemm.inputs[1]].rank() == 2 && g.constant(gemm.inputs[1]) != nullptr;
  if (weight_constant) {
    const auto& ws = g.values[gemm.inputs[1]].shape;
    weight_constant = ws[0] >= 0 && ws[1] >= 0 && ws[0] * ws[1] * 4 <= kMaxTransposedWeightBytes;
  }
  const int64_t m = uses.sole_reader(gemm.outputs[0]);
  GemmActivation act = GemmActivation::kNone;  // gemm_activation sets it only for an activation
  if (m >= 0 && !taken[static_cast<size_t>(m)] && gemm_activation(g.nodes[static_cast<size_t>(m)], act)) {
    const GraphNode& activation = g.nodes[static_cast<size_t>(m)];
    if (activation.inputs.size() != 1 || activation.outputs.size() != 1 ||
        !same_shape(g, activation.outputs[0], gemm.outputs[0]))
      act = GemmActivation::kNone;
  }
  if (act == GemmActivation::kNone && !weight_constant) return;
  sdk::HostGraphFusion f;
  f.nodes = {n};
  f.inputs = gemm.inputs;  // padded to the schema's count (an absent bias: kNoValue)
  f.outputs = {gemm.outputs[0]};
  f.label = std::string(gemm.op()) + " (weight kept transposed)";
  if (act != GemmActivation::kNone) {
    const GraphNode& activation = g.nodes[static_cast<size_t>(m)];
    f.nodes.push_back(static_cast<size_t>(m));
    f.outputs = {activation.outputs[0]};
    f.label = std::string(gemm.op()) + "+" + activation.op();
  }
  for (size_t k : f.nodes) taken[k] = true;
  const sdk::OpSchema* schema = gemm.schema;
  const std::vector<sdk::AttrValue> attrs = gemm.attrs;
  sdk::Device* dev = &device;  // outlives its executables
  f.make = [dev, schema, attrs, act, weight_constant](const std::vector<sdk::Tensor>&, const std::vector<sdk::Tensor>&) {
    return make_gemm_activation_step(*dev, *schema, attrs, act, weight_constant);
  };
  out.push_back(std::move(f));
}

}  // namespace

std::vector<sdk::HostGraphFusion> find_fusions(sdk::Device& device, const Graph& g) {
  std::vector<sdk::HostGraphFusion> fusions;
  std::vector<bool> taken(g.nodes.size(), false);
  Uses uses(g);
  std::vector<int64_t> fused_conv_output(g.values.size(), -1);  // value -> its fusion
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (taken[n]) continue;
    if (is(g.nodes[n], "conv2d")) {
      match_conv(device, g, uses, n, taken, fusions);
      if (taken[n]) fused_conv_output[fusions.back().outputs[0]] = static_cast<int64_t>(fusions.size() - 1);
    } else if (is(g.nodes[n], "max_pool2d")) {
      match_max_pool(device, g, uses, fused_conv_output, n, taken, fusions);
    } else if (is(g.nodes[n], "linear") || is(g.nodes[n], "addmm") || is(g.nodes[n], "mm")) {
      match_gemm_activation(device, g, uses, n, taken, fusions);
    }
  }
  return fusions;
}

}  // namespace hal::cpu
