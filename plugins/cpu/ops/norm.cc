// CPU kernels of the "nn" group: layer_norm, rms_norm, group_norm,
// batch_norm and their backward ops. Operands are made contiguous first;
// statistics accumulate in float (double for float64; double for the
// per-channel sums of batch_norm and group_norm, which span whole batches).
// Per-feature parameters are read into local vectors before any output is
// written, so an output may alias them (batch_norm's running stats). Large
// float32 layer_norm / rms_norm outputs use streaming stores.
#include <array>

#include "cpu_ops.hpp"
#include "hal/sdk/kernel/rows.hpp"
#include "nn_common.hpp"
#include "stream_store.hpp"

namespace hal::cpu::nn {
namespace {

namespace op = sdk::op;
using sdk::kernel::Nchw;
using sdk::kernel::Rows;

// Parameter vector of length N (ones/zeros when absent).
template <class T, class A>
std::vector<A> param(const Tensor* t, int64_t n, A fill) {
  std::vector<A> v = load_vector<T, A>(t);
  if (t == nullptr) v.assign(static_cast<size_t>(n), fill);
  return v;
}

// ---- layer_norm / rms_norm forward ---------------------------------------------

// One row: Y = (X - mean)·rstd·W + B (kRms: mean = 0, no B).
template <bool kRms, class T, class A>
HAL_NN_INLINE void norm_row(const T* x, const A* w, const A* b, T* y, T* mean_out, T* rstd_out, int64_t n, A eps) {
  A mean = 0;
  A var;
  if constexpr (kRms) {
    var = n == 0 ? A(0) : lane_sum<A>(n, [&](int64_t i) { return A(x[i]) * A(x[i]); }) / A(n);
  } else {
    mean = n == 0 ? A(0) : lane_sum<A>(n, [&](int64_t i) { return A(x[i]); }) / A(n);
    var = n == 0 ? A(0) : lane_sum<A>(n, [&](int64_t i) {
      A t = A(x[i]) - mean;
      return t * t;
    }) / A(n);
  }
  A rstd = A(1) / std::sqrt(var + eps);
  if constexpr (kRms) {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(A(x[i]) * rstd * w[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>((A(x[i]) - mean) * rstd * w[i] + b[i]);
    *mean_out = static_cast<T>(mean);
  }
  *rstd_out = static_cast<T>(rstd);
}

// STREAM: each row is computed into a cached buffer and streamed out (a
// large output that aliases no input: no read-for-ownership of its lines).
template <bool kRms>
void norm_rows_f32(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, int64_t rows,
                   int64_t n, float eps, bool stream) {
  if (stream) {
    std::vector<float> buf(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      norm_row<kRms, float, float>(x + r * n, w, b, buf.data(), kRms ? nullptr : mean + r, rstd + r, n, eps);
      stream_copy(y + r * n, buf.data(), n);
    }
    stream_fence();
    return;
  }
  for (int64_t r = 0; r < rows; ++r)
    norm_row<kRms, float, float>(x + r * n, w, b, y + r * n, kRms ? nullptr : mean + r, rstd + r, n, eps);
}

// layer_norm: (input, weight?, bias?) -> out, mean, rstd; rms_norm:
// (input, weight?) -> out, rstd.
template <bool kRms>
void norm_forward(const OpCall& c, size_t normalized_dims, double eps_attr) {
  In x(&c.input(0));
  Rows rows = sdk::kernel::split_rows(c.input(0), normalized_dims);
  Out y(c.output(0));
  Out mean(c.output(1));
  Out rstd(c.output(kRms ? 1 : 2));
  dispatch(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    A eps = static_cast<A>(eps_attr);
    if (kRms && eps_attr < 0) {
      if constexpr (std::is_same_v<T, Half>) eps = A(0.0009765625);
      else if constexpr (std::is_same_v<T, BFloat16>) eps = A(0.0078125);
      else eps = std::numeric_limits<T>::epsilon();
    }
    std::vector<A> w = param<T, A>(c.optional_input(1), rows.d, A(1));
    std::vector<A> b = kRms ? std::vector<A>() : param<T, A>(c.optional_input(2), rows.d, A(0));
    const T* px = x.ptr<T>();
    T* py = y.ptr<T>();
    T* pm = kRms ? nullptr : mean.ptr<T>();
    T* pr = rstd.ptr<T>();
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(rows.d, 1));
    // (The op allows no aliasing: the output never is the input.)
    const bool stream = rows.m * rows.d * static_cast<int64_t>(sizeof(T)) >= kStreamBytes;
    parallel_for(rows.m, grain, [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_same_v<T, float>) {
        norm_rows_f32<kRms>(px + lo * rows.d, w.data(), b.data(), py + lo * rows.d, kRms ? nullptr : pm + lo,
                            pr + lo, hi - lo, rows.d, eps, stream);
      } else {
        for (int64_t r = lo; r < hi; ++r)
          norm_row<kRms, T, A>(px + r * rows.d, w.data(), b.data(), py + r * rows.d, kRms ? nullptr : pm + r, pr + r,
                               rows.d, eps);
      }
    });
  });
  y.commit();
  if (!kRms) mean.commit();
  rstd.commit();
}

void layer_norm_body(const OpCall& c) {
  norm_forward<false>(c, op::layer_norm::normalized_shape(c).size(), op::layer_norm::eps(c));
}
void rms_norm_body(const OpCall& c) {
  norm_forward<true>(c, op::rms_norm::normalized_shape(c).size(), op::rms_norm::eps(c));
}
HAL_CPU_KERNEL(layer_norm_kernel, layer_norm_body)
HAL_CPU_KERNEL(rms_norm_kernel, rms_norm_body)

// ---- layer_norm / rms_norm backward ----------------------------------------------

// layer_norm_backward: (grad_out, input, mean, rstd, weight?) -> grad_input,
// grad_weight, grad_bias; rms_norm_backward: (grad_out, input, rstd,
// weight?) -> grad_input, grad_weight.
template <bool kRms>
void norm_backward(const OpCall& c, size_t normalized_dims) {
  In dy(&c.input(0)), x(&c.input(1)), mean(kRms ? nullptr : &c.input(2)), rstd(&c.input(kRms ? 2 : 3));
  const Tensor* weight = c.optional_input(kRms ? 3 : 4);
  Rows rows = sdk::kernel::split_rows(c.input(1), normalized_dims);
  Out dx(c.output(0)), dw(c.output(1));
  Out db(c.output(kRms ? 1 : 2));
  dispatch(c.input(1).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const int64_t n = rows.d;
    std::vector<A> w = param<T, A>(weight, n, A(1));
    const T *pdy = dy.ptr<T>(), *px = x.ptr<T>(), *pm = mean.ptr<T>(), *pr = rstd.ptr<T>();
    T* pdx = dx.ptr<T>();
    int64_t threads = std::max(1, omp_get_max_threads());
    std::vector<A> partial(static_cast<size_t>(threads * 2 * n), A(0));
    int64_t chunks = parallel_chunks(rows.m, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)),
                                     [&](int64_t chunk, int64_t lo, int64_t hi) {
      A* gw = partial.data() + chunk * 2 * n;
      A* gb = gw + n;
      for (int64_t r = lo; r < hi; ++r) {
        const T* g = pdy + r * n;
        const T* xr = px + r * n;
        A mu = kRms ? A(0) : A(pm[r]);
        A rs = A(pr[r]);
        A s1 = kRms ? A(0) : lane_sum<A>(n, [&](int64_t i) { return A(g[i]) * w[i]; });
        A s2 = lane_sum<A>(n, [&](int64_t i) { return A(g[i]) * w[i] * (A(xr[i]) - mu) * rs; });
        A inv_n = n == 0 ? A(0) : A(1) / A(n);
        s1 *= inv_n;
        s2 *= inv_n;
        T* out = pdx + r * n;
        for (int64_t i = 0; i < n; ++i) {
          A xhat = (A(xr[i]) - mu) * rs;
          out[i] = static_cast<T>(rs * (A(g[i]) * w[i] - s1 - xhat * s2));
          gw[i] += A(g[i]) * xhat;
          gb[i] += A(g[i]);
        }
      }
    });
    T* pdw = dw.ptr<T>();
    T* pdb = db.ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      A sw = 0, sb = 0;
      for (int64_t k = 0; k < chunks; ++k) {
        sw += partial[static_cast<size_t>(k * 2 * n + i)];
        sb += partial[static_cast<size_t>(k * 2 * n + n + i)];
      }
      pdw[i] = static_cast<T>(sw);
      if (!kRms) pdb[i] = static_cast<T>(sb);
    }
  });
  dx.commit();
  dw.commit();
  if (!kRms) db.commit();
}

