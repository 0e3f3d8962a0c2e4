// Shape rules of the "data" group (data movement and creation). Attributes
// are read by catalog position (see sdk/catalog/ops/data.toml).
#ifndef HAL_COMMON_SHAPES_DATA_HPP_
#define HAL_COMMON_SHAPES_DATA_HPP_

#include <cmath>
#include <limits>

#include "hal/common/shapes/common.hpp"

namespace hal::common::shape_rules {

namespace data_detail {

// Output I takes the dtype the caller gave it, if the catalog allows it.
inline void given_dtype(const OpCall& call, std::vector<TensorMeta>& outputs, size_t i) {
  hal_dtype_e dt = call.output(i).dtype;
  uint64_t allowed = call.schema().outputs[0].dtypes;
  if ((allowed & HAL_DTYPE_BIT(dt)) == 0)
    fail(HAL_STATUS_UNSUPPORTED_DTYPE, call.name(), ": output '", call.schema().outputs[0].name, "' has dtype ",
         dtype_name(dt), "; the catalog allows ", dtype_mask_names(allowed));
  outputs[i].dtype = dt;
}

// Throws unless scalar attribute ATTR fits DTYPE (torch.full's overflow check).
inline void check_scalar_fits(const OpCall& call, const char* attr, const Scalar& v, hal_dtype_e dt) {
  if (dt == HAL_DTYPE_BOOL) return;
  // Every fill checks its value: the range is put in words only when it fails.
  bool ok = true;
  double max = 0.0;
  int64_t lo = 0, hi = 0;
  if (is_floating(dt)) {
    max = dt == HAL_DTYPE_FLOAT16 ? 65504.0
          : dt == HAL_DTYPE_BFLOAT16 ? 3.3895313892515355e38
          : dt == HAL_DTYPE_FLOAT32 ? static_cast<double>(std::numeric_limits<float>::max())
                                    : std::numeric_limits<double>::max();
    double f = v.to_double();
    ok = !std::isfinite(f) || std::fabs(f) <= max;
  } else {
    switch (dt) {
      case HAL_DTYPE_INT8: lo = -128; hi = 127; break;
      case HAL_DTYPE_UINT8: lo = 0; hi = 255; break;
      case HAL_DTYPE_INT16: lo = -32768; hi = 32767; break;
      case HAL_DTYPE_INT32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
      default: lo = std::numeric_limits<int64_t>::min(); hi = std::numeric_limits<int64_t>::max(); break;
    }
    if (v.is_integral()) {
      ok = v.to_int() >= lo && v.to_int() <= hi;
    } else {
      double t = std::trunc(v.to_double());  // 2^63: the first double above int64's range
      ok = std::isfinite(t) && t >= static_cast<double>(lo) &&
           (dt == HAL_DTYPE_INT64 ? t < 9223372036854775808.0 : t <= static_cast<double>(hi));
    }
  }
  if (ok) return;
  const std::string range = is_floating(dt) ? "finite values up to " + std::to_string(max)
                                            : "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute '", attr, "' = ",
       v.is_integral() ? std::to_string(v.to_int()) : std::to_string(v.to_double()),
       " cannot be converted to ", dtype_name(dt), " without overflow (it holds ", range, ")");
}

// Every tensor of a variadic input must have the first one's rank and sizes
// (except in dim SKIP, when >= 0).
inline void check_same_sizes(const OpCall& call, int skip) {
  const Tensor& first = call.input(0);
  for (size_t i = 1; i < call.input_count(); ++i) {
    const Tensor& t = call.input(i);
    bool ok = t.rank == first.rank;
    for (int d = 0; ok && d < t.rank; ++d) ok = d == skip || t.shape[d] == first.shape[d];
    if (!ok)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'tensors'[", i, "] has shape ", t.shape_str(),
           " but input 'tensors'[0] has shape ", first.shape_str(),
           skip >= 0 ? " (they must match except in dim " + std::to_string(skip) + ")" : std::string(" (they must match)"));
  }
}

}  // namespace data_detail

// copy: out keeps its own shape and dtype; self must broadcast to it.
inline void copy(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  const Tensor& out = call.output(0);
  data_detail::given_dtype(call, outputs, 0);
  bool ok = self.rank <= out.rank;
  for (int d = 0; ok && d < self.rank; ++d) {
    int64_t s = self.shape[d], o = out.shape[out.rank - self.rank + d];
    ok = s == o || s == 1;
  }
  if (!ok)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'self' of shape ", self.shape_str(),
         " does not broadcast to output 'out' of shape ", out.shape_str());
  outputs[0].set_shape(out.sizes());
}

