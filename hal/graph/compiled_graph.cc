#include "hal/runtime/compiled_graph.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "graph/c_graph.hpp"
#include "graph/compile_cache.hpp"
#include "graph/layout.hpp"
#include "graph/partition.hpp"
#include "hal/common/op_schema.hpp"
#include "hal/runtime/op_stats.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {
namespace {

using detail::CompiledPlan;
using detail::Placement;
using detail::SharedExecutable;

constexpr size_t kNone = SIZE_MAX;

std::string dims(const std::vector<int64_t>& v) { return common::shape_string(v.data(), static_cast<int>(v.size())); }

std::string node_label(const Graph& g, size_t n) {
  return "node " + std::to_string(n) + " ('" + g.nodes()[n].op + "')";
}

// INFO's plan (ABI 1.10) from a plugin that negotiated it; trailing newlines
// dropped. Empty when there is none.
std::string executable_plan(const Device& d, const hal_executable_info_t& info) {
  if (d.plugin().negotiated_minor < 10 || !HAL_STRUCT_HAS_FIELD(&info, hal_executable_info_t, plan) ||
      info.plan == nullptr)
    return {};
  std::string plan(info.plan);
  while (!plan.empty() && plan.back() == '\n') plan.pop_back();
  return plan;
}

// Runs F; a hal::Error it throws gets PREFIX in front of its message.
template <class F>
void with_context(const std::string& prefix, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    throw Error(e.code(), prefix + ": " + e.what());
  }
}

// The nodes of each group of P, by group id.
std::map<uint32_t, std::vector<size_t>> group_nodes(const Placement& p) {
  std::map<uint32_t, std::vector<size_t>> out;
  for (size_t i = 0; i < p.group.size(); ++i)
    if (p.group[i] != 0) out[p.group[i]].push_back(i);
  return out;
}

// One step of a run.
struct Step {
  // kAlias: a reshape whose output is its input's bytes under the new shape
  // (no launch) when the input's view is contiguous, else run as kOp.
  enum Kind { kExecutable, kOp, kAlias, kCopy, kOutputCopy } kind = kOp;
  size_t device = 0;  // where it runs (kCopy: the destination)
  std::string label;  // "opencl:0 group 1 (nodes 0 add, 1 mul)", "cpu:0 node 2 ('matmul')"
  // kExecutable: the executable and its boundary values (global ids).
  std::shared_ptr<SharedExecutable> executable;
  std::vector<uint32_t> inputs, outputs;
  bool strided_inputs = false;  // the executable reads strided inputs (HAL_EXECUTABLE_FLAG_STRIDED_INPUTS)
  // kOp, kAlias
  size_t node = 0;
  std::optional<OpRunner> runner;
  // kCopy / kOutputCopy: VALUE from device FROM (kOutputCopy: into the
  // caller's output OUTPUT on the home device).
  uint32_t value = 0;
  size_t from = 0, output = 0;
  size_t fallback_node = kNone;  // a fallback node the copy feeds or drains (op_stats)
};

// Bytes of V from its byte offset to its last element (0 when empty).
uint64_t span_bytes(const TensorView& v) {
  const size_t rank = v.shape.size();
  int64_t last = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (v.shape[d] == 0) return 0;
    int64_t stride = v.strides.empty() ? 1 : v.strides[d];
    if (v.strides.empty())
      for (size_t e = d + 1; e < rank; ++e) stride *= v.shape[e];
    last += (v.shape[d] - 1) * stride;
  }
  return static_cast<uint64_t>(last + 1) * common::dtype_size(v.dtype);
}

bool contiguous(const TensorView& v) {
  if (v.strides.empty()) return true;
  int64_t want = 1;
  for (size_t d = v.shape.size(); d-- > 0;) {
    if (v.shape[d] != 1 && v.strides[d] != want) return false;
    want *= v.shape[d];
  }
  return true;
}

// Copies BYTES of SRC (on FROM) to DST at DST_OFFSET (on TO) through host
// memory; STREAMs are the devices' streams (nullptr: synchronous). Returns
// after both ends are done, so the staging memory can go.
void transfer(Device& from, const TensorView& src, uint64_t bytes, const Stream* from_stream, Device& to,
              hal_buffer_t* dst, uint64_t dst_offset, const Stream* to_stream) {
  if (bytes == 0) return;
  std::vector<uint8_t> host(bytes);
  from.check(from.plugin().require(from.plugin().memory.copy_device_to_host, "copy_device_to_host")(
      host.data(), src.buffer, src.byte_offset, bytes, from_stream ? from_stream->handle() : nullptr));
  if (from_stream) from_stream->synchronize();
  to.check(to.plugin().require(to.plugin().memory.copy_host_to_device, "copy_host_to_device")(
      dst, dst_offset, host.data(), bytes, to_stream ? to_stream->handle() : nullptr));
  if (to_stream) to_stream->synchronize();
}

}  // namespace

struct CompiledGraph::Impl {
  std::vector<std::shared_ptr<Device>> devices;  // as partitioned (the fallback last when appended)
  bool fallback = false;                         // the last device is the appended fallback device
  Graph graph;
  std::shared_ptr<const CompiledPlan> plan;
  std::vector<Step> steps;
  std::map<std::pair<size_t, uint32_t>, Buffer> constants;  // (device, value) -> its bytes there
  std::vector<size_t> value_device;  // per value: the device producing it (inputs: home)
  std::vector<bool> aliased;         // per node: run as a Step::kAlias
  std::vector<int64_t> into_output;  // per value: the output whose buffer it is written into (-1: none)
  std::vector<bool> executable_reads;  // per value: an executable needing contiguous inputs reads it
  std::vector<bool> internal;  // per value: made and read inside one executable only (its memory, not ours)
  std::vector<std::pair<size_t, size_t>> declared_aliases;  // CompileOptions::output_aliases
  std::vector<std::pair<size_t, size_t>> output_aliases;    // of those, the ones honoured
  // The whole graph is one executable on the home device reading graph
  // inputs and constants and writing the graph's outputs: a run validates
  // the caller's views and hands them to it (no per-value views, no scan of
  // the nodes for temporaries). DIRECT_INPUTS: per executable input, graph
  // input i, or -1 - k for DIRECT_CONSTANTS[k]; DIRECT_OUTPUTS: per
  // executable output, its graph output (the executable's order may differ).
  bool direct = false;
  std::vector<int64_t> direct_inputs;
  std::vector<size_t> direct_outputs;
  std::vector<TensorView> direct_constants;
  CompiledGraphStats stats;
  mutable std::atomic<uint64_t> last_copy_bytes{0};

