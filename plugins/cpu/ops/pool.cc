// CPU kernels of the "linalg" group, 2-D pooling: max (with indices), average
// and adaptive average, forward and backward. One (N, C) plane per task;
// inputs are read through their strides; float16/bfloat16 compute in float.
// Backward kernels gather a plane in a float (double for float64) buffer and
// write it once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_kernel.hpp"
#include "fused.hpp"
#include "hal/sdk/kernel/matrix.hpp"
#include "linalg_util.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
using sdk::kernel::HostView4;
using sdk::shape_rules::PoolGeometry;

template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Runs F(TypeTag<T>) for the floating storage type of DTYPE.
template <class F>
void for_float(hal_dtype_e dtype, F&& f) {
  sdk::kernel::dispatch_float(dtype, std::forward<F>(f));
}

// F(n, c) for every plane, in parallel once there is enough work (~32K
// window reads per chunk, PyTorch's grain): a small pool on a woken OpenMP
// team cost ~100 µs (the CNN's max_pool2d).
inline int64_t plane_grain(const PoolGeometry& g) {
  const int64_t per_plane = std::max<int64_t>(1, g.out[0] * g.out[1] * g.kernel[0] * g.kernel[1]);
  return std::max<int64_t>(1, 32768 / per_plane);
}
template <class F>
void planes(const PoolGeometry& g, F&& f) {
  parallel_for(g.n * g.c, plane_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) f(t / g.c, t % g.c);
  });
}

// Gathers every (N, C) plane of the backward's output GX: F(n, c, buf) adds
// into BUF, an H x W plane of A zeros (row-major), which then holds the
// plane. BUF is GX's own plane when that is dense and of type A (no copy),
// else one array per parallel chunk, stored into GX after F (converting,
// honouring strides). An allocation per plane cost more than a small
// plane's work.
template <class A, class T, class F>
void gather_planes(const PoolGeometry& g, const HostView4<T>& gx, F&& f) {
  const int64_t h = g.in[0], w = g.in[1];
  const bool direct = std::is_same_v<A, T> && gx.stride[3] == 1 && gx.stride[2] == w;
  parallel_for(g.n * g.c, plane_grain(g), [&](int64_t lo, int64_t hi) {
    std::vector<A> scratch(direct ? 0 : static_cast<size_t>(h * w));
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t n = t / g.c, ch = t % g.c;
      A* buf = scratch.data();
      if constexpr (std::is_same_v<A, T>)
        if (direct) buf = &gx.at(n, ch, 0, 0);
      std::fill(buf, buf + h * w, A(0));
      f(n, ch, buf);
      if (direct) continue;
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) gx.at(n, ch, i, j) = static_cast<T>(buf[i * w + j]);
    }
  });
}

// ---- max --------------------------------------------------------------------------

// The kernel taps inside the input along one dim, per output position:
// [first, last) tap indices. Computed once per call, not per output.
std::vector<std::pair<int64_t, int64_t>> pool_taps(int64_t out, int64_t s, int64_t p, int64_t d, int64_t k,
                                                   int64_t in) {
  std::vector<std::pair<int64_t, int64_t>> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - p;
    const int64_t lo = std::min(k, start >= 0 ? int64_t{0} : (-start + d - 1) / d);
    const int64_t hi = std::min(k, in - 1 - start < 0 ? int64_t{0} : (in - 1 - start) / d + 1);
    taps[static_cast<size_t>(o)] = {lo, std::max(lo, hi)};
  }
  return taps;
}

