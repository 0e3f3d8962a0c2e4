// hal-conformance: the "linalg" ops — cases and double-precision references.
// References are plain loops over logical (row-major) values; 1-D
// convolutions are computed as 2-D ones with H = 1.
#include <algorithm>
#include <cmath>
#include <limits>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

using V = std::vector<int64_t>;
constexpr hal_status_code_e kInvalid = HAL_STATUS_INVALID_ARGUMENT;

// Matrix products are long sums: allow a few ulps more than one rounding.
constexpr double kSumTol = 4.0;

HostTensor reshaped(HostTensor t, V shape) {
  t.shape = std::move(shape);
  return t;
}

// ---- matrix products --------------------------------------------------------------

// torch.matmul in double (1-D operands, broadcast batch dims).
HostTensor matmul_ref(const HostTensor& a, const HostTensor& b, hal_dtype_e dt) {
  V as = a.shape, bs = b.shape;
  bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  HostTensor A = reshaped(a, as), B = reshaped(b, bs);
  int64_t n = as[as.size() - 2], k = as.back(), p = bs.back();
  V batch = *broadcast_shape(V(as.begin(), as.end() - 2), V(bs.begin(), bs.end() - 2));
  V full = batch;
  full.push_back(n);
  full.push_back(p);
  HostTensor out(dt, full);
  for (int64_t f = 0; f < out.numel(); ++f) {
    V idx = unravel(f, full), ia = idx, ib = idx;
    double s = 0;
    for (int64_t q = 0; q < k; ++q) {
      ia.back() = q;
      ib[ib.size() - 2] = q;
      s += broadcast_at(A, ia) * broadcast_at(B, ib);
    }
    out.values[f] = s;
  }
  V shape = batch;
  if (!a1) shape.push_back(n);
  if (!b1) shape.push_back(p);
  out.shape = shape;
  return out;
}

HostTensor transpose2(const HostTensor& t) {
  HostTensor out(t.dtype, {t.shape[1], t.shape[0]});
  for (int64_t i = 0; i < t.shape[0]; ++i)
    for (int64_t j = 0; j < t.shape[1]; ++j) out.at({j, i}) = t.at({i, j});
  return out;
}

std::vector<HostTensor> product_ref(const OpCase& c) {
  return {matmul_ref(c.input(0), c.input(1), c.input(0).dtype)};
}

std::vector<OpCase> mm_cases(hal_dtype_e dt) {
  return {
      OpCase("[3,4]x[4,5]").in(random(dt, {3, 4}, 1)).in(random(dt, {4, 5}, 2)),
      OpCase("[17,33]x[33,9]").in(random(dt, {17, 33}, 3)).in(random(dt, {33, 9}, 4)).tol(kSumTol),
      OpCase("[1,1]x[1,1]").in(random(dt, {1, 1}, 5)).in(random(dt, {1, 1}, 6)),
      OpCase("inner 0 gives zeros").in(random(dt, {2, 0}, 7)).in(random(dt, {0, 3}, 8)),
      OpCase("zero rows").in(random(dt, {0, 4}, 9)).in(random(dt, {4, 3}, 10)),
      OpCase("zero cols").in(random(dt, {2, 4}, 11)).in(random(dt, {4, 0}, 12)),
      OpCase("inner mismatch")
          .in(random(dt, {2, 3}, 13)).in(random(dt, {4, 5}, 14))
          .error(kInvalid, {HostTensor(dt, {2, 5})}, {"mm", "self [2, 3]", "mat2 [4, 5]", "sizes 3 and 4"}),
      OpCase("rank 1 mat2")
          .in(random(dt, {2, 3}, 15)).in(random(dt, {3}, 16))
          .error(kInvalid, {HostTensor(dt, {2})}, {"mm", "mat2", "rank 2", "[3]"}),
      OpCase("0-d self")
          .in(random(dt, {}, 17)).in(random(dt, {3, 3}, 18))
          .error(kInvalid, {HostTensor(dt, {3, 3})}, {"mm", "self", "rank 2"}),
      OpCase("mixed dtypes")
          .in(random(dt, {2, 3}, 19)).in(random(dt == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT32 : HAL_DTYPE_FLOAT64, {3, 2}, 20))
          .error(kInvalid, {HostTensor(dt, {2, 2})}, {"mm", "mat2", "self"}),
  };
}
HAL_CONFORMANCE_SUITE(mm, mm_cases, product_ref);

std::vector<OpCase> bmm_cases(hal_dtype_e dt) {
  return {
      OpCase("[3,4,5]x[3,5,2]").in(random(dt, {3, 4, 5}, 1)).in(random(dt, {3, 5, 2}, 2)),
      OpCase("[2,9,20]x[2,20,7]").in(random(dt, {2, 9, 20}, 3)).in(random(dt, {2, 20, 7}, 4)).tol(kSumTol),
      OpCase("zero batch").in(random(dt, {0, 2, 3}, 5)).in(random(dt, {0, 3, 4}, 6)),
      OpCase("inner 0").in(random(dt, {2, 2, 0}, 7)).in(random(dt, {2, 0, 3}, 8)),
      OpCase("batch mismatch")
          .in(random(dt, {2, 2, 3}, 9)).in(random(dt, {3, 3, 4}, 10))
          .error(kInvalid, {HostTensor(dt, {2, 2, 4})}, {"bmm", "batch sizes 2 and 3"}),
      OpCase("inner mismatch")
          .in(random(dt, {2, 2, 3}, 11)).in(random(dt, {2, 4, 4}, 12))
          .error(kInvalid, {HostTensor(dt, {2, 2, 4})}, {"bmm", "sizes 3 and 4"}),
      OpCase("rank 2")
          .in(random(dt, {2, 3}, 13)).in(random(dt, {2, 3, 4}, 14))
          .error(kInvalid, {HostTensor(dt, {2, 2, 4})}, {"bmm", "self", "rank 3"}),
  };
}
HAL_CONFORMANCE_SUITE(bmm, bmm_cases, product_ref);

std::vector<OpCase> matmul_cases(hal_dtype_e dt) {
  return {
      OpCase("dot [5]x[5]").in(random(dt, {5}, 1)).in(random(dt, {5}, 2)),
      OpCase("matrix-vector [3,4]x[4]").in(random(dt, {3, 4}, 3)).in(random(dt, {4}, 4)),
      OpCase("vector-matrix [4]x[4,3]").in(random(dt, {4}, 5)).in(random(dt, {4, 3}, 6)),
      OpCase("[3,4]x[4,2]").in(random(dt, {3, 4}, 7)).in(random(dt, {4, 2}, 8)),
      OpCase("batched vector [2,3,4]x[4]").in(random(dt, {2, 3, 4}, 9)).in(random(dt, {4}, 10)),
      OpCase("vector batched [4]x[2,4,3]").in(random(dt, {4}, 11)).in(random(dt, {2, 4, 3}, 12)),
      OpCase("broadcast [2,1,3,4]x[3,4,5]").in(random(dt, {2, 1, 3, 4}, 13)).in(random(dt, {3, 4, 5}, 14)),
      OpCase("broadcast [3,4]x[2,2,4,3]").in(random(dt, {3, 4}, 15)).in(random(dt, {2, 2, 4, 3}, 16)),
      OpCase("zero batch [0,3,4]x[4,2]").in(random(dt, {0, 3, 4}, 17)).in(random(dt, {4, 2}, 18)),
      OpCase("empty dot").in(random(dt, {0}, 19)).in(random(dt, {0}, 20)),
      OpCase("inner mismatch")
          .in(random(dt, {3, 4}, 21)).in(random(dt, {5}, 22))
          .error(kInvalid, {HostTensor(dt, {3})}, {"matmul", "sizes 4 and 5"}),
      OpCase("batch mismatch")
          .in(random(dt, {2, 3, 4}, 23)).in(random(dt, {3, 4, 2}, 24))
          .error(kInvalid, {HostTensor(dt, {3, 3, 2})}, {"matmul", "do not broadcast", "size 2 vs 3"}),
      OpCase("0-d")
          .in(random(dt, {}, 25)).in(random(dt, {3}, 26))
          .error(kInvalid, {HostTensor(dt, {})}, {"matmul", "rank >= 1"}),
  };
}
HAL_CONFORMANCE_SUITE(matmul, matmul_cases, product_ref);

