// CPU kernels of the "data" op group (data movement and creation). Most ops
// are one or more strided copies (copy_into) between views: a slice of the
// output (cat, stack, split, roll), a reversed view (flip), a broadcast view
// (repeat, fill). Same-dtype copies move bytes (memcpy for contiguous runs).
#include <algorithm>
#include <cstring>
#include <functional>

#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "data_copy.hpp"
#include "hal/sdk/kernel/view.hpp"
#include "hal/sdk/kernel/wrap.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
using sdk::kernel::dispatch;
using sdk::kernel::positive_mod;
using sdk::kernel::wrap_dim;
using RunFn = void (*)(char* const* p, const int64_t* s, int64_t n);

constexpr int64_t kGrainBytes = 256 * 1024;

// Calls F(U{}) with the unsigned type of BYTES bytes (same-dtype moves).
template <class F>
void by_size(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

template <class T>
void move_run(char* const* p, const int64_t* s, int64_t n) {
  constexpr int64_t kSize = sizeof(T);
  T* out = reinterpret_cast<T*>(p[0]);
  const T* in = reinterpret_cast<const T*>(p[1]);
  if (s[0] == kSize && s[1] == kSize) {
    if (p[0] != p[1]) std::memcpy(out, in, static_cast<size_t>(n) * kSize);
  } else if (s[0] == kSize && s[1] == 0) {
    T v = *in;
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  } else if (s[0] == kSize && s[1] == -kSize) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[-i];
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[1] + i * s[1]);
  }
}

// float/double -> integers of at most 32 bits through int32, which
// vectorises; false (after writing garbage) when a value is NaN or beyond
// int32, which need convert's int64 route.
template <class To, class From>
bool narrow_via_int32(To* out, const From* in, int64_t n) {
  constexpr From kLo = From(-2147483648.0), kEnd = From(2147483648.0);
  constexpr From kHi = std::is_same_v<From, float> ? From(2147483520.0) : From(2147483647.0);
  int ok = 1;  // bitwise ops, not branches: keeps the loop vectorisable
  for (int64_t i = 0; i < n; ++i) {
    From v = in[i];
    ok &= (v >= kLo) & (v < kEnd);
    From c = std::min(std::max(v, kLo), kHi);
    c = v == v ? c : From(0);
    out[i] = static_cast<To>(static_cast<int32_t>(c));
  }
  return ok != 0;
}

template <class To, class From>
void convert_run(char* const* p, const int64_t* s, int64_t n) {
  if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
    To* out = reinterpret_cast<To*>(p[0]);
    const From* in = reinterpret_cast<const From*>(p[1]);
    if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> && !std::is_same_v<To, bool> &&
                  sizeof(To) <= 4) {
      if (narrow_via_int32(out, in, n)) return;
    }
    for (int64_t i = 0; i < n; ++i) out[i] = convert<To, From>(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<To*>(p[0] + i * s[0]) = convert<To, From>(*reinterpret_cast<const From*>(p[1] + i * s[1]));
  }
}

RunFn pick_run(hal_dtype_e to, hal_dtype_e from) {
  RunFn fn = nullptr;
  if (to == from) {
    by_size(sdk::dtype_size(to), [&](auto u) { fn = &move_run<decltype(u)>; });
    return fn;
  }
  dispatch(to, [&](auto t) {
    dispatch(from, [&](auto f) { fn = &convert_run<typename decltype(t)::type, typename decltype(f)::type>; });
  });
  return fn;
}

// A contiguous tensor shaped like T, of DTYPE, backed by STORAGE.
Tensor contiguous_like(const Tensor& t, hal_dtype_e dtype, std::vector<unsigned char>& storage) {
  Tensor out = t;
  out.dtype = dtype;
  out.buffer = nullptr;
  out.byte_offset = 0;
  out.set_contiguous_strides();
  storage.resize(static_cast<size_t>(t.numel()) * sdk::dtype_size(dtype) + 1);
  out.data = storage.data();
  return out;
}

// A rank-1 view of the contiguous tensor T.
Tensor flat(const Tensor& t) {
  Tensor v = t;
  v.rank = 1;
  v.shape[0] = t.numel();
  v.strides[0] = 1;
  return v;
}

