// HAL C++ SDK, kernel helpers: walking N strided operands over one shape
// (broadcasting, non-contiguous views), for host-accessible memory.
//
//   StridedLoop<2> loop(out, {&out, &in});        // out's shape, in broadcast
//   loop.run({out.data, in.data}, 0, loop.numel(),
//            [&](char* const* p, const int64_t* step, int64_t n) { ... });
//
// Dims of size 1 are dropped and contiguous dims merged, so a contiguous
// tensor is one run of numel elements. Runs never cross the innermost dim;
// RUN(begin, end) may start anywhere, so ranges can be split across threads.
// Linear indices follow the logical (row-major) order of the shape, unless
// the loop is built with LoopOrder::kMemory: then dims are walked in the
// first operand's memory order (largest stride outermost), so operands
// dense in the same permuted order (channels-last) are one contiguous run
// too. Only loops whose body does not depend on the visiting order
// (elementwise maps, copies) may ask for that.
#ifndef HAL_SDK_KERNEL_STRIDED_HPP_
#define HAL_SDK_KERNEL_STRIDED_HPP_

#include <array>
#include <cstdint>
#include <utility>

#include "hal/sdk/op_schema.hpp"

namespace hal::sdk::kernel {

// Byte strides of T seen through SHAPE (rank RANK >= T.rank): dims T lacks or
// broadcasts (size 1 against a larger size) get stride 0.
inline void broadcast_byte_strides(const Tensor& t, int rank, const int64_t* shape, int64_t* out) {
  int offset = rank - t.rank;
  for (int d = 0; d < rank; ++d) {
    int td = d - offset;
    out[d] = (td < 0 || (t.shape[td] == 1 && shape[d] != 1)) ? 0
                                                             : t.strides[td] * static_cast<int64_t>(t.element_size());
  }
}

enum class LoopOrder { kLogical, kMemory };

template <size_t N>
class StridedLoop {
 public:
  // SHAPE_OF gives the iteration shape; every operand is broadcast to it.
  StridedLoop(const TensorMeta& shape_of, const std::array<const Tensor*, N>& operands,
              LoopOrder order = LoopOrder::kLogical) {
    int64_t full[N][HAL_TENSOR_MAX_RANK];
    for (size_t k = 0; k < N; ++k) broadcast_byte_strides(*operands[k], shape_of.rank, shape_of.shape, full[k]);
    if (order == LoopOrder::kMemory && shape_of.rank > 1) {
      // Stable sort of the dims by the first operand's stride, largest first.
      int perm[HAL_TENSOR_MAX_RANK];
      for (int d = 0; d < shape_of.rank; ++d) perm[d] = d;
      for (int i = 1; i < shape_of.rank; ++i)
        for (int j = i; j > 0 && full[0][perm[j]] > full[0][perm[j - 1]]; --j) std::swap(perm[j], perm[j - 1]);
      int64_t shape[HAL_TENSOR_MAX_RANK], sorted[N][HAL_TENSOR_MAX_RANK];
      for (int d = 0; d < shape_of.rank; ++d) {
        shape[d] = shape_of.shape[perm[d]];
        for (size_t k = 0; k < N; ++k) sorted[k][d] = full[k][perm[d]];
      }
      init(shape_of.rank, shape, sorted);
      return;
    }
    init(shape_of.rank, shape_of.shape, full);
  }
  StridedLoop(int rank, const int64_t* shape, const int64_t (*byte_strides)[HAL_TENSOR_MAX_RANK]) {
    init(rank, shape, byte_strides);
  }

  int64_t numel() const { return numel_; }
  int rank() const { return rank_; }
  // The merged iteration geometry (what a device kernel indexes with):
  // size of dim D < rank(), and operand K's byte stride along it.
  int64_t size(int d) const { return shape_[d]; }
  int64_t byte_stride(size_t k, int d) const { return strides_[k][d]; }
  // Innermost byte stride of operand K.
  int64_t inner_stride(size_t k) const { return rank_ == 0 ? 0 : strides_[k][rank_ - 1]; }

  // Calls LOOP(ptrs, inner_byte_strides, n) for each run of linear indices
  // in [BEGIN, END).
  template <class Loop>
  void run(const std::array<char*, N>& bases, int64_t begin, int64_t end, Loop&& loop) const {
    if (begin >= end) return;
    if (rank_ == 0) {
      loop(bases.data(), inner_, end - begin);
      return;
    }
    int64_t idx[HAL_TENSOR_MAX_RANK];
    int64_t rest = begin;
    for (int d = rank_ - 1; d >= 0; --d) {
      idx[d] = rest % shape_[d];
      rest /= shape_[d];
    }
    std::array<char*, N> ptrs;
    const int inner_dim = rank_ - 1;
    while (begin < end) {
      for (size_t k = 0; k < N; ++k) {
        char* p = bases[k];
        for (int d = 0; d < rank_; ++d) p += idx[d] * strides_[k][d];
        ptrs[k] = p;
      }
      int64_t n = shape_[inner_dim] - idx[inner_dim];
      if (n > end - begin) n = end - begin;
      loop(ptrs.data(), inner_, n);
      begin += n;
      idx[inner_dim] += n;
      for (int d = inner_dim; d > 0 && idx[d] == shape_[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  }

 private:
  void init(int rank, const int64_t* shape, const int64_t (*strides)[HAL_TENSOR_MAX_RANK]) {
    numel_ = 1;
    for (int d = 0; d < rank; ++d) numel_ *= shape[d];
    rank_ = 0;
    for (int d = 0; d < rank; ++d) {
      if (shape[d] == 1) continue;
      // Merge into the previous kept dim when every operand is contiguous
      // across the two.
      bool merge = rank_ > 0;
      for (size_t k = 0; k < N && merge; ++k) merge = strides_[k][rank_ - 1] == strides[k][d] * shape[d];
      if (merge) {
        shape_[rank_ - 1] *= shape[d];
        for (size_t k = 0; k < N; ++k) strides_[k][rank_ - 1] = strides[k][d];
        continue;
      }
      shape_[rank_] = shape[d];
      for (size_t k = 0; k < N; ++k) strides_[k][rank_] = strides[k][d];
      ++rank_;
    }
    if (numel_ == 0) rank_ = 0;
    for (size_t k = 0; k < N; ++k) inner_[k] = rank_ == 0 ? 0 : strides_[k][rank_ - 1];
  }

  int rank_ = 0;
  int64_t numel_ = 1;
  int64_t shape_[HAL_TENSOR_MAX_RANK] = {};
  int64_t strides_[N][HAL_TENSOR_MAX_RANK] = {};
  int64_t inner_[N] = {};
};

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_STRIDED_HPP_
