// torch_hal storage ops: set_ onto a storage (torch.load and
// UntypedStorage.copy_ build hal tensors this way) and record_stream.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "backend.hpp"

namespace torch_hal {
namespace {

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt sym_offset,
                               c10::SymIntArrayRef sym_size, c10::SymIntArrayRef sym_stride) {
  const int64_t offset = sym_offset.expect_int();
  const c10::IntArrayRef size = C10_AS_INTARRAYREF_SLOW(sym_size);
  const c10::IntArrayRef stride = sym_stride.data() != nullptr ? C10_AS_INTARRAYREF_SLOW(sym_stride) : c10::IntArrayRef();
  at::native::checkSetStorage(self, source, offset, size, stride);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(offset);
  const at::OptionalIntArrayRef stride_opt =
      stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  // Metadata only: the CPU resize would grow the storage with a host memcpy.
  at::native::resize_impl_cpu_(impl, size, stride_opt, /*resize_storage=*/false);
  const size_t needed =
      at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.element_size(), static_cast<size_t>(offset));
  if (self.numel() > 0 && needed > self.storage().nbytes()) resize_storage_bytes(self.storage(), needed);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.element_size());
  return set_storage_offset(self, std::move(source), 0, c10::SymIntArrayRef({c10::SymInt(numel)}),
                            c10::SymIntArrayRef());
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  allocator()->recordStream(self.storage().data_ptr(), stream);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("set_.source_Storage_storage_offset", set_storage_offset);
  m.impl("set_.source_Storage", set_storage);
  m.impl("record_stream", record_stream);
}

}  // namespace
}  // namespace torch_hal
