// Session: compile a Model for one device, run it with host tensors (copied
// through hal::Buffer, never through host pointers into device memory).
#include "hal/onnx/session.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "hal/common/dtype.hpp"
#include "hal/runtime/graph_passes.hpp"
#include "hal/runtime/runtime.hpp"
#include "hal/runtime/shape_inference.hpp"
#include "tensor_proto.hpp"
#include "translator.hpp"

namespace hal::onnx {

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw Error(HAL_STATUS_INVALID_ARGUMENT, msg); }

// One Runtime per config path, shared by the sessions of a process (loading
// plugins once).
std::shared_ptr<Runtime> runtime_for(const std::string& config) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<Runtime>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto rt = cache[config].lock()) return rt;
  RuntimeOptions o;
  if (!config.empty()) o.config_path = config;
  std::shared_ptr<Runtime> rt = Runtime::create(o);
  cache[config] = rt;
  return rt;
}

std::shared_ptr<Device> pick_device(Runtime& rt, const std::string& spec) {
  if (spec.empty()) return rt.default_device();
  if (spec.rfind("hal:", 0) == 0) {
    std::vector<std::shared_ptr<Device>> all = rt.devices();
    size_t used = 0;
    int64_t i = -1;
    try {
      i = std::stoll(spec.substr(4), &used);
    } catch (const std::exception&) {
    }
    if (used != spec.size() - 4 || i < 0 || static_cast<size_t>(i) >= all.size())
      throw Error(HAL_STATUS_NOT_FOUND, "device '" + spec + "': the runtime has " + std::to_string(all.size()) +
                                            " devices (hal:0 .. hal:" + std::to_string(all.size()) + " - 1)");
    return all[static_cast<size_t>(i)];
  }
  return rt.device(spec);
}

std::string dtype_text(hal_dtype_e dt) { return common::dtype_name(dt); }

}  // namespace

struct Session::Impl {
  explicit Impl(Model m) : model(std::move(m)) {}
  Model model;
  std::shared_ptr<Runtime> runtime;
  SessionOptions options;
  // The home device and the compiled model (unless model.needs_input_values()
  // or runs_in_stages()); both change at a failover. Read through snapshot().
  std::shared_ptr<Device> device;
  std::shared_ptr<const CompiledGraph> compiled;
  // Bumped by each failover; translations made for an older one are not kept.
  uint64_t generation = 0;
  // Failovers: what was lost and where the session went, in order. Compiled
  // graphs replaced by one stay alive (stats() hands out references).
  std::vector<std::string> failovers;
  std::vector<std::shared_ptr<const CompiledGraph>> retired;
  std::mutex failover_mu;  // one re-partition at a time
  // A model that needs input values: one translation and compilation per
  // distinct set of values (key: their dtypes, shapes and bytes), kept for
  // the session's life (at most kMaxBound; more are compiled per run).
  struct Bound {
    Bound(Model m, std::string k) : model(std::move(m)), key(std::move(k)) {}
    Model model;
    std::string key;  // the bound values (the stage cache's model key)
    std::shared_ptr<const CompiledGraph> compiled;
  };
  static constexpr size_t kMaxBound = 64;
  // A model that runs in stages: each stage translated and compiled once per
  // distinct sequence of read-back values (key: their dtypes, shapes and
  // bytes, per model: the session's or a bound one's), at most kMaxStages.
  struct CompiledStage {
    ModelStage stage;
    std::shared_ptr<const CompiledGraph> compiled;
    // A translation with symbolic counts of rows that failed (an operator
    // after the count needs it concrete): the key runs with concrete counts.
    bool symbolic_refused = false;
  };
  static constexpr size_t kMaxStages = 256;
  static constexpr size_t kGuarded = 4;  // translations per key whose guards differ
  // Per request of sizes of shapes (its model key and the stage key before
  // it): the one value it has given so far, or nullopt once it gave another.
  std::map<std::string, std::optional<std::string>> sizes_seen;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const CompiledStage>> stages;  // (model, values)
  std::shared_ptr<const CompiledStage> last_stage;
  std::mutex bound_mu;
  std::map<std::string, std::shared_ptr<const Bound>> bound;
  std::shared_ptr<const Bound> last_bound;
  // Once a second distinct set of values comes: the model reading its value
  // inputs when it runs (Model::reading_values), for values not bound yet;
  // READING_FAILED: that model cannot be made (bind per value instead).
  std::shared_ptr<const Model> reading;
  bool reading_failed = false;
  std::atomic<uint64_t> runs{0};

  // What a run uses, taken once at its start (a failover may replace it).
  struct Snapshot {
    std::shared_ptr<Device> device;
    std::shared_ptr<const CompiledGraph> compiled;
    uint64_t generation;
  };
  Snapshot snapshot() {
    std::lock_guard<std::mutex> lock(bound_mu);
    return {device, compiled, generation};
  }
};

