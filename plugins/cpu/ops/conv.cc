// CPU kernels of the "linalg" group, convolution: conv1d/conv2d, their
// backward and conv_transpose2d. float32 runs on oneDNN (conv1d as a conv2d
// with H = 1); its primitives pick their own blocked layouts, so each call
// reorders from/to the caller's strided tensors (as PyTorch's eager mkldnn
// path does); primitives and reorders are cached by shape, strides and
// attributes. float16/bfloat16 are staged through float32. float64 (and
// zero-size shapes, which oneDNN refuses) use direct loops.
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_kernel.hpp"
#include "fused.hpp"
#include "hal/common/dim_order.hpp"
#include "hal/sdk/kernel/matrix.hpp"
#include "linalg_util.hpp"
#include "onednn_util.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
namespace dn = onednn;
using sdk::kernel::HostView4;
using sdk::shape_rules::ConvGeometry;

// Geometry as two spatial dims (conv1d: H is a size-1 dim with unit kernel).
struct Geom {
  bool batched = true;
  int spatial = 2;
  int64_t n = 0, c_in = 0, c_out = 0, groups = 1;
  int64_t in[2] = {1, 1}, out[2] = {1, 1}, k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1};

  explicit Geom(const ConvGeometry& g)
      : batched(g.batched), spatial(g.spatial), n(g.n), c_in(g.c_in), c_out(g.c_out), groups(g.groups) {
    for (int i = 0; i < g.spatial; ++i) {
      int j = i + 2 - g.spatial;
      in[j] = g.in[i];
      out[j] = g.out[i];
      k[j] = g.kernel[i];
      s[j] = g.stride[i];
      p[j] = g.padding[i];
      d[j] = g.dilation[i];
    }
  }
  // The convolution whose backward-data is this transposed convolution.
  Geom transposed_as_conv() const {
    Geom t = *this;
    std::swap(t.c_in, t.c_out);
    std::swap(t.in[0], t.out[0]);
    std::swap(t.in[1], t.out[1]);
    return t;
  }
  bool empty() const { return n == 0 || c_in == 0 || c_out == 0; }
};

// ---- direct loops (float64, zero-size shapes, layouts oneDNN refuses) --------

// Y = conv(X, W) + BIAS; X [N, C_in, H, W], W [C_out, C_in/g, kH, kW].
template <class T>
void conv_loops(const Geom& g, const HostView4<T>& x, const HostView4<T>& w, const std::vector<double>& bias,
                const HostView4<T>& y) {
  const int64_t cin_g = g.c_in / g.groups, cout_g = g.c_out / g.groups;
  parallel_for(g.n * g.c_out, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t n = t / g.c_out, oc = t % g.c_out, ic0 = (oc / cout_g) * cin_g;
      for (int64_t oh = 0; oh < g.out[0]; ++oh)
        for (int64_t ow = 0; ow < g.out[1]; ++ow) {
          double acc = bias.empty() ? 0.0 : bias[oc];
          for (int64_t ic = 0; ic < cin_g; ++ic)
            for (int64_t kh = 0; kh < g.k[0]; ++kh) {
              int64_t ih = oh * g.s[0] - g.p[0] + kh * g.d[0];
              if (ih < 0 || ih >= g.in[0]) continue;
              for (int64_t kw = 0; kw < g.k[1]; ++kw) {
                int64_t iw = ow * g.s[1] - g.p[1] + kw * g.d[1];
                if (iw < 0 || iw >= g.in[1]) continue;
                acc += static_cast<double>(x.at(n, ic0 + ic, ih, iw)) * static_cast<double>(w.at(oc, ic, kh, kw));
              }
            }
          y.at(n, oc, oh, ow) = static_cast<T>(acc);
        }
    }
  });
}