  // Layout adjustment (graph/layout.hpp): the op-by-op nodes whose plugin
  // states layouts, the step running each node, the values whose layout is
  // ours to choose, and the plan for the last inputs' shapes (every value's
  // shape is concrete: one plan).
  std::vector<size_t> layout_nodes;
  std::vector<size_t> step_of_node;
  std::vector<bool> choosable;
  bool static_shapes = true;
  std::shared_ptr<const detail::LayoutPlan> layouts_for(const std::vector<const TensorView*>* inputs) const {
    std::vector<std::vector<int64_t>> in;
    if (!static_shapes)
      for (const TensorView* v : *inputs) in.push_back(v->shape);
    std::lock_guard<std::mutex> lock(layout_mu);
    if (last_layout && (static_shapes || in == layout_in)) return last_layout;
    std::shared_ptr<const std::vector<std::vector<int64_t>>> inferred;
    std::vector<std::vector<int64_t>> declared;
    if (static_shapes) {
      for (const ValueSpec& v : graph.values()) declared.push_back(v.shape);
    } else {
      inferred = shapes_for(in);
    }
    const std::vector<std::vector<int64_t>>& shapes = static_shapes ? declared : *inferred;
    auto ask = [&](size_t n, const std::vector<std::vector<int64_t>>& strides) -> std::optional<OpLayouts> {
      const Graph::Node& node = graph.nodes()[n];
      auto view = [&](uint32_t v, std::vector<int64_t> st) {
        TensorView t;
        t.dtype = graph.values()[v].dtype;
        t.shape = shapes[v];
        t.strides = std::move(st);
        return t;
      };
      std::vector<TensorView> in_views, out_views;
      in_views.reserve(node.inputs.size());
      out_views.reserve(node.outputs.size());
      std::vector<const TensorView*> in_ptrs, out_ptrs;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] == HAL_GRAPH_NO_VALUE) {
          in_ptrs.push_back(nullptr);
          continue;
        }
        in_views.push_back(view(node.inputs[i], strides[i]));
        in_ptrs.push_back(&in_views.back());
      }
      for (uint32_t v : node.outputs) {
        out_views.push_back(view(v, {}));
        out_ptrs.push_back(&out_views.back());
      }
      try {
        return steps[step_of_node[n]].runner->layouts(in_ptrs, out_ptrs, node.attrs);
      } catch (const Error&) {
        return std::nullopt;  // a call it would refuse: the launch says why
      }
    };
    last_layout = std::make_shared<const detail::LayoutPlan>(
        detail::plan_layouts(graph, layout_nodes, shapes, choosable, ask));
    layout_in = std::move(in);
    return last_layout;
  }
  mutable std::mutex layout_mu;
  mutable std::vector<std::vector<int64_t>> layout_in;
  mutable std::shared_ptr<const detail::LayoutPlan> last_layout;

  // infer_shapes for the inputs' shapes, remembering the last answer: runs
  // repeat the same shapes, and inference re-runs every node's rule.
  std::shared_ptr<const std::vector<std::vector<int64_t>>> shapes_for(
      const std::vector<std::vector<int64_t>>& in) const {
    {
      std::lock_guard<std::mutex> lock(shapes_mu);
      if (last_shapes && in == last_in) return last_shapes;
    }
    auto shapes = std::make_shared<const std::vector<std::vector<int64_t>>>(infer_shapes(graph, in));
    std::lock_guard<std::mutex> lock(shapes_mu);
    last_in = in;
    last_shapes = shapes;
    return shapes;
  }
  mutable std::mutex shapes_mu;
  mutable std::vector<std::vector<int64_t>> last_in;
  mutable std::shared_ptr<const std::vector<std::vector<int64_t>>> last_shapes;

  // A run's views per device and value, kept for the next run (a run that
  // finds them in use makes its own): the constants' views are bound once
  // and the others' vectors keep their capacity, so a run allocates no
  // view. Views own nothing.
  mutable std::mutex views_mu;
  mutable std::vector<std::vector<TensorView>> kept_views;
  // The rest of a run's scratch, kept with the views (under the same lock).
  struct Scratch {
    std::vector<bool> have;
    std::vector<hal_tensor_t> tensors;
    std::vector<const hal_tensor_t*> in, out;
  };
  mutable Scratch kept_scratch;
  void bind_constants(std::vector<std::vector<TensorView>>& views) const {
    views.assign(devices.size(), std::vector<TensorView>(graph.values().size()));
    for (const auto& [where, buffer] : constants) {
      const ValueSpec& v = graph.values()[where.second];
      views[where.first][where.second] = TensorView(buffer, v.dtype, v.shape);
    }
  }
};

CompiledGraph::CompiledGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledGraph::CompiledGraph(CompiledGraph&&) noexcept = default;
CompiledGraph& CompiledGraph::operator=(CompiledGraph&&) noexcept = default;
CompiledGraph::~CompiledGraph() = default;
const CompiledGraphStats& CompiledGraph::stats() const { return impl_->stats; }
uint64_t CompiledGraph::last_copy_bytes() const { return impl_->last_copy_bytes; }
Device& CompiledGraph::device() const { return *impl_->devices[0]; }
std::vector<std::shared_ptr<Device>> CompiledGraph::lost_devices() const {
  std::vector<std::shared_ptr<Device>> lost;
  const std::vector<DevicePartStats>& parts = impl_->stats.devices;
  for (size_t k = 0; k < impl_->devices.size() && k < parts.size(); ++k) {
    const DevicePartStats& p = parts[k];
    const bool works = k == 0 || p.groups > 0 || p.op_nodes > 0 || p.constants > 0;
    if (works && impl_->devices[k]->state() == DeviceState::kLost) lost.push_back(impl_->devices[k]);
  }
  return lost;
}
const std::vector<std::pair<size_t, size_t>>& CompiledGraph::output_aliases() const { return impl_->output_aliases; }
bool CompiledGraph::accepts_strided_input(size_t i) const {
  const Graph& g = impl_->graph;
  if (i >= g.inputs().size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::accepts_strided_input: input " + std::to_string(i) +
                                                 " of a graph with " + std::to_string(g.inputs().size()));
  return !impl_->executable_reads[g.inputs()[i]];
}