// A 0-d tensor of DTYPE holding V (converted as torch does), in STORAGE.
struct ScalarStorage {
  alignas(8) unsigned char bytes[8] = {};
};
Tensor scalar_tensor(const sdk::Scalar& v, hal_dtype_e dtype, ScalarStorage& storage) {
  dispatch(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T x = v.is_integral() ? convert<T, int64_t>(v.to_int()) : convert<T, double>(v.to_double());
    std::memcpy(storage.bytes, &x, sizeof(T));
  });
  Tensor t;
  t.defined = true;
  t.dtype = dtype;
  t.rank = 0;
  t.data = storage.bytes;
  return t;
}

// The multi-index of rows (all dims but the last) walked in order.
struct RowWalker {
  int rank = 0;
  const int64_t* shape = nullptr;
  int64_t idx[HAL_TENSOR_MAX_RANK] = {};

  void seek(int64_t flat) {
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  void next() {
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) return;
      idx[d] = 0;
    }
  }
  int64_t offset(const int64_t* strides) const {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += idx[d] * strides[d];
    return off;
  }
};

// ---- copy, fill, arange ----------------------------------------------------------

void copy_body(const OpCall& c) { copy_into(c.output(0), c.input(0)); }
HAL_CPU_KERNEL(copy_kernel, copy_body)

void fill_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  ScalarStorage storage;
  copy_into(out, scalar_tensor(op::fill::value(c), out.dtype, storage));
}
HAL_CPU_KERNEL(fill_kernel, fill_body)

void arange_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  const sdk::Scalar& start = op::arange::start(c);
  const sdk::Scalar& step = op::arange::step(c);
  bool integral = start.is_integral() && step.is_integral();
  int64_t stride = out.strides[0];
  dispatch(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.ptr<T>();
    auto fill = [&](int64_t b, int64_t e, auto value) {
      if (stride == 1) {  // the usual case; vectorises
        for (int64_t i = b; i < e; ++i) p[i] = value(i);
      } else {
        for (int64_t i = b; i < e; ++i) p[i * stride] = value(i);
      }
    };
    parallel_for(out.shape[0], 32768, [&](int64_t b, int64_t e) {
      if (integral) {
        int64_t a = start.to_int(), s = step.to_int();
        fill(b, e, [=](int64_t i) { return convert<T, int64_t>(a + i * s); });
      } else {
        double a = start.to_double(), s = step.to_double();
        fill(b, e, [=](int64_t i) { return convert<T, double>(a + static_cast<double>(i) * s); });
      }
    });
  });
}
HAL_CPU_KERNEL(arange_kernel, arange_body)

// ---- cat, stack, split -------------------------------------------------------------

void cat_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  int dim = wrap_dim(op::cat::dim(c), out.rank);
  int64_t offset = 0;
  for (const Tensor& in : op::cat::tensors(c)) {
    copy_into(narrow(out, dim, offset, in.shape[dim]), in);
    offset += in.shape[dim];
  }
}
HAL_CPU_KERNEL(cat_kernel, cat_body)

void stack_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  int dim = wrap_dim(op::stack::dim(c), out.rank);
  sdk::TensorList ins = op::stack::tensors(c);
  for (size_t i = 0; i < ins.size(); ++i) {
    // OUT without DIM, at index I of DIM.
    Tensor slice = narrow(out, dim, static_cast<int64_t>(i), 1);
    for (int d = dim; d + 1 < out.rank; ++d) {
      slice.shape[d] = slice.shape[d + 1];
      slice.strides[d] = slice.strides[d + 1];
    }
    slice.rank = out.rank - 1;
    copy_into(slice, ins[i]);
  }
}
HAL_CPU_KERNEL(stack_kernel, stack_body)

void split_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  int dim = wrap_dim(op::split::dim(c), self.rank);
  int64_t offset = 0;
  for (const Tensor& out : op::split::outs(c)) {
    copy_into(out, narrow(self, dim, offset, out.shape[dim]));
    offset += out.shape[dim];
  }
}
HAL_CPU_KERNEL(split_kernel, split_body)

// ---- pad ---------------------------------------------------------------------------

enum PadMode { kConstant, kReflect, kReplicate };

