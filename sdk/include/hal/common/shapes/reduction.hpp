// Shape rules of the "reduction" group (reductions and scans), and the
// helpers kernels share with them (which dims a call reduces).
#ifndef HAL_COMMON_SHAPES_REDUCTION_HPP_
#define HAL_COMMON_SHAPES_REDUCTION_HPP_

#include <cmath>
#include <cstring>

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

// The attribute NAME of the call's op (rules run before the generated
// accessors exist, so they look attributes up by name).
inline const AttrValue& attr_named(const OpCall& call, const char* name) {
  const OpSchema& s = call.schema();
  for (size_t i = 0; i < s.attr_count; ++i)
    if (std::strcmp(s.attrs[i].name, name) == 0) return call.attr(i);
  fail(HAL_STATUS_INTERNAL, call.name(), ": the op has no attribute '", name, "'");
}

// Bit d set = dim d of a rank-RANK tensor is reduced. DIMS empty = every dim;
// dims are normalised and must not repeat.
inline uint32_t reduce_mask(const OpCall& call, const std::vector<int64_t>& dims, int rank) {
  if (dims.empty()) return rank == 0 ? 0u : (1u << rank) - 1u;
  uint32_t mask = 0;
  for (int64_t d : dims) {
    int n = normalize_dim(call, "dim", d, rank);
    if (rank == 0) continue;  // 0-d: dim 0 / -1 name the tensor itself
    if (mask & (1u << n))
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'dim' names dim ", n, " twice (dim = ",
           shape_string(dims.data(), static_cast<int>(dims.size())), ", rank ", rank, ")");
    mask |= 1u << n;
  }
  return mask;
}

// The reduced dims of a call whose 'dim' attribute is a list.
inline uint32_t reduce_mask(const OpCall& call) {
  return reduce_mask(call, attr_named(call, "dim").as_ints(), call.input(0).rank);
}

// SHAPE without the dims of MASK (or with them set to 1 when KEEPDIM).
inline std::vector<int64_t> reduced_sizes(const TensorMeta& t, uint32_t mask, bool keepdim) {
  std::vector<int64_t> out;
  for (int d = 0; d < t.rank; ++d) {
    if (!(mask & (1u << d))) out.push_back(t.shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Throws when a dim of MASK has size 0 (ops without an identity).
inline void require_nonempty(const OpCall& call, uint32_t mask, const char* what = "dim") {
  const Tensor& t = call.input(0);
  for (int d = 0; d < t.rank; ++d)
    if ((mask & (1u << d)) && t.shape[d] == 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": cannot reduce over dim ", d, " of size 0 of input 'self' (shape ",
           t.shape_str(), ", ", what, "): the reduction has no identity");
}

inline void set_reduced(const OpCall& call, uint32_t mask, std::vector<TensorMeta>& outputs) {
  bool keepdim = attr_named(call, "keepdim").as_bool();
  for (auto& o : outputs) o.set_shape(reduced_sizes(call.input(0), mask, keepdim));
}

// Reduce over 'dim' (list), 'keepdim'.
inline void reduce(const OpCall& call, std::vector<TensorMeta>& outputs) { set_reduced(call, reduce_mask(call), outputs); }

// As reduce; without a 'dtype', integer and bool inputs give int64 (torch.sum, torch.prod).
inline void reduce_int64(const OpCall& call, std::vector<TensorMeta>& outputs) {
  reduce(call, outputs);
  if (attr_named(call, "dtype").as_dtype() == HAL_DTYPE_INVALID && !is_floating(call.input(0).dtype))
    outputs[0].dtype = HAL_DTYPE_INT64;
}

// As reduce; the result dtype must be floating (torch.mean).
inline void reduce_floating(const OpCall& call, std::vector<TensorMeta>& outputs) {
  reduce(call, outputs);
  if (!is_floating(outputs[0].dtype))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'self' has dtype ", dtype_name(call.input(0).dtype),
         " and attribute 'dtype' is ", attr_named(call, "dtype").given ? dtype_name(outputs[0].dtype) : "none",
         "; the result dtype must be floating (pass a floating 'dtype')");
}

// As reduce; reducing a dim of size 0 is an error (amax, amin).
inline void reduce_nonempty(const OpCall& call, std::vector<TensorMeta>& outputs) {
  uint32_t mask = reduce_mask(call);
  require_nonempty(call, mask);
  set_reduced(call, mask, outputs);
}

// As reduce; p = inf and p < 0 have no identity, so they need non-empty
// dims (torch.linalg.vector_norm).
inline void reduce_norm(const OpCall& call, std::vector<TensorMeta>& outputs) {
  uint32_t mask = reduce_mask(call);
  double p = attr_named(call, "p").as_float();
  if (std::isinf(p) || p < 0) require_nonempty(call, mask, ("p = " + std::to_string(p)).c_str());
  set_reduced(call, mask, outputs);
}

// Mask of max/min: one required int 'dim'.
inline uint32_t one_dim_mask(const OpCall& call) {
  int rank = call.input(0).rank;
  int d = normalize_dim(call, "dim", attr_named(call, "dim").as_int(), rank);
  return rank == 0 ? 0u : 1u << d;
}

// Reduce along one required int 'dim' (max, min: values and indices).
inline void reduce_one_dim(const OpCall& call, std::vector<TensorMeta>& outputs) {
  uint32_t mask = one_dim_mask(call);
  require_nonempty(call, mask);
  set_reduced(call, mask, outputs);
}

// Mask of argmax/argmin: 'dim' holds at most one dim; [] = the whole tensor.
inline uint32_t arg_mask(const OpCall& call) {
  const auto& dims = attr_named(call, "dim").as_ints();
  if (dims.size() > 1)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'dim' = ", shape_string(dims.data(), static_cast<int>(dims.size())),
         " holds ", dims.size(), " dims; it takes at most one ([] = the flattened tensor)");
  return reduce_mask(call, dims, call.input(0).rank);
}

// argmax/argmin: [] flattens; keepdim then keeps every dim as 1.
inline void reduce_arg(const OpCall& call, std::vector<TensorMeta>& outputs) {
  uint32_t mask = arg_mask(call);
  const Tensor& t = call.input(0);
  if (t.numel() == 0 && attr_named(call, "dim").as_ints().empty())
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'self' of shape ", t.shape_str(),
         " is empty and attribute 'dim' is [] (the flattened tensor): the reduction has no identity");
  require_nonempty(call, mask);
  set_reduced(call, mask, outputs);
}

// Scans: the output has the input's shape; 'dim' (int) must be in range;
// without a 'dtype', integer and bool inputs give int64.
inline void scan(const OpCall& call, std::vector<TensorMeta>& outputs) {
  normalize_dim(call, "dim", attr_named(call, "dim").as_int(), call.input(0).rank);
  outputs[0].set_shape(call.input(0).sizes());
  if (attr_named(call, "dtype").as_dtype() == HAL_DTYPE_INVALID && !is_floating(call.input(0).dtype))
    outputs[0].dtype = HAL_DTYPE_INT64;
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_REDUCTION_HPP_
