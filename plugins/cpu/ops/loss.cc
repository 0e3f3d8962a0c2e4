// CPU kernels of the "nn" group: losses (cross_entropy, nll_loss, mse_loss,
// binary_cross_entropy_with_logits) and their backward ops. Per-element
// losses are computed in float (double for float64); reductions sum in
// double. Class targets are all checked before any output is written.
#include <string>

#include "cpu_ops.hpp"
#include "hal/sdk/kernel/rows.hpp"
#include "nn_common.hpp"

namespace hal::cpu::nn {
namespace {

namespace op = sdk::op;

enum class Reduction { kNone, kMean, kSum };
Reduction reduction_of(const std::string& s) {
  return s == "none" ? Reduction::kNone : s == "sum" ? Reduction::kSum : Reduction::kMean;
}

// ---- class-index losses ------------------------------------------------------------

// Checks every target is in [0, C) or IGNORE (before anything is written).
void check_targets(const OpCall& c, const int64_t* t, int64_t count, int64_t classes, int64_t ignore) {
  for (int64_t i = 0; i < count; ++i)
    if ((t[i] < 0 || t[i] >= classes) && t[i] != ignore)
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": target ", t[i], " in 'target' at position ", i,
                " is out of range [0, ", classes, ") (and not ignore_index ", ignore, ")");
}

template <class T>
std::vector<double> param_or_ones(const Tensor* t, int64_t n) {
  std::vector<double> v = load_vector<T, double>(t);
  if (t == nullptr) v.assign(static_cast<size_t>(n), 1.0);
  return v;
}

struct ClassLossArgs {
  const Tensor* input;
  const Tensor* target;
  const Tensor* weight;
  Reduction reduction;
  int64_t ignore;
  double smoothing;  // cross_entropy only
  bool log_softmax;  // cross_entropy: input is logits
};

// nll_loss reads one entry per position: its input is read in place
// through its strides (a broadcast, as the PyTorch bridge's total_weight
// passes, is not copied dense).
bool reads_in_place(const ClassLossArgs& a) { return !a.log_softmax && a.smoothing == 0; }

// Offset in elements of class K at position P of strided INPUT (layout L;
// l.at(p, k) when INPUT is contiguous).
int64_t strided_at(const Tensor& input, const sdk::kernel::ClassLayout& l, int64_t p, int64_t k) {
  if (input.rank == 1) return k * input.strides[0];
  int64_t j = p % l.d, off = (p / l.d) * input.strides[0] + k * input.strides[1];
  for (int dim = input.rank - 1; dim >= 2; --dim) {
    off += (j % input.shape[dim]) * input.strides[dim];
    j /= input.shape[dim];
  }
  return off;
}

// Per-position losses into LOSS; returns the denominator of the mean (the summed weights of non-ignored targets).
// X: the input made contiguous (empty where reads_in_place).
template <class T>
double class_losses(const OpCall& c, const ClassLossArgs& a, const In& x, const In& tg,
                    std::vector<double>& loss) {
  using A = acc_t<T>;
  sdk::kernel::ClassLayout l = sdk::kernel::class_layout(*a.input);
  const T* px = reads_in_place(a) ? static_cast<const T*>(a.input->data) : x.ptr<T>();
  const int64_t* pt = tg.ptr<int64_t>();
  check_targets(c, pt, l.positions(), l.c, a.ignore);
  std::vector<double> w = param_or_ones<T>(a.weight, l.c);
  loss.assign(static_cast<size_t>(l.positions()), 0.0);
  parallel_for(l.positions(), std::max<int64_t>(1, 4096 / std::max<int64_t>(l.c, 1)), [&](int64_t lo, int64_t hi) {
    std::vector<A> row(static_cast<size_t>(l.c));
    for (int64_t p = lo; p < hi; ++p) {
      int64_t t = pt[p];
      if (t == a.ignore) continue;
      if (reads_in_place(a)) {  // nll_loss reads only the target's entry
        loss[p] = -w[t] * double(A(px[strided_at(*a.input, l, p, t)]));
        continue;
      }
      for (int64_t k = 0; k < l.c; ++k) row[k] = A(px[l.at(p, k)]);
      if (a.log_softmax) {  // row := log_softmax(row) = (row - max) - log Σ, as PyTorch (not row - (max + log Σ))
        A m = lane_max(row.data(), l.c);
        A log_sum = std::log(lane_sum<A>(l.c, [&](int64_t k) { return exp_f(row[k] - m); }));
        for (int64_t k = 0; k < l.c; ++k) row[k] = (row[k] - m) - log_sum;
      }
      double nll = -w[t] * double(row[t]);
      double smooth = 0;
      if (a.smoothing > 0)
        for (int64_t k = 0; k < l.c; ++k) smooth -= w[k] * double(row[k]);
      loss[p] = (1 - a.smoothing) * nll + a.smoothing / double(l.c) * smooth;
    }
  });
  double denom = 0;
  for (int64_t p = 0; p < l.positions(); ++p)
    if (pt[p] != a.ignore) denom += w[pt[p]];
  return denom;
}

// Writes the per-position LOSS reduced as asked to output 0.
template <class T>
void write_reduced(const OpCall& c, Reduction r, const std::vector<double>& loss, double denom) {
  Out out(c.output(0));
  T* po = out.ptr<T>();
  if (r == Reduction::kNone) {
    for (size_t i = 0; i < loss.size(); ++i) po[i] = static_cast<T>(loss[i]);
  } else {
    double total = 0;
    for (double v : loss) total += v;
    po[0] = static_cast<T>(r == Reduction::kSum ? total : total / denom);
  }
  out.commit();
}

void class_loss_forward(const OpCall& c, const ClassLossArgs& a) {
  In x(reads_in_place(a) ? nullptr : a.input), tg(a.target);
  dispatch(a.input->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<double> loss;
    double denom = class_losses<T>(c, a, x, tg, loss);
    write_reduced<T>(c, a.reduction, loss, denom);
  });
}