// GX = the gradient of conv(X, W) for X, from GY (also: a transposed conv).
template <class T>
void conv_data_loops(const Geom& g, const HostView4<T>& gy, const HostView4<T>& w, const std::vector<double>& bias,
                     const HostView4<T>& gx) {
  const int64_t cin_g = g.c_in / g.groups, cout_g = g.c_out / g.groups;
  parallel_for(g.n * g.c_in, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t n = t / g.c_in, ic = t % g.c_in, grp = ic / cin_g, icg = ic % cin_g;
      for (int64_t ih = 0; ih < g.in[0]; ++ih)
        for (int64_t iw = 0; iw < g.in[1]; ++iw) {
          double acc = bias.empty() ? 0.0 : bias[ic];
          for (int64_t kh = 0; kh < g.k[0]; ++kh) {
            int64_t th = ih + g.p[0] - kh * g.d[0];
            if (th < 0 || th % g.s[0] != 0 || th / g.s[0] >= g.out[0]) continue;
            for (int64_t kw = 0; kw < g.k[1]; ++kw) {
              int64_t tw = iw + g.p[1] - kw * g.d[1];
              if (tw < 0 || tw % g.s[1] != 0 || tw / g.s[1] >= g.out[1]) continue;
              for (int64_t ocg = 0; ocg < cout_g; ++ocg) {
                int64_t oc = grp * cout_g + ocg;
                acc += static_cast<double>(gy.at(n, oc, th / g.s[0], tw / g.s[1])) *
                       static_cast<double>(w.at(oc, icg, kh, kw));
              }
            }
          }
          gx.at(n, ic, ih, iw) = static_cast<T>(acc);
        }
    }
  });
}

// GW and GB (GB.p may be null) from GY and X.
template <class T>
void conv_weight_loops(const Geom& g, const HostView4<T>& x, const HostView4<T>& gy, const HostView4<T>& gw, T* gb,
                       int64_t gb_stride) {
  const int64_t cin_g = g.c_in / g.groups, cout_g = g.c_out / g.groups;
  parallel_for(g.c_out * cin_g, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t oc = t / std::max<int64_t>(cin_g, 1), icg = t % std::max<int64_t>(cin_g, 1);
      int64_t ic = (oc / cout_g) * cin_g + icg;
      for (int64_t kh = 0; kh < g.k[0]; ++kh)
        for (int64_t kw = 0; kw < g.k[1]; ++kw) {
          double acc = 0;
          for (int64_t n = 0; n < g.n; ++n)
            for (int64_t oh = 0; oh < g.out[0]; ++oh) {
              int64_t ih = oh * g.s[0] - g.p[0] + kh * g.d[0];
              if (ih < 0 || ih >= g.in[0]) continue;
              for (int64_t ow = 0; ow < g.out[1]; ++ow) {
                int64_t iw = ow * g.s[1] - g.p[1] + kw * g.d[1];
                if (iw < 0 || iw >= g.in[1]) continue;
                acc += static_cast<double>(gy.at(n, oc, oh, ow)) * static_cast<double>(x.at(n, ic, ih, iw));
              }
            }
          gw.at(oc, icg, kh, kw) = static_cast<T>(acc);
        }
    }
  });
  if (gb == nullptr) return;
  parallel_for(g.c_out, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t oc = lo; oc < hi; ++oc) {
      double acc = 0;
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t oh = 0; oh < g.out[0]; ++oh)
          for (int64_t ow = 0; ow < g.out[1]; ++ow) acc += static_cast<double>(gy.at(n, oc, oh, ow));
      gb[oc * gb_stride] = static_cast<T>(acc);
    }
  });
}

template <class T>
std::vector<double> bias_values(const Tensor* b) {
  std::vector<double> v;
  if (b == nullptr) return v;
  for (int64_t i = 0; i < b->shape[0]; ++i) v.push_back(static_cast<double>(b->ptr<T>()[i * b->strides[0]]));
  return v;
}

// ---- oneDNN ---------------------------------------------------------------------

// Dims and strides of an activation as [N, C, H, W].
dnnl::memory::desc act_md(const Tensor& t, const Geom& g) {
  sdk::kernel::View4 v(t, g.batched, g.spatial);
  return dn::md({v.size[0], v.size[1], v.size[2], v.size[3]}, {v.stride[0], v.stride[1], v.stride[2], v.stride[3]});
}

