// CPU plugin: copying between strided tensors of any dtype (the core of the
// "data" group; usable by any group that writes a slice of an output).
#ifndef HAL_PLUGINS_CPU_OPS_DATA_COPY_HPP_
#define HAL_PLUGINS_CPU_OPS_DATA_COPY_HPP_

#include <cstdint>
#include <limits>
#include <type_traits>

#include "cpu_kernel.hpp"

namespace hal::cpu {

// X (storage type From) converted to storage type To as torch casts:
// floating -> integer truncates to int64 (NaN -> 0, saturating beyond
// int64) and then wraps to To's width; anything -> bool is x != 0.
template <class To, class From>
inline To convert(From x) {
  using sdk::kernel::compute_t;
  using CF = compute_t<From>;
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<CF>(x) != CF(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<CF>) {
    CF v = static_cast<CF>(x);
    constexpr CF kLimit = CF(9223372036854775808.0);  // 2^63
    int64_t i = v != v ? 0
                : v >= kLimit ? std::numeric_limits<int64_t>::max()
                : v < -kLimit ? std::numeric_limits<int64_t>::min()
                              : static_cast<int64_t>(v);
    return static_cast<To>(i);
  } else {
    return To(static_cast<compute_t<To>>(static_cast<CF>(x)));
  }
}

// DST = SRC converted to DST's dtype, SRC broadcast to DST's shape. Both are
// host views with any strides (negative ones too: a reversed view). Runs on
// all cores unless PARALLEL is false. DST must not partly overlap SRC.
void copy_into(const Tensor& dst, const Tensor& src, bool parallel = true);

// A view of T restricted to [BEGIN, BEGIN + SIZE) along DIM.
inline Tensor narrow(const Tensor& t, int dim, int64_t begin, int64_t size) {
  Tensor v = t;
  v.data = static_cast<char*>(t.data) + begin * t.strides[dim] * static_cast<int64_t>(t.element_size());
  v.shape[dim] = size;
  return v;
}

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_OPS_DATA_COPY_HPP_