// (grad_output, input, target, weight?) -> grad_input.
void class_loss_backward(const OpCall& c, const ClassLossArgs& a) {
  In g(&c.input(0)), x(a.input), tg(a.target);
  Out dx(c.output(0));
  dispatch(a.input->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    sdk::kernel::ClassLayout l = sdk::kernel::class_layout(*a.input);
    const int64_t* pt = tg.ptr<int64_t>();
    check_targets(c, pt, l.positions(), l.c, a.ignore);
    std::vector<double> w = param_or_ones<T>(a.weight, l.c);
    double wsum = 0, denom = 0;
    for (double v : w) wsum += v;
    for (int64_t p = 0; p < l.positions(); ++p)
      if (pt[p] != a.ignore) denom += w[pt[p]];
    const T* pg = g.ptr<T>();
    const T* px = x.ptr<T>();
    T* pdx = dx.ptr<T>();
    using A = acc_t<T>;
    // Position p's classes: row[k * l.d] from row = at(p, 0) (no division per element).
    auto zero_row = [&](T* dr) {
      if (l.d == 1) {
        std::fill_n(dr, l.c, static_cast<T>(0.0f));
      } else {
        for (int64_t k = 0; k < l.c; ++k) dr[k * l.d] = static_cast<T>(0.0f);
      }
    };
    auto scale_of = [&](int64_t p) {
      return a.reduction == Reduction::kNone   ? double(pg[p])
             : a.reduction == Reduction::kMean ? double(pg[0]) / denom
                                               : double(pg[0]);
    };
    parallel_for(l.positions(), std::max<int64_t>(1, 4096 / std::max<int64_t>(l.c, 1)), [&](int64_t lo, int64_t hi) {
      if (!a.log_softmax) {  // nll_loss: zeros but at each target (a fill of whole rows, then one store per row)
        for (int64_t p = lo; p < hi; ++p) {
          T* dr = pdx + l.at(p, 0);
          zero_row(dr);
          const int64_t t = pt[p];
          if (t != a.ignore) dr[t * l.d] = static_cast<T>(-w[t] * scale_of(p));
        }
        return;
      }
      std::vector<A> prob(static_cast<size_t>(l.c));
      for (int64_t p = lo; p < hi; ++p) {
        const int64_t t = pt[p], d = l.d;
        const T* xr = px + l.at(p, 0);
        T* dr = pdx + l.at(p, 0);
        if (t == a.ignore) {
          zero_row(dr);
          continue;
        }
        // softmax of the row, then (1-ε)·w[t]·(p - onehot) + ε/C·(p·Σw - w).
        for (int64_t k = 0; k < l.c; ++k) prob[k] = A(xr[k * d]);
        A m = lane_max(prob.data(), l.c);
        for (int64_t k = 0; k < l.c; ++k) prob[k] = exp_f(prob[k] - m);
        A inv = A(1) / lane_sum<A>(l.c, [&](int64_t k) { return prob[k]; });
        A sc = A(scale_of(p)), wt = A((1 - a.smoothing) * w[t]);
        A ws = A(a.smoothing / double(l.c) * wsum), e_c = A(a.smoothing / double(l.c));
        if (a.weight == nullptr) {
          for (int64_t k = 0; k < l.c; ++k) dr[k * d] = static_cast<T>(sc * ((wt + ws) * prob[k] * inv - e_c));
        } else {
          for (int64_t k = 0; k < l.c; ++k)
            dr[k * d] = static_cast<T>(sc * ((wt + ws) * prob[k] * inv - e_c * A(w[k])));
        }
        A wk = a.weight == nullptr ? A(1) : A(w[t]);
        dr[t * d] = static_cast<T>(sc * ((wt + ws) * prob[t] * inv - e_c * wk - wt));
      }
    });
  });
  dx.commit();
}

