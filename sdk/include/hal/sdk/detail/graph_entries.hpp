// HAL C++ SDK, internal: the graph table's C entries (hal/graph.h) and the
// validation that turns a hal_graph_t into a hal::sdk::Graph and execute's
// tensors into Tensors (GraphBuilder; reuses OpCallBuilder's pieces).
// Reached through hal/sdk/ops.hpp, which completes detail::GraphTable.
#ifndef HAL_SDK_DETAIL_GRAPH_ENTRIES_HPP_
#define HAL_SDK_DETAIL_GRAPH_ENTRIES_HPP_

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "hal/common/extension.hpp"
#include "hal/hal.h"
#include "hal/sdk/detail/call.hpp"
#include "hal/sdk/detail/op_entries.hpp"
#include "hal/sdk/detail/registry.hpp"
#include "hal/sdk/graph.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::sdk {

struct GraphBuilder {
  // Validates G (see hal/sdk/graph.hpp for what is checked) and copies it.
  // Messages name the node ("node 2 ('mul')") or value and what is wrong.
  static std::shared_ptr<Graph> build(const hal_graph_t* g, Device& device) {
    if (g == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "graph is NULL");
    if (!HAL_STRUCT_HAS_FIELD(g, hal_graph_t, output_count))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_graph_t.struct_size ", g->struct_size, " is too small");
    common::require_well_formed_extension_chain(g->next, "hal_graph_t.next");
    if (g->value_count >= kNoValue)
      fail(HAL_STATUS_INVALID_ARGUMENT, "value_count ", g->value_count, " is too large");
    check_array(g->values, g->value_count, "values");
    check_array(g->nodes, g->node_count, "nodes");
    check_array(g->inputs, g->input_count, "inputs");
    check_array(g->outputs, g->output_count, "outputs");
    auto graph = std::make_shared<Graph>();
    graph->values.resize(g->value_count);
    for (size_t v = 0; v < g->value_count; ++v) parse_value(v, g->values[v], graph->values[v]);

    // Who produces each value: a node index, kGraphInput or kNobody.
    std::vector<int64_t> producer(g->value_count, kNobody);
    for (size_t i = 0; i < g->input_count; ++i) {
      uint32_t id = g->inputs[i];
      check_id(id, g->value_count, "graph input ", i);
      if (producer[id] == kGraphInput)
        fail(HAL_STATUS_INVALID_ARGUMENT, "graph input ", i, " is value ", id, ", which is already a graph input");
      producer[id] = kGraphInput;
      graph->inputs.push_back(id);
    }
    graph->nodes.reserve(g->node_count);
    for (size_t n = 0; n < g->node_count; ++n)
      graph->nodes.push_back(parse_node(*graph, n, g->nodes[n], producer, device));
    for (size_t i = 0; i < g->output_count; ++i) {
      uint32_t id = g->outputs[i];
      check_id(id, g->value_count, "graph output ", i);
      if (producer[id] == kNobody)
        fail(HAL_STATUS_INVALID_ARGUMENT, "graph output ", i, " is value ", id,
             ", which is neither a graph input nor produced by a node");
      graph->outputs.push_back(id);
    }
    parse_constants(g, *graph);
    parse_output_aliases(g, *graph);
    return graph;
  }

  // The tensors of the last execute whose overlaps were checked: a run
  // passing the same ones again (a training step's parameters and state)
  // skips those checks, which depend on nothing else. A run that finds MU
  // held checks in full.
  struct CheckedTensors {
    std::mutex mu;
    std::vector<Tensor> in, out;
  };