namespace {

// Compiles (or rebuilds from BYTES) group GID of G on DEVICE.
// ALIASES: the output aliases given to this group, as (graph output index,
// graph input index) pairs.
std::shared_ptr<SharedExecutable> build_group(const Graph& g, const std::vector<size_t>& nodes,
                                              const std::shared_ptr<Device>& device, const std::string& label,
                                              const std::vector<uint8_t>* bytes, const std::string& cache_file,
                                              bool* deserialized, const std::vector<std::pair<size_t, size_t>>& aliases) {
  std::vector<bool> in_set(g.nodes().size(), false);
  for (size_t i : nodes) in_set[i] = true;
  auto [inputs, outputs] = detail::boundary(g, nodes, in_set);
  std::vector<std::pair<size_t, size_t>> local;  // the subgraph's output and input indices
  for (const auto& [o, i] : aliases) {
    const auto out = std::find(outputs.begin(), outputs.end(), g.outputs()[o]);
    const auto in = std::find(inputs.begin(), inputs.end(), g.inputs()[i]);
    if (out != outputs.end() && in != inputs.end())
      local.emplace_back(static_cast<size_t>(out - outputs.begin()), static_cast<size_t>(in - inputs.begin()));
  }
  detail::CGraph sub(g, nodes, inputs, outputs, local);
  const hal_graph_api_t& api = device->plugin().graph;
  hal_executable_t* exe = nullptr;
  *deserialized = false;
  if (bytes != nullptr && api.executable_deserialize != nullptr) {
    hal_executable_deserialize_args_t args{};
    args.struct_size = sizeof(args);
    args.device = device->handle();
    args.subgraph = sub.get();
    args.data = bytes->data();
    args.size = bytes->size();
    args.out_executable = &exe;
    try {
      throw_if_error(api.executable_deserialize(&args));
      detail::count_deserialization();
      *deserialized = true;
      return std::make_shared<SharedExecutable>(device, exe);
    } catch (const Error& e) {
      detail::warn_rebuild(cache_file, label + ": " + e.what());
      exe = nullptr;
    }
  }
  with_context(label, [&] { throw_if_error(api.graph_compile(device->handle(), sub.get(), &exe)); });
  detail::count_compile();
  return std::make_shared<SharedExecutable>(device, exe);
}

// The serialised bytes of EXE, or nullopt when its plugin cannot serialise it.
std::optional<std::vector<uint8_t>> serialize(const SharedExecutable& exe) {
  const hal_graph_api_t& api = exe.device().plugin().graph;
  if (api.executable_serialize == nullptr) return std::nullopt;
  size_t size = 0;
  hal_executable_serialize_args_t args{};
  args.struct_size = sizeof(args);
  args.executable = exe.handle();
  args.out_size = &size;
  hal_status_t* st = api.executable_serialize(&args);
  if (st != nullptr) {
    st->destroy(st);  // UNIMPLEMENTED and the like: this one is compiled each time
    return std::nullopt;
  }
  std::vector<uint8_t> bytes(size);
  args.out_data = bytes.data();
  args.capacity = bytes.size();
  st = api.executable_serialize(&args);
  if (st != nullptr) {
    st->destroy(st);
    return std::nullopt;
  }
  bytes.resize(size);
  return bytes;
}

std::string group_label(const Graph& g, const Device& d, uint32_t gid, const std::vector<size_t>& nodes) {
  std::string label = d.id() + " group " + std::to_string(gid) + " (nodes";
  for (size_t i : nodes) label += (i == nodes.front() ? " " : ", ") + std::to_string(i) + " " + g.nodes()[i].op;
  return label + ")";
}

// Per output alias pair (CompileOptions::output_aliases, validated): the
// group that may update it in place, or 0. It must make the output on the
// home device and be the input's only reader, so that no step reads the
// input after the executable wrote the output into its memory.
std::vector<uint32_t> alias_groups(const Graph& g, const Placement& p, const std::vector<std::pair<size_t, size_t>>& aliases) {
  std::vector<uint32_t> gids;
  for (const auto& [o, i] : aliases) {
    const uint32_t vo = g.outputs()[o], vi = g.inputs()[i];
    uint32_t gid = 0;
    for (size_t n = 0; n < g.nodes().size(); ++n)
      for (uint32_t v : g.nodes()[n].outputs)
        if (v == vo && p.device[n] == 0) gid = p.group[n];
    for (size_t n = 0; n < g.nodes().size() && gid != 0; ++n)
      for (uint32_t v : g.nodes()[n].inputs)
        if (v == vi && p.group[n] != gid) gid = 0;
    gids.push_back(gid);
  }
  return gids;
}

// Throws INVALID_ARGUMENT for output alias pairs of G that are out of
// range, listed twice, or of different dtypes or shapes.
void check_output_aliases(const Graph& g, const std::vector<std::pair<size_t, size_t>>& aliases) {
  for (size_t k = 0; k < aliases.size(); ++k) {
    const auto [o, i] = aliases[k];
    const std::string what = "compile: output alias " + std::to_string(k) + " (output " + std::to_string(o) +
                             ", input " + std::to_string(i) + ")";
    if (o >= g.outputs().size() || i >= g.inputs().size())
      throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": the graph has " + std::to_string(g.outputs().size()) +
                                                   " outputs and " + std::to_string(g.inputs().size()) + " inputs");
    for (size_t e = 0; e < k; ++e)
      if (aliases[e].first == o || aliases[e].second == i)
        throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": its " + (aliases[e].first == o ? "output" : "input") +
                                                     " is already in alias " + std::to_string(e));
    const ValueSpec &x = g.values()[g.outputs()[o]], &y = g.values()[g.inputs()[i]];
    if (x.dtype != y.dtype || x.shape != y.shape)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": the output is " + common::dtype_name(x.dtype) + " " +
                                                   g.shape_string(x.shape) + " but the input is " +
                                                   common::dtype_name(y.dtype) + " " + g.shape_string(y.shape));
  }
}

// The plan for DEVICES: from the memory cache, the disk cache, or built.
std::shared_ptr<const CompiledPlan> make_plan(const Graph& g, const std::vector<std::shared_ptr<Device>>& devices,
                                              bool fallback, const CompileOptions& o, CacheSource* source) {
  const bool cached = o.memory_cache || o.disk_cache;
  const std::string key =
      cached ? detail::cache_key(g, devices, fallback, o.options, o.graph_compilers, o.output_aliases) : "";
  // In memory, executables belong to these Device objects (another runtime
  // loading the same plugin has others); entries keep them alive, so an
  // address is never reused for another device while its entry exists.
  std::string memory_key = key;
  for (const auto& d : devices) memory_key += ":" + std::to_string(reinterpret_cast<uintptr_t>(d.get()));
  if (o.memory_cache)
    if (auto hit = detail::memory_cache_find(memory_key)) {
      detail::count_memory_hit();
      *source = CacheSource::kMemory;
      return hit;
    }
  const std::string folder = o.disk_cache ? detail::cache_folder(o.cache_dir) : "";
  const std::string file = folder.empty() ? "" : detail::entry_path(folder, key);
  auto plan = std::make_shared<CompiledPlan>();
  std::optional<detail::DiskEntry> entry;
  if (!folder.empty()) entry = detail::read_entry(folder, key, devices, g, fallback);
  plan->placement = entry ? entry->placement : detail::partition(g, devices, fallback, o.graph_compilers);
  *source = entry ? CacheSource::kDisk : CacheSource::kCompiled;
  // Write when there was no entry, or when a group had to be compiled that
  // now has bytes (missing or refused on disk).
  bool write = !folder.empty() && !entry;
  std::map<uint32_t, std::vector<uint8_t>> serialized;  // by group id: what the disk entry holds
  plan->alias_groups = alias_groups(g, plan->placement, o.output_aliases);
  const std::vector<uint32_t>& alias_gid = plan->alias_groups;
  for (const auto& [gid, nodes] : group_nodes(plan->placement)) {
    std::vector<std::pair<size_t, size_t>> aliases;
    for (size_t k = 0; k < alias_gid.size(); ++k)
      if (alias_gid[k] == gid) aliases.push_back(o.output_aliases[k]);
    const std::shared_ptr<Device>& device = devices[plan->placement.device[nodes.front()]];
    const std::vector<uint8_t>* bytes = nullptr;
    if (entry) {
      auto it = entry->executables.find(gid);
      if (it != entry->executables.end()) bytes = &it->second;
    }
    bool deserialized = false;
    auto exe =
        build_group(g, nodes, device, group_label(g, *device, gid, nodes), bytes, file, &deserialized, aliases);
    ++(deserialized ? plan->deserialized : plan->compiled);
    if (deserialized) {
      serialized[gid] = *bytes;
    } else if (!folder.empty()) {
      if (auto b = serialize(*exe)) {
        serialized[gid] = std::move(*b);
        write = true;
      }
    }
    plan->executables[gid] = std::move(exe);
  }
  if (entry) detail::count_disk_hit();
  if (write) detail::write_entry(folder, key, devices, detail::DiskEntry{plan->placement, std::move(serialized)});
  if (o.memory_cache) detail::memory_cache_store(memory_key, plan);
  return plan;
}

}  // namespace