void max_pool2d_body(const OpCall& c) {
  PoolGeometry g = sdk::shape_rules::pool_geometry(c, 0, true);
  const auto taps_h = pool_taps(g.out[0], g.stride[0], g.padding[0], g.dilation[0], g.kernel[0], g.in[0]);
  const auto taps_w = pool_taps(g.out[1], g.stride[1], g.padding[1], g.dilation[1], g.kernel[1], g.in[1]);
  for_float(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    HostView4<T> x(c.input(0), g.batched, 2), y(c.output(0), g.batched, 2);
    HostView4<int64_t> ind(c.output(1), g.batched, 2);
    // The geometry as locals: the index stores below (int64_t) could alias
    // G's and the views' fields, which the compiler would then reload per tap.
    const int64_t xs_h = x.stride[2], xs_w = x.stride[3], ys_h = y.stride[2], ys_w = y.stride[3];
    const int64_t is_h = ind.stride[2], is_w = ind.stride[3];
    const int64_t out_h = g.out[0], out_w = g.out[1], in_w = g.in[1];
    const int64_t st_h = g.stride[0], st_w = g.stride[1], pad_h = g.padding[0], pad_w = g.padding[1];
    const int64_t dil_h = g.dilation[0], dil_w = g.dilation[1];
    const std::pair<int64_t, int64_t>* th = taps_h.data();
    const std::pair<int64_t, int64_t>* tw = taps_w.data();
    planes(g, [&](int64_t n, int64_t ch) {
      const T* plane = &x.at(n, ch, 0, 0);
      T* yrow = &y.at(n, ch, 0, 0);
      int64_t* irow = &ind.at(n, ch, 0, 0);
      for (int64_t oh = 0; oh < out_h; ++oh, yrow += ys_h, irow += is_h) {
        const int64_t kh0 = th[oh].first, kh1 = th[oh].second;
        const int64_t ih0 = oh * st_h - pad_h;
        for (int64_t ow = 0; ow < out_w; ++ow) {
          const int64_t kw0 = tw[ow].first, kw1 = tw[ow].second;
          const int64_t iw0 = ow * st_w - pad_w;
          // The first tap starts the window (an empty one stays -inf, -1).
          A best = -std::numeric_limits<A>::infinity();
          int64_t arg = -1;
          if (kh0 < kh1 && kw0 < kw1) {
            const int64_t ih = ih0 + kh0 * dil_h, iw = iw0 + kw0 * dil_w;
            best = static_cast<A>(plane[ih * xs_h + iw * xs_w]);
            arg = ih * in_w + iw;
          }
          for (int64_t kh = kh0; kh < kh1; ++kh) {
            const int64_t ih = ih0 + kh * dil_h;
            const T* row = plane + ih * xs_h;
            for (int64_t kw = kw0; kw < kw1; ++kw) {
              const int64_t iw = iw0 + kw * dil_w;
              const A v = static_cast<A>(row[iw * xs_w]);
              // Random data makes "v > best" a coin flip: a max and a cmov, not a
              // branch mispredicted every other tap. A NaN wins (the last one), as
              // PyTorch's: the rare branch (a NaN best stays: v > NaN is false).
              const int64_t idx = ih * in_w + iw;
              arg = v > best ? idx : arg;
              best = v > best ? v : best;
              if (std::isnan(v)) [[unlikely]] {
                best = v;
                arg = idx;
              }
            }
          }
          yrow[ow * ys_w] = static_cast<T>(best);
          irow[ow * is_w] = arg;
        }
      }
    });
  });
}
HAL_CPU_KERNEL(max_pool2d_kernel, max_pool2d_body)

void max_pool2d_backward_body(const OpCall& c) {
  PoolGeometry g = sdk::shape_rules::pool_geometry(c, 1, true);
  const Tensor& indices = c.input(2);
  HostView4<int64_t> ind(indices, g.batched, 2);
  const int64_t plane = g.in[0] * g.in[1];
  // Check every index before writing anything.
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t oh = 0; oh < g.out[0]; ++oh)
        for (int64_t ow = 0; ow < g.out[1]; ++ow) {
          int64_t v = ind.at(n, ch, oh, ow);
          if (v < 0 || v >= plane)
            sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": index ", v, " in 'indices' at position ",
                      ((n * g.c + ch) * g.out[0] + oh) * g.out[1] + ow, " is out of range [0, ", plane, ")");
        }
  for_float(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    HostView4<T> gy(c.input(0), g.batched, 2), gx(c.output(0), g.batched, 2);
    gather_planes<A>(g, gx, [&](int64_t n, int64_t ch, A* buf) {
      for (int64_t oh = 0; oh < g.out[0]; ++oh)
        for (int64_t ow = 0; ow < g.out[1]; ++ow) buf[ind.at(n, ch, oh, ow)] += static_cast<A>(gy.at(n, ch, oh, ow));
    });
  });
}
HAL_CPU_KERNEL(max_pool2d_backward_kernel, max_pool2d_backward_body)

