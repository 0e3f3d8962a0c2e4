// CPU kernels of the "index" op group: gathers and scatters (which move
// bytes, so they are instantiated per element size, not per dtype), masked
// fill, nonzero and the sorts. Index tensors are checked in full before any
// output is written; outputs that are strided (or alias an input still being
// read) are computed in a contiguous scratch and copied out at the end.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "hal/sdk/op_shapes.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
using sdk::kernel::compute_t;
using sdk::kernel::dispatch;
using sdk::kernel::TypeTag;

// ---- helpers ----------------------------------------------------------------

// Unsigned type of the element size SIZE (1, 2, 4, 8 bytes).
template <class F>
void dispatch_bytes(size_t size, F&& f) {
  switch (size) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    default: sdk::fail(HAL_STATUS_INTERNAL, "no element type of ", size, " bytes");
  }
}

template <class F>
void dispatch_index(const OpCall& c, const char* arg, uint32_t dtype, F&& f) {
  switch (dtype) {
    case HAL_DTYPE_INT32: return f(TypeTag<int32_t>{});
    case HAL_DTYPE_INT64: return f(TypeTag<int64_t>{});
    default:
      sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, c.name(), ": input '", arg, "' has dtype ", sdk::dtype_name(dtype),
                " but must be int32 or int64");
  }
}

// DST = SRC (same shape and dtype, any strides).
void copy_tensor(const Tensor& dst, const Tensor& src) {
  dispatch_bytes(dst.element_size(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    map<U, U>(dst, {&src}, [](U x) { return x; });
  });
}

// T itself when contiguous, else a contiguous copy.
struct Contig {
  std::vector<unsigned char> storage;  // before t: t's initialiser fills it
  Tensor t;
  explicit Contig(const Tensor& src) : t(src.is_contiguous() ? src : cast_contiguous(src, src.dtype, storage)) {}
  template <class U>
  const U* ptr() const { return static_cast<const U*>(t.data); }
};

// Where a kernel writes OUT: OUT itself when contiguous and DIRECT (it
// aliases no input still being read), else a contiguous scratch that
// commit() copies to OUT.
class OutStage {
 public:
  Tensor t;

  OutStage(const Tensor& out, bool direct) : t(out), out_(out) {
    if (direct && out.is_contiguous()) return;
    t.set_contiguous_strides();
    storage_.resize(static_cast<size_t>(t.numel()) * t.element_size() + 1);
    t.data = storage_.data();
    staged_ = true;
  }
  template <class U>
  U* ptr() const { return static_cast<U*>(t.data); }
  void commit() const {
    if (staged_) copy_tensor(out_, t);
  }

 private:
  const Tensor& out_;
  std::vector<unsigned char> storage_;
  bool staged_ = false;
};

// The SDK allows an output to overlap an input only as an exact alias.
bool aliases(const Tensor& out, const Tensor& in) { return in.numel() > 0 && in.data == out.data; }

// Fails OUT_OF_RANGE at the first of P[0, COUNT) outside [LO, HI).
template <class I>
void check_range(const OpCall& c, const char* arg, const I* p, int64_t count, int64_t lo, int64_t hi,
                 int64_t position_base = 0) {
  uint64_t span = static_cast<uint64_t>(hi - lo);
  bool bad = false;
  for (int64_t i = 0; i < count; ++i) bad |= static_cast<uint64_t>(static_cast<int64_t>(p[i]) - lo) >= span;
  if (!bad) return;
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = p[i];
    if (v < lo || v >= hi)
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": index ", v, " in '", arg, "' at position ", position_base + i,
                " is out of range [", lo, ", ", hi, ")");
  }
}

// A tensor's shape and element strides with 0-d seen as [1].
struct Dims {
  int rank = 1;
  int64_t shape[HAL_TENSOR_MAX_RANK] = {1};
  int64_t strides[HAL_TENSOR_MAX_RANK] = {0};
  explicit Dims(const sdk::TensorMeta& t, const int64_t* st) {
    if (t.rank == 0) return;
    rank = t.rank;
    for (int d = 0; d < rank; ++d) {
      shape[d] = t.shape[d];
      strides[d] = st[d];
    }
  }
  explicit Dims(const Tensor& t) : Dims(t, t.strides) {}
  int64_t prod(int begin, int end) const {
    int64_t n = 1;
    for (int d = begin; d < end; ++d) n *= shape[d];
    return n;
  }
};