void layer_norm_backward_body(const OpCall& c) {
  norm_backward<false>(c, op::layer_norm_backward::normalized_shape(c).size());
}
void rms_norm_backward_body(const OpCall& c) {
  norm_backward<true>(c, op::rms_norm_backward::normalized_shape(c).size());
}
HAL_CPU_KERNEL(layer_norm_backward_kernel, layer_norm_backward_body)
HAL_CPU_KERNEL(rms_norm_backward_kernel, rms_norm_backward_body)

// ---- group_norm ------------------------------------------------------------------

void group_norm_body(const OpCall& c) {
  In x(&c.input(0));
  Nchw s = sdk::kernel::nchw(c.input(0));
  int64_t groups = op::group_norm::num_groups(c);
  int64_t cg = s.c / groups, d = cg * s.hw;
  double eps = op::group_norm::eps(c);
  Out y(c.output(0)), mean(c.output(1)), rstd(c.output(2));
  dispatch(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    std::vector<A> w = param<T, A>(c.optional_input(1), s.c, A(1));
    std::vector<A> b = param<T, A>(c.optional_input(2), s.c, A(0));
    const T* px = x.ptr<T>();
    T *py = y.ptr<T>(), *pm = mean.ptr<T>(), *pr = rstd.ptr<T>();
    parallel_for(s.n * groups, std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t ng = lo; ng < hi; ++ng) {
        const T* xg = px + ng * d;
        double mu = d == 0 ? 0.0 : lane_sum<double>(d, [&](int64_t i) { return double(xg[i]); }) / double(d);
        double var = d == 0 ? 0.0 : lane_sum<double>(d, [&](int64_t i) {
          double t = double(xg[i]) - mu;
          return t * t;
        }) / double(d);
        double rs = 1.0 / std::sqrt(var + eps);
        pm[ng] = static_cast<T>(mu);
        pr[ng] = static_cast<T>(rs);
        int64_t g = ng % groups;
        for (int64_t k = 0; k < cg; ++k) {
          int64_t ch = g * cg + k;
          A scale = static_cast<A>(rs * double(w[ch]));
          A shift = static_cast<A>(double(b[ch]) - mu * rs * double(w[ch]));
          const T* xc = xg + k * s.hw;
          T* yc = py + ng * d + k * s.hw;
          for (int64_t i = 0; i < s.hw; ++i) yc[i] = static_cast<T>(A(xc[i]) * scale + shift);
        }
      }
    });
  });
  y.commit();
  mean.commit();
  rstd.commit();
}
HAL_CPU_KERNEL(group_norm_kernel, group_norm_body)

