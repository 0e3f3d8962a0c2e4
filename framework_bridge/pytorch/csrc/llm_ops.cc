// torch.ops.hal.<op>: the op catalog's "llm" group (sdk/catalog/ops/llm.toml)
// as PyTorch custom operators, dlinfer's interface: called op by op in
// eager mode, single nodes in Dynamo graphs. The schemas are declared here;
// the "hal" device runs them as their catalog op through one boxed kernel
// (tensor arguments are the catalog's inputs in order, the others its
// attributes by name; a mutated argument is the in-place output). The CPU
// reference implementations and the fake (meta) kernels are Python
// (torch_hal/llm.py). A plugin without the op, or a dtype it declines, runs
// the CPU reference through PyTorch's CPU fallback (counted).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <mutex>
#include <unordered_map>

#include "backend.hpp"
#include "hal/runtime/shape_inference.hpp"
#include "llm_ops.hpp"
#include "mapping.hpp"

namespace torch_hal {
namespace {

// How one custom op's arguments reach its catalog op.
struct Plan {
  enum class Kind { kTensor, kFloat, kInt, kBool, kInts };
  struct Arg {
    Kind kind;
    std::string name;
    bool mutated = false;
  };
  std::string qualified;  // "hal::fill_kv_cache"
  std::string catalog;    // "fill_kv_cache"
  std::string display;    // "torch.ops.hal.fill_kv_cache", for messages
  std::vector<Arg> args;
  size_t returns = 0;
};

Plan make_plan(const c10::FunctionSchema& schema) {
  Plan p;
  p.qualified = schema.name();
  p.catalog = schema.name().substr(schema.name().find("::") + 2);
  p.display = "torch.ops.hal." + p.catalog;
  for (const c10::Argument& a : schema.arguments()) {
    Plan::Arg arg{Plan::Kind::kTensor, a.name()};
    const c10::TypePtr& type = a.real_type();
    if (type->kind() == c10::TypeKind::TensorType ||
        (type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType)) {
      arg.mutated = a.alias_info() != nullptr && a.alias_info()->isWrite();
    } else if (type->kind() == c10::TypeKind::FloatType) {
      arg.kind = Plan::Kind::kFloat;
    } else if (type->kind() == c10::TypeKind::IntType) {
      arg.kind = Plan::Kind::kInt;
    } else if (type->kind() == c10::TypeKind::BoolType) {
      arg.kind = Plan::Kind::kBool;
    } else if (type->kind() == c10::TypeKind::ListType &&
               type->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::IntType) {
      arg.kind = Plan::Kind::kInts;
    } else {
      TORCH_CHECK(false, "torch_hal: ", p.qualified, ": argument '", a.name(), "' has type ", type->str(),
                  " that no catalog attribute takes");
    }
    p.args.push_back(std::move(arg));
  }
  p.returns = schema.returns().size();
  return p;
}

const Plan& plan_of(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static auto* plans = new std::unordered_map<std::string, Plan>();  // never destroyed (kernels run at exit)
  std::lock_guard<std::mutex> lock(mu);
  const std::string& name = op.schema().name();
  auto it = plans->find(name);
  if (it == plans->end()) it = plans->emplace(name, make_plan(op.schema())).first;
  return it->second;
}

// The boxed kernel of every torch.ops.hal op on the "hal" device.
void llm_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const Plan& p = plan_of(op);
  if (forced_to_cpu(p.qualified)) return run_on_cpu(op, stack, "forced by HAL_FORCE_FALLBACK_OPS");
  const size_t n = p.args.size();
  auto args = torch::jit::last(*stack, n);

  HalOpCall call = hal_op_call(op, args);
  std::vector<at::Tensor>& inputs = call.inputs;
  std::vector<at::Tensor> outputs = std::move(call.mutated);
  std::vector<hal::Attr>& attrs = call.attrs;
  // Every tensor on one hal device; a CPU tensor is a caller's mistake (a
  // silent copy would hide a host transfer per step).
  c10::DeviceIndex dev = -1;
  const std::string* dev_arg = nullptr;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    if (!t.defined() || !t.is_privateuseone()) continue;
    if (dev < 0) {
      dev = t.device().index();
      dev_arg = call.input_names[i];
    }
    TORCH_CHECK_VALUE(t.device().index() == dev, p.display, ": argument '", *call.input_names[i], "' is on ",
                      t.device(), " but '", *dev_arg, "' is on hal:", int(dev));
  }
  TORCH_CHECK(dev >= 0, p.display, ": no argument is on the hal device");
  for (size_t i = 0; i < inputs.size(); ++i)
    TORCH_CHECK_VALUE(!inputs[i].defined() || inputs[i].is_privateuseone(), p.display, ": argument '",
                      *call.input_names[i], "' is on ", inputs[i].device(), " but '", *dev_arg, "' is on hal:",
                      int(dev), " (every tensor argument must be on the same hal device)");