// Element offsets through STRIDES of every multi-index over SHAPE[BEGIN, END),
// row-major.
// True when OFFSETS[k] == k (the inner dims are contiguous): lets the hot
// loops index directly instead of through the table.
bool is_identity(const std::vector<int64_t>& offsets) {
  for (size_t k = 0; k < offsets.size(); ++k)
    if (offsets[k] != static_cast<int64_t>(k)) return false;
  return true;
}

std::vector<int64_t> offsets(const int64_t* shape, const int64_t* strides, int begin, int end) {
  std::vector<int64_t> out{0};
  for (int d = begin; d < end; ++d) {
    std::vector<int64_t> next;
    next.reserve(out.size() * static_cast<size_t>(shape[d]));
    for (int64_t o : out)
      for (int64_t i = 0; i < shape[d]; ++i) next.push_back(o + i * strides[d]);
    out.swap(next);
  }
  return out;
}

int attr_dim(const OpCall& c, int64_t dim, int rank) { return sdk::shape_rules::normalize_dim(c, "dim", dim, rank); }

// Walks an index of shape [R, m, K] (dims before, at and after the indexed
// dim) in parallel over its R*K columns: F(r, k0, k1) handles columns
// [k0, k1) of outer row r for every j. Distinct columns never write the same
// element of a gather's or scatter's output.
template <class F>
void walk_columns(int64_t R, int64_t m, int64_t K, F&& f) {
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(m, 1));
  parallel_for(R * K, grain, [&](int64_t b, int64_t e) {
    for (int64_t col = b; col < e;) {
      int64_t r = col / K, k0 = col % K;
      int64_t k1 = std::min(K, k0 + (e - col));
      f(r, k0, k1);
      col += k1 - k0;
    }
  });
}

// ---- embedding, index_select --------------------------------------------------

// OUT[r, j, :] = SELF[r, IDX[j], :] for SELF contiguous [R, n, K]: memcpy
// of whole rows.
template <class I>
void select_rows(const Tensor& self, int64_t R, int64_t n, int64_t K, const I* idx, int64_t m, void* out) {
  size_t es = self.element_size();
  const char* src = static_cast<const char*>(self.data);
  char* dst = static_cast<char*>(out);
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(K, 1));
  if (K == 1) {
    dispatch_bytes(es, [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U* s = reinterpret_cast<const U*>(src);
      U* o = reinterpret_cast<U*>(dst);
      parallel_for(R * m, grain, [&](int64_t b, int64_t e) {
        for (int64_t r = b / m, j = b % m, p = b; p < e; ++r, j = 0) {
          const U* row = s + r * n;
          for (int64_t end = std::min(e, p + (m - j)); p < end; ++p, ++j) o[p] = row[idx[j]];
        }
      });
    });
    return;
  }
  size_t row = static_cast<size_t>(K) * es;
  parallel_for(R * m, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b / m, j = b % m, p = b; p < e; ++r, j = 0)
      for (int64_t end = std::min(e, p + (m - j)); p < end; ++p, ++j)
        std::memcpy(dst + p * row, src + (r * n + idx[j]) * row, row);
  });
}

void embedding_body(const OpCall& c) {
  const Tensor& weight = op::embedding::weight(c);
  Contig idx(op::embedding::indices(c));
  Contig w(weight);
  OutStage out(op::embedding::out(c), true);
  dispatch_index(c, "indices", idx.t.dtype, [&](auto tag) {
    using I = typename decltype(tag)::type;
    check_range(c, "indices", idx.ptr<I>(), idx.t.numel(), 0, weight.shape[0]);
    select_rows(w.t, 1, weight.shape[0], weight.shape[1], idx.ptr<I>(), idx.t.numel(), out.t.data);
  });
  out.commit();
}
HAL_CPU_KERNEL(embedding_kernel, embedding_body)

