// torch.autocast("hal"): the AutocastPrivateUse1 kernels, with CUDA's op
// lists (PyTorch's AT_FORALL_* lists in ATen/autocast_mode.h, the ones its
// CUDA and XPU registrations use), so code written for CUDA autocast casts
// the same ops the same way on "hal": matmuls and convolutions in the
// autocast dtype, reductions and losses in float32, mixed inputs of the
// promote ops to their widest type. Every other op passes through.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

// In at::autocast, as PyTorch's own registrations: the lists name Tensor,
// ScalarType and IntArrayRef unqualified.
namespace at::autocast {
namespace {

// PyTorch's refusal for CUDA (its own function is not exported), same words.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define HAL_AUTOCAST_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(HAL_AUTOCAST_LOWER_PRECISION_FP)
#define HAL_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(HAL_AUTOCAST_FP32)
#define HAL_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(HAL_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define HAL_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(HAL_AUTOCAST_PROMOTE)
  // As on CUDA: unsafe to autocast (use binary_cross_entropy_with_logits).
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&binary_cross_entropy_banned)));
#undef HAL_AUTOCAST_LOWER_PRECISION_FP
#undef HAL_AUTOCAST_FP32
#undef HAL_AUTOCAST_FP32_SET_OPT_DTYPE
#undef HAL_AUTOCAST_PROMOTE
}

}  // namespace
}  // namespace at::autocast
