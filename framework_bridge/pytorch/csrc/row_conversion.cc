// torch_hal: a mapping-table row's conversion of an aten call into a
// catalog call (row_conversion.hpp), shared by the eager kernel and the
// torch.compile lowering.
#include "row_conversion.hpp"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "backend.hpp"

namespace torch_hal {

const c10::IValue& Call::arg(const char* name) const {
  auto i = schema.argumentIndexWithName(name);
  TORCH_CHECK(i.has_value(), "torch_hal: ", schema.name(), " has no argument ", name, " (mapping table)");
  return args[*i];
}

hal::Attr scalar_attr(std::string name, const c10::Scalar& v) {
  if (v.isIntegral(/*includeBool=*/true)) return hal::Attr::i(std::move(name), v.toLong());
  TORCH_CHECK(v.isFloatingPoint(), "torch_hal: attribute ", name, " = ", v, " is not a real scalar");
  return hal::Attr::f(std::move(name), v.toDouble());
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
  // A hal device argument (_to_copy(..., device=hal:0) in AOTAutograd's
  // backward graphs): the Meta run must not make a hal tensor from meta data.
  if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) return c10::IValue(c10::Device(kMeta));
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

// What a Meta run depends on, as bytes: every argument's dtype, shape,
// strides, device and wrapped-number flag, and every non-tensor argument's
// value, each tagged and lists length-prefixed (no two signatures share a
// key). Raw integers, not text: a key is built on every eager call. False
// when an argument has a kind not listed (then no caching).
template <class T>
void append_raw(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void append_ints(std::string& key, c10::IntArrayRef xs) {
  append_raw<uint64_t>(key, xs.size());
  key.append(reinterpret_cast<const char*>(xs.data()), xs.size() * sizeof(int64_t));
}
void append_text(std::string& key, const std::string& text) {
  append_raw<uint64_t>(key, text.size());
  key.append(text);
}
bool append_meta_key(std::string& key, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return key.push_back('u'), true;
    key.push_back('T');
    append_raw<int16_t>(key, static_cast<int16_t>(t.scalar_type()));
    key.push_back(t.is_privateuseone() ? 'h' : 'c');
    key.push_back(t.unsafeGetTensorImpl()->is_wrapped_number() ? 'w' : '-');
    append_ints(key, t.sizes());
    append_ints(key, t.strides());
    return true;
  }
  if (v.isNone()) return key.push_back('n'), true;
  if (v.isBool()) return key.append(v.toBool() ? "b1" : "b0"), true;
  if (v.isInt()) return key.push_back('i'), append_raw<int64_t>(key, v.toInt()), true;
  if (v.isDouble()) return key.push_back('d'), append_raw<double>(key, v.toDouble()), true;  // exact bits
  if (v.isIntList()) return key.push_back('I'), append_ints(key, v.toIntVector()), true;
  if (v.isString()) return key.push_back('s'), append_text(key, v.toStringRef()), true;
  if (v.isDevice()) return key.push_back('D'), append_text(key, v.toDevice().str()), true;
  if (v.isList()) {  // Tensor[], Tensor?[], bool[], float[]
    const auto list = v.toListRef();
    key.push_back('[');
    append_raw<uint64_t>(key, list.size());
    for (const c10::IValue& e : list)
      if (!append_meta_key(key, e)) return false;
    return true;
  }
  return false;
}

}  // namespace

RowConversion::RowConversion(const Mapping& row, std::string name, const c10::FunctionSchema& schema)
    : row_(row), name_(std::move(name)) {
  auto index = [&](const char* arg) {
    auto i = schema.argumentIndexWithName(arg);
    TORCH_CHECK(i.has_value(), "torch_hal: ", schema.name(), " has no argument ", arg, " (mapping table)");
    return static_cast<int>(*i);
  };
  for (const auto& in : row_.inputs) in_index_.push_back(in.arg == nullptr ? -1 : index(in.arg));
  for (const auto& a : row_.attrs) attr_index_.push_back(a.arg == nullptr ? -1 : index(a.arg));
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

void RowConversion::convert(const c10::OperatorHandle& op, Call& call) const {
  if (!direct_shapes(call)) meta_shapes(op, call);
  build_inputs(call);
  build_attrs(call);
  build_outputs(call);
  if (row_.hook != nullptr) row_.hook(call);
}

// The hot path's rule: every tensor input on the device, dense and of one
// floating dtype, scalars real: output = broadcast shape, that dtype (bool
// for comparisons), dense. Functional and in-place overloads only.
bool RowConversion::direct_shapes(Call& call) const {
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
    if (call.borrowing)
      call.borrow_return(self);
    else
      call.returns.push_back(self);
    return true;
  }
  call.returns.push_back(empty_dense(shape, out_dtype, call.dev));
  return true;
}

