// Shape rules of the "linalg" group (matrix multiplication, convolution and
// pooling). The geometry helpers (conv_geometry, pool_geometry) validate the
// attributes and are shared with kernels, so a kernel reads the same sizes
// the rule checked.
#ifndef HAL_COMMON_SHAPES_LINALG_HPP_
#define HAL_COMMON_SHAPES_LINALG_HPP_

#include <cstring>

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

namespace linalg {

inline const char* input_name(const OpCall& call, size_t i) { return call.schema().inputs[i].name; }

// The attribute NAME of the call (linalg rules read attributes by name, as
// their positions differ between ops).
inline const AttrValue& attr(const OpCall& call, const char* name) {
  const OpSchema& s = call.schema();
  for (size_t i = 0; i < s.attr_count; ++i)
    if (std::strcmp(s.attrs[i].name, name) == 0) return call.attr(i);
  fail(HAL_STATUS_INTERNAL, call.name(), ": no attribute '", name, "' in the catalog");
}

// Every defined floating input has the first input's dtype (no promotion,
// as torch.mm); int64 index inputs are exempt.
inline void require_same_dtype(const OpCall& call) {
  const Tensor& first = call.input(0);
  for (size_t i = 1; i < call.input_count(); ++i) {
    const Tensor& t = call.input(i);
    if (!t.defined || t.dtype == HAL_DTYPE_INT64) continue;
    if (t.dtype != first.dtype)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i), "' has dtype ",
           dtype_name(t.dtype), " but input '", input_name(call, 0), "' has dtype ", dtype_name(first.dtype),
           " (they must match)");
  }
}

inline void require_rank_in(const OpCall& call, size_t i, int lo, int hi) {
  const Tensor& t = call.input(i);
  if (t.rank < lo || t.rank > hi)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i), "' must have rank ", lo,
         lo == hi ? std::string() : " to " + std::to_string(hi), " but has shape ", t.shape_str());
}

// "mm: self [2, 3] and mat2 [4, 5]: sizes 3 and 4 must match"
inline void require_inner(const OpCall& call, size_t a, size_t b, int64_t ka, int64_t kb) {
  if (ka != kb)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": ", input_name(call, a), " ", call.input(a).shape_str(), " and ",
         input_name(call, b), " ", call.input(b).shape_str(), ": sizes ", ka, " and ", kb, " must match");
}

// Input I (rank <= TARGET's) must broadcast to TARGET.
inline void require_broadcasts_to(const OpCall& call, size_t i, const std::vector<int64_t>& target) {
  const Tensor& t = call.input(i);
  bool ok = t.rank <= static_cast<int>(target.size());
  for (int d = 0; ok && d < t.rank; ++d) {
    int64_t s = t.shape[d], o = target[target.size() - t.rank + d];
    ok = s == o || s == 1;
  }
  if (!ok)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i), "' of shape ", t.shape_str(),
         " does not broadcast to the result shape ", shape_string(target.data(), static_cast<int>(target.size())));
}

// Attribute NAME as N values: 1 value is repeated, N taken as is. EMPTY_AS
// (when non-null) replaces an empty list.
inline void spatial(const OpCall& call, const char* name, int n, int64_t* out,
                    const std::vector<int64_t>* empty_as = nullptr) {
  const std::vector<int64_t>* v = &attr(call, name).as_ints();
  if (v->empty() && empty_as != nullptr) v = empty_as;
  if (v->size() != 1 && v->size() != static_cast<size_t>(n))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute '", name, "' = ",
         shape_string(v->data(), static_cast<int>(v->size())), " must hold 1", n == 1 ? "" : " or 2", " value",
         n == 1 ? "" : "s");
  for (int d = 0; d < n; ++d) out[d] = (*v)[v->size() == 1 ? 0 : d];
}

inline void require_min(const OpCall& call, const char* name, const int64_t* v, int n, int64_t lo) {
  for (int d = 0; d < n; ++d)
    if (v[d] < lo)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute '", name, "' = ", shape_string(v, n),
           lo == 0 ? " must not be negative" : " must be positive");
}

}  // namespace linalg

// ---- matrix multiplication --------------------------------------------------

inline void mm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  require_rank(call, 0, 2);
  require_rank(call, 1, 2);
  const Tensor &a = call.input(0), &b = call.input(1);
  linalg::require_inner(call, 0, 1, a.shape[1], b.shape[0]);
  outputs[0].set_shape({a.shape[0], b.shape[1]});
}