CompiledGraph compile(const Graph& graph, const CompileOptions& o) {
  if (o.devices.empty()) throw Error(HAL_STATUS_INVALID_ARGUMENT, "compile: no devices given");
  auto impl = std::make_unique<CompiledGraph::Impl>();
  for (const auto& d : o.devices) {
    if (d == nullptr) throw Error(HAL_STATUS_INVALID_ARGUMENT, "compile: a device is null");
    if (std::find(impl->devices.begin(), impl->devices.end(), d) != impl->devices.end())
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "compile: device " + d->id() + " is listed twice");
    if (d == o.devices[0]) {
      d->check_usable("compile");
    } else if (d->state() == DeviceState::kLost) {
      continue;  // the devices left claim its share (failover re-partitions this way)
    }
    impl->devices.push_back(d);
  }
  if (o.use_fallback) {
    std::shared_ptr<Device> fb = o.fallback ? o.fallback : o.devices[0]->fallback_device();
    if (fb && fb->state() == DeviceState::kOk &&
        std::find(impl->devices.begin(), impl->devices.end(), fb) == impl->devices.end()) {
      impl->devices.push_back(fb);
      impl->fallback = true;
    }
  }
  impl->graph = graph;
  const Graph& g = impl->graph;
  const size_t n = g.nodes().size();
  check_output_aliases(g, o.output_aliases);
  impl->declared_aliases = o.output_aliases;
  impl->plan = make_plan(g, impl->devices, impl->fallback, o, &impl->stats.cache);
  const Placement& p = impl->plan->placement;
  CompiledGraphStats& stats = impl->stats;
  stats.compiled = stats.cache == CacheSource::kMemory ? 0 : impl->plan->compiled;
  stats.deserialized = stats.cache == CacheSource::kMemory ? 0 : impl->plan->deserialized;
  for (const auto& d : impl->devices) stats.devices.push_back(DevicePartStats{d->id()});

  // Units: one per group, one per op-by-op node; ordered (Kahn, the
  // earliest first node first). A cycle: groups that cannot be ordered.
  std::vector<size_t> unit_of(n);
  std::vector<std::vector<size_t>> units;
  std::map<uint32_t, size_t> unit_of_group;
  for (size_t i = 0; i < n; ++i) {
    if (p.group[i] != 0) {
      auto [it, fresh] = unit_of_group.emplace(p.group[i], units.size());
      if (fresh) units.emplace_back();
      unit_of[i] = it->second;
    } else {
      unit_of[i] = units.size();
      units.emplace_back();
    }
    units[unit_of[i]].push_back(i);
  }
  std::vector<int64_t> producer(g.values().size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t v : g.nodes()[i].outputs) producer[v] = static_cast<int64_t>(i);
  std::vector<std::vector<size_t>> next(units.size());
  std::vector<size_t> pending(units.size(), 0);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t v : g.nodes()[i].inputs) {
      if (v == HAL_GRAPH_NO_VALUE || producer[v] < 0) continue;
      size_t from = unit_of[static_cast<size_t>(producer[v])], to = unit_of[i];
      if (from == to || std::find(next[from].begin(), next[from].end(), to) != next[from].end()) continue;
      next[from].push_back(to);
      ++pending[to];
    }
  std::vector<size_t> order, ready;
  for (size_t u = 0; u < units.size(); ++u)
    if (pending[u] == 0) ready.push_back(u);
  while (!ready.empty()) {
    auto it = std::min_element(ready.begin(), ready.end(),
                               [&](size_t a, size_t b) { return units[a].front() < units[b].front(); });
    size_t u = *it;
    ready.erase(it);
    order.push_back(u);
    for (size_t t : next[u])
      if (--pending[t] == 0) ready.push_back(t);
  }
  if (order.size() != units.size()) {
    std::string stuck;
    for (size_t u = 0; u < units.size(); ++u)
      if (pending[u] > 0 && p.group[units[u].front()] != 0)
        stuck += (stuck.empty() ? "" : ", ") + std::to_string(p.group[units[u].front()]);
    throw Error(HAL_STATUS_FAILED_PRECONDITION, "compile: the groups cannot be ordered (group(s) " + stuck +
                                                    " depend on each other through other devices' nodes)");
  }

  // Where each value lives first; which devices have it (copies add).
  impl->value_device.assign(g.values().size(), 0);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t v : g.nodes()[i].outputs) impl->value_device[v] = p.device[i];
  std::set<std::pair<size_t, uint32_t>> present;  // (device, value)
  for (uint32_t v : g.inputs()) present.emplace(0, v);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t v : g.nodes()[i].outputs) present.emplace(p.device[i], v);
  uint64_t copy_bytes = 0;
  bool copy_bytes_known = true;
  auto value_bytes = [&](uint32_t v) {
    uint64_t b = common::dtype_size(g.values()[v].dtype);
    for (int64_t d : g.values()[v].shape) {
      if (d < 0) copy_bytes_known = false;
      b *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
    }
    return b;
  };
  std::map<uint32_t, size_t> output_index;
  for (size_t j = 0; j < g.outputs().size(); ++j) output_index[g.outputs()[j]] = j;
  // Copies output V (made elsewhere) into the caller's view on the home
  // device; home steps then read it there.
  auto output_copy = [&](uint32_t v) {
    Step s;
    s.kind = Step::kOutputCopy;
    s.device = 0;
    s.value = v;
    s.output = output_index.at(v);
    s.from = impl->value_device[v];
    s.fallback_node = p.fallback[static_cast<size_t>(producer[v])] ? static_cast<size_t>(producer[v]) : kNone;
    s.label = "copy of output " + std::to_string(s.output) + " (value " + std::to_string(v) + ") " +
              impl->devices[s.from]->id() + " -> " + impl->devices[0]->id();
    impl->steps.push_back(std::move(s));
    ++stats.copies;
    copy_bytes += value_bytes(v);
  };
  // Makes V available on device K before a step of node NODE there.
  auto need = [&](uint32_t v, size_t k, size_t node) {
    if (v == HAL_GRAPH_NO_VALUE) return;
    if (g.is_constant(v)) {
      if (impl->constants.count({k, v}) != 0) return;
      const std::vector<uint8_t>& bytes = *g.constant_data(v);
      Buffer b = impl->devices[k]->allocate(std::max<uint64_t>(bytes.size(), 1));
      if (!bytes.empty()) b.copy_from_host(bytes.data(), bytes.size());
      impl->constants.emplace(std::make_pair(k, v), std::move(b));
      ++stats.devices[k].constants;
      return;
    }
    if (!present.emplace(k, v).second) return;
    if (k == 0 && output_index.count(v) != 0) return output_copy(v);
    Step s;
    s.kind = Step::kCopy;
    s.device = k;
    s.value = v;
    s.from = impl->value_device[v];
    const bool feeds_fallback = p.fallback[node];
    const bool drains_fallback = producer[v] >= 0 && p.fallback[static_cast<size_t>(producer[v])];
    s.fallback_node = feeds_fallback ? node : drains_fallback ? static_cast<size_t>(producer[v]) : kNone;
    s.label = "copy of value " + std::to_string(v) + " " + impl->devices[s.from]->id() + " -> " +
              impl->devices[k]->id();
    impl->steps.push_back(std::move(s));
    ++stats.copies;
    copy_bytes += value_bytes(v);
  };

  // A reshape (row-major, so a contiguous input's bytes are the output's)
  // runs as metadata: its output aliases its input. Graph values are written
  // once by their producer, so sharing the bytes is safe. A reshape that is
  // a graph output on the home device instead has its input (made there by
  // a node, not itself an output or an alias) written straight into the
  // caller's output buffer.
  impl->aliased.assign(n, false);
  impl->into_output.assign(g.values().size(), -1);
  auto aliases = [&](size_t i) {
    const Graph::Node& node = g.nodes()[i];
    if (node.op != "reshape" || p.fallback[i] || node.inputs.size() != 1 || node.inputs[0] == HAL_GRAPH_NO_VALUE ||
        node.outputs.size() != 1 || g.values()[node.inputs[0]].dtype != g.values()[node.outputs[0]].dtype)
      return false;
    auto out = output_index.find(node.outputs[0]);
    if (out == output_index.end()) return true;
    const uint32_t v = node.inputs[0];
    const int64_t made = producer[v];
    if (p.device[i] != 0 || made < 0 || p.device[static_cast<size_t>(made)] != 0 ||
        impl->aliased[static_cast<size_t>(made)] || output_index.count(v) != 0 || impl->into_output[v] >= 0)
      return false;
    impl->into_output[v] = static_cast<int64_t>(out->second);
    return true;
  };
  std::vector<uint32_t> honouring;  // groups whose executables honour output aliases
  for (size_t u : order) {
    const std::vector<size_t>& nodes = units[u];
    const size_t k = p.device[nodes.front()];
    DevicePartStats& ds = stats.devices[k];
    if (p.group[nodes.front()] == 0) {
      const size_t i = nodes.front();
      for (uint32_t v : g.nodes()[i].inputs) need(v, k, i);
      Step s;
      s.kind = aliases(i) ? Step::kAlias : Step::kOp;
      s.device = k;
      s.node = i;
      s.label = impl->devices[k]->id() + " " + node_label(g, i);
      with_context(s.label, [&] { s.runner.emplace(impl->devices[k], g.nodes()[i].op); });
      if (s.kind == Step::kAlias) {
        impl->aliased[i] = true;
        ++stats.alias_nodes;
        impl->steps.push_back(std::move(s));
        continue;
      }
      ++stats.op_nodes;
      ++ds.op_nodes;
      if (p.fallback[i]) {
        ++stats.fallback_nodes;
        ++ds.fallback_nodes;
      }
      impl->steps.push_back(std::move(s));
      continue;
    }
    const uint32_t gid = p.group[nodes.front()];
    std::vector<bool> in_set(n, false);
    for (size_t i : nodes) in_set[i] = true;
    Step s;
    s.kind = Step::kExecutable;
    s.device = k;
    s.label = group_label(g, *impl->devices[k], gid, nodes);
    std::tie(s.inputs, s.outputs) = detail::boundary(g, nodes, in_set);
    for (uint32_t v : s.inputs) need(v, k, nodes.front());
    s.executable = impl->plan->executables.at(gid);
    const hal_graph_api_t& api = impl->devices[k]->plugin().graph;
    ++stats.groups;
    ++ds.groups;
    if (api.executable_get_info != nullptr) {
      hal_executable_info_t info{};
      info.struct_size = sizeof(info);
      with_context(s.label, [&] { throw_if_error(api.executable_get_info(s.executable->handle(), &info)); });
      s.strided_inputs = impl->devices[k]->plugin().negotiated_minor >= 7 &&
                         (info.flags & HAL_EXECUTABLE_FLAG_STRIDED_INPUTS) != 0;
      if (impl->devices[k]->plugin().negotiated_minor >= 14 && (info.flags & HAL_EXECUTABLE_FLAG_OUTPUT_ALIASES) != 0)
        honouring.push_back(gid);
      info.description[sizeof(info.description) - 1] = '\0';
      stats.kernel_count += info.kernel_count;
      ds.kernels += info.kernel_count;
      stats.descriptions.emplace_back(info.description);
      stats.plans.emplace_back(executable_plan(*impl->devices[k], info));
    }
    impl->steps.push_back(std::move(s));
  }
  for (uint32_t v : g.outputs())
    if (present.emplace(0, v).second) output_copy(v);
  const std::vector<uint32_t>& alias_gid = impl->plan->alias_groups;
  for (size_t k = 0; k < alias_gid.size(); ++k)
    if (alias_gid[k] != 0 && std::find(honouring.begin(), honouring.end(), alias_gid[k]) != honouring.end())
      impl->output_aliases.push_back(o.output_aliases[k]);
  impl->executable_reads.assign(g.values().size(), false);
  for (const Step& st : impl->steps)
    if (st.kind == Step::kExecutable && !st.strided_inputs)
      for (uint32_t v : st.inputs) impl->executable_reads[v] = true;
  // A value no step outside its executable sees needs no buffer per run.
  impl->internal.assign(g.values().size(), true);
  auto seen = [&](uint32_t v) {
    if (v != HAL_GRAPH_NO_VALUE) impl->internal[v] = false;
  };
  for (uint32_t v : g.inputs()) seen(v);
  for (uint32_t v : g.outputs()) seen(v);
  for (const Step& st : impl->steps) {
    if (st.kind == Step::kExecutable) {
      for (uint32_t v : st.inputs) seen(v);
      for (uint32_t v : st.outputs) seen(v);
    } else if (st.kind == Step::kOp || st.kind == Step::kAlias) {
      for (uint32_t v : g.nodes()[st.node].inputs) seen(v);
      for (uint32_t v : g.nodes()[st.node].outputs) seen(v);
    } else {
      seen(st.value);
    }
  }

  // Layouts: a value an op-by-op node makes in memory of ours (not a graph
  // output), read only by launches that take strided tensors (not by an
  // executable wanting contiguous inputs, not by a reshape aliasing it).
  impl->choosable.assign(g.values().size(), false);
  impl->step_of_node.assign(n, kNone);
  for (const ValueSpec& v : g.values())
    for (int64_t d : v.shape) impl->static_shapes = impl->static_shapes && d >= 0;
  if (o.layouts) {
    std::vector<bool> read_by_alias(g.values().size(), false);
    for (const Step& st : impl->steps)
      if (st.kind == Step::kAlias) read_by_alias[g.nodes()[st.node].inputs[0]] = true;
    for (size_t si = 0; si < impl->steps.size(); ++si) {
      const Step& st = impl->steps[si];
      if (st.kind != Step::kOp) continue;
      for (uint32_t v : g.nodes()[st.node].outputs)
        impl->choosable[v] = output_index.count(v) == 0 && impl->into_output[v] < 0 && !impl->executable_reads[v] &&
                             !read_by_alias[v];
      if (impl->devices[st.device]->plugin().op.op_get_layouts == nullptr) continue;
      impl->layout_nodes.push_back(st.node);
      impl->step_of_node[st.node] = si;
    }
    if (!impl->layout_nodes.empty() && impl->static_shapes) stats.relaid_values = impl->layouts_for(nullptr)->relaid;
  }
  stats.copy_bytes = copy_bytes_known ? copy_bytes : 0;
  if (impl->steps.size() == 1 && impl->steps[0].kind == Step::kExecutable && impl->steps[0].device == 0 &&
      impl->steps[0].outputs.size() == g.outputs().size() && impl->layout_nodes.empty()) {
    constexpr int64_t kNoSource = INT64_MIN;
    std::vector<int64_t> from(g.values().size(), kNoSource);  // per value: graph input i, or -1 - constant k
    for (size_t i = 0; i < g.inputs().size(); ++i) from[g.inputs()[i]] = static_cast<int64_t>(i);
    for (const auto& [where, buffer] : impl->constants) {
      if (where.first != 0) continue;
      const ValueSpec& v = g.values()[where.second];
      from[where.second] = -1 - static_cast<int64_t>(impl->direct_constants.size());
      impl->direct_constants.emplace_back(buffer, v.dtype, v.shape);
    }
    std::vector<int64_t> output_of(g.values().size(), kNoSource);  // per value: graph output j
    for (size_t j = 0; j < g.outputs().size(); ++j) output_of[g.outputs()[j]] = static_cast<int64_t>(j);
    bool direct = true;
    for (uint32_t v : impl->steps[0].inputs) {
      direct = direct && from[v] != kNoSource;
      impl->direct_inputs.push_back(direct ? from[v] : 0);
    }
    std::vector<bool> written(g.outputs().size(), false);
    for (uint32_t v : impl->steps[0].outputs) {
      direct = direct && output_of[v] != kNoSource && !written[static_cast<size_t>(output_of[v])];
      if (!direct) break;
      written[static_cast<size_t>(output_of[v])] = true;
      impl->direct_outputs.push_back(static_cast<size_t>(output_of[v]));
    }
    impl->direct = direct;
  }
  // Drop devices that run nothing from the stats unless listed.
  if (impl->fallback && stats.devices.back().op_nodes == 0) stats.devices.pop_back();
  return CompiledGraph(std::move(impl));
}