// beta·self + alpha·(a @ b); self is not read when beta is 0.
std::vector<HostTensor> add_product_ref(const OpCase& c) {
  double beta = c.attr_float("beta", 1.0), alpha = c.attr_float("alpha", 1.0);
  HostTensor out = matmul_ref(c.input(1), c.input(2), c.input(0).dtype);
  for (int64_t i = 0; i < out.numel(); ++i) {
    double s = beta == 0.0 ? 0.0 : beta * broadcast_at(c.input(0), unravel(i, out.shape));
    out.values[i] = s + alpha * out.values[i];
  }
  return {out};
}

std::vector<OpCase> addmm_cases(hal_dtype_e dt) {
  HostTensor nan_self = full(dt, {3, 4}, std::numeric_limits<double>::quiet_NaN());
  return {
      OpCase("self [3,4]").in(random(dt, {3, 4}, 1)).in(random(dt, {3, 5}, 2)).in(random(dt, {5, 4}, 3)),
      OpCase("self [4] (bias)").in(random(dt, {4}, 4)).in(random(dt, {3, 5}, 5)).in(random(dt, {5, 4}, 6)),
      OpCase("self [3,1] beta alpha")
          .in(random(dt, {3, 1}, 7)).in(random(dt, {3, 5}, 8)).in(random(dt, {5, 4}, 9))
          .attr(Attr::f("beta", 0.5)).attr(Attr::f("alpha", -2.0)),
      OpCase("0-d self, int alpha")
          .in(random(dt, {}, 10)).in(random(dt, {3, 5}, 11)).in(random(dt, {5, 4}, 12)).attr(Attr::i("alpha", 3)),
      OpCase("beta 0 ignores NaN self")
          .in(nan_self).in(random(dt, {3, 5}, 13)).in(random(dt, {5, 4}, 14)).attr(Attr::f("beta", 0.0)),
      OpCase("inner 0").in(random(dt, {2, 3}, 15)).in(random(dt, {2, 0}, 16)).in(random(dt, {0, 3}, 17))
          .attr(Attr::f("beta", 2.0)),
      OpCase("[9,40]x[40,11]").in(random(dt, {11}, 18)).in(random(dt, {9, 40}, 19)).in(random(dt, {40, 11}, 20))
          .tol(kSumTol),
      OpCase("self does not broadcast")
          .in(random(dt, {3}, 21)).in(random(dt, {3, 5}, 22)).in(random(dt, {5, 4}, 23))
          .error(kInvalid, {HostTensor(dt, {3, 4})}, {"addmm", "self", "[3]", "[3, 4]"}),
      OpCase("inner mismatch")
          .in(random(dt, {3, 4}, 24)).in(random(dt, {3, 5}, 25)).in(random(dt, {6, 4}, 26))
          .error(kInvalid, {HostTensor(dt, {3, 4})}, {"addmm", "mat1 [3, 5]", "mat2 [6, 4]", "sizes 5 and 6"}),
      OpCase("string beta")
          .in(random(dt, {3, 4}, 27)).in(random(dt, {3, 5}, 28)).in(random(dt, {5, 4}, 29)).attr(Attr::s("beta", "1"))
          .error(kInvalid, {HostTensor(dt, {3, 4})}, {"addmm", "beta"}),
  };
}
HAL_CONFORMANCE_SUITE(addmm, addmm_cases, add_product_ref);

std::vector<OpCase> baddbmm_cases(hal_dtype_e dt) {
  return {
      OpCase("self [2,3,4]").in(random(dt, {2, 3, 4}, 1)).in(random(dt, {2, 3, 5}, 2)).in(random(dt, {2, 5, 4}, 3)),
      OpCase("self [4] beta alpha")
          .in(random(dt, {4}, 4)).in(random(dt, {2, 3, 5}, 5)).in(random(dt, {2, 5, 4}, 6))
          .attr(Attr::f("beta", -1.0)).attr(Attr::f("alpha", 0.5)),
      OpCase("beta 0").in(random(dt, {1, 3, 1}, 7)).in(random(dt, {2, 3, 5}, 8)).in(random(dt, {2, 5, 4}, 9))
          .attr(Attr::f("beta", 0.0)),
      OpCase("zero batch").in(random(dt, {0, 3, 4}, 10)).in(random(dt, {0, 3, 5}, 11)).in(random(dt, {0, 5, 4}, 12)),
      OpCase("batch mismatch")
          .in(random(dt, {2, 3, 4}, 13)).in(random(dt, {2, 3, 5}, 14)).in(random(dt, {3, 5, 4}, 15))
          .error(kInvalid, {HostTensor(dt, {2, 3, 4})}, {"baddbmm", "batch sizes 2 and 3"}),
  };
}
HAL_CONFORMANCE_SUITE(baddbmm, baddbmm_cases, add_product_ref);

// input [..., in] @ weightᵀ (+ bias).
std::vector<HostTensor> linear_ref(const OpCase& c) {
  HostTensor out = matmul_ref(c.input(0), transpose2(c.input(1)), c.input(0).dtype);
  if (c.has_input(2))
    for (int64_t i = 0; i < out.numel(); ++i) out.values[i] += c.input(2).values[i % out.shape.back()];
  return {out};
}

std::vector<OpCase> linear_cases(hal_dtype_e dt) {
  return {
      OpCase("[4,5] bias").in(random(dt, {4, 5}, 1)).in(random(dt, {3, 5}, 2)).in(random(dt, {3}, 3)),
      OpCase("[2,3,5] no bias").in(random(dt, {2, 3, 5}, 4)).in(random(dt, {3, 5}, 5)),
      OpCase("[5] bias").in(random(dt, {5}, 6)).in(random(dt, {3, 5}, 7)).in(random(dt, {3}, 8)),
      OpCase("[16,48] bias").in(random(dt, {16, 48}, 9)).in(random(dt, {10, 48}, 10)).in(random(dt, {10}, 11))
          .tol(kSumTol),
      OpCase("zero rows").in(random(dt, {0, 5}, 12)).in(random(dt, {3, 5}, 13)).in(random(dt, {3}, 14)),
      OpCase("in 0 gives bias").in(random(dt, {2, 0}, 15)).in(random(dt, {3, 0}, 16)).in(random(dt, {3}, 17)),
      OpCase("in mismatch")
          .in(random(dt, {4, 5}, 18)).in(random(dt, {3, 6}, 19))
          .error(kInvalid, {HostTensor(dt, {4, 3})}, {"linear", "input [4, 5]", "weight [3, 6]", "sizes 5 and 6"}),
      OpCase("bias shape")
          .in(random(dt, {4, 5}, 20)).in(random(dt, {3, 5}, 21)).in(random(dt, {4}, 22))
          .error(kInvalid, {HostTensor(dt, {4, 3})}, {"linear", "bias", "[4]", "[3]"}),
      OpCase("weight rank")
          .in(random(dt, {4, 5}, 23)).in(random(dt, {5}, 24))
          .error(kInvalid, {HostTensor(dt, {4})}, {"linear", "weight", "rank 2"}),
  };
}
HAL_CONFORMANCE_SUITE(linear, linear_cases, linear_ref);

