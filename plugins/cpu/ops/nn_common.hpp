// CPU plugin, "nn" group: what the softmax, normalization and loss kernels
// share — contiguous views of operands, outputs computed contiguously and
// copied to strided destinations, a vectorisable exp, and lane-parallel sums
// the compiler turns into SIMD without -ffast-math.
#ifndef HAL_PLUGINS_CPU_OPS_NN_COMMON_HPP_
#define HAL_PLUGINS_CPU_OPS_NN_COMMON_HPP_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_kernel.hpp"
#include "vector_math.hpp"

namespace hal::cpu::nn {

// Hot helpers are force-inlined into the row loops so those vectorise
// whole (a call per element would not).
#define HAL_NN_INLINE inline __attribute__((always_inline))

using sdk::kernel::BFloat16;
using sdk::kernel::Half;

// Accumulation type: float for float/float16/bfloat16, double for float64.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// SRC itself when contiguous, else a contiguous copy held by STORAGE.
inline const Tensor& contiguous(const Tensor& src, Tensor& tmp, std::vector<unsigned char>& storage) {
  if (src.is_contiguous()) return src;
  tmp = cast_contiguous(src, src.dtype, storage);
  return tmp;
}

// An input made contiguous (or absent).
struct In {
  const Tensor* t = nullptr;
  Tensor tmp;
  std::vector<unsigned char> storage;
  In() = default;
  explicit In(const Tensor* src) { reset(src); }
  In(const In&) = delete;
  In& operator=(const In&) = delete;
  void reset(const Tensor* src) { t = src == nullptr ? nullptr : &contiguous(*src, tmp, storage); }
  template <class T> const T* ptr() const { return t == nullptr ? nullptr : static_cast<const T*>(t->data); }
};

// An output written contiguously: in place when the destination is
// contiguous, else into a scratch copy that commit() scatters.
class Out {
 public:
  explicit Out(const Tensor& dst) : dst_(dst) {
    if (dst.is_contiguous()) {
      data_ = dst.data;
    } else {
      storage_.assign(static_cast<size_t>(dst.numel()) * dst.element_size() + 1, 0);
      data_ = storage_.data();
    }
  }
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;
  template <class T> T* ptr() const { return static_cast<T*>(data_); }
  void commit() const {
    if (data_ == dst_.data || dst_.numel() == 0) return;
    Tensor src = dst_;
    src.set_contiguous_strides();
    src.data = data_;
    sdk::kernel::dispatch_float(dst_.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      map<T, T>(dst_, {&src}, [](auto x) { return x; });
    });
  }

 private:
  const Tensor& dst_;
  void* data_ = nullptr;
  std::vector<unsigned char> storage_;
};

// A contiguous copy of SRC broadcast to SHAPE_OF's shape (an absent SRC
// gives an empty vector). Values converted to A.
template <class T, class A>
std::vector<A> expand(const Tensor* src, const Tensor& shape_of) {
  if (src == nullptr) return {};
  std::vector<A> out(static_cast<size_t>(shape_of.numel()));
  Tensor dst = shape_of;
  dst.dtype = sdk::kernel::dtype_of<A>();
  dst.set_contiguous_strides();
  dst.data = out.data();
  map<A, T>(dst, {src}, [](auto x) { return static_cast<A>(x); });
  return out;
}

// Values of an input, row-major, as A (absent: empty).
template <class T, class A>
std::vector<A> load_vector(const Tensor* src) {
  if (src == nullptr) return {};
  Tensor tmp;
  std::vector<unsigned char> storage;
  const Tensor& c = contiguous(*src, tmp, storage);
  const T* p = static_cast<const T*>(c.data);
  std::vector<A> out(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<A>(p[i]);
  return out;
}

// ---- vectorisable maths (per element; loops over these auto-vectorise) -------

// e^x, vectorisable (vector_math.hpp); float64 keeps libm.
HAL_NN_INLINE float exp_f(float x) { return vmath::exp(x); }
HAL_NN_INLINE double exp_f(double x) { return std::exp(x); }

// Lane-parallel reductions: kLanes independent accumulators, combined at
// the end (the order differs from a serial sum, as in any SIMD library).
inline constexpr int kLanes = 16;

template <class A, class F>
HAL_NN_INLINE A lane_sum(int64_t n, F f) {
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += f(i + j);
  A tail = 0;
  for (; i < n; ++i) tail += f(i);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0] + tail;
}

template <class A>
HAL_NN_INLINE A lane_max(const A* x, int64_t n) {
  A acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = -std::numeric_limits<A>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  A m = -std::numeric_limits<A>::infinity();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int j = 0; j < kLanes; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

// Splits [0, N) into at most one chunk per thread and calls
// FN(chunk, begin, end) for each, in parallel; returns the chunk count
// (for per-chunk partial results).
template <class Fn>
int64_t parallel_chunks(int64_t n, int64_t grain, Fn&& fn) {
  int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), (n + grain - 1) / std::max<int64_t>(grain, 1)));
  if (n <= 0) return 0;
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) fn(c, n * c / chunks, n * (c + 1) / chunks);
  });
  return chunks;
}

// Dispatch over the float storage types with the kernel body instantiated
// only for them.
template <class F>
void dispatch(uint32_t dtype, F&& f) {
  sdk::kernel::dispatch_float(dtype, std::forward<F>(f));
}

// The group's other registration functions (norm.cc, loss.cc).
void register_norm_ops(sdk::OpRegistry& ops);
void register_loss_ops(sdk::OpRegistry& ops);

}  // namespace hal::cpu::nn

#endif  // HAL_PLUGINS_CPU_OPS_NN_COMMON_HPP_