CompiledGraph compile(Device& device, const Graph& graph) {
  CompileOptions o;
  o.devices = {device.shared_from_this()};
  o.use_fallback = false;
  o.disk_cache = false;
  o.memory_cache = false;
  return compile(graph, o);
}

void CompiledGraph::run(const std::vector<const TensorView*>& inputs, const std::vector<const TensorView*>& outputs,
                        const Stream* stream) const {
  // A lost device refuses the whole run before any step (nothing half-written).
  for (const auto& d : impl_->devices) d->check_usable("CompiledGraph::run");
  const Graph& g = impl_->graph;
  const Placement& p = impl_->plan->placement;
  if (inputs.size() != g.inputs().size() || outputs.size() != g.outputs().size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run: got " + std::to_string(inputs.size()) +
                                                 " inputs and " + std::to_string(outputs.size()) +
                                                 " outputs but the graph has " + std::to_string(g.inputs().size()) +
                                                 " and " + std::to_string(g.outputs().size()));
  // Bind the symbols from the caller's views; check every view. Messages
  // are built only on the way to an error (a run repeats this per view).
  struct Binder {
    int64_t size;
    const char* role;
    size_t index;
    uint32_t id;
  };
  auto place_of = [](const char* role, size_t i, uint32_t id) {
    return std::string(role) + " " + std::to_string(i) + " (value " + std::to_string(id) + ")";
  };
  // symbol -> size, who bound it (a graph has few symbols: searched in order)
  std::vector<std::pair<int64_t, Binder>> symbols;
  std::unique_lock<std::mutex> keep(impl_->views_mu, std::try_to_lock);
  std::vector<std::vector<TensorView>> own;
  std::vector<std::vector<TensorView>>& views = keep.owns_lock() ? impl_->kept_views : own;
  const bool direct = impl_->direct;
  if (views.empty() && !direct) impl_->bind_constants(views);
  Impl::Scratch own_scratch;
  Impl::Scratch& scratch = keep.owns_lock() ? impl_->kept_scratch : own_scratch;
  std::vector<bool>& have = scratch.have;  // on the home device, from the caller
  if (!direct) have.assign(g.values().size(), false);
  auto bind = [&](const char* role, size_t i, uint32_t id, const TensorView* view) {
    if (view == nullptr)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run: " + place_of(role, i, id) + " is null");
    const ValueSpec& v = g.values()[id];
    auto fail = [&](const std::string& what) {
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run: " + place_of(role, i, id) + what);
    };
    if (view->dtype != v.dtype)
      fail(std::string(" has dtype ") + common::dtype_name(view->dtype) + " but the value's is " + common::dtype_name(v.dtype));
    if (view->shape.size() != v.shape.size())
      fail(" has shape " + dims(view->shape) + " but the value's is " + dims(v.shape));
    for (size_t d = 0; d < v.shape.size(); ++d) {
      int64_t want = v.shape[d], got = view->shape[d];
      if (want >= 0 && got != want)
        fail(" has shape " + dims(view->shape) + " but the value's is " + dims(v.shape) + " (dim " + std::to_string(d) + ")");
      if (want >= 0) continue;
      auto it = std::find_if(symbols.begin(), symbols.end(), [&](const auto& b) { return b.first == want; });
      const bool fresh = it == symbols.end();
      if (fresh) it = symbols.insert(symbols.end(), {want, Binder{got, role, i, id}});
      if (!fresh && it->second.size != got)
        fail(": dim " + std::to_string(d) + " is " + std::to_string(got) + " but symbol " + std::to_string(want) +
             " is " + std::to_string(it->second.size) + " (bound by " +
             place_of(it->second.role, it->second.index, it->second.id) + ")");
    }
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    bind("input", i, g.inputs()[i], inputs[i]);
    if (direct) continue;
    views[0][g.inputs()[i]] = *inputs[i];
    have[g.inputs()[i]] = true;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    bind("output", i, g.outputs()[i], outputs[i]);
    if (direct) continue;
    views[0][g.outputs()[i]] = *outputs[i];  // made elsewhere: copied in (kOutputCopy)
    have[g.outputs()[i]] = true;
  }
  // An output given as its input's view: only where an executable honours it.
  for (const auto& [o, i] : impl_->declared_aliases) {
    const TensorView &out = *outputs[o], &in = *inputs[i];
    if (out.buffer == nullptr || out.buffer != in.buffer || out.byte_offset != in.byte_offset || span_bytes(out) == 0)
      continue;
    if (std::find(impl_->output_aliases.begin(), impl_->output_aliases.end(), std::make_pair(o, i)) ==
        impl_->output_aliases.end())
      throw Error(HAL_STATUS_INVALID_ARGUMENT,
                  "CompiledGraph::run: " + place_of("output", o, g.outputs()[o]) + " is the memory of " +
                      place_of("input", i, g.inputs()[i]) +
                      ", but this graph cannot update that input in place (see output_aliases()): pass separate "
                      "memory and copy");
  }
  // A value's concrete shape: its symbols as the views bind them, else (a
  // size derived from symbols) as shape inference gives it from the inputs.
  std::shared_ptr<const std::vector<std::vector<int64_t>>> inferred;
  auto concrete = [&](uint32_t id) {
    const ValueSpec& v = g.values()[id];
    std::vector<int64_t> shape = v.shape;
    for (int64_t& d : shape) {
      if (d >= 0) continue;
      auto it = std::find_if(symbols.begin(), symbols.end(), [&](const auto& b) { return b.first == d; });
      if (it != symbols.end()) {
        d = it->second.size;
        continue;
      }
      if (!inferred) {
        std::vector<std::vector<int64_t>> in;
        for (const TensorView* view : inputs) in.push_back(view->shape);
        inferred = impl_->shapes_for(in);
      }
      shape = (*inferred)[id];
      for (int64_t x : shape)
        if (x < 0)
          throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run: value " + std::to_string(id) + " has shape " +
                                                       dims(v.shape) + " but nothing binds " + g.symbol_name(x));
      break;
    }
    return shape;
  };
  auto stream_of = [&](size_t k) { return k == 0 ? stream : nullptr; };
  // STEP's executable on its boundary views (VIEW(output?, index)).
  auto execute = [&](const Step& step, const auto& view) {
    with_context(step.label, [&] {
      Device& dev = *impl_->devices[step.device];
      const Stream* s = stream_of(step.device);
      std::vector<hal_tensor_t>& tensors = scratch.tensors;
      std::vector<const hal_tensor_t*>&in = scratch.in, &out = scratch.out;
      tensors.clear();
      in.clear();
      out.clear();
      tensors.reserve(step.inputs.size() + step.outputs.size());  // no reallocation: IN and OUT point into it
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        tensors.push_back(detail::c_tensor("execute", view(false, i), "input", i));
        in.push_back(&tensors.back());
      }
      for (size_t i = 0; i < step.outputs.size(); ++i) {
        tensors.push_back(detail::c_tensor("execute", view(true, i), "output", i));
        out.push_back(&tensors.back());
      }
      dev.check(dev.plugin().graph.executable_execute(step.executable->handle(), in.data(), in.size(), out.data(),
                                                       out.size(), s ? s->handle() : nullptr));
    });
  };
  if (direct) {
    execute(impl_->steps[0], [&](bool output, size_t i) -> const TensorView& {
      if (output) return *outputs[impl_->direct_outputs[i]];
      const int64_t from = impl_->direct_inputs[i];
      return from >= 0 ? *inputs[static_cast<size_t>(from)] : impl_->direct_constants[static_cast<size_t>(-1 - from)];
    });
    impl_->last_copy_bytes = 0;
    return;
  }

  // Intermediates: contiguous, from each device's caching allocator (the
  // home device's on STREAM), each value where its producer runs.
  std::vector<Buffer> temporaries;
  const std::shared_ptr<const detail::LayoutPlan> layout =
      impl_->layout_nodes.empty() ? nullptr : impl_->layouts_for(&inputs);
  auto temporary = [&](size_t k, uint32_t id, uint64_t bytes, std::vector<int64_t> shape,
                       std::vector<int64_t> strides) {
    temporaries.push_back(impl_->devices[k]->allocate(std::max<uint64_t>(bytes, 1), stream_of(k)));
    views[k][id] = TensorView(temporaries.back(), g.values()[id].dtype, std::move(shape), std::move(strides));
  };
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (uint32_t id : g.nodes()[i].outputs) {
      const size_t k = p.device[i];
      if ((k == 0 && have[id]) || impl_->aliased[i] || impl_->internal[id]) continue;
      const int64_t j = impl_->into_output[id];
      if (j >= 0 && contiguous(*outputs[static_cast<size_t>(j)])) {  // the output reshape's input: its bytes
        TensorView into = *outputs[static_cast<size_t>(j)];
        into.shape = concrete(id);
        into.strides.clear();
        views[k][id] = std::move(into);
        continue;
      }
      std::vector<int64_t> shape = concrete(id);
      uint64_t bytes = common::dtype_size(g.values()[id].dtype);
      for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
      std::vector<int64_t> strides;
      if (layout && !layout->order[id].empty()) strides = common::dense_strides(shape, layout->order[id]);
      temporary(k, id, bytes, std::move(shape), std::move(strides));
    }

  uint64_t copied = 0;
  std::map<size_t, uint64_t> fallback_bytes;  // fallback node -> bytes copied for it
  for (const Step& step : impl_->steps) {
    Device& dev = *impl_->devices[step.device];
    const Stream* s = stream_of(step.device);
    switch (step.kind) {
      case Step::kAlias: {
        const Graph::Node& node = g.nodes()[step.node];
        const TensorView& src = views[step.device][node.inputs[0]];
        if (impl_->into_output[node.inputs[0]] >= 0) {
          const TensorView& dst = views[step.device][node.outputs[0]];
          if (src.buffer == dst.buffer && src.byte_offset == dst.byte_offset) break;  // written there already
          // else the caller's output is strided: the reshape writes it.
        } else if (contiguous(src)) {
          TensorView alias = src;
          alias.shape = concrete(node.outputs[0]);
          alias.strides.clear();
          views[step.device][node.outputs[0]] = std::move(alias);
          break;
        } else {  // a strided input (a caller's view): the reshape launches, into a temporary
          const std::vector<int64_t> shape = concrete(node.outputs[0]);
          uint64_t bytes = common::dtype_size(g.values()[node.outputs[0]].dtype);
          for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
          temporary(step.device, node.outputs[0], bytes, shape, {});
        }
        [[fallthrough]];
      }
      case Step::kOp: {
        const Graph::Node& node = g.nodes()[step.node];
        std::vector<const TensorView*> in, out;
        for (uint32_t v : node.inputs) in.push_back(v == HAL_GRAPH_NO_VALUE ? nullptr : &views[step.device][v]);
        for (uint32_t v : node.outputs) out.push_back(&views[step.device][v]);
        with_context(step.label, [&] { step.runner->launch(in, out, node.attrs, s); });
        if (p.fallback[step.node]) fallback_bytes.emplace(step.node, 0);
        break;
      }
      case Step::kExecutable:
        execute(step, [&](bool output, size_t i) -> const TensorView& {
          return views[step.device][output ? step.outputs[i] : step.inputs[i]];
        });
        break;
      case Step::kCopy:
        with_context(step.label, [&] {
          const TensorView& src = views[step.from][step.value];
          const uint64_t bytes = span_bytes(src);
          temporary(step.device, step.value, bytes, src.shape, src.strides);
          transfer(*impl_->devices[step.from], src, bytes, stream_of(step.from), dev,
                   views[step.device][step.value].buffer, 0, s);
          copied += bytes;
          if (step.fallback_node != kNone) fallback_bytes[step.fallback_node] += bytes;
        });
        break;
      case Step::kOutputCopy:
        with_context(step.label, [&] {
          const TensorView& src = views[step.from][step.value];
          const TensorView& dst = *outputs[step.output];
          const uint64_t bytes = span_bytes(src);
          if (contiguous(dst)) {
            transfer(*impl_->devices[step.from], src, bytes, stream_of(step.from), dev, dst.buffer, dst.byte_offset,
                     s);
          } else {  // into the caller's strided view through the home device's copy op
            temporaries.push_back(dev.allocate(std::max<uint64_t>(bytes, 1), s));
            TensorView staged(temporaries.back(), src.dtype, src.shape, src.strides);
            transfer(*impl_->devices[step.from], src, bytes, stream_of(step.from), dev, staged.buffer, 0, s);
            OpRunner(impl_->devices[0], "copy").launch({&staged}, {&dst}, {}, s);
          }
          copied += bytes;
          if (step.fallback_node != kNone) fallback_bytes[step.fallback_node] += bytes;
        });
        break;
    }
  }
  impl_->last_copy_bytes = copied;
  for (const auto& [node, bytes] : fallback_bytes) record_fallback(*impl_->devices[0], g.nodes()[node].op, bytes);
}

