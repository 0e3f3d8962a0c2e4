// HAL C++ SDK, kernel helpers: Python-style negative indices wrapped into
// range (dims counted from the end, shifts taken modulo a size). Pure
// functions; safe from any thread.
#ifndef HAL_SDK_KERNEL_WRAP_HPP_
#define HAL_SDK_KERNEL_WRAP_HPP_

#include <algorithm>
#include <cstdint>

namespace hal::sdk::kernel {

// DIM of a rank-RANK tensor with negatives counted from the end (a 0-D
// tensor takes dims -1 and 0, like PyTorch). Does not range-check: the
// catalog's shape rules have validated DIM before a kernel runs.
inline int wrap_dim(int64_t dim, int rank) { return static_cast<int>(dim < 0 ? dim + std::max(rank, 1) : dim); }

// A mod N in [0, N) for any sign of A (C++'s % keeps A's sign). N > 0.
inline int64_t positive_mod(int64_t a, int64_t n) {
  int64_t r = a % n;
  return r < 0 ? r + n : r;
}

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_WRAP_HPP_
