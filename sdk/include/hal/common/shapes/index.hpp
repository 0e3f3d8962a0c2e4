// Shape rules of the "index" group (indexing, gathering, scattering and sorting).
// Index values are data: kernels check them (OUT_OF_RANGE); these rules
// check everything the shapes, dtypes and attributes decide.
#ifndef HAL_COMMON_SHAPES_INDEX_HPP_
#define HAL_COMMON_SHAPES_INDEX_HPP_

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

namespace index_detail {

inline const char* input_name(const OpCall& call, size_t i) { return call.schema().inputs[i].name; }

// Size of dim D of T, a 0-d tensor counting as shape [1] (PyTorch's
// ensure_nonempty_size).
inline int64_t size_or_1(const Tensor& t, int d) { return t.rank == 0 ? 1 : t.shape[d]; }

// Value of the int attribute named NAME (the rules run before kernels).
inline int64_t int_attr(const OpCall& call, const char* name) {
  const OpSchema& s = call.schema();
  for (size_t i = 0; i < s.attr_count; ++i)
    if (std::string(s.attrs[i].name) == name) return call.attr(i).as_int();
  fail(HAL_STATUS_INTERNAL, call.name(), ": no attribute '", name, "'");
}

// Input I must have input 0's dtype.
inline void require_same_dtype(const OpCall& call, size_t i) {
  const Tensor& t = call.input(i);
  if (t.dtype != call.input(0).dtype)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i), "' has dtype ",
         dtype_name(t.dtype), " but input '", input_name(call, 0), "' has dtype ", dtype_name(call.input(0).dtype),
         " (they must match)");
}

// Input I must have rank max(RANK, 1) when counting 0-d as 1-d.
inline void require_rank_as(const OpCall& call, size_t i, size_t like) {
  const Tensor& t = call.input(i);
  const Tensor& l = call.input(like);
  if (std::max(t.rank, 1) != std::max(l.rank, 1))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, i), "' of shape ", t.shape_str(),
         " must have the rank of input '", input_name(call, like), "' of shape ", l.shape_str());
}

// index.size(d) <= other.size(d) for every d (except SKIP_DIM, when >= 0).
inline void require_index_within(const OpCall& call, size_t index, size_t other, int skip_dim) {
  const Tensor& idx = call.input(index);
  const Tensor& t = call.input(other);
  for (int d = 0; d < std::max(idx.rank, 1); ++d) {
    if (d == skip_dim) continue;
    if (size_or_1(idx, d) > size_or_1(t, d))
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", input_name(call, index), "' of shape ",
           idx.shape_str(), " is larger than input '", input_name(call, other), "' of shape ", t.shape_str(),
           " at dim ", d, " (", size_or_1(idx, d), " > ", size_or_1(t, d), ")");
  }
}

inline void check_padding_idx(const OpCall& call, int64_t padding_idx, int64_t num_weights) {
  if (padding_idx >= num_weights)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'padding_idx' = ", padding_idx,
         " must be < num_weights = ", num_weights, " (or negative for none)");
}

}  // namespace index_detail

// weight [num, dim], indices any shape -> indices.shape + [dim].
inline void embedding(const OpCall& call, std::vector<TensorMeta>& outputs) {
  require_rank(call, 0, 2);
  const Tensor& w = call.input(0);
  index_detail::check_padding_idx(call, index_detail::int_attr(call, "padding_idx"), w.shape[0]);
  std::vector<int64_t> shape = call.input(1).sizes();
  shape.push_back(w.shape[1]);
  outputs[0].set_shape(shape);
}

// grad_output indices.shape + [dim], indices -> [num_weights, dim].
inline void embedding_backward(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& g = call.input(0);
  const Tensor& idx = call.input(1);
  int64_t num = index_detail::int_attr(call, "num_weights");
  if (num < 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'num_weights' = ", num, " must be >= 0");
  index_detail::check_padding_idx(call, index_detail::int_attr(call, "padding_idx"), num);
  bool ok = g.rank == idx.rank + 1;
  for (int d = 0; ok && d < idx.rank; ++d) ok = g.shape[d] == idx.shape[d];
  if (!ok)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'grad_output' of shape ", g.shape_str(),
         " must have shape indices.shape + [embedding_dim] with input 'indices' of shape ", idx.shape_str());
  outputs[0].set_shape({num, g.shape[g.rank - 1]});
}

