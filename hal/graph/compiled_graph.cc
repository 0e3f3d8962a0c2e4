#include "hal/runtime/compiled_graph.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "hal/common/op_schema.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {
namespace {

std::string dims(const std::vector<int64_t>& v) { return common::shape_string(v.data(), static_cast<int>(v.size())); }

std::string node_label(const Graph& g, size_t n) {
  return "node " + std::to_string(n) + " ('" + g.nodes()[n].op + "')";
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

// The C view of the nodes NODES of G as a self-contained graph with INPUTS
// and OUTPUTS (global value ids); values get local ids in order of first
// mention. Valid while G and this object live.
class CGraph {
 public:
  CGraph(const Graph& g, const std::vector<size_t>& nodes, const std::vector<uint32_t>& inputs,
         const std::vector<uint32_t>& outputs)
      : local_(g.values().size(), HAL_GRAPH_NO_VALUE) {
    auto local = [&](uint32_t id) {
      if (id == HAL_GRAPH_NO_VALUE) return id;
      if (local_[id] == HAL_GRAPH_NO_VALUE) {
        local_[id] = static_cast<uint32_t>(values_.size());
        const ValueSpec& v = g.values()[id];
        values_.push_back(hal_graph_value_t{sizeof(hal_graph_value_t), static_cast<uint32_t>(v.dtype),
                                            static_cast<uint32_t>(v.shape.size()),
                                            v.shape.empty() ? nullptr : v.shape.data()});
      }
      return local_[id];
    };
    for (uint32_t id : inputs) inputs_.push_back(local(id));
    ids_.reserve(nodes.size());
    attrs_.reserve(nodes.size());
    for (size_t n : nodes) {
      const Graph::Node& node = g.nodes()[n];
      ids_.emplace_back();
      for (uint32_t id : node.inputs) ids_.back().first.push_back(local(id));
      for (uint32_t id : node.outputs) ids_.back().second.push_back(local(id));
      attrs_.emplace_back();
      for (const Attr& a : node.attrs) attrs_.back().push_back(a.c_attr());
      hal_graph_node_t c{};
      c.struct_size = sizeof(c);
      c.op = node.op.c_str();
      c.inputs = ids_.back().first.data();
      c.input_count = ids_.back().first.size();
      c.outputs = ids_.back().second.data();
      c.output_count = ids_.back().second.size();
      c.attrs = attrs_.back().empty() ? nullptr : attrs_.back().data();
      c.attr_count = attrs_.back().size();
      nodes_.push_back(c);
    }
    for (uint32_t id : outputs) outputs_.push_back(local(id));
    for (const auto& v : values_) value_ptrs_.push_back(&v);
    for (const auto& n : nodes_) node_ptrs_.push_back(&n);
    graph_.struct_size = sizeof(graph_);
    graph_.values = value_ptrs_.data();
    graph_.value_count = value_ptrs_.size();
    graph_.nodes = node_ptrs_.data();
    graph_.node_count = node_ptrs_.size();
    graph_.inputs = inputs_.data();
    graph_.input_count = inputs_.size();
    graph_.outputs = outputs_.data();
    graph_.output_count = outputs_.size();
  }
  CGraph(const CGraph&) = delete;
  const hal_graph_t* get() const { return &graph_; }

 private:
  std::vector<uint32_t> local_;  // global id -> local id
  std::vector<hal_graph_value_t> values_;
  std::vector<std::pair<std::vector<uint32_t>, std::vector<uint32_t>>> ids_;  // per node: inputs, outputs
  std::vector<std::vector<hal_attr_t>> attrs_;
  std::vector<hal_graph_node_t> nodes_;
  std::vector<const hal_graph_value_t*> value_ptrs_;
  std::vector<const hal_graph_node_t*> node_ptrs_;
  std::vector<uint32_t> inputs_, outputs_;
  hal_graph_t graph_{};
};

}  // namespace

// ---- CompiledGraph ----------------------------------------------------------

namespace {
// One step of a run: a compiled group or one node through OpRunner.
struct Step {
  std::string label;                  // "group 1 (nodes 0, 1)" or "node 2 ('matmul')"
  hal_executable_t* executable = nullptr;
  std::vector<uint32_t> inputs, outputs;  // global value ids (executables)
  size_t node = 0;                    // op steps
  std::optional<OpRunner> runner;     // op steps
};
}  // namespace

struct CompiledGraph::Impl {
  std::shared_ptr<Device> device;
  Graph graph;
  std::vector<Step> steps;
  std::vector<std::pair<uint32_t, Buffer>> constants;  // value id, its bytes on the device (uploaded once)
  CompiledGraphStats stats;