  // Validates execute's tensors against GRAPH's inputs and outputs and
  // copies them. ALIASES: whether the executable honours GRAPH's output
  // aliases (an aliased output may then be its input's very tensor).
  // CHECKED (nullable): the memo of the last checked tensors.
  static void bind(const Graph& graph, Device& device, const hal_tensor_t* const* inputs, size_t input_count,
                   const hal_tensor_t* const* outputs, size_t output_count, std::vector<Tensor>& in,
                   std::vector<Tensor>& out, bool aliases = false, CheckedTensors* checked = nullptr) {
    if (input_count != graph.inputs.size() || output_count != graph.outputs.size())
      fail(HAL_STATUS_INVALID_ARGUMENT, "got ", input_count, " inputs and ", output_count,
           " outputs but the graph has ", graph.inputs.size(), " and ", graph.outputs.size());
    check_array(inputs, input_count, "inputs");
    check_array(outputs, output_count, "outputs");
    std::vector<Symbol> symbols;
    in.resize(input_count);
    out.resize(output_count);
    {
      detail::Registry::Batch batch(detail::registry());  // one lock for every buffer's lookup
      for (size_t i = 0; i < input_count; ++i)
        bind_one(graph, device, Place{"input", i, graph.inputs[i]}, inputs[i], symbols, in[i], batch);
      for (size_t i = 0; i < output_count; ++i)
        bind_one(graph, device, Place{"output", i, graph.outputs[i]}, outputs[i], symbols, out[i], batch);
    }
    std::unique_lock<std::mutex> memo;
    if (checked != nullptr) {
      memo = std::unique_lock<std::mutex>(checked->mu, std::try_to_lock);
      if (memo.owns_lock() && same_tensors(checked->in, in) && same_tensors(checked->out, out)) return;
    }
    for (size_t i = 0; i < output_count; ++i)
      if (OpCallBuilder::has_internal_overlap(out[i]))
        fail(HAL_STATUS_INVALID_ARGUMENT, Place{"output", i, graph.outputs[i]}, " with shape ", out[i].shape_str(),
             " and strides ", out[i].strides_str(), " has overlapping elements (a broadcast view cannot be written)");
    check_overlaps(graph, in, out, aliases);
    if (memo.owns_lock()) {
      checked->in = in;
      checked->out = out;
    }
  }

 private:
  static constexpr int64_t kNobody = -1;
  static constexpr int64_t kGraphInput = -2;

  // "input 1 (value 4)"
  struct Place {
    const char* role;
    size_t index;
    uint32_t value;
    friend std::ostream& operator<<(std::ostream& os, const Place& p) {
      return os << p.role << " " << p.index << " (value " << p.value << ")";
    }
  };
  struct Symbol {
    int64_t symbol, size;
    Place bound_by;
  };

  template <class T>
  static void check_array(const T* array, size_t count, const char* what) {
    if (count > 0 && array == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, what, " is NULL but its count is ", count);
  }
  template <class... Where>
  static void check_id(uint32_t id, size_t value_count, const Where&... where) {
    if (id >= value_count)
      fail(HAL_STATUS_INVALID_ARGUMENT, where..., " is value ", id, ", out of range (the graph has ", value_count,
           " values)");
  }

  // The ABI 1.7 constant-inputs extension into GRAPH.constants.
  static void parse_constants(const hal_graph_t* g, Graph& graph) {
    const auto* base = common::find_extension(g->next, HAL_EXTENSION_TYPE_GRAPH_CONSTANTS);
    if (base == nullptr) return;
    if (base->struct_size < sizeof(hal_graph_constants_t))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_graph_constants_t.base.struct_size ", base->struct_size, " is too small");
    const auto* c = reinterpret_cast<const hal_graph_constants_t*>(base);
    check_array(c->input_indices, c->count, "hal_graph_constants_t.input_indices");
    check_array(c->data, c->count, "hal_graph_constants_t.data");
    check_array(c->sizes, c->count, "hal_graph_constants_t.sizes");
    for (size_t k = 0; k < c->count; ++k) {
      const size_t i = c->input_indices[k];
      if (i >= graph.inputs.size())
        fail(HAL_STATUS_INVALID_ARGUMENT, "constant ", k, ": input index ", i, " is out of range (the graph has ",
             graph.inputs.size(), " inputs)");
      const uint32_t v = graph.inputs[i];
      const GraphValue& value = graph.values[v];
      if (!value.is_concrete())
        fail(HAL_STATUS_INVALID_ARGUMENT, "constant ", k, ": input ", i, " (value ", v, ") has symbolic shape ",
             shape_string(value.shape.data(), value.rank()));
      uint64_t bytes = dtype_size(value.dtype);
      for (int64_t d : value.shape) bytes *= static_cast<uint64_t>(d);
      if (c->sizes[k] != bytes)
        fail(HAL_STATUS_INVALID_ARGUMENT, "constant ", k, ": input ", i, " (value ", v, ") has ", c->sizes[k],
             " bytes but its dtype and shape make ", bytes);
      if (bytes > 0 && c->data[k] == nullptr)
        fail(HAL_STATUS_INVALID_ARGUMENT, "constant ", k, ": input ", i, " (value ", v, ") has NULL data");
      if (!graph.constants.emplace(v, GraphConstant{c->data[k], bytes}).second)
        fail(HAL_STATUS_INVALID_ARGUMENT, "constant ", k, ": input ", i, " is listed twice");
    }
  }

