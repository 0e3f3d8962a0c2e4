// HAL C++ SDK, kernel helpers: the geometry of reducing a strided tensor over
// a set of dims, for host-accessible memory.
//
//   ReduceIter it(in, mask, {&out});            // out: keepdim or not
//   for (int64_t o = 0; o < it.out_numel(); ++o) {
//     int64_t in_off, out_off[kMaxReduceOutputs];
//     it.offsets(o, in_off, out_off);
//     it.for_runs(0, it.red_numel(), [&](int64_t off, int64_t stride, int64_t n, int64_t idx0) {
//       // elements in[in_off + off + k * stride], k < n, at reduced positions idx0 + k
//     });
//   }
//
// Offsets and strides count elements. Outputs are numbered row-major over
// the kept dims; reduced elements are visited row-major over the reduced
// dims, and a run's IDX0 is its first element's flat position among them
// (what argmax reports). Size-1 dims are dropped and dims merged where the
// strides allow, so a contiguous last-dim reduction is one run per output.
// for_runs may start anywhere, so one reduction can be split across threads.
#ifndef HAL_SDK_KERNEL_REDUCE_HPP_
#define HAL_SDK_KERNEL_REDUCE_HPP_

#include <cstdint>
#include <initializer_list>

#include "hal/sdk/op_schema.hpp"

namespace hal::sdk::kernel {

inline constexpr int kMaxReduceOutputs = 2;

class ReduceIter {
 public:
  // Reduces IN over the dims set in MASK (bit d = dim d). Each of OUTS has
  // IN's shape without those dims, or with them as 1 (keepdim).
  ReduceIter(const Tensor& in, uint32_t mask, std::initializer_list<const Tensor*> outs) {
    n_outs_ = static_cast<int>(outs.size());
    int64_t out_full[kMaxReduceOutputs][HAL_TENSOR_MAX_RANK] = {};
    int k = 0;
    for (const Tensor* o : outs) {
      bool keepdim = o->rank == in.rank;
      int od = 0;
      for (int d = 0; d < in.rank; ++d) {
        bool reduced = (mask >> d) & 1u;
        out_full[k][d] = reduced ? 0 : o->strides[od];
        if (!reduced || keepdim) ++od;
      }
      ++k;
    }
    for (int d = 0; d < in.rank; ++d) {
      int64_t size = in.shape[d];
      if ((mask >> d) & 1u) {
        red_numel_ *= size;
        if (size == 1) continue;
        if (red_rank_ > 0 && red_stride_[red_rank_ - 1] == in.strides[d] * size) {
          red_shape_[red_rank_ - 1] *= size;
          red_stride_[red_rank_ - 1] = in.strides[d];
          continue;
        }
        red_shape_[red_rank_] = size;
        red_stride_[red_rank_++] = in.strides[d];
      } else {
        out_numel_ *= size;
        if (size == 1) continue;
        bool merge = kept_rank_ > 0 && kept_in_[kept_rank_ - 1] == in.strides[d] * size;
        for (int j = 0; j < n_outs_ && merge; ++j) merge = kept_out_[j][kept_rank_ - 1] == out_full[j][d] * size;
        int at = merge ? kept_rank_ - 1 : kept_rank_++;
        kept_shape_[at] = merge ? kept_shape_[at] * size : size;
        kept_in_[at] = in.strides[d];
        for (int j = 0; j < n_outs_; ++j) kept_out_[j][at] = out_full[j][d];
      }
    }
  }

  int64_t out_numel() const { return out_numel_; }
  int64_t red_numel() const { return red_numel_; }
  int kept_rank() const { return kept_rank_; }
  int red_rank() const { return red_rank_; }
  // Size and strides of the innermost kept dim (after merging); 1/0 when none.
  int64_t kept_inner_size() const { return kept_rank_ ? kept_shape_[kept_rank_ - 1] : 1; }
  int64_t kept_inner_in_stride() const { return kept_rank_ ? kept_in_[kept_rank_ - 1] : 0; }
  int64_t kept_inner_out_stride(int k) const { return kept_rank_ ? kept_out_[k][kept_rank_ - 1] : 0; }
  // Input stride of the innermost reduced dim (0 when nothing is reduced).
  int64_t red_inner_stride() const { return red_rank_ ? red_stride_[red_rank_ - 1] : 0; }

  // Every merged dim (device kernels take the geometry as arguments): kept
  // dim D < kept_rank() (outermost first) with its input and output-K
  // strides; reduced dim D < red_rank() with its input stride.
  int64_t kept_size(int d) const { return kept_shape_[d]; }
  int64_t kept_in_stride(int d) const { return kept_in_[d]; }
  int64_t kept_out_stride(int k, int d) const { return kept_out_[k][d]; }
  int64_t red_size(int d) const { return red_shape_[d]; }
  int64_t red_stride(int d) const { return red_stride_[d]; }

  // Input offset of output O's first reduced element, and O's offset in each output.
  void offsets(int64_t o, int64_t& in_off, int64_t* out_off) const {
    in_off = 0;
    for (int k = 0; k < n_outs_; ++k) out_off[k] = 0;
    for (int d = kept_rank_ - 1; d >= 0; --d) {
      int64_t i = o % kept_shape_[d];
      o /= kept_shape_[d];
      in_off += i * kept_in_[d];
      for (int k = 0; k < n_outs_; ++k) out_off[k] += i * kept_out_[k][d];
    }
  }

  // Calls RUN(offset, stride, n, idx0) for the reduced positions [BEGIN, END).
  template <class Run>
  void for_runs(int64_t begin, int64_t end, Run&& run) const {
    if (begin >= end) return;
    if (red_rank_ == 0) {
      run(int64_t{0}, int64_t{0}, end - begin, begin);
      return;
    }
    int64_t idx[HAL_TENSOR_MAX_RANK];
    int64_t rest = begin;
    for (int d = red_rank_ - 1; d >= 0; --d) {
      idx[d] = rest % red_shape_[d];
      rest /= red_shape_[d];
    }
    const int inner = red_rank_ - 1;
    while (begin < end) {
      int64_t off = 0;
      for (int d = 0; d < red_rank_; ++d) off += idx[d] * red_stride_[d];
      int64_t n = red_shape_[inner] - idx[inner];
      if (n > end - begin) n = end - begin;
      run(off, red_stride_[inner], n, begin);
      begin += n;
      idx[inner] += n;
      for (int d = inner; d > 0 && idx[d] == red_shape_[d]; --d) {
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  }

 private:
  int n_outs_ = 0;
  int64_t out_numel_ = 1, red_numel_ = 1;
  int kept_rank_ = 0, red_rank_ = 0;
  int64_t kept_shape_[HAL_TENSOR_MAX_RANK] = {}, kept_in_[HAL_TENSOR_MAX_RANK] = {};
  int64_t kept_out_[kMaxReduceOutputs][HAL_TENSOR_MAX_RANK] = {};
  int64_t red_shape_[HAL_TENSOR_MAX_RANK] = {}, red_stride_[HAL_TENSOR_MAX_RANK] = {};
};

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_REDUCE_HPP_
