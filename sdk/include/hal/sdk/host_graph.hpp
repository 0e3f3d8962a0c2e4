// HAL C++ SDK: graph compile from a plugin's own kernels, for devices whose
// memory the host addresses (Buffer::host_pointer non-null, kernels that run
// synchronously when given no stream). What an executable saves over op by
// op: one stream task per execute instead of one launch per node, calls
// validated once per input shape instead of per launch, intermediate values
// in one arena planned by liveness (a value's bytes are reused once its last
// reader ran; a reshape of an intermediate is that intermediate's bytes)
// instead of an allocation each, and a plugin's fused steps in place of the
// nodes they cover (HostGraphFusion).
//
//   std::vector<uint32_t> MyDevice::partition_graph(const Graph& g) {
//     return hal::sdk::partition_host_graph(plugin_ops, *this, g);
//   }
//   std::unique_ptr<Executable> MyDevice::compile_graph(const Graph& g) {
//     return std::make_unique<hal::sdk::HostGraphExecutable>(*this, plugin_ops, g);
//   }
//
// Header-only; reached through hal/sdk/ops.hpp's pieces, so include it in
// the TU that defines the device's graph entries.
#ifndef HAL_SDK_HOST_GRAPH_HPP_
#define HAL_SDK_HOST_GRAPH_HPP_

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hal/sdk/detail/op_entries.hpp"
#include "hal/sdk/graph.hpp"
#include "hal/sdk/op_registry.hpp"
#include "hal/sdk/stream.hpp"

namespace hal::sdk {

// A data-less tensor of DTYPE and SHAPE (RANK dims; symbols kept as given),
// row-major strides: what shape rules and check_op read.
inline Tensor meta_tensor(hal_dtype_e dtype, const int64_t* shape, int rank) {
  Tensor t;
  t.defined = true;
  t.dtype = dtype;
  t.rank = rank;
  for (int d = 0; d < rank; ++d) t.shape[d] = shape[d];
  t.set_contiguous_strides();
  return t;
}
inline Tensor meta_tensor(const GraphValue& v) { return meta_tensor(v.dtype, v.shape.data(), v.rank()); }

// Why the kernels of OPS cannot run node N of G inside a HostGraphExecutable
// on DEVICE ("" when they can): no kernel for the op, or what an op launch
// would refuse (detail::kernel_for: a compute dtype no kernel implements,
// mixed inputs for a uniform kernel; the device's check_op, for nodes whose
// shapes are concrete). Pure apart from check_op; thread-safe when it is.
inline std::string host_graph_refusal(const OpRegistry& ops, Device& device, const Graph& g, size_t n) {
  const GraphNode& node = g.nodes.at(n);
  const int64_t id = ops.find(node.op());
  if (id < 0) return "no kernel for '" + std::string(node.op()) + "'";
  std::vector<Tensor> in(node.inputs.size());
  bool concrete = true;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    in[i] = meta_tensor(g.values[node.inputs[i]]);
    concrete = concrete && g.values[node.inputs[i]].is_concrete();
  }
  for (uint32_t v : node.outputs) concrete = concrete && g.values[v].is_concrete();
  auto call = OpCallBuilder::assemble(*node.schema, device, std::move(in), node.attrs, {});
  try {
    detail::kernel_for(ops.at(static_cast<size_t>(id)), *call);
    if (!concrete) return "";
    for (uint32_t v : node.outputs) OpCallBuilder::outputs_of(*call).push_back(meta_tensor(g.values[v]));
    device.check_op(*call);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The groups a device whose kernels are OPS takes from G: each run of
// consecutive nodes host_graph_refusal accepts is one group (a run of
// consecutive nodes of a topological order is convex). 0 for the others.
inline std::vector<uint32_t> partition_host_graph(const OpRegistry& ops, Device& device, const Graph& g) {
  std::vector<uint32_t> group(g.nodes.size(), 0);
  uint32_t current = 0;
  bool open = false;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!host_graph_refusal(ops, device, g, n).empty()) {
      open = false;
      continue;
    }
    if (!open) ++current;
    open = true;
    group[n] = current;
  }
  return group;
}

// A plugin's own step in place of some nodes (a fused kernel), made for one
// set of concrete shapes.
class HostGraphStep {
 public:
  virtual ~HostGraphStep() = default;
  // Computes the fusion's OUTPUTS from its INPUTS (HostGraphFusion's order;
  // nullptr for an absent optional value). Called on the stream's thread,
  // never concurrently for one step. Throw (hal::sdk::fail) to fail the
  // execution.
  virtual void run(const Tensor* const* inputs, const Tensor* const* outputs) = 0;
};