// self, index (0-d or 1-d) -> self with index.numel() at dim.
inline void index_select(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  const Tensor& idx = call.input(1);
  int dim = normalize_dim(call, "dim", index_detail::int_attr(call, "dim"), self.rank);
  if (idx.rank > 1)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'index' of shape ", idx.shape_str(),
         " must be 0-d or 1-d");
  std::vector<int64_t> shape = self.sizes();
  if (self.rank == 0) {
    if (idx.numel() != 1)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'index' of shape ", idx.shape_str(),
           " must have 1 element when input 'self' is 0-d");
  } else {
    shape[dim] = idx.numel();
  }
  outputs[0].set_shape(shape);
}

// self, index (self's rank, no larger except at dim) -> index's shape.
inline void gather(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  int dim = normalize_dim(call, "dim", index_detail::int_attr(call, "dim"), self.rank);
  index_detail::require_rank_as(call, 1, 0);
  index_detail::require_index_within(call, 1, 0, dim);
  outputs[0].set_shape(call.input(1).sizes());
}

// self, index, src -> self's shape (scatter, scatter_add).
inline void scatter(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  int dim = normalize_dim(call, "dim", index_detail::int_attr(call, "dim"), self.rank);
  index_detail::require_same_dtype(call, 2);
  index_detail::require_rank_as(call, 1, 0);
  index_detail::require_rank_as(call, 2, 0);
  index_detail::require_index_within(call, 1, 2, -1);
  index_detail::require_index_within(call, 1, 0, dim);
  outputs[0].set_shape(self.sizes());
}

// self, indices [K, *B], values (broadcast to B + self.shape[K:]) -> self's shape.
inline void index_put(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  const Tensor& idx = call.input(1);
  const Tensor& values = call.input(2);
  index_detail::require_same_dtype(call, 2);
  if (idx.rank < 1 || idx.shape[0] < 1 || idx.shape[0] > self.rank)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'indices' of shape ", idx.shape_str(),
         " must be [K, *B] with 1 <= K <= rank of input 'self' of shape ", self.shape_str());
  int64_t k = idx.shape[0];
  std::vector<int64_t> indexed(idx.shape + 1, idx.shape + idx.rank);
  indexed.insert(indexed.end(), self.shape + k, self.shape + self.rank);
  bool ok = values.rank <= static_cast<int>(indexed.size());
  for (int d = 0; ok && d < values.rank; ++d) {
    int64_t want = indexed[indexed.size() - values.rank + d];
    ok = values.shape[d] == want || values.shape[d] == 1;
  }
  if (!ok)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'values' of shape ", values.shape_str(),
         " does not broadcast to the indexed shape ", shape_string(indexed.data(), static_cast<int>(indexed.size())));
  outputs[0].set_shape(self.sizes());
}

// self -> out [numel, rank] (upper bound), count [].
inline void nonzero(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  outputs[0].set_shape({self.numel(), self.rank});
  outputs[1].set_shape({});
}

// self -> values, indices with k at dim.
inline void topk(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  int dim = normalize_dim(call, "dim", index_detail::int_attr(call, "dim"), self.rank);
  int64_t k = index_detail::int_attr(call, "k");
  int64_t n = index_detail::size_or_1(self, dim);
  if (k < 0 || k > n || (self.rank == 0 && k != 1))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'k' = ", k, " is out of range [0, ", n,
         "] for dim ", dim, " of input 'self' of shape ", self.shape_str());
  std::vector<int64_t> shape = self.sizes();
  if (self.rank > 0) shape[dim] = k;
  for (auto& o : outputs) o.set_shape(shape);
}

// self -> outputs of self's shape (sort, argsort); checks dim.
inline void sort(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  normalize_dim(call, "dim", index_detail::int_attr(call, "dim"), self.rank);
  for (auto& o : outputs) o.set_shape(self.sizes());
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_INDEX_HPP_
