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
#include <memory>
#include <cstring>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "backend.hpp"
#include "mapping.hpp"
#include "row_conversion.hpp"

namespace torch_hal {
namespace {

class MappedKernel final : public c10::OperatorKernel {
 public:
  MappedKernel(const Mapping& row, std::string name) : row_(row), name_(std::move(name)) {}
  ~MappedKernel() override { delete conversion_.load(); }
  MappedKernel(const MappedKernel&) = delete;
  MappedKernel& operator=(const MappedKernel&) = delete;

  // The boxed entry: every aten overload of the table.
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    resolve(op);
    if (forced_to_cpu(name_)) return run_on_cpu(op, stack, "forced by HAL_FORCE_FALLBACK_OPS");
    const size_t n = op.schema().arguments().size();
    const auto args = torch::jit::last(*stack, n);
    Call call(row_, op.schema(), args, device_of(args));
    std::string declined;
    if (!run(op, call, &declined)) return run_without_catalog(op, stack, declined);
    torch::jit::drop(*stack, n);
    for (size_t r = 0; r < call.returns.size(); ++r) {
      if (r < call.other_returns.size() && !call.other_returns[r].isNone()) {
        stack->push_back(std::move(call.other_returns[r]));
      } else {
        stack->emplace_back(std::move(call.returns[r]));
      }
    }
  }

  // The unboxed entries' path (UnboxedEntry): ARGS hold the caller's tensors
  // by borrow. kRan: the catalog op ran, RET is the op's one return (left
  // undefined for an in-place overload: the caller returns self). Else
  // nothing was written: kForced (HAL_FORCE_FALLBACK_OPS) goes to the CPU
  // fallback, kDeclined to decomposition then the fallback, for WHY.
  enum class Outcome { kRan, kForced, kDeclined };
  Outcome run_borrowed(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, at::Tensor* ret,
                       std::string* why) {
    resolve(op);
    if (forced_to_cpu(name_)) return Outcome::kForced;
    Call call(row_, op.schema(), args, device_of(args));
    call.borrowing = row_.hook == nullptr;
    if (!run(op, call, why)) return Outcome::kDeclined;
    if (conversion()->return_args()[0] < 0) *ret = std::move(call.returns[0]);  // fresh: owned
    return Outcome::kRan;
  }

 private:
  // The row's conversion for OP's schema, built on first use. An atomic
  // pointer, not std::call_once: libstdc++'s call_once goes through
  // pthread_once and two TLS variables on every call, even once done.
  void resolve(const c10::OperatorHandle& op) {
    if (C10_LIKELY(conversion_.load(std::memory_order_acquire) != nullptr)) return;
    std::lock_guard<std::mutex> lock(resolve_mu_);
    if (conversion_.load(std::memory_order_relaxed) == nullptr)
      conversion_.store(new RowConversion(row_, name_, op.schema()), std::memory_order_release);
  }
  // Set by resolve(), before any use.
  const RowConversion* conversion() const { return conversion_.load(std::memory_order_relaxed); }

  // Converts and launches CALL; false with WHY when the plugin or the row
  // declines (nothing was written).
  bool run(const c10::OperatorHandle& op, Call& call, std::string* why) const {
    try {
      conversion()->convert(op, call);
      const auto copies = unalias_outputs(call);
      launch_call(call);
      for (const auto& [fresh, real] : copies) device_copy(fresh, real);
      if (row_.after != nullptr) row_.after(call);
    } catch (const Decline& d) {
      *why = std::string("catalog op ") + call.catalog + " declined: " + d.reason;
      return false;
    }
    if (explaining()) record_catalog_run(name_, call.catalog, call.dev);
    return true;
  }

  static c10::DeviceIndex device_of(c10::ArrayRef<c10::IValue> args) {
    for (const auto& a : args) {
      if (a.isTensor() && a.toTensor().is_privateuseone()) return a.toTensor().device().index();
      if (a.isTensorList())
        for (const at::Tensor& t : a.toTensorList())
          if (t.defined() && t.is_privateuseone()) return t.device().index();
    }
    TORCH_INTERNAL_ASSERT(false, "torch_hal: a hal kernel called without a hal tensor");
  }

  // Replaces each output that overlaps an input, other than as the exact
  // in-place alias the catalog op allows, by a fresh dense tensor; returns
  // the (fresh, real) pairs to copy after the launch. Only outputs sharing
  // an input's storage are examined further (the common case costs one
  // pointer comparison per pair).
  std::vector<std::pair<at::Tensor, at::Tensor>> unalias_outputs(Call& call) const {
    std::vector<std::pair<at::Tensor, at::Tensor>> copies;
    for (size_t k = 0; k < call.outputs.size(); ++k) {
      const at::Tensor& out = call.outputs[k];
      if (!out.defined() || out.numel() == 0) continue;
      for (const at::Tensor& in : call.inputs) {
        if (!in.defined() || in.numel() == 0 || !shares_memory(out, in)) continue;
        const auto o = byte_span(out), i = byte_span(in);
        if (i.second <= o.first || o.second <= i.first) continue;
        if (same_view(in, out)) {
          const hal::common::OpSchema* schema = op_runner(call.dev, call.catalog).schema();
          if (schema != nullptr && schema->alias == hal::common::Alias::kExact) continue;
        }
        at::Tensor fresh = at::empty(out.sizes(), out.options());
        copies.emplace_back(fresh, out);
        call.replace_output(k, std::move(fresh));
        break;
      }
    }
    return copies;
  }

