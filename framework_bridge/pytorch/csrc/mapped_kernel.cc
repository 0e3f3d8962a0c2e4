// torch_hal: the one boxed kernel that runs every row of the mapping table,
// its registration, and the _foreach_* registration.
//
// Per call: output shapes and dtypes from the row's shape rule (the op's
// Meta kernel, or the direct elementwise rule on the hot path); inputs and
// attributes converted as the row says; the row's hook; one launch. A call
// the plugin declines (UNIMPLEMENTED, UNSUPPORTED_DTYPE, MIXED_DTYPES, or a
// hook's Decline) decomposes or falls back (fallback.cc); any other plugin
// error is a RuntimeError naming the aten op, the catalog op and the plugin.
// An output overlapping an input in a way the catalog op's `alias` forbids
// (out=self, addmm_) is computed into a fresh tensor and copied over.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "backend.hpp"
#include "mapping.hpp"

namespace torch_hal {

const c10::IValue& Call::arg(const char* name) const {
  auto i = schema.argumentIndexWithName(name);
  TORCH_CHECK(i.has_value(), "torch_hal: ", schema.name(), " has no argument ", name, " (mapping table)");
  return args[*i];
}

hal::Attr scalar_attr(const std::string& name, const c10::Scalar& v) {
  if (v.isIntegral(/*includeBool=*/true)) return hal::Attr::i(name, v.toLong());
  TORCH_CHECK(v.isFloatingPoint(), "torch_hal: attribute ", name, " = ", v, " is not a real scalar");
  return hal::Attr::f(name, v.toDouble());
}

at::Tensor Call::optional_tensor(const char* name) const {
  const c10::IValue& v = arg(name);
  return v.isNone() ? at::Tensor() : v.toTensor();
}

namespace {

const c10::Device kMeta(at::kMeta);

// A Python number (a wrapped CPU scalar) stays as it is: Meta kernels take
// CPU scalars, and it keeps its lower promotion priority (result_type).
at::Tensor to_meta(const at::Tensor& t) {
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(kMeta));
}

c10::IValue to_meta(const c10::IValue& v) {
  if (v.isTensor() && v.toTensor().defined()) return to_meta(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(to_meta(t));
    return out;
  }
  return v;
}

bool is_hal(const at::Tensor& t) { return t.defined() && t.is_privateuseone(); }

const char* reduction_name(int64_t r) {
  switch (r) {
    case at::Reduction::None: return "none";
    case at::Reduction::Mean: return "mean";
    case at::Reduction::Sum: return "sum";
    default: throw Decline{"reduction " + std::to_string(r)};
  }
}

bool declined(const hal::Error& e) {
  return e.code() == HAL_STATUS_UNIMPLEMENTED || e.code() == HAL_STATUS_UNSUPPORTED_DTYPE ||
         e.code() == HAL_STATUS_MIXED_DTYPES;
}

// What a Meta run depends on, as a string: every argument's dtype, shape,
// strides, device and wrapped-number flag, and every non-tensor argument's
// value. False when an argument has a kind not listed (then no caching).
bool append_meta_key(std::string& key, const c10::IValue& v) {
  auto ints = [&](c10::IntArrayRef xs) {
    for (int64_t x : xs) key.append(std::to_string(x)).push_back(',');
    key.push_back(';');
  };
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return key.append("u;"), true;
    key.push_back('T');
    key.append(std::to_string(static_cast<int>(t.scalar_type()))).push_back(t.is_privateuseone() ? 'h' : 'c');
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) key.push_back('w');
    ints(t.sizes());
    ints(t.strides());
    return true;
  }
  if (v.isNone()) return key.append("n;"), true;
  if (v.isBool()) return key.append(v.toBool() ? "b1;" : "b0;"), true;
  if (v.isInt()) return key.append("i").append(std::to_string(v.toInt())).append(";"), true;
  if (v.isDouble()) {  // exact bits: a rounded text form could merge values
    const double d = v.toDouble();
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    return key.append("d").append(std::to_string(bits)).append(";"), true;
  }
  if (v.isIntList()) return key.push_back('I'), ints(v.toIntVector()), true;
  if (v.isString()) return key.append("s").append(v.toStringRef()).append(";"), true;
  if (v.isDevice()) return key.append("D").append(v.toDevice().str()).append(";"), true;
  if (v.isList()) {  // Tensor[], Tensor?[], bool[], float[]
    key.push_back('[');
    for (const c10::IValue& e : v.toListRef())
      if (!append_meta_key(key, e)) return false;
    return key.append("];"), true;
  }
  return false;
}

