// CPU plugin, random and transformer groups: moving between strided
// tensors and the contiguous row-major arrays their kernels loop over.
#ifndef HAL_PLUGINS_CPU_OPS_RANDOM_LAYOUT_HPP_
#define HAL_PLUGINS_CPU_OPS_RANDOM_LAYOUT_HPP_

#include <memory>
#include <vector>

#include "cpu_kernel.hpp"

namespace hal::cpu {

// Contiguous row-major view of LIKE's shape over DATA (of dtype DTYPE).
inline Tensor contiguous_view(const Tensor& like, void* data, hal_dtype_e dtype) {
  Tensor t = like;
  t.dtype = dtype;
  t.set_contiguous_strides();
  t.buffer = nullptr;
  t.byte_offset = 0;
  t.data = data;
  return t;
}

// SRC's elements as a contiguous row-major array of DTYPE (storage type T):
// SRC's own memory when it already is one, else a converted copy in TMP.
template <class T>
const T* contiguous_as(const Tensor& src, hal_dtype_e dtype, Tensor& tmp, std::vector<unsigned char>& storage) {
  if (src.dtype == dtype && src.is_contiguous()) return src.ptr<T>();
  tmp = cast_contiguous(src, dtype, storage);
  return tmp.ptr<T>();
}

// Copies the contiguous row-major array SRC (storage type S, dtype
// SRC_DTYPE) into DST, converting to DST's dtype and honouring its strides.
template <class S>
void store(const Tensor& dst, const S* src, hal_dtype_e src_dtype) {
  Tensor view = contiguous_view(dst, const_cast<S*>(src), src_dtype);
  sdk::kernel::dispatch(dst.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    map<T, S>(dst, {&view}, [](auto x) { return static_cast<sdk::kernel::compute_t<T>>(x); });
  });
}

// Where a kernel writes output T contiguously (storage type T): the output
// itself when contiguous, else scratch that finish() copies into it.
template <class T>
class ContiguousOut {
 public:
  explicit ContiguousOut(const Tensor& t) : t_(t) {
    if (t.is_contiguous()) {
      p_ = t.ptr<T>();
    } else {
      tmp_.reset(new T[static_cast<size_t>(t.numel())]);
      p_ = tmp_.get();
    }
  }
  T* data() const { return p_; }
  void finish() const {
    if (tmp_) store<T>(t_, tmp_.get(), t_.dtype);
  }

 private:
  const Tensor& t_;
  std::unique_ptr<T[]> tmp_;
  T* p_ = nullptr;
};

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_OPS_RANDOM_LAYOUT_HPP_
