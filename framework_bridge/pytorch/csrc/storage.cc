// torch_hal storage ops: set_ onto a storage or another tensor's (torch.load,
// UntypedStorage.copy_ and FSDP's flat parameters use them) and record_stream.
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

// self.set_(source): SOURCE's storage, offset, sizes and strides (FSDP
// swaps its flat parameters' storages this way).
at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage_offset(self, source.storage(), source.sym_storage_offset(), source.sym_sizes(),
                            source.sym_strides());
}

// self.set_(): an empty storage of self's dtype, size [0].
at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, allocator(), /*resizable=*/true);
  return set_storage_offset(self, std::move(empty), 0, c10::SymIntArrayRef({c10::SymInt(0)}), c10::SymIntArrayRef());
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  allocator()->recordStream(self.storage().data_ptr(), stream);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("set_.source_Storage_storage_offset", set_storage_offset);
  m.impl("set_.source_Storage", set_storage);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("set_", set_empty);
  m.impl("record_stream", record_stream);
}

}  // namespace
}  // namespace torch_hal