class MappedKernel final : public c10::OperatorKernel {
 public:
  MappedKernel(const Mapping& row, std::string name) : row_(row), name_(std::move(name)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    std::call_once(resolved_, [&] { resolve(op.schema()); });
    if (forced_to_cpu(name_)) return run_on_cpu(op, stack, "forced by HAL_FORCE_FALLBACK_OPS");
    const auto& schema = op.schema();
    const size_t n = schema.arguments().size();
    const auto args = torch::jit::last(*stack, n);
    Call call(row_, schema, args, device_of(args));
    try {
      if (!direct_shapes(call)) meta_shapes(op, call);
      build_inputs(call);
      build_attrs(call);
      build_outputs(call);
      if (row_.hook != nullptr) row_.hook(call);
      const auto copies = unalias_outputs(call);
      launch_call(call);
      for (const auto& [fresh, real] : copies) device_copy(fresh, real);
    } catch (const Decline& d) {
      return run_without_catalog(op, stack, "catalog op " + call.catalog + " declined: " + d.reason);
    }
    if (explaining()) record_catalog_run(name_, call.catalog, call.dev);
    torch::jit::drop(*stack, n);
    for (size_t r = 0; r < call.returns.size(); ++r) {
      if (r < call.other_returns.size() && !call.other_returns[r].isNone()) {
        stack->push_back(std::move(call.other_returns[r]));
      } else {
        stack->emplace_back(std::move(call.returns[r]));
      }
    }
  }

 private:
  void resolve(const c10::FunctionSchema& schema) {
    for (const auto& in : row_.inputs) in_index_.push_back(in.arg == nullptr ? -1 : index(schema, in.arg));
    for (const auto& a : row_.attrs) attr_index_.push_back(a.arg == nullptr ? -1 : index(schema, a.arg));
    for (const auto& r : schema.returns()) {
      int aliased = -1;
      if (const auto* alias = r.alias_info())
        for (size_t j = 0; j < schema.arguments().size(); ++j) {
          const auto* ai = schema.arguments()[j].alias_info();
          if (ai != nullptr && ai->isWrite() && ai->beforeSets() == alias->beforeSets()) aliased = static_cast<int>(j);
        }
      return_arg_.push_back(aliased);
    }
  }

  static int index(const c10::FunctionSchema& schema, const char* name) {
    auto i = schema.argumentIndexWithName(name);
    TORCH_CHECK(i.has_value(), "torch_hal: ", schema.name(), " has no argument ", name, " (mapping table)");
    return static_cast<int>(*i);
  }

  static c10::DeviceIndex device_of(c10::ArrayRef<c10::IValue> args) {
    for (const auto& a : args) {
      if (a.isTensor() && is_hal(a.toTensor())) return a.toTensor().device().index();
      if (a.isTensorList())
        for (const at::Tensor& t : a.toTensorList())
          if (is_hal(t)) return t.device().index();
    }
    TORCH_INTERNAL_ASSERT(false, "torch_hal: a hal kernel called without a hal tensor");
  }

