// HAL C++ SDK, kernel helpers: views that only rewrite a tensor descriptor
// (shape, strides), never touching memory, so host and device plugins share
// them. Pure functions; safe from any thread.
#ifndef HAL_SDK_KERNEL_VIEW_HPP_
#define HAL_SDK_KERNEL_VIEW_HPP_

#include <cstdint>
#include <vector>

#include "hal/sdk/kernel/wrap.hpp"
#include "hal/sdk/op_schema.hpp"

namespace hal::sdk::kernel {

// T with its dims reordered: dim i of the result is dim DIMS[i] of T
// (negatives counted from the end). DIMS has T.rank entries, each dim once;
// the catalog's permute rule has checked that before a kernel runs.
inline Tensor permuted(const Tensor& t, const std::vector<int64_t>& dims) {
  Tensor v = t;
  for (int i = 0; i < t.rank; ++i) {
    int d = wrap_dim(dims[static_cast<size_t>(i)], t.rank);
    v.shape[i] = t.shape[d];
    v.strides[i] = t.strides[d];
  }
  return v;
}

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_VIEW_HPP_
