// torch_hal kernels: the aten ops the bridge implements itself, because
// they are its own business: tensor creation, views, resize and copies
// (metadata, or bytes between host and device through hal::Buffer copies).
// The aten -> catalog table is mapping.cc (run by mapped_kernel.cc);
// everything else decomposes or falls back (fallback.cc).
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "backend.hpp"
#include "mapping.hpp"

namespace torch_hal {
namespace {

constexpr c10::DispatchKeySet kHalKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex index_of(const at::Tensor& t) { return t.device().index(); }

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

// The Conjugate and Negative keys fall through to this kernel (registered
// below, as PyTorch's other out-of-tree backends do), so SRC and DST arrive
// with their lazy conj/neg bits: bytes move raw, then DST's elements are
// fixed where the bits differ. Without the fallthrough, the bits' fallback
// materialises through clone -> copy_ -> _copy_from again, forever.
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool /*non_blocking: copies are synchronous*/) {
  const bool src_hal = src.is_privateuseone(), dst_hal = dst.is_privateuseone();
  TORCH_CHECK(src_hal || dst_hal, "torch_hal: _copy_from between ", src.device(), " and ", dst.device());
  if (src_hal && !dst_hal) {  // the CPU copy_ applies both tensors' bits
    at::Tensor host = download(src);
    host._set_conj(src.is_conj());
    host._set_neg(src.is_neg());
    const_cast<at::Tensor&>(dst).copy_(host);
    return dst;
  }
  const at::Tensor self = src_hal ? src : src.resolve_conj().resolve_neg();
  if (src_hal && self.device() == dst.device()) {
    device_copy(self, dst);
  } else if (src_hal) {
    upload(download(self), dst);  // between devices, through the host
  } else {
    upload(self, dst);
  }
  apply_math_bits(dst, self.is_conj() != dst.is_conj(), self.is_neg() != dst.is_neg());
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
  if (hal_dtype_of(self.scalar_type())) {
    const hal::TensorView out = view_of(self);
    try {
      launch(index_of(self), "fill", {}, {&out}, {scalar_attr("value", value)});
      return self;
    } catch (const hal::Error& e) {
      if (e.code() != HAL_STATUS_UNIMPLEMENTED && e.code() != HAL_STATUS_UNSUPPORTED_DTYPE) throw;
      count_fallback("aten::fill_.Scalar", e.what());
    }
  } else {
    count_fallback("aten::fill_.Scalar", std::string("no HAL dtype for ") + c10::toString(self.scalar_type()));
  }
  upload(at::empty({}, self.options().device(at::kCPU)).fill_(value), self);  // the device cannot fill this dtype
  return self;
}

at::Tensor& zero(at::Tensor& self) { return fill_scalar(self, 0); }

// fill_(Tensor): a 0-d value (PyTorch's check and message); a CPU value is a
// scalar fill, a hal one is copied into every element on the device.
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (!value.is_privateuseone()) return fill_scalar(self, value.item());
  if (self.numel() == 0) return self;
  return self.copy_(value.to(self.scalar_type()).expand(self.sizes()));
}

// Whether `self.data = from` may keep self's TensorImpl (Module._apply and
// `p.data = t` ask): a dense hal tensor pairs with any dense tensor, as
// CUDA's does with CPU's, so module.to("hal") keeps each Parameter object
// and tied weights stay tied. c10's TensorImpl::has_compatible_shallow_copy_type
// lists CPU, CUDA, MPS, ... but not PrivateUse1, so its answer is false here.
// Runs only when a hal tensor is an argument (PrivateUse1 dispatch).
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense_hal = [](const at::Tensor& t) { return t.is_privateuseone() && t.layout() == c10::kStrided; };
  // A built-in dense backend (CPU, CUDA, ...), by c10's own rule against a dense CPU key set.
  auto dense_builtin = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided &&
           t.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(c10::DispatchKeySet(c10::DispatchKey::CPU));
  };
  if ((dense_hal(self) && (dense_hal(from) || dense_builtin(from))) || (dense_hal(from) && dense_builtin(self)))
    return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// nonzero as the catalog's nonzero: an upper-bound [numel, rank] output and
// the count, read back (the one synchronisation, as on CUDA); a plugin
// without the op gets the counted CPU fallback.
at::Tensor nonzero(const at::Tensor& self) {
  const int64_t n = self.numel();
  std::optional<std::vector<at::Tensor>> out;
  if (hal_dtype_of(self.scalar_type()))
    out = run_catalog("aten::nonzero", "nonzero", self, {self}, {{{n, self.dim()}, at::kLong}, {{}, at::kLong}});
  if (!out) {
    count_fallback("aten::nonzero", "the plugin has no catalog nonzero for " + std::string(c10::toString(self.scalar_type())));
    return at::nonzero(self.cpu()).to(self.device());
  }
  return (*out)[0].narrow(0, 0, (*out)[1].item<int64_t>());
}