// fill: out keeps its shape and dtype; value must fit the dtype.
inline void fill(const OpCall& call, std::vector<TensorMeta>& outputs) {
  data_detail::given_dtype(call, outputs, 0);
  data_detail::check_scalar_fits(call, "value", call.attr(0).as_scalar(), outputs[0].dtype);
  outputs[0].set_shape(call.output(0).sizes());
}

// Number of elements of arange(start, end, step); throws naming the values.
inline int64_t arange_size(const OpCall& call, const Scalar& start, const Scalar& end, const Scalar& step) {
  double a = start.to_double(), b = end.to_double(), s = step.to_double();
  if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(s))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attributes 'start' = ", a, ", 'end' = ", b, ", 'step' = ", s,
         " must be finite");
  if (s == 0) fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'step' must be nonzero");
  if ((s > 0 && b < a) || (s < 0 && b > a))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'step' = ", s, " does not lead from 'start' = ", a,
         " to 'end' = ", b);
  double n = std::ceil((b - a) / s);
  if (!(n <= static_cast<double>(int64_t{1} << 56)))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": arange(", a, ", ", b, ", ", s, ") has too many elements (", n, ")");
  return static_cast<int64_t>(n);
}

// arange's dtype: the attribute, else torch's default (int64 for integer
// bounds and step, else float32).
inline void arange(const OpCall& call, std::vector<TensorMeta>& outputs) {
  hal_dtype_e dt = call.attr(3).as_dtype();
  if (dt == HAL_DTYPE_INVALID) {
    bool ints = call.attr(0).as_scalar().is_integral() && call.attr(1).as_scalar().is_integral() &&
                call.attr(2).as_scalar().is_integral();
    dt = ints ? HAL_DTYPE_INT64 : HAL_DTYPE_FLOAT32;
  }
  uint64_t allowed = call.schema().outputs[0].dtypes;
  if ((allowed & HAL_DTYPE_BIT(dt)) == 0)
    fail(HAL_STATUS_UNSUPPORTED_DTYPE, call.name(), ": attribute 'dtype' = ", dtype_name(dt),
         " is not supported; the catalog allows ", dtype_mask_names(allowed));
  outputs[0].dtype = dt;
  outputs[0].set_shape({arange_size(call, call.attr(0).as_scalar(), call.attr(1).as_scalar(), call.attr(2).as_scalar())});
}

inline void cat(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& first = call.input(0);
  for (size_t i = 0; i < call.input_count(); ++i)
    if (call.input(i).rank == 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'tensors'[", i,
           "] is 0-d; zero-dimensional tensors cannot be concatenated");
  int dim = normalize_dim(call, "dim", call.attr(0).as_int(), first.rank);
  data_detail::check_same_sizes(call, dim);
  std::vector<int64_t> shape = first.sizes();
  for (size_t i = 1; i < call.input_count(); ++i) shape[dim] += call.input(i).shape[dim];
  outputs[0].set_shape(shape);
}

inline void stack(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& first = call.input(0);
  int dim = normalize_dim(call, "dim", call.attr(0).as_int(), first.rank + 1);
  data_detail::check_same_sizes(call, -1);
  if (first.rank + 1 > HAL_TENSOR_MAX_RANK)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": stacking rank-", first.rank, " tensors exceeds HAL_TENSOR_MAX_RANK");
  std::vector<int64_t> shape = first.sizes();
  shape.insert(shape.begin() + dim, static_cast<int64_t>(call.input_count()));
  outputs[0].set_shape(shape);
}

// Sizes of split's chunks along its dim (validated).
inline std::vector<int64_t> split_sizes(const OpCall& call, int64_t n) {
  const AttrValue& size = call.attr(0);
  const AttrValue& sizes = call.attr(1);
  if (size.given == sizes.given)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": give exactly one of attributes 'split_size' and 'sizes'",
         size.given ? " (both were given)" : " (neither was given)");
  std::vector<int64_t> out;
  if (size.given) {
    int64_t s = size.as_int();
    if (s < 0 || (s == 0 && n != 0))
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'split_size' = ", s,
           " must be positive (0 only for a dim of size 0; the dim has size ", n, ")");
    if (n == 0) return {0};
    for (int64_t b = 0; b < n; b += s) out.push_back(std::min(s, n - b));
    return out;
  }
  int64_t sum = 0;
  for (size_t i = 0; i < sizes.as_ints().size(); ++i) {
    int64_t s = sizes.as_ints()[i];
    if (s < 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'sizes' has negative entry ", s, " at position ", i);
    if (__builtin_add_overflow(sum, s, &sum)) sum = std::numeric_limits<int64_t>::max();
  }
  if (sum != n || sizes.as_ints().empty())
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'sizes' ", shape_string(sizes.as_ints().data(),
         static_cast<int>(sizes.as_ints().size())), " sums to ", sum, " but the dim has size ", n);
  return sizes.as_ints();
}