namespace {

// The chosen device first, then the runtime's others in config order
// (compile() leaves the lost ones out).
std::vector<std::shared_ptr<Device>> claim_order(const Runtime& rt, const std::shared_ptr<Device>& home) {
  std::vector<std::shared_ptr<Device>> order{home};
  for (const std::shared_ptr<Device>& d : rt.devices())
    if (d.get() != home.get()) order.push_back(d);
  return order;
}

// Where a session whose chosen device is DEVICE works: DEVICE, or its
// failover device when DEVICE is lost (nullptr: lost, no usable failover).
std::shared_ptr<Device> usable_home(const std::shared_ptr<Device>& device) {
  if (device->state() == DeviceState::kOk) return device;
  std::shared_ptr<Device> failover = device->failover_device();
  return failover && failover->state() == DeviceState::kOk ? failover : nullptr;
}

// Whether some device of ORDER (or FALLBACK) launches OP; the decomposition
// pass rewrites only ops none of them runs.
std::function<bool(const std::string&)> runs_somewhere(std::vector<std::shared_ptr<Device>> order,
                                                       const std::shared_ptr<Device>& fallback) {
  if (fallback) order.push_back(fallback);
  auto known = std::make_shared<std::map<std::string, bool>>();
  return [order = std::move(order), known](const std::string& op) {
    auto [it, fresh] = known->emplace(op, false);
    if (fresh)
      for (const std::shared_ptr<Device>& d : order) {
        if (d->state() != DeviceState::kOk) continue;  // compile() will not use it
        try {
          OpRunner runner(d, op);
          it->second = true;
          break;
        } catch (const Error&) {  // UNIMPLEMENTED or disabled: ask the next device
        }
      }
    return it->second;
  };
}

}  // namespace

namespace {

// DISK_CACHE false: the compile cache in memory only (a stage translated
// for one value read at run time: the disk would keep one entry per value).
std::shared_ptr<const CompiledGraph> compile_graph(const Graph& graph, Runtime& runtime,
                                                   const std::shared_ptr<Device>& device, const SessionOptions& options,
                                                   bool cached = true);

// The pipeline renumbers values; inputs and outputs keep their positions,
// which is all run() relies on.
std::shared_ptr<const CompiledGraph> compile_model(const Model& model, Runtime& runtime,
                                                   const std::shared_ptr<Device>& device, const SessionOptions& options) {
  return compile_graph(model.graph(), runtime, device, options);
}

std::shared_ptr<const CompiledGraph> compile_graph(const Graph& graph, Runtime& runtime,
                                                   const std::shared_ptr<Device>& device, const SessionOptions& options,
                                                   bool cached) {
  CompileOptions co;
  // A stage keyed by a value read back is kept by its session alone: the
  // compile caches would keep one entry per value for the process's life
  // (and hash the whole graph, its folded constants too, to look it up).
  co.disk_cache = cached;
  co.memory_cache = cached;
  co.devices = claim_order(runtime, device);
  co.fallback = runtime.fallback_device();
  co.options = options.options;
  co.graph_compilers = options.graph_compilers;
  co.layouts = options.layouts;
  PipelineOptions po;
  po.supported = runs_somewhere(co.devices, co.fallback);
  po.fold_device = device.get();
  return std::make_shared<const CompiledGraph>(compile(run_pipeline(graph, po), co));
}

}  // namespace

Session::Session(Model model, const SessionOptions& options) : impl_(std::make_unique<Impl>(std::move(model))) {
  impl_->runtime = runtime_for(options.config);
  impl_->device = pick_device(*impl_->runtime, options.device);
  impl_->options = options;
  if (std::shared_ptr<Device> home = usable_home(impl_->device); home && home != impl_->device) {
    impl_->failovers.push_back("device " + impl_->device->id() + " was lost before the session started (" +
                               impl_->device->lost_reason() + "): compiled for the failover device " + home->id());
    impl_->device = home;
  }
  if (!impl_->model.needs_input_values() && !impl_->model.runs_in_stages())
    impl_->compiled = compile_model(impl_->model, *impl_->runtime, impl_->device, options);
}

std::vector<std::string> Session::failovers() const {
  std::lock_guard<std::mutex> lock(impl_->bound_mu);
  return impl_->failovers;
}

std::string Session::device() const {
  std::lock_guard<std::mutex> lock(impl_->bound_mu);
  return impl_->device->id();
}

const CompiledGraphStats& Session::stats() const {
  std::lock_guard<std::mutex> lock(impl_->bound_mu);
  if (impl_->compiled) return impl_->compiled->stats();
  static const CompiledGraphStats none{};
  if (impl_->last_stage) return impl_->last_stage->compiled->stats();
  return impl_->last_bound && impl_->last_bound->compiled ? impl_->last_bound->compiled->stats() : none;
}

Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

const Model& Session::model() const { return impl_->model; }