  // The ABI 1.14 output-aliases extension into GRAPH.output_aliases (after
  // the constants: a constant input cannot be written).
  static void parse_output_aliases(const hal_graph_t* g, Graph& graph) {
    const auto* base = common::find_extension(g->next, HAL_EXTENSION_TYPE_GRAPH_OUTPUT_ALIASES);
    if (base == nullptr) return;
    if (base->struct_size < sizeof(hal_graph_output_aliases_t))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_graph_output_aliases_t.base.struct_size ", base->struct_size,
           " is too small");
    const auto* a = reinterpret_cast<const hal_graph_output_aliases_t*>(base);
    check_array(a->output_indices, a->count, "hal_graph_output_aliases_t.output_indices");
    check_array(a->input_indices, a->count, "hal_graph_output_aliases_t.input_indices");
    for (size_t k = 0; k < a->count; ++k) {
      const size_t o = a->output_indices[k], i = a->input_indices[k];
      if (o >= graph.outputs.size())
        fail(HAL_STATUS_INVALID_ARGUMENT, "output alias ", k, ": output index ", o,
             " is out of range (the graph has ", graph.outputs.size(), " outputs)");
      if (i >= graph.inputs.size())
        fail(HAL_STATUS_INVALID_ARGUMENT, "output alias ", k, ": input index ", i,
             " is out of range (the graph has ", graph.inputs.size(), " inputs)");
      for (const auto& [po, pi] : graph.output_aliases)
        if (po == o || pi == i)
          fail(HAL_STATUS_INVALID_ARGUMENT, "output alias ", k, ": ", po == o ? "output " : "input ",
               po == o ? o : i, " is listed twice");
      const uint32_t vo = graph.outputs[o], vi = graph.inputs[i];
      if (graph.constant(vi) != nullptr)
        fail(HAL_STATUS_INVALID_ARGUMENT, "output alias ", k, ": input ", i, " (value ", vi,
             ") is a constant input; it cannot be written");
      const GraphValue &x = graph.values[vo], &y = graph.values[vi];
      if (x.dtype != y.dtype || x.shape != y.shape)
        fail(HAL_STATUS_INVALID_ARGUMENT, "output alias ", k, ": output ", o, " (value ", vo, ") is ",
             dtype_name(x.dtype), " ", shape_string(x.shape.data(), x.rank()), " but input ", i, " (value ", vi,
             ") is ", dtype_name(y.dtype), " ", shape_string(y.shape.data(), y.rank()));
      graph.output_aliases.emplace_back(o, i);
    }
  }

  static void parse_value(size_t v, const hal_graph_value_t* c, GraphValue& dst) {
    if (c == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "value ", v, " is NULL");
    if (!HAL_STRUCT_HAS_FIELD(c, hal_graph_value_t, shape))
      fail(HAL_STATUS_INVALID_ARGUMENT, "value ", v, ": hal_graph_value_t.struct_size ", c->struct_size,
           " is too small");
    if (dtype_size(c->dtype) == 0)
      fail(HAL_STATUS_UNSUPPORTED_DTYPE, "value ", v, " has unknown dtype value ", c->dtype);
    if (c->rank > HAL_TENSOR_MAX_RANK)
      fail(HAL_STATUS_INVALID_ARGUMENT, "value ", v, " has rank ", c->rank, " > HAL_TENSOR_MAX_RANK (",
           HAL_TENSOR_MAX_RANK, ")");
    if (c->rank > 0 && c->shape == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, "value ", v, " has rank ", c->rank, " but shape is NULL");
    dst.dtype = static_cast<hal_dtype_e>(c->dtype);
    dst.shape.assign(c->shape, c->shape + c->rank);
  }

  static GraphNode parse_node(const Graph& graph, size_t n, const hal_graph_node_t* c,
                              std::vector<int64_t>& producer, Device& device) {
    if (c == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "node ", n, " is NULL");
    if (!HAL_STRUCT_HAS_FIELD(c, hal_graph_node_t, attr_count))
      fail(HAL_STATUS_INVALID_ARGUMENT, "node ", n, ": hal_graph_node_t.struct_size ", c->struct_size,
           " is too small");
    if (c->op == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "node ", n, " has a NULL op name");
    const OpSchema* schema = find_schema(c->op);
    if (schema == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, "node ", n, ": op '", c->op, "' is not in the op catalog (version ",
           HAL_OP_CATALOG_VERSION_MAJOR, ".", HAL_OP_CATALOG_VERSION_MINOR, ")");
    const std::string label = "node " + std::to_string(n) + " ('" + schema->name + "')";
    const char* node = label.c_str();
    check_array(c->inputs, c->input_count, (label + ": inputs").c_str());
    check_array(c->outputs, c->output_count, (label + ": outputs").c_str());
    OpCallBuilder::check_input_count(*schema, node, c->input_count);
    OpCallBuilder::check_output_count(*schema, node, c->output_count);
    GraphNode out;
    out.schema = schema;
    bool variadic_in = schema->input_count == 1 && schema->inputs[0].variadic;
    bool concrete = true;
    for (size_t i = 0; i < c->input_count; ++i) {
      const TensorSpec& spec = schema->inputs[variadic_in ? 0 : i];
      OpCallBuilder::Role role{"input", spec.name, variadic_in, i};
      uint32_t id = c->inputs[i];
      out.inputs.push_back(id);
      if (id == kNoValue) {
        if (!spec.optional) fail(HAL_STATUS_INVALID_ARGUMENT, node, ": required ", role, " is HAL_GRAPH_NO_VALUE");
        continue;
      }
      check_id(id, graph.values.size(), node, ": ", role);
      if (producer[id] == kNobody)
        fail(HAL_STATUS_INVALID_ARGUMENT, node, ": ", role, " is value ", id,
             ", which is neither a graph input nor produced by an earlier node (nodes must be in topological "
             "order)");
      const GraphValue& v = graph.values[id];
      if ((spec.dtypes & HAL_DTYPE_BIT(v.dtype)) == 0)
        fail(HAL_STATUS_UNSUPPORTED_DTYPE, node, ": ", role, " (value ", id, ") has dtype ", dtype_name(v.dtype),
             "; the catalog allows ", dtype_mask_names(spec.dtypes));
      concrete = concrete && v.is_concrete();
    }
    if (!variadic_in) out.inputs.resize(schema->input_count, kNoValue);
    bool variadic_out = schema->output_count == 1 && schema->outputs[0].variadic;
    for (size_t i = 0; i < c->output_count; ++i) {
      OpCallBuilder::Role role{"output", schema->outputs[variadic_out ? 0 : i].name, variadic_out, i};
      uint32_t id = c->outputs[i];
      check_id(id, graph.values.size(), node, ": ", role);
      if (producer[id] == kGraphInput)
        fail(HAL_STATUS_INVALID_ARGUMENT, node, ": ", role, " is value ", id, ", which is a graph input");
      if (producer[id] >= 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, node, ": ", role, " is value ", id, ", already produced by node ",
             producer[id], " (a value is produced once)");
      producer[id] = static_cast<int64_t>(n);
      out.outputs.push_back(id);
      concrete = concrete && graph.values[id].is_concrete();
    }
    out.attrs = OpCallBuilder::parse_attrs(*schema, node, c->attrs, c->attr_count);
    if (concrete) check_rules(graph, out, *c, node, device);
    return out;
  }

  // A node whose values are all concrete is checked as a launch of it would
  // be (no buffers): the catalog's dtype and shape rules give its outputs.
  static void check_rules(const Graph& graph, const GraphNode& n, const hal_graph_node_t& c, const char* node,
                          Device& device) {
    std::vector<hal_tensor_t> tensors(c.input_count + c.output_count);
    std::vector<const hal_tensor_t*> in, out;
    for (size_t i = 0; i < tensors.size(); ++i) {
      uint32_t id = i < c.input_count ? c.inputs[i] : c.outputs[i - c.input_count];
      hal_tensor_t& t = tensors[i];
      t.struct_size = sizeof(t);
      if (id != kNoValue) {
        t.dtype = graph.values[id].dtype;
        t.rank = static_cast<uint32_t>(graph.values[id].shape.size());
        t.shape = graph.values[id].shape.data();
      }
      (i < c.input_count ? in : out).push_back(id == kNoValue ? nullptr : &t);
    }
    hal_op_args_t args{};
    args.struct_size = sizeof(args);
    args.inputs = in.data();
    args.input_count = in.size();
    args.outputs = out.data();
    args.output_count = out.size();
    args.attrs = c.attrs;
    args.attr_count = c.attr_count;
    try {
      OpCallBuilder::build(*n.schema, device, args, false);
    } catch (const Error& e) {
      fail(e.code(), node, ": ", e.what());
    }
  }

  static void bind_one(const Graph& graph, Device& device, const Place& place, const hal_tensor_t* t,
                       std::vector<Symbol>& symbols, Tensor& dst, const detail::Registry::Batch& batch) {
    if (t == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, place, " is NULL");
    OpCallBuilder::parse_tensor("graph", place, *t, device, true, dst, &batch);
    const GraphValue& v = graph.values[place.value];
    if (dst.dtype != v.dtype)
      fail(HAL_STATUS_INVALID_ARGUMENT, place, " has dtype ", dtype_name(dst.dtype), " but the value's is ",
           dtype_name(v.dtype));
    if (dst.rank != v.rank())
      fail(HAL_STATUS_INVALID_ARGUMENT, place, " has shape ", dst.shape_str(), " but the value's is ",
           shape_string(v.shape.data(), v.rank()));
    for (int d = 0; d < dst.rank; ++d) {
      int64_t want = v.shape[d];
      if (want >= 0) {
        if (dst.shape[d] != want)
          fail(HAL_STATUS_INVALID_ARGUMENT, place, " has shape ", dst.shape_str(), " but the value's is ",
               shape_string(v.shape.data(), v.rank()), " (dim ", d, ")");
        continue;
      }
      auto it = std::find_if(symbols.begin(), symbols.end(), [&](const Symbol& s) { return s.symbol == want; });
      if (it == symbols.end())
        symbols.push_back(Symbol{want, dst.shape[d], place});
      else if (it->size != dst.shape[d])
        fail(HAL_STATUS_INVALID_ARGUMENT, place, ": dim ", d, " is ", dst.shape[d], " but symbol ", want, " is ",
             it->size, " (bound by ", it->bound_by, ")");
    }
  }

  // No output may share a byte with an input or another output, except an
  // aliased output passed as its input's very tensor (contiguous) when
  // ALIASES: that range is then written, and must overlap nothing else.
  // Sorted by buffer and first byte, an overlap shows between a range and
  // the ranges before it in its buffer: O(n log n), where a run passes
  // many tensors.
  static void check_overlaps(const Graph& graph, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                             bool aliases) {
    struct Range {
      const void* buffer;
      uint64_t begin, end;
      size_t index;  // inputs first, then outputs; an input written in place: its output's
      bool written;
    };
    // Per input: the output passed as it, if any; per output: whether so
    // passed. Made only for an executable with aliases (every run checks).
    std::vector<size_t> written_as;
    std::vector<bool> merged;
    if (aliases && !graph.output_aliases.empty()) {
      written_as.assign(in.size(), SIZE_MAX);
      merged.assign(out.size(), false);
      for (const auto& [o, i] : graph.output_aliases)
        if (same_tensor(out[o], in[i]) && in[i].is_contiguous()) {
          written_as[i] = o;
          merged[o] = true;
        }
    }
    std::vector<Range> ranges;
    ranges.reserve(in.size() + out.size());
    for (size_t k = 0; k < in.size() + out.size(); ++k) {
      const bool output = k >= in.size();
      if (output && !merged.empty() && merged[k - in.size()]) continue;  // its input's range stands for it
      const Tensor& t = output ? out[k - in.size()] : in[k];
      if (t.buffer == nullptr || t.numel() == 0) continue;
      auto r = OpCallBuilder::byte_range(t);
      const bool in_place = !output && !written_as.empty() && written_as[k] != SIZE_MAX;
      ranges.push_back(Range{t.buffer, r.first, r.second, in_place ? in.size() + written_as[k] : k, output || in_place});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
      return a.buffer != b.buffer ? std::less<const void*>()(a.buffer, b.buffer) : a.begin < b.begin;
    });
    auto place = [&](size_t k) {
      return k < in.size() ? Place{"input", k, graph.inputs[k]} : Place{"output", k - in.size(), graph.outputs[k - in.size()]};
    };
    const Range* reach_any = nullptr;     // of the ranges before, in this buffer: the one ending last
    const Range* reach_output = nullptr;  // ... among outputs
    for (size_t r = 0; r < ranges.size(); ++r) {
      const Range& x = ranges[r];
      if (r > 0 && ranges[r - 1].buffer != x.buffer) reach_any = reach_output = nullptr;
      const Range* hit = x.written ? reach_any : reach_output;
      if (hit != nullptr && hit->end > x.begin) {
        const size_t o = x.written ? x.index : hit->index, other = x.written ? hit->index : x.index;
        fail(HAL_STATUS_INVALID_ARGUMENT, place(o), " overlaps ", place(other), " in the same buffer");
      }
      if (reach_any == nullptr || x.end > reach_any->end) reach_any = &x;
      if (x.written && (reach_output == nullptr || x.end > reach_output->end)) reach_output = &x;
    }
  }

  // Whether A and B list the same tensors (dtypes too) in order.
  static bool same_tensors(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k].dtype != b[k].dtype || !same_tensor(a[k], b[k])) return false;
    return true;
  }

  // Whether A and B are one tensor: the same buffer, first byte, shape and strides.
  static bool same_tensor(const Tensor& a, const Tensor& b) {
    if (a.buffer != b.buffer || a.byte_offset != b.byte_offset || a.rank != b.rank) return false;
    for (int d = 0; d < a.rank; ++d)
      if (a.shape[d] != b.shape[d] || a.strides[d] != b.strides[d]) return false;
    return true;
  }
};