// Nodes a plugin runs as one HostGraphStep. NODES must not produce a value
// read outside them other than OUTPUTS (which the last node produces or
// which are graph outputs); the step runs where the last of NODES would.
struct HostGraphFusion {
  std::vector<size_t> nodes;      // node indices, ascending
  std::vector<uint32_t> inputs;   // values the step reads (kNoValue: absent)
  std::vector<uint32_t> outputs;  // values the step writes
  uint32_t kernel_count = 1;      // device kernels one run of the step launches
  std::string label;              // "conv2d+add+relu"
  // Optional: the step's plan in full for explain() (Executable::plan), one
  // line per kernel; empty: the label.
  std::string plan;
  // Makes the step for the shapes of INPUTS and OUTPUTS (dtype, shape,
  // contiguous strides; no data). Called once per distinct input shape of
  // the executable, on the thread that calls execute.
  std::function<std::unique_ptr<HostGraphStep>(const std::vector<Tensor>& inputs,
                                               const std::vector<Tensor>& outputs)>
      make;
  // Optional: the memory order the step wants each output in, for the
  // shapes (and the layouts of inputs the executable places) of INPUTS and
  // OUTPUTS, as make gets them: per output, its dims from outermost to
  // innermost ({0, 2, 3, 1}: channels-last), or empty for row-major. An
  // output the executable places in its own memory (not a graph output)
  // gets those dense strides, and make and every reader see them: a chain
  // of steps preferring one layout passes it along without reordering.
  // Called once per distinct input shape, before make, on the thread that
  // calls execute. An order that is not a permutation of the output's dims
  // fails the execution with INTERNAL.
  std::function<std::vector<std::vector<int>>(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs)>
      output_orders;
  // Optional: whether the step gives the answer separate memory would
  // when its output OUTPUT is written into the memory of its input INPUT
  // (the very tensor: dense, one shape): it reads each element of INPUT
  // only before, or while, writing the same element of OUTPUT, and no
  // other element after. An executable whose graph output is such a step's
  // output, aliased to a graph input (Graph::output_aliases) that no later
  // step reads, then updates it in place. Empty: never.
  std::function<bool(size_t input, size_t output)> writes_in_place;
};

