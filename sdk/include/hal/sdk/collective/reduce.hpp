// HAL C++ SDK, collectives: element-wise reductions of several host arrays
// for every dtype of the ABI. Results are bitwise identical wherever the
// same inputs are reduced (inputs are combined in the order given, in the
// compute type, rounded once), so every rank of an allreduce agrees.
// Header-only.
#ifndef HAL_SDK_COLLECTIVE_REDUCE_HPP_
#define HAL_SDK_COLLECTIVE_REDUCE_HPP_

#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hal/collective.h"
#include "hal/common/dtype.hpp"
#include "hal/sdk/kernel/half.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk::collective {

// The op's lower-case name ("sum", ..., "band", "bor", "bxor"), or
// "unknown" for a value that is not a hal_reduce_op_e. Static storage.
inline const char* reduce_op_name(uint32_t op) {
  static const char* const names[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};
  static_assert(sizeof(names) / sizeof(names[0]) == HAL_REDUCE_OP_COUNT_, "a name per hal_reduce_op_e");
  return op < HAL_REDUCE_OP_COUNT_ ? names[op] : "unknown";
}

// True for BAND, BOR and BXOR (ABI 1.11).
inline bool is_bitwise(uint32_t op) { return op == HAL_REDUCE_BAND || op == HAL_REDUCE_BOR || op == HAL_REDUCE_BXOR; }

// Throws INVALID_ARGUMENT when OP is not a hal_reduce_op_e, and
// UNSUPPORTED_DTYPE naming the op and the dtype when OP cannot reduce DTYPE
// (MIN/MAX of complex, AVG of bool, BAND/BOR/BXOR of a floating or complex
// dtype).
inline void check_reduction(uint32_t dtype, uint32_t op) {
  if (op >= HAL_REDUCE_OP_COUNT_) fail(HAL_STATUS_INVALID_ARGUMENT, "reduce op ", op, " is not a hal_reduce_op_e");
  if (common::dtype_size(dtype) == 0) fail(HAL_STATUS_UNSUPPORTED_DTYPE, "dtype ", dtype, " is not a hal_dtype_e");
  const bool complex = dtype == HAL_DTYPE_COMPLEX64 || dtype == HAL_DTYPE_COMPLEX128;
  if (complex && (op == HAL_REDUCE_MIN || op == HAL_REDUCE_MAX))
    fail(HAL_STATUS_UNSUPPORTED_DTYPE, reduce_op_name(op), " is not defined for ", common::dtype_name(dtype));
  if (dtype == HAL_DTYPE_BOOL && op == HAL_REDUCE_AVG)
    fail(HAL_STATUS_UNSUPPORTED_DTYPE, "avg is not defined for bool");
  if (is_bitwise(op) && (complex || common::is_floating(dtype)))
    fail(HAL_STATUS_UNSUPPORTED_DTYPE, reduce_op_name(op), " is not defined for ", common::dtype_name(dtype),
         " (bitwise reductions take integer and bool dtypes)");
}

namespace detail {

template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, kernel::Half> || std::is_same_v<T, kernel::BFloat16>, float, T>;

// Wrapping arithmetic for integers (no signed-overflow UB, and no int
// promotion overflow for 16-bit products).
template <class T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) + static_cast<W>(static_cast<U>(b))));
  } else {
    return a + b;
  }
}
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

template <class T, uint32_t Op>
inline void combine(acc_t<T>* acc, const T* in, size_t n) {
  using A = acc_t<T>;
  for (size_t i = 0; i < n; ++i) {
    const A v = static_cast<A>(in[i]);
    if constexpr (std::is_same_v<T, bool>) {
      if constexpr (Op == HAL_REDUCE_SUM || Op == HAL_REDUCE_MAX || Op == HAL_REDUCE_BOR) acc[i] = acc[i] || v;
      else if constexpr (Op == HAL_REDUCE_BXOR) acc[i] = acc[i] != v;
      else acc[i] = acc[i] && v;  // PROD, MIN, BAND
    } else if constexpr (Op == HAL_REDUCE_BAND) {
      acc[i] = static_cast<A>(acc[i] & v);
    } else if constexpr (Op == HAL_REDUCE_BOR) {
      acc[i] = static_cast<A>(acc[i] | v);
    } else if constexpr (Op == HAL_REDUCE_BXOR) {
      acc[i] = static_cast<A>(acc[i] ^ v);
    } else if constexpr (Op == HAL_REDUCE_SUM || Op == HAL_REDUCE_AVG) {
      acc[i] = wrap_add<A>(acc[i], v);
    } else if constexpr (Op == HAL_REDUCE_PROD) {
      acc[i] = wrap_mul<A>(acc[i], v);
    } else if constexpr (Op == HAL_REDUCE_MIN) {
      // NaN propagates, as torch's min does.
      if constexpr (std::is_floating_point_v<A>) acc[i] = (v != v || v < acc[i]) ? v : acc[i];
      else acc[i] = std::min(acc[i], v);
    } else {
      if constexpr (std::is_floating_point_v<A>) acc[i] = (v != v || v > acc[i]) ? v : acc[i];
      else acc[i] = std::max(acc[i], v);
    }
  }
}