void index_select_body(const OpCall& c) {
  const Tensor& self = op::index_select::self(c);
  Contig idx(op::index_select::index(c));
  int dim = attr_dim(c, op::index_select::dim(c), self.rank);
  Dims s(self);
  int64_t n = s.shape[dim];
  dispatch_index(c, "index", idx.t.dtype, [&](auto tag) {
    using I = typename decltype(tag)::type;
    check_range(c, "index", idx.ptr<I>(), idx.t.numel(), 0, n);
    Contig sc(self);
    OutStage out(op::index_select::out(c), true);
    select_rows(sc.t, s.prod(0, dim), n, s.prod(dim + 1, s.rank), idx.ptr<I>(), idx.t.numel(), out.t.data);
    out.commit();
  });
}
HAL_CPU_KERNEL(index_select_kernel, index_select_body)

void embedding_backward_body(const OpCall& c) {
  Contig grad(op::embedding_backward::grad_output(c));
  Contig idx(op::embedding_backward::indices(c));
  int64_t num = op::embedding_backward::num_weights(c);
  int64_t padding = op::embedding_backward::padding_idx(c);
  bool scale = op::embedding_backward::scale_grad_by_freq(c);
  int64_t D = grad.t.shape[grad.t.rank - 1];
  int64_t P = idx.t.numel();
  // Positions grouped by index (counting sort), so each grad_weight row is
  // summed by one thread in position order: deterministic.
  std::vector<int64_t> start(static_cast<size_t>(num) + 1, 0), order(static_cast<size_t>(P));
  dispatch_index(c, "indices", idx.t.dtype, [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* ip = idx.ptr<I>();
    check_range(c, "indices", ip, P, 0, num);
    for (int64_t p = 0; p < P; ++p) ++start[ip[p] + 1];
    for (int64_t w = 0; w < num; ++w) start[w + 1] += start[w];
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t p = 0; p < P; ++p) order[fill[ip[p]]++] = p;
  });
  OutStage out(op::embedding_backward::grad_weight(c), true);
  sdk::kernel::dispatch_float(grad.t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* g = grad.ptr<T>();
    T* o = out.ptr<T>();
    parallel_for(num, std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
      std::vector<Acc> acc(static_cast<size_t>(D));
      for (int64_t w = b; w < e; ++w) {
        std::fill(acc.begin(), acc.end(), Acc(0));
        int64_t count = start[w + 1] - start[w];
        if (w != padding) {
          for (int64_t q = start[w]; q < start[w + 1]; ++q) {
            const T* row = g + order[q] * D;
            for (int64_t d = 0; d < D; ++d) acc[d] += static_cast<Acc>(row[d]);
          }
        }
        Acc f = scale && count > 0 ? Acc(1) / static_cast<Acc>(count) : Acc(1);
        for (int64_t d = 0; d < D; ++d) o[w * D + d] = static_cast<T>(acc[d] * f);
      }
    });
  });
  out.commit();
}
HAL_CPU_KERNEL(embedding_backward_kernel, embedding_backward_body)

// ---- gather, scatter ---------------------------------------------------------

void gather_body(const OpCall& c) {
  const Tensor& self = op::gather::self(c);
  Contig idx(op::gather::index(c));
  int dim = attr_dim(c, op::gather::dim(c), self.rank);
  Dims s(self), ix(idx.t);
  dispatch_index(c, "index", idx.t.dtype, [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* ip = idx.ptr<I>();
    check_range(c, "index", ip, idx.t.numel(), 0, s.shape[dim]);
    OutStage out(op::gather::out(c), true);
    int64_t R = ix.prod(0, dim), m = ix.shape[dim], K = ix.prod(dim + 1, ix.rank), sd = s.strides[dim];
    std::vector<int64_t> outer = offsets(ix.shape, s.strides, 0, dim);
    std::vector<int64_t> inner = offsets(ix.shape, s.strides, dim + 1, ix.rank);
    bool dense = is_identity(inner);
    dispatch_bytes(self.element_size(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U* src = static_cast<const U*>(self.data);
      U* dst = out.ptr<U>();
      walk_columns(R, m, K, [&](int64_t r, int64_t k0, int64_t k1) {
        const U* base = src + outer[r];
        if (K == 1) {  // indexed dim innermost: index and output rows are contiguous runs
          const I* irow = ip + r * m;
          U* orow = dst + r * m;
          const U* b0 = base + inner[0];
          for (int64_t j = 0; j < m; ++j) orow[j] = b0[irow[j] * sd];
          return;
        }
        for (int64_t j = 0; j < m; ++j) {
          const I* irow = ip + (r * m + j) * K;
          U* orow = dst + (r * m + j) * K;
          if (dense) {
            for (int64_t k = k0; k < k1; ++k) orow[k] = base[irow[k] * sd + k];
          } else {
            for (int64_t k = k0; k < k1; ++k) orow[k] = base[irow[k] * sd + inner[k]];
          }
        }
      });
    });
    out.commit();
  });
}
HAL_CPU_KERNEL(gather_kernel, gather_body)