// Dims and strides of a weight as oneDNN's [(G,) O, I, kH, kW]; TRANSPOSED:
// PyTorch's [C_in, C_out/g, ...] of a transposed convolution (O = C_out).
dnnl::memory::desc weight_md(const Tensor& w, const Geom& g, bool transposed) {
  sdk::kernel::View4 v(w, true, g.spatial);
  int64_t o = transposed ? 1 : 0, i = 1 - o;  // which PyTorch dim is oneDNN's O
  int64_t og = v.size[o] / (transposed ? 1 : g.groups), ig = v.size[i] / (transposed ? g.groups : 1);
  if (g.groups == 1)
    return dn::md({v.size[o], v.size[i], v.size[2], v.size[3]}, {v.stride[o], v.stride[i], v.stride[2], v.stride[3]});
  int64_t group_stride = transposed ? ig * v.stride[i] : og * v.stride[o];
  return dn::md({g.groups, og, ig, v.size[2], v.size[3]},
                {group_stride, v.stride[o], v.stride[i], v.stride[2], v.stride[3]});
}

dnnl::memory::desc any_like(const dnnl::memory::desc& m) {
  return dnnl::memory::desc(m.dims(), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

dnnl::memory::desc vec_md(const Tensor& t) { return dn::md({t.shape[0]}, {t.strides[0]}); }
// oneDNN's convolutions ignore a bias's stride: they get a dense one (and the
// slot a reorder from/to the caller's).
dnnl::memory::desc dense(const dnnl::memory::desc& m) {
  return m.is_zero() ? m : dnnl::memory::desc(m.dims(), dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
}

// One argument of a primitive: the caller's layout, the primitive's, and the
// reorder between them when they differ.
struct Slot {
  Slot(int a, bool out, dnnl::memory::desc u, dnnl::memory::desc p)
      : arg(a), output(out), user(std::move(u)), prim(std::move(p)) {}
  int arg;
  bool output;
  dnnl::memory::desc user, prim;
  bool reordered = false;
  dnnl::reorder reorder;
};

struct ConvEntry {
  dnnl::primitive prim;
  dnnl::memory::desc scratchpad;
  std::vector<Slot> slots;
};

dn::PrimitiveCache<ConvEntry>& conv_cache() {
  static dn::PrimitiveCache<ConvEntry> cache;
  return cache;
}

std::shared_ptr<const ConvEntry> make_entry(dnnl::primitive prim, const dnnl::memory::desc& scratchpad,
                                            std::vector<Slot> slots) {
  auto& eng = dn::engine();
  for (Slot& s : slots) {
    if (s.user == s.prim) continue;
    s.reordered = true;
    s.reorder = s.output ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, s.prim, eng, s.user))
                         : dnnl::reorder(dnnl::reorder::primitive_desc(eng, s.user, eng, s.prim));
  }
  return std::make_shared<const ConvEntry>(ConvEntry{std::move(prim), scratchpad, std::move(slots)});
}

// Runs E with the caller's buffers PTRS (one per slot, in slot order).
void execute(const ConvEntry& e, const std::vector<void*>& ptrs) {
  thread_local std::vector<dn::Scratch> staging(8);
  thread_local dn::Scratch scratchpad;
  auto& eng = dn::engine();
  auto& strm = dn::stream();
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::pair<size_t, dnnl::memory>> back;
  for (size_t i = 0; i < e.slots.size(); ++i) {
    const Slot& s = e.slots[i];
    dnnl::memory user(s.user, eng, ptrs[i]);
    if (!s.reordered) {
      args.emplace(s.arg, user);
      continue;
    }
    dnnl::memory prim(s.prim, eng, staging[i].get(s.prim.get_size()));
    if (s.output) back.emplace_back(i, prim);
    else s.reorder.execute(strm, user, prim);
    args.emplace(s.arg, prim);
  }
  args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e.scratchpad, eng, scratchpad.get(e.scratchpad.get_size())));
  e.prim.execute(strm, args);
  for (auto& [i, prim] : back) {
    dnnl::memory user(e.slots[i].user, eng, ptrs[i]);
    e.slots[i].reorder.execute(strm, prim, user);
  }
  strm.wait();
}

dn::Key conv_key(int kind, const Geom& g, std::initializer_list<const dnnl::memory::desc*> mds) {
  dn::Key key(kind);
  key.add(g.groups);
  for (int i = 0; i < 2; ++i) key.add(g.s[i]).add(g.p[i]).add(g.d[i]);
  for (const auto* m : mds) {
    if (m->is_zero()) {
      key.add(-1);
      continue;
    }
    key.add(std::vector<int64_t>(m->dims())).add(std::vector<int64_t>(m->data.format_desc.blocking.strides,
                                                                      m->data.format_desc.blocking.strides + m->data.ndims));
  }
  return key;
}