inline void split(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  if (self.rank == 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'self' is 0-d; it has no dim to split");
  int dim = normalize_dim(call, "dim", call.attr(2).as_int(), self.rank);
  std::vector<int64_t> sizes = split_sizes(call, self.shape[dim]);
  if (sizes.size() != outputs.size())
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'self' of shape ", self.shape_str(), " splits into ",
         sizes.size(), " chunks along dim ", dim, " but ", outputs.size(), " outputs were given");
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> shape = self.sizes();
    shape[dim] = sizes[i];
    outputs[i].set_shape(shape);
  }
}

inline void pad(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  const std::vector<int64_t>& p = call.attr(0).as_ints();
  const std::string& mode = call.attr(1).as_string();
  if (p.size() % 2 != 0 || p.size() > 2 * static_cast<size_t>(self.rank))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'pad' ", shape_string(p.data(), static_cast<int>(p.size())),
         " must have an even length of at most 2·rank = ", 2 * self.rank, " (input 'self' has shape ", self.shape_str(), ")");
  if (mode == "constant") data_detail::check_scalar_fits(call, "value", call.attr(2).as_scalar(), self.dtype);
  std::vector<int64_t> shape = self.sizes();
  for (size_t k = 0; k < p.size() / 2; ++k) {
    int d = self.rank - 1 - static_cast<int>(k);
    int64_t l = p[2 * k], r = p[2 * k + 1], n = self.shape[d];
    auto bad = [&](const char* why) {
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'pad' = (", l, ", ", r, ") for dim ", d,
           " of input 'self' of shape ", self.shape_str(), ": ", why, " in mode '", mode, "'");
    };
    if (mode != "constant" && (l < 0 || r < 0)) bad("pads must be non-negative");
    if (mode == "reflect" && (l >= std::max<int64_t>(n, 1) || r >= std::max<int64_t>(n, 1)))
      bad("pads must be smaller than the dim's size");
    if (mode == "replicate" && n == 0 && (l > 0 || r > 0)) bad("an empty dim cannot be padded");
    int64_t size = 0;
    if (__builtin_add_overflow(n, l, &size) || __builtin_add_overflow(size, r, &size) || size > (int64_t{1} << 56))
      bad("the padded size overflows");
    if (size < 0) bad("the padded size would be negative");
    shape[d] = size;
  }
  outputs[0].set_shape(shape);
}

// Normalised, validated dims of an ints attribute (each at most once).
inline std::vector<int> unique_dims(const OpCall& call, const char* attr, const std::vector<int64_t>& dims, int rank) {
  std::vector<int> out;
  for (int64_t d : dims) {
    int n = normalize_dim(call, attr, d, rank);
    if (std::find(out.begin(), out.end(), n) != out.end())
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute '", attr, "' ", shape_string(dims.data(),
           static_cast<int>(dims.size())), " names dim ", n, " twice");
    out.push_back(n);
  }
  return out;
}

inline void flip(const OpCall& call, std::vector<TensorMeta>& outputs) {
  unique_dims(call, "dims", call.attr(0).as_ints(), call.input(0).rank);
  outputs[0].set_shape(call.input(0).sizes());
}

// reshape: `shape` with at most one -1 (inferred); same element count.
// With `copy_zeros`, a 0 at index i is self's dim i.
inline void reshape(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  std::vector<int64_t> shape = call.attr(0).as_ints();
  auto text = [&] { return shape_string(call.attr(0).as_ints().data(), static_cast<int>(shape.size())); };
  if (shape.size() > HAL_TENSOR_MAX_RANK)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'shape' ", text(), " has more than ",
         HAL_TENSOR_MAX_RANK, " dims");
  if (call.attr(1).as_bool())
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] == 0) {
        if (static_cast<int>(i) >= self.rank)
          fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'shape' ", text(), " copies dim ", i,
               " (copy_zeros) but input 'self' of shape ", self.shape_str(), " has rank ", self.rank);
        shape[i] = self.shape[i];
      }
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else if (shape[i] < 0) {
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'shape' ", text(),
           shape[i] == -1 ? " has more than one -1" : " has a negative size");
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'shape' ", text(), " overflows");
    }
  }
  int64_t numel = self.numel();
  if (inferred >= 0) {
    if (known == 0 || numel % known != 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": cannot reshape input 'self' of shape ", self.shape_str(), " (",
           numel, " elements) to ", text());
    shape[inferred] = numel / known;
  } else if (known != numel) {
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": cannot reshape input 'self' of shape ", self.shape_str(), " (",
         numel, " elements) to ", text(), " (", known, " elements)");
  }
  outputs[0].set_shape(shape);
}