std::vector<OwnedTensor> CompiledGraph::run_allocating(const std::vector<const TensorView*>& inputs,
                                                       const Stream* stream) const {
  const Graph& g = impl_->graph;
  if (inputs.size() != g.inputs().size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run_allocating: got " + std::to_string(inputs.size()) +
                                                 " inputs but the graph has " + std::to_string(g.inputs().size()));
  std::vector<std::vector<int64_t>> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run_allocating: input " + std::to_string(i) + " (value " +
                                                   std::to_string(g.inputs()[i]) + ") is null");
    in.push_back(inputs[i]->shape);
  }
  const auto shapes_held = impl_->shapes_for(in);  // names a bad input or node
  const std::vector<std::vector<int64_t>>& shapes = *shapes_held;
  std::vector<OwnedTensor> out(g.outputs().size());
  std::vector<const TensorView*> views;
  for (size_t j = 0; j < out.size(); ++j) {
    const uint32_t id = g.outputs()[j];
    uint64_t bytes = common::dtype_size(g.values()[id].dtype);
    for (int64_t d : shapes[id]) {
      if (d < 0)
        throw Error(HAL_STATUS_INVALID_ARGUMENT,
                    "CompiledGraph::run_allocating: output " + std::to_string(j) + " (value " + std::to_string(id) +
                        ", '" + g.value_name(id) + "') has shape " + dims(g.values()[id].shape) + " but nothing binds " +
                        g.symbol_name(d) + " (pass preallocated outputs)");
      bytes *= static_cast<uint64_t>(d);
    }
    out[j].buffer = impl_->devices[0]->allocate(std::max<uint64_t>(bytes, 1), stream);
    out[j].view = TensorView(out[j].buffer, g.values()[id].dtype, shapes[id]);
    views.push_back(&out[j].view);
  }
  run(inputs, views, stream);
  return out;
}

