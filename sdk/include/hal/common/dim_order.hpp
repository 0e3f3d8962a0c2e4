// Dim orders (hal/op.h, LAYOUTS; ABI 1.8): a tensor's dims from outermost
// (largest stride) to innermost (stride 1). Row-major is 0, 1, ..., rank-1;
// channels-last of [N, C, H, W] is 0, 2, 3, 1. Shared by libhal (which lays
// out its temporaries so) and the SDK (whose plugins state and read them).
// Header-only, pure functions; thread-safe.
#ifndef HAL_COMMON_DIM_ORDER_HPP_
#define HAL_COMMON_DIM_ORDER_HPP_

#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

namespace hal::common {

using DimOrder = std::vector<int>;

// True when ORDER holds each of 0..RANK-1 exactly once.
inline bool is_dim_order(const DimOrder& order, size_t rank) {
  if (order.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int d : order) {
    if (d < 0 || static_cast<size_t>(d) >= rank || seen[static_cast<size_t>(d)]) return false;
    seen[static_cast<size_t>(d)] = true;
  }
  return true;
}

inline bool is_row_major_order(const DimOrder& order) {
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int>(i)) return false;
  return true;
}

// Strides (in elements) of a tensor of SHAPE dense in ORDER (a dim order of
// SHAPE's rank; an empty ORDER is row-major).
inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape, const DimOrder& order) {
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    const size_t d = order.empty() ? i : static_cast<size_t>(order[i]);
    strides[d] = stride;
    stride *= shape[d] > 0 ? shape[d] : 1;
  }
  return strides;
}

// The order in which a tensor of SHAPE with STRIDES (RANK entries each) is
// dense (no gaps, no overlap), or nullopt when it is dense in none. Dims of
// size 1 have no stride that matters: each goes just before the first
// larger dim of higher index, so a tensor whose dims > 1 are in row-major
// order reads as row-major. Equal strides keep row-major order; an empty
// tensor is row-major.
inline std::optional<DimOrder> dense_order(const int64_t* shape, const int64_t* strides, int rank) {
  DimOrder big, order;  // BIG: dims of size > 1, largest stride first
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 0) {
      order.resize(static_cast<size_t>(rank));
      std::iota(order.begin(), order.end(), 0);
      return order;
    }
    if (shape[d] != 1) big.push_back(d);
  }
  for (size_t i = 1; i < big.size(); ++i)  // insertion sort: stable, rank <= 8
    for (size_t j = i; j > 0 && strides[big[j]] > strides[big[j - 1]]; --j) std::swap(big[j], big[j - 1]);
  int64_t expect = 1;
  for (size_t i = big.size(); i-- > 0;) {
    if (strides[big[i]] != expect) return std::nullopt;
    expect *= shape[big[i]];
  }
  int ones = 0;  // next size-1 dim to place
  auto place_ones_below = [&](int limit) {
    for (; ones < limit; ++ones)
      if (shape[ones] == 1) order.push_back(ones);
  };
  for (int b : big) {
    place_ones_below(b);
    order.push_back(b);
  }
  place_ones_below(rank);
  return order;
}

}  // namespace hal::common

#endif  // HAL_COMMON_DIM_ORDER_HPP_