std::vector<HostTensor> linear_backward_ref(const OpCase& c) {
  const HostTensor &g = c.input(0), &x = c.input(1), &w = c.input(2);
  hal_dtype_e dt = g.dtype;
  int64_t out_f = w.shape[0], in_f = w.shape[1], rows = g.numel() / std::max<int64_t>(out_f, 1);
  if (out_f == 0) rows = x.numel() / std::max<int64_t>(in_f, 1);
  HostTensor gi(dt, x.shape), gw(dt, w.shape), gb(dt, {out_f});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out_f; ++o) {
      double gv = g.values[r * out_f + o];
      gb.values[o] += gv;
      for (int64_t i = 0; i < in_f; ++i) {
        gi.values[r * in_f + i] += gv * w.values[o * in_f + i];
        gw.values[o * in_f + i] += gv * x.values[r * in_f + i];
      }
    }
  return {gi, gw, gb};
}

std::vector<OpCase> linear_backward_cases(hal_dtype_e dt) {
  return {
      OpCase("[4,3] [4,5]").in(random(dt, {4, 3}, 1)).in(random(dt, {4, 5}, 2)).in(random(dt, {3, 5}, 3)),
      OpCase("[2,3,4] [2,3,6]").in(random(dt, {2, 3, 4}, 4)).in(random(dt, {2, 3, 6}, 5)).in(random(dt, {4, 6}, 6))
          .tol(kSumTol),
      OpCase("1-D").in(random(dt, {3}, 7)).in(random(dt, {5}, 8)).in(random(dt, {3, 5}, 9)),
      OpCase("[24,7] [24,9]").in(random(dt, {24, 7}, 10)).in(random(dt, {24, 9}, 11)).in(random(dt, {7, 9}, 12))
          .tol(kSumTol),
      OpCase("zero rows").in(random(dt, {0, 3}, 13)).in(random(dt, {0, 5}, 14)).in(random(dt, {3, 5}, 15)),
      OpCase("grad_output shape")
          .in(random(dt, {4, 2}, 16)).in(random(dt, {4, 5}, 17)).in(random(dt, {3, 5}, 18))
          .error(kInvalid, {HostTensor(dt, {4, 5}), HostTensor(dt, {3, 5}), HostTensor(dt, {3})},
                 {"linear_backward", "grad_output", "[4, 2]", "[4, 3]"}),
  };
}
HAL_CONFORMANCE_SUITE(linear_backward, linear_backward_cases, linear_backward_ref);

// ---- convolution ----------------------------------------------------------------------

// Convolution attributes as two spatial dims (a 1-D conv is H = 1).
struct ConvAttrs {
  int64_t stride[2] = {1, 1}, pad[2] = {0, 0}, dil[2] = {1, 1}, opad[2] = {0, 0};
  int64_t groups = 1;
};

ConvAttrs conv_attrs(const OpCase& c, int spatial) {
  ConvAttrs a;
  auto get = [&](const char* name, int64_t* out, int64_t def) {
    V v = c.attr_ints(name, {def});
    for (int d = 0; d < spatial; ++d) out[2 - spatial + d] = v[v.size() == 1 ? 0 : d];
  };
  get("stride", a.stride, 1);
  get("padding", a.pad, 0);
  get("dilation", a.dil, 1);
  get("output_padding", a.opad, 0);
  a.groups = c.attr_int("groups", 1);
  return a;
}

// T with a size-1 batch dim (unbatched) and a size-1 H dim (1-D) added.
HostTensor as4(const HostTensor& t, bool add_batch, bool add_h) {
  V s = t.shape;
  if (add_batch) s.insert(s.begin(), 1);
  if (add_h) s.insert(s.begin() + 2, 1);
  return reshaped(t, s);
}

struct ConvCase {
  int spatial;
  bool batched;
  HostTensor x, w;
  ConvAttrs a;
};

ConvCase conv_case(const OpCase& c, int spatial, size_t x_index, size_t w_index) {
  const HostTensor& x = c.input(x_index);
  bool batched = x.rank() == spatial + 2;
  return {spatial, batched, as4(x, !batched, spatial == 1), as4(c.input(w_index), false, spatial == 1),
          conv_attrs(c, spatial)};
}

// Back to the caller's rank.
HostTensor from4(HostTensor t, const ConvCase& k) {
  V s = t.shape;
  if (k.spatial == 1) s.erase(s.begin() + 2);
  if (!k.batched) s.erase(s.begin());
  return reshaped(std::move(t), s);
}

std::vector<HostTensor> conv_forward_ref(const OpCase& c, int spatial) {
  ConvCase k = conv_case(c, spatial, 0, 1);
  const HostTensor &x = k.x, &w = k.w;
  int64_t n = x.shape[0], cin = x.shape[1], cout = w.shape[0], cin_g = w.shape[1], cout_g = cout / k.a.groups;
  int64_t o[2];
  for (int d = 0; d < 2; ++d)
    o[d] = (x.shape[2 + d] + 2 * k.a.pad[d] - k.a.dil[d] * (w.shape[2 + d] - 1) - 1) / k.a.stride[d] + 1;
  HostTensor y(x.dtype, {n, cout, o[0], o[1]});
  (void)cin;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < cout; ++oc)
      for (int64_t oh = 0; oh < o[0]; ++oh)
        for (int64_t ow = 0; ow < o[1]; ++ow) {
          double s = c.has_input(2) ? c.input(2).values[oc] : 0.0;
          for (int64_t i = 0; i < cin_g; ++i)
            for (int64_t kh = 0; kh < w.shape[2]; ++kh)
              for (int64_t kw = 0; kw < w.shape[3]; ++kw) {
                int64_t ih = oh * k.a.stride[0] - k.a.pad[0] + kh * k.a.dil[0];
                int64_t iw = ow * k.a.stride[1] - k.a.pad[1] + kw * k.a.dil[1];
                if (ih < 0 || iw < 0 || ih >= x.shape[2] || iw >= x.shape[3]) continue;
                s += x.at({b, (oc / cout_g) * cin_g + i, ih, iw}) * w.at({oc, i, kh, kw});
              }
          y.at({b, oc, oh, ow}) = s;
        }
  return {from4(y, k)};
}
std::vector<HostTensor> conv1d_ref(const OpCase& c) { return conv_forward_ref(c, 1); }
std::vector<HostTensor> conv2d_ref(const OpCase& c) { return conv_forward_ref(c, 2); }