namespace detail {

// What a hal_executable_t points at.
struct CompiledExecutable {
  Device* device = nullptr;
  std::shared_ptr<const Graph> graph;
  std::unique_ptr<Executable> impl;
  // impl->plan(), made at the first executable_get_info that asks (ABI 1.10:
  // the text lives as long as the executable).
  std::once_flag plan_once;
  std::string plan;
  // impl->honours_output_aliases(), asked once: execute lets an aliased
  // output be its input's tensor.
  bool aliases = false;
  GraphBuilder::CheckedTensors checked;
};

inline hal_status_t* graph_partition(hal_device_t* d, const hal_graph_t* g, uint32_t* out) {
  return call("graph_partition", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_node_group is NULL");
    auto graph = GraphBuilder::build(g, *device);
    std::vector<uint32_t> groups = device->partition_graph(*graph);
    if (groups.size() != graph->nodes.size())
      fail(HAL_STATUS_INTERNAL, "the device's partition_graph returned ", groups.size(), " entries for ",
           graph->nodes.size(), " nodes");
    std::copy(groups.begin(), groups.end(), out);
  });
}

inline hal_status_t* graph_compile(hal_device_t* d, const hal_graph_t* g, hal_executable_t** out) {
  return call("graph_compile", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_executable is NULL");
    auto exe = std::make_unique<CompiledExecutable>();
    exe->device = device;
    auto graph = GraphBuilder::build(g, *device);
    if (graph->nodes.empty()) fail(HAL_STATUS_INVALID_ARGUMENT, "the graph has no nodes");
    exe->impl = device->compile_graph(*graph);
    if (exe->impl == nullptr) fail(HAL_STATUS_INTERNAL, "the device's compile_graph returned no executable");
    exe->aliases = !graph->output_aliases.empty() && exe->impl->honours_output_aliases();
    graph->constants.clear();  // the caller's bytes: valid during this call only
    exe->graph = std::move(graph);
    registry().add(exe.get(), Kind::kExecutable, device);
    *out = reinterpret_cast<hal_executable_t*>(exe.release());
  });
}