inline void bmm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  require_rank(call, 0, 3);
  require_rank(call, 1, 3);
  const Tensor &a = call.input(0), &b = call.input(1);
  if (a.shape[0] != b.shape[0])
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": self ", a.shape_str(), " and mat2 ", b.shape_str(),
         ": batch sizes ", a.shape[0], " and ", b.shape[0], " must match");
  linalg::require_inner(call, 0, 1, a.shape[2], b.shape[1]);
  outputs[0].set_shape({a.shape[0], a.shape[1], b.shape[2]});
}

// torch.matmul's result shape; BATCH receives the broadcast batch dims.
inline std::vector<int64_t> matmul_shape(const OpCall& call, std::vector<int64_t>* batch = nullptr) {
  const Tensor &a = call.input(0), &b = call.input(1);
  if (a.rank < 1 || b.rank < 1)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": inputs must have rank >= 1 but self is ", a.shape_str(),
         " and other is ", b.shape_str());
  int64_t k_a = a.shape[a.rank - 1], k_b = b.shape[b.rank == 1 ? 0 : b.rank - 2];
  linalg::require_inner(call, 0, 1, k_a, k_b);
  std::vector<int64_t> ba(a.shape, a.shape + std::max(a.rank - 2, 0));
  std::vector<int64_t> bb(b.shape, b.shape + std::max(b.rank - 2, 0));
  std::vector<int64_t> out(std::max(ba.size(), bb.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t sa = i + ba.size() >= out.size() ? ba[i + ba.size() - out.size()] : 1;
    int64_t sb = i + bb.size() >= out.size() ? bb[i + bb.size() - out.size()] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": batch dims of self ", a.shape_str(), " and other ",
           b.shape_str(), " do not broadcast (size ", sa, " vs ", sb, ")");
    out[i] = sa == 1 ? sb : sa;
  }
  if (batch != nullptr) *batch = out;
  if (a.rank >= 2) out.push_back(a.shape[a.rank - 2]);
  if (b.rank >= 2) out.push_back(b.shape[b.rank - 1]);
  return out;
}

inline void matmul(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  outputs[0].set_shape(matmul_shape(call));
}

inline void addmm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  require_rank(call, 1, 2);
  require_rank(call, 2, 2);
  const Tensor &a = call.input(1), &b = call.input(2);
  linalg::require_inner(call, 1, 2, a.shape[1], b.shape[0]);
  std::vector<int64_t> shape{a.shape[0], b.shape[1]};
  linalg::require_broadcasts_to(call, 0, shape);
  outputs[0].set_shape(shape);
}

inline void baddbmm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  require_rank(call, 1, 3);
  require_rank(call, 2, 3);
  const Tensor &a = call.input(1), &b = call.input(2);
  if (a.shape[0] != b.shape[0])
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": batch1 ", a.shape_str(), " and batch2 ", b.shape_str(),
         ": batch sizes ", a.shape[0], " and ", b.shape[0], " must match");
  linalg::require_inner(call, 1, 2, a.shape[2], b.shape[1]);
  std::vector<int64_t> shape{a.shape[0], a.shape[1], b.shape[2]};
  linalg::require_broadcasts_to(call, 0, shape);
  outputs[0].set_shape(shape);
}

inline void linear(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  linalg::require_rank_in(call, 0, 1, HAL_TENSOR_MAX_RANK);
  require_rank(call, 1, 2);
  const Tensor &x = call.input(0), &w = call.input(1);
  linalg::require_inner(call, 0, 1, x.shape[x.rank - 1], w.shape[1]);
  if (const Tensor* bias = call.optional_input(2); bias != nullptr && (bias->rank != 1 || bias->shape[0] != w.shape[0]))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'bias' has shape ", bias->shape_str(), " but must be [",
         w.shape[0], "] (weight is ", w.shape_str(), ")");
  std::vector<int64_t> shape = x.sizes();
  shape.back() = w.shape[0];
  outputs[0].set_shape(shape);
}