// Cases shared by conv1d and conv2d: S gives a spatial shape from a 2-D one.
std::vector<OpCase> conv_cases(hal_dtype_e dt, int spatial) {
  auto S = [&](V lead, V hw) {
    if (spatial == 1) hw.erase(hw.begin());
    lead.insert(lead.end(), hw.begin(), hw.end());
    return lead;
  };
  const char* name = spatial == 1 ? "conv1d" : "conv2d";
  return {
      OpCase("basic").in(random(dt, S({2, 3}, {5, 6}), 1)).in(random(dt, S({4, 3}, {3, 2}), 2)).in(random(dt, {4}, 3)),
      OpCase("no bias, stride 2, padding 1")
          .in(random(dt, S({1, 2}, {7, 7}), 4)).in(random(dt, S({3, 2}, {3, 3}), 5))
          .attr(Attr::ints("stride", {2})).attr(Attr::ints("padding", {1})),
      OpCase("dilation 2, groups 2")
          .in(random(dt, S({2, 4}, {6, 7}), 6)).in(random(dt, S({6, 2}, {2, 3}), 7)).in(random(dt, {6}, 8))
          .attr(Attr::ints("dilation", {2})).attr(Attr::i("groups", 2)),
      OpCase("depthwise").in(random(dt, S({1, 3}, {5, 5}), 9)).in(random(dt, S({3, 1}, {3, 3}), 10))
          .attr(Attr::i("groups", 3)).attr(Attr::ints("padding", {1})),
      OpCase("per-dim attrs")
          .in(random(dt, S({1, 2}, {6, 9}), 11)).in(random(dt, S({2, 2}, {2, 3}), 12))
          .attr(Attr::ints("stride", spatial == 1 ? V{3} : V{1, 3})).attr(Attr::ints("padding", spatial == 1 ? V{2} : V{0, 2})),
      OpCase("unbatched").in(random(dt, S({3}, {4, 5}), 13)).in(random(dt, S({2, 3}, {2, 2}), 14)).in(random(dt, {2}, 15)),
      OpCase("more channels").in(random(dt, S({2, 16}, {6, 6}), 16)).in(random(dt, S({8, 16}, {3, 3}), 17))
          .in(random(dt, {8}, 18)).attr(Attr::ints("padding", {1})).tol(kSumTol),
      // Wide enough for oneDNN to compute it channels-last: the layout a
      // plugin prefers for it ("preferred") then differs from row-major.
      OpCase("32 channels").in(random(dt, S({2, 32}, {14, 14}), 41)).in(random(dt, S({32, 32}, {3, 3}), 42))
          .in(random(dt, {32}, 43)).attr(Attr::ints("padding", {1})).tol(kSumTol),
      OpCase("zero batch").in(random(dt, S({0, 2}, {4, 4}), 19)).in(random(dt, S({3, 2}, {3, 3}), 20)),
      OpCase("zero in-channels gives bias")
          .in(random(dt, S({1, 0}, {4, 4}), 21)).in(random(dt, S({3, 0}, {3, 3}), 22)).in(random(dt, {3}, 23)),
      OpCase("channel mismatch")
          .in(random(dt, S({1, 3}, {5, 5}), 24)).in(random(dt, S({2, 2}, {3, 3}), 25))
          .error(kInvalid, {HostTensor(dt, S({1, 2}, {3, 3}))}, {name, "3 channels", "weight"}),
      OpCase("groups do not divide")
          .in(random(dt, S({1, 4}, {5, 5}), 26)).in(random(dt, S({3, 2}, {3, 3}), 27)).attr(Attr::i("groups", 2))
          .error(kInvalid, {HostTensor(dt, S({1, 3}, {3, 3}))}, {name, "groups = 2"}),
      OpCase("kernel larger than padded input")
          .in(random(dt, S({1, 2}, {3, 3}), 28)).in(random(dt, S({2, 2}, {5, 5}), 29))
          .error(kInvalid, {HostTensor(dt, S({1, 2}, {1, 1}))}, {name, "kernel size 5", "padded input size 3"}),
      OpCase("stride 0")
          .in(random(dt, S({1, 2}, {5, 5}), 30)).in(random(dt, S({2, 2}, {3, 3}), 31)).attr(Attr::ints("stride", {0}))
          .error(kInvalid, {HostTensor(dt, S({1, 2}, {3, 3}))}, {name, "'stride'", "must be positive"}),
      OpCase("negative padding")
          .in(random(dt, S({1, 2}, {5, 5}), 32)).in(random(dt, S({2, 2}, {3, 3}), 33)).attr(Attr::ints("padding", {-1}))
          .error(kInvalid, {HostTensor(dt, S({1, 2}, {3, 3}))}, {name, "'padding'", "must not be negative"}),
      OpCase("dilation 0")
          .in(random(dt, S({1, 2}, {5, 5}), 34)).in(random(dt, S({2, 2}, {3, 3}), 35)).attr(Attr::ints("dilation", {0}))
          .error(kInvalid, {HostTensor(dt, S({1, 2}, {3, 3}))}, {name, "'dilation'", "must be positive"}),
      OpCase("bias shape")
          .in(random(dt, S({1, 2}, {5, 5}), 36)).in(random(dt, S({2, 2}, {3, 3}), 37)).in(random(dt, {3}, 38))
          .error(kInvalid, {HostTensor(dt, S({1, 2}, {3, 3}))}, {name, "bias", "[3]", "[2]"}),
      OpCase("weight rank")
          .in(random(dt, S({1, 2}, {5, 5}), 39)).in(random(dt, {2, 2}, 40))
          .error(kInvalid, {HostTensor(dt, S({1, 2}, {3, 3}))}, {name, "weight", "rank"}),
  };
}
std::vector<OpCase> conv1d_cases(hal_dtype_e dt) { return conv_cases(dt, 1); }
std::vector<OpCase> conv2d_cases(hal_dtype_e dt) { return conv_cases(dt, 2); }
HAL_CONFORMANCE_SUITE(conv1d, conv1d_cases, conv1d_ref);
HAL_CONFORMANCE_SUITE(conv2d, conv2d_cases, conv2d_ref);

// Gradients of y = conv(x, w) + b: scatter every (output, kernel tap) pair.
std::vector<HostTensor> conv_backward_ref(const OpCase& c) {
  int spatial = c.input(2).rank() - 2;
  ConvCase k = conv_case(c, spatial, 1, 2);
  HostTensor gy = as4(c.input(0), !k.batched, spatial == 1);
  const HostTensor &x = k.x, &w = k.w;
  HostTensor gx(x.dtype, x.shape), gw(x.dtype, w.shape), gb(x.dtype, {w.shape[0]});
  int64_t cout_g = w.shape[0] / k.a.groups, cin_g = w.shape[1];
  for (int64_t f = 0; f < gy.numel(); ++f) {
    V i = unravel(f, gy.shape);
    double g = gy.values[f];
    gb.values[i[1]] += g;
    for (int64_t ic = 0; ic < cin_g; ++ic)
      for (int64_t kh = 0; kh < w.shape[2]; ++kh)
        for (int64_t kw = 0; kw < w.shape[3]; ++kw) {
          int64_t ih = i[2] * k.a.stride[0] - k.a.pad[0] + kh * k.a.dil[0];
          int64_t iw = i[3] * k.a.stride[1] - k.a.pad[1] + kw * k.a.dil[1];
          if (ih < 0 || iw < 0 || ih >= x.shape[2] || iw >= x.shape[3]) continue;
          V xi{i[0], (i[1] / cout_g) * cin_g + ic, ih, iw}, wi{i[1], ic, kh, kw};
          gx.at(xi) += g * w.at(wi);
          gw.at(wi) += g * x.at(xi);
        }
  }
  return {from4(gx, k), reshaped(gw, c.input(2).shape), gb};
}

