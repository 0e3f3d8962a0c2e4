// Shape rules of the "factorization" group (matrix factorizations and
// triangular solves, sdk/catalog/ops/factorization.toml): matrices are the
// last two dims, every leading dim a batch dim.
#ifndef HAL_COMMON_SHAPES_FACTORIZATION_HPP_
#define HAL_COMMON_SHAPES_FACTORIZATION_HPP_

#include <algorithm>
#include <string>
#include <vector>

#include "hal/common/shapes/common.hpp"
#include "hal/common/shapes/linalg.hpp"

namespace hal::common::shape_rules {

namespace factorization {

// Input I's shape, checked to be a batch of matrices (rank >= 2) and, with
// SQUARE, of square ones.
inline std::vector<int64_t> matrices(const OpCall& call, size_t i, bool square) {
  const Tensor& t = call.input(i);
  const char* name = call.schema().inputs[i].name;
  if (t.rank < 2)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", name, "' must be a matrix or a batch of matrices (rank >= 2) but has shape ",
         t.shape_str());
  if (square && t.shape[t.rank - 1] != t.shape[t.rank - 2])
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input '", name, "' must be a batch of square matrices but has shape ",
         t.shape_str());
  return t.sizes();
}

// SHAPE with its last DROP dims replaced by TAIL.
inline std::vector<int64_t> batch_with(const std::vector<int64_t>& shape, size_t drop, std::vector<int64_t> tail) {
  std::vector<int64_t> out(shape.begin(), shape.end() - static_cast<std::ptrdiff_t>(drop));
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

}  // namespace factorization

// linalg_cholesky: self [..., n, n] -> L [..., n, n], info [...].
inline void linalg_cholesky(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const std::vector<int64_t> a = factorization::matrices(call, 0, true);
  outputs[0].set_shape(a);
  outputs[1].set_shape(factorization::batch_with(a, 2, {}));
}

// linalg_lu_factor: self [..., m, n] -> LU [..., m, n], pivots [..., min(m, n)], info [...].
inline void linalg_lu_factor(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const std::vector<int64_t> a = factorization::matrices(call, 0, false);
  const int64_t k = std::min(a[a.size() - 2], a[a.size() - 1]);
  outputs[0].set_shape(a);
  outputs[1].set_shape(factorization::batch_with(a, 2, {k}));
  outputs[2].set_shape(factorization::batch_with(a, 2, {}));
}

// linalg_solve_triangular: self [..., n, n], B [..., n, k] (left) or
// [..., k, n] -> X of B's matrix shape over the broadcast batch dims.
inline void linalg_solve_triangular(const OpCall& call, std::vector<TensorMeta>& outputs) {
  linalg::require_same_dtype(call);
  const std::vector<int64_t> a = factorization::matrices(call, 0, true);
  const std::vector<int64_t> b = factorization::matrices(call, 1, false);
  const bool left = linalg::attr(call, "left").as_bool();
  const int64_t n = a.back(), bn = left ? b[b.size() - 2] : b.back();
  if (bn != n)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": self ", call.input(0).shape_str(), " and B ",
         call.input(1).shape_str(), ": B's ", left ? "rows" : "columns", " (", bn, ") must equal self's size ", n,
         left ? " (A·X = B)" : " (X·A = B)");
  std::vector<int64_t> batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  std::vector<int64_t> batch(std::max(batch_a.size(), batch_b.size()), 1);
  for (size_t d = 0; d < batch.size(); ++d) {
    const size_t ra = batch.size() - d, rb = batch.size() - d;
    const int64_t sa = ra <= batch_a.size() ? batch_a[batch_a.size() - ra] : 1;
    const int64_t sb = rb <= batch_b.size() ? batch_b[batch_b.size() - rb] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": the batch dims of self ", call.input(0).shape_str(),
           " and B ", call.input(1).shape_str(), " do not broadcast (size ", sa, " vs ", sb, ")");
    batch[d] = sa == 1 ? sb : sa;
  }
  batch.push_back(b[b.size() - 2]);
  batch.push_back(b.back());
  outputs[0].set_shape(batch);
}

// linalg_eigh: self [..., n, n] -> eigenvalues [..., n], eigenvectors
// [..., n, n] ([0] without compute_v), info [...].
inline void linalg_eigh(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const std::vector<int64_t> a = factorization::matrices(call, 0, true);
  outputs[0].set_shape(factorization::batch_with(a, 1, {}));
  if (linalg::attr(call, "compute_v").as_bool())
    outputs[1].set_shape(a);
  else
    outputs[1].set_shape({0});
  outputs[2].set_shape(factorization::batch_with(a, 2, {}));
}

// linalg_svd: self [..., m, n], k = min(m, n) -> U [..., m, m|k], S [..., k],
// Vh [..., n|k, n] (U, Vh [0] without compute_uv), info [...].
inline void linalg_svd(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const std::vector<int64_t> a = factorization::matrices(call, 0, false);
  const int64_t m = a[a.size() - 2], n = a.back(), k = std::min(m, n);
  const bool full = linalg::attr(call, "full_matrices").as_bool();
  if (linalg::attr(call, "compute_uv").as_bool()) {
    outputs[0].set_shape(factorization::batch_with(a, 2, {m, full ? m : k}));
    outputs[2].set_shape(factorization::batch_with(a, 2, {full ? n : k, n}));
  } else {
    outputs[0].set_shape({0});
    outputs[2].set_shape({0});
  }
  outputs[1].set_shape(factorization::batch_with(a, 2, {k}));
  outputs[3].set_shape(factorization::batch_with(a, 2, {}));
}

// linalg_qr: self [..., m, n], k = min(m, n) -> reduced Q [..., m, k],
// R [..., k, n]; complete Q [..., m, m], R [..., m, n]; r: Q [0], R [..., k, n].
inline void linalg_qr(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const std::vector<int64_t> a = factorization::matrices(call, 0, false);
  const int64_t m = a[a.size() - 2], n = a.back(), k = std::min(m, n);
  const std::string& mode = linalg::attr(call, "mode").as_string();
  if (mode == "r")
    outputs[0].set_shape({0});
  else
    outputs[0].set_shape(factorization::batch_with(a, 2, {m, mode == "complete" ? m : k}));
  outputs[1].set_shape(factorization::batch_with(a, 2, {mode == "complete" ? m : k, n}));
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_FACTORIZATION_HPP_
