// CPU plugin, linalg group: float32 staging for float16/bfloat16, shared by
// the matmul, convolution and pooling kernels (oneDNN computes those in
// float32 here). Matrix and 4-D geometry is the SDK's (kernel/matrix.hpp).
#ifndef HAL_PLUGINS_CPU_OPS_LINALG_UTIL_HPP_
#define HAL_PLUGINS_CPU_OPS_LINALG_UTIL_HPP_

#include <vector>

#include "cpu_kernel.hpp"

namespace hal::cpu::linalg {

// A contiguous float32 tensor of SHAPE held by STORAGE (its own data).
inline Tensor f32_scratch(const std::vector<int64_t>& shape, std::vector<unsigned char>& storage) {
  Tensor t;
  t.defined = true;
  t.dtype = HAL_DTYPE_FLOAT32;
  t.set_shape(shape);
  t.set_contiguous_strides();
  storage.assign(static_cast<size_t>(t.numel()) * 4 + 64, 0);
  t.data = storage.data();
  return t;
}

// DST = SRC converted (any layouts, same shape).
inline void copy_convert(const Tensor& dst, const Tensor& src) {
  sdk::kernel::dispatch_float(dst.dtype, [&](auto to) {
    using To = typename decltype(to)::type;
    sdk::kernel::dispatch_float(src.dtype, [&](auto from) {
      using From = typename decltype(from)::type;
      map<To, From>(dst, {&src}, [](auto x) { return static_cast<sdk::kernel::compute_t<To>>(x); });
    });
  });
}

// Runs F(outs, ins) with float16/bfloat16 tensors staged as float32: inputs
// converted before, outputs converted back after. Other dtypes pass through.
template <class F>
void with_f32(const std::vector<const Tensor*>& outs, const std::vector<const Tensor*>& ins, F&& f) {
  hal_dtype_e dt = outs[0]->dtype;
  if (dt != HAL_DTYPE_FLOAT16 && dt != HAL_DTYPE_BFLOAT16) {
    f(outs, ins);
    return;
  }
  std::vector<std::vector<unsigned char>> storage(outs.size() + ins.size());
  std::vector<Tensor> tmp(outs.size() + ins.size());
  std::vector<const Tensor*> o32, i32;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i] == nullptr) {
      i32.push_back(nullptr);
      continue;
    }
    tmp[i] = cast_contiguous(*ins[i], HAL_DTYPE_FLOAT32, storage[i]);
    i32.push_back(&tmp[i]);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    size_t k = ins.size() + i;
    tmp[k] = f32_scratch(outs[i]->sizes(), storage[k]);
    o32.push_back(&tmp[k]);
  }
  f(o32, i32);
  for (size_t i = 0; i < outs.size(); ++i) copy_convert(*outs[i], *o32[i]);
}

}  // namespace hal::cpu::linalg

#endif  // HAL_PLUGINS_CPU_OPS_LINALG_UTIL_HPP_