// Output sizes and dtypes from the op's Meta kernel (and out= resizes).
// Meta kernels are often Python (hundreds of microseconds), and training
// repeats the same shapes, so results are cached per argument signature.
void RowConversion::meta_shapes(const c10::OperatorHandle& op, Call& call) const {
  // The default dtype decides outputs of calls that name none.
  thread_local std::string key;  // keeps its capacity: no allocation per call once warm
  key.clear();
  append_raw<int16_t>(key, static_cast<int16_t>(c10::typeMetaToScalarType(at::get_default_dtype())));
  bool cacheable = true;
  for (size_t i = 0; i < call.args.size() && cacheable; ++i) {
    const c10::IValue& a = call.args[i];
    // A Scalar argument's value does not shape the outputs of a row with
    // tensor inputs, only its kind does: AdamW's per-step scalars hit. A
    // factory row's (arange: no tensor inputs) scalars are its shape.
    if (!row_.inputs.empty() && call.schema.arguments()[i].type()->kind() == c10::TypeKind::NumberType &&
        (a.isInt() || a.isDouble() || a.isBool())) {
      key.append(a.isInt() ? "#i" : a.isDouble() ? "#d" : "#b");
      continue;
    }
    cacheable = append_meta_key(key, a);
  }
  std::shared_ptr<const std::vector<MetaReturn>> cached;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(meta_mu_);
    auto it = meta_cache_.find(key);
    if (it != meta_cache_.end()) cached = it->second;
  }
  if (cached == nullptr) {
    const std::string owned = key;  // the Meta run below may convert another call on this thread
    auto result = std::make_shared<std::vector<MetaReturn>>();
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
      result->push_back(std::move(m));
    }
    cached = result;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(meta_mu_);
      if (meta_cache_.size() >= kMetaCacheEntries) meta_cache_.clear();  // bounded; shapes in a loop repeat
      meta_cache_.emplace(owned, std::move(result));
    }
  }
  const std::vector<MetaReturn>& result = *cached;
  const c10::Device dev = call.lowering ? kMeta : c10::Device(at::kPrivateUse1, call.dev);
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
c10::ScalarType RowConversion::scalar_dtype(const Call& call, const c10::Scalar& s) const {
  if (!call.returns.empty() && call.returns[0].defined() && call.returns[0].scalar_type() != c10::ScalarType::Bool)
    return call.returns[0].scalar_type();
  for (size_t i = 0; i < row_.inputs.size(); ++i)
    if (in_index_[i] >= 0 && call.args[in_index_[i]].isTensor() && call.args[in_index_[i]].toTensor().defined())
      return at::result_type(call.args[in_index_[i]].toTensor(), s);
  return c10::typeMetaToScalarType(at::get_default_dtype());
}

namespace {

// Scalar operands on the device, kept per (device, stream, dtype, value):
// optimizers pass the same few numbers every step (AdamW's betas, lr,
// weight decay), and each fresh one cost an allocation and a
// host-to-device copy. The tensors are only read (catalog inputs). Each is
// allocated on, and only used on, its key's stream, so dropping the cache
// while that stream still reads one is ordered like any other free.
struct ScalarKey {
  c10::DeviceIndex dev;
  const void* stream;
  c10::ScalarType dtype;
  char kind;  // 'f', 'i', 'b': a 1.0 and a 1 convert alike but key apart (harmless)
  uint64_t bits;
  bool operator==(const ScalarKey& o) const {
    return dev == o.dev && stream == o.stream && dtype == o.dtype && kind == o.kind && bits == o.bits;
  }
};
struct ScalarKeyHash {
  size_t operator()(const ScalarKey& k) const noexcept {
    return std::hash<uint64_t>()(k.bits) ^ (std::hash<const void*>()(k.stream) << 1) ^
           (static_cast<size_t>(k.dtype) << 8) ^ (static_cast<size_t>(k.dev) << 16) ^ static_cast<size_t>(k.kind);
  }
};

std::mutex scalars_mu;
std::unordered_map<ScalarKey, at::Tensor, ScalarKeyHash>& scalars() {  // guarded by scalars_mu
  static auto* cache = new std::unordered_map<ScalarKey, at::Tensor, ScalarKeyHash>();
  return *cache;
}

}  // namespace