inline void linear_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  linalg::require_rank_in(call, 1, 1, HAL_TENSOR_MAX_RANK);
  require_rank(call, 2, 2);
  const Tensor &g = call.input(0), &x = call.input(1), &w = call.input(2);
  linalg::require_inner(call, 1, 2, x.shape[x.rank - 1], w.shape[1]);
  std::vector<int64_t> expect = x.sizes();
  expect.back() = w.shape[0];
  if (g.sizes() != expect)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'grad_output' has shape ", g.shape_str(),
         " but must be ", shape_string(expect.data(), static_cast<int>(expect.size())), " (input ", x.shape_str(),
         ", weight ", w.shape_str(), ")");
  outputs[0].set_shape(x.sizes());
  outputs[1].set_shape(w.sizes());
  outputs[2].set_shape({w.shape[0]});
}

// ---- convolution --------------------------------------------------------------

// The sizes of one (transposed) convolution, validated. Unbatched inputs
// have N = 1 and batched = false.
struct ConvGeometry {
  int spatial = 2;  // 1 or 2
  bool batched = true;
  bool transposed = false;
  int64_t n = 0, c_in = 0, c_out = 0, groups = 1;
  int64_t in[2] = {1, 1}, kernel[2] = {1, 1}, out[2] = {1, 1};
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1}, output_padding[2] = {0, 0};

  // The (forward) output's shape, [N,] C_out, spatial...
  std::vector<int64_t> out_shape() const {
    std::vector<int64_t> s;
    if (batched) s.push_back(n);
    s.push_back(c_out);
    for (int d = 0; d < spatial; ++d) s.push_back(out[d]);
    return s;
  }
};

// Geometry of a convolution with input INPUT_INDEX and weight WEIGHT_INDEX
// (bias, when BIAS_INDEX names a defined input, must be [C_out]).
inline ConvGeometry conv_geometry(const OpCall& call, int spatial, bool transposed, size_t input_index = 0,
                                  size_t weight_index = 1, size_t bias_index = 2) {
  ConvGeometry g;
  g.spatial = spatial;
  g.transposed = transposed;
  const Tensor &x = call.input(input_index), &w = call.input(weight_index);
  const char* xn = linalg::input_name(call, input_index);
  if (x.rank != spatial + 1 && x.rank != spatial + 2)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", xn, "' must have rank ", spatial + 1, " or ",
         spatial + 2, " but has shape ", x.shape_str());
  if (w.rank != spatial + 2)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'weight' must have rank ", spatial + 2,
         " but has shape ", w.shape_str());
  g.batched = x.rank == spatial + 2;
  int off = g.batched ? 1 : 0;
  g.n = g.batched ? x.shape[0] : 1;
  g.c_in = x.shape[off];
  g.groups = linalg::attr(call, "groups").as_int();
  if (g.groups <= 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'groups' = ", g.groups, " must be positive");
  linalg::spatial(call, "stride", spatial, g.stride);
  linalg::spatial(call, "padding", spatial, g.padding);
  linalg::spatial(call, "dilation", spatial, g.dilation);
  linalg::require_min(call, "stride", g.stride, spatial, 1);
  linalg::require_min(call, "padding", g.padding, spatial, 0);
  linalg::require_min(call, "dilation", g.dilation, spatial, 1);
  if (transposed) {
    linalg::spatial(call, "output_padding", spatial, g.output_padding);
    linalg::require_min(call, "output_padding", g.output_padding, spatial, 0);
  }
  for (int d = 0; d < spatial; ++d) {
    g.in[d] = x.shape[off + 1 + d];
    g.kernel[d] = w.shape[2 + d];
  }
  // Weight: [C_out, C_in/groups, k...] or, transposed, [C_in, C_out/groups, k...].
  int64_t w_in = transposed ? w.shape[0] : w.shape[1] * g.groups;
  if (g.c_in != w_in || (transposed && w.shape[0] % g.groups != 0) || g.c_in % g.groups != 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", xn, "' ", x.shape_str(), " has ", g.c_in,
         " channels but weight ", w.shape_str(), " with groups = ", g.groups, " expects ", w_in,
         " (a multiple of groups)");
  g.c_out = transposed ? w.shape[1] * g.groups : w.shape[0];
  if (!transposed && g.c_out % g.groups != 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": weight ", w.shape_str(), " has ", g.c_out,
         " output channels, not divisible by groups = ", g.groups);
  for (int d = 0; d < spatial; ++d) {
    if (g.kernel[d] <= 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": weight ", w.shape_str(), " has a kernel size of ",
           g.kernel[d], " (must be positive)");
    int64_t eff = g.dilation[d] * (g.kernel[d] - 1) + 1;
    if (transposed) {
      if (g.output_padding[d] >= g.stride[d] && g.output_padding[d] >= g.dilation[d])
        fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'output_padding' = ", g.output_padding[d],
             " must be smaller than stride (", g.stride[d], ") or dilation (", g.dilation[d], ")");
      g.out[d] = (g.in[d] - 1) * g.stride[d] - 2 * g.padding[d] + eff + g.output_padding[d];
      if (g.out[d] <= 0 || g.in[d] == 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", xn, "' ", x.shape_str(), " gives output size ",
             g.out[d], " in spatial dim ", d, " (must be positive)");
    } else {
      if (g.in[d] + 2 * g.padding[d] < eff)
        fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": kernel size ", eff, " (weight ", w.shape_str(),
             ", dilation ", g.dilation[d], ") is larger than the padded input size ", g.in[d] + 2 * g.padding[d],
             " (input '", xn, "' ", x.shape_str(), ", padding ", g.padding[d], ")");
      g.out[d] = (g.in[d] + 2 * g.padding[d] - eff) / g.stride[d] + 1;
    }
  }
  if (const Tensor* b = call.optional_input(bias_index); b != nullptr && (b->rank != 1 || b->shape[0] != g.c_out))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'bias' has shape ", b->shape_str(), " but must be [",
         g.c_out, "]");
  return g;
}