// out = self; out[.., index[..j..], ..] (op)= src[..j..]. ADD selects
// scatter_add.
template <bool kAdd>
void scatter_impl(const OpCall& c, int64_t dim_attr) {
  const Tensor& self = c.input(0);
  const Tensor& index = c.input(1);
  const Tensor& src = c.input(2);
  const Tensor& out_t = c.output(0);
  Contig idx(index);
  int dim = attr_dim(c, dim_attr, self.rank);
  Dims s(self), ix(idx.t), sr(src);
  dispatch_index(c, "index", idx.t.dtype, [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* ip = idx.ptr<I>();
    check_range(c, "index", ip, idx.t.numel(), 0, s.shape[dim]);
    OutStage out(out_t, !aliases(out_t, index) && !aliases(out_t, src));
    if (out.t.data != self.data) copy_tensor(out.t, self);
    Dims o(out.t);
    int64_t R = ix.prod(0, dim), m = ix.shape[dim], K = ix.prod(dim + 1, ix.rank);
    int64_t od = o.strides[dim], sd = sr.strides[dim];
    std::vector<int64_t> o_outer = offsets(ix.shape, o.strides, 0, dim), o_inner = offsets(ix.shape, o.strides, dim + 1, ix.rank);
    std::vector<int64_t> s_outer = offsets(ix.shape, sr.strides, 0, dim), s_inner = offsets(ix.shape, sr.strides, dim + 1, ix.rank);
    bool dense = is_identity(o_inner) && is_identity(s_inner);
    auto run = [&](auto tag) {
      using U = typename decltype(tag)::type;
      const U* sp = static_cast<const U*>(src.data);
      U* dst = out.ptr<U>();
      walk_columns(R, m, K, [&](int64_t r, int64_t k0, int64_t k1) {
        U* obase = dst + o_outer[r];
        const U* sbase = sp + s_outer[r];
        auto rows = [&](auto o_at, auto s_at) {
          for (int64_t j = 0; j < m; ++j) {
            const I* irow = ip + (r * m + j) * K;
            for (int64_t k = k0; k < k1; ++k) {
              U& target = obase[irow[k] * od + o_at(k)];
              const U& v = sbase[j * sd + s_at(k)];
              if constexpr (kAdd) target = static_cast<U>(static_cast<compute_t<U>>(target) + static_cast<compute_t<U>>(v));
              else target = v;
            }
          }
        };
        if (dense) rows([](int64_t k) { return k; }, [](int64_t k) { return k; });
        else rows([&](int64_t k) { return o_inner[k]; }, [&](int64_t k) { return s_inner[k]; });
      });
    };
    if constexpr (kAdd) {
      dispatch(self.dtype, [&](auto tag) {
        if constexpr (!std::is_same_v<typename decltype(tag)::type, bool>) run(tag);
      });
    } else {
      dispatch_bytes(self.element_size(), run);
    }
    out.commit();
  });
}

void scatter_body(const OpCall& c) { scatter_impl<false>(c, op::scatter::dim(c)); }
HAL_CPU_KERNEL(scatter_kernel, scatter_body)
void scatter_add_body(const OpCall& c) { scatter_impl<true>(c, op::scatter_add::dim(c)); }
HAL_CPU_KERNEL(scatter_add_kernel, scatter_add_body)

// ---- index_put ----------------------------------------------------------------