std::vector<OpCase> conv_backward_cases(hal_dtype_e dt) {
  return {
      OpCase("2-D basic").in(random(dt, {2, 4, 4, 5}, 1)).in(random(dt, {2, 3, 6, 7}, 2)).in(random(dt, {4, 3, 3, 3}, 3))
          .tol(kSumTol),
      OpCase("2-D stride 2 padding 1 groups 2")
          .in(random(dt, {1, 4, 3, 4}, 4)).in(random(dt, {1, 2, 6, 7}, 5)).in(random(dt, {4, 1, 3, 2}, 6))
          .attr(Attr::ints("stride", {2})).attr(Attr::ints("padding", {1, 1})).attr(Attr::i("groups", 2)),
      OpCase("2-D dilation 2").in(random(dt, {1, 2, 3, 2}, 7)).in(random(dt, {1, 3, 7, 6}, 8))
          .in(random(dt, {2, 3, 3, 3}, 9)).attr(Attr::ints("dilation", {2})).tol(kSumTol),
      OpCase("1-D stride 2").in(random(dt, {2, 3, 4}, 10)).in(random(dt, {2, 2, 9}, 11)).in(random(dt, {3, 2, 3}, 12))
          .attr(Attr::ints("stride", {2})),
      OpCase("1-D unbatched").in(random(dt, {3, 6}, 13)).in(random(dt, {2, 8}, 14)).in(random(dt, {3, 2, 3}, 15)),
      OpCase("zero batch").in(random(dt, {0, 2, 3, 3}, 16)).in(random(dt, {0, 2, 5, 5}, 17))
          .in(random(dt, {2, 2, 3, 3}, 18)),
      OpCase("grad_output shape")
          .in(random(dt, {1, 2, 4, 4}, 19)).in(random(dt, {1, 2, 5, 5}, 20)).in(random(dt, {2, 2, 3, 3}, 21))
          .error(kInvalid, {HostTensor(dt, {1, 2, 5, 5}), HostTensor(dt, {2, 2, 3, 3}), HostTensor(dt, {2})},
                 {"conv_backward", "grad_output", "[1, 2, 4, 4]", "[1, 2, 3, 3]"}),
      OpCase("weight rank 5")
          .in(random(dt, {1, 2, 3, 3}, 22)).in(random(dt, {1, 2, 5, 5}, 23)).in(random(dt, {2, 2, 3, 3, 1}, 24))
          .error(kInvalid, {HostTensor(dt, {1, 2, 5, 5}), HostTensor(dt, {2, 2, 3, 3, 1}), HostTensor(dt, {2})},
                 {"conv_backward", "weight", "rank 3", "4"}),
  };
}
HAL_CONFORMANCE_SUITE(conv_backward, conv_backward_cases, conv_backward_ref);

// y[n, oc, ih·s - p + kh·d, ...] += x[n, ic, ih, iw] · w[ic, oc % C_out/g, kh, kw] (+ bias).
std::vector<HostTensor> conv_transpose2d_ref(const OpCase& c) {
  ConvCase k = conv_case(c, 2, 0, 1);
  const HostTensor &x = k.x, &w = k.w;
  int64_t cin_g = x.shape[1] / k.a.groups, cout_g = w.shape[1], cout = cout_g * k.a.groups;
  int64_t o[2];
  for (int d = 0; d < 2; ++d)
    o[d] = (x.shape[2 + d] - 1) * k.a.stride[d] - 2 * k.a.pad[d] + k.a.dil[d] * (w.shape[2 + d] - 1) + k.a.opad[d] + 1;
  HostTensor y(x.dtype, {x.shape[0], cout, o[0], o[1]});
  for (int64_t f = 0; f < y.numel(); ++f)
    if (c.has_input(2)) y.values[f] = c.input(2).values[unravel(f, y.shape)[1]];
  for (int64_t f = 0; f < x.numel(); ++f) {
    V i = unravel(f, x.shape);
    for (int64_t oc = 0; oc < cout_g; ++oc)
      for (int64_t kh = 0; kh < w.shape[2]; ++kh)
        for (int64_t kw = 0; kw < w.shape[3]; ++kw) {
          int64_t yh = i[2] * k.a.stride[0] - k.a.pad[0] + kh * k.a.dil[0];
          int64_t yw = i[3] * k.a.stride[1] - k.a.pad[1] + kw * k.a.dil[1];
          if (yh < 0 || yw < 0 || yh >= o[0] || yw >= o[1]) continue;
          y.at({i[0], (i[1] / cin_g) * cout_g + oc, yh, yw}) += x.values[f] * w.at({i[1], oc, kh, kw});
        }
  }
  return {from4(y, k)};
}

std::vector<OpCase> conv_transpose2d_cases(hal_dtype_e dt) {
  return {
      OpCase("basic").in(random(dt, {2, 3, 4, 5}, 1)).in(random(dt, {3, 2, 3, 3}, 2)).in(random(dt, {2}, 3)),
      OpCase("stride 2 padding 1 output_padding 1")
          .in(random(dt, {1, 2, 3, 4}, 4)).in(random(dt, {2, 3, 3, 3}, 5))
          .attr(Attr::ints("stride", {2})).attr(Attr::ints("padding", {1})).attr(Attr::ints("output_padding", {1, 0})),
      OpCase("groups 2 dilation 2")
          .in(random(dt, {1, 4, 3, 3}, 6)).in(random(dt, {4, 3, 2, 2}, 7)).in(random(dt, {6}, 8))
          .attr(Attr::i("groups", 2)).attr(Attr::ints("dilation", {2})),
      OpCase("unbatched").in(random(dt, {2, 3, 3}, 9)).in(random(dt, {2, 2, 2, 2}, 10)),
      OpCase("zero batch").in(random(dt, {0, 2, 3, 3}, 11)).in(random(dt, {2, 2, 2, 2}, 12)),
      OpCase("output_padding too large")
          .in(random(dt, {1, 2, 3, 3}, 13)).in(random(dt, {2, 2, 3, 3}, 14)).attr(Attr::ints("output_padding", {1}))
          .error(kInvalid, {HostTensor(dt, {1, 2, 6, 6})}, {"conv_transpose2d", "output_padding", "stride"}),
      OpCase("channel mismatch")
          .in(random(dt, {1, 3, 3, 3}, 15)).in(random(dt, {2, 2, 3, 3}, 16))
          .error(kInvalid, {HostTensor(dt, {1, 2, 5, 5})}, {"conv_transpose2d", "3 channels", "weight"}),
  };
}
HAL_CONFORMANCE_SUITE(conv_transpose2d, conv_transpose2d_cases, conv_transpose2d_ref);

// ---- pooling ----------------------------------------------------------------------------

struct Pool {
  int64_t k[2], s[2], p[2], d[2] = {1, 1}, o[2];
  bool ceil = false;
  HostTensor x;  // as [N, C, H, W]
  bool batched;
};

V two(const V& v) { return v.size() == 1 ? V{v[0], v[0]} : v; }

// PyTorch's pooling_output_shape.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t o = static_cast<int64_t>(std::floor(static_cast<double>(num) / static_cast<double>(s))) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