// An executable running G's nodes through the kernels of OPS (every node
// accepted by host_graph_refusal) and the FUSIONS' steps, on DEVICE.
// Thread-safe: executions of one input shape run one at a time (they share
// that shape's arena).
class HostGraphExecutable : public Executable {
 public:
  // Throws UNIMPLEMENTED naming a node the kernels cannot run or a graph
  // output that is a graph input or listed twice, and
  // INVALID_ARGUMENT for a fusion that covers a node twice or writes a value
  // it does not produce.
  // READS_STRIDED (optional): whether input I of node READER reads the
  // output of node PERMUTE (a permute) as a strided view as fast as a dense
  // copy (a matrix product's operands, when only its matrix dims move): a
  // permute of an intermediate whose every reader says so (neither value a
  // graph output) launches nothing, its readers getting the permuted view.
  HostGraphExecutable(Device& device, const OpRegistry& ops, const Graph& g,
                      std::vector<HostGraphFusion> fusions = {},
                      std::function<bool(const GraphNode& permute, const GraphNode& reader, size_t i)>
                          reads_strided = {})
      : device_(device), ops_(ops), g_(g), fusions_(std::move(fusions)) {
    std::vector<int64_t> fused_by(g_.nodes.size(), -1);
    for (size_t f = 0; f < fusions_.size(); ++f)
      for (size_t n : fusions_[f].nodes) {
        if (n >= g_.nodes.size() || fused_by[n] >= 0)
          fail(HAL_STATUS_INVALID_ARGUMENT, "fusion ", f, " ('", fusions_[f].label, "') covers node ", n,
               n >= g_.nodes.size() ? " (out of range)" : " twice");
        fused_by[n] = static_cast<int64_t>(f);
      }
    view_.assign(g_.nodes.size(), false);
    op_ids_.assign(g_.nodes.size(), 0);
    if (reads_strided) mark_permute_views(fused_by, reads_strided);
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      if (fused_by[n] >= 0) {
        const HostGraphFusion& f = fusions_[static_cast<size_t>(fused_by[n])];
        if (n == f.nodes.back()) {
          order_.push_back(Unit{true, static_cast<size_t>(fused_by[n])});
          kernels_ += f.kernel_count;
        }
        continue;
      }
      std::string why = host_graph_refusal(ops_, device_, g_, n);
      if (!why.empty())
        fail(HAL_STATUS_UNIMPLEMENTED, "node ", n, " ('", g_.nodes[n].op(), "'): ", why);
      op_ids_[n] = static_cast<size_t>(ops_.find(g_.nodes[n].op()));
      order_.push_back(Unit{false, n});
      if (!aliasable(n) && !view_[n]) ++kernels_;
    }
    std::vector<bool> listed(g_.values.size(), false);
    for (uint32_t v : g_.outputs) {
      bool produced = false;
      for (const GraphNode& node : g_.nodes)
        for (uint32_t o : node.outputs) produced = produced || o == v;
      if (!produced) fail(HAL_STATUS_UNIMPLEMENTED, "graph output value ", v, " is a graph input (no node makes it)");
      // One home per value: a second listing would never be written.
      if (listed[v]) fail(HAL_STATUS_UNIMPLEMENTED, "graph output value ", v, " is listed twice");
      listed[v] = true;
    }
  }

  void execute(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, Stream* stream) override {
    std::shared_ptr<Plan> plan = plan_for(inputs, outputs);
    if (stream == nullptr) return run(*plan, inputs, outputs);
    auto* task = new Task{this, std::move(plan), inputs, outputs, stream};
    stream->enqueue_host_func(&Task::invoke, task);
  }

  uint32_t kernel_count() const override { return kernels_; }
  // Kernels take strided tensors; fused steps copy what they need dense.
  bool accepts_strided_inputs() const override { return true; }
  // An aliased output given as its input's tensor is written in place where
  // its producer is the input's last reader and writes it after reading it
  // (HostGraphFusion::writes_in_place), else made in the arena and copied
  // into the output after the last step.
  bool honours_output_aliases() const override { return true; }
  std::string description() const override {
    std::string out = std::to_string(g_.nodes.size()) + " nodes, " + std::to_string(kernels_) + " kernels";
    for (const HostGraphFusion& f : fusions_) out += ", " + f.label;
    return out;
  }
  // One line per kernel or node, in run order (node numbers are this
  // graph's); a fusion's plan lines indented under its own.
  std::string plan() const override {
    std::string out;
    for (const Unit& u : order_) {
      if (u.fused) {
        const HostGraphFusion& f = fusions_[u.index];
        std::string text = f.plan.empty() ? f.label : f.plan;
        for (size_t at = text.find('\n'); at != std::string::npos && at + 1 < text.size(); at = text.find('\n', at + 3))
          text.insert(at + 1, "  ");
        out += "fused step, " + std::to_string(f.kernel_count) + (f.kernel_count == 1 ? " kernel: " : " kernels: ") +
               text + (text.empty() || text.back() != '\n' ? "\n" : "");
      } else {
        const size_t n = u.index;
        out += "node " + std::to_string(n) + " " + g_.nodes[n].op() +
               (view_[n]       ? ": a strided view of its input (no launch)\n"
                : aliasable(n) ? ": its input's bytes when both live in the arena, else a copy\n"
                               : ": its kernel\n");
      }
    }
    return out;
  }
  // The plan depends on the graph only (the SDK's envelope binds it to
  // this graph, plugin and version): the bytes are a format tag.
  std::vector<uint8_t> serialize() const override { return {'H', 'G', 'X', '1'}; }
  static bool accepts(const std::vector<uint8_t>& bytes) { return bytes == std::vector<uint8_t>{'H', 'G', 'X', '1'}; }

 private:
  struct Unit {
    bool fused;
    size_t index;  // node or fusion
  };
  // Where a value's bytes are during a run.
  struct Home {
    // kOutputSlice: OFFSET bytes into output INDEX (a stacked input written
    // in place, see stacked_in_place).
    enum Kind : uint8_t { kNone, kInput, kOutput, kArena, kOutputSlice } kind = kNone;
    size_t index = 0;     // input / output index
    uint64_t offset = 0;  // arena byte offset
  };
  struct SliceCopy {
    uint32_t value;
    uint64_t offset;  // bytes into the output
    uint64_t bytes;
  };
  struct Step {
    bool fused = false;
    // A stack written in place whose inputs were not all placed in the
    // output: these are copied into their slices of output SLICE_OUTPUT
    // (IN: their tensors, re-pointed each run).
    std::vector<SliceCopy> slice_copies;
    size_t slice_output = 0;
    KernelFn fn = nullptr;
    std::shared_ptr<OpCall> call;  // a node's call, its tensors re-pointed each run
    std::shared_ptr<const OpCall> ccall;
    std::unique_ptr<HostGraphStep> step;  // a fusion's
    std::vector<Tensor> in, out;           // a fusion's tensors, re-pointed each run
    std::vector<const Tensor*> in_ptrs, out_ptrs;  // a fusion's run arguments (nullptr: absent)
    std::vector<uint32_t> in_values, out_values;
  };
  struct Plan {
    std::vector<std::vector<int64_t>> key;  // the input shapes it was made for
    std::vector<bool> aliased;              // per Graph::output_aliases pair: given as one tensor
    std::vector<size_t> dense_outputs;      // outputs it writes slices of in place: a run's must be contiguous
    std::vector<Home> home;                  // per value
    std::vector<Step> steps;
    uint64_t arena_bytes = 0;
    std::mutex mu;  // held by a run: the arena and the calls are shared
    std::unique_ptr<unsigned char, decltype(&std::free)> arena{nullptr, &std::free};
  };
  struct Task {
    HostGraphExecutable* self;
    std::shared_ptr<Plan> plan;
    std::vector<Tensor> inputs, outputs;
    Stream* stream;
    static void invoke(void* p) {
      std::unique_ptr<Task> t(static_cast<Task*>(p));
      try {
        t->self->run(*t->plan, t->inputs, t->outputs);
      } catch (const Error& e) {
        t->stream->report_error(e);
      } catch (const std::exception& e) {
        t->stream->report_error(Error(HAL_STATUS_INTERNAL, std::string("graph execute: ") + e.what()));
      }
    }
  };
  static constexpr uint64_t kAlign = 64;
  static constexpr size_t kMaxPlans = 16;

  // Permute nodes whose output is a view of their input (see the
  // constructor): an intermediate's permute, every reader a plain node
  // reading it strided as fast as dense, not a graph output.
  void mark_permute_views(const std::vector<int64_t>& fused_by,
                          const std::function<bool(const GraphNode&, const GraphNode&, size_t)>& reads_strided) {
    std::vector<bool> produced(g_.values.size(), false), output(g_.values.size(), false);
    std::vector<std::vector<std::pair<size_t, size_t>>> reads(g_.values.size());  // value -> (node, input)
    for (size_t r = 0; r < g_.nodes.size(); ++r) {
      for (uint32_t v : g_.nodes[r].outputs) produced[v] = true;
      for (size_t i = 0; i < g_.nodes[r].inputs.size(); ++i)
        if (g_.nodes[r].inputs[i] != kNoValue) reads[g_.nodes[r].inputs[i]].emplace_back(r, i);
    }
    for (uint32_t v : g_.outputs) output[v] = true;
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      const GraphNode& node = g_.nodes[n];
      if (fused_by[n] >= 0 || std::strcmp(node.op(), "permute") != 0 || node.inputs.size() != 1 ||
          node.outputs.size() != 1 || node.inputs[0] == kNoValue || !produced[node.inputs[0]] ||
          output[node.inputs[0]] || output[node.outputs[0]] || g_.values[node.inputs[0]].dtype != g_.values[node.outputs[0]].dtype)
        continue;
      const auto& readers = reads[node.outputs[0]];  // at least one, each reading it strided as fast
      view_[n] = !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](const std::pair<size_t, size_t>& r) {
                   return fused_by[r.first] < 0 && reads_strided(node, g_.nodes[r.first], r.second);
                 });
    }
  }

  // A reshape's output can be its input's bytes (row-major) when both live
  // in the arena; decided per plan, this only says whether it may be.
  bool aliasable(size_t n) const {
    const GraphNode& node = g_.nodes[n];
    return std::strcmp(node.op(), "reshape") == 0 && node.inputs.size() == 1 && node.outputs.size() == 1 &&
           g_.values[node.inputs[0]].dtype == g_.values[node.outputs[0]].dtype;
  }

  std::shared_ptr<Plan> plan_for(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    {  // compared in place: a run allocates nothing to find its plan
      std::lock_guard<std::mutex> lock(plans_mu_);
      for (const auto& p : plans_) {
        bool same = p->key.size() == inputs.size();
        for (size_t i = 0; same && i < inputs.size(); ++i)
          same = p->key[i].size() == static_cast<size_t>(inputs[i].rank) &&
                 std::equal(p->key[i].begin(), p->key[i].end(), inputs[i].shape);
        for (size_t j : p->dense_outputs) same = same && j < outputs.size() && outputs[j].is_contiguous();
        for (size_t k = 0; same && k < g_.output_aliases.size(); ++k)
          same = p->aliased[k] == aliased(k, inputs, outputs);
        if (same) return p;
      }
    }
    std::vector<std::vector<int64_t>> key;
    key.reserve(inputs.size());
    for (const Tensor& t : inputs) key.push_back(t.sizes());
    std::vector<bool> aliases(g_.output_aliases.size());
    for (size_t k = 0; k < aliases.size(); ++k) aliases[k] = aliased(k, inputs, outputs);
    auto plan = make_plan(std::move(key), std::move(aliases), inputs, outputs);
    std::lock_guard<std::mutex> lock(plans_mu_);
    if (plans_.size() >= kMaxPlans) plans_.erase(plans_.begin());
    plans_.push_back(plan);
    return plan;
  }

  // Shapes of every value for these inputs, homes, the arena layout and
  // the steps' calls. Throws INVALID_ARGUMENT naming the node whose rule
  // refuses the shapes or whose result disagrees with the graph.
  // Whether output alias pair K is given as one tensor this run (the SDK
  // let only the very tensor, contiguous, through).
  bool aliased(size_t k, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) const {
    const auto& [o, i] = g_.output_aliases[k];
    return outputs[o].data != nullptr && outputs[o].data == inputs[i].data && outputs[o].numel() > 0;
  }

  std::shared_ptr<Plan> make_plan(std::vector<std::vector<int64_t>> key, std::vector<bool> aliases,
                                  const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    auto plan = std::make_shared<Plan>();
    plan->key = std::move(key);
    plan->aliased = std::move(aliases);
    const size_t nv = g_.values.size();
    std::vector<Tensor> meta(nv);
    std::map<int64_t, int64_t> symbols;  // bound by the inputs (validated by the SDK)
    for (size_t i = 0; i < inputs.size(); ++i) {
      const uint32_t v = g_.inputs[i];
      meta[v] = meta_tensor(inputs[i].dtype, inputs[i].shape, inputs[i].rank);
      for (int d = 0; d < inputs[i].rank; ++d)
        if (g_.values[v].shape[d] < 0) symbols[g_.values[v].shape[d]] = inputs[i].shape[d];
    }
    plan->home.assign(nv, Home{});
    for (size_t i = 0; i < inputs.size(); ++i) plan->home[g_.inputs[i]] = Home{Home::kInput, i, 0};
    for (size_t j = 0; j < outputs.size(); ++j) plan->home[g_.outputs[j]] = Home{Home::kOutput, j, 0};
    // Outputs given as their inputs' tensors that cannot be written in place:
    // made in the arena, copied into the output after the last step.
    std::vector<std::pair<uint32_t, size_t>> staged;  // (value, output)
    for (size_t k = 0; k < g_.output_aliases.size(); ++k) {
      if (!plan->aliased[k]) continue;
      const auto& [o, i] = g_.output_aliases[k];
      if (in_place(g_.outputs[o], g_.inputs[i])) continue;
      plan->home[g_.outputs[o]] = Home{};
      staged.emplace_back(g_.outputs[o], o);
      plan->dense_outputs.push_back(o);
    }
    auto is_staged = [&](uint32_t v) {
      return std::any_of(staged.begin(), staged.end(), [&](const auto& x) { return x.first == v; });
    };

    // Shapes, node by node (fused nodes too: their steps get the shapes).
    std::vector<std::shared_ptr<OpCall>> calls(g_.nodes.size());
    for (size_t n = 0; n < g_.nodes.size(); ++n) {
      const GraphNode& node = g_.nodes[n];
      std::vector<Tensor> in(node.inputs.size());
      for (size_t i = 0; i < in.size(); ++i)
        if (node.inputs[i] != kNoValue) in[i] = meta[node.inputs[i]];
      auto call = OpCallBuilder::assemble(*node.schema, device_, std::move(in), node.attrs, {});
      std::vector<TensorMeta> shapes;
      try {
        try {
          common::OpCallBuilder::expected_outputs_into(*call, node.outputs.size(), shapes);
        } catch (const std::out_of_range&) {  // the output is the caller's choice: the graph's, symbols bound
          shapes.assign(node.outputs.size(), TensorMeta{});
          for (size_t o = 0; o < node.outputs.size(); ++o) {
            const GraphValue& v = g_.values[node.outputs[o]];
            std::vector<int64_t> dims;
            for (int64_t d : v.shape) {
              if (d < 0 && symbols.count(d) == 0)
                fail(HAL_STATUS_INVALID_ARGUMENT, "output ", o, " of the node has an unbound symbolic dim");
              dims.push_back(d < 0 ? symbols[d] : d);
            }
            shapes[o].dtype = v.dtype;
            shapes[o].set_shape(dims);
          }
        }
      } catch (const Error& e) {
        fail(e.code(), "node ", n, " ('", node.op(), "'): ", e.what());
      }
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const uint32_t v = node.outputs[o];
        const GraphValue& gv = g_.values[v];
        bool agrees = shapes[o].dtype == gv.dtype && shapes[o].rank == gv.rank();
        for (int d = 0; agrees && d < gv.rank(); ++d) {
          const int64_t want = gv.shape[d] >= 0 ? gv.shape[d] : symbols.count(gv.shape[d]) ? symbols[gv.shape[d]] : -1;
          if (want >= 0 && want != shapes[o].shape[d]) agrees = false;
          if (want < 0) symbols[gv.shape[d]] = shapes[o].shape[d];
        }
        if (!agrees)
          fail(HAL_STATUS_INVALID_ARGUMENT, "node ", n, " ('", node.op(), "'): output ", o, " comes out ",
               dtype_name(shapes[o].dtype), " ", shape_string(shapes[o].shape, shapes[o].rank), " but value ", v,
               " is ", dtype_name(gv.dtype), " ", shape_string(gv.shape.data(), gv.rank()));
        meta[v] = meta_tensor(shapes[o].dtype, shapes[o].shape, shapes[o].rank);
        if (plan->home[v].kind == Home::kOutput) {
          const Tensor& given = outputs[plan->home[v].index];
          if (given.sizes() != meta[v].sizes())
            fail(HAL_STATUS_INVALID_ARGUMENT, "node ", n, " ('", node.op(), "'): output ", o, " comes out ",
                 meta[v].shape_str(), " but graph output ", plan->home[v].index, " is ", given.shape_str());
        }
      }
      calls[n] = std::move(call);
    }

    // Layouts: fused outputs in the memory order their step asks for.
    for (const Unit& u : order_) {
      if (!u.fused || !fusions_[u.index].output_orders) continue;
      const HostGraphFusion& f = fusions_[u.index];
      std::vector<Tensor> in, out;
      for (uint32_t v : f.inputs) in.push_back(v == kNoValue ? Tensor{} : meta[v]);
      for (uint32_t v : f.outputs) out.push_back(meta[v]);
      const std::vector<std::vector<int>> orders = f.output_orders(in, out);
      for (size_t o = 0; o < orders.size() && o < f.outputs.size(); ++o) {
        Tensor& t = meta[f.outputs[o]];
        if (orders[o].empty() || plan->home[f.outputs[o]].kind != Home::kNone || is_staged(f.outputs[o])) continue;
        std::vector<bool> seen(static_cast<size_t>(t.rank), false);
        bool ok = static_cast<int>(orders[o].size()) == t.rank;
        for (size_t k = 0; ok && k < orders[o].size(); ++k) {
          const int d = orders[o][k];
          ok = d >= 0 && d < t.rank && !seen[static_cast<size_t>(d)];
          if (ok) seen[static_cast<size_t>(d)] = true;
        }
        if (!ok)
          fail(HAL_STATUS_INTERNAL, "fusion '", f.label, "': output ", o,
               "'s memory order is not a permutation of its ", t.rank, " dims");
        int64_t stride = 1;
        for (size_t k = orders[o].size(); k-- > 0;) {
          t.strides[orders[o][k]] = stride;
          stride *= std::max<int64_t>(t.shape[orders[o][k]], 1);
        }
      }
    }

    // Each value's last step (the step making it when nothing reads it);
    // arena offsets by liveness. A step's outputs are placed before its
    // inputs are released: no kernel runs in place.
    std::vector<int64_t> last_use(nv, -1);
    std::vector<int64_t> alias_of(nv, -1);  // reshape outputs sharing their input's bytes
    for (size_t s = 0; s < order_.size(); ++s) {
      for (uint32_t v : unit_outputs(order_[s])) last_use[v] = static_cast<int64_t>(s);
      for (uint32_t v : unit_inputs(order_[s]))
        if (v != kNoValue) last_use[v] = std::max<int64_t>(last_use[v], static_cast<int64_t>(s));
    }
    auto root = [&](uint32_t v) {
      while (alias_of[v] >= 0) v = static_cast<uint32_t>(alias_of[v]);
      return v;
    };
    for (const Unit& u : order_) {
      if (u.fused) continue;
      const GraphNode& node = g_.nodes[u.index];
      if (aliasable(u.index)) {
        const uint32_t in = node.inputs[0], out = node.outputs[0];
        if (plan->home[in].kind == Home::kNone && plan->home[out].kind == Home::kNone && meta[in].is_contiguous())
          alias_of[out] = in;
      } else if (view_[u.index]) {  // the input's bytes, its dims permuted
        const uint32_t in = node.inputs[0], out = node.outputs[0];
        const std::vector<int64_t>& dims = node.attrs[0].as_ints();
        Tensor t = meta[in];
        for (int d = 0; d < t.rank; ++d) {
          const int64_t from = dims[static_cast<size_t>(d)] < 0 ? dims[static_cast<size_t>(d)] + t.rank
                                                                 : dims[static_cast<size_t>(d)];
          t.shape[d] = meta[in].shape[from];
          t.strides[d] = meta[in].strides[from];
        }
        meta[out] = t;
        alias_of[out] = in;
      }
    }
    // An output updated in place is written by its producer, not by a
    // stack's inputs' producers (they may run before the input's last reader).
    std::vector<bool> updated(nv, false);
    for (size_t k = 0; k < g_.output_aliases.size(); ++k)
      if (plan->aliased[k]) updated[g_.outputs[g_.output_aliases[k].first]] = true;
    std::vector<std::vector<SliceCopy>> slice_copies;
    const std::vector<bool> in_place = stacked_in_place(*plan, meta, alias_of, outputs, updated, slice_copies);
    for (const auto& [v, o] : staged) last_use[v] = static_cast<int64_t>(order_.size()) - 1;  // the final copy reads it
    for (size_t v = nv; v-- > 0;)  // an alias keeps its root alive
      if (alias_of[v] >= 0) {
        const uint32_t r = root(static_cast<uint32_t>(v));
        last_use[r] = std::max(last_use[r], last_use[v]);
      }
    std::vector<std::vector<uint32_t>> release_at(order_.size());
    for (size_t v = 0; v < nv; ++v)
      if (alias_of[v] < 0 && last_use[v] >= 0) release_at[static_cast<size_t>(last_use[v])].push_back(static_cast<uint32_t>(v));
    std::vector<std::pair<uint64_t, uint64_t>> free_blocks;  // offset, size; sorted, merged
    auto rounded = [](uint64_t bytes) { return (std::max<uint64_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign; };
    auto take = [&](uint64_t bytes) {
      bytes = rounded(bytes);
      for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it)
        if (it->second >= bytes) {
          const uint64_t at = it->first;
          it->first += bytes;
          it->second -= bytes;
          if (it->second == 0) free_blocks.erase(it);
          return at;
        }
      const uint64_t at = plan->arena_bytes;
      plan->arena_bytes += bytes;
      return at;
    };
    auto give = [&](uint64_t at, uint64_t bytes) {
      free_blocks.emplace_back(at, rounded(bytes));
      std::sort(free_blocks.begin(), free_blocks.end());
      for (size_t i = 1; i < free_blocks.size();)
        if (free_blocks[i - 1].first + free_blocks[i - 1].second == free_blocks[i].first) {
          free_blocks[i - 1].second += free_blocks[i].second;
          free_blocks.erase(free_blocks.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
    };
    auto bytes_of = [&](uint32_t v) { return bytes_in(meta[v]); };
    for (size_t s = 0; s < order_.size(); ++s) {
      for (uint32_t v : unit_outputs(order_[s])) {
        if (plan->home[v].kind != Home::kNone) continue;
        plan->home[v].kind = Home::kArena;
        if (alias_of[v] < 0) plan->home[v].offset = take(bytes_of(v));
      }
      for (uint32_t v : release_at[s])
        if (plan->home[v].kind == Home::kArena) give(plan->home[v].offset, bytes_of(v));
    }
    for (size_t v = 0; v < nv; ++v)
      if (alias_of[v] >= 0) plan->home[v] = plan->home[root(static_cast<uint32_t>(v))];

    // Steps.
    for (const Unit& u : order_) {
      Step st;
      if (u.fused) {
        const HostGraphFusion& f = fusions_[u.index];
        st.fused = true;
        st.in_values = f.inputs;
        st.out_values = f.outputs;
        for (uint32_t v : f.inputs) st.in.push_back(v == kNoValue ? Tensor{} : meta[v]);
        for (uint32_t v : f.outputs) st.out.push_back(meta[v]);
        st.step = f.make(st.in, st.out);
        for (size_t i = 0; i < st.in.size(); ++i) st.in_ptrs.push_back(f.inputs[i] == kNoValue ? nullptr : &st.in[i]);
        for (Tensor& t : st.out) st.out_ptrs.push_back(&t);
      } else {
        const GraphNode& node = g_.nodes[u.index];
        if ((aliasable(u.index) || view_[u.index]) && alias_of[node.outputs[0]] >= 0) continue;  // no launch
        if (in_place[u.index]) {  // its inputs were written into its output: at most some copies
          if (slice_copies[u.index].empty()) continue;
          st.slice_copies = std::move(slice_copies[u.index]);
          st.slice_output = plan->home[node.outputs[0]].index;
          st.in.resize(st.slice_copies.size());
          for (size_t k = 0; k < st.slice_copies.size(); ++k) st.in[k] = meta[st.slice_copies[k].value];
          plan->steps.push_back(std::move(st));
          continue;
        }
        st.call = calls[u.index];
        std::vector<Tensor>& ins = OpCallBuilder::inputs_of(*st.call);  // with their layouts now
        for (size_t i = 0; i < node.inputs.size() && i < ins.size(); ++i)
          if (node.inputs[i] != kNoValue) ins[i] = meta[node.inputs[i]];
        std::vector<Tensor>& outs = OpCallBuilder::outputs_of(*st.call);
        for (uint32_t v : node.outputs) outs.push_back(meta[v]);
        st.ccall = st.call;
        st.fn = ops_.at(op_ids_[u.index]).fn(st.call->common_dtype());
        st.in_values = node.inputs;
        st.out_values = node.outputs;
      }
      plan->steps.push_back(std::move(st));
    }
    for (const auto& [v, o] : staged) {  // after every reader of the inputs they overwrite
      Step st;
      st.slice_copies.push_back(SliceCopy{v, 0, bytes_in(meta[v])});
      st.slice_output = o;
      st.in.push_back(meta[v]);
      plan->steps.push_back(std::move(st));
    }
    return plan;
  }

  // Whether output value VO, given as input value VI's tensor, can be
  // written in place: the step making it runs after every other reader of
  // VI, and where it reads VI itself it says it writes in place.
  bool in_place(uint32_t vo, uint32_t vi) const {
    int64_t maker = -1, last_reader = -1;
    for (size_t s = 0; s < order_.size(); ++s) {
      const std::vector<uint32_t>& outs = unit_outputs(order_[s]);
      const std::vector<uint32_t>& ins = unit_inputs(order_[s]);
      if (std::find(outs.begin(), outs.end(), vo) != outs.end()) maker = static_cast<int64_t>(s);
      if (std::find(ins.begin(), ins.end(), vi) != ins.end()) last_reader = static_cast<int64_t>(s);
    }
    if (maker < 0 || last_reader > maker) return false;
    if (last_reader < maker) return true;
    const Unit& u = order_[static_cast<size_t>(maker)];
    if (!u.fused || !fusions_[u.index].writes_in_place) return false;
    const HostGraphFusion& f = fusions_[u.index];
    const size_t i = static_cast<size_t>(std::find(f.inputs.begin(), f.inputs.end(), vi) - f.inputs.begin());
    const size_t o = static_cast<size_t>(std::find(f.outputs.begin(), f.outputs.end(), vo) - f.outputs.begin());
    return f.writes_in_place(i, o);
  }

  // The bytes of a dense tensor of T's dtype and shape.
  static uint64_t bytes_in(const Tensor& t) { return static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype); }

  // Stacks and cats along dim 0 into a graph output that is contiguous this
  // run, of row-major inputs of the output's dtype: each input that is an
  // intermediate not placed yet (not a graph input, output or alias, listed
  // once) is placed in its slice of the output (Home::kOutputSlice), so its
  // producer writes it there; the node then only copies the others into
  // theirs (SLICE_COPIES) instead of launching (a Loop's scan output would
  // copy every iteration's value again at the end). Marks PLAN's homes and
  // dense_outputs; returns which nodes run so.
  std::vector<bool> stacked_in_place(Plan& plan, const std::vector<Tensor>& meta, const std::vector<int64_t>& alias_of,
                                     const std::vector<Tensor>& outputs, const std::vector<bool>& updated,
                                     std::vector<std::vector<SliceCopy>>& slice_copies) const {
    std::vector<bool> in_place(g_.nodes.size(), false);
    slice_copies.assign(g_.nodes.size(), {});
    for (const Unit& u : order_) {
      if (u.fused) continue;
      const GraphNode& node = g_.nodes[u.index];
      const bool stack = std::strcmp(node.op(), "stack") == 0;
      if ((!stack && std::strcmp(node.op(), "cat") != 0) || node.outputs.size() != 1 || node.attrs.empty() ||
          node.schema->attr_count < 1 || std::strcmp(node.schema->attrs[0].name, "dim") != 0)
        continue;
      const uint32_t o = node.outputs[0];
      const Home& out = plan.home[o];
      if (out.kind != Home::kOutput || !outputs[out.index].is_contiguous() || updated[o]) continue;
      int64_t dim = node.attrs[0].as_int();
      if (dim < 0) dim += meta[o].rank;
      if (dim != 0) continue;
      bool ok = !node.inputs.empty();
      for (uint32_t v : node.inputs)  // (a graph input's strides are the caller's: the kernel copies it)
        ok = ok && v != kNoValue && meta[v].dtype == meta[o].dtype && meta[v].is_contiguous() &&
             plan.home[v].kind != Home::kInput;
      if (!ok) continue;
      uint64_t at = 0;
      for (uint32_t v : node.inputs) {
        if (plan.home[v].kind == Home::kNone && alias_of[v] < 0) {  // (placed once: its home is then the slice)
          plan.home[v] = Home{Home::kOutputSlice, out.index, at};
        } else {
          slice_copies[u.index].push_back(SliceCopy{v, at, bytes_in(meta[v])});
          if (plan.home[v].kind == Home::kOutput) plan.dense_outputs.push_back(plan.home[v].index);  // copied as bytes
        }
        at += bytes_in(meta[v]);
      }
      in_place[u.index] = true;
      plan.dense_outputs.push_back(out.index);
    }
    return in_place;
  }

  const std::vector<uint32_t>& unit_inputs(const Unit& u) const {
    return u.fused ? fusions_[u.index].inputs : g_.nodes[u.index].inputs;
  }
  const std::vector<uint32_t>& unit_outputs(const Unit& u) const {
    return u.fused ? fusions_[u.index].outputs : g_.nodes[u.index].outputs;
  }

  // Points T at value V's bytes for this run.
  static void bind(Tensor& t, const Plan& plan, uint32_t v, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& outputs, unsigned char* arena) {
    const Home& h = plan.home[v];
    if (h.kind == Home::kInput) {
      t = inputs[h.index];
    } else if (h.kind == Home::kOutput) {
      t = outputs[h.index];
    } else if (h.kind == Home::kOutputSlice) {  // the plan's shape and strides, the output's bytes
      const Tensor& o = outputs[h.index];
      t.buffer = o.buffer;
      t.byte_offset = o.byte_offset + h.offset;
      t.data = o.data == nullptr ? nullptr : static_cast<unsigned char*>(o.data) + h.offset;
    } else {
      t.buffer = nullptr;
      t.byte_offset = 0;
      t.data = arena + h.offset;
    }
  }

  void run(Plan& plan, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    std::lock_guard<std::mutex> lock(plan.mu);
    if (!plan.arena && plan.arena_bytes > 0) {
      plan.arena.reset(static_cast<unsigned char*>(std::aligned_alloc(kAlign, plan.arena_bytes)));
      if (!plan.arena) fail(HAL_STATUS_OUT_OF_MEMORY, "graph execute: ", plan.arena_bytes, " bytes of intermediates");
    }
    unsigned char* arena = plan.arena.get();
    for (Step& st : plan.steps) {
      if (!st.slice_copies.empty()) {
        unsigned char* into = static_cast<unsigned char*>(outputs[st.slice_output].data);
        for (size_t k = 0; k < st.slice_copies.size(); ++k) {
          bind(st.in[k], plan, st.slice_copies[k].value, inputs, outputs, arena);
          std::memcpy(into + st.slice_copies[k].offset, st.in[k].data, st.slice_copies[k].bytes);
        }
        continue;
      }
      if (st.fused) {
        for (size_t i = 0; i < st.in.size(); ++i)
          if (st.in_values[i] != kNoValue) bind(st.in[i], plan, st.in_values[i], inputs, outputs, arena);
        for (size_t i = 0; i < st.out.size(); ++i) bind(st.out[i], plan, st.out_values[i], inputs, outputs, arena);
        st.step->run(st.in_ptrs.data(), st.out_ptrs.data());
        continue;
      }
      std::vector<Tensor>& in = OpCallBuilder::inputs_of(*st.call);
      std::vector<Tensor>& out = OpCallBuilder::outputs_of(*st.call);
      for (size_t i = 0; i < st.in_values.size() && i < in.size(); ++i)
        if (st.in_values[i] != kNoValue) bind(in[i], plan, st.in_values[i], inputs, outputs, arena);
      for (size_t i = 0; i < st.out_values.size(); ++i) bind(out[i], plan, st.out_values[i], inputs, outputs, arena);
      st.fn(st.ccall, nullptr);
    }
  }

  Device& device_;
  const OpRegistry& ops_;
  const Graph g_;
  const std::vector<HostGraphFusion> fusions_;
  std::vector<Unit> order_;
  std::vector<bool> view_;  // per node: a permute whose output is a view of its input
  std::vector<size_t> op_ids_;  // per node run by its kernel: the op's id in OPS_ (a plan looks up none)
  uint32_t kernels_ = 0;
  std::mutex plans_mu_;
  std::vector<std::shared_ptr<Plan>> plans_;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_HOST_GRAPH_HPP_