void index_put_body(const OpCall& c) {
  const Tensor& self = op::index_put::self(c);
  const Tensor& indices = op::index_put::indices(c);
  const Tensor& values = op::index_put::values(c);
  const Tensor& out_t = op::index_put::out(c);
  bool accumulate = op::index_put::accumulate(c);
  Contig idx(indices);
  int K = static_cast<int>(idx.t.shape[0]);
  int64_t B = idx.t.numel() / K;
  // Element offset (in a contiguous tensor of self's shape) of each slice.
  int64_t slice = 1;
  for (int d = K; d < self.rank; ++d) slice *= self.shape[d];
  std::vector<int64_t> base(static_cast<size_t>(B), 0);
  const int64_t* ip = idx.ptr<int64_t>();
  for (int k = 0; k < K; ++k) {
    int64_t n = self.shape[k];
    check_range(c, "indices", ip + k * B, B, -n, n, k * B);
    int64_t stride = slice;
    for (int d = k + 1; d < K; ++d) stride *= self.shape[d];
    for (int64_t b = 0; b < B; ++b) {
      int64_t v = ip[k * B + b];
      base[b] += (v < 0 ? v + n : v) * stride;
    }
  }
  OutStage out(out_t, !aliases(out_t, indices) && !aliases(out_t, values));
  if (out.t.data != self.data) copy_tensor(out.t, self);
  // values broadcast to the indexed shape B + self.shape[K:].
  sdk::TensorMeta full;
  std::vector<int64_t> shape(idx.t.shape + 1, idx.t.shape + idx.t.rank);
  int nb = static_cast<int>(shape.size());
  shape.insert(shape.end(), self.shape + K, self.shape + self.rank);
  full.set_shape(shape);
  int64_t vstrides[HAL_TENSOR_MAX_RANK] = {};
  sdk::kernel::broadcast_byte_strides(values, full.rank, full.shape, vstrides);
  for (int d = 0; d < full.rank; ++d) vstrides[d] /= static_cast<int64_t>(values.element_size());
  std::vector<int64_t> v_outer = offsets(full.shape, vstrides, 0, nb);
  std::vector<int64_t> v_inner = offsets(full.shape, vstrides, nb, full.rank);
  bool inner_contig = true;
  for (int64_t s = 0; s < slice && inner_contig; ++s) inner_contig = v_inner[s] == s;
  auto run = [&](auto tag, auto add) {
    using U = typename decltype(tag)::type;
    const U* vp = static_cast<const U*>(values.data);
    U* dst = out.ptr<U>();
    parallel_for(slice, 16384, [&](int64_t s0, int64_t s1) {
      for (int64_t b = 0; b < B; ++b) {
        U* o = dst + base[b];
        const U* v = vp + v_outer[b];
        if constexpr (decltype(add)::value) {
          for (int64_t s = s0; s < s1; ++s)
            o[s] = static_cast<U>(static_cast<compute_t<U>>(o[s]) + static_cast<compute_t<U>>(v[v_inner[s]]));
        } else if (inner_contig) {
          std::memcpy(o + s0, v + s0, static_cast<size_t>(s1 - s0) * sizeof(U));
        } else {
          for (int64_t s = s0; s < s1; ++s) o[s] = v[v_inner[s]];
        }
      }
    });
  };
  if (accumulate) {
    dispatch(self.dtype, [&](auto tag) { run(tag, std::true_type{}); });  // bool: += is logical or
  } else {
    dispatch_bytes(self.element_size(), [&](auto tag) { run(tag, std::false_type{}); });
  }
  out.commit();
}
HAL_CPU_KERNEL(index_put_kernel, index_put_body)

// ---- masked_fill, nonzero -------------------------------------------------------

void masked_fill_body(const OpCall& c) {
  const Tensor& self = op::masked_fill::self(c);
  const Tensor& mask = op::masked_fill::mask(c);
  const sdk::Scalar& value = op::masked_fill::value(c);
  dispatch(self.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using V = compute_t<T>;
    V v;
    if constexpr (std::is_same_v<T, bool>) v = value.is_integral() ? value.to_int() != 0 : value.to_double() != 0;
    else v = value.to<V>();
    map<T, T, bool>(op::masked_fill::out(c), {&self, &mask}, [v](V x, bool m) { return m ? v : x; });
  });
}
HAL_CPU_KERNEL(masked_fill_kernel, masked_fill_body)