void cross_entropy_body(const OpCall& c) {
  ClassLossArgs a{&c.input(0), &c.input(1), op::cross_entropy::weight(c),
                  reduction_of(op::cross_entropy::reduction(c)), op::cross_entropy::ignore_index(c),
                  op::cross_entropy::label_smoothing(c), true};
  class_loss_forward(c, a);
}
void nll_loss_body(const OpCall& c) {
  ClassLossArgs a{&c.input(0), &c.input(1), op::nll_loss::weight(c), reduction_of(op::nll_loss::reduction(c)),
                  op::nll_loss::ignore_index(c), 0.0, false};
  class_loss_forward(c, a);
}
void cross_entropy_backward_body(const OpCall& c) {
  ClassLossArgs a{&c.input(1), &c.input(2), op::cross_entropy_backward::weight(c),
                  reduction_of(op::cross_entropy_backward::reduction(c)), op::cross_entropy_backward::ignore_index(c),
                  op::cross_entropy_backward::label_smoothing(c), true};
  class_loss_backward(c, a);
}
void nll_loss_backward_body(const OpCall& c) {
  ClassLossArgs a{&c.input(1), &c.input(2), op::nll_loss_backward::weight(c),
                  reduction_of(op::nll_loss_backward::reduction(c)), op::nll_loss_backward::ignore_index(c), 0.0,
                  false};
  class_loss_backward(c, a);
}
HAL_CPU_KERNEL(cross_entropy_kernel, cross_entropy_body)
HAL_CPU_KERNEL(nll_loss_kernel, nll_loss_body)
HAL_CPU_KERNEL(cross_entropy_backward_kernel, cross_entropy_backward_body)
HAL_CPU_KERNEL(nll_loss_backward_kernel, nll_loss_backward_body)

// ---- pointwise losses --------------------------------------------------------------

