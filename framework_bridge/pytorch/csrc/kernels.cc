// torch_hal kernels: the aten ops registered for PrivateUse1.
//
// Three groups: (1) tensor creation, views and copies, written here because
// they are the bridge's own business (metadata, or bytes between host and
// device through hal::Buffer copies); (2) kMappings, the one table mapping
// aten ops to catalog ops, run by one generic boxed kernel; (3) everything
// else: a counted boxed CPU fallback.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "backend.hpp"

namespace torch_hal {
namespace {

constexpr c10::DispatchKeySet kHalKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex index_of(const at::Tensor& t) { return t.device().index(); }

hal::Attr scalar_attr(const std::string& name, const c10::Scalar& v) {
  if (v.isIntegral(/*includeBool=*/true)) return hal::Attr::i(name, v.toLong());
  TORCH_CHECK(v.isFloatingPoint(), "torch_hal: attribute ", name, " = ", v, " is not a real scalar");
  return hal::Attr::f(name, v.toDouble());
}

// ---- creation, views, resize ----

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const c10::Device d = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "torch_hal: only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "torch_hal: pin_memory is for CPU tensors");
  const c10::DeviceGuard guard(d);
  return at::detail::empty_generic(size, allocator(), kHalKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  const c10::Device d = c10::device_or_default(device);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "torch_hal: only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "torch_hal: pin_memory is for CPU tensors");
  const c10::DeviceGuard guard(d);
  return at::detail::empty_strided_generic(size, stride, allocator(), kHalKeys, c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> offset;
  if (storage_offset) offset = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride),
                                           offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

// at::native::resize_ would memcpy the old bytes on the host; the storage
// grows through resize_storage_bytes (a device copy) instead.
const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef sym_size,
                         std::optional<c10::MemoryFormat> memory_format) {
  const c10::IntArrayRef size = C10_AS_INTARRAYREF_SLOW(sym_size);
  if (self.sizes() == size && !memory_format) return self;
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  const size_t needed = at::detail::computeStorageNbytes(size, impl->strides(), self.element_size(),
                                                         static_cast<size_t>(self.storage_offset()));
  if (needed > self.storage().nbytes()) resize_storage_bytes(self.storage(), needed);
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking: copies are synchronous*/) {
  const bool src_hal = self.is_privateuseone(), dst_hal = dst.is_privateuseone();
  if (src_hal && dst_hal && self.device() == dst.device()) {
    device_copy(self, dst);
  } else if (src_hal && dst_hal) {
    upload(download(self), dst);  // between devices, through the host
  } else if (src_hal) {
    const_cast<at::Tensor&>(dst).copy_(download(self));
  } else {
    TORCH_CHECK(dst_hal, "torch_hal: _copy_from between ", self.device(), " and ", dst.device());
    upload(self, dst);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize(dst, self.sym_sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "torch_hal: a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  return at::_local_scalar_dense(download(self));
}

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  if (self.numel() == 0) return self;
  const hal::TensorView out = view_of(self);
  launch(index_of(self), "fill", {}, {&out}, {scalar_attr("value", value)});
  return self;
}

at::Tensor& zero(at::Tensor& self) { return fill_scalar(self, 0); }

// ---- the CPU fallback ----

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason) {
  count_fallback(c10::toString(op.operator_name()), reason);
  at::native::cpu_fallback(op, stack);
}

void fallback_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  cpu_fallback(op, stack, "no catalog mapping");
}

// ---- aten -> catalog: the mapping table ----

enum class AttrFrom { kScalar, kBool, kInts, kOptionalInts, kOptionalDtype };

struct AttrMapping {
  const char* aten_arg;  // argument name in the aten schema
  const char* attr;      // catalog attribute name
  AttrFrom from;
};

struct Mapping {
  const char* aten;     // "add.Tensor"; "add_.Tensor" and "add.out" work the same way
  const char* catalog;  // catalog op name (sdk/catalog/ops/*.toml)
  std::vector<const char*> inputs;  // aten arguments passed as the op's inputs, in order
  std::vector<AttrMapping> attrs;
};

const AttrMapping kAlpha{"alpha", "alpha", AttrFrom::kScalar};
const std::vector<const char*> kSelf{"self"};
const std::vector<const char*> kSelfOther{"self", "other"};

// Functional, in-place and out= overloads share a row's conversion; the
// generic kernel tells them apart by the schema's alias annotations.
const std::vector<Mapping>& mappings() {
  static const std::vector<Mapping> table = [] {
    std::vector<Mapping> t;
    auto all = [&](std::initializer_list<const char*> names, const char* catalog, std::vector<const char*> inputs,
                   std::vector<AttrMapping> attrs) {
      for (const char* n : names) t.push_back({n, catalog, inputs, attrs});
    };
    all({"add.Tensor", "add_.Tensor", "add.out"}, "add", kSelfOther, {kAlpha});
    all({"sub.Tensor", "sub_.Tensor", "sub.out"}, "sub", kSelfOther, {kAlpha});
    all({"mul.Tensor", "mul_.Tensor", "mul.out"}, "mul", kSelfOther, {});
    all({"div.Tensor", "div_.Tensor", "div.out"}, "div", kSelfOther, {});
    all({"neg", "neg_", "neg.out"}, "neg", kSelf, {});
    all({"relu", "relu_"}, "relu", kSelf, {});
    all({"exp", "exp_", "exp.out"}, "exp", kSelf, {});
    all({"tanh", "tanh_", "tanh.out"}, "tanh", kSelf, {});
    all({"sigmoid", "sigmoid_", "sigmoid.out"}, "sigmoid", kSelf, {});
    all({"mm", "mm.out"}, "mm", {"self", "mat2"}, {});
    all({"sum.dim_IntList", "sum.IntList_out"}, "sum", kSelf,
        {{"dim", "dim", AttrFrom::kOptionalInts},
         {"keepdim", "keepdim", AttrFrom::kBool},
         {"dtype", "dtype", AttrFrom::kOptionalDtype}});
    return t;
  }();
  return table;
}

int arg_index(const c10::FunctionSchema& schema, const char* name) {
  auto i = schema.argumentIndexWithName(name);
  TORCH_CHECK(i.has_value(), "torch_hal: ", schema.name(), " has no argument ", name, " (mapping table)");
  return static_cast<int>(*i);
}

// Runs one table row. Output shapes and dtypes come from the op's Meta
// kernel, so the table holds no per-op shape rules.
class MappedKernel final : public c10::OperatorKernel {
 public:
  explicit MappedKernel(const Mapping& m) : m_(m) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const auto& schema = op.schema();
    const size_t n = schema.arguments().size();
    auto args = torch::jit::last(*stack, n);