  if (explaining()) record_catalog_run(p.qualified, p.catalog, dev);
  try {
    // UNIMPLEMENTED (-> the CPU fallback) here, before anything is allocated.
    const hal::OpRunner& runner = op_runner(dev, p.catalog);
    if (p.returns > 0) {
      std::vector<hal::ValueSpec> specs(inputs.size());
      std::vector<const hal::ValueSpec*> in;
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i].defined()) {
          in.push_back(nullptr);
          continue;
        }
        specs[i].dtype = to_hal_dtype(inputs[i].scalar_type());
        specs[i].shape = inputs[i].sizes().vec();
        in.push_back(&specs[i]);
      }
      for (const hal::ValueSpec& s : hal::infer_node(p.catalog, in, attrs, 0))
        outputs.push_back(empty_dense(s.shape, scalar_type_of(s.dtype), dev));
    }
    launch(runner, dev, inputs, outputs, attrs);
  } catch (const hal::Error& e) {
    if (declined(e)) return run_on_cpu(op, stack, e.what());
    raise_plugin_error(p.display, dev, e);
  }
  torch::jit::drop(*stack, n);
  for (size_t r = outputs.size() - p.returns; r < outputs.size(); ++r) stack->emplace_back(std::move(outputs[r]));
}

}  // namespace

HalOpCall hal_op_call(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const Plan& p = plan_of(op);
  HalOpCall call;
  call.catalog = p.catalog;
  for (size_t i = 0; i < p.args.size(); ++i) {
    const Plan::Arg& a = p.args[i];
    const c10::IValue& v = args[i];
    switch (a.kind) {
      case Plan::Kind::kFloat: call.attrs.push_back(hal::Attr::f(a.name, v.toDouble())); continue;
      case Plan::Kind::kInt: call.attrs.push_back(hal::Attr::i(a.name, v.toInt())); continue;
      case Plan::Kind::kBool: call.attrs.push_back(hal::Attr::b(a.name, v.toBool())); continue;
      case Plan::Kind::kInts: call.attrs.push_back(hal::Attr::ints(a.name, v.toIntVector())); continue;
      case Plan::Kind::kTensor: break;
    }
    call.inputs.push_back(v.isNone() ? at::Tensor() : v.toTensor());
    call.input_names.push_back(&a.name);
    if (a.mutated) call.mutated.push_back(call.inputs.back());
  }
  return call;
}

// Schemas: tensor arguments in the catalog's input order, attributes by their
// catalog names with its defaults; an in-place op returns nothing.
TORCH_LIBRARY(hal, m) {
  // The catalog's rms_norm (group nn) too: F.rms_norm reaches the device as
  // its decomposition (pow, mean, rsqrt, mul); engines call the fused op.
  m.def("rms_norm(Tensor input, Tensor? weight, int[] normalized_shape, float eps=-1.0) -> (Tensor, Tensor)");
  m.def("add_rms_norm(Tensor input, Tensor residual, Tensor weight, float eps=1e-06) -> (Tensor, Tensor)");
  m.def("apply_rotary_pos_emb(Tensor(a!) query, Tensor(b!) key, Tensor cos, Tensor sin, Tensor position_ids, "
        "bool interleaved=False) -> ()");
  m.def("silu_and_mul(Tensor input) -> Tensor");
  m.def("fill_kv_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
        "Tensor slot_mapping) -> ()");
  m.def("paged_decode_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables, "
        "Tensor context_lens, Tensor? alibi_slopes=None, float scale=0.0, int sliding_window=0) -> Tensor");
  m.def("paged_prefill_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables, "
        "Tensor query_start_loc, Tensor context_lens, Tensor? alibi_slopes=None, float scale=0.0, "
        "bool causal=True, int sliding_window=0) -> Tensor");
  m.def("prefill_attention(Tensor query, Tensor key, Tensor value, Tensor cu_seqlens, Tensor? alibi_slopes=None, "
        "float scale=0.0, bool causal=True, int sliding_window=0) -> Tensor");
  m.def("moe_gating_topk_softmax(Tensor router_logits, int top_k, bool renormalize=False) -> (Tensor, Tensor)");
  m.def("fused_moe(Tensor hidden_states, Tensor gate_up_weights, Tensor down_weights, Tensor topk_weights, "
        "Tensor topk_ids, bool renormalize=False) -> Tensor");
  m.def("dynamic_quant(Tensor input) -> (Tensor, Tensor)");
  m.def("linear_w8a16(Tensor input, Tensor weight, Tensor scale, Tensor? bias=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(hal, PrivateUse1, m) {
  for (const char* name : {"rms_norm", "add_rms_norm", "apply_rotary_pos_emb", "silu_and_mul", "fill_kv_cache",
                           "paged_decode_attention", "paged_prefill_attention", "prefill_attention",
                           "moe_gating_topk_softmax", "fused_moe", "dynamic_quant", "linear_w8a16"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&llm_kernel>());
}

}  // namespace torch_hal