std::string CompiledGraph::explain() const {
  const Impl& m = *impl_;
  const Graph& g = m.graph;
  const Placement& p = m.plan->placement;
  std::ostringstream os;
  const CompiledGraphStats& s = m.stats;
  os << "graph: " << g.nodes().size() << " nodes on " << m.devices.size() << " device(s); executables "
     << (s.cache == CacheSource::kMemory ? "from the memory cache"
         : s.cache == CacheSource::kDisk ? "from the disk cache (" + std::to_string(s.deserialized) +
                                                 " deserialised, " + std::to_string(s.compiled) + " compiled)"
                                         : "compiled (" + std::to_string(s.compiled) + ")")
     << "\n";
  for (size_t k = 0; k < m.devices.size(); ++k) {
    os << m.devices[k]->id() << (m.fallback && k + 1 == m.devices.size() ? " (fallback)" : "")
       << (k == 0 ? " (home)" : "") << ":\n";
    size_t d = 0;
    for (const Step& st : m.steps) {
      if (st.device != k) continue;
      if (st.kind == Step::kExecutable) {
        os << "  " << st.label;
        hal_executable_info_t info{};
        info.struct_size = sizeof(info);
        const hal_graph_api_t& api = m.devices[k]->plugin().graph;
        if (api.executable_get_info != nullptr) {
          hal_status_t* e = api.executable_get_info(st.executable->handle(), &info);
          if (e == nullptr) {
            info.description[sizeof(info.description) - 1] = '\0';
            os << ": " << info.kernel_count << " kernel(s), " << info.description;
            const std::string plan = executable_plan(*m.devices[k], info);
            if (!plan.empty()) {
              os << "\n    plan (its node k is the group's k-th node):";
              for (size_t at = 0; at < plan.size();) {
                const size_t end = std::min(plan.find('\n', at), plan.size());
                os << "\n      " << plan.substr(at, end - at);
                at = end + 1;
              }
            }
          } else {
            e->destroy(e);
          }
        }
        os << "\n";
        ++d;
      } else if (st.kind == Step::kAlias) {
        os << "  " << node_label(g, st.node)
           << (m.into_output[g.nodes()[st.node].inputs[0]] >= 0 ? " is its input, made in the output's buffer (no launch)\n"
                                                                 : " aliases its input (no launch)\n");
        ++d;
      } else if (st.kind == Step::kOp) {
        os << "  " << node_label(g, st.node) << " op by op";
        if (p.fallback[st.node]) os << " [fallback]";
        if (!p.declined[st.node].empty()) os << " (declined by " << p.declined[st.node] << ")";
        os << "\n";
        ++d;
      }
    }
    if (d == 0) os << "  (nothing)\n";
  }
  std::shared_ptr<const detail::LayoutPlan> layout;
  {
    std::lock_guard<std::mutex> lock(m.layout_mu);
    layout = m.last_layout;
  }
  if (layout && layout->relaid > 0) {
    os << "layouts between op-by-op launches" << (m.static_shapes ? "" : " (for the last run's shapes)")
       << ", as the plugins prefer them:\n";
    for (size_t i = 0; i < g.nodes().size(); ++i)
      for (uint32_t v : g.nodes()[i].outputs) {
        if (layout->order[v].empty()) continue;
        os << "  value " << v << " of " << node_label(g, i) << ": dims in order (";
        for (size_t d = 0; d < layout->order[v].size(); ++d) os << (d ? ", " : "") << layout->order[v][d];
        os << ")\n";
      }
  }
  os << "copies between devices per run: " << s.copies;
  if (s.copy_bytes > 0) os << " (" << s.copy_bytes << " bytes)";
  os << "\n";
  for (const Step& st : m.steps)
    if (st.kind == Step::kCopy || st.kind == Step::kOutputCopy) os << "  " << st.label << "\n";
  return os.str();
}

}  // namespace hal