at::Tensor cached_device_scalar(const c10::Scalar& s, c10::ScalarType dtype, c10::DeviceIndex dev) {
  ScalarKey key{dev, current_hal_stream(dev), dtype, 'i', 0};
  if (s.isFloatingPoint()) {
    const double d = s.toDouble();
    std::memcpy(&key.bits, &d, sizeof d);
    key.kind = 'f';
  } else if (s.isBoolean()) {
    key.bits = s.toBool();
    key.kind = 'b';
  } else if (s.isIntegral(/*includeBool=*/false)) {
    key.bits = static_cast<uint64_t>(s.toLong());
  } else {  // complex: not cached
    return at::scalar_tensor(s, at::TensorOptions().dtype(dtype)).to(at::Device(at::kPrivateUse1, dev));
  }
  constexpr size_t kEntries = 1024;  // bounded: AdamW's bias corrections change every step
  {
    std::lock_guard<std::mutex> lock(scalars_mu);
    auto it = scalars().find(key);
    if (it != scalars().end()) return it->second;
  }
  at::Tensor t = at::scalar_tensor(s, at::TensorOptions().dtype(dtype)).to(at::Device(at::kPrivateUse1, dev));
  std::lock_guard<std::mutex> lock(scalars_mu);
  if (scalars().size() >= kEntries) scalars().clear();
  scalars().emplace(key, t);
  return t;
}

void clear_device_scalars() {
  std::unordered_map<ScalarKey, at::Tensor, ScalarKeyHash> dropped;  // freed after the lock is released
  std::lock_guard<std::mutex> lock(scalars_mu);
  dropped.swap(scalars());
}

at::Tensor RowConversion::device_scalar(const Call& call, const c10::Scalar& s) const {
  if (call.lowering) return at::scalar_tensor(s, at::TensorOptions().dtype(scalar_dtype(call, s)));
  return cached_device_scalar(s, scalar_dtype(call, s), call.dev);
}

at::Tensor RowConversion::device_tensor(const Call& call, const at::Tensor& t, const char* arg) const {
  if (call.lowering) return t;  // meta tensors standing for graph values
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
  // A 0-dim CPU tensor keeps its dtype (AdamW's step count, a CPU loss scale).
  return cached_device_scalar(t.item(), t.scalar_type(), call.dev);
}

void RowConversion::build_inputs(Call& call) const {
  for (size_t i = 0; i < row_.inputs.size(); ++i) {
    const InputSpec& spec = row_.inputs[i];
    if (spec.kind == InFrom::kAbsent) {
      call.inputs.emplace_back();
      continue;
    }
    const c10::IValue& v = call.args[in_index_[i]];
    switch (spec.kind) {
      case InFrom::kTensor:
      case InFrom::kOptTensor: {
        if (v.isNone()) {
          call.inputs.emplace_back();
          break;
        }
        const at::Tensor& t = v.toTensor();
        if (call.borrowing && t.defined() && is_hal(t) && t.device().index() == call.dev)
          call.borrow_input(t);
        else
          call.inputs.push_back(device_tensor(call, t, spec.arg));
        break;
      }
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

void RowConversion::build_attrs(Call& call) const {
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
      case AttrFrom::kResultShape: out.push_back(hal::Attr::ints(a.name, call.returns[0].sizes().vec())); break;
      case AttrFrom::kTransposeDims: {
        const int64_t rank = call.arg("self").toTensor().dim();
        std::vector<int64_t> dims(rank);
        for (int64_t d = 0; d < rank; ++d) dims[d] = d;
        if (call.schema.argumentIndexWithName("dim0")) {
          std::swap(dims.at(c10::maybe_wrap_dim(call.arg("dim0").toInt(), rank)),
                    dims.at(c10::maybe_wrap_dim(call.arg("dim1").toInt(), rank)));
        } else if (rank == 2) {
          std::swap(dims[0], dims[1]);
        }
        out.push_back(hal::Attr::ints(a.name, dims));
        break;
      }
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
std::vector<int64_t> RowConversion::scratch_shape(const Call& call, const char* spec) const {
  if (std::string(spec) == "#C") return {call.arg("input").toTensor().size(1)};
  if (std::string(spec) == "#O") return {call.arg("weight").toTensor().size(0)};
  const c10::IValue& v = call.arg(spec);
  return v.isTensor() ? v.toTensor().sizes().vec() : v.toIntVector();
}

void RowConversion::build_outputs(Call& call) const {
  const size_t to_catalog =
      row_.returns_to_catalog < 0 ? call.returns.size() : static_cast<size_t>(row_.returns_to_catalog);
  const at::TensorOptions like = !call.inputs.empty() && call.inputs.front().defined() ? call.inputs.front().options()
                                                              : call.returns.front().options();
  for (size_t r = 0; r < to_catalog; ++r) {
    if (call.returns[r].defined()) {
      call.push_output_of_return(r);
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

}  // namespace torch_hal