// (grad_out, input, mean, rstd, weight?) -> grad_input, grad_weight, grad_bias.
void group_norm_backward_body(const OpCall& c) {
  In dy(&c.input(0)), x(&c.input(1)), mean(&c.input(2)), rstd(&c.input(3));
  Nchw s = sdk::kernel::nchw(c.input(1));
  int64_t groups = op::group_norm_backward::num_groups(c);
  int64_t cg = s.c / groups, d = cg * s.hw;
  Out dx(c.output(0)), dw(c.output(1)), db(c.output(2));
  dispatch(c.input(1).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<double> w = param<T, double>(c.optional_input(4), s.c, 1.0);
    const T *pdy = dy.ptr<T>(), *px = x.ptr<T>(), *pm = mean.ptr<T>(), *pr = rstd.ptr<T>();
    T* pdx = dx.ptr<T>();
    // Per (n, c): sum(dy·x) and sum(dy) over HW.
    std::vector<double> ds(static_cast<size_t>(s.n * s.c)), dbs(static_cast<size_t>(s.n * s.c));
    parallel_for(s.n * groups, std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t ng = lo; ng < hi; ++ng) {
        int64_t g = ng % groups;
        double mu = double(pm[ng]), rs = double(pr[ng]);
        double sw_db = 0, sw_ds = 0;
        for (int64_t k = 0; k < cg; ++k) {
          int64_t nc = ng * cg + k;
          const T* g_ = pdy + nc * s.hw;
          const T* xc = px + nc * s.hw;
          ds[nc] = lane_sum<double>(s.hw, [&](int64_t i) { return double(g_[i]) * double(xc[i]); });
          dbs[nc] = lane_sum<double>(s.hw, [&](int64_t i) { return double(g_[i]); });
          sw_db += w[g * cg + k] * dbs[nc];
          sw_ds += w[g * cg + k] * ds[nc];
        }
        double m1 = d == 0 ? 0.0 : sw_db / double(d);
        double m2 = d == 0 ? 0.0 : rs * (sw_ds - mu * sw_db) / double(d);
        for (int64_t k = 0; k < cg; ++k) {
          int64_t nc = ng * cg + k;
          double a = rs * w[g * cg + k], bias = -rs * m1 + rs * rs * mu * m2, sx = -rs * rs * m2;
          const T* g_ = pdy + nc * s.hw;
          const T* xc = px + nc * s.hw;
          T* o = pdx + nc * s.hw;
          for (int64_t i = 0; i < s.hw; ++i) o[i] = static_cast<T>(a * double(g_[i]) + sx * double(xc[i]) + bias);
        }
      }
    });
    T *pdw = dw.ptr<T>(), *pdb = db.ptr<T>();
    for (int64_t ch = 0; ch < s.c; ++ch) {
      double sw = 0, sb = 0;
      for (int64_t n = 0; n < s.n; ++n) {
        int64_t ng = n * groups + ch / std::max<int64_t>(cg, 1);
        sw += double(pr[ng]) * (ds[n * s.c + ch] - double(pm[ng]) * dbs[n * s.c + ch]);
        sb += dbs[n * s.c + ch];
      }
      pdw[ch] = static_cast<T>(sw);
      pdb[ch] = static_cast<T>(sb);
    }
  });
  dx.commit();
  dw.commit();
  db.commit();
}
HAL_CPU_KERNEL(group_norm_backward_kernel, group_norm_backward_body)