// conv1d / conv2d (by the op's name).
inline void conv(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  int spatial = std::strcmp(call.name(), "conv1d") == 0 ? 1 : 2;
  outputs[0].set_shape(conv_geometry(call, spatial, false).out_shape());
}

inline ConvGeometry conv_backward_geometry(const OpCall& call) {
  linalg::require_same_dtype(call);
  const Tensor& w = call.input(2);
  if (w.rank != 3 && w.rank != 4)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'weight' must have rank 3 (conv1d) or 4 (conv2d) but has shape ",
         w.shape_str());
  ConvGeometry g = conv_geometry(call, w.rank - 2, false, 1, 2, 99);
  const Tensor& go = call.input(0);
  std::vector<int64_t> expect = g.out_shape();
  if (go.sizes() != expect)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'grad_output' has shape ", go.shape_str(),
         " but the forward output is ", shape_string(expect.data(), static_cast<int>(expect.size())));
  return g;
}

inline void conv_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  ConvGeometry g = conv_backward_geometry(call);
  outputs[0].set_shape(call.input(1).sizes());
  outputs[1].set_shape(call.input(2).sizes());
  outputs[2].set_shape({g.c_out});
}

inline void conv_transpose2d(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  outputs[0].set_shape(conv_geometry(call, 2, true).out_shape());
}

// ---- pooling --------------------------------------------------------------------

struct PoolGeometry {
  bool batched = true;
  int64_t n = 1, c = 0, in[2] = {0, 0}, out[2] = {0, 0};
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1};
  bool ceil_mode = false;

  std::vector<int64_t> out_shape() const {
    std::vector<int64_t> s;
    if (batched) s.push_back(n);
    s.insert(s.end(), {c, out[0], out[1]});
    return s;
  }
};

// Input INDEX as [N, C, H, W] or [C, H, W]; H and W must not be empty.
inline PoolGeometry pool_input(const OpCall& call, size_t index) {
  const Tensor& x = call.input(index);
  linalg::require_rank_in(call, index, 3, 4);
  PoolGeometry g;
  g.batched = x.rank == 4;
  int off = g.batched ? 1 : 0;
  g.n = g.batched ? x.shape[0] : 1;
  g.c = x.shape[off];
  g.in[0] = x.shape[off + 1];
  g.in[1] = x.shape[off + 2];
  if (g.in[0] == 0 || g.in[1] == 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", linalg::input_name(call, index), "' ",
         x.shape_str(), " has an empty spatial dim");
  return g;
}

