// torch_hal storage ops: set_ onto a storage or another tensor's (torch.load,
// UntypedStorage.copy_ and FSDP's flat parameters use them), record_stream,
// and storages that share another tensor's allocation (DLPack import).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include "backend.hpp"

namespace torch_hal {

void release_shared_allocation(void* ctx) {
  std::unique_ptr<SharedAllocation> shared(static_cast<SharedAllocation*>(ctx));
  if (shared->release) shared->release();
}

at::Tensor tensor_sharing(const void* data, uint64_t byte_offset, c10::DeviceIndex device, c10::IntArrayRef sizes,
                          std::optional<c10::IntArrayRef> strides, c10::ScalarType dtype, std::function<void()> release) {
  const auto [a, offset] = allocation_at(data);
  TORCH_CHECK(a != nullptr, "torch_hal: the data pointer ", data, " (device hal:", int(device),
              ") is not memory of a live hal tensor: only memory a hal tensor owns (as exported by "
              "torch.utils.dlpack.to_dlpack or Tensor.__dlpack__) can be shared as a hal tensor");
  TORCH_CHECK(a->device == device, "torch_hal: the data pointer ", data, " is memory of hal:", int(a->device),
              ", but the capsule names hal:", int(device));
  const auto itemsize = static_cast<int64_t>(c10::elementSize(dtype));
  TORCH_CHECK(!strides || strides->size() == sizes.size(), "torch_hal: ", sizes.size(), " sizes but ",
              strides->size(), " strides");
  c10::DimVector dense;
  if (!strides) {
    dense = c10::contiguous_strides(sizes);
    strides = c10::IntArrayRef(dense);
  }
  const uint64_t begin = offset + byte_offset;  // from the allocation's first byte
  TORCH_CHECK(begin % static_cast<uint64_t>(itemsize) == 0, "torch_hal: the view starts at byte ", begin,
              " of its hal allocation, not a multiple of the ", c10::toString(dtype), " element size ", itemsize);
  int64_t numel = 1, last = static_cast<int64_t>(begin) / itemsize;
  for (size_t d = 0; d < sizes.size(); ++d) {
    TORCH_CHECK(sizes[d] >= 0, "torch_hal: size ", sizes[d], " of dimension ", d, " is negative (sizes ", sizes, ")");
    TORCH_CHECK((*strides)[d] >= 0, "torch_hal: stride ", (*strides)[d], " of dimension ", d,
                " is negative (strides ", *strides, "): hal tensors, as PyTorch's, have no negative strides");
    numel *= sizes[d];
    if (sizes[d] > 0) last += (sizes[d] - 1) * (*strides)[d];
  }
  if (numel > 0) {
    const uint64_t end = static_cast<uint64_t>(last + 1) * static_cast<uint64_t>(itemsize);
    TORCH_CHECK(end <= a->nbytes, "torch_hal: a view of sizes ", sizes, " and strides ", *strides, " starting at byte ",
                begin, " reaches byte ", end, " of a hal allocation of ", a->nbytes, " bytes");
  }
  auto* ctx = new SharedAllocation{a, std::move(release)};
  c10::DataPtr p(reinterpret_cast<void*>(a->token), ctx, &release_shared_allocation,
                 c10::Device(c10::DeviceType::PrivateUse1, a->device));
  // Not resizable: growing it would move the bytes away from the owner's.
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), a->nbytes, std::move(p),
                                                       allocator(), /*resizable=*/false);
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, *strides, static_cast<int64_t>(begin) / itemsize);
  return t;
}
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
