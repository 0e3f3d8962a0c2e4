// torch_hal transfers: every byte that moves between host and device or
// inside a device, and every catalog-op launch, goes through here (never
// through host pointers of device memory), so stream ordering has one home.
//
// Everything runs on the device's current stream. On the default stream
// (HAL's synchronous NULL stream) it has completed on return; on a pool
// stream it is queued, and copies touching host memory then wait for the
// stream, as PyTorch's copies with non_blocking=False do (the host memory
// may be a temporary, or the caller's to change once copy_ returns).
#include <ATen/ATen.h>

#include "backend.hpp"

namespace torch_hal {
namespace {
void wait_for_host_copy(c10::DeviceIndex dev, const hal::Stream* stream) {
  if (stream != nullptr) synchronize_stream(current_stream(dev));
}
}  // namespace

void launch(c10::DeviceIndex dev, const std::string& catalog, const std::vector<const hal::TensorView*>& inputs,
            const std::vector<const hal::TensorView*>& outputs, const std::vector<hal::Attr>& attrs) {
  op_runner(dev, catalog).launch(inputs, outputs, attrs, current_hal_stream(dev));
}

at::Tensor download(const at::Tensor& t) {
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU));
  if (t.numel() == 0) return host;
  at::Tensor dense = t;
  if (!t.is_contiguous()) {
    dense = at::empty(t.sizes(), t.options());
    device_copy(t, dense);
  }
  const c10::DeviceIndex dev = t.device().index();
  const hal::Stream* stream = current_hal_stream(dev);
  allocation_of(dense.storage())
      ->buffer.copy_to_host(host.data_ptr(), dense.nbytes(), dense.storage_offset() * dense.element_size(), stream);
  wait_for_host_copy(dev, stream);
  return host;
}

void upload(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.numel() == 0) return;
  at::Tensor staged = src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  at::Tensor dense = dst;
  if (!dst.is_contiguous()) dense = at::empty(dst.sizes(), dst.options());
  const c10::DeviceIndex dev = dst.device().index();
  const hal::Stream* stream = current_hal_stream(dev);
  allocation_of(dense.storage())
      ->buffer.copy_from_host(staged.data_ptr(), staged.nbytes(), dense.storage_offset() * dense.element_size(),
                              stream);
  wait_for_host_copy(dev, stream);
  if (!dense.is_same(dst)) device_copy(dense, dst);
}

void device_copy(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.numel() == 0) return;
  if (src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes() && src.is_contiguous() &&
      dst.is_contiguous()) {
    allocation_of(dst.storage())
        ->buffer.copy_from(allocation_of(src.storage())->buffer, dst.nbytes(),
                           dst.storage_offset() * dst.element_size(), src.storage_offset() * src.element_size(),
                           current_hal_stream(dst.device().index()));
    return;
  }
  const hal::TensorView in = view_of(src), out = view_of(dst);
  try {
    launch(dst.device().index(), "copy", {&in}, {&out});
  } catch (const hal::Error& e) {
    if (e.code() != HAL_STATUS_UNIMPLEMENTED && e.code() != HAL_STATUS_UNSUPPORTED_DTYPE) throw;
    count_fallback("aten::copy_", e.what());
    upload(download(src), dst);
  }
}

}  // namespace torch_hal