// ---- batch_norm --------------------------------------------------------------------

// Calls F(n, c, x) with a pointer to the HW elements of sample N, channel C.
template <class T, class F>
double channel_sum(const T* base, const Nchw& s, int64_t ch, F f) {
  double total = 0;
  for (int64_t n = 0; n < s.n; ++n) {
    const T* p = base + (n * s.c + ch) * s.hw;
    total += lane_sum<double>(s.hw, [&](int64_t i) { return f(p, n * s.c * s.hw + ch * s.hw, i); });
  }
  return total;
}

void batch_norm_body(const OpCall& c) {
  In x(&c.input(0));
  Nchw s = sdk::kernel::nchw(c.input(0));
  bool training = op::batch_norm::training(c);
  double momentum = op::batch_norm::momentum(c), eps = op::batch_norm::eps(c);
  const Tensor* rm_in = op::batch_norm::running_mean(c);
  const Tensor* rv_in = op::batch_norm::running_var(c);
  Out y(c.output(0)), save_mean(c.output(1)), save_invstd(c.output(2)), rm_out(c.output(3)), rv_out(c.output(4));
  dispatch(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    std::vector<double> w = param<T, double>(c.optional_input(1), s.c, 1.0);
    std::vector<double> b = param<T, double>(c.optional_input(2), s.c, 0.0);
    std::vector<double> rm = load_vector<T, double>(rm_in), rv = load_vector<T, double>(rv_in);
    std::vector<double> mean(static_cast<size_t>(s.c)), invstd(static_cast<size_t>(s.c));
    std::vector<double> new_rm = rm, new_rv = rv;
    const T* px = x.ptr<T>();
    int64_t count = s.n * s.hw;
    parallel_for(s.c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t ch = lo; ch < hi; ++ch) {
        if (!training) {
          mean[ch] = rm[ch];
          invstd[ch] = 1.0 / std::sqrt(rv[ch] + eps);
          continue;
        }
        if (count == 0) {
          mean[ch] = invstd[ch] = 0.0;
          continue;
        }
        double mu = channel_sum(px, s, ch, [](const T* p, int64_t, int64_t i) { return double(p[i]); }) / count;
        double var_sum = channel_sum(px, s, ch, [mu](const T* p, int64_t, int64_t i) {
          double t = double(p[i]) - mu;
          return t * t;
        });
        mean[ch] = mu;
        invstd[ch] = 1.0 / std::sqrt(var_sum / count + eps);
        if (!rm.empty()) {
          new_rm[ch] = (1 - momentum) * rm[ch] + momentum * mu;
          new_rv[ch] = (1 - momentum) * rv[ch] + momentum * var_sum / double(count - 1);
        }
      }
    });
    // Outputs, after every input was read (y may be input itself).
    T* py = y.ptr<T>();
    parallel_for(s.n * s.c, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.hw, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t nc = lo; nc < hi; ++nc) {
        int64_t ch = nc % s.c;
        A scale = static_cast<A>(invstd[ch] * w[ch]);
        A shift = static_cast<A>(b[ch] - mean[ch] * invstd[ch] * w[ch]);
        const T* xc = px + nc * s.hw;
        T* yc = py + nc * s.hw;
        for (int64_t i = 0; i < s.hw; ++i) yc[i] = static_cast<T>(A(xc[i]) * scale + shift);
      }
    });
    auto store = [](const Out& o, const std::vector<double>& v, int64_t n) {
      for (int64_t i = 0; i < n; ++i) o.ptr<T>()[i] = static_cast<T>(v[static_cast<size_t>(i)]);
    };
    if (training) {
      store(save_mean, mean, s.c);
      store(save_invstd, invstd, s.c);
    }
    if (!rm.empty()) {
      store(rm_out, new_rm, s.c);
      store(rv_out, new_rv, s.c);
    }
  });
  y.commit();
  save_mean.commit();
  save_invstd.commit();
  rm_out.commit();
  rv_out.commit();
}
HAL_CPU_KERNEL(batch_norm_kernel, batch_norm_body)