Pool pool_of(const OpCase& c, size_t x_index) {
  Pool q;
  const HostTensor& x = c.input(x_index);
  q.batched = x.rank() == 4;
  q.x = as4(x, !q.batched, false);
  V k = two(c.attr_ints("kernel_size", {1})), s = two(c.attr_ints("stride", {})), p = two(c.attr_ints("padding", {0})),
    d = two(c.attr_ints("dilation", {1}));
  if (s.empty()) s = k;
  q.ceil = c.attr_bool("ceil_mode", false);
  for (int i = 0; i < 2; ++i) {
    q.k[i] = k[i], q.s[i] = s[i], q.p[i] = p[i], q.d[i] = d[i];
    q.o[i] = pool_out(q.x.shape[2 + i], q.k[i], q.s[i], q.p[i], q.d[i], q.ceil);
  }
  return q;
}

HostTensor pool_shaped(const Pool& q, HostTensor t) {
  if (!q.batched) t.shape.erase(t.shape.begin());
  return t;
}

std::vector<HostTensor> max_pool2d_ref(const OpCase& c) {
  Pool q = pool_of(c, 0);
  const HostTensor& x = q.x;
  V shape{x.shape[0], x.shape[1], q.o[0], q.o[1]};
  HostTensor y(x.dtype, shape), idx(HAL_DTYPE_INT64, shape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    V i = unravel(f, shape);
    double best = -std::numeric_limits<double>::infinity();
    int64_t arg = -1;
    for (int64_t kh = 0; kh < q.k[0]; ++kh)
      for (int64_t kw = 0; kw < q.k[1]; ++kw) {
        int64_t h = i[2] * q.s[0] - q.p[0] + kh * q.d[0], w = i[3] * q.s[1] - q.p[1] + kw * q.d[1];
        if (h < 0 || w < 0 || h >= x.shape[2] || w >= x.shape[3]) continue;
        double v = x.at({i[0], i[1], h, w});
        if (arg < 0 || v > best || std::isnan(v)) best = v, arg = h * x.shape[3] + w;
      }
    y.values[f] = best;
    idx.values[f] = static_cast<double>(arg);
  }
  return {pool_shaped(q, y), pool_shaped(q, idx)};
}

// Pooling cases shared by max_pool2d and avg_pool2d; WITH_DILATION for max.
std::vector<OpCase> pool_cases(hal_dtype_e dt, const char* name, bool max) {
  auto outs = [&](V shape) {
    std::vector<HostTensor> o{HostTensor(dt, shape)};
    if (max) o.emplace_back(HAL_DTYPE_INT64, shape);
    return o;
  };
  std::vector<OpCase> cases{
      OpCase("k2").in(random(dt, {2, 3, 6, 6}, 1)).attr(Attr::ints("kernel_size", {2})),
      OpCase("k3 s2 p1").in(random(dt, {1, 2, 7, 8}, 2)).attr(Attr::ints("kernel_size", {3}))
          .attr(Attr::ints("stride", {2})).attr(Attr::ints("padding", {1})),
      OpCase("k[3,2] s[1,2] ceil").in(random(dt, {1, 2, 5, 7}, 3)).attr(Attr::ints("kernel_size", {3, 2}))
          .attr(Attr::ints("stride", {1, 2})).attr(Attr::b("ceil_mode", true)),
      OpCase("ceil with padding").in(random(dt, {1, 1, 6, 6}, 4)).attr(Attr::ints("kernel_size", {3}))
          .attr(Attr::ints("stride", {2})).attr(Attr::ints("padding", {1})).attr(Attr::b("ceil_mode", true)),
      OpCase("unbatched").in(random(dt, {3, 5, 5}, 5)).attr(Attr::ints("kernel_size", {2})),
      OpCase("zero batch").in(random(dt, {0, 2, 4, 4}, 6)).attr(Attr::ints("kernel_size", {2})),
      OpCase("zero channels").in(random(dt, {2, 0, 4, 4}, 7)).attr(Attr::ints("kernel_size", {2})),
      OpCase("kernel 0").in(random(dt, {1, 1, 4, 4}, 8)).attr(Attr::ints("kernel_size", {0}))
          .error(kInvalid, outs({1, 1, 4, 4}), {name, "kernel_size", "must be positive"}),
      OpCase("stride 0").in(random(dt, {1, 1, 4, 4}, 9)).attr(Attr::ints("kernel_size", {2})).attr(Attr::ints("stride", {0}))
          .error(kInvalid, outs({1, 1, 2, 2}), {name, "stride", "must be positive"}),
      OpCase("negative padding").in(random(dt, {1, 1, 4, 4}, 10)).attr(Attr::ints("kernel_size", {2}))
          .attr(Attr::ints("padding", {-1})).error(kInvalid, outs({1, 1, 2, 2}), {name, "padding", "must not be negative"}),
      OpCase("padding over half kernel").in(random(dt, {1, 1, 4, 4}, 11)).attr(Attr::ints("kernel_size", {2}))
          .attr(Attr::ints("padding", {2})).error(kInvalid, outs({1, 1, 4, 4}), {name, "padding", "half"}),
      OpCase("kernel larger than input").in(random(dt, {1, 1, 3, 3}, 12)).attr(Attr::ints("kernel_size", {4}))
          .error(kInvalid, outs({1, 1, 1, 1}), {name, "kernel size 4", "padded input size 3"}),
      OpCase("missing kernel_size").in(random(dt, {1, 1, 4, 4}, 13))
          .error(kInvalid, outs({1, 1, 4, 4}), {name, "kernel_size"}),
      OpCase("rank 2").in(random(dt, {4, 4}, 14)).attr(Attr::ints("kernel_size", {2}))
          .error(kInvalid, outs({2, 2}), {name, "self", "rank"}),
      OpCase("kernel_size of 3 values").in(random(dt, {1, 1, 4, 4}, 15)).attr(Attr::ints("kernel_size", {2, 2, 2}))
          .error(kInvalid, outs({1, 1, 2, 2}), {name, "kernel_size", "[2, 2, 2]"}),
  };
  if (max) {
    HostTensor nan = random(dt, {1, 1, 4, 4}, 16);
    nan.values[5] = std::numeric_limits<double>::quiet_NaN();
    cases.push_back(OpCase("dilation 2").in(random(dt, {1, 2, 7, 7}, 17)).attr(Attr::ints("kernel_size", {3}))
                        .attr(Attr::ints("dilation", {2})).attr(Attr::ints("padding", {1})));
    cases.push_back(OpCase("NaN wins").in(nan).attr(Attr::ints("kernel_size", {2})));
    cases.push_back(OpCase("dilation 0").in(random(dt, {1, 1, 4, 4}, 18)).attr(Attr::ints("kernel_size", {2}))
                        .attr(Attr::ints("dilation", {0}))
                        .error(kInvalid, outs({1, 1, 2, 2}), {name, "dilation", "must be positive"}));
  } else {
    for (bool include : {true, false})
      cases.push_back(OpCase(include ? "padding, count_include_pad" : "padding, exclude pad")
                          .in(random(dt, {1, 2, 5, 6}, 19)).attr(Attr::ints("kernel_size", {3, 2}))
                          .attr(Attr::ints("padding", {1})).attr(Attr::ints("stride", {2, 1}))
                          .attr(Attr::b("count_include_pad", include)).attr(Attr::b("ceil_mode", true)));
    cases.push_back(OpCase("divisor_override").in(random(dt, {1, 2, 5, 5}, 20)).attr(Attr::ints("kernel_size", {2}))
                        .attr(Attr::ints("padding", {1})).attr(Attr::i("divisor_override", 3)));
    cases.push_back(OpCase("negative divisor_override").in(random(dt, {1, 1, 4, 4}, 21))
                        .attr(Attr::ints("kernel_size", {2})).attr(Attr::i("divisor_override", -2))
                        .error(kInvalid, outs({1, 1, 2, 2}), {name, "divisor_override", "-2"}));
  }
  return cases;
}