// masked_select as nonzero of the broadcast mask and an index_select of the
// broadcast self (device ops; PyTorch's mask check and message).
at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto [s, m] = at::expand_outplace(self, mask);
  return at::index_select(s->reshape({-1}), 0, at::nonzero(m->reshape({-1})).view({-1}));
}

// addmv (and mv, matmul of a matrix and a vector, which call it): beta·self +
// alpha·(mat @ vec) as an mm of [n, m] x [m, 1] and elementwise device ops,
// with PyTorch's shape checks and messages; beta = 0 ignores self (NaN too).
at::Tensor addmv_value(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                       const at::Scalar& alpha) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1, "vector + matrix @ vector expected, got ",
              self.dim(), ", ", mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self.numel() || self.numel() == 1),
              "size mismatch, got input (", self.dim() == 0 ? 1 : self.size(0), "), mat (", mat.size(0), "x",
              mat.size(1), "), vec (", vec.size(0), ")");
  at::Tensor prod = at::mm(mat, vec.unsqueeze(1)).squeeze(1);
  if (!(alpha.isIntegral(false) && alpha.toLong() == 1) && alpha.toDouble() != 1.0) prod = prod * alpha;
  if (beta.toComplexDouble() == 0.0) return prod;
  return at::add(prod, beta.toDouble() == 1.0 ? self : self * beta);
}

at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  return addmv_value(self, mat, vec, beta, alpha);
}

at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  const at::Tensor r = addmv_value(self, mat, vec, beta, alpha);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor& addmv_inplace(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                          const at::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 1 && mat.dim() == 2 && self.size(0) == mat.size(0),
              "addmv_: self must be a vector of mat's rows, got self ", self.sizes(), " and mat ", mat.sizes());
  return self.copy_(addmv_value(self, mat, vec, beta, alpha));
}

// linspace.out as device ops in PyTorch's CPU formula: step = (end - start)
// / (steps - 1); the first half start + step·i, the second end - step·(steps
// - 1 - i) (so both ends are exact), in the dtype for floating outputs and
// in double, truncated, for integral ones. Complex, bool and float16/bfloat16
// outputs take the CPU fallback.
at::Tensor& linspace_out(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  if (steps == 1) return fill_scalar(out, start);
  const c10::ScalarType dtype = out.scalar_type();
  // bool: PyTorch's own error; float16/bfloat16: PyTorch's Half arithmetic
  // (rounding each step) is not reproduced here.
  if (at::isComplexType(dtype) || at::isReducedFloatingType(dtype) || dtype == at::kBool || !hal_dtype_of(dtype)) {
    count_fallback("aten::linspace.out", std::string("dtype ") + c10::toString(dtype));
    return out.copy_(at::linspace(start, end, steps, out.options().device(at::kCPU)));
  }
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  // In double, rounded once to the dtype: PyTorch's CPU kernel fuses the
  // multiply-add (one rounding), which double emulates: float32 and integer
  // outputs match it bit for bit, float64 within one ulp.
  const c10::ScalarType compute = at::kDouble;
  const at::TensorOptions opts = out.options().dtype(compute);
  // start and end as the dtype first (PyTorch's Scalar::to<scalar_t>), then
  // the step in the dtype (double for integral outputs), on the host.
  const at::Tensor s = at::scalar_tensor(start, at::TensorOptions().dtype(dtype));
  const at::Tensor e = at::scalar_tensor(end, at::TensorOptions().dtype(dtype));
  const at::Tensor step_t = integral ? (e.to(at::kDouble) - s.to(at::kDouble)) / static_cast<double>(steps - 1)
                                     : (e - s) / static_cast<double>(steps - 1);
  const at::Scalar step = step_t.to(compute).item();
  const at::Tensor index = at::arange(steps, opts);
  const at::Tensor low = index.mul(step).add(s.to(compute).item());
  const at::Tensor high = at::arange(steps - 1, -1, -1, opts).mul(step).neg().add(e.to(compute).item());
  return out.copy_(at::where(index.lt(steps / 2), low, high));  // integral: truncated by the cast
}

// torch.equal as device ops (eq, all) and one scalar read, with PyTorch's
// CPU checks (one device, one dtype); NaN is unequal to itself, as there.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ",
              self.device(), " and ", other.device());
  TORCH_CHECK(self.dtype() == other.dtype(), "Expected object of scalar type ", self.dtype(), " but got scalar type ",
              other.dtype(), " for argument 'other'");
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("equal", equal);
  m.impl("nonzero", nonzero);
  m.impl("masked_select", masked_select);
  m.impl("addmv", addmv);
  m.impl("addmv.out", addmv_out);
  m.impl("addmv_", addmv_inplace);
  m.impl("linspace.out", linspace_out);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  // Views with CPU/CUDA kernels only (metadata, no bytes move).
  m.impl("unfold", at::native::unfold);
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("zero_", zero);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace
}  // namespace torch_hal