// Source index of padded position J (= output index - left pad) in a dim of
// size N; -1 for the constant fill.
inline int64_t pad_source(PadMode mode, int64_t j, int64_t n) {
  if (j >= 0 && j < n) return j;
  if (mode == kConstant) return -1;
  if (mode == kReflect) return j < 0 ? -j : 2 * (n - 1) - j;
  return j < 0 ? 0 : n - 1;
}

template <class U>
void pad_rows(const Tensor& out, const Tensor& in, const int64_t* left, PadMode mode, U value) {
  const int r = out.rank;
  const int64_t width = out.shape[r - 1], in_width = in.shape[r - 1], l = left[r - 1];
  const int64_t os = out.strides[r - 1], is = in.strides[r - 1];
  const int64_t c0 = std::clamp<int64_t>(l, 0, width), c1 = std::clamp<int64_t>(l + in_width, 0, width);
  int64_t rows = out.numel() / width;
  parallel_for(rows, std::max<int64_t>(1, kGrainBytes / static_cast<int64_t>(sizeof(U)) / width), [&](int64_t b, int64_t e) {
    RowWalker w{r - 1, out.shape, {}};
    w.seek(b);
    for (int64_t row = b; row < e; ++row, w.next()) {
      U* dst = out.ptr<U>() + w.offset(out.strides);
      const U* src = in.ptr<U>();
      bool fill_row = false;
      for (int d = 0; d < r - 1 && !fill_row; ++d) {
        int64_t j = pad_source(mode, w.idx[d] - left[d], in.shape[d]);
        fill_row = j < 0;
        src += j * in.strides[d];
      }
      auto edge = [&](int64_t col) {
        int64_t j = fill_row ? -1 : pad_source(mode, col - l, in_width);
        dst[col * os] = j < 0 ? value : src[j * is];
      };
      if (fill_row) {
        for (int64_t col = 0; col < width; ++col) dst[col * os] = value;
        continue;
      }
      for (int64_t col = 0; col < c0; ++col) edge(col);
      if (c1 <= c0) {
      } else if (os == 1 && is == 1)
        std::memcpy(dst + c0, src + (c0 - l), static_cast<size_t>(c1 - c0) * sizeof(U));
      else
        for (int64_t col = c0; col < c1; ++col) dst[col * os] = src[(col - l) * is];
      for (int64_t col = std::max(c1, c0); col < width; ++col) edge(col);
    }
  });
}

void pad_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  if (out.numel() == 0) return;
  if (self.rank == 0) {
    copy_into(out, self);
    return;
  }
  const std::vector<int64_t>& p = op::pad::pad_(c);
  const std::string& m = op::pad::mode(c);
  PadMode mode = m == "reflect" ? kReflect : m == "replicate" ? kReplicate : kConstant;
  int64_t left[HAL_TENSOR_MAX_RANK] = {};
  for (size_t k = 0; k < p.size() / 2; ++k) left[self.rank - 1 - k] = p[2 * k];
  ScalarStorage storage;
  Tensor value = scalar_tensor(mode == kConstant ? op::pad::value(c) : sdk::Scalar(), self.dtype, storage);
  by_size(self.element_size(), [&](auto u) {
    using U = decltype(u);
    U v;
    std::memcpy(&v, value.data, sizeof(U));
    pad_rows<U>(out, self, left, mode, v);
  });
}
HAL_CPU_KERNEL(pad_kernel, pad_body)

// ---- flip, roll, repeat -----------------------------------------------------------

void flip_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  if (self.numel() == 0) return;
  Tensor view = self;
  for (int64_t dim : op::flip::dims(c)) {
    int d = wrap_dim(dim, self.rank);
    if (self.rank == 0) continue;
    view.data = static_cast<char*>(view.data) + (self.shape[d] - 1) * self.strides[d] * static_cast<int64_t>(self.element_size());
    view.strides[d] = -self.strides[d];
  }
  copy_into(c.output(0), view);
}
HAL_CPU_KERNEL(flip_kernel, flip_body)

// ---- reshape, permute -----------------------------------------------------------

// T's memory described as a dense tensor of SHAPE's sizes.
Tensor dense_as(const Tensor& t, const Tensor& shape) {
  Tensor v = t;
  v.rank = shape.rank;
  std::copy(shape.shape, shape.shape + shape.rank, v.shape);
  v.set_contiguous_strides();
  return v;
}

