// Host-side geometry of batched matrix ops (factorizations, solves): a
// tensor's leading dims are its batch of matrices (the last two dims), and
// an operand broadcast to another's batch is read through per-dim strides.
// Thread-safe (pure functions of the tensors' shapes); nothing is owned.
#ifndef HAL_SDK_KERNEL_BATCH_HPP_
#define HAL_SDK_KERNEL_BATCH_HPP_

#include <cstdint>
#include <vector>

#include "hal/sdk/op_schema.hpp"

namespace hal::sdk::kernel {

// The number of matrices in T (rank >= 2): the product of its leading dims.
inline int64_t matrix_batch(const Tensor& t) {
  int64_t b = 1;
  for (int d = 0; d + 2 < t.rank; ++d) b *= t.shape[d];
  return b;
}

// For a dense row-major T whose batch dims broadcast (NumPy rules) to OUT's:
// per batch dim of OUT, outermost first, the step in matrices of T's matrix
// index, 0 where T broadcasts (a missing or size-1 dim). Matrix b of OUT
// (row-major over OUT's batch dims) is then T's matrix Σ_d idx_d(b)·strides[d].
inline std::vector<int64_t> broadcast_batch_strides(const Tensor& t, const Tensor& out) {
  std::vector<int64_t> strides(static_cast<size_t>(out.rank > 2 ? out.rank - 2 : 0), 0);
  int64_t stride = 1;
  for (int d = out.rank - 3, e = t.rank - 3; d >= 0 && e >= 0; --d, --e) {
    if (t.shape[e] != 1) strides[static_cast<size_t>(d)] = stride;
    stride *= t.shape[e];
  }
  return strides;
}

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_BATCH_HPP_