  // Whether A and B are views of one allocation (is_alias_of without its
  // out-of-line shared-storage test: a hal allocation's token address is
  // its own, so one memory is one data pointer).
  static bool shares_memory(const at::Tensor& a, const at::Tensor& b) {
    const c10::StorageImpl* sa = a.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl();
    const c10::StorageImpl* sb = b.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl();
    return sa == sb || (sa->data() != nullptr && sa->data() == sb->data());
  }

  void launch_call(const Call& call) const {
    for (const auto& o : call.outputs)
      if (o.numel() == 0 && call.outputs.size() == 1) return;  // nothing to compute
    // Descriptors in per-thread scratch whose vectors keep their capacity:
    // no allocation per call. Nothing re-enters a kernel during a launch.
    struct Scratch {  // one thread_local: each costs a TLS lookup per access
      std::vector<hal::TensorRef> refs;
      std::vector<const hal::TensorRef*> ins, outs;
    };
    thread_local Scratch scratch;
    auto& [refs, ins, outs] = scratch;
    refs.resize(std::max(refs.size(), call.inputs.size() + call.outputs.size()));
    ins.clear();
    outs.clear();
    // PyTorch allows 64 dims (CUDA 25), a HAL tensor HAL_TENSOR_MAX_RANK: more is the
    // decomposition's or the fallback's to run, not an error.
    auto checked_ref = [](const at::Tensor& t) {
      if (C10_UNLIKELY(t.dim() > HAL_TENSOR_MAX_RANK))
        throw Decline{"rank " + std::to_string(t.dim()) + " exceeds HAL_TENSOR_MAX_RANK (" +
                      std::to_string(HAL_TENSOR_MAX_RANK) + ")"};
      return ref_of(t);
    };
    size_t next = 0;
    for (const auto& t : call.inputs) {
      if (!t.defined()) {
        ins.push_back(nullptr);
        continue;
      }
      refs[next] = checked_ref(t);
      ins.push_back(&refs[next++]);
    }
    for (const auto& t : call.outputs) {
      refs[next] = checked_ref(t);
      outs.push_back(&refs[next++]);
    }
    try {
      // Under a profiler, a "hal::<catalog op>" range (as the dispatcher's).
      // Its RecordFunction lives in this branch only: an optional one on the
      // hot path is zero-filled per call (352 bytes).
      if (auto step = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE); C10_UNLIKELY(step)) {
        const std::unordered_map<std::string, c10::IValue> meta{
            {"plugin", device(call.dev)->plugin_name()}, {"device", "hal:" + std::to_string(call.dev)}};
        at::RecordFunction range(std::move(*step));
        range.before(std::string("hal::") + call.catalog, &meta);
        launch(runner(call), call.dev, ins, outs, call.attrs);
      } else {
        launch(runner(call), call.dev, ins, outs, call.attrs);
      }
    } catch (const hal::Error& e) {
      if (declined(e)) throw Decline{e.what()};
      const auto& d = device(call.dev);
      // An index out of range is PyTorch's IndexError, as on the CPU.
      TORCH_CHECK_INDEX(e.code() != HAL_STATUS_OUT_OF_RANGE, "torch_hal: aten::", name_, " as catalog op ", call.catalog,
                        " on hal:", int(call.dev), " (plugin ", d->plugin_name(), ", device ", d->id(), "): ", e.what());
      TORCH_CHECK(false, "torch_hal: aten::", name_, " as catalog op ", call.catalog, " on hal:", int(call.dev),
                  " (plugin ", d->plugin_name(), ", device ", d->id(), ") failed: ", e.what(),
                  lost_device_hint(call.dev));
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
  std::mutex resolve_mu_;
  std::atomic<const RowConversion*> conversion_{nullptr};  // owned
};

// ---- unboxed entries ----
//
// A boxed kernel is called through a stack of IValues that copy the
// caller's tensors. A tensor Python holds then goes from one C++ reference
// to two and back, and the way back (with the GIL released around the op)
// re-takes the GIL: ~0.2 us of a 1-element `x + y`. The overloads whose
// arguments are only Tensors, Scalars and an in-place self (the
// elementwise hot path) get an unboxed entry instead, which hands the same
// kernel borrowed arguments; a declined or forced call builds an owned
// stack and takes the boxed route.

// The argument classes an unboxed entry takes, from the schema: T a Tensor,
// M the Tensor(a!) self an in-place overload writes and returns, S a Scalar;
// "" when it has none (other argument or return types).
std::string unboxed_shape(const c10::FunctionSchema& schema) {
  if (schema.returns().size() != 1 || schema.returns()[0].type()->kind() != c10::TypeKind::TensorType) return "";
  const c10::AliasInfo* ret_alias = schema.returns()[0].alias_info();
  std::string shape;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::Argument& a = schema.arguments()[i];
    const c10::AliasInfo* alias = a.alias_info();
    if (a.type()->kind() == c10::TypeKind::TensorType) {
      if (alias == nullptr) {
        shape += 'T';
      } else if (i == 0 && alias->isWrite() && ret_alias != nullptr && ret_alias->isWrite() &&
                 ret_alias->beforeSets() == alias->beforeSets()) {
        shape += 'M';
      } else {
        return "";
      }
    } else if (a.type()->kind() == c10::TypeKind::NumberType && alias == nullptr) {
      shape += 'S';
    } else {
      return "";
    }
  }
  if (shape.find('M') == std::string::npos && ret_alias != nullptr) return "";
  return shape;
}

c10::IValue borrow(const at::Tensor& t) { return c10::IValue(c10::MaybeOwnedTraits<at::Tensor>::createBorrow(t)); }
c10::IValue borrow(const c10::Scalar& s) { return c10::IValue(s); }

template <class Ret, class... Args>
class UnboxedEntry {
 public:
  UnboxedEntry(std::shared_ptr<MappedKernel> kernel, c10::OperatorHandle op)
      : kernel_(std::move(kernel)), op_(std::move(op)) {}