void nonzero_body(const OpCall& c) {
  Contig self(op::nonzero::self(c));
  const Tensor& out = op::nonzero::out(c);
  const Tensor& count = op::nonzero::count(c);
  int64_t N = self.t.numel();
  int rank = self.t.rank;
  int64_t chunk = 65536;
  int64_t chunks = (N + chunk - 1) / chunk;
  std::vector<int64_t> found(static_cast<size_t>(chunks) + 1, 0);
  dispatch(self.t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = self.ptr<T>();
    auto nonzero = [](T x) { return static_cast<compute_t<T>>(x) != compute_t<T>(0); };
    parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t ch = b; ch < e; ++ch) {
        int64_t n = 0;
        for (int64_t i = ch * chunk, end = std::min(N, i + chunk); i < end; ++i) n += nonzero(p[i]);
        found[ch + 1] = n;
      }
    });
    for (int64_t ch = 0; ch < chunks; ++ch) found[ch + 1] += found[ch];
    int64_t* o = out.ptr<int64_t>();
    int64_t s0 = out.strides[0], s1 = out.strides[1];
    parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t ch = b; ch < e; ++ch) {
        int64_t row = found[ch];
        int64_t begin = ch * chunk, end = std::min(N, begin + chunk);
        int64_t coord[HAL_TENSOR_MAX_RANK] = {};
        int64_t flat = begin;
        for (int d = rank - 1; d >= 0; --d) {
          coord[d] = flat % self.t.shape[d];
          flat /= self.t.shape[d];
        }
        for (int64_t i = begin; i < end; ++i) {
          if (nonzero(p[i])) {
            for (int d = 0; d < rank; ++d) o[row * s0 + d * s1] = coord[d];
            ++row;
          }
          for (int d = rank - 1; d >= 0 && ++coord[d] == self.t.shape[d]; --d) coord[d] = 0;
        }
      }
    });
  });
  *count.ptr<int64_t>() = found[chunks];
}
HAL_CPU_KERNEL(nonzero_kernel, nonzero_body)

// ---- sort, argsort, topk ---------------------------------------------------------

// NaN is larger than every number (PyTorch's order).
template <class C>
bool less_nan_last(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) return (!std::isnan(a) && std::isnan(b)) || a < b;
  else return a < b;
}
template <class C>
bool greater_nan_first(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) return (std::isnan(a) && !std::isnan(b)) || a > b;
  else return a > b;
}

enum class Order { kSort, kStableSort, kTopSorted, kTopUnsorted };