struct SessionAccess {
// The model key of the model reading its value inputs when it runs
// (reading_values; its sizes are symbols from the first run).
static constexpr const char* kReadingValues = "reading values";

// The values FED (by input position) gives IMPL's value inputs, in order,
// and their key (dtypes, shapes and bytes; the sequences' element specs).
template <class BytesOf>
static std::vector<HostTensorRef> values_of(const Session::Impl& impl, const std::vector<const HostTensorRef*>& fed,
                                            const std::map<std::string, std::vector<ValueSpec>>& sequences,
                                            const BytesOf& bytes_of, std::string* key) {
  const Model& m = impl.model;
  std::vector<HostTensorRef> values;
  for (const std::string& name : m.value_inputs()) {
    size_t k = 0;
    while (m.inputs()[k].name != name) ++k;
    const HostTensorRef& r = *fed[k];
    values.push_back(r);
    *key += std::to_string(r.dtype) + ":" + detail::shape_text(r.shape) + ":";
    key->append(static_cast<const char*>(r.data), bytes_of(r.dtype, r.shape));
    *key += ';';
  }
  for (const auto& [name, specs] : sequences) {  // the elements' dtypes and shapes, not their values
    *key += name + "=[";
    for (const ValueSpec& e : specs) *key += std::to_string(e.dtype) + ":" + detail::shape_text(e.shape) + ",";
    *key += "];";
  }
  return values;
}

// For values of KEY no translation is bound to yet, once one is: the model
// reading its value inputs when it runs, whose sizes become symbols
// (Model::reading_values; made once), as Dynamo turns a second value of a
// dim dynamic. nullptr: bind a translation to these values (the first set,
// one seen before, sequence inputs, or a model that cannot read them so).
static const Model* reading_values(Session::Impl& impl, const std::string& key,
                                   const std::map<std::string, std::vector<ValueSpec>>& sequences) {
  std::lock_guard<std::mutex> lock(impl.bound_mu);
  if (!sequences.empty() || impl.bound.empty() || impl.bound.count(key) || impl.reading_failed) return nullptr;
  if (!impl.reading) {
    try {
      impl.reading = std::make_shared<const Model>(impl.model.reading_values());
    } catch (const Error&) {
      impl.reading_failed = true;
      return nullptr;
    }
  }
  return impl.reading.get();
}

// The translation and compilation of IMPL's model for VALUES (values_of,
// its KEY); made once per distinct set.
static std::shared_ptr<const Session::Impl::Bound> bind_values(
    Session::Impl& impl, const Session::Impl::Snapshot& at, const std::vector<HostTensorRef>& values,
    const std::string& key, const std::map<std::string, std::vector<ValueSpec>>& sequences) {
  const Model& m = impl.model;
  {
    std::lock_guard<std::mutex> lock(impl.bound_mu);
    auto it = impl.bound.find(key);
    if (it != impl.bound.end()) return impl.last_bound = it->second;
  }
  auto b = std::make_shared<Session::Impl::Bound>(m.bind(values, sequences), "bound:" + key);
  // Kept by the session alone, as a stage keyed by a value is (compile_graph).
  if (!b->model.runs_in_stages()) b->compiled = compile_graph(b->model.graph(), *impl.runtime, at.device, impl.options, false);
  std::lock_guard<std::mutex> lock(impl.bound_mu);
  if (at.generation != impl.generation) return b;  // made for a lost device's partition: not kept
  if (impl.bound.size() < Session::Impl::kMaxBound) impl.bound.emplace(key, b);
  return impl.last_bound = b;
}

// Runs MODEL (runs_in_stages()) on INPUTS (views of its inputs, in order):
// stage after stage, each one's values kept (by their ids in the model's
// translation) for the next, the requested value read back to the host.
// A count of rows read back (ModelStage::request_rows) is first a symbol
// of the stages after it; when a stage cannot take it so (an operator needs
// it concrete, or its static dims do not hold for the count: the rules took
// the symbol as large) the model runs again from its inputs with every
// count concrete (nothing of the first attempt is kept).
static std::vector<OwnedTensor> run_stages(Session::Impl& impl, const Session::Impl::Snapshot& at, const Model& model,
                                           const std::string& model_key,
                                           const std::vector<const TensorView*>& inputs, const std::vector<Buffer>& input_buffers,
                                           std::vector<TensorInfo>* out_infos) {
  std::optional<std::vector<OwnedTensor>> out =
      run_stages_once(impl, at, model, model_key, inputs, input_buffers, out_infos, true);
  if (!out) out = run_stages_once(impl, at, model, model_key, inputs, input_buffers, out_infos, false);
  return std::move(*out);
}

// Whether the request of sizes at SITE has given another value than VALUE:
// the first value is taken as it is (a translation for one value runs
// faster than one for any); once another comes the sizes are symbols there
// for good, as Dynamo's automatic dynamic shapes.
static bool sizes_vary(Session::Impl& impl, const std::string& site, const HostTensor& value) {
  std::string bytes = detail::shape_text(value.shape);
  bytes.append(reinterpret_cast<const char*>(value.data.data()), value.data.size());
  std::lock_guard<std::mutex> lock(impl.bound_mu);
  auto it = impl.sizes_seen.find(site);
  if (it == impl.sizes_seen.end()) {
    if (impl.sizes_seen.size() >= 4 * Session::Impl::kMaxStages) return true;
    impl.sizes_seen.emplace(site, std::move(bytes));
    return false;
  }
  if (it->second && *it->second == bytes) return false;
  it->second.reset();
  return true;
}

// Whether the values READ back so far are inside every guard of a stage.
static bool guards_hold(const std::vector<ModelStage::Guard>& guards, const std::vector<HostTensor>& read) {
  for (const ModelStage::Guard& g : guards) {
    if (g.request >= read.size()) return false;
    const std::optional<std::vector<int64_t>> v = detail::int_values(read[g.request]);
    if (!v || g.element >= v->size() || (*v)[g.element] < g.lo || (*v)[g.element] > g.hi) return false;
  }
  return true;
}

// One attempt of run_stages; nullopt when SYMBOLIC_ROWS and a stage cannot
// take a count read back as a symbol.
static std::optional<std::vector<OwnedTensor>> run_stages_once(
    Session::Impl& impl, const Session::Impl::Snapshot& at, const Model& model, const std::string& model_key,
    const std::vector<const TensorView*>& inputs, const std::vector<Buffer>& input_buffers,
    std::vector<TensorInfo>* out_infos, bool symbolic_rows) {
  std::map<int64_t, int64_t> symbols;  // the sizes the fed inputs and the stages so far give the model's symbols
  for (size_t k = 0; k < model.inputs().size() && k < inputs.size(); ++k)
    for (size_t d = 0; d < model.inputs()[k].shape.size(); ++d)
      if (model.inputs()[k].shape[d] < 0) symbols[model.inputs()[k].shape[d]] = inputs[k]->shape[d];
  std::map<uint32_t, TensorView> have;
  std::map<uint32_t, const Buffer*> owner;  // the buffer under each view (for the read-back)
  std::deque<OwnedTensor> keep;  // stable addresses: OWNER points into it
  std::vector<HostTensor> read;
  std::vector<bool> concrete;  // per value read: taken as it is (Model::stage)
  std::string key = symbolic_rows ? "" : "concrete rows;";
  bool value_keyed = false;  // the key holds a value read back (not only shapes and symbolic counts)
  bool symbolic_counts = false;  // a count of rows read back is a symbol of this stage
  for (size_t step = 0;; ++step) {
    // A translation with symbolic counts holds for the values its guards
    // allow (a Slice of the first 3 rows needs a count of 3 or more): the
    // first of KEY's translations whose guards hold runs; when none does
    // another is made (translated with these values, so its guards hold),
    // up to kGuarded; past them the counts are concrete.
    std::shared_ptr<const Session::Impl::CompiledStage> st;
    std::string slot = key;
    for (size_t alternative = 1;; ++alternative) {
      std::shared_ptr<const Session::Impl::CompiledStage> found;
      {
        std::lock_guard<std::mutex> lock(impl.bound_mu);
        auto it = impl.stages.find({model_key, slot});
        if (it != impl.stages.end()) found = it->second;
      }
      if (!found) break;
      if (guards_hold(found->stage.guards, read)) {
        st = std::move(found);
        break;
      }
      if (alternative == Session::Impl::kGuarded) return std::nullopt;
      slot = key + "guarded " + std::to_string(alternative) + ";";
    }
    if (!st) {
      std::vector<HostTensorRef> refs;
      for (const HostTensor& h : read) refs.push_back({h.dtype, h.shape, h.data.data()});
      auto made = std::make_shared<Session::Impl::CompiledStage>();
      try {
        concrete.resize(read.size(), false);
        made->stage = model.stage(refs, symbolic_rows, concrete);
        made->compiled = compile_graph(made->stage.graph, *impl.runtime, at.device, impl.options, !value_keyed);
      } catch (const Error& e) {
        if (!symbolic_counts || e.code() == HAL_STATUS_DEVICE_LOST) throw;
        made->symbolic_refused = true;  // remembered: later runs go straight to concrete counts
      }
      std::lock_guard<std::mutex> lock(impl.bound_mu);
      if (at.generation == impl.generation && impl.stages.size() < Session::Impl::kMaxStages)
        impl.stages.emplace(std::make_pair(model_key, slot), made);
      st = made;
    }
    if (st->symbolic_refused) return std::nullopt;
    {
      std::lock_guard<std::mutex> lock(impl.bound_mu);
      if (at.generation == impl.generation) impl.last_stage = st;
    }
    const ModelStage& s = st->stage;
    if (step == 0)
      for (size_t k = 0; k < s.model_input_ids.size() && k < inputs.size(); ++k) {
        have.emplace(s.model_input_ids[k], *inputs[k]);
        owner.emplace(s.model_input_ids[k], &input_buffers[k]);
      }
    std::vector<const TensorView*> in = inputs;
    // The rows inputs: views of their sources' first rows (contiguous: a
    // stage's outputs are), the counts bound to their symbols.
    std::vector<TensorView> rows;
    rows.reserve(s.rows.size());
    for (const ModelStage::Rows& r : s.rows) {
      TensorView v = have.at(r.source);
      if (r.sizes) {  // no elements: its shape binds the symbols of the sizes read back
        const std::vector<int64_t> values = detail::int_values(read.at(r.request)).value();
        if (values.size() + 1 != r.shape.size())
          throw Error(HAL_STATUS_INTERNAL, "ONNX stage: " + std::to_string(values.size()) + " sizes for an input of shape " +
                                               detail::shape_text(r.shape));
        v.shape.assign(1, 0);
        v.shape.insert(v.shape.end(), values.begin(), values.end());
        v.strides.clear();
        for (size_t d = 0; d < values.size(); ++d)
          if (r.shape[d + 1] < 0) symbols[r.shape[d + 1]] = values[d];
        rows.push_back(std::move(v));
        continue;
      }
      if (r.view) {  // the target read back, resolved (when it was read) against this value's shape
        const std::vector<int64_t> dims = detail::int_values(read.at(r.request)).value();
        if (!v.strides.empty() || dims.size() != r.shape.size() ||
            detail::checked_numel(dims, "view") != detail::checked_numel(v.shape, "view"))
          throw Error(HAL_STATUS_INTERNAL, "ONNX stage: a view of shape " + detail::shape_text(dims) +
                                               " for a value of shape " + detail::shape_text(v.shape));
        v.shape = dims;
        for (size_t d = 0; d < dims.size(); ++d)
          if (r.shape[d] < 0) symbols[r.shape[d]] = dims[d];
        rows.push_back(std::move(v));
        continue;
      }
      const int64_t n = detail::int_values(read.at(r.request)).value().at(0);
      // A count out of range (a TopK's K past its axis) is the concrete
      // translation's error, which names the node.
      if (symbolic_rows && !v.shape.empty() && (n < 0 || n > v.shape[0])) return std::nullopt;
      if (n < 0 || v.shape.empty() || n > v.shape[0] || !v.strides.empty())
        throw Error(HAL_STATUS_INTERNAL, "ONNX stage: a count of " + std::to_string(n) + " rows for a value of shape " +
                                             detail::shape_text(v.shape));
      v.shape[0] = n;
      rows.push_back(std::move(v));
      if (r.symbol < 0) symbols[r.symbol] = n;
    }
    for (const TensorView& v : rows) in.push_back(&v);
    for (uint32_t id : s.input_ids) in.push_back(&have.at(id));
    // run_allocating infers every value's shape from the inputs' first and
    // checks each against the graph's static dims: a count the translation's
    // rules took as large (a slice of 3 of it) fails there, before anything runs.
    std::vector<OwnedTensor> out;
    try {
      out = st->compiled->run_allocating(in);
    } catch (const Error& e) {
      if (!symbolic_counts || e.code() != HAL_STATUS_INVALID_ARGUMENT) throw;
      return std::nullopt;  // again with concrete counts: a genuine error is raised there
    }
    if (s.final) {
      *out_infos = s.outputs;
      return out;
    }
    const std::vector<uint32_t>& outs = s.graph.outputs();
    for (size_t i = 0; i < out.size(); ++i) {
      const std::vector<int64_t>& declared = s.graph.values()[outs[i]].shape;
      for (size_t d = 0; d < declared.size() && d < out[i].view.shape.size(); ++d)
        if (declared[d] < 0) symbols.emplace(declared[d], out[i].view.shape[d]);
      keep.push_back(std::move(out[i]));
      have.insert_or_assign(s.output_ids[i], keep.back().view);
      owner.insert_or_assign(s.output_ids[i], &keep.back().buffer);
    }
    HostTensor h;
    if (s.request_is_dims) {
      std::vector<int64_t> dims;
      for (int64_t d : s.request_dims) {
        if (d >= 0) {
          dims.push_back(d);
          continue;
        }
        auto it = symbols.find(d);
        if (it == symbols.end())
          throw Error(HAL_STATUS_UNIMPLEMENTED, s.request_what + ": a dim no input's shape gives (computed by an op)");
        dims.push_back(it->second);
      }
      h = detail::int_tensor(HAL_DTYPE_INT64, dims, s.request_shape);
    } else {
      const TensorView& v = have.at(s.request);
      h = HostTensor{v.dtype, v.shape, {}};
      h.data.resize(static_cast<size_t>(detail::checked_numel(v.shape, s.request_what)) * common::dtype_size(v.dtype));
      if (!h.data.empty()) owner.at(s.request)->copy_to_host(h.data.data(), h.data.size(), v.byte_offset);
    }
    if (s.request_view && symbolic_rows) {
      // A Reshape's computed target: resolved here against its input's
      // shape, so the next stage sees only the dims, and keyed by its rank
      // and which dims are below 2 (the rest are symbols there).
      const TensorView& source = have.at(s.request_view_source);
      auto target = detail::int_values(h);
      if (!source.strides.empty() || !target || h.shape.size() != 1) return std::nullopt;  // as a value, concretely
      auto resolved = detail::resolve_reshape(source.shape, *target, s.request_view_allowzero);
      if (auto* why = std::get_if<std::string>(&resolved)) throw Error(HAL_STATUS_INVALID_ARGUMENT, s.request_what + ": " + *why);
      const std::vector<int64_t>& dims = std::get<std::vector<int64_t>>(resolved);
      key += "view";
      for (int64_t d : dims) key += d >= 2 ? ":s" : ":" + std::to_string(d);
      key += ';';
      symbolic_counts = true;
      read.push_back(detail::int_tensor(HAL_DTYPE_INT64, dims, {static_cast<int64_t>(dims.size())}));
      continue;
    }
    if (s.request_sizes && symbolic_rows) {
      // Sizes of shapes, once they vary: keyed by which elements are below 2
      // (the rest are symbols there). The first value, and a negative one,
      // are keyed by value (the latter's translation names the error).
      const std::optional<std::vector<int64_t>> values = detail::int_values(h);
      if (values && std::none_of(values->begin(), values->end(), [](int64_t d) { return d < 0; }) &&
          (model_key == SessionAccess::kReadingValues || sizes_vary(impl, model_key + "\n" + key, h))) {
        key += "sizes";
        for (int64_t d : *values) key += d >= 2 ? ":s" : ":" + std::to_string(d);
        key += ';';
        symbolic_counts = true;
        read.push_back(std::move(h));
        continue;
      }
      concrete.resize(read.size(), false);
      concrete.push_back(true);
    }
    std::optional<std::vector<int64_t>> count;
    if (s.request_rows && symbolic_rows) count = detail::int_values(h);
    if (count && count->size() == 1 && (*count)[0] >= 2) {
      key += "rows;";  // the next stages' translation is the same for every count >= 2
      symbolic_counts = true;
    } else {
      key += std::to_string(h.dtype) + ":" + detail::shape_text(h.shape) + ":";
      key.append(reinterpret_cast<const char*>(h.data.data()), h.data.size());
      key += ';';
      value_keyed = value_keyed || !s.request_is_dims;
    }
    read.push_back(std::move(h));
  }
}

static bool fail_over(Session::Impl& impl, const Session::Impl::Snapshot& at, const Error& lost);
// run_named() after its checks: one attempt on the partition AT.
static std::vector<std::pair<std::string, HostTensor>> execute(
    Session::Impl& impl, const Session::Impl::Snapshot& at, const std::vector<std::string>& output_names,
    const std::vector<const HostTensorRef*>& fed, const std::map<std::string, std::vector<ValueSpec>>& sequences,
    const std::map<std::string, const HostTensorRef*>& by_name);
};