// ---- average ------------------------------------------------------------------------

// One dim of the avg_pool2d windows, per output position: [lo, hi) clipped
// to the input, and the extent counting padding. Computed once per call.
struct Span {
  int64_t lo, hi, padded;
};

std::vector<Span> avg_spans(int64_t out, int64_t s, int64_t p, int64_t k, int64_t in) {
  std::vector<Span> spans(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - p, end = std::min(start + k, in + p);
    spans[static_cast<size_t>(o)] = {std::max<int64_t>(start, 0), std::min(end, in), end - start};
  }
  return spans;
}

// One avg_pool2d window (rows R times columns Q) and its divisor (PyTorch's rule).
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
  bool empty() const { return h0 >= h1 || w0 >= w1; }
};

Window avg_window(const Span& r, const Span& q, bool count_include_pad, int64_t divisor_override) {
  Window w{r.lo, r.hi, q.lo, q.hi, 0};
  w.divisor = divisor_override ? divisor_override
              : count_include_pad ? r.padded * q.padded
                                  : (w.h1 - w.h0) * (w.w1 - w.w0);
  return w;
}

// G, COUNT_INCLUDE_PAD and DIVISOR_OVERRIDE of avg_pool2d(_backward), input INDEX.
template <class Op>
PoolGeometry avg_geometry(const OpCall& c, size_t index, bool& include_pad, int64_t& divisor) {
  include_pad = Op::count_include_pad(c);
  divisor = Op::divisor_override(c);
  return sdk::shape_rules::pool_geometry(c, index, false);
}

void avg_pool2d_body(const OpCall& c) {
  bool include_pad;
  int64_t divisor;
  PoolGeometry g = avg_geometry<op::avg_pool2d>(c, 0, include_pad, divisor);
  const auto rows = avg_spans(g.out[0], g.stride[0], g.padding[0], g.kernel[0], g.in[0]);
  const auto cols = avg_spans(g.out[1], g.stride[1], g.padding[1], g.kernel[1], g.in[1]);
  for_float(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    HostView4<T> x(c.input(0), g.batched, 2), y(c.output(0), g.batched, 2);
    const int64_t xs_h = x.stride[2], xs_w = x.stride[3];
    planes(g, [&](int64_t n, int64_t ch) {
      const T* plane = &x.at(n, ch, 0, 0);
      T* yrow = &y.at(n, ch, 0, 0);
      for (int64_t oh = 0; oh < g.out[0]; ++oh, yrow += y.stride[2]) {
        for (int64_t ow = 0; ow < g.out[1]; ++ow) {
          const Window w = avg_window(rows[static_cast<size_t>(oh)], cols[static_cast<size_t>(ow)], include_pad, divisor);
          A sum = 0;
          for (int64_t ih = w.h0; ih < w.h1; ++ih) {
            const T* row = plane + ih * xs_h;
            for (int64_t iw = w.w0; iw < w.w1; ++iw) sum += static_cast<A>(row[iw * xs_w]);
          }
          yrow[ow * y.stride[3]] = static_cast<T>(w.empty() ? A(0) : sum / static_cast<A>(w.divisor));
        }
      }
    });
  });
}
HAL_CPU_KERNEL(avg_pool2d_kernel, avg_pool2d_body)