  // The hot path's rule: every tensor input on the device, dense and of one
  // floating dtype, scalars real: output = broadcast shape, that dtype (bool
  // for comparisons), dense. Functional and in-place overloads only.
  bool direct_shapes(Call& call) const {
    if (row_.shape == Shape::kMeta || return_arg_.size() != 1) return false;
    const int aliased = return_arg_[0];
    if (aliased >= 0 && aliased != in_index_[0]) return false;  // out=: Meta resizes it
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    c10::DimVector shape;
    for (size_t i = 0; i < row_.inputs.size(); ++i) {
      if (in_index_[i] < 0) continue;
      const c10::IValue& v = call.args[in_index_[i]];
      if (v.isScalar()) {
        if (v.toScalar().isComplex()) return false;
        continue;
      }
      if (!v.isTensor()) return false;
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) continue;
      if (t.unsafeGetTensorImpl()->is_wrapped_number() && !t.is_complex()) continue;
      if (!is_hal(t) || !t.is_contiguous() || !at::isFloatingType(t.scalar_type())) return false;
      if (dtype == c10::ScalarType::Undefined) dtype = t.scalar_type();
      if (t.scalar_type() != dtype || t.device().index() != call.dev) return false;
      shape = at::infer_size_dimvector(shape, t.sizes());
    }
    if (dtype == c10::ScalarType::Undefined) return false;
    const c10::ScalarType out_dtype = row_.shape == Shape::kComparison ? c10::ScalarType::Bool : dtype;
    if (aliased >= 0) {
      const at::Tensor& self = call.args[aliased].toTensor();
      if (self.sizes() != c10::IntArrayRef(shape) || self.scalar_type() != out_dtype) return false;
      call.returns.push_back(self);
      return true;
    }
    call.returns.push_back(at::empty(shape, at::TensorOptions().dtype(out_dtype).device(at::kPrivateUse1, call.dev)));
    return true;
  }

  // One Meta result: a tensor's metadata, an undefined tensor, or a
  // non-tensor return (SymInt) passed through.
  struct MetaReturn {
    bool tensor = false;
    std::vector<int64_t> sizes, strides;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    c10::IValue other;
  };

  // Output sizes and dtypes from the op's Meta kernel (and out= resizes).
  // Meta kernels are often Python (hundreds of microseconds), and training
  // repeats the same shapes, so results are cached per argument signature.
  void meta_shapes(const c10::OperatorHandle& op, Call& call) const {
    // The default dtype decides outputs of calls that name none.
    std::string key = std::to_string(static_cast<int>(c10::typeMetaToScalarType(at::get_default_dtype()))) + ";";
    bool cacheable = true;
    for (size_t i = 0; i < call.args.size() && cacheable; ++i) {
      const c10::IValue& a = call.args[i];
      // A Scalar argument's value does not shape the outputs of a mapped row
      // (no factory rows), only its kind does: AdamW's per-step scalars hit.
      if (call.schema.arguments()[i].type()->kind() == c10::TypeKind::NumberType &&
          (a.isInt() || a.isDouble() || a.isBool())) {
        key.append(a.isInt() ? "#i;" : a.isDouble() ? "#d;" : "#b;");
        continue;
      }
      cacheable = append_meta_key(key, a);
    }
    std::vector<MetaReturn> result;
    bool hit = false;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(meta_mu_);
      auto it = meta_cache_.find(key);
      if (it != meta_cache_.end()) result = it->second, hit = true;
    }
    if (!hit) {
      torch::jit::Stack meta;
      meta.reserve(call.args.size());
      for (const auto& a : call.args) meta.push_back(to_meta(a));
      op.callBoxed(&meta);
      for (size_t r = 0; r < return_arg_.size(); ++r) {
        MetaReturn m;
        if (!meta[r].isTensor() && !meta[r].isNone()) {
          m.other = meta[r];
        } else if (meta[r].isTensor() && meta[r].toTensor().defined()) {
          const at::Tensor& t = meta[r].toTensor();
          m.tensor = true;
          m.sizes = t.sizes().vec();
          m.strides = t.strides().vec();
          m.dtype = t.scalar_type();
        }
        result.push_back(std::move(m));
      }
      if (cacheable) {
        std::lock_guard<std::mutex> lock(meta_mu_);
        if (meta_cache_.size() >= kMetaCacheEntries) meta_cache_.clear();  // bounded; shapes in a loop repeat
        meta_cache_.emplace(std::move(key), result);
      }
    }
    const c10::Device dev(at::kPrivateUse1, call.dev);
    call.other_returns.resize(return_arg_.size());
    for (size_t r = 0; r < return_arg_.size(); ++r) {
      const MetaReturn& m = result[r];
      if (!m.other.isNone()) {  // SymInt etc.: passed through
        call.other_returns[r] = m.other;
        call.returns.emplace_back();
        continue;
      }
      if (return_arg_[r] < 0) {
        call.returns.push_back(m.tensor ? at::empty_strided(m.sizes, m.strides, at::TensorOptions().dtype(m.dtype).device(dev))
                                        : at::Tensor());
        continue;
      }
      at::Tensor out = call.args[return_arg_[r]].toTensor();
      if (m.tensor && out.sizes() != c10::IntArrayRef(m.sizes)) out.resize_(m.sizes);
      call.returns.push_back(out);
    }
  }

  // The dtype a scalar operand takes: the output's (the compute dtype of
  // every promoting row), or result_type with the first tensor input for a
  // bool output (comparisons).
  c10::ScalarType scalar_dtype(const Call& call, const c10::Scalar& s) const {
    if (!call.returns.empty() && call.returns[0].defined() && call.returns[0].scalar_type() != c10::ScalarType::Bool)
      return call.returns[0].scalar_type();
    for (size_t i = 0; i < row_.inputs.size(); ++i)
      if (in_index_[i] >= 0 && call.args[in_index_[i]].isTensor() && call.args[in_index_[i]].toTensor().defined())
        return at::result_type(call.args[in_index_[i]].toTensor(), s);
    return c10::typeMetaToScalarType(at::get_default_dtype());
  }

  at::Tensor device_scalar(const Call& call, const c10::Scalar& s) const {
    return at::scalar_tensor(s, at::TensorOptions().dtype(scalar_dtype(call, s))).to(at::Device(at::kPrivateUse1, call.dev));
  }

  at::Tensor device_tensor(const Call& call, const at::Tensor& t, const char* arg) const {
    if (!t.defined() || is_hal(t)) {
      TORCH_CHECK(!t.defined() || t.device().index() == call.dev, "Expected all tensors to be on the same device, but "
                  "found at least two devices, hal:", int(call.dev), " and ", t.device(), "! (aten::", name_,
                  " argument ", arg, ")");
      return t;
    }
    // PyTorch's rule: only a 0-dim CPU tensor may join device tensors.
    TORCH_CHECK(t.is_cpu() && t.dim() == 0, "Expected all tensors to be on the same device, but found at least two "
                "devices, hal:", int(call.dev), " and ", t.device(), "! (aten::", name_, " argument ", arg, ")");
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) return device_scalar(call, t.item());
    return t.to(at::Device(at::kPrivateUse1, call.dev));
  }

  void build_inputs(Call& call) const {
    for (size_t i = 0; i < row_.inputs.size(); ++i) {
      const InputSpec& spec = row_.inputs[i];
      if (spec.kind == InFrom::kAbsent) {
        call.inputs.emplace_back();
        continue;
      }
      const c10::IValue& v = call.args[in_index_[i]];
      switch (spec.kind) {
        case InFrom::kTensor:
        case InFrom::kOptTensor:
          call.inputs.push_back(v.isNone() ? at::Tensor() : device_tensor(call, v.toTensor(), spec.arg));
          break;
        case InFrom::kScalar:
        case InFrom::kOptScalar:
          call.inputs.push_back(v.isNone() ? at::Tensor() : device_scalar(call, v.toScalar()));
          break;
        case InFrom::kTensorList:
          for (const at::Tensor& t : v.toTensorList()) call.inputs.push_back(device_tensor(call, t, spec.arg));
          break;
        case InFrom::kAbsent: break;
      }
    }
  }

  void build_attrs(Call& call) const {
    for (size_t i = 0; i < row_.attrs.size(); ++i) {
      const AttrSpec& a = row_.attrs[i];
      static const c10::IValue kNone;
      const c10::IValue& v = attr_index_[i] < 0 ? kNone : call.args[attr_index_[i]];
      auto& out = call.attrs;
      switch (a.kind) {
        case AttrFrom::kScalar: out.push_back(scalar_attr(a.name, v.toScalar())); break;
        case AttrFrom::kBool: out.push_back(hal::Attr::b(a.name, !v.isNone() && v.toBool())); break;
        case AttrFrom::kTrue: out.push_back(hal::Attr::b(a.name, true)); break;
        case AttrFrom::kFalse: out.push_back(hal::Attr::b(a.name, false)); break;
        case AttrFrom::kInt: out.push_back(hal::Attr::i(a.name, v.toInt())); break;
        case AttrFrom::kIntAsInts: out.push_back(hal::Attr::ints(a.name, {v.toInt()})); break;
        case AttrFrom::kOptIntAsInts:
          out.push_back(hal::Attr::ints(a.name, v.isNone() ? std::vector<int64_t>{} : std::vector<int64_t>{v.toInt()}));
          break;
        case AttrFrom::kInts: out.push_back(hal::Attr::ints(a.name, v.toIntVector())); break;
        case AttrFrom::kOptInts:
          out.push_back(hal::Attr::ints(a.name, v.isNone() ? std::vector<int64_t>{} : v.toIntVector()));
          break;
        case AttrFrom::kOptInt0: out.push_back(hal::Attr::i(a.name, v.isNone() ? 0 : v.toInt())); break;
        case AttrFrom::kFloat: out.push_back(hal::Attr::f(a.name, v.toDouble())); break;
        case AttrFrom::kOptFloat:
          if (!v.isNone()) out.push_back(hal::Attr::f(a.name, v.toDouble()));
          break;
        case AttrFrom::kOptDtype:
          if (!v.isNone()) out.push_back(hal::Attr::dtype(a.name, to_hal_dtype(v.toScalarType())));
          break;
        case AttrFrom::kString: out.push_back(hal::Attr::s(a.name, v.toStringRef())); break;
        case AttrFrom::kOptString:
          if (!v.isNone()) out.push_back(hal::Attr::s(a.name, v.toStringRef()));
          break;
        case AttrFrom::kReduction: out.push_back(hal::Attr::s(a.name, reduction_name(v.toInt()))); break;
        case AttrFrom::kOptCorrection: {
          const c10::Scalar c = v.isNone() ? c10::Scalar(1) : v.toScalar();
          if (c.toDouble() != static_cast<double>(static_cast<int64_t>(c.toDouble())))
            throw Decline{"correction " + std::to_string(c.toDouble()) + " is not an integer"};
          out.push_back(hal::Attr::i(a.name, static_cast<int64_t>(c.toDouble())));
          break;
        }
      }
    }
  }

  // Shape of a scratch output for SPEC (mapping.hpp: Mapping::scratch).
  std::vector<int64_t> scratch_shape(const Call& call, const char* spec) const {
    if (std::string(spec) == "#C") return {call.arg("input").toTensor().size(1)};
    if (std::string(spec) == "#O") return {call.arg("weight").toTensor().size(0)};
    const c10::IValue& v = call.arg(spec);
    return v.isTensor() ? v.toTensor().sizes().vec() : v.toIntVector();
  }

  void build_outputs(Call& call) const {
    const size_t to_catalog =
        row_.returns_to_catalog < 0 ? call.returns.size() : static_cast<size_t>(row_.returns_to_catalog);
    const at::TensorOptions like = call.inputs.front().defined() ? call.inputs.front().options()
                                                                : call.returns.front().options();
    for (size_t r = 0; r < to_catalog; ++r) {
      if (call.returns[r].defined()) {
        call.outputs.push_back(call.returns[r]);
        continue;
      }
      // Masked off by output_mask: the catalog op still writes it.
      if (r >= row_.scratch.size()) throw Decline{"output " + std::to_string(r) + " is not computed"};
      call.outputs.push_back(at::empty(scratch_shape(call, row_.scratch[r]), like));
    }
    for (const char* extra : row_.extra_outputs) {
      const bool scratch = extra != nullptr && extra[0] == '~';
      const at::Tensor t = extra == nullptr ? at::Tensor() : call.optional_tensor(scratch ? extra + 1 : extra);
      if (!t.defined()) {
        call.outputs.push_back(at::empty({0}, like));
      } else {
        call.outputs.push_back(scratch ? at::empty_like(t) : t);
      }
    }
  }

  // Replaces each output that overlaps an input, other than as the exact
  // in-place alias the catalog op allows, by a fresh dense tensor; returns
  // the (fresh, real) pairs to copy after the launch. Only outputs sharing
  // an input's storage are examined further (the common case costs one
  // pointer comparison per pair).
  std::vector<std::pair<at::Tensor, at::Tensor>> unalias_outputs(Call& call) const {
    std::vector<std::pair<at::Tensor, at::Tensor>> copies;
    for (at::Tensor& out : call.outputs) {
      if (!out.defined() || out.numel() == 0) continue;
      for (const at::Tensor& in : call.inputs) {
        if (!in.defined() || in.numel() == 0 || !out.is_alias_of(in)) continue;
        const auto o = byte_span(out), i = byte_span(in);
        if (i.second <= o.first || o.second <= i.first) continue;
        if (same_view(in, out)) {
          const hal::common::OpSchema* schema = op_runner(call.dev, call.catalog).schema();
          if (schema != nullptr && schema->alias == hal::common::Alias::kExact) continue;
        }
        at::Tensor fresh = at::empty(out.sizes(), out.options());
        copies.emplace_back(fresh, out);
        out = std::move(fresh);
        break;
      }
    }
    return copies;
  }

  void launch_call(const Call& call) const {
    for (const auto& o : call.outputs)
      if (o.numel() == 0 && call.outputs.size() == 1) return;  // nothing to compute
    // Descriptors in per-thread scratch whose vectors keep their capacity:
    // no allocation per call. Nothing re-enters a kernel during a launch.
    thread_local std::vector<hal::TensorView> views;
    thread_local std::vector<const hal::TensorView*> ins, outs;
    views.resize(std::max(views.size(), call.inputs.size() + call.outputs.size()));
    ins.clear();
    outs.clear();
    size_t next = 0;
    for (const auto& t : call.inputs) {
      if (!t.defined()) {
        ins.push_back(nullptr);
        continue;
      }
      view_into(t, &views[next]);
      ins.push_back(&views[next++]);
    }
    for (const auto& t : call.outputs) {
      view_into(t, &views[next]);
      outs.push_back(&views[next++]);
    }
    try {
      std::optional<at::RecordFunction> range;  // "hal::<catalog op>" under a profiler (as the dispatcher's)
      if (auto step = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE); C10_UNLIKELY(step)) {
        const std::unordered_map<std::string, c10::IValue> meta{
            {"plugin", device(call.dev)->plugin_name()}, {"device", "hal:" + std::to_string(call.dev)}};
        range.emplace(std::move(*step)).before("hal::" + call.catalog, &meta);
      }
      launch(runner(call), call.dev, ins, outs, call.attrs);
    } catch (const hal::Error& e) {
      if (declined(e)) throw Decline{e.what()};
      const auto& d = device(call.dev);
      TORCH_CHECK(false, "torch_hal: aten::", name_, " as catalog op ", call.catalog, " on hal:", int(call.dev),
                  " (plugin ", d->plugin_name(), ", device ", d->id(), ") failed: ", e.what());
    }
  }

  // The row's catalog op on hal:DEV (OpRunners live for the process), cached
  // per device so the hot path skips op_runner's locked keyed lookup; a
  // catalog op a hook chose takes the lookup.
  const hal::OpRunner& runner(const Call& call) const {
    if (call.catalog != row_.catalog || call.dev < 0 || call.dev >= kCachedDevices)
      return op_runner(call.dev, call.catalog);
    std::atomic<const hal::OpRunner*>& slot = runners_[call.dev];
    const hal::OpRunner* r = slot.load(std::memory_order_acquire);
    if (r == nullptr) {
      r = &op_runner(call.dev, call.catalog);
      slot.store(r, std::memory_order_release);
    }
    return *r;
  }

  const Mapping& row_;
  const std::string name_;
  static constexpr int kCachedDevices = 16;
  mutable std::array<std::atomic<const hal::OpRunner*>, kCachedDevices> runners_{};
  std::once_flag resolved_;
  static constexpr size_t kMetaCacheEntries = 4096;
  mutable std::mutex meta_mu_;
  mutable std::unordered_map<std::string, std::vector<MetaReturn>> meta_cache_;
  std::vector<int> in_index_, attr_index_, return_arg_;
};