struct ConvParams {
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
};
// oneDNN's padding_r: one that makes its size formula, out = (in - eff +
// pad_l + pad_r) / stride + 1, give OUT (any in [lo, lo + stride - 1] does;
// the smallest non-negative one when there is one).
ConvParams conv_params(const Geom& g) {
  ConvParams p;
  for (int i = 0; i < 2; ++i) {
    int64_t eff = g.d[i] * (g.k[i] - 1) + 1;
    int64_t lo = (g.out[i] - 1) * g.s[i] + eff - g.in[i] - g.p[i];
    p.strides.push_back(g.s[i]);
    p.dilates.push_back(g.d[i] - 1);
    p.pad_l.push_back(g.p[i]);
    p.pad_r.push_back(lo >= 0 || lo + g.s[i] - 1 < 0 ? lo : 0);
  }
  return p;
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The multiply-adds of a convolution of geometry G (the threads it gets).
double conv_macs(const Geom& g) {
  return static_cast<double>(g.n) * g.c_out * (g.c_in / g.groups) * g.k[0] * g.k[1] * g.out[0] * g.out[1];
}

// Y = conv(X, W) + B in float32 on oneDNN.
void conv_forward_onednn(const Geom& g, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& y) {
  dn::ThreadLimit limit(dn::threads_for(conv_macs(g)));
  auto xm = act_md(x, g), wm = weight_md(w, g, false), ym = act_md(y, g);
  auto bm = b ? vec_md(*b) : dnnl::memory::desc();
  auto e = conv_cache().get(conv_key(1, g, {&xm, &wm, &bm, &ym}), [&] {
    ConvParams p = conv_params(g);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      any_like(xm), any_like(wm), dense(bm), any_like(ym), p.strides, p.dilates, p.pad_l,
                                      p.pad_r);
    dnnl::convolution_forward::primitive_desc pd(d, user_scratchpad(), dn::engine());
    std::vector<Slot> slots{{DNNL_ARG_SRC, false, xm, pd.src_desc()},
                            {DNNL_ARG_WEIGHTS, false, wm, pd.weights_desc()},
                            {DNNL_ARG_DST, true, ym, pd.dst_desc()}};
    if (b) slots.push_back({DNNL_ARG_BIAS, false, bm, pd.bias_desc()});
    return make_entry(dnnl::convolution_forward(pd), pd.scratchpad_desc(), std::move(slots));
  });
  std::vector<void*> ptrs{x.data, w.data, y.data};
  if (b) ptrs.push_back(b->data);
  execute(*e, ptrs);
}

dnnl::convolution_forward::primitive_desc forward_hint(const dnnl::memory::desc& x,
                                                       const dnnl::memory::desc& w, const dnnl::memory::desc& y,
                                                       const ConvParams& p) {
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, x, w, y,
                                    p.strides, p.dilates, p.pad_l, p.pad_r);
  return dnnl::convolution_forward::primitive_desc(d, dn::engine());
}

// GX = ∂conv/∂X (GY, W) in float32 on oneDNN.
void conv_data_onednn(const Geom& g, const Tensor& gy, const Tensor& w, const Tensor& gx) {
  dn::ThreadLimit limit(dn::threads_for(conv_macs(g)));
  auto gym = act_md(gy, g), wm = weight_md(w, g, false), gxm = act_md(gx, g);
  auto e = conv_cache().get(conv_key(2, g, {&gym, &wm, &gxm}), [&] {
    ConvParams p = conv_params(g);
    auto hint = forward_hint(any_like(gxm), any_like(wm), any_like(gym), p);
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, any_like(gxm), any_like(wm),
                                            any_like(gym), p.strides, p.dilates, p.pad_l, p.pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(d, user_scratchpad(), dn::engine(), hint);
    std::vector<Slot> slots{{DNNL_ARG_DIFF_DST, false, gym, pd.diff_dst_desc()},
                            {DNNL_ARG_WEIGHTS, false, wm, pd.weights_desc()},
                            {DNNL_ARG_DIFF_SRC, true, gxm, pd.diff_src_desc()}};
    return make_entry(dnnl::convolution_backward_data(pd), pd.scratchpad_desc(), std::move(slots));
  });
  execute(*e, {gy.data, w.data, gx.data});
}