void avg_pool2d_backward_body(const OpCall& c) {
  bool include_pad;
  int64_t divisor;
  PoolGeometry g = avg_geometry<op::avg_pool2d_backward>(c, 1, include_pad, divisor);
  const auto rows = avg_spans(g.out[0], g.stride[0], g.padding[0], g.kernel[0], g.in[0]);
  const auto cols = avg_spans(g.out[1], g.stride[1], g.padding[1], g.kernel[1], g.in[1]);
  for_float(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    HostView4<T> gy(c.input(0), g.batched, 2), gx(c.output(0), g.batched, 2);
    gather_planes<A>(g, gx, [&](int64_t n, int64_t ch, A* buf) {
      for (int64_t oh = 0; oh < g.out[0]; ++oh)
        for (int64_t ow = 0; ow < g.out[1]; ++ow) {
          const Window w = avg_window(rows[static_cast<size_t>(oh)], cols[static_cast<size_t>(ow)], include_pad, divisor);
          if (w.empty()) continue;
          A v = static_cast<A>(gy.at(n, ch, oh, ow)) / static_cast<A>(w.divisor);
          for (int64_t ih = w.h0; ih < w.h1; ++ih)
            for (int64_t iw = w.w0; iw < w.w1; ++iw) buf[ih * g.in[1] + iw] += v;
        }
    });
  });
}
HAL_CPU_KERNEL(avg_pool2d_backward_kernel, avg_pool2d_backward_body)

// ---- adaptive average -------------------------------------------------------------

// Output index O of SIZE over an input of IN spans [begin, end).
int64_t adaptive_begin(int64_t o, int64_t size, int64_t in) { return o * in / size; }
int64_t adaptive_end(int64_t o, int64_t size, int64_t in) { return ((o + 1) * in + size - 1) / size; }

void adaptive_avg_pool2d_body(const OpCall& c) {
  PoolGeometry g = sdk::shape_rules::pool_input(c, 0);
  g.out[0] = c.output(0).shape[c.output(0).rank - 2];
  g.out[1] = c.output(0).shape[c.output(0).rank - 1];
  for_float(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    HostView4<T> x(c.input(0), g.batched, 2), y(c.output(0), g.batched, 2);
    planes(g, [&](int64_t n, int64_t ch) {
      for (int64_t oh = 0; oh < g.out[0]; ++oh) {
        int64_t h0 = adaptive_begin(oh, g.out[0], g.in[0]), h1 = adaptive_end(oh, g.out[0], g.in[0]);
        for (int64_t ow = 0; ow < g.out[1]; ++ow) {
          int64_t w0 = adaptive_begin(ow, g.out[1], g.in[1]), w1 = adaptive_end(ow, g.out[1], g.in[1]);
          A sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<A>(x.at(n, ch, ih, iw));
          y.at(n, ch, oh, ow) = static_cast<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
        }
      }
    });
  });
}
HAL_CPU_KERNEL(adaptive_avg_pool2d_kernel, adaptive_avg_pool2d_body)

void adaptive_avg_pool2d_backward_body(const OpCall& c) {
  PoolGeometry g = sdk::shape_rules::pool_input(c, 1);
  const Tensor& go = c.input(0);
  g.out[0] = go.shape[go.rank - 2];
  g.out[1] = go.shape[go.rank - 1];
  for_float(go.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    HostView4<T> gy(go, g.batched, 2), gx(c.output(0), g.batched, 2);
    gather_planes<A>(g, gx, [&](int64_t n, int64_t ch, A* buf) {
      for (int64_t oh = 0; oh < g.out[0]; ++oh) {
        int64_t h0 = adaptive_begin(oh, g.out[0], g.in[0]), h1 = adaptive_end(oh, g.out[0], g.in[0]);
        for (int64_t ow = 0; ow < g.out[1]; ++ow) {
          int64_t w0 = adaptive_begin(ow, g.out[1], g.in[1]), w1 = adaptive_end(ow, g.out[1], g.in[1]);
          A v = static_cast<A>(gy.at(n, ch, oh, ow)) / static_cast<A>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) buf[ih * g.in[1] + iw] += v;
        }
      }
    });
  });
}
HAL_CPU_KERNEL(adaptive_avg_pool2d_backward_kernel, adaptive_avg_pool2d_backward_body)

// The fused max_pool2d step (fused.hpp): values only, any layout; with
// channels innermost in input and output the window reads vectors of
// channels (a channels-last intermediate between convolutions).
class MaxPool2dStep final : public sdk::HostGraphStep {
 public:
  explicit MaxPool2dStep(const OpCall& c) : g_(sdk::shape_rules::pool_geometry(c, 0, true)) {
    if (!g_.batched) sdk::fail(HAL_STATUS_UNIMPLEMENTED, "fused max_pool2d: an unbatched input");
  }