// Row-major order kept: a dense side is viewed in the other's shape; two
// strided sides go through a packed copy.
void reshape_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  if (out.numel() == 0) return;
  if (self.is_contiguous()) return copy_into(out, dense_as(self, out));
  if (out.is_contiguous()) return copy_into(dense_as(out, self), self);
  std::vector<unsigned char> storage(static_cast<size_t>(self.numel()) * self.element_size());
  Tensor packed = dense_as(self, self);
  packed.data = storage.data();
  copy_into(packed, self);
  copy_into(out, dense_as(packed, out));
}
HAL_CPU_KERNEL(reshape_kernel, reshape_body)

void permute_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  if (self.numel() == 0) return;
  copy_into(c.output(0), sdk::kernel::permuted(self, op::permute::dims(c)));
}
HAL_CPU_KERNEL(permute_kernel, permute_body)

void roll_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const std::vector<int64_t>& shifts = op::roll::shifts(c);
  const std::vector<int64_t>& dims = op::roll::dims(c);
  int64_t numel = self.numel();
  if (numel == 0) return;
  if (dims.empty()) {  // the flattened tensor
    std::vector<unsigned char> in_storage, out_storage;
    Tensor src = self, dst = out;
    if (!self.is_contiguous()) {
      src = contiguous_like(self, self.dtype, in_storage);
      copy_into(src, self);
    }
    if (!out.is_contiguous()) dst = contiguous_like(out, out.dtype, out_storage);
    Tensor s1 = flat(src), d1 = flat(dst);
    int64_t k = positive_mod(shifts[0], numel);
    copy_into(narrow(d1, 0, k, numel - k), narrow(s1, 0, 0, numel - k));
    copy_into(narrow(d1, 0, 0, k), narrow(s1, 0, numel - k, k));
    if (dst.data != out.data) copy_into(out, dst);
    return;
  }
  int64_t shift[HAL_TENSOR_MAX_RANK] = {};
  for (size_t i = 0; i < dims.size(); ++i) {
    int d = wrap_dim(dims[i], self.rank);
    if (self.rank == 0) continue;
    shift[d] = positive_mod(positive_mod(shifts[i], self.shape[d]) + shift[d], self.shape[d]);
  }
  std::vector<int> rolled;
  for (int d = 0; d < self.rank; ++d)
    if (shift[d] != 0) rolled.push_back(d);
  // Each rolled dim splits into two blocks: [0, n - k) -> [k, n) and
  // [n - k, n) -> [0, k).
  for (uint32_t mask = 0; mask < (1u << rolled.size()); ++mask) {
    Tensor src = self, dst = out;
    for (size_t i = 0; i < rolled.size(); ++i) {
      int d = rolled[i];
      int64_t n = self.shape[d], k = shift[d];
      bool wrap = (mask >> i) & 1u;
      src = narrow(src, d, wrap ? n - k : 0, wrap ? k : n - k);
      dst = narrow(dst, d, wrap ? 0 : k, wrap ? k : n - k);
    }
    copy_into(dst, src);
  }
}
HAL_CPU_KERNEL(roll_kernel, roll_body)

// One dim of repeat's copy: SIZE positions, DST and SRC strides in elements.
struct RepeatDim {
  int64_t size, dst_stride, src_stride;
};

// Copies with DIMS (any number) by splitting off outer dims until the rest
// fits a Tensor view.
void repeat_copy(const Tensor& out, const Tensor& self, const RepeatDim* dims, size_t n, char* dst, const char* src) {
  const int64_t esize = static_cast<int64_t>(out.element_size());
  if (n > HAL_TENSOR_MAX_RANK) {
    for (int64_t i = 0; i < dims[0].size; ++i)
      repeat_copy(out, self, dims + 1, n - 1, dst + i * dims[0].dst_stride * esize, src + i * dims[0].src_stride * esize);
    return;
  }
  Tensor d = out, s = self;
  d.rank = s.rank = static_cast<int>(n);
  d.data = dst;
  s.data = const_cast<char*>(src);
  for (size_t k = 0; k < n; ++k) {
    d.shape[k] = s.shape[k] = dims[k].size;
    d.strides[k] = dims[k].dst_stride;
    s.strides[k] = dims[k].src_stride;
  }
  copy_into(d, s);
}