    c10::DeviceIndex dev = -1;
    for (const auto& a : args)
      if (a.isTensor() && a.toTensor().defined() && a.toTensor().is_privateuseone()) {
        dev = index_of(a.toTensor());
        break;
      }
    TORCH_INTERNAL_ASSERT(dev >= 0);

    // Meta run: output sizes/dtypes (and resize of out= arguments).
    torch::jit::Stack meta;
    for (const auto& a : args) {
      if (a.isTensor() && a.toTensor().defined()) {
        const at::Tensor& t = a.toTensor();
        meta.emplace_back(at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta)));
      } else {
        meta.push_back(a);
      }
    }
    op.callBoxed(&meta);

    std::vector<at::Tensor> outputs;
    for (size_t r = 0; r < schema.returns().size(); ++r) {
      const at::Tensor& m = meta[r].toTensor();
      const auto* alias = schema.returns()[r].alias_info();
      if (alias == nullptr) {
        outputs.push_back(at::empty_strided(m.sizes(), m.strides(), m.options().device(c10::Device(at::kPrivateUse1, dev))));
        continue;
      }
      for (size_t j = 0; j < n; ++j) {
        const auto* ai = schema.arguments()[j].alias_info();
        if (ai != nullptr && ai->isWrite() && ai->beforeSets() == alias->beforeSets()) {
          at::Tensor out = args[j].toTensor();
          if (out.sizes() != m.sizes()) resize(out, m.sym_sizes(), std::nullopt);
          outputs.push_back(out);
          break;
        }
      }
    }

    // Inputs; a CPU scalar (0-dim) operand is uploaded first.
    std::vector<at::Tensor> keep;
    std::vector<hal::TensorView> in_views, out_views;
    for (const char* name : m_.inputs) {
      at::Tensor t = args[arg_index(schema, name)].toTensor();
      if (!t.is_privateuseone()) {
        // PyTorch's rule: only a 0-dim CPU tensor may join device tensors.
        TORCH_CHECK(t.is_cpu() && t.dim() == 0, "Expected all tensors to be on the same device, but found at least "
                    "two devices, hal:", int(dev), " and ", t.device(), "! (aten::", m_.aten, " argument ", name, ")");
        t = t.to(c10::Device(at::kPrivateUse1, dev));
      }
      keep.push_back(t);
      in_views.push_back(view_of(t));
    }
    for (const auto& o : outputs) out_views.push_back(view_of(o));
    std::vector<hal::Attr> attrs;
    for (const auto& am : m_.attrs) {
      const c10::IValue& v = args[arg_index(schema, am.aten_arg)];
      switch (am.from) {
        case AttrFrom::kScalar: attrs.push_back(scalar_attr(am.attr, v.toScalar())); break;
        case AttrFrom::kBool: attrs.push_back(hal::Attr::b(am.attr, v.toBool())); break;
        case AttrFrom::kInts: attrs.push_back(hal::Attr::ints(am.attr, v.toIntVector())); break;
        case AttrFrom::kOptionalInts:
          attrs.push_back(hal::Attr::ints(am.attr, v.isNone() ? std::vector<int64_t>{} : v.toIntVector()));
          break;
        case AttrFrom::kOptionalDtype:
          if (!v.isNone()) attrs.push_back(hal::Attr::dtype(am.attr, to_hal_dtype(v.toScalarType())));
          break;
      }
    }
    std::vector<const hal::TensorView*> ins, outs;
    for (const auto& v : in_views) ins.push_back(&v);
    for (const auto& v : out_views) outs.push_back(&v);

    bool empty = false;
    for (const auto& o : outputs) empty = empty || o.numel() == 0;
    if (!empty) {
      try {
        launch(dev, m_.catalog, ins, outs, attrs);
      } catch (const hal::Error& e) {
        if (e.code() == HAL_STATUS_UNIMPLEMENTED || e.code() == HAL_STATUS_UNSUPPORTED_DTYPE) {
          cpu_fallback(op, stack, std::string("catalog op ") + m_.catalog + " declined: " + e.what());
          return;
        }
        TORCH_CHECK(false, "torch_hal: aten::", m_.aten, " as catalog op ", m_.catalog, " on hal:", int(dev), " (",
                    device(dev)->id(), ") failed: ", e.what());
      }
    }
    torch::jit::drop(*stack, n);
    for (auto& o : outputs) stack->emplace_back(std::move(o));
  }

 private:
  const Mapping& m_;
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("zero_", zero);
  for (const Mapping& row : mappings())
    m.impl(row.aten, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<MappedKernel>(row)));
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback_kernel>());
}

}  // namespace
}  // namespace torch_hal