  void run(const Tensor* const* in, const Tensor* const* out) override {
    const Tensor &x = *in[0], &y = *out[0];
    const float* xp = x.ptr<float>();
    float* yp = y.ptr<float>();
    const int64_t C = g_.c;
    const int64_t per_row = std::max<int64_t>(1, g_.out[1] * g_.kernel[0] * g_.kernel[1] * C);
    const bool vector = x.strides[1] == 1 && y.strides[1] == 1;
    parallel_for(g_.n * g_.out[0], std::max<int64_t>(1, 32768 / per_row), [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t n = t / g_.out[0], oh = t % g_.out[0];
        const int64_t ih0 = oh * g_.stride[0] - g_.padding[0];
        for (int64_t ow = 0; ow < g_.out[1]; ++ow) {
          const int64_t iw0 = ow * g_.stride[1] - g_.padding[1];
          float* o = yp + n * y.strides[0] + oh * y.strides[2] + ow * y.strides[3];
          if (vector) window<true>(xp + n * x.strides[0], x, o, 1, ih0, iw0, C);
          else window<false>(xp + n * x.strides[0], x, o, y.strides[1], ih0, iw0, C);
        }
      }
    });
  }

 private:
  // Max over the window at (IH0, IW0) of every channel into O (channel
  // stride OS); NaN wins, as the op's kernel.
  // Channels in blocks kept in a local array: accumulating in O itself
  // (which may alias nothing the compiler can prove) made a load, compare
  // and store per element and channel (~0.45 ms of a 2 ms batch-32 ResNet).
  template <bool Unit>
  void window(const float* plane, const Tensor& x, float* o, int64_t os, int64_t ih0, int64_t iw0, int64_t C) const {
    const int64_t xs = Unit ? 1 : x.strides[1];
    const int64_t step = Unit ? 1 : os;
    constexpr int64_t kBlock = 64;
    for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
      const int64_t cn = std::min(kBlock, C - c0);
      float acc[kBlock];
      for (int64_t c = 0; c < cn; ++c) acc[c] = -std::numeric_limits<float>::infinity();
      for (int64_t kh = 0; kh < g_.kernel[0]; ++kh) {
        const int64_t ih = ih0 + kh * g_.dilation[0];
        if (ih < 0 || ih >= g_.in[0]) continue;
        for (int64_t kw = 0; kw < g_.kernel[1]; ++kw) {
          const int64_t iw = iw0 + kw * g_.dilation[1];
          if (iw < 0 || iw >= g_.in[1]) continue;
          const float* p = plane + ih * x.strides[2] + iw * x.strides[3] + c0 * xs;
          for (int64_t c = 0; c < cn; ++c) {
            const float v = p[c * xs];
            acc[c] = (v > acc[c] || v != v) ? v : acc[c];  // NaN wins
          }
        }
      }
      for (int64_t c = 0; c < cn; ++c) o[(c0 + c) * step] = acc[c];
    }
  }

  PoolGeometry g_;
};

}  // namespace

std::unique_ptr<sdk::HostGraphStep> make_max_pool2d_step(const OpCall& call) {
  return std::make_unique<MaxPool2dStep>(call);
}

void register_pool_ops(sdk::OpRegistry& ops) {
  ops.add<op::max_pool2d>(&max_pool2d_kernel, sdk::kFloatDtypes);
  ops.add<op::max_pool2d_backward>(&max_pool2d_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::avg_pool2d>(&avg_pool2d_kernel, sdk::kFloatDtypes);
  ops.add<op::avg_pool2d_backward>(&avg_pool2d_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::adaptive_avg_pool2d>(&adaptive_avg_pool2d_kernel, sdk::kFloatDtypes);
  ops.add<op::adaptive_avg_pool2d_backward>(&adaptive_avg_pool2d_backward_kernel, sdk::kFloatDtypes);
}

}  // namespace hal::cpu
