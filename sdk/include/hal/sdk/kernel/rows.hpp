// HAL C++ SDK, kernel helpers: how normalization and loss ops see a tensor's
// dims as rows, channels and positions (shape arithmetic only: strides and
// memory are the kernel's business). Pure functions of the shape; safe from
// any thread.
#ifndef HAL_SDK_KERNEL_ROWS_HPP_
#define HAL_SDK_KERNEL_ROWS_HPP_

#include <cstddef>
#include <cstdint>

#include "hal/sdk/op_schema.hpp"

namespace hal::sdk::kernel {

// A normalization over trailing dims (layer_norm, rms_norm): M rows of D.
struct Rows {
  int64_t m = 1, d = 1;
};

// INPUT's last NORMALIZED_DIMS dims folded into D, the others into M
// (NORMALIZED_DIMS <= rank; the caller has validated it).
inline Rows split_rows(const Tensor& input, size_t normalized_dims) {
  Rows r;
  int axis = input.rank - static_cast<int>(normalized_dims);
  for (int k = 0; k < input.rank; ++k) (k < axis ? r.m : r.d) *= input.shape[k];
  return r;
}

// A channel-first tensor [N, C, *] (batch_norm, group_norm) as N x C x HW,
// HW the product of the spatial dims (1 when there are none). Rank >= 2.
struct Nchw {
  int64_t n, c, hw;
};
inline Nchw nchw(const Tensor& t) {
  Nchw s{t.shape[0], t.shape[1], 1};
  for (int d = 2; d < t.rank; ++d) s.hw *= t.shape[d];
  return s;
}

// The input of a class-index loss (cross_entropy, nll_loss): [N, C, D...]
// seen as N x C x D (D the product of the trailing dims), or [C] with
// N = D = 1; the target is [N, D...], one class per position.
struct ClassLayout {
  int64_t n = 1, c = 1, d = 1;
  // Target positions: N·D.
  int64_t positions() const { return n * d; }
  // Flat (row-major) index in the input of class K at position P.
  int64_t at(int64_t p, int64_t k) const { return (p / d) * c * d + k * d + p % d; }
};
inline ClassLayout class_layout(const Tensor& input) {
  ClassLayout l;
  if (input.rank == 1) {
    l.c = input.shape[0];
    return l;
  }
  l.n = input.shape[0];
  l.c = input.shape[1];
  for (int k = 2; k < input.rank; ++k) l.d *= input.shape[k];
  return l;
}

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_ROWS_HPP_