// GW, GB = ∂conv/∂W, ∂conv/∂B (X, GY) in float32 on oneDNN.
void conv_weight_onednn(const Geom& g, const Tensor& x, const Tensor& gy, const Tensor& gw, const Tensor& gb) {
  // oneDNN splits this reduction across threads that meet at spinning
  // barriers: when another runnable thread (the framework's, enqueuing the
  // next ops) preempts one of them, the other spins out a whole time slice
  // (2-10 ms per call; torch_hal's CNN step ran 2.5-5x slower). Below ~1 ms
  // of single-thread work, one thread is cheaper.
  constexpr double kThreadedMacs = 1 << 25;
  dn::ThreadLimit limit(dn::threads_for(conv_macs(g), kThreadedMacs));
  auto xm = act_md(x, g), gym = act_md(gy, g), gwm = weight_md(gw, g, false), gbm = vec_md(gb);
  auto e = conv_cache().get(conv_key(3, g, {&xm, &gym, &gwm, &gbm}), [&] {
    ConvParams p = conv_params(g);
    auto hint = forward_hint(any_like(xm), any_like(gwm), any_like(gym), p);
    dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, any_like(xm), any_like(gwm), dense(gbm),
                                               any_like(gym), p.strides, p.dilates, p.pad_l, p.pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(d, user_scratchpad(), dn::engine(), hint);
    std::vector<Slot> slots{{DNNL_ARG_SRC, false, xm, pd.src_desc()},
                            {DNNL_ARG_DIFF_DST, false, gym, pd.diff_dst_desc()},
                            {DNNL_ARG_DIFF_WEIGHTS, true, gwm, pd.diff_weights_desc()},
                            {DNNL_ARG_DIFF_BIAS, true, gbm, pd.diff_bias_desc()}};
    return make_entry(dnnl::convolution_backward_weights(pd), pd.scratchpad_desc(), std::move(slots));
  });
  execute(*e, {x.data, gy.data, gw.data, gb.data});
}

// Y = conv_transpose(X, W) + B in float32 on oneDNN (G: the transposed geometry).
void deconv_onednn(const Geom& g, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& y) {
  dn::ThreadLimit limit(dn::threads_for(conv_macs(g)));
  auto xm = act_md(x, g), wm = weight_md(w, g, true), ym = act_md(y, g);
  auto bm = b ? vec_md(*b) : dnnl::memory::desc();
  auto e = conv_cache().get(conv_key(4, g, {&xm, &wm, &bm, &ym}), [&] {
    // oneDNN checks in = (out - eff + pad_l + pad_r) / stride + 1.
    ConvParams p = conv_params(g.transposed_as_conv());
    dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                        any_like(xm), any_like(wm), dense(bm), any_like(ym), p.strides, p.dilates, p.pad_l,
                                        p.pad_r);
    dnnl::deconvolution_forward::primitive_desc pd(d, user_scratchpad(), dn::engine());
    std::vector<Slot> slots{{DNNL_ARG_SRC, false, xm, pd.src_desc()},
                            {DNNL_ARG_WEIGHTS, false, wm, pd.weights_desc()},
                            {DNNL_ARG_DST, true, ym, pd.dst_desc()}};
    if (b) slots.push_back({DNNL_ARG_BIAS, false, bm, pd.bias_desc()});
    return make_entry(dnnl::deconvolution_forward(pd), pd.scratchpad_desc(), std::move(slots));
  });
  std::vector<void*> ptrs{x.data, w.data, y.data};
  if (b) ptrs.push_back(b->data);
  execute(*e, ptrs);
}

// Runs ONEDNN() for float32 unless the shape is empty or oneDNN refuses it;
// then LOOPS().
template <class A, class B>
void onednn_or(bool empty, A&& onednn, B&& loops) {
  if (!empty) {
    try {
      onednn();
      return;
    } catch (const dnnl::error&) {
    }
  }
  loops();
}

// Calls F(TypeTag<float or double>, outs, ins) with float16/bfloat16 staged
// through float32.
template <class F>
void float_or_double(const std::vector<const Tensor*>& outs, const std::vector<const Tensor*>& ins, F&& f) {
  if (outs[0]->dtype == HAL_DTYPE_FLOAT64) {
    f(sdk::kernel::TypeTag<double>{}, outs, ins);
    return;
  }
  linalg::with_f32(outs, ins, [&](const std::vector<const Tensor*>& o, const std::vector<const Tensor*>& i) {
    f(sdk::kernel::TypeTag<float>{}, o, i);
  });
}