inline hal_status_t* executable_destroy(hal_executable_t* e) {
  return call("executable_destroy", [&] {
    auto* exe = as<CompiledExecutable>(e, Kind::kExecutable, "executable");
    if (registry().remove(exe, Kind::kExecutable)) delete exe;
  });
}

inline hal_status_t* executable_get_info(hal_executable_t* e, hal_executable_info_t* out) {
  return call("executable_get_info", [&] {
    auto* exe = as<CompiledExecutable>(e, Kind::kExecutable, "executable");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "info is NULL");
    if (!HAL_STRUCT_HAS_FIELD(out, hal_executable_info_t, kernel_count))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_executable_info_t.struct_size ", out->struct_size, " is too small");
    // Everything is asked before anything is written: a throw leaves OUT untouched.
    const uint32_t kernels = exe->impl->kernel_count();
    const std::string description = exe->impl->description();
    const uint32_t flags = (exe->impl->accepts_strided_inputs() ? HAL_EXECUTABLE_FLAG_STRIDED_INPUTS : 0u) |
                           (exe->impl->honours_output_aliases() ? HAL_EXECUTABLE_FLAG_OUTPUT_ALIASES : 0u);
    const bool wants_plan = HAL_STRUCT_HAS_FIELD(out, hal_executable_info_t, plan);
    if (wants_plan) std::call_once(exe->plan_once, [&] { exe->plan = exe->impl->plan(); });
    out->kernel_count = kernels;
    if (HAL_STRUCT_HAS_FIELD(out, hal_executable_info_t, description))
      copy_string(out->description, sizeof(out->description), description);
    if (HAL_STRUCT_HAS_FIELD(out, hal_executable_info_t, flags)) out->flags = flags;
    if (wants_plan) out->plan = exe->plan.empty() ? nullptr : exe->plan.c_str();
  });
}