template <class T, uint32_t Op>
void reduce_typed(void* out, void* also, const void* const* in, size_t inputs, size_t count) {
  using A = acc_t<T>;
  constexpr size_t kBlock = 512;  // the accumulator stays in L1
  A acc[kBlock];
  T* o = static_cast<T*>(out);
  T* o2 = static_cast<T*>(also);
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    const T* first = static_cast<const T*>(in[0]) + base;
    for (size_t i = 0; i < n; ++i) acc[i] = static_cast<A>(first[i]);
    for (size_t s = 1; s < inputs; ++s) combine<T, Op>(acc, static_cast<const T*>(in[s]) + base, n);
    if constexpr (Op == HAL_REDUCE_AVG) {
      if constexpr (std::is_integral_v<A>) {
        for (size_t i = 0; i < n; ++i) o[base + i] = static_cast<T>(acc[i] / static_cast<A>(inputs));
      } else {
        using R = std::conditional_t<std::is_same_v<A, std::complex<double>>, double,
                                     std::conditional_t<std::is_same_v<A, double>, double, float>>;
        const R k = static_cast<R>(inputs);
        for (size_t i = 0; i < n; ++i) o[base + i] = static_cast<T>(acc[i] / k);
      }
    } else {
      for (size_t i = 0; i < n; ++i) o[base + i] = static_cast<T>(acc[i]);
    }
    if (o2 != nullptr) std::memcpy(o2 + base, o + base, n * sizeof(T));  // still in L1
  }
}

template <class T>
void reduce_op(uint32_t op, void* out, void* also, const void* const* in, size_t inputs, size_t count) {
  switch (op) {
    case HAL_REDUCE_SUM: return reduce_typed<T, HAL_REDUCE_SUM>(out, also, in, inputs, count);
    case HAL_REDUCE_PROD: return reduce_typed<T, HAL_REDUCE_PROD>(out, also, in, inputs, count);
    case HAL_REDUCE_AVG:
      if constexpr (!std::is_same_v<T, bool>) return reduce_typed<T, HAL_REDUCE_AVG>(out, also, in, inputs, count);
      break;
    case HAL_REDUCE_MIN:
    case HAL_REDUCE_MAX:
      if constexpr (!std::is_same_v<T, std::complex<float>> && !std::is_same_v<T, std::complex<double>>) {
        if (op == HAL_REDUCE_MIN) return reduce_typed<T, HAL_REDUCE_MIN>(out, also, in, inputs, count);
        return reduce_typed<T, HAL_REDUCE_MAX>(out, also, in, inputs, count);
      }
      break;
    case HAL_REDUCE_BAND:
    case HAL_REDUCE_BOR:
    case HAL_REDUCE_BXOR:
      if constexpr (std::is_integral_v<T>) {  // integers and bool
        if (op == HAL_REDUCE_BAND) return reduce_typed<T, HAL_REDUCE_BAND>(out, also, in, inputs, count);
        if (op == HAL_REDUCE_BOR) return reduce_typed<T, HAL_REDUCE_BOR>(out, also, in, inputs, count);
        return reduce_typed<T, HAL_REDUCE_BXOR>(out, also, in, inputs, count);
      }
      break;
    default: break;
  }
  fail(HAL_STATUS_UNSUPPORTED_DTYPE, reduce_op_name(op), " cannot reduce this dtype");
}

}  // namespace detail

// OUT[i] = IN[0][i] op IN[1][i] op ... op IN[INPUTS-1][i] for COUNT elements
// of DTYPE (AVG: divided by INPUTS), also written to ALSO when non-null
// (while still in cache). OUT and ALSO may each be one of the inputs. Call
// check_reduction first; throws UNSUPPORTED_DTYPE otherwise.
inline void reduce(uint32_t dtype, uint32_t op, void* out, const void* const* in, size_t inputs, size_t count,
                   void* also = nullptr) {
  using namespace detail;
  switch (dtype) {
    case HAL_DTYPE_FLOAT32: return reduce_op<float>(op, out, also, in, inputs, count);
    case HAL_DTYPE_FLOAT64: return reduce_op<double>(op, out, also, in, inputs, count);
    case HAL_DTYPE_FLOAT16: return reduce_op<kernel::Half>(op, out, also, in, inputs, count);
    case HAL_DTYPE_BFLOAT16: return reduce_op<kernel::BFloat16>(op, out, also, in, inputs, count);
    case HAL_DTYPE_INT8: return reduce_op<int8_t>(op, out, also, in, inputs, count);
    case HAL_DTYPE_UINT8: return reduce_op<uint8_t>(op, out, also, in, inputs, count);
    case HAL_DTYPE_INT16: return reduce_op<int16_t>(op, out, also, in, inputs, count);
    case HAL_DTYPE_UINT16: return reduce_op<uint16_t>(op, out, also, in, inputs, count);
    case HAL_DTYPE_INT32: return reduce_op<int32_t>(op, out, also, in, inputs, count);
    case HAL_DTYPE_UINT32: return reduce_op<uint32_t>(op, out, also, in, inputs, count);
    case HAL_DTYPE_INT64: return reduce_op<int64_t>(op, out, also, in, inputs, count);
    case HAL_DTYPE_UINT64: return reduce_op<uint64_t>(op, out, also, in, inputs, count);
    case HAL_DTYPE_BOOL: return reduce_op<bool>(op, out, also, in, inputs, count);
    case HAL_DTYPE_COMPLEX64: return reduce_op<std::complex<float>>(op, out, also, in, inputs, count);
    case HAL_DTYPE_COMPLEX128: return reduce_op<std::complex<double>>(op, out, also, in, inputs, count);
    default: fail(HAL_STATUS_UNSUPPORTED_DTYPE, "dtype ", dtype, " cannot be reduced");
  }
}

}  // namespace hal::sdk::collective

#endif  // HAL_SDK_COLLECTIVE_REDUCE_HPP_