// ---- ops ------------------------------------------------------------------------

void conv_forward(const OpCall& c, int spatial) {
  Geom g(sdk::shape_rules::conv_geometry(c, spatial, false));
  float_or_double({&c.output(0)}, {&c.input(0), &c.input(1), c.optional_input(2)}, [&](auto tag, auto& o, auto& i) {
    using T = typename decltype(tag)::type;
    auto loops = [&] {
      HostView4<T> x(*i[0], g.batched, spatial), w(*i[1], true, spatial), y(*o[0], g.batched, spatial);
      conv_loops<T>(g, x, w, bias_values<T>(i[2]), y);
    };
    if constexpr (std::is_same_v<T, float>)
      onednn_or(g.empty(), [&] { conv_forward_onednn(g, *i[0], *i[1], i[2], *o[0]); }, loops);
    else
      loops();
  });
}
void conv1d_body(const OpCall& c) { conv_forward(c, 1); }
void conv2d_body(const OpCall& c) { conv_forward(c, 2); }
HAL_CPU_KERNEL(conv1d_kernel, conv1d_body)
HAL_CPU_KERNEL(conv2d_kernel, conv2d_body)

void conv_backward_body(const OpCall& c) {
  Geom g(sdk::shape_rules::conv_backward_geometry(c));
  const int sp = g.spatial;
  float_or_double({&c.output(0), &c.output(1), &c.output(2)}, {&c.input(0), &c.input(1), &c.input(2)},
                  [&](auto tag, auto& o, auto& i) {
                    using T = typename decltype(tag)::type;
                    const Tensor &gy = *i[0], &x = *i[1], &w = *i[2], &gx = *o[0], &gw = *o[1], &gb = *o[2];
                    auto loops = [&] {
                      HostView4<T> gyv(gy, g.batched, sp), wv(w, true, sp);
                      conv_data_loops<T>(g, gyv, wv, {}, HostView4<T>(gx, g.batched, sp));
                      HostView4<T> xv(x, g.batched, sp), gwv(gw, true, sp);
                      conv_weight_loops<T>(g, xv, gyv, gwv, gb.ptr<T>(), gb.strides[0]);
                    };
                    if constexpr (std::is_same_v<T, float>)
                      onednn_or(g.empty(), [&] {
                        conv_data_onednn(g, gy, w, gx);
                        conv_weight_onednn(g, x, gy, gw, gb);
                      }, loops);
                    else
                      loops();
                  });
}
HAL_CPU_KERNEL(conv_backward_kernel, conv_backward_body)

void conv_transpose2d_body(const OpCall& c) {
  Geom g(sdk::shape_rules::conv_geometry(c, 2, true));
  float_or_double({&c.output(0)}, {&c.input(0), &c.input(1), c.optional_input(2)}, [&](auto tag, auto& o, auto& i) {
    using T = typename decltype(tag)::type;
    auto loops = [&] {
      conv_data_loops<T>(g.transposed_as_conv(), HostView4<T>(*i[0], g.batched, 2), HostView4<T>(*i[1], true, 2),
                         bias_values<T>(i[2]), HostView4<T>(*o[0], g.batched, 2));
    };
    if constexpr (std::is_same_v<T, float>)
      onednn_or(g.empty(), [&] { deconv_onednn(g, *i[0], *i[1], i[2], *o[0]); }, loops);
    else
      loops();
  });
}
HAL_CPU_KERNEL(conv_transpose2d_kernel, conv_transpose2d_body)

// Whether T's elements fill its bytes exactly in some order of its dims
// (row-major, channels-last, ...): oneDNN reads such a layout directly.
bool dense_in_some_order(const Tensor& t) { return common::dense_order(t.shape, t.strides, t.rank).has_value(); }

bool same_strides(const Tensor& a, const Tensor& b) {
  for (int d = 0; d < a.rank; ++d)
    if (a.shape[d] != 1 && a.strides[d] != b.strides[d]) return false;
  return true;
}