inline hal_status_t* executable_execute(hal_executable_t* e, const hal_tensor_t* const* inputs, size_t input_count,
                                        const hal_tensor_t* const* outputs, size_t output_count, hal_stream_t* s) {
  return call("executable_execute", [&] {
    auto* exe = as<CompiledExecutable>(e, Kind::kExecutable, "executable");
    std::vector<Tensor> in, out;
    GraphBuilder::bind(*exe->graph, *exe->device, inputs, input_count, outputs, output_count, in, out,
                       exe->aliases, &exe->checked);
    Stream* stream = optional_stream(s, *exe->device);
    exe->impl->execute(in, out, stream);
  });
}

// The SDK's envelope around a device's serialised executable: the magic,
// the plugin's name and version (bytes of another plugin or version are
// refused), a fingerprint of the graph it was compiled from (bytes for
// another graph are refused), the payload's size and FNV-1a 64 checksum,
// then the payload.
struct SerializedExecutable {
  static constexpr char kMagic[8] = {'H', 'A', 'L', 'S', 'E', 'X', '1', '\0'};

  static uint64_t checksum(const uint8_t* p, size_t n, uint64_t h = 1469598103934665603ull) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
  // FNV-1a 64 over everything of G an executable depends on.
  static uint64_t fingerprint(const Graph& g) {
    uint64_t h = 1469598103934665603ull;
    auto pod = [&](const auto& v) { h = checksum(reinterpret_cast<const uint8_t*>(&v), sizeof(v), h); };
    auto list = [&](const auto& v) {
      pod(v.size());
      for (const auto& x : v) pod(x);
    };
    auto str = [&](const std::string& v) {
      pod(v.size());
      h = checksum(reinterpret_cast<const uint8_t*>(v.data()), v.size(), h);
    };
    pod(g.values.size());
    for (const GraphValue& v : g.values) {
      pod(v.dtype);
      list(v.shape);
    }
    pod(g.nodes.size());
    for (const GraphNode& n : g.nodes) {
      str(n.op());
      list(n.inputs);
      list(n.outputs);
      for (const AttrValue& a : n.attrs) {
        pod(a.kind);
        pod(a.i);
        pod(a.f);
        str(a.s);
        list(a.ints);
        list(a.floats);
        pod(a.scalar.is_integral());
        pod(a.scalar.to_int());
        pod(a.scalar.to_double());
      }
    }
    list(g.inputs);
    list(g.outputs);
    if (!g.output_aliases.empty()) list(g.output_aliases);  // (without: the fingerprint of ABI <= 1.13)
    return h;
  }
  static std::vector<uint8_t> wrap(const std::vector<uint8_t>& payload, const Graph& graph) {
    std::vector<uint8_t> out(kMagic, kMagic + sizeof(kMagic));
    auto put = [&](const void* p, size_t n) {
      const auto* b = static_cast<const uint8_t*>(p);
      out.insert(out.end(), b, b + n);
    };
    for (const char* s : {info().name, info().version}) {
      uint32_t n = static_cast<uint32_t>(std::strlen(s));
      put(&n, sizeof(n));
      put(s, n);
    }
    uint64_t print = fingerprint(graph), size = payload.size(), sum = checksum(payload.data(), payload.size());
    put(&print, sizeof(print));
    put(&size, sizeof(size));
    put(&sum, sizeof(sum));
    put(payload.data(), payload.size());
    return out;
  }
  // The payload of DATA for GRAPH, or INVALID_ARGUMENT naming what does
  // not match.
  static std::vector<uint8_t> unwrap(const uint8_t* data, size_t size, const Graph& graph) {
    size_t at = 0;
    auto take = [&](void* dst, size_t n, const char* what) {
      if (size - at < n) fail(HAL_STATUS_INVALID_ARGUMENT, "serialised executable truncated at ", what, " (", size, " bytes)");
      std::memcpy(dst, data + at, n);
      at += n;
    };
    char magic[sizeof(kMagic)];
    take(magic, sizeof(magic), "the magic");
    if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, "not a serialised executable (bad magic)");
    for (const char* want : {info().name, info().version}) {
      uint32_t n = 0;
      take(&n, sizeof(n), "a name");
      if (n > size - at) fail(HAL_STATUS_INVALID_ARGUMENT, "serialised executable truncated (", size, " bytes)");
      std::string got(reinterpret_cast<const char*>(data + at), n);
      at += n;
      if (got != want)
        fail(HAL_STATUS_INVALID_ARGUMENT, "serialised executable written by '", got, "', this plugin is '", want,
             "' (", info().name, " ", info().version, ")");
    }
    uint64_t print = 0, n = 0, sum = 0;
    take(&print, sizeof(print), "the graph's fingerprint");
    if (print != fingerprint(graph))
      fail(HAL_STATUS_INVALID_ARGUMENT, "serialised executable was compiled from another graph (fingerprint ", print,
           ", this graph's ", fingerprint(graph), ")");
    take(&n, sizeof(n), "the size");
    take(&sum, sizeof(sum), "the checksum");
    if (n != size - at)
      fail(HAL_STATUS_INVALID_ARGUMENT, "serialised executable holds ", size - at, " payload bytes, its header says ", n);
    if (checksum(data + at, n) != sum) fail(HAL_STATUS_INVALID_ARGUMENT, "serialised executable: checksum mismatch");
    return std::vector<uint8_t>(data + at, data + size);
  }
};

