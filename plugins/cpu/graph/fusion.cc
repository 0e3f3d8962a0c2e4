#include "fusion.hpp"

#include <cstring>
#include <string>

#include "../ops/fused.hpp"

namespace hal::cpu {
namespace {

using sdk::Graph;
using sdk::GraphNode;
using sdk::kNoValue;

bool is(const GraphNode& n, const char* op) { return std::strcmp(n.op(), op) == 0; }

// Readers of each value (node indices) and which values are graph outputs.
struct Uses {
  std::vector<std::vector<size_t>> readers;
  std::vector<bool> output;
  explicit Uses(const Graph& g) : readers(g.values.size()), output(g.values.size(), false) {
    for (size_t n = 0; n < g.nodes.size(); ++n)
      for (uint32_t v : g.nodes[n].inputs)
        if (v != kNoValue) readers[v].push_back(n);
    for (uint32_t v : g.outputs) output[v] = true;
  }
  // The one node reading V when V is read by exactly one node and is not a
  // graph output (so a fusion may keep it internal), else -1.
  int64_t sole_reader(uint32_t v) const {
    return !output[v] && readers[v].size() == 1 ? static_cast<int64_t>(readers[v][0]) : -1;
  }
};

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
  if (uses.output[last]) return;  // written by the step into the arena, row-major
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
  f.make = [dev, schema, attrs, has_residual, relu, weights_constant](const std::vector<sdk::Tensor>& in,
                                                                     const std::vector<sdk::Tensor>&) {
    std::vector<sdk::Tensor> call_in(in.begin(), in.begin() + 3);
    auto call = sdk::OpCallBuilder::assemble(*schema, *dev, std::move(call_in), attrs, {});
    return make_conv2d_step(*call, has_residual, relu, weights_constant);
  };
  out.push_back(std::move(f));
}

}  // namespace

std::vector<sdk::HostGraphFusion> find_fusions(sdk::Device& device, const Graph& g) {
  std::vector<sdk::HostGraphFusion> fusions;
  std::vector<bool> taken(g.nodes.size(), false);
  Uses uses(g);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!taken[n] && is(g.nodes[n], "conv2d")) match_conv(device, g, uses, n, taken, fusions);
  return fusions;
}

}  // namespace hal::cpu
