// Shape rules of the "random" group (random numbers). Attributes are read by
// catalog position (sdk/catalog/ops/random.toml): `offset` is always the
// last attribute and `seed` the one before it.
#ifndef HAL_COMMON_SHAPES_RANDOM_HPP_
#define HAL_COMMON_SHAPES_RANDOM_HPP_

#include <cmath>

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

namespace random_detail {

inline void check_offset(const OpCall& call) {
  int64_t offset = call.attr(call.schema().attr_count - 1).as_int();
  if (offset < 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'offset' = ", offset,
         " must be >= 0 (it counts 128-bit Philox blocks)");
}

}  // namespace random_detail

// uniform, normal: out has shape `size` (attr 0) and dtype `dtype` (attr 1,
// floating); attrs 2, 3 are (from, to) or (mean, std).
inline void random_size(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const std::string op = call.name();
  const std::vector<int64_t>& size = call.attr(0).as_ints();
  if (size.size() > HAL_TENSOR_MAX_RANK)
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attribute 'size' has ", size.size(), " dims > HAL_TENSOR_MAX_RANK (",
         HAL_TENSOR_MAX_RANK, ")");
  int64_t numel = 1;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attribute 'size' = ", shape_string(size.data(), int(size.size())),
           " has negative size ", size[d], " in dim ", d);
    if (__builtin_mul_overflow(numel, size[d], &numel) || numel > (int64_t{1} << 56))
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attribute 'size' = ", shape_string(size.data(), int(size.size())),
           " has too many elements");
  }
  hal_dtype_e dtype = call.attr(1).as_dtype();
  if (!is_floating(dtype))
    fail(HAL_STATUS_UNSUPPORTED_DTYPE, op, ": attribute 'dtype' = ", dtype_name(dtype),
         " is not a floating dtype (float32, float16, bfloat16, float64)");
  double a = call.attr(2).as_float(), b = call.attr(3).as_float();
  if (op == "uniform" && !(a <= b && std::isfinite(a) && std::isfinite(b)))
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attributes 'from' = ", a, " and 'to' = ", b,
         " must be finite with from <= to");
  if (op == "normal" && !(b >= 0 && std::isfinite(a) && std::isfinite(b)))
    fail(HAL_STATUS_INVALID_ARGUMENT, op, ": attribute 'std' = ", b, " must be finite and >= 0 (mean = ", a, ")");
  random_detail::check_offset(call);
  outputs[0].set_shape(size);
  outputs[0].dtype = dtype;
}

// bernoulli: out has self's shape.
inline void random_same(const OpCall& call, std::vector<TensorMeta>& outputs) {
  random_detail::check_offset(call);
  outputs[0].set_shape(call.input(0).sizes());
}

// dropout: out and mask have self's shape; p (attr 0) in [0, 1].
inline void random_dropout(const OpCall& call, std::vector<TensorMeta>& outputs) {
  double p = call.attr(0).as_float();
  if (!(p >= 0 && p <= 1))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'p' = ", p, " must be in [0, 1]");
  random_detail::check_offset(call);
  for (auto& o : outputs) o.set_shape(call.input(0).sizes());
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_RANDOM_HPP_