std::vector<OpCase> max_pool2d_cases(hal_dtype_e dt) { return pool_cases(dt, "max_pool2d", true); }
HAL_CONFORMANCE_SUITE(max_pool2d, max_pool2d_cases, max_pool2d_ref);

// grad_input[n, c, indices[...]] += grad_output[...].
std::vector<HostTensor> max_pool2d_backward_ref(const OpCase& c) {
  Pool q = pool_of(c, 1);
  HostTensor gx(q.x.dtype, q.x.shape);
  HostTensor gy = as4(c.input(0), !q.batched, false), idx = as4(c.input(2), !q.batched, false);
  int64_t plane = q.x.shape[2] * q.x.shape[3];
  for (int64_t f = 0; f < gy.numel(); ++f) {
    V i = unravel(f, gy.shape);
    gx.values[(i[0] * q.x.shape[1] + i[1]) * plane + static_cast<int64_t>(idx.values[f])] += gy.values[f];
  }
  return {pool_shaped(q, gx)};
}

// Indices in [0, H·W) for OUT_SHAPE (any valid index is a valid input).
HostTensor pool_indices(V out_shape, int64_t plane, uint64_t seed) {
  HostTensor t = random(HAL_DTYPE_INT64, std::move(out_shape), seed, 0.0, static_cast<double>(plane));
  return t;
}

std::vector<OpCase> max_pool2d_backward_cases(hal_dtype_e dt) {
  HostTensor bad = pool_indices({1, 1, 2, 2}, 16, 9);
  bad.values[3] = 16;
  return {
      OpCase("k2").in(random(dt, {2, 3, 3, 3}, 1)).in(random(dt, {2, 3, 6, 6}, 2)).in(pool_indices({2, 3, 3, 3}, 36, 3))
          .attr(Attr::ints("kernel_size", {2})),
      OpCase("k3 s1 p1 (overlapping)").in(random(dt, {1, 2, 5, 5}, 4)).in(random(dt, {1, 2, 5, 5}, 5))
          .in(pool_indices({1, 2, 5, 5}, 25, 6)).attr(Attr::ints("kernel_size", {3})).attr(Attr::ints("stride", {1}))
          .attr(Attr::ints("padding", {1})),
      OpCase("unbatched").in(random(dt, {2, 2, 2}, 7)).in(random(dt, {2, 4, 4}, 8)).in(pool_indices({2, 2, 2}, 16, 10))
          .attr(Attr::ints("kernel_size", {2})),
      OpCase("zero batch").in(random(dt, {0, 1, 2, 2}, 11)).in(random(dt, {0, 1, 4, 4}, 12))
          .in(HostTensor(HAL_DTYPE_INT64, {0, 1, 2, 2})).attr(Attr::ints("kernel_size", {2})),
      OpCase("index out of range").in(random(dt, {1, 1, 2, 2}, 13)).in(random(dt, {1, 1, 4, 4}, 14)).in(bad)
          .attr(Attr::ints("kernel_size", {2}))
          .error(HAL_STATUS_OUT_OF_RANGE, {HostTensor(dt, {1, 1, 4, 4})}, {"max_pool2d_backward", "16", "indices", "[0, 16)"}),
      OpCase("grad_output shape").in(random(dt, {1, 1, 3, 3}, 15)).in(random(dt, {1, 1, 4, 4}, 16))
          .in(pool_indices({1, 1, 3, 3}, 16, 17)).attr(Attr::ints("kernel_size", {2}))
          .error(kInvalid, {HostTensor(dt, {1, 1, 4, 4})}, {"max_pool2d_backward", "grad_output", "[1, 1, 2, 2]"}),
  };
}
HAL_CONFORMANCE_SUITE(max_pool2d_backward, max_pool2d_backward_cases, max_pool2d_backward_ref);

// One avg_pool2d window (clipped) and its divisor, as PyTorch computes them.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  double divisor;
};
AvgWindow avg_window(const Pool& q, const OpCase& c, int64_t oh, int64_t ow) {
  int64_t H = q.x.shape[2], W = q.x.shape[3];
  int64_t h0 = oh * q.s[0] - q.p[0], w0 = ow * q.s[1] - q.p[1];
  int64_t h1 = std::min(h0 + q.k[0], H + q.p[0]), w1 = std::min(w0 + q.k[1], W + q.p[1]);
  double padded = static_cast<double>((h1 - h0) * (w1 - w0));
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0), h1 = std::min(h1, H), w1 = std::min(w1, W);
  int64_t over = c.attr_int("divisor_override", 0);
  double div = over != 0 ? static_cast<double>(over)
               : c.attr_bool("count_include_pad", true) ? padded
                                                          : static_cast<double>((h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, div};
}

std::vector<HostTensor> avg_pool2d_ref(const OpCase& c) {
  Pool q = pool_of(c, 0);
  V shape{q.x.shape[0], q.x.shape[1], q.o[0], q.o[1]};
  HostTensor y(q.x.dtype, shape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    V i = unravel(f, shape);
    AvgWindow w = avg_window(q, c, i[2], i[3]);
    double s = 0;
    for (int64_t h = w.h0; h < w.h1; ++h)
      for (int64_t x = w.w0; x < w.w1; ++x) s += q.x.at({i[0], i[1], h, x});
    y.values[f] = (w.h0 >= w.h1 || w.w0 >= w.w1) ? 0.0 : s / w.divisor;
  }
  return {pool_shaped(q, y)};
}

std::vector<OpCase> avg_pool2d_cases(hal_dtype_e dt) { return pool_cases(dt, "avg_pool2d", false); }
HAL_CONFORMANCE_SUITE(avg_pool2d, avg_pool2d_cases, avg_pool2d_ref);

std::vector<HostTensor> avg_pool2d_backward_ref(const OpCase& c) {
  Pool q = pool_of(c, 1);
  HostTensor gy = as4(c.input(0), !q.batched, false), gx(q.x.dtype, q.x.shape);
  for (int64_t f = 0; f < gy.numel(); ++f) {
    V i = unravel(f, gy.shape);
    AvgWindow w = avg_window(q, c, i[2], i[3]);
    for (int64_t h = w.h0; h < w.h1; ++h)
      for (int64_t x = w.w0; x < w.w1; ++x) gx.at({i[0], i[1], h, x}) += gy.values[f] / w.divisor;
  }
  return {pool_shaped(q, gx)};
}