  const hal_graph_api_t& api() const { return device->plugin().graph; }
  ~Impl() {
    for (Step& s : steps)
      if (s.executable != nullptr) {
        hal_status_t* st = api().executable_destroy(s.executable);
        if (st != nullptr) st->destroy(st);  // a destructor has nowhere to report to
      }
  }
};

CompiledGraph::CompiledGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledGraph::CompiledGraph(CompiledGraph&&) noexcept = default;
CompiledGraph& CompiledGraph::operator=(CompiledGraph&&) noexcept = default;
CompiledGraph::~CompiledGraph() = default;
const CompiledGraphStats& CompiledGraph::stats() const { return impl_->stats; }
Device& CompiledGraph::device() const { return *impl_->device; }

CompiledGraph compile(Device& device, const Graph& graph) {
  auto impl = std::make_unique<CompiledGraph::Impl>();
  impl->device = device.shared_from_this();
  impl->graph = graph;
  const Graph& g = impl->graph;
  const size_t n = g.nodes().size();
  const std::string& plugin = device.plugin_name();

  // Which nodes the plugin takes.
  std::vector<uint32_t> group(n, 0);
  const hal_graph_api_t& api = device.plugin().graph;
  if (api.graph_partition != nullptr && n > 0) {
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    CGraph c(g, all, g.inputs(), g.outputs());
    throw_if_error(api.graph_partition(device.handle(), c.get(), group.data()));
  }

  // Units: one per claimed group (by first node), one per unclaimed node.
  std::vector<size_t> unit_of(n);
  std::vector<std::vector<size_t>> units;
  std::map<uint32_t, size_t> unit_of_group;
  for (size_t i = 0; i < n; ++i) {
    if (group[i] != 0) {
      auto [it, fresh] = unit_of_group.emplace(group[i], units.size());
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

  // Order the units (Kahn; the earliest first node goes first). A cycle
  // means a group is not convex.
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
      if (pending[u] > 0 && group[units[u].front()] != 0) stuck += (stuck.empty() ? "" : ", ") + std::to_string(group[units[u].front()]);
    throw Error(HAL_STATUS_FAILED_PRECONDITION,
                plugin + ": graph_partition: the groups cannot be ordered (group(s) " + stuck +
                    " are not convex: a path leaves and re-enters them)");
  }

  // Constants live on the device for the executable's lifetime.
  for (uint32_t id : g.constants()) {
    const std::vector<uint8_t>& bytes = *g.constant_data(id);
    Buffer b = device.allocate(std::max<uint64_t>(bytes.size(), 1));
    if (!bytes.empty()) b.copy_from_host(bytes.data(), bytes.size());
    impl->constants.emplace_back(id, std::move(b));
  }

  // Compile each group; resolve each other node's op.
  std::vector<bool> is_output(g.values().size(), false);
  for (uint32_t v : g.outputs()) is_output[v] = true;
  for (size_t u : order) {
    const std::vector<size_t>& nodes = units[u];
    Step step;
    if (group[nodes.front()] == 0) {
      step.node = nodes.front();
      step.label = node_label(g, step.node);
      with_context(step.label, [&] { step.runner.emplace(impl->device, g.nodes()[step.node].op); });
      ++impl->stats.op_nodes;
      impl->steps.push_back(std::move(step));
      continue;
    }
    step.label = "group " + std::to_string(group[nodes.front()]) + " (nodes";
    for (size_t i : nodes) step.label += (i == nodes.front() ? " " : ", ") + std::to_string(i) + " " + g.nodes()[i].op;
    step.label += ")";
    // Inputs: values read but not produced inside; outputs: values produced
    // inside and read outside (or graph outputs).
    for (size_t i : nodes)
      for (uint32_t v : g.nodes()[i].inputs)
        if (v != HAL_GRAPH_NO_VALUE && (producer[v] < 0 || unit_of[static_cast<size_t>(producer[v])] != u) &&
            std::find(step.inputs.begin(), step.inputs.end(), v) == step.inputs.end())
          step.inputs.push_back(v);
    for (size_t i : nodes)
      for (uint32_t v : g.nodes()[i].outputs) {
        bool read_outside = is_output[v];
        for (size_t j = 0; j < n && !read_outside; ++j)
          if (unit_of[j] != u)
            read_outside = std::find(g.nodes()[j].inputs.begin(), g.nodes()[j].inputs.end(), v) != g.nodes()[j].inputs.end();
        if (read_outside) step.outputs.push_back(v);
      }
    CGraph sub(g, nodes, step.inputs, step.outputs);
    with_context(step.label, [&] { throw_if_error(api.graph_compile(device.handle(), sub.get(), &step.executable)); });
    impl->steps.push_back(std::move(step));  // owned from here (destroyed by ~Impl)
    Step& s = impl->steps.back();
    ++impl->stats.groups;
    if (api.executable_get_info != nullptr) {
      hal_executable_info_t info{};
      info.struct_size = sizeof(info);
      with_context(s.label, [&] { throw_if_error(api.executable_get_info(s.executable, &info)); });
      info.description[sizeof(info.description) - 1] = '\0';
      impl->stats.kernel_count += info.kernel_count;
      impl->stats.descriptions.emplace_back(info.description);
    }
  }
  return CompiledGraph(std::move(impl));
}

void CompiledGraph::run(const std::vector<const TensorView*>& inputs, const std::vector<const TensorView*>& outputs,
                        const Stream* stream) const {
  const Graph& g = impl_->graph;
  if (inputs.size() != g.inputs().size() || outputs.size() != g.outputs().size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run: got " + std::to_string(inputs.size()) +
                                                 " inputs and " + std::to_string(outputs.size()) +
                                                 " outputs but the graph has " + std::to_string(g.inputs().size()) +
                                                 " and " + std::to_string(g.outputs().size()));
  // Bind the symbols from the caller's views; check every view.
  std::map<int64_t, std::pair<int64_t, std::string>> symbols;  // symbol -> size, who bound it
  std::vector<TensorView> views(g.values().size());
  std::vector<bool> have(g.values().size(), false);
  auto bind = [&](const char* role, size_t i, uint32_t id, const TensorView* view) {
    const std::string place = std::string(role) + " " + std::to_string(i) + " (value " + std::to_string(id) + ")";
    if (view == nullptr) throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run: " + place + " is null");
    const ValueSpec& v = g.values()[id];
    auto fail = [&](const std::string& what) {
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run: " + place + what);
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
      auto [it, fresh] = symbols.emplace(want, std::make_pair(got, place));
      if (!fresh && it->second.first != got)
        fail(": dim " + std::to_string(d) + " is " + std::to_string(got) + " but symbol " + std::to_string(want) +
             " is " + std::to_string(it->second.first) + " (bound by " + it->second.second + ")");
    }
    views[id] = *view;
    have[id] = true;
  };
  for (size_t i = 0; i < inputs.size(); ++i) bind("input", i, g.inputs()[i], inputs[i]);
  for (size_t i = 0; i < outputs.size(); ++i) bind("output", i, g.outputs()[i], outputs[i]);
  for (const auto& [id, buffer] : impl_->constants) {
    views[id] = TensorView(buffer, g.values()[id].dtype, g.values()[id].shape);
    have[id] = true;
  }

  // Intermediates: contiguous, from the caching allocator, on STREAM.
  std::vector<Buffer> temporaries;
  for (size_t id = 0; id < g.values().size(); ++id) {
    if (have[id]) continue;
    const ValueSpec& v = g.values()[id];
    std::vector<int64_t> shape = v.shape;
    uint64_t bytes = common::dtype_size(v.dtype);
    for (int64_t& d : shape) {
      if (d < 0) {
        auto it = symbols.find(d);
        if (it == symbols.end())
          throw Error(HAL_STATUS_INVALID_ARGUMENT, "CompiledGraph::run: value " + std::to_string(id) + " has shape " +
                                                       dims(v.shape) + " but no graph input or output binds symbol " +
                                                       std::to_string(d));
        d = it->second.first;
      }
      bytes *= static_cast<uint64_t>(d);
    }
    temporaries.push_back(impl_->device->allocate(std::max<uint64_t>(bytes, 1), stream));
    views[id] = TensorView(temporaries.back(), v.dtype, std::move(shape));
  }

  hal_stream_t* s = stream != nullptr ? stream->handle() : nullptr;
  for (const Step& step : impl_->steps) {
    if (step.runner) {
      const Graph::Node& node = g.nodes()[step.node];
      std::vector<const TensorView*> in, out;
      for (uint32_t v : node.inputs) in.push_back(v == HAL_GRAPH_NO_VALUE ? nullptr : &views[v]);
      for (uint32_t v : node.outputs) out.push_back(&views[v]);
      with_context(step.label, [&] { step.runner->launch(in, out, node.attrs, stream); });
      continue;
    }
    with_context(step.label, [&] {
      std::vector<hal_tensor_t> tensors;
      tensors.reserve(step.inputs.size() + step.outputs.size());
      std::vector<const hal_tensor_t*> in, out;
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        tensors.push_back(detail::c_tensor("execute", views[step.inputs[i]], "input", i));
        in.push_back(&tensors.back());
      }
      for (size_t i = 0; i < step.outputs.size(); ++i) {
        tensors.push_back(detail::c_tensor("execute", views[step.outputs[i]], "output", i));
        out.push_back(&tensors.back());
      }
      throw_if_error(impl_->api().executable_execute(step.executable, in.data(), in.size(), out.data(), out.size(), s));
    });
  }
}

}  // namespace hal