// The fused conv2d step (fused.hpp): one primitive made for its shapes, its
// memories bound once; a run re-points the caller's buffers and executes.
class Conv2dStep final : public sdk::HostGraphStep {
 public:
  Conv2dStep(const OpCall& c, const Tensor& y, const Tensor* residual, bool relu, bool weights_constant)
      : g_(sdk::shape_rules::conv_geometry(c, 2, false)),
        bias_(c.optional_input(2) != nullptr),
        residual_(residual != nullptr),
        weights_constant_(weights_constant) {
    if (!g_.batched || g_.empty())
      sdk::fail(HAL_STATUS_UNIMPLEMENTED, "fused conv2d: an unbatched or empty convolution");
    if (!dense_in_some_order(y)) sdk::fail(HAL_STATUS_INTERNAL, "fused conv2d: a strided destination");
    dn::ThreadLimit limit(dn::threads_for(conv_macs(g_)));
    auto& eng = dn::engine();
    // The layouts runs pass: dense in the given order, else row-major (a
    // strided view is copied row-major first).
    auto layout = [](Tensor t) {
      if (!dense_in_some_order(t)) t.set_contiguous_strides();
      return t;
    };
    x_layout_ = layout(c.input(0));
    r_layout_ = residual ? layout(*residual) : Tensor{};
    Tensor w = c.input(1);
    w.set_contiguous_strides();
    auto xm = act_md(x_layout_, g_), wm = weight_md(w, g_, false), ym = act_md(y, g_);
    auto bm = bias_ ? dense(vec_md(c.input(2))) : dnnl::memory::desc();
    dnnl::convolution_forward::primitive_desc pd = primitive_desc(xm, wm, bm, ym, residual_, relu, g_);
    prim_ = dnnl::convolution_forward(pd);
    x_user_ = dnnl::memory(xm, eng, DNNL_MEMORY_NONE);
    y_user_ = dnnl::memory(ym, eng, DNNL_MEMORY_NONE);
    w_user_ = dnnl::memory(wm, eng, DNNL_MEMORY_NONE);
    x_ = pd.src_desc() == xm ? x_user_ : dnnl::memory(pd.src_desc(), eng);
    y_ = pd.dst_desc() == ym ? y_user_ : dnnl::memory(pd.dst_desc(), eng);
    w_ = pd.weights_desc() == wm ? w_user_ : dnnl::memory(pd.weights_desc(), eng);
    if (x_ != x_user_) x_in_ = dnnl::reorder(x_user_, x_);
    if (w_ != w_user_) w_reorder_ = dnnl::reorder(w_user_, w_);
    if (y_ != y_user_) y_out_ = dnnl::reorder(y_, y_user_);
    if (residual_) {  // copied, or reordered, into the destination the sum post-op adds to
      auto rm = act_md(r_layout_, g_);
      r_user_ = dnnl::memory(rm, eng, DNNL_MEMORY_NONE);
      r_copy_ = rm == pd.dst_desc();
      if (!r_copy_) r_in_ = dnnl::reorder(r_user_, y_);
    }
    scratchpad_ = dnnl::memory(pd.scratchpad_desc(), eng);
    args_ = {{DNNL_ARG_SRC, x_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DST, y_}, {DNNL_ARG_SCRATCHPAD, scratchpad_}};
    if (bias_) {
      b_ = dnnl::memory(bm, eng, DNNL_MEMORY_NONE);
      args_.emplace(DNNL_ARG_BIAS, b_);
    }
  }