std::vector<HostTensor> Session::run(const std::vector<std::string>& output_names,
                                     const std::vector<std::pair<std::string, HostTensorRef>>& feeds) {
  std::vector<HostTensor> result;
  for (auto& [name, t] : run_named(output_names, feeds)) result.push_back(std::move(t));
  return result;
}

std::vector<std::pair<std::string, HostTensor>> Session::run_named(
    const std::vector<std::string>& output_names, const std::vector<std::pair<std::string, HostTensorRef>>& feeds) {
  const Model& m = impl_->model;
  const std::vector<TensorInfo>& ins = m.inputs();
  // Feeds by input position (a sequence input's by element index); names
  // checked first so nothing runs on error.
  std::vector<const HostTensorRef*> fed(ins.size(), nullptr);
  std::vector<std::map<int64_t, const HostTensorRef*>> elements(ins.size());  // -1: "s[]", the empty sequence
  std::map<std::string, const HostTensorRef*> by_name;
  for (const auto& [name, ref] : feeds) {
    size_t k = 0;
    while (k < ins.size() && ins[k].name != name) ++k;
    int64_t element = 0;
    if (k == ins.size()) {  // "s[i]" / "s[]" of a sequence input s
      const size_t open = name.rfind('[');
      if (open != std::string::npos && name.back() == ']') {
        const std::string base = name.substr(0, open), index = name.substr(open + 1, name.size() - open - 2);
        k = 0;
        while (k < ins.size() && !((ins[k].sequence || (ins[k].optional && index.empty())) && ins[k].name == base)) ++k;
        if (k < ins.size()) {
          size_t used = 0;
          try {
            element = index.empty() ? -1 : std::stoll(index, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (!index.empty() && (used != index.size() || element < 0))
            invalid("feed '" + name + "': '" + index + "' is not an element index of sequence input '" + base + "'");
        }
      }
    }
    if (k == ins.size()) {
      std::string known;
      for (const TensorInfo& i : ins) known += (known.empty() ? "'" : ", '") + i.name + (i.sequence ? "[i]'" : "'");
      invalid("feed '" + name + "' is not an input of the model (inputs: " + known + ")");
    }
    if (ins[k].sequence || ins[k].optional) {
      // An optional takes one feed: its tensor or "x[]".
      if (!elements[k].emplace(element, &ref).second || (ins[k].optional && elements[k].size() > 1))
        invalid("feed '" + name + "' is given twice");
    } else {
      if (fed[k]) invalid("input '" + name + "' is fed twice");
      fed[k] = &ref;
    }
    by_name[name] = &ref;
  }
  std::map<int64_t, std::pair<int64_t, std::string>> bound;  // symbol -> size, where bound
  std::map<std::string, std::vector<ValueSpec>> sequences;    // per sequence input: its elements
  for (size_t k = 0; k < ins.size(); ++k) {
    const TensorInfo& info = ins[k];
    if (info.optional) {
      const auto& el = elements[k];
      if (el.empty()) invalid("optional input '" + info.name + "' is missing (feed its tensor, or '" + info.name + "[]' for none)");
      std::vector<ValueSpec>& specs = sequences[info.name];
      if (el.count(-1)) continue;
      const HostTensorRef* r = el.begin()->second;
      if (r->dtype != info.dtype)
        invalid("optional input '" + info.name + "' has dtype " + dtype_text(r->dtype) + " but the model expects " + dtype_text(info.dtype));
      if (!r->data && detail::checked_numel(r->shape, "input '" + info.name + "'") > 0) invalid("input '" + info.name + "' has no data");
      specs.push_back({r->dtype, r->shape});
      continue;
    }
    if (info.sequence) {
      const auto& el = elements[k];
      if (el.empty()) invalid("sequence input '" + info.name + "' is missing (feed its elements '" + info.name + "[0]', ... or '" + info.name + "[]')");
      std::vector<ValueSpec>& specs = sequences[info.name];
      if (el.count(-1)) {
        if (el.size() != 1) invalid("sequence input '" + info.name + "' is fed both as empty ('[]') and with elements");
        continue;
      }
      int64_t next = 0;
      for (const auto& [i, r] : el) {
        const std::string at = "element " + std::to_string(i) + " of sequence input '" + info.name + "'";
        if (i != next) invalid("sequence input '" + info.name + "' lacks element " + std::to_string(next) + " (elements are fed as '" + info.name + "[0]', '" + info.name + "[1]', ...)");
        ++next;
        if (r->dtype != info.dtype)
          invalid(at + " has dtype " + dtype_text(r->dtype) + " but the model expects " + dtype_text(info.dtype));
        if (!info.shape.empty() && r->shape.size() != info.shape.size())
          invalid(at + " has rank " + std::to_string(r->shape.size()) + " but the model expects rank " + std::to_string(info.shape.size()));
        if (!r->data && detail::checked_numel(r->shape, at) > 0) invalid(at + " has no data");
        specs.push_back({r->dtype, r->shape});
      }
      continue;
    }
    const HostTensorRef* r = fed[k];
    if (!r) invalid("input '" + info.name + "' is missing (not in the feeds)");
    if (r->dtype != info.dtype)
      invalid("input '" + info.name + "' has dtype " + dtype_text(r->dtype) + " but the model expects " + dtype_text(info.dtype));
    if (r->shape.size() != info.shape.size())
      invalid("input '" + info.name + "' has rank " + std::to_string(r->shape.size()) + " (shape " + detail::shape_text(r->shape) +
              ") but the model expects rank " + std::to_string(info.shape.size()));
    for (size_t d = 0; d < r->shape.size(); ++d) {
      int64_t want = info.shape[d], got = r->shape[d];
      std::string at = "input '" + info.name + "' dim " + std::to_string(d);
      if (got < 0) invalid(at + " is " + std::to_string(got));
      if (want >= 0 && got != want) invalid(at + " is " + std::to_string(got) + " but the model expects " + std::to_string(want));
      if (want < 0) {
        auto [it, fresh] = bound.emplace(want, std::make_pair(got, at));
        if (!fresh && it->second.first != got)
          invalid(at + " is " + std::to_string(got) + " but dim '" + info.dim_names[d] + "' is " +
                  std::to_string(it->second.first) + " (" + it->second.second + ")");
      }
    }
    if (!r->data && detail::checked_numel(r->shape, "input '" + info.name + "'") > 0)
      invalid("input '" + info.name + "' has no data");
  }
  if (!sequences.empty())  // with sequences the translation is per shapes: every tensor input's too
    for (size_t k = 0; k < ins.size(); ++k)
      if (!ins[k].sequence && !ins[k].optional) sequences[ins[k].name] = {ValueSpec{fed[k]->dtype, fed[k]->shape}};
  const std::vector<TensorInfo>& outs = m.outputs();
  for (const std::string& name : output_names) {
    size_t j = 0;
    while (j < outs.size() && outs[j].name != name) ++j;
    if (j == outs.size()) invalid("'" + name + "' is not an output of the model");
  }

  // A lost device: re-partition onto what is left (the failover device
  // when the home device was lost) and run again from the caller's feeds.
  for (size_t attempt = 0;; ++attempt) {
    Impl::Snapshot at = impl_->snapshot();
    try {
      return SessionAccess::execute(*impl_, at, output_names, fed, sequences, by_name);
    } catch (const Error& e) {
      if (e.code() != HAL_STATUS_DEVICE_LOST || attempt >= 4 || !SessionAccess::fail_over(*impl_, at, e)) throw;
    }
  }
}

// Replaces the partition AT ran (DEVICE_LOST: LOST) with one on the devices
// left: the home device's failover device when the home device is lost.
// False when nothing can: no device AT used is lost (the error is not one
// the session can route around) or the home device is lost without a usable
// failover device. Another run's failover since AT counts as done.
bool SessionAccess::fail_over(Session::Impl& impl, const Session::Impl::Snapshot& at, const Error& lost) {
  std::lock_guard<std::mutex> one(impl.failover_mu);
  {
    std::lock_guard<std::mutex> lock(impl.bound_mu);
    if (impl.generation != at.generation) return true;
  }
  // Staged models compile per stage at run time: any lost device may be theirs.
  std::vector<std::shared_ptr<Device>> lost_now;
  if (at.compiled) {
    lost_now = at.compiled->lost_devices();
  } else {
    for (const auto& d : impl.runtime->devices())
      if (d->state() == DeviceState::kLost) lost_now.push_back(d);
  }
  if (lost_now.empty()) return false;
  std::string gone;
  for (const auto& d : lost_now) gone += (gone.empty() ? "" : ", ") + d->id();
  std::shared_ptr<Device> home = usable_home(at.device);
  if (!home) return false;
  std::shared_ptr<const CompiledGraph> compiled;
  if (!impl.model.needs_input_values() && !impl.model.runs_in_stages())
    compiled = compile_model(impl.model, *impl.runtime, home, impl.options);
  std::lock_guard<std::mutex> lock(impl.bound_mu);
  ++impl.generation;
  if (impl.compiled) impl.retired.push_back(impl.compiled);
  for (const auto& [k, b] : impl.bound)
    if (b->compiled) impl.retired.push_back(b->compiled);
  for (const auto& [k, st] : impl.stages) impl.retired.push_back(st->compiled);
  impl.compiled = compiled;
  impl.bound.clear();
  impl.stages.clear();
  impl.last_bound = nullptr;
  impl.last_stage = nullptr;
  impl.device = home;
  const std::string what = "device " + gone + " lost (" + lost.what() + "): re-partitioned onto " +
                           (home == at.device ? "the devices left, home " + home->id()
                                              : "the failover device " + home->id());
  impl.failovers.push_back(what);
  std::fprintf(stderr, "hal.onnx: session failover %zu: %s\n", impl.failovers.size(), what.c_str());
  return true;
}

std::vector<std::pair<std::string, HostTensor>> SessionAccess::execute(
    Session::Impl& impl, const Session::Impl::Snapshot& at, const std::vector<std::string>& output_names,
    const std::vector<const HostTensorRef*>& fed, const std::map<std::string, std::vector<ValueSpec>>& sequences,
    const std::map<std::string, const HostTensorRef*>& by_name) {
  const Model& m = impl.model;
  Device& dev = *at.device;
  auto bytes_of = [](hal_dtype_e dt, const std::vector<int64_t>& s) {
    return static_cast<uint64_t>(detail::checked_numel(s, "tensor")) * common::dtype_size(dt);
  };
  // What runs: the compiled model, or its translation for the fed values of
  // its value inputs and the elements of its sequence inputs.
  const CompiledGraph* compiled = at.compiled.get();
  const Model* run_model = &m;
  const Model* staged = m.runs_in_stages() ? &m : nullptr;
  std::shared_ptr<const Session::Impl::Bound> specialized;
  std::string stages_key = "model";
  if (compiled == nullptr && staged == nullptr) {
    std::string key;
    const std::vector<HostTensorRef> values = values_of(impl, fed, sequences, bytes_of, &key);
    if (const Model* reading = SessionAccess::reading_values(impl, key, sequences)) {
      run_model = staged = reading;
      stages_key = SessionAccess::kReadingValues;
    } else {
      specialized = SessionAccess::bind_values(impl, at, values, key, sequences);
      run_model = &specialized->model;
      compiled = specialized->compiled.get();
      if (specialized->model.runs_in_stages()) staged = &specialized->model;
      stages_key = specialized->key;
    }
  }
  const std::vector<TensorInfo>* out_infos = &run_model->outputs();
  std::vector<Buffer> in_bufs;
  std::vector<TensorView> in_views;
  in_views.reserve(run_model->inputs().size());
  for (const TensorInfo& in : run_model->inputs()) {
    const HostTensorRef* r = by_name.at(in.name);  // every input of a translation is a fed tensor or element
    uint64_t n = bytes_of(r->dtype, r->shape);
    in_bufs.push_back(dev.allocate(n ? n : 1));
    if (n) in_bufs.back().copy_from_host(r->data, n);
    in_views.emplace_back(in_bufs.back(), r->dtype, r->shape);
  }
  std::vector<const TensorView*> in_ptrs;
  for (const TensorView& v : in_views) in_ptrs.push_back(&v);
  std::vector<TensorInfo> staged_outs;
  std::vector<OwnedTensor> out;
  if (staged != nullptr) {
    out = SessionAccess::run_stages(impl, at, *staged, stages_key, in_ptrs, in_bufs, &staged_outs);
    out_infos = &staged_outs;
  } else {
    out = compiled->run_allocating(in_ptrs);
  }
  ++impl.runs;
  // The outputs asked for (all: every one, in model order); a sequence output as its elements.
  std::vector<size_t> picked;
  auto belongs = [](const TensorInfo& o, const std::string& name) {
    return o.name == name || (o.sequence && o.name.size() > name.size() && o.name.compare(0, name.size(), name) == 0 &&
                              o.name[name.size()] == '[');
  };
  if (output_names.empty()) {
    for (size_t j = 0; j < out_infos->size(); ++j) picked.push_back(j);
  } else {
    for (const std::string& name : output_names)
      for (size_t j = 0; j < out_infos->size(); ++j)
        if (belongs((*out_infos)[j], name)) picked.push_back(j);
  }
  std::vector<std::pair<std::string, HostTensor>> result;
  for (size_t j : picked) {
    const TensorView& v = out[j].view;
    HostTensor h{(*out_infos)[j].dtype, v.shape, {}};
    h.data.resize(bytes_of(h.dtype, h.shape));
    if (!h.data.empty()) out[j].buffer.copy_to_host(h.data.data(), h.data.size(), v.byte_offset);
    result.emplace_back((*out_infos)[j].name, std::move(h));
  }
  return result;
}

std::string Session::explain() const {
  const CompiledGraphStats& s = stats();
  const Graph& g = impl_->model.graph();
  std::ostringstream o;
  o << "model: opset " << impl_->model.opset() << (impl_->model.producer().empty() ? "" : ", from " + impl_->model.producer());
  if (impl_->model.needs_input_values() || impl_->model.runs_in_stages())
    o << "; translated when it runs (" << impl_->model.inputs().size() << " inputs, " << impl_->model.outputs().size()
      << " outputs)\n";
  else
    o << "; " << g.nodes().size() << " nodes, " << g.constants().size() << " constants, " << g.inputs().size()
      << " inputs, " << g.outputs().size() << " outputs\n";
  const Impl::Snapshot at = impl_->snapshot();
  o << "device: " << at.device->id() << " (plugin " << at.device->plugin_name() << ")\n";
  for (const std::string& f : failovers()) o << "failover: " << f << "\n";
  o << "partition: " << s.groups << " compiled groups (" << s.kernel_count << " kernels per run), " << s.op_nodes
    << " nodes op by op (" << s.fallback_nodes << " on the fallback device), " << s.copies << " copies between devices\n";
  auto stages = [&] {
    o << "runs in stages (values it computes decide what runs next): " << impl_->stages.size()
      << " stage translations kept" << (impl_->last_stage ? "; the latest:\n" : " (none yet)\n");
    if (impl_->last_stage) {
      if (!impl_->last_stage->stage.final) o << "  (stops to read " << impl_->last_stage->stage.request_what << ")\n";
      if (impl_->last_stage->compiled) o << impl_->last_stage->compiled->explain();
    }
  };
  if (at.compiled) {
    o << at.compiled->explain();
  } else if (impl_->model.runs_in_stages()) {
    std::lock_guard<std::mutex> lock(impl_->bound_mu);
    stages();
  } else {
    std::lock_guard<std::mutex> lock(impl_->bound_mu);
    std::string names;
    for (const std::string& n : impl_->model.value_inputs()) names += (names.empty() ? "'" : ", '") + n + "'";
    o << "translated per run for the values of inputs " << names << ": " << impl_->bound.size()
      << " translations kept" << (impl_->last_bound ? "; the latest:\n" : " (none yet)\n");
    if (impl_->last_bound && impl_->last_bound->compiled) o << impl_->last_bound->compiled->explain();
    if (impl_->reading) {
      o << "values with no translation of their own (they varied) are read when it runs, their sizes symbols; ";
      stages();
    } else if (impl_->last_stage) {  // a translation bound to values runs in stages
      stages();
    }
  }
  o << "runs: " << impl_->runs.load() << "\n";
  return o.str();
}

}  // namespace hal::onnx
