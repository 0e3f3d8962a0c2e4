// CPU plugin: runs a reducer over a ReduceIter on all cores. A reducer R is
//
//   struct R {
//     using In = ...;   // storage type read
//     using Acc = ...;  // partial result, default-constructible
//     Acc init() const;
//     void step(Acc&, compute_t<In> x, int64_t pos) const;   // one element at reduced position POS
//     void merge(Acc& a, const Acc& later) const;            // LATER covers later positions
//     void run(Acc&, const In* p, int64_t n, int64_t pos0) const;  // a contiguous run
//     void write(const Acc&, int64_t count, const int64_t* out_off) const;
//   };
//
// Three schedules: many outputs with contiguous runs (threads over outputs),
// a reduction over outer dims of a contiguous inner dim ("columns": a tile of
// accumulators updated by vectorisable row steps), and few outputs (each
// output's reduction split across threads, partials merged in order).
#ifndef HAL_PLUGINS_CPU_OPS_REDUCTION_DRIVER_HPP_
#define HAL_PLUGINS_CPU_OPS_REDUCTION_DRIVER_HPP_

#include <algorithm>
#include <vector>

#include "cpu_kernel.hpp"
#include "hal/sdk/kernel/reduce.hpp"

namespace hal::cpu {

template <class R>
void reduce_with(const sdk::kernel::ReduceIter& it, const typename R::In* in, const R& r) {
  using Acc = typename R::Acc;
  const int64_t outs = it.out_numel(), n = it.red_numel();
  if (outs == 0) return;
  auto accumulate = [&](Acc& acc, const typename R::In* base, int64_t b, int64_t e) {
    it.for_runs(b, e, [&](int64_t off, int64_t stride, int64_t len, int64_t pos) {
      const typename R::In* p = base + off;
      if (stride == 1) {
        r.run(acc, p, len, pos);
      } else {
        for (int64_t k = 0; k < len; ++k) r.step(acc, p[k * stride], pos + k);
      }
    });
  };
  const int threads = omp_get_max_threads();
  constexpr int64_t kSplitMin = 32768;  // elements per thread worth a split

  if (outs < threads && n >= 2 * kSplitMin) {
    int64_t chunks = std::min<int64_t>(threads, n / kSplitMin);
    std::vector<Acc> part(static_cast<size_t>(chunks));
    for (int64_t o = 0; o < outs; ++o) {
      int64_t in_off = 0, out_off[sdk::kernel::kMaxReduceOutputs] = {};
      it.offsets(o, in_off, out_off);
      parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
        for (int64_t c = cb; c < ce; ++c) {
          Acc acc = r.init();
          accumulate(acc, in + in_off, n * c / chunks, n * (c + 1) / chunks);
          part[static_cast<size_t>(c)] = acc;
        }
      });
      Acc acc = part[0];
      for (int64_t c = 1; c < chunks; ++c) r.merge(acc, part[static_cast<size_t>(c)]);
      r.write(acc, n, out_off);
    }
    return;
  }

  const int64_t width = it.kept_inner_size();
  if (it.kept_rank() > 0 && it.kept_inner_in_stride() == 1 && it.red_rank() > 0 && it.red_inner_stride() != 1 &&
      width >= 8) {
    constexpr int64_t kTile = 64;
    const int64_t tiles = (width + kTile - 1) / kTile, rows = outs / width;
    const int64_t os0 = it.kept_inner_out_stride(0), os1 = it.kept_inner_out_stride(1);
    parallel_for(rows * tiles, std::max<int64_t>(1, 65536 / std::max<int64_t>(n * kTile, 1)), [&](int64_t b, int64_t e) {
      Acc acc[kTile];
      for (int64_t w = b; w < e; ++w) {
        const int64_t j0 = (w % tiles) * kTile, m = std::min(kTile, width - j0);
        int64_t in_off = 0, out_off[sdk::kernel::kMaxReduceOutputs] = {};
        it.offsets((w / tiles) * width + j0, in_off, out_off);
        for (int64_t j = 0; j < m; ++j) acc[j] = r.init();
        const typename R::In* base = in + in_off;
        it.for_runs(0, n, [&](int64_t off, int64_t stride, int64_t len, int64_t pos) {
          for (int64_t k = 0; k < len; ++k) {
            const typename R::In* row = base + off + k * stride;
            for (int64_t j = 0; j < m; ++j) r.step(acc[j], row[j], pos + k);
          }
        });
        for (int64_t j = 0; j < m; ++j) {
          int64_t oo[sdk::kernel::kMaxReduceOutputs] = {out_off[0] + j * os0, out_off[1] + j * os1};
          r.write(acc[j], n, oo);
        }
      }
    });
    return;
  }

  parallel_for(outs, std::max<int64_t>(1, 32768 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int64_t in_off = 0, out_off[sdk::kernel::kMaxReduceOutputs] = {};
      it.offsets(o, in_off, out_off);
      Acc acc = r.init();
      accumulate(acc, in + in_off, 0, n);
      r.write(acc, n, out_off);
    }
  });
}

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_OPS_REDUCTION_DRIVER_HPP_