void repeat_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  if (out.numel() == 0) return;
  const std::vector<int64_t>& repeats = op::repeat::repeats(c);
  // Out's dim i is (repeat index, self index): two dims, of which the
  // repeat one reads with stride 0. Trivial (size-1) parts are dropped.
  std::vector<RepeatDim> dims;
  int lead = out.rank - self.rank;
  for (int i = 0; i < out.rank; ++i) {
    int64_t s = i < lead ? 1 : self.shape[i - lead];
    int64_t is = i < lead ? 0 : self.strides[i - lead];
    if (repeats[i] != 1) dims.push_back({repeats[i], s * out.strides[i], 0});
    if (s != 1) dims.push_back({s, out.strides[i], is});
  }
  repeat_copy(out, self, dims.data(), dims.size(), static_cast<char*>(out.data), static_cast<const char*>(self.data));
}
HAL_CPU_KERNEL(repeat_kernel, repeat_body)

// ---- tril, triu, one_hot ------------------------------------------------------------

template <bool kLower>
void triangle_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  if (out.numel() == 0) return;
  const int r = out.rank;
  const int64_t rows_per = out.shape[r - 2], cols = out.shape[r - 1];
  // Clamped so that row + diagonal cannot overflow.
  const int64_t diag = std::clamp<int64_t>(kLower ? op::tril::diagonal(c) : op::triu::diagonal(c), -rows_per - 1, cols + 1);
  const int64_t os = out.strides[r - 1], is = self.strides[r - 1];
  const bool in_place = out.data == self.data;
  by_size(out.element_size(), [&](auto u) {
    using U = decltype(u);
    int64_t rows = out.numel() / cols;
    parallel_for(rows, std::max<int64_t>(1, kGrainBytes / static_cast<int64_t>(sizeof(U)) / cols), [&](int64_t b, int64_t e) {
      RowWalker w{r - 1, out.shape, {}};
      w.seek(b);
      for (int64_t row = b; row < e; ++row, w.next()) {
        int64_t i = w.idx[r - 2];
        // Kept columns [k0, k1); the rest are zero.
        int64_t k0 = kLower ? 0 : std::clamp<int64_t>(i + diag, 0, cols);
        int64_t k1 = kLower ? std::clamp<int64_t>(i + diag + 1, 0, cols) : cols;
        U* dst = out.ptr<U>() + w.offset(out.strides);
        const U* src = self.ptr<U>() + w.offset(self.strides);
        if (os == 1) {
          std::memset(dst, 0, static_cast<size_t>(k0) * sizeof(U));
          if (!in_place && is == 1) std::memcpy(dst + k0, src + k0, static_cast<size_t>(k1 - k0) * sizeof(U));
          else if (!in_place) for (int64_t j = k0; j < k1; ++j) dst[j] = src[j * is];
          std::memset(dst + k1, 0, static_cast<size_t>(cols - k1) * sizeof(U));
        } else {
          for (int64_t j = 0; j < cols; ++j) dst[j * os] = j >= k0 && j < k1 ? src[j * is] : U(0);
        }
      }
    });
  });
}
HAL_CPU_KERNEL(tril_kernel, triangle_body<true>)
HAL_CPU_KERNEL(triu_kernel, triangle_body<false>)

void one_hot_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const int64_t classes = op::one_hot::num_classes(c);
  // Every class is checked before anything is written.
  sdk::kernel::StridedLoop<1> scan(self, {&self});
  int64_t position = 0;
  scan.run({static_cast<char*>(self.data)}, 0, scan.numel(), [&](char* const* p, const int64_t* s, int64_t n) {
    for (int64_t k = 0; k < n; ++k, ++position) {
      int64_t v = *reinterpret_cast<const int64_t*>(p[0] + k * s[0]);
      if (v < 0 || v >= classes)
        sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": index ", v, " in 'self' at position ", position,
                  " is out of range [0, ", classes, ") (num_classes)");
    }
  });
  if (out.numel() == 0) return;
  // Iterates self's positions with out's row for each.
  Tensor rows = out;
  rows.rank = self.rank;
  const int64_t cs = out.strides[self.rank];
  sdk::kernel::StridedLoop<2> loop(self, {&rows, &self});
  std::array<char*, 2> bases{static_cast<char*>(out.data), static_cast<char*>(self.data)};
  parallel_for(loop.numel(), std::max<int64_t>(1, 32768 / classes), [&](int64_t b, int64_t e) {
    loop.run(bases, b, e, [&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t k = 0; k < n; ++k) {
        int64_t* row = reinterpret_cast<int64_t*>(p[0] + k * s[0]);
        int64_t v = *reinterpret_cast<const int64_t*>(p[1] + k * s[1]);
        for (int64_t j = 0; j < classes; ++j) row[j * cs] = j == v;
      }
    });
  });
}
HAL_CPU_KERNEL(one_hot_kernel, one_hot_body)

