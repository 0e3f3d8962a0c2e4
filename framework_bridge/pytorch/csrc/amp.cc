// torch_hal: GradScaler's two ops on the "hal" device, as device ops (no
// CPU fallback, no host round trip). PyTorch implements them only for CUDA
// and the CPU; torch.amp.GradScaler("hal") calls them every step.
//   - _amp_foreach_non_finite_check_and_unscale_: each grad *= inv_scale;
//     found_inf = 1 when any grad holds an inf or NaN. x·0 is 0 for every
//     finite x and NaN otherwise, so the sum of g·0 over a grad is 0 exactly
//     when the grad is all finite: one mul and one sum per grad.
//   - _amp_update_scale_: CUDA's rule (backoff on inf; grow after
//     growth_interval clean steps unless scale·growth overflows) as where()s
//     on the 1-element state tensors.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace torch_hal {
namespace {

void check_scaler_tensor(const char* op, const char* name, const at::Tensor& t, c10::ScalarType dtype,
                         const at::Tensor& ref) {
  TORCH_CHECK(t.device() == ref.device(), op, ": ", name, " is on ", t.device(), " but expected ", ref.device());
  TORCH_CHECK(t.numel() == 1, op, ": ", name, " must be a one-element tensor, got ", t.numel(), " elements");
  TORCH_CHECK(t.scalar_type() == dtype, op, ": ", name, " must be a ", c10::toString(dtype), " tensor, got ",
              t.scalar_type());
}

void non_finite_check_and_unscale(at::TensorList grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  constexpr const char* kOp = "_amp_foreach_non_finite_check_and_unscale_";
  check_scaler_tensor(kOp, "found_inf", found_inf, at::kFloat, inv_scale);
  check_scaler_tensor(kOp, "inv_scale", inv_scale, at::kFloat, inv_scale);
  for (const at::Tensor& g : grads) {
    TORCH_CHECK(g.device() == inv_scale.device(), kOp, ": a grad is on ", g.device(), " but inv_scale is on ",
                inv_scale.device());
    TORCH_CHECK(g.layout() == c10::kStrided, kOp, ": a grad has layout ", g.layout(), " (only strided grads)");
    TORCH_CHECK(at::isFloatingType(g.scalar_type()), kOp, ": a grad has dtype ", g.scalar_type(),
                " (only floating grads)");
  }
  if (grads.empty()) return;
  c10::DeviceGuard guard(inv_scale.device());
  at::Tensor probe;  // sum of g·0 over every grad, in float32: 0 iff all finite
  for (const at::Tensor& g : grads) {
    if (g.numel() == 0) continue;
    const at::Tensor s = g.mul(0).sum(at::kFloat);
    probe = probe.defined() ? probe.add(s) : s;
  }
  for (const at::Tensor& g : grads) {
    if (g.numel() == 0) continue;
    at::Tensor gg = g;
    gg.mul_(inv_scale.reshape({}));
  }
  if (!probe.defined()) return;
  const at::Tensor bad = probe.ne(0).to(at::kFloat).reshape(found_inf.sizes());
  found_inf.copy_(at::maximum(found_inf, bad));
}

at::Tensor& update_scale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                         double growth_factor, double backoff_factor, int64_t growth_interval) {
  constexpr const char* kOp = "_amp_update_scale_";
  check_scaler_tensor(kOp, "scale", scale, at::kFloat, scale);
  check_scaler_tensor(kOp, "growth_tracker", growth_tracker, at::kInt, scale);
  check_scaler_tensor(kOp, "found_inf", found_inf, at::kFloat, scale);
  c10::DeviceGuard guard(scale.device());
  const at::Tensor found = found_inf.reshape(scale.sizes()).ne(0);
  const at::Tensor successful = growth_tracker.add(1);
  const at::Tensor grown = scale.mul(growth_factor);
  // Grow only when the grown scale is finite (x - x is 0 only for finite x).
  const at::Tensor reached = successful.eq(growth_interval);
  const at::Tensor grow = reached.logical_and(grown.sub(grown).eq(0));
  const at::Tensor new_scale = at::where(found, scale.mul(backoff_factor), at::where(grow, grown, scale));
  const at::Tensor zero = at::zeros_like(growth_tracker);
  const at::Tensor new_tracker = at::where(found.logical_or(reached), zero, successful);
  scale.copy_(new_scale);
  growth_tracker.copy_(new_tracker);
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", TORCH_FN(non_finite_check_and_unscale));
  m.impl("_amp_update_scale_", TORCH_FN(update_scale));
}

}  // namespace torch_hal