// (grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?) -> grad_input, grad_weight, grad_bias.
void batch_norm_backward_body(const OpCall& c) {
  In dy(&c.input(0)), x(&c.input(1));
  Nchw s = sdk::kernel::nchw(c.input(1));
  bool training = op::batch_norm_backward::training(c);
  double eps = op::batch_norm_backward::eps(c);
  Out dx(c.output(0)), dw(c.output(1)), db(c.output(2));
  dispatch(c.input(1).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<double> w = param<T, double>(c.optional_input(2), s.c, 1.0);
    std::vector<double> mean = load_vector<T, double>(c.optional_input(training ? 5 : 3));
    std::vector<double> invstd = load_vector<T, double>(c.optional_input(training ? 6 : 4));
    if (!training)
      for (double& v : invstd) v = 1.0 / std::sqrt(v + eps);
    const T *pdy = dy.ptr<T>(), *px = x.ptr<T>();
    T *pdx = dx.ptr<T>(), *pdw = dw.ptr<T>(), *pdb = db.ptr<T>();
    double count = static_cast<double>(s.n * s.hw);
    parallel_for(s.c, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t ch = lo; ch < hi; ++ch) {
        double mu = mean[ch], rs = invstd[ch];
        double sdy = channel_sum(pdy, s, ch, [](const T* p, int64_t, int64_t i) { return double(p[i]); });
        double sdyx = channel_sum(pdy, s, ch, [&](const T* p, int64_t off, int64_t i) {
          return double(p[i]) * (double(px[off + i]) - mu);
        });
        pdb[ch] = static_cast<T>(sdy);
        pdw[ch] = static_cast<T>(sdyx * rs);
        double a = rs * w[ch], k = 0, m = 0;  // dx = a·(dy - m - k·(x - mu))
        if (training && count > 0) {
          m = sdy / count;
          k = rs * rs * sdyx / count;
        }
        for (int64_t n = 0; n < s.n; ++n) {
          int64_t off = (n * s.c + ch) * s.hw;
          for (int64_t i = 0; i < s.hw; ++i)
            pdx[off + i] = static_cast<T>(a * (double(pdy[off + i]) - m - k * (double(px[off + i]) - mu)));
        }
      }
    });
  });
  dx.commit();
  dw.commit();
  db.commit();
}
HAL_CPU_KERNEL(batch_norm_backward_kernel, batch_norm_backward_body)

}  // namespace

void register_norm_ops(sdk::OpRegistry& ops) {
  ops.add<op::layer_norm>(&layer_norm_kernel, sdk::kFloatDtypes);
  ops.add<op::layer_norm_backward>(&layer_norm_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::rms_norm>(&rms_norm_kernel, sdk::kFloatDtypes);
  ops.add<op::rms_norm_backward>(&rms_norm_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::group_norm>(&group_norm_kernel, sdk::kFloatDtypes);
  ops.add<op::group_norm_backward>(&group_norm_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::batch_norm>(&batch_norm_kernel, sdk::kFloatDtypes);
  ops.add<op::batch_norm_backward>(&batch_norm_backward_kernel, sdk::kFloatDtypes);
}

}  // namespace hal::cpu::nn