// Transposed layouts: DST contiguous along dim A (its last), SRC along
// another dim B. Copying square tiles of (B, A) keeps both sides in cache
// instead of reading SRC with a large stride across whole rows.
template <class T>
void tiled_move(const Tensor& dst, const Tensor& src, int a, int b, bool parallel) {
  constexpr int64_t kTile = 32;
  const int64_t size_a = dst.shape[a], size_b = dst.shape[b], tiles_a = (size_a + kTile - 1) / kTile;
  const int64_t tiles = tiles_a * ((size_b + kTile - 1) / kTile);
  const int64_t dst_b = dst.strides[b], src_a = src.strides[a];
  int outer_rank = 0;
  int64_t shape[HAL_TENSOR_MAX_RANK], dst_st[HAL_TENSOR_MAX_RANK], src_st[HAL_TENSOR_MAX_RANK];
  for (int d = 0; d < dst.rank; ++d) {
    if (d == a || d == b) continue;
    shape[outer_rank] = dst.shape[d];
    dst_st[outer_rank] = dst.strides[d];
    src_st[outer_rank++] = src.strides[d];
  }
  int64_t outer = 1;
  for (int d = 0; d < outer_rank; ++d) outer *= shape[d];
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t rest = t / tiles, tile = t % tiles, dst_off = 0, src_off = 0;
      for (int d = outer_rank - 1; d >= 0; --d) {
        dst_off += rest % shape[d] * dst_st[d];
        src_off += rest % shape[d] * src_st[d];
        rest /= shape[d];
      }
      const int64_t b0 = tile / tiles_a * kTile, a0 = tile % tiles_a * kTile;
      const int64_t b1 = std::min(size_b, b0 + kTile), a1 = std::min(size_a, a0 + kTile);
      T* out = dst.ptr<T>() + dst_off;
      const T* in = src.ptr<T>() + src_off;
      // Through a local tile, so both sides are read/written along their
      // contiguous dim (power-of-two strides would thrash the cache's sets).
      T tile_buf[kTile * kTile];
      for (int64_t x = a0; x < a1; ++x)
        for (int64_t y = b0; y < b1; ++y) tile_buf[(x - a0) * kTile + (y - b0)] = in[y + x * src_a];
      for (int64_t y = b0; y < b1; ++y)
        for (int64_t x = a0; x < a1; ++x) out[y * dst_b + x] = tile_buf[(x - a0) * kTile + (y - b0)];
    }
  };
  if (parallel) parallel_for(outer * tiles, 16, body);
  else body(0, outer * tiles);
}

// The dims (A, B) for tiled_move, or false when it does not apply.
bool transposed(const Tensor& dst, const Tensor& src, int& a, int& b) {
  if (dst.dtype != src.dtype || dst.rank != src.rank || dst.rank < 2) return false;
  for (int d = 0; d < dst.rank; ++d)
    if (dst.shape[d] != src.shape[d]) return false;
  a = dst.rank - 1;
  if (dst.strides[a] != 1 || src.strides[a] == 1 || dst.shape[a] < 16) return false;
  for (b = 0; b < a; ++b)
    if (src.strides[b] == 1 && src.shape[b] >= 16) return true;
  return false;
}

// COUNT rows of B bytes each, the next row STEP bytes further on (per
// operand): a constant-size memcpy is a few vector moves, not a call.
template <int64_t B>
void copy_rows(char* d, const char* s, int64_t d_step, int64_t s_step, int64_t count, int64_t bytes) {
  for (int64_t i = 0; i < count; ++i, d += d_step, s += s_step) std::memcpy(d, s, B > 0 ? B : bytes);
}