// permute: `dims` a permutation of self's dims.
inline void permute(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  const std::vector<int64_t>& dims = call.attr(0).as_ints();
  if (static_cast<int>(dims.size()) != self.rank)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'dims' ", shape_string(dims.data(), static_cast<int>(dims.size())),
         " has ", dims.size(), " entries but input 'self' has rank ", self.rank);
  std::vector<int> order = unique_dims(call, "dims", dims, self.rank);
  std::vector<int64_t> shape;
  for (int d : order) shape.push_back(self.shape[d]);
  outputs[0].set_shape(shape);
}

inline void roll(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  const std::vector<int64_t>& shifts = call.attr(0).as_ints();
  const std::vector<int64_t>& dims = call.attr(1).as_ints();
  bool ok = dims.empty() ? shifts.size() == 1 : shifts.size() == dims.size();
  if (!ok)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'shifts' ", shape_string(shifts.data(),
         static_cast<int>(shifts.size())), " must have ", dims.empty() ? std::string("one entry when 'dims' is empty")
         : "as many entries as 'dims' " + shape_string(dims.data(), static_cast<int>(dims.size())));
  for (int64_t d : dims) normalize_dim(call, "dims", d, self.rank);
  outputs[0].set_shape(self.sizes());
}

inline void repeat(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  const std::vector<int64_t>& r = call.attr(0).as_ints();
  std::string rs = shape_string(r.data(), static_cast<int>(r.size()));
  if (r.size() < static_cast<size_t>(self.rank))
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'repeats' ", rs, " has fewer entries than input 'self' ",
         self.shape_str(), " has dims");
  if (r.size() > HAL_TENSOR_MAX_RANK)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'repeats' ", rs, " has more than HAL_TENSOR_MAX_RANK entries");
  std::vector<int64_t> shape(r.size());
  int64_t numel = 1;
  for (size_t i = 0; i < r.size(); ++i) {
    int td = static_cast<int>(i) - static_cast<int>(r.size() - self.rank);
    int64_t s = td < 0 ? 1 : self.shape[td];
    if (r[i] < 0)
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'repeats' ", rs, " has negative entry ", r[i]);
    if (__builtin_mul_overflow(s, r[i], &shape[i]) || __builtin_mul_overflow(numel, shape[i], &numel) ||
        numel > (int64_t{1} << 56))
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'repeats' ", rs, " with input 'self' ",
           self.shape_str(), " gives too many elements");
  }
  outputs[0].set_shape(shape);
}

inline void tril_triu(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  if (self.rank < 2)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'self' must have rank >= 2 but has shape ", self.shape_str());
  outputs[0].set_shape(self.sizes());
}

inline void one_hot(const OpCall& call, std::vector<TensorMeta>& outputs) {
  const Tensor& self = call.input(0);
  int64_t n = call.attr(0).as_int();
  if (n < 0)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'num_classes' = ", n,
         " must be non-negative (inferring it from the data, -1 in PyTorch, is not supported)");
  if (self.rank + 1 > HAL_TENSOR_MAX_RANK)
    fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": input 'self' of shape ", self.shape_str(),
         " gives an output beyond HAL_TENSOR_MAX_RANK");
  std::vector<int64_t> shape = self.sizes();
  shape.push_back(n);
  int64_t numel = 1;
  for (int64_t s : shape)
    if (__builtin_mul_overflow(numel, s, &numel) || numel > (int64_t{1} << 56))
      fail(HAL_STATUS_INVALID_ARGUMENT, call.name(), ": attribute 'num_classes' = ", n, " with input 'self' ",
           self.shape_str(), " gives too many elements");
  outputs[0].set_shape(shape);
}

}  // namespace hal::common::shape_rules

#endif  // HAL_COMMON_SHAPES_DATA_HPP_
