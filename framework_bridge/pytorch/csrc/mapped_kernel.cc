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
#include <unordered_map>

#include "backend.hpp"
#include "mapping.hpp"
#include "row_conversion.hpp"

namespace torch_hal {
namespace {

bool declined(const hal::Error& e) {
  return e.code() == HAL_STATUS_UNIMPLEMENTED || e.code() == HAL_STATUS_UNSUPPORTED_DTYPE ||
         e.code() == HAL_STATUS_MIXED_DTYPES;
}

class MappedKernel final : public c10::OperatorKernel {
 public:
  MappedKernel(const Mapping& row, std::string name) : row_(row), name_(std::move(name)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    std::call_once(resolved_, [&] { conversion_ = std::make_unique<RowConversion>(row_, name_, op.schema()); });
    if (forced_to_cpu(name_)) return run_on_cpu(op, stack, "forced by HAL_FORCE_FALLBACK_OPS");
    const auto& schema = op.schema();
    const size_t n = schema.arguments().size();
    const auto args = torch::jit::last(*stack, n);
    Call call(row_, schema, args, device_of(args));
    try {
      conversion_->convert(op, call);
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
  std::unique_ptr<RowConversion> conversion_;
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
    for (const std::string& name : row.graph_only ? std::vector<std::string>{} : row.aten) {
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