std::vector<std::string>& unregistered() {
  static auto* names = new std::vector<std::string>();
  return *names;
}

// The CPU kernel of a _foreach_ op is ATen's per-tensor loop over ordinary
// ops (at::add, ...), which are device-generic: run it on the hal tensors
// so each element op lands on a mapped kernel.
void foreach_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

bool registrable(const c10::OperatorName& name, std::string* why) {
  auto handle = c10::Dispatcher::singleton().findOp(name);
  if (!handle) {
    *why = "no such aten op";
    return false;
  }
  if (handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
    *why = "CompositeImplicitAutograd (a kernel would bypass its autograd)";
    return false;
  }
  return true;
}

c10::OperatorName aten_name(const std::string& name) {
  const auto dot = name.find('.');
  return c10::OperatorName("aten::" + name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1));
}

}  // namespace

const std::vector<std::string>& unregistered_mappings() { return unregistered(); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const Mapping& row : mappings())
    for (const std::string& name : row.aten) {
      std::string why;
      if (!registrable(aten_name(name), &why)) {
        unregistered().push_back(name + ": " + why);
        continue;
      }
      m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<MappedKernel>(row, name)));
    }
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::_foreach_", 0) != 0) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CPU)) continue;
    const std::string full = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    m.impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&foreach_kernel>());
  }
}

}  // namespace torch_hal