// max_pool2d / avg_pool2d geometry (avg has no dilation) of input INDEX.
inline PoolGeometry pool_geometry(const OpCall& call, size_t index, bool has_dilation) {
  PoolGeometry g = pool_input(call, index);
  linalg::spatial(call, "kernel_size", 2, g.kernel);
  linalg::require_min(call, "kernel_size", g.kernel, 2, 1);
  const std::vector<int64_t>& k = linalg::attr(call, "kernel_size").as_ints();
  linalg::spatial(call, "stride", 2, g.stride, &k);
  linalg::require_min(call, "stride", g.stride, 2, 1);
  linalg::spatial(call, "padding", 2, g.padding);
  linalg::require_min(call, "padding", g.padding, 2, 0);
  if (has_dilation) {
    linalg::spatial(call, "dilation", 2, g.dilation);
    linalg::require_min(call, "dilation", g.dilation, 2, 1);
  }
  g.ceil_mode = linalg::attr(call, "ceil_mode").as_bool();
  for (int d = 0; d < 2; ++d) {
    if (g.padding[d] > g.kernel[d] / 2)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'padding' = ", g.padding[d],
           " must be at most half the kernel size ", g.kernel[d]);
    int64_t eff = g.dilation[d] * (g.kernel[d] - 1) + 1;
    int64_t span = g.in[d] + 2 * g.padding[d] - eff + (g.ceil_mode ? g.stride[d] - 1 : 0);
    int64_t o = (span < 0 ? -((-span + g.stride[d] - 1) / g.stride[d]) : span / g.stride[d]) + 1;
    if (g.ceil_mode && (o - 1) * g.stride[d] >= g.in[d] + g.padding[d]) --o;
    if (o <= 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": kernel size ", eff, " is larger than the padded input size ",
           g.in[d] + 2 * g.padding[d], " (input '", linalg::input_name(call, index), "' ",
           call.input(index).shape_str(), ", padding ", g.padding[d], ")");
    g.out[d] = o;
  }
  if (!has_dilation && linalg::attr(call, "divisor_override").as_int() < 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'divisor_override' = ",
         linalg::attr(call, "divisor_override").as_int(), " must not be negative (0 = none)");
  return g;
}

// Input 0 (grad_output; and input 2, indices, when INDICES) must have the
// forward output's shape.
inline void require_grad_output(const OpCall& call, const PoolGeometry& g, bool indices) {
  std::vector<int64_t> expect = g.out_shape();
  for (size_t i : {size_t{0}, size_t{2}}) {
    if (i == 2 && !indices) break;
    const Tensor& t = call.input(i);
    if (t.sizes() != expect)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", linalg::input_name(call, i), "' has shape ",
           t.shape_str(), " but the forward output is ", shape_string(expect.data(), static_cast<int>(expect.size())));
  }
}

inline void max_pool2d(const OpCall& call, std::vector<TensorMeta>& outputs) {
  std::vector<int64_t> s = pool_geometry(call, 0, true).out_shape();
  outputs[0].set_shape(s);
  outputs[1].set_shape(s);
}

inline void max_pool2d_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  require_grad_output(call, pool_geometry(call, 1, true), true);
  outputs[0].set_shape(call.input(1).sizes());
}

inline void avg_pool2d(const OpCall& call, std::vector<TensorMeta>& outputs) {
  outputs[0].set_shape(pool_geometry(call, 0, false).out_shape());
}

inline void avg_pool2d_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  require_grad_output(call, pool_geometry(call, 1, false), false);
  outputs[0].set_shape(call.input(1).sizes());
}

inline PoolGeometry adaptive_pool_geometry(const OpCall& call, size_t index, const int64_t* out) {
  PoolGeometry g = pool_input(call, index);
  g.out[0] = out[0];
  g.out[1] = out[1];
  return g;
}

inline void adaptive_avg_pool2d(const OpCall& call, std::vector<TensorMeta>& outputs) {
  int64_t size[2];
  linalg::spatial(call, "output_size", 2, size);
  linalg::require_min(call, "output_size", size, 2, 0);
  outputs[0].set_shape(adaptive_pool_geometry(call, 0, size).out_shape());
}

inline void adaptive_avg_pool2d_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  const Tensor& go = call.input(0);
  PoolGeometry g = pool_input(call, 1);
  if (go.rank != call.input(1).rank || go.shape[0] != call.input(1).shape[0] ||
      (g.batched && go.shape[1] != g.c))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'grad_output' has shape ", go.shape_str(),
         " but input 'self' is ", call.input(1).shape_str(), " (leading dims must match)");
  outputs[0].set_shape(call.input(1).sizes());
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_LINALG_HPP_