// For every row of SELF along DIM: its first K elements in ORDER (descending
// when DESCENDING) into VALUES (may be null) and their positions into INDICES.
void sort_rows(const OpCall& c, int dim, int64_t k, bool descending, Order order, const Tensor* values,
               const Tensor& indices) {
  const Tensor& self = c.input(0);
  Dims s(self);
  int64_t n = s.shape[dim], R = s.prod(0, dim), K = s.prod(dim + 1, s.rank), sd = s.strides[dim];
  std::vector<int64_t> outer = offsets(s.shape, s.strides, 0, dim), inner = offsets(s.shape, s.strides, dim + 1, s.rank);
  std::optional<OutStage> vout;
  if (values != nullptr) vout.emplace(*values, true);
  OutStage iout(indices, true);
  dispatch(self.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    using Item = std::pair<C, int64_t>;
    const T* src = static_cast<const T*>(self.data);
    T* vo = vout ? vout->ptr<T>() : nullptr;
    int64_t* io = iout.ptr<int64_t>();
    auto cmp = [descending](const Item& a, const Item& b) {
      return descending ? greater_nan_first(a.first, b.first) : less_nan_last(a.first, b.first);
    };
    // Small k: one pass keeping the best k in a heap (worst on top), so most
    // elements cost one comparison and no copy.
    bool use_heap = order != Order::kSort && order != Order::kStableSort && k > 0 && k * 16 <= n;
    parallel_for(R * K, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      std::vector<Item> row(static_cast<size_t>(use_heap ? k : n));
      for (int64_t col = b; col < e; ++col) {
        int64_t r = col / K, kk = col % K;
        const T* base = src + outer[r] + inner[kk];
        int64_t at = r * k * K + kk;
        if (use_heap) {
          for (int64_t j = 0; j < k; ++j) row[j] = {static_cast<C>(base[j * sd]), j};
          std::make_heap(row.begin(), row.end(), cmp);
          for (int64_t j = k; j < n; ++j) {
            Item x{static_cast<C>(base[j * sd]), j};
            if (!cmp(x, row.front())) continue;
            std::pop_heap(row.begin(), row.end(), cmp);
            row.back() = x;
            std::push_heap(row.begin(), row.end(), cmp);
          }
          if (order == Order::kTopSorted) std::sort_heap(row.begin(), row.end(), cmp);
          for (int64_t j = 0; j < k; ++j, at += K) {
            if (vo != nullptr) vo[at] = base[row[j].second * sd];
            io[at] = row[j].second;
          }
          continue;
        }
        for (int64_t j = 0; j < n; ++j) row[j] = {static_cast<C>(base[j * sd]), j};
        switch (order) {
          case Order::kSort: std::sort(row.begin(), row.end(), cmp); break;
          case Order::kStableSort: std::stable_sort(row.begin(), row.end(), cmp); break;
          case Order::kTopSorted:
          case Order::kTopUnsorted:
            if (k < n) std::nth_element(row.begin(), row.begin() + k, row.end(), cmp);
            if (order == Order::kTopSorted) std::sort(row.begin(), row.begin() + k, cmp);
            break;
        }
        for (int64_t j = 0; j < k; ++j, at += K) {
          if (vo != nullptr) vo[at] = base[row[j].second * sd];
          io[at] = row[j].second;
        }
      }
    });
  });
  if (vout) vout->commit();
  iout.commit();
}

void sort_body(const OpCall& c) {
  int dim = attr_dim(c, op::sort::dim(c), c.input(0).rank);
  int64_t n = Dims(c.input(0)).shape[dim];
  sort_rows(c, dim, n, op::sort::descending(c), op::sort::stable(c) ? Order::kStableSort : Order::kSort,
            &op::sort::values(c), op::sort::indices(c));
}
HAL_CPU_KERNEL(sort_kernel, sort_body)

void argsort_body(const OpCall& c) {
  int dim = attr_dim(c, op::argsort::dim(c), c.input(0).rank);
  int64_t n = Dims(c.input(0)).shape[dim];
  sort_rows(c, dim, n, op::argsort::descending(c), op::argsort::stable(c) ? Order::kStableSort : Order::kSort,
            nullptr, op::argsort::indices(c));
}
HAL_CPU_KERNEL(argsort_kernel, argsort_body)

void topk_body(const OpCall& c) {
  int dim = attr_dim(c, op::topk::dim(c), c.input(0).rank);
  sort_rows(c, dim, op::topk::k(c), op::topk::largest(c),
            op::topk::sorted(c) ? Order::kTopSorted : Order::kTopUnsorted, &op::topk::values(c),
            op::topk::indices(c));
}
HAL_CPU_KERNEL(topk_kernel, topk_body)

}  // namespace

void register_index_ops(sdk::OpRegistry& ops) {
  constexpr uint64_t kAll = sdk::kAllDtypes;
  constexpr uint64_t kNumeric = sdk::kFloatDtypes | sdk::kIntDtypes;
  ops.add<op::embedding>(&embedding_kernel, kAll);
  ops.add<op::embedding_backward>(&embedding_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::index_select>(&index_select_kernel, kAll);
  ops.add<op::gather>(&gather_kernel, kAll);
  ops.add<op::scatter>(&scatter_kernel, kAll);
  ops.add<op::scatter_add>(&scatter_add_kernel, kNumeric);
  ops.add<op::index_put>(&index_put_kernel, kAll);
  ops.add<op::masked_fill>(&masked_fill_kernel, kAll);
  ops.add<op::nonzero>(&nonzero_kernel, kAll);
  ops.add<op::topk>(&topk_kernel, kNumeric);
  ops.add<op::sort>(&sort_kernel, kAll);
  ops.add<op::argsort>(&argsort_kernel, kAll);
}

}  // namespace hal::cpu
