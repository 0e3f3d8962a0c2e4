// torch_hal sparse COO tensors (the SparsePrivateUse1 key, "Sparsehal"): a
// sparse hal tensor is PyTorch's SparseTensorImpl holding two strided hal
// tensors (indices, values), so its structure ops are PyTorch's
// device-generic ones (as torch-xpu-ops registers them for SparseXPU).
// Any other sparse op runs on the CPU fallback, counted like a dense one:
// the catalog has no sparse ops.
#include <ATen/ATen.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include "mapping.hpp"

namespace torch_hal {
namespace {

// The CPU fallback moves strided tensors only: an op with a sparse hal
// argument gets a clear error instead of a wrong one.
void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  for (const c10::IValue& a : torch::jit::last(*stack, op.schema().arguments().size()))
    TORCH_CHECK_NOT_IMPLEMENTED(!(a.isTensor() && a.toTensor().is_sparse()), "torch_hal: ", op.schema().operator_name(),
                                " has no kernel for sparse hal tensors; use .to_dense() or .cpu() first");
  run_on_cpu(op, stack, "no sparse kernels on hal");
}

// Dense = zeros with the values scatter-added at the indices (duplicates
// sum, as coalescing would): catalog ops, so it stays on the device.
// Row of each nonzero in the sparse dims flattened (row-major).
at::Tensor flat_rows(const at::Tensor& indices, at::IntArrayRef size) {
  at::Tensor row = indices.select(0, 0);
  for (int64_t d = 1; d < indices.size(0); ++d) row = row * size[d] + indices.select(0, d);
  return row;
}

// SELF (strided) at MASK's nonzeros, as a sparse tensor with MASK's indices.
at::Tensor sparse_mask(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(self.sizes() == mask.sizes(), "torch_hal: sparse_mask: self ", self.sizes(), " and mask ", mask.sizes(),
              " differ in shape");
  TORCH_CHECK_NOT_IMPLEMENTED(mask.is_coalesced(), "torch_hal: sparse_mask with an uncoalesced mask on hal");
  const int64_t sparse_dim = mask.sparse_dim();
  const at::Tensor indices = mask._indices();
  std::vector<int64_t> flat{-1};
  flat.insert(flat.end(), self.sizes().begin() + sparse_dim, self.sizes().end());
  at::Tensor values = self.reshape(flat).index_select(0, flat_rows(indices, self.sizes()));
  return at::_sparse_coo_tensor_unsafe(indices, values, self.sizes(), values.options().layout(at::kSparse),
                                       /*is_coalesced=*/true);
}

at::Tensor to_dense(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<bool> /*masked_grad*/) {
  TORCH_CHECK(!dtype.has_value() || *dtype == self.scalar_type(),
              "torch_hal: to_dense with a dtype conversion is not supported for sparse hal tensors");
  const int64_t sparse_dim = self.sparse_dim();
  const at::Tensor indices = self._indices(), values = self._values();
  const at::IntArrayRef size = self.sizes();
  int64_t rows = 1;
  for (int64_t d = 0; d < sparse_dim; ++d) rows *= size[d];
  std::vector<int64_t> flat{rows};
  flat.insert(flat.end(), size.begin() + sparse_dim, size.end());
  at::Tensor dense = at::zeros(flat, values.options());
  if (values.size(0) > 0) {
    const at::Tensor row = flat_rows(indices, size);
    std::vector<int64_t> index_shape(static_cast<size_t>(values.dim()), 1);
    index_shape[0] = values.size(0);
    dense.scatter_add_(0, row.reshape(index_shape).expand(values.sizes()), values);
  }
  return dense.view(size);
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", at::native::new_with_dims_and_tensor_sparse_symint);
  m.impl("empty.memory_format", at::native::empty_sparse_symint);
  m.impl("_indices", at::native::_indices_sparse);
  m.impl("_values", at::native::_values_sparse);
  m.impl("indices", at::native::indices_sparse);
  m.impl("values", at::native::values_sparse);
  m.impl("_nnz", at::native::_nnz_sparse);
  m.impl("sparse_dim", at::native::sparse_dim_sparse);
  m.impl("dense_dim", at::native::dense_dim_sparse);
  m.impl("is_coalesced", at::native::is_coalesced_sparse);
  m.impl("_coalesced_", at::native::_coalesced_sparse_);
  m.impl("copy_", at::native::copy_sparse_wrapper_);
  m.impl("copy_sparse_to_sparse_", at::native::copy_sparse_);
  m.impl("sparse_resize_", at::native::sparse_resize_);
  m.impl("sparse_resize_and_clear_", at::native::sparse_resize_and_clear_);
  m.impl("zero_", at::native::zero_sparse_);
  m.impl("_to_dense", to_dense);
  m.impl("sparse_mask", sparse_mask);  // mask is sparse: this key wins
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

}  // namespace
}  // namespace torch_hal