// Rows of at most this many bytes, dense in both operands, are copied row
// after row with pointers stepped along the next dim out: a permute or cat
// of a head of 8 floats otherwise paid a StridedLoop run (index arithmetic
// over every dim) and a memcpy call per 32 bytes.
constexpr int64_t kShortRowBytes = 64;

bool copy_short_rows(const sdk::kernel::StridedLoop<2>& loop, const Tensor& dst, const Tensor& src, bool parallel) {
  const int r = loop.rank();
  const int64_t elt = static_cast<int64_t>(dst.element_size());
  if (dst.dtype != src.dtype || r < 2 || dst.data == src.data || loop.byte_stride(0, r - 1) != elt ||
      loop.byte_stride(1, r - 1) != elt || loop.size(r - 1) * elt > kShortRowBytes)
    return false;
  const int64_t bytes = loop.size(r - 1) * elt, next = loop.size(r - 2), rows = loop.numel() / loop.size(r - 1);
  const int64_t d_step = loop.byte_stride(0, r - 2), s_step = loop.byte_stride(1, r - 2);
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end;) {
      char* d = static_cast<char*>(dst.data);
      const char* s = static_cast<const char*>(src.data);
      int64_t rest = row;
      for (int k = r - 2; k >= 0; --k) {
        const int64_t idx = rest % loop.size(k);
        rest /= loop.size(k);
        d += idx * loop.byte_stride(0, k);
        s += idx * loop.byte_stride(1, k);
      }
      const int64_t count = std::min(next - row % next, end - row);
      switch (bytes) {
        case 8: copy_rows<8>(d, s, d_step, s_step, count, bytes); break;
        case 16: copy_rows<16>(d, s, d_step, s_step, count, bytes); break;
        case 32: copy_rows<32>(d, s, d_step, s_step, count, bytes); break;
        case 64: copy_rows<64>(d, s, d_step, s_step, count, bytes); break;
        default: copy_rows<0>(d, s, d_step, s_step, count, bytes); break;
      }
      row += count;
    }
  };
  if (parallel) parallel_for(rows, std::max<int64_t>(1, kGrainBytes / bytes), body);
  else body(0, rows);
  return true;
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src, bool parallel) {
  int a = 0, b = 0;
  if (dst.numel() > 0 && transposed(dst, src, a, b)) {
    by_size(dst.element_size(), [&](auto u) { tiled_move<decltype(u)>(dst, src, a, b, parallel); });
    return;
  }
  sdk::kernel::StridedLoop<2> loop(dst, {&dst, &src}, sdk::kernel::LoopOrder::kMemory);
  if (loop.numel() == 0 || copy_short_rows(loop, dst, src, parallel)) return;
  RunFn fn = pick_run(dst.dtype, src.dtype);
  std::array<char*, 2> bases{static_cast<char*>(dst.data), static_cast<char*>(src.data)};
  auto body = [&](int64_t b, int64_t e) { loop.run(bases, b, e, fn); };
  int64_t grain = kGrainBytes / static_cast<int64_t>(std::max(dst.element_size(), src.element_size()));
  if (parallel) parallel_for(loop.numel(), grain, body);
  else body(0, loop.numel());
}

void register_data_ops(sdk::OpRegistry& ops) {
  ops.add<op::copy>(&copy_kernel);
  ops.add<op::fill>(&fill_kernel);
  ops.add<op::arange>(&arange_kernel);
  ops.add<op::cat>(&cat_kernel);
  ops.add<op::stack>(&stack_kernel);
  ops.add<op::split>(&split_kernel);
  ops.add<op::pad>(&pad_kernel);
  ops.add<op::flip>(&flip_kernel);
  ops.add<op::reshape>(&reshape_kernel);
  ops.add<op::permute>(&permute_kernel);
  ops.add<op::roll>(&roll_kernel);
  ops.add<op::repeat>(&repeat_kernel);
  ops.add<op::tril>(&tril_kernel);
  ops.add<op::triu>(&triu_kernel);
  ops.add<op::one_hot>(&one_hot_kernel, HAL_DTYPE_BIT(HAL_DTYPE_INT64));
}

}  // namespace hal::cpu