// mse_loss (kBce false) or binary_cross_entropy_with_logits on inputs
// starting at FIRST: (input, target, weight?, pos_weight?). BACKWARD:
// input 0 is grad_output and the result is grad_input.
template <bool kBce, bool kBackward>
void pointwise_loss(const OpCall& c, Reduction r) {
  constexpr size_t first = kBackward ? 1 : 0;
  const Tensor& input = c.input(first);
  In x(&input), t(&c.input(first + 1)), g(kBackward ? &c.input(0) : nullptr);
  dispatch(input.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const int64_t n = input.numel();
    std::vector<A> w, pw;
    if constexpr (kBce) {
      w = expand<T, A>(c.optional_input(first + 2), input);
      pw = expand<T, A>(c.optional_input(first + 3), input);
    }
    const T *px = x.ptr<T>(), *pt = t.ptr<T>(), *pg = g.ptr<T>();
    auto loss_at = [&](int64_t i) -> A {
      A xi = A(px[i]), ti = A(pt[i]);
      if constexpr (kBce) {
        A lw = pw.empty() ? A(1) : A(1) + (pw[i] - A(1)) * ti;
        A softplus = std::max(-xi, A(0)) + std::log1p(std::exp(-std::abs(xi)));  // -log σ(x)
        A l = (A(1) - ti) * xi + lw * softplus;
        return w.empty() ? l : l * w[i];
      } else {
        return (xi - ti) * (xi - ti);
      }
    };
    if constexpr (!kBackward) {
      if (r == Reduction::kNone) {
        Out out(c.output(0));
        T* po = out.ptr<T>();
        parallel_for(n, 16384, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) po[i] = static_cast<T>(loss_at(i));
        });
        out.commit();
        return;
      }
      std::vector<double> partial(static_cast<size_t>(std::max(1, omp_get_max_threads())), 0.0);
      int64_t chunks = parallel_chunks(n, 16384, [&](int64_t chunk, int64_t lo, int64_t hi) {
        partial[chunk] = lane_sum<double>(hi - lo, [&](int64_t i) { return double(loss_at(lo + i)); });
      });
      double total = 0;
      for (int64_t k = 0; k < chunks; ++k) total += partial[k];
      Out out(c.output(0));
      out.ptr<T>()[0] = static_cast<T>(r == Reduction::kSum ? total : total / double(n));
      out.commit();
    } else {
      Out dx(c.output(0));
      T* pdx = dx.ptr<T>();
      A scale = r == Reduction::kNone ? A(1) : r == Reduction::kSum ? A(pg[0]) : A(double(pg[0]) / double(n));
      parallel_for(n, 16384, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          A xi = A(px[i]), ti = A(pt[i]);
          A gi = r == Reduction::kNone ? A(pg[i]) : scale;
          A d;
          if constexpr (kBce) {
            A sig = A(1) / (A(1) + std::exp(-xi));
            A tp = pw.empty() ? ti : pw[i] * ti;
            d = (tp + A(1) - ti) * sig - tp;
            if (!w.empty()) d *= w[i];
          } else {
            d = A(2) * (xi - ti);
          }
          pdx[i] = static_cast<T>(d * gi);
        }
      });
      dx.commit();
    }
  });
}

void mse_loss_body(const OpCall& c) { pointwise_loss<false, false>(c, reduction_of(op::mse_loss::reduction(c))); }
void mse_loss_backward_body(const OpCall& c) {
  pointwise_loss<false, true>(c, reduction_of(op::mse_loss_backward::reduction(c)));
}
void bce_logits_body(const OpCall& c) {
  pointwise_loss<true, false>(c, reduction_of(op::binary_cross_entropy_with_logits::reduction(c)));
}
void bce_logits_backward_body(const OpCall& c) {
  pointwise_loss<true, true>(c, reduction_of(op::binary_cross_entropy_with_logits_backward::reduction(c)));
}
HAL_CPU_KERNEL(mse_loss_kernel, mse_loss_body)
HAL_CPU_KERNEL(mse_loss_backward_kernel, mse_loss_backward_body)
HAL_CPU_KERNEL(bce_logits_kernel, bce_logits_body)
HAL_CPU_KERNEL(bce_logits_backward_kernel, bce_logits_backward_body)

}  // namespace

void register_loss_ops(sdk::OpRegistry& ops) {
  ops.add<op::cross_entropy>(&cross_entropy_kernel, sdk::kFloatDtypes);
  ops.add<op::cross_entropy_backward>(&cross_entropy_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::nll_loss>(&nll_loss_kernel, sdk::kFloatDtypes);
  ops.add<op::nll_loss_backward>(&nll_loss_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::mse_loss>(&mse_loss_kernel, sdk::kFloatDtypes);
  ops.add<op::mse_loss_backward>(&mse_loss_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::binary_cross_entropy_with_logits>(&bce_logits_kernel, sdk::kFloatDtypes);
  ops.add<op::binary_cross_entropy_with_logits_backward>(&bce_logits_backward_kernel, sdk::kFloatDtypes);
}

}  // namespace hal::cpu::nn
