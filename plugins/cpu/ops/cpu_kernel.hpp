// CPU plugin: what every CPU kernel shares — running a validated call on its
// stream, splitting work across threads (OpenMP, the runtime oneDNN uses
// too), and the elementwise map over strided, broadcast operands.
#ifndef HAL_PLUGINS_CPU_OPS_CPU_KERNEL_HPP_
#define HAL_PLUGINS_CPU_OPS_CPU_KERNEL_HPP_

#include <omp.h>

#include <algorithm>
#include <array>
#include <tuple>
#include <memory>
#include <utility>
#include <vector>

#include "hal/sdk/kernel/dispatch.hpp"
#include "hal/sdk/kernel/strided.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::cpu {

using sdk::OpCall;
using sdk::Tensor;
using CallPtr = std::shared_ptr<const OpCall>;

// Runs BODY(call) on STREAM's worker (or now, when STREAM is nullptr). The
// call was validated; BODY throws only for what needs the data (an index out
// of range), before writing any output. Synchronously that is the launch's
// error; on a stream, the stream's next synchronize reports it.
void run_on_stream(const CallPtr& call, sdk::Stream* stream, void (*body)(const OpCall&));

// Defines a KernelFn named NAME whose work is BODY (a function of const OpCall&).
#define HAL_CPU_KERNEL(NAME, BODY) \
  inline void NAME(const ::hal::cpu::CallPtr& call, ::hal::sdk::Stream* stream) { \
    ::hal::cpu::run_on_stream(call, stream, BODY);                             \
  }

// Calls FN(begin, end) over [0, N) split into chunks of at least GRAIN, on
// all cores when N is large enough.
template <class Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n <= grain) {  // the common tiny case asks OpenMP nothing
    fn(int64_t{0}, n);
    return;
  }
  int threads = omp_get_max_threads();
  if (threads <= 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) fn(n * c / chunks, n * (c + 1) / chunks);
}

// A contiguous copy of SRC converted to DTYPE, held by STORAGE.
Tensor cast_contiguous(const Tensor& src, hal_dtype_e dtype, std::vector<unsigned char>& storage);

// SRC converted to DTYPE: SRC itself when it already has that dtype.
inline const Tensor& as_dtype(const Tensor& src, hal_dtype_e dtype, Tensor& tmp,
                              std::vector<unsigned char>& storage) {
  if (src.dtype == dtype) return src;
  tmp = cast_contiguous(src, dtype, storage);
  return tmp;
}

namespace detail {
// Flattened: every call in the body (the op's lambda and what it calls) is
// inlined, so the contiguous loop is one vectorisable body.
template <class OutT, class... InT, class F, size_t... I>
__attribute__((flatten)) void map_run(const sdk::kernel::StridedLoop<sizeof...(InT) + 1>& loop,
             const std::array<char*, sizeof...(InT) + 1>& bases, int64_t b, int64_t e, F& f,
             std::index_sequence<I...>) {
  loop.run(bases, b, e, [&](char* const* p, const int64_t* s, int64_t n) {
    bool contiguous = s[0] == sizeof(OutT) && ((s[I + 1] == sizeof(InT)) && ...);
    OutT* out = reinterpret_cast<OutT*>(p[0]);
    if (contiguous) {
      std::tuple<const InT*...> in{reinterpret_cast<const InT*>(p[I + 1])...};
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<OutT>(f(static_cast<sdk::kernel::compute_t<InT>>(std::get<I>(in)[i])...));
    } else if (s[0] == sizeof(OutT) && ((s[I + 1] == sizeof(InT) || s[I + 1] == 0) && ...)) {
      // Dense but for broadcast scalars (x / c, a tensor and a 0-dim one):
      // each scalar repeated in a chunk-sized buffer, so the chunk's loop is
      // the dense, vectorisable one.
      constexpr int64_t kChunk = 256;
      std::tuple<std::array<InT, kChunk + 0 * I>...> repeated;
      const int64_t filled = std::min(kChunk, n);
      ((s[I + 1] == 0 ? void(std::fill_n(std::get<I>(repeated).data(), filled, *reinterpret_cast<const InT*>(p[I + 1])))
                      : void()),
       ...);
      for (int64_t c = 0; c < n; c += kChunk) {
        const int64_t m = std::min(kChunk, n - c);
        std::tuple<const InT*...> in{(s[I + 1] == 0 ? std::get<I>(repeated).data()
                                                    : reinterpret_cast<const InT*>(p[I + 1]) + c)...};
        OutT* o = out + c;
        for (int64_t i = 0; i < m; ++i)
          o[i] = static_cast<OutT>(f(static_cast<sdk::kernel::compute_t<InT>>(std::get<I>(in)[i])...));
      }
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<OutT*>(p[0] + i * s[0]) =
            static_cast<OutT>(f(static_cast<sdk::kernel::compute_t<InT>>(
                *reinterpret_cast<const InT*>(p[I + 1] + i * s[I + 1]))...));
    }
  });
}
}  // namespace detail

// OUT[i] = F(IN0[i], IN1[i], ...) with the inputs broadcast to OUT's shape.
// Storage types are explicit; F receives the storage values (Half/BFloat16
// convert to float implicitly).
template <class OutT, class... InT, class F>
void map(const Tensor& out, const std::array<const Tensor*, sizeof...(InT)>& ins, F f) {
  std::array<const Tensor*, sizeof...(InT) + 1> ops;
  std::array<char*, sizeof...(InT) + 1> bases;
  ops[0] = &out;
  bases[0] = static_cast<char*>(out.data);
  for (size_t k = 0; k < ins.size(); ++k) {
    ops[k + 1] = ins[k];
    bases[k + 1] = static_cast<char*>(ins[k]->data);
  }
  sdk::kernel::StridedLoop<sizeof...(InT) + 1> loop(out, ops, sdk::kernel::LoopOrder::kMemory);
  parallel_for(loop.numel(), 32768, [&](int64_t b, int64_t e) {
    detail::map_run<OutT, InT...>(loop, bases, b, e, f, std::index_sequence_for<InT...>{});
  });
}

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_OPS_CPU_KERNEL_HPP_