std::vector<OpCase> avg_pool2d_backward_cases(hal_dtype_e dt) {
  return {
      OpCase("k2").in(random(dt, {2, 3, 3, 3}, 1)).in(random(dt, {2, 3, 6, 6}, 2)).attr(Attr::ints("kernel_size", {2})),
      OpCase("k3 s1 p1 exclude pad").in(random(dt, {1, 2, 5, 5}, 3)).in(random(dt, {1, 2, 5, 5}, 4))
          .attr(Attr::ints("kernel_size", {3})).attr(Attr::ints("stride", {1})).attr(Attr::ints("padding", {1}))
          .attr(Attr::b("count_include_pad", false)),
      OpCase("ceil, divisor_override").in(random(dt, {1, 1, 3, 3}, 5)).in(random(dt, {1, 1, 5, 5}, 6))
          .attr(Attr::ints("kernel_size", {2})).attr(Attr::b("ceil_mode", true)).attr(Attr::i("divisor_override", 5)),
      OpCase("unbatched").in(random(dt, {2, 2, 2}, 7)).in(random(dt, {2, 4, 4}, 8)).attr(Attr::ints("kernel_size", {2})),
      OpCase("zero batch").in(random(dt, {0, 1, 2, 2}, 9)).in(random(dt, {0, 1, 4, 4}, 10))
          .attr(Attr::ints("kernel_size", {2})),
      OpCase("grad_output shape").in(random(dt, {1, 1, 3, 3}, 11)).in(random(dt, {1, 1, 4, 4}, 12))
          .attr(Attr::ints("kernel_size", {2}))
          .error(kInvalid, {HostTensor(dt, {1, 1, 4, 4})}, {"avg_pool2d_backward", "grad_output", "[1, 1, 2, 2]"}),
  };
}
HAL_CONFORMANCE_SUITE(avg_pool2d_backward, avg_pool2d_backward_cases, avg_pool2d_backward_ref);

// Adaptive window of output index O (of OUT) over IN: [floor(o·in/out), ceil((o+1)·in/out)).
int64_t adaptive_lo(int64_t o, int64_t out, int64_t in) {
  return static_cast<int64_t>(std::floor(static_cast<double>(o * in) / static_cast<double>(out)));
}
int64_t adaptive_hi(int64_t o, int64_t out, int64_t in) {
  return static_cast<int64_t>(std::ceil(static_cast<double>((o + 1) * in) / static_cast<double>(out)));
}

std::vector<HostTensor> adaptive_avg_pool2d_ref(const OpCase& c) {
  const HostTensor& x0 = c.input(0);
  bool batched = x0.rank() == 4;
  HostTensor x = as4(x0, !batched, false);
  V o = two(c.attr_ints("output_size", {1}));
  V shape{x.shape[0], x.shape[1], o[0], o[1]};
  HostTensor y(x.dtype, shape);
  for (int64_t f = 0; f < y.numel(); ++f) {
    V i = unravel(f, shape);
    int64_t h0 = adaptive_lo(i[2], o[0], x.shape[2]), h1 = adaptive_hi(i[2], o[0], x.shape[2]);
    int64_t w0 = adaptive_lo(i[3], o[1], x.shape[3]), w1 = adaptive_hi(i[3], o[1], x.shape[3]);
    double s = 0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) s += x.at({i[0], i[1], h, w});
    y.values[f] = s / static_cast<double>((h1 - h0) * (w1 - w0));
  }
  if (!batched) shape.erase(shape.begin());
  return {reshaped(y, shape)};
}

std::vector<OpCase> adaptive_avg_pool2d_cases(hal_dtype_e dt) {
  return {
      OpCase("6x6 -> 3").in(random(dt, {2, 3, 6, 6}, 1)).attr(Attr::ints("output_size", {3})),
      OpCase("7x5 -> [3,2] (overlapping)").in(random(dt, {1, 2, 7, 5}, 2)).attr(Attr::ints("output_size", {3, 2})),
      OpCase("global").in(random(dt, {2, 4, 5, 3}, 3)).attr(Attr::ints("output_size", {1})),
      OpCase("upsampling 2x3 -> 4x5").in(random(dt, {1, 1, 2, 3}, 4)).attr(Attr::ints("output_size", {4, 5})),
      OpCase("unbatched").in(random(dt, {3, 4, 4}, 5)).attr(Attr::ints("output_size", {2})),
      OpCase("zero batch").in(random(dt, {0, 3, 4, 4}, 6)).attr(Attr::ints("output_size", {2})),
      OpCase("negative size").in(random(dt, {1, 1, 4, 4}, 7)).attr(Attr::ints("output_size", {-1}))
          .error(kInvalid, {HostTensor(dt, {1, 1, 1, 1})}, {"adaptive_avg_pool2d", "output_size", "-1"}),
      OpCase("missing output_size").in(random(dt, {1, 1, 4, 4}, 8))
          .error(kInvalid, {HostTensor(dt, {1, 1, 1, 1})}, {"adaptive_avg_pool2d", "output_size"}),
      OpCase("empty spatial").in(random(dt, {1, 1, 0, 4}, 9)).attr(Attr::ints("output_size", {2}))
          .error(kInvalid, {HostTensor(dt, {1, 1, 2, 2})}, {"adaptive_avg_pool2d", "self", "[1, 1, 0, 4]"}),
  };
}
HAL_CONFORMANCE_SUITE(adaptive_avg_pool2d, adaptive_avg_pool2d_cases, adaptive_avg_pool2d_ref);

std::vector<HostTensor> adaptive_avg_pool2d_backward_ref(const OpCase& c) {
  const HostTensor& x0 = c.input(1);
  bool batched = x0.rank() == 4;
  HostTensor x = as4(x0, !batched, false), gy = as4(c.input(0), !batched, false);
  HostTensor gx(x.dtype, x.shape);
  int64_t oh = gy.shape[2], ow = gy.shape[3];
  for (int64_t f = 0; f < gy.numel(); ++f) {
    V i = unravel(f, gy.shape);
    int64_t h0 = adaptive_lo(i[2], oh, x.shape[2]), h1 = adaptive_hi(i[2], oh, x.shape[2]);
    int64_t w0 = adaptive_lo(i[3], ow, x.shape[3]), w1 = adaptive_hi(i[3], ow, x.shape[3]);
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) gx.at({i[0], i[1], h, w}) += gy.values[f] / static_cast<double>((h1 - h0) * (w1 - w0));
  }
  return {reshaped(gx, x0.shape)};
}

std::vector<OpCase> adaptive_avg_pool2d_backward_cases(hal_dtype_e dt) {
  return {
      OpCase("6x6 <- 3").in(random(dt, {2, 3, 3, 3}, 1)).in(random(dt, {2, 3, 6, 6}, 2)),
      OpCase("7x5 <- [3,2]").in(random(dt, {1, 2, 3, 2}, 3)).in(random(dt, {1, 2, 7, 5}, 4)),
      OpCase("2x3 <- 4x5").in(random(dt, {1, 1, 4, 5}, 5)).in(random(dt, {1, 1, 2, 3}, 6)),
      OpCase("unbatched").in(random(dt, {3, 2, 2}, 7)).in(random(dt, {3, 4, 4}, 8)),
      OpCase("zero batch").in(random(dt, {0, 3, 2, 2}, 9)).in(random(dt, {0, 3, 4, 4}, 10)),
      OpCase("channel mismatch").in(random(dt, {1, 2, 2, 2}, 11)).in(random(dt, {1, 3, 4, 4}, 12))
          .error(kInvalid, {HostTensor(dt, {1, 3, 4, 4})}, {"adaptive_avg_pool2d_backward", "grad_output", "[1, 2, 2, 2]"}),
  };
}
HAL_CONFORMANCE_SUITE(adaptive_avg_pool2d_backward, adaptive_avg_pool2d_backward_cases, adaptive_avg_pool2d_backward_ref);

}  // namespace
}  // namespace hal::conformance