  // The primitive for these operands (activations and weights in the
  // layout oneDNN chooses: its row-major convolutions are several times
  // slower): the residual through the sum post-op, then relu.
  static dnnl::convolution_forward::primitive_desc primitive_desc(const dnnl::memory::desc& xm,
                                                                  const dnnl::memory::desc& wm,
                                                                  const dnnl::memory::desc& bm,
                                                                  const dnnl::memory::desc& ym, bool residual,
                                                                  bool relu, const Geom& g) {
    ConvParams p = conv_params(g);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      any_like(xm), any_like(wm), bm, any_like(ym), p.strides, p.dilates, p.pad_l,
                                      p.pad_r);
    dnnl::post_ops ops;
    if (residual) ops.append_sum(1.0f);
    if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr = user_scratchpad();
    attr.set_post_ops(ops);
    try {
      return dnnl::convolution_forward::primitive_desc(d, attr, dn::engine());
    } catch (const dnnl::error& e) {
      sdk::fail(HAL_STATUS_DEVICE_ERROR, "fused conv2d: oneDNN refused the convolution (", e.what(), ")");
    }
  }

  void run(const Tensor* const* in, const Tensor* const* out) override {
    dn::ThreadLimit limit(dn::threads_for(conv_macs(g_)));
    auto& strm = dn::stream();
    // An operand in another layout than planned (a graph input's strided
    // view) is copied row-major, the layout planned for it then.
    Tensor tmp[4];
    std::vector<unsigned char> storage[4];
    auto data = [&](int i, const Tensor& planned) {
      const Tensor& t = *in[i];
      if (same_strides(t, planned)) return t.data;
      if (!planned.is_contiguous())
        sdk::fail(HAL_STATUS_INTERNAL, "fused conv2d: operand ", i, " is not in the layout it was planned in");
      tmp[i] = cast_contiguous(t, t.dtype, storage[i]);
      return tmp[i].data;
    };
    auto row_major = [&](int i) {
      Tensor planned = *in[i];
      planned.set_contiguous_strides();
      return data(i, planned);
    };
    x_user_.set_data_handle(data(0, x_layout_));
    if (x_ != x_user_) x_in_.execute(strm, x_user_, x_);
    y_user_.set_data_handle(out[0]->data);
    if (bias_) b_.set_data_handle(row_major(2));
    if (residual_) {
      void* r = data(3, r_layout_);
      if (r_copy_) {
        std::memcpy(y_.get_data_handle(), r, y_.get_desc().get_size());
      } else {
        r_user_.set_data_handle(r);
        r_in_.execute(strm, r_user_, y_);
      }
    }
    if (w_ == w_user_) {
      w_user_.set_data_handle(row_major(1));
    } else if (!packed_ || !weights_constant_) {
      w_user_.set_data_handle(row_major(1));
      w_reorder_.execute(strm, w_user_, w_);
      packed_ = true;
    }
    prim_.execute(strm, args_);
    if (y_ != y_user_) y_out_.execute(strm, y_, y_user_);
    strm.wait();
  }

 private:
  Geom g_;
  bool bias_, residual_, weights_constant_;
  bool packed_ = false, r_copy_ = false;
  Tensor x_layout_, r_layout_;
  dnnl::convolution_forward prim_;
  dnnl::memory x_user_, x_, w_user_, w_, b_, r_user_, y_user_, y_, scratchpad_;
  dnnl::reorder x_in_, w_reorder_, r_in_, y_out_;
  std::unordered_map<int, dnnl::memory> args_;
};

}  // namespace

std::unique_ptr<sdk::HostGraphStep> make_conv2d_step(const sdk::OpCall& call, const sdk::Tensor& output,
                                                     const sdk::Tensor* residual, bool relu, bool weights_constant) {
  return std::make_unique<Conv2dStep>(call, output, residual, relu, weights_constant);
}

bool conv2d_prefers_channels_last(const sdk::OpCall& call, bool residual, bool relu) {
  Geom g(sdk::shape_rules::conv_geometry(call, 2, false));
  if (!g.batched || g.empty()) return false;
  Tensor x = call.input(0), w = call.input(1);
  x.set_contiguous_strides();
  w.set_contiguous_strides();
  Tensor y = x;  // the output's shape, channels-last
  y.shape[1] = g.c_out;
  y.shape[2] = g.out[0];
  y.shape[3] = g.out[1];
  y.strides[1] = 1;
  y.strides[3] = y.shape[1];
  y.strides[2] = y.shape[3] * y.strides[3];
  y.strides[0] = y.shape[2] * y.strides[2];
  auto bm = call.optional_input(2) ? dense(vec_md(*call.optional_input(2))) : dnnl::memory::desc();
  dn::ThreadLimit limit(dn::threads_for(conv_macs(g)));
  auto pd = Conv2dStep::primitive_desc(act_md(x, g), weight_md(w, g, false), bm, act_md(y, g), residual, relu, g);
  return pd.dst_desc() == act_md(y, g);
}

void register_conv_ops(sdk::OpRegistry& ops) {
  ops.add<op::conv1d>(&conv1d_kernel, sdk::kFloatDtypes);
  ops.add<op::conv2d>(&conv2d_kernel, sdk::kFloatDtypes);
  ops.add<op::conv_backward>(&conv_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::conv_transpose2d>(&conv_transpose2d_kernel, sdk::kFloatDtypes);
}

}  // namespace hal::cpu