  Ret operator()(Args... args) const {
    const c10::OperatorHandle& op = op_;
    std::array<c10::IValue, sizeof...(Args)> boxed{{borrow(args)...}};
    struct Release {  // borrowed tensors are released, not decremented
      std::array<c10::IValue, sizeof...(Args)>& b;
      ~Release() {
        for (c10::IValue& v : b)
          if (v.isTensor()) c10::MaybeOwnedTraits<c10::IValue>::destroyBorrow(v);
      }
    } release{boxed};
    at::Tensor ret;
    std::string why;
    const auto outcome = kernel_->run_borrowed(op, boxed, &ret, &why);
    if (outcome == MappedKernel::Outcome::kRan) return result(std::move(ret), args...);
    torch::jit::Stack stack;
    stack.reserve(sizeof...(Args));
    (stack.emplace_back(args), ...);
    if (outcome == MappedKernel::Outcome::kForced)
      run_on_cpu(op, &stack, "forced by HAL_FORCE_FALLBACK_OPS");
    else
      run_without_catalog(op, &stack, why);
    return result(std::move(stack.back()).toTensor(), args...);
  }

 private:
  // In place: self (the kernel or the fallback wrote it). Else the return.
  template <class First, class... Rest>
  static Ret result(at::Tensor&& ret, First& self, Rest&...) {
    if constexpr (std::is_same_v<Ret, at::Tensor&>) {
      return self;
    } else {
      return std::move(ret);
    }
  }

  std::shared_ptr<MappedKernel> kernel_;
  c10::OperatorHandle op_;  // handles live as long as the dispatcher
};

using CT = const at::Tensor&;
using MT = at::Tensor&;
using CS = const c10::Scalar&;

// The unboxed registration of OP when its schema has a supported shape (unboxed_shape).
std::optional<torch::CppFunction> unboxed_function(const std::shared_ptr<MappedKernel>& k,
                                                   const c10::OperatorHandle& op) {
  const std::string shape = unboxed_shape(op.schema());
  auto make = [&](auto entry) { return std::optional<torch::CppFunction>(torch::CppFunction(std::move(entry))); };
  if (shape == "T") return make(UnboxedEntry<at::Tensor, CT>(k, op));
  if (shape == "TT") return make(UnboxedEntry<at::Tensor, CT, CT>(k, op));
  if (shape == "TS") return make(UnboxedEntry<at::Tensor, CT, CS>(k, op));
  if (shape == "TTS") return make(UnboxedEntry<at::Tensor, CT, CT, CS>(k, op));
  if (shape == "M") return make(UnboxedEntry<at::Tensor&, MT>(k, op));
  if (shape == "MT") return make(UnboxedEntry<at::Tensor&, MT, CT>(k, op));
  if (shape == "MS") return make(UnboxedEntry<at::Tensor&, MT, CS>(k, op));
  if (shape == "MTS") return make(UnboxedEntry<at::Tensor&, MT, CT, CS>(k, op));
  return std::nullopt;
}

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
    for (const std::string& name : row.graph_only ? std::vector<std::string>{} : row.aten) {
      std::string why;
      if (!registrable(aten_name(name), &why)) {
        unregistered().push_back(name + ": " + why);
        continue;
      }
      const c10::OperatorHandle op = *c10::Dispatcher::singleton().findOp(aten_name(name));  // registrable: found
      if (auto unboxed = unboxed_function(std::make_shared<MappedKernel>(row, name), op)) {
        m.impl(name.c_str(), std::move(*unboxed));
      } else {
        m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<MappedKernel>(row, name)));
      }
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