// fold_constants: nodes reading only constants run once on the device and
// become constants.
#include <algorithm>
#include <cstring>

#include "graph/catalog.hpp"
#include "hal/runtime/graph_passes.hpp"

namespace hal {
namespace {

uint64_t byte_size(const ValueSpec& v) {
  uint64_t n = common::dtype_size(v.dtype);
  for (int64_t d : v.shape) n *= static_cast<uint64_t>(d);
  return n;
}

bool concrete(const ValueSpec& v) {
  return std::all_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d >= 0; });
}

// A device buffer holding a tensor of SPEC (at least one byte: allocate
// refuses 0) and a view of it.
struct DeviceValue {
  Buffer buffer;
  TensorView view;
  DeviceValue(Device& device, const ValueSpec& spec)
      : buffer(device.allocate(std::max<uint64_t>(1, byte_size(spec)))), view(buffer, spec.dtype, spec.shape) {}
};

// NODE's outputs computed on DEVICE from the constants it reads.
std::vector<std::vector<uint8_t>> run_once(const Graph& g, const Graph::Node& node, Device& device) {
  Graph one;
  std::vector<Graph::Value> in;
  std::vector<DeviceValue> inputs;
  for (uint32_t id : node.inputs) {
    if (id == HAL_GRAPH_NO_VALUE) {
      in.emplace_back();
      continue;
    }
    const ValueSpec& spec = g.values()[id];
    in.push_back(one.input(spec.dtype, spec.shape));
    inputs.emplace_back(device, spec);
    const std::vector<uint8_t>& bytes = *g.constant_data(id);
    if (!bytes.empty()) inputs.back().buffer.copy_from_host(bytes.data(), bytes.size());
  }
  std::vector<ValueSpec> specs;
  for (uint32_t id : node.outputs) specs.push_back(g.values()[id]);
  for (Graph::Value v : one.add_node(node.op, in, node.attrs, specs)) one.mark_output(v);
  std::vector<DeviceValue> outputs;
  for (const ValueSpec& spec : specs) outputs.emplace_back(device, spec);
  std::vector<const TensorView*> in_views, out_views;
  for (const DeviceValue& v : inputs) in_views.push_back(&v.view);
  for (const DeviceValue& v : outputs) out_views.push_back(&v.view);
  compile(device, one).run(in_views, out_views);
  std::vector<std::vector<uint8_t>> result;
  for (size_t o = 0; o < outputs.size(); ++o) {
    result.emplace_back(byte_size(specs[o]));
    if (!result.back().empty()) outputs[o].buffer.copy_to_host(result.back().data(), result.back().size());
  }
  return result;
}

}  // namespace

size_t fold_constants(Graph& g, Device& device, size_t max_bytes) {
  std::vector<bool> is_output(g.values().size(), false);
  for (uint32_t id : g.outputs()) is_output[id] = true;
  std::vector<bool> folded(g.nodes().size(), false);
  size_t count = 0;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const Graph::Node node = g.nodes()[n];  // a copy: constants added below grow the graph
    const common::OpSchema* schema = common::catalog::find_schema(node.op.c_str());
    if (schema == nullptr || std::strcmp(schema->group, "random") == 0) continue;
    bool foldable = std::all_of(node.inputs.begin(), node.inputs.end(),
                                [&](uint32_t id) { return id == HAL_GRAPH_NO_VALUE || g.is_constant(id); });
    for (uint32_t id : node.outputs)
      foldable = foldable && !is_output[id] && concrete(g.values()[id]) && byte_size(g.values()[id]) <= max_bytes;
    if (!foldable) continue;
    std::vector<std::vector<uint8_t>> bytes;
    try {
      bytes = run_once(g, node, device);
    } catch (const Error& e) {
      // An op or dtype the device does not run: the node stays for the
      // partitioner to place (on a fallback device).
      if (e.code() == HAL_STATUS_UNIMPLEMENTED || e.code() == HAL_STATUS_UNSUPPORTED_DTYPE) continue;
      throw Error(e.code(), "fold_constants: node " + std::to_string(n) + " ('" + node.op + "'): " + e.what());
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueSpec spec = g.values()[node.outputs[o]];
      Graph::Value c = g.constant(spec.dtype, spec.shape, std::move(bytes[o]), g.value_name(node.outputs[o]));
      g.replace_uses(Graph::Value{node.outputs[o]}, c);
    }
    folded[n] = true;
    ++count;
  }
  if (count > 0) {
    g.remove_nodes(folded);
    g.remove_unused_values();
  }
  return count;
}

}  // namespace hal
