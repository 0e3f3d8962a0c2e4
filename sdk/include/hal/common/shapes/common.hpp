// Helpers shared by the shape rules: broadcasting and dim normalisation.
#ifndef HAL_COMMON_SHAPES_COMMON_HPP_
#define HAL_COMMON_SHAPES_COMMON_HPP_

#include <algorithm>
#include <string>
#include <vector>

#include "hal/common/op_schema.hpp"

namespace hal::common::shape_rules {

// NumPy broadcast of the defined tensors among TENSORS; throws naming the
// op and the first pair of sizes that do not broadcast.
// The same into OUT's shape and rank (no allocation: every launch of an
// elementwise op runs this).
inline void broadcast_shape_into(const OpCall& call, TensorList tensors, TensorMeta& out) {
  int rank = 0;
  int64_t* shape = out.shape;  // right-aligned: dims [HAL_TENSOR_MAX_RANK - rank, HAL_TENSOR_MAX_RANK)
  int64_t dims[HAL_TENSOR_MAX_RANK];
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined) continue;
    for (; rank < t.rank; ++rank) dims[HAL_TENSOR_MAX_RANK - 1 - rank] = 1;
    for (int d = 0; d < t.rank; ++d) {
      int64_t& o = dims[HAL_TENSOR_MAX_RANK - t.rank + d];
      int64_t s = t.shape[d];
      if (o == s || s == 1) continue;
      if (o == 1) {
        o = s;
        continue;
      }
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", call.schema().inputs[std::min(i, call.schema().input_count - 1)].name,
           "' of shape ", t.shape_str(), " does not broadcast with shape ",
           shape_string(dims + HAL_TENSOR_MAX_RANK - rank, rank), " (size ", s, " vs ", o, ")");
    }
  }
  out.rank = rank;
  for (int d = 0; d < rank; ++d) shape[d] = dims[HAL_TENSOR_MAX_RANK - rank + d];
}

inline std::vector<int64_t> broadcast_shapes(const OpCall& call, TensorList tensors) {
  TensorMeta m;
  broadcast_shape_into(call, tensors, m);
  return std::vector<int64_t>(m.shape, m.shape + m.rank);
}

// Wraps DIM (may be negative) into [0, RANK); throws naming the op and ATTR.
inline int normalize_dim(const OpCall& call, const char* attr, int64_t dim, int rank) {
  int64_t r = std::max(rank, 1);  // a 0-d tensor accepts dim 0 / -1
  if (dim < -r || dim >= r)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute '", attr, "' = ", dim,
         " is out of range for a tensor of rank ", rank, " (expected [", -r, ", ", r - 1, "])");
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

// Throws unless the input named by index I has exactly rank RANK.
inline void require_rank(const OpCall& call, size_t i, int rank) {
  const Tensor& t = call.input(i);
  if (t.rank != rank)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", call.schema().inputs[i].name, "' must have rank ",
         rank, " but has shape ", t.shape_str());
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_COMMON_HPP_