inline hal_status_t* executable_serialize(const hal_executable_serialize_args_t* args) {
  return call("executable_serialize", [&] {
    if (args == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "args is NULL");
    if (!HAL_STRUCT_HAS_FIELD(args, hal_executable_serialize_args_t, out_size))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_executable_serialize_args_t.struct_size ", args->struct_size,
           " is too small");
    common::require_well_formed_extension_chain(args->next, "hal_executable_serialize_args_t.next");
    auto* exe = as<CompiledExecutable>(args->executable, Kind::kExecutable, "executable");
    if (args->out_size == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_size is NULL");
    std::vector<uint8_t> bytes = SerializedExecutable::wrap(exe->impl->serialize(), *exe->graph);
    if (args->out_data != nullptr) {
      if (args->capacity < bytes.size())
        fail(HAL_STATUS_OUT_OF_RANGE, "capacity ", args->capacity, " is below the ", bytes.size(), " bytes needed");
      std::memcpy(args->out_data, bytes.data(), bytes.size());
    }
    *args->out_size = bytes.size();
  });
}

inline hal_status_t* executable_deserialize(const hal_executable_deserialize_args_t* args) {
  return call("executable_deserialize", [&] {
    if (args == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "args is NULL");
    if (!HAL_STRUCT_HAS_FIELD(args, hal_executable_deserialize_args_t, out_executable))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_executable_deserialize_args_t.struct_size ", args->struct_size,
           " is too small");
    common::require_well_formed_extension_chain(args->next, "hal_executable_deserialize_args_t.next");
    auto* device = as<Device>(args->device, Kind::kDevice, "device");
    if (args->out_executable == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_executable is NULL");
    if (args->data == nullptr && args->size > 0) fail(HAL_STATUS_INVALID_ARGUMENT, "data is NULL but size is ", args->size);
    auto exe = std::make_unique<CompiledExecutable>();
    exe->device = device;
    auto graph = GraphBuilder::build(args->subgraph, *device);
    if (graph->nodes.empty()) fail(HAL_STATUS_INVALID_ARGUMENT, "the graph has no nodes");
    std::vector<uint8_t> payload =
        SerializedExecutable::unwrap(static_cast<const uint8_t*>(args->data), args->size, *graph);
    exe->impl = device->deserialize_graph(*graph, payload);
    if (exe->impl == nullptr) fail(HAL_STATUS_INTERNAL, "the device's deserialize_graph returned no executable");
    exe->aliases = !graph->output_aliases.empty() && exe->impl->honours_output_aliases();
    graph->constants.clear();  // the caller's bytes: valid during this call only
    exe->graph = std::move(graph);
    registry().add(exe.get(), Kind::kExecutable, device);
    *args->out_executable = reinterpret_cast<hal_executable_t*>(exe.release());
  });
}

inline const hal_graph_api_t kGraphApi = {sizeof(hal_graph_api_t), &graph_partition,      &graph_compile,
                                          &executable_destroy,     &executable_get_info,  &executable_execute,
                                          &executable_serialize,   &executable_deserialize};

template <class P>
struct GraphTable<P, true> {
  static const hal_graph_api_t* get() { return &kGraphApi; }
};
}  // namespace detail
}  // namespace hal::sdk

#endif  // HAL_SDK_DETAIL_GRAPH_ENTRIES_HPP_
