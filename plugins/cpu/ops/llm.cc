// CPU kernels of the "llm" op group: fused inference operators over a paged
// KV cache (layouts and formulas in sdk/catalog/ops/llm.toml). Everything
// computes in A = float (double for float64) and rounds once on store.
// - What only the data decides (slots, block ids, positions, lengths,
//   sequence starts, expert ids) is checked in full before any output is
//   written, and fails OUT_OF_RANGE naming the argument, value and position.
// - Contiguous operands are read and written where they are; strided ones go
//   through contiguous copies (the paged caches only need a unit stride in
//   their last dim).
// - Attention keeps the query heads of one kv head together (each K/V row is
//   read once for all of them), with an online softmax over chunks of keys;
//   decode also splits long contexts into partitions whose partial results
//   are combined at the end (vLLM's paged attention v2), so one sequence
//   keeps every core busy. Calls with little work run on the calling thread.
// - fused_moe groups tokens by expert and linear_w8a16 dequantises weight
//   tiles, both into oneDNN sgemms for float32/float16/bfloat16.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <immintrin.h>

#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "onednn_util.hpp"
#include "random_layout.hpp"
#include "stream_store.hpp"
#include "vector_math.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
using sdk::kernel::BFloat16;
using sdk::kernel::bits_float;
using sdk::kernel::float_bits;
using sdk::kernel::Half;

// Forced into the row loops so those vectorise whole.
#define HAL_LLM_INLINE inline __attribute__((always_inline))
// Compute-heavy loops in 512-bit vectors where the ISA has them (GCC's
// default tuning for AVX-512 CPUs prefers 256-bit ones): silu_and_mul's
// exp and division per element, attention's dot products.
#if defined(__GNUC__) && !defined(__clang__)
#define HAL_LLM_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define HAL_LLM_WIDE
#endif

// ---- element helpers ---------------------------------------------------------------

template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
template <class A>
constexpr hal_dtype_e kAccDtype = std::is_same_v<A, double> ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32;

// float16 -> float without branches (vectorises, unlike Half::to_float): the
// exponent/mantissa bits shifted into a float and scaled by 2^112 give
// normals and subnormals exactly; inf/NaN get the all-ones exponent.
HAL_LLM_INLINE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const float f = bits_float(em << 13) * 0x1p112f;
  const uint32_t special = 0u - static_cast<uint32_t>(em >= 0x7c00u);
  return bits_float(float_bits(f) | (special & 0x7f800000u) | sign);
}

template <class T>
HAL_LLM_INLINE acc_t<T> load(T x) {
  if constexpr (std::is_same_v<T, Half>) return half_bits_to_float(x.bits);
  else if constexpr (std::is_same_v<T, BFloat16>) return bits_float(static_cast<uint32_t>(x.bits) << 16);
  else return x;
}
template <class T>
HAL_LLM_INLINE T store(acc_t<T> v) {
  if constexpr (std::is_same_v<T, acc_t<T>>) return v;
  else return T(v);
}
// V rounded to T and back (what an unfused op chain would see).
template <class T>
HAL_LLM_INLINE acc_t<T> round_to(acc_t<T> v) {
  if constexpr (std::is_same_v<T, acc_t<T>>) return v;
  else return load(T(v));
}

HAL_LLM_INLINE float exp_a(float x) { return vmath::exp(x); }
HAL_LLM_INLINE double exp_a(double x) { return std::exp(x); }

template <class A>
HAL_LLM_INLINE A dot(const A* a, const A* b, int64_t n) {
  A s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t e = 0; e < n; ++e) s += a[e] * b[e];
  return s;
}
// Dot products of K with the four rows Q, Q + LD, Q + 2·LD, Q + 3·LD.
template <class A>
HAL_LLM_INLINE void dot4(const A* q, int64_t ld, const A* k, int64_t n, A* out) {
  const A *q0 = q, *q1 = q + ld, *q2 = q + 2 * ld, *q3 = q + 3 * ld;
  A s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (int64_t e = 0; e < n; ++e) {
    const A kv = k[e];
    s0 += q0[e] * kv;
    s1 += q1[e] * kv;
    s2 += q2[e] * kv;
    s3 += q3[e] * kv;
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}
#if defined(__AVX512F__)
// float32 rows of a multiple of 16: four zmm accumulators, each reduced by
// a shuffle tree (GCC's "omp simd" reduction spills the lanes and adds them
// one by one, a 16-deep chain per dot product).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's own _mm512_reduce_add_ps (avx512fintrin.h)
template <>
HAL_LLM_INLINE void dot4<float>(const float* q, int64_t ld, const float* k, int64_t n, float* out) {
  if (n % 16 != 0) {
    for (int u = 0; u < 4; ++u) out[u] = dot(q + u * ld, k, n);
    return;
  }
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t e = 0; e < n; e += 16) {
    const __m512 kv = _mm512_loadu_ps(k + e);
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + e), kv, s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + ld + e), kv, s1);
    s2 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 2 * ld + e), kv, s2);
    s3 = _mm512_fmadd_ps(_mm512_loadu_ps(q + 3 * ld + e), kv, s3);
  }
  out[0] = _mm512_reduce_add_ps(s0);
  out[1] = _mm512_reduce_add_ps(s1);
  out[2] = _mm512_reduce_add_ps(s2);
  out[3] = _mm512_reduce_add_ps(s3);
}
#pragma GCC diagnostic pop
#endif
template <class A>
HAL_LLM_INLINE void axpy(A alpha, const A* x, A* y, int64_t n) {
#pragma omp simd
  for (int64_t e = 0; e < n; ++e) y[e] += alpha * x[e];
}
// Y += P[0]·X[0] + ... + P[3]·X[3], summed in that order (as four axpys).
template <class A>
HAL_LLM_INLINE void axpy4(const A* p, const A* const* x, A* y, int64_t n) {
  const A p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
  const A *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
#pragma omp simd
  for (int64_t e = 0; e < n; ++e) {
    A t = y[e];
    t += p0 * x0[e];
    t += p1 * x1[e];
    t += p2 * x2[e];
    t += p3 * x3[e];
    y[e] = t;
  }
}
template <class T>
HAL_LLM_INLINE void convert_row(const T* src, acc_t<T>* dst, int64_t n) {
#pragma omp simd
  for (int64_t e = 0; e < n; ++e) dst[e] = load(src[e]);
}

using onednn::sgemm;

// C[M, N] (ldc) = A[M, K] · B[N, K]ᵀ: oneDNN for float, loops for double.
template <class A>
void gemm_nt(int64_t m, int64_t n, int64_t k, const A* a, const A* b, A* c, int64_t ldc) {
  if constexpr (std::is_same_v<A, float>) {
    if (k == 0) {
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
      return;
    }
    sgemm('N', 'T', m, n, k, 1.0f, a, k, b, k, 0.0f, c, ldc);
  } else {
    parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, m * k)), [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j)
        for (int64_t i = 0; i < m; ++i) c[i * ldc + j] = dot(a + i * k, b + j * k, k);
    });
  }
}

// Below this many multiply-adds (tens of µs on one core) a call runs on the
// calling thread: waking OpenMP's sleeping workers (OMP_WAIT_POLICY=PASSIVE)
// costs more than the work (tiny-model decode steps: ~65 µs -> a few).
constexpr int64_t kSerialMacs = int64_t{1} << 19;

// Calls FN(i) for i in [0, N), items handed out one at a time to all cores
// (work items of very different sizes: sequences of different lengths);
// MACS estimates the total work.
template <class Fn>
void parallel_items(int64_t n, int64_t macs, Fn&& fn) {
  if (n <= 0) return;
  const int threads = omp_get_max_threads();
  if (n == 1 || threads <= 1 || omp_in_parallel() || macs < kSerialMacs) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast<int>(std::min<int64_t>(threads, n)))
  for (int64_t i = 0; i < n; ++i) fn(i);
}

// An index input's values as int64, row-major.
std::vector<int64_t> load_index(const Tensor& t) {
  Tensor tmp;
  std::vector<unsigned char> storage;
  const int64_t n = t.numel();
  if (n == 0) return {};
  const int64_t* p = contiguous_as<int64_t>(t, HAL_DTYPE_INT64, tmp, storage);
  return std::vector<int64_t>(p, p + n);
}

// A float input's values as A, row-major (absent: empty).
template <class A>
std::vector<A> load_values(const Tensor* t) {
  if (t == nullptr || t->numel() == 0) return {};
  Tensor tmp;
  std::vector<unsigned char> storage;
  const A* p = contiguous_as<A>(*t, kAccDtype<A>, tmp, storage);
  return std::vector<A>(p, p + t->numel());
}

// DST = SRC (same shape and dtype, any strides), bytes moved as they are.
void copy_tensor(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0 || dst.data == src.data) return;
  const size_t es = dst.element_size();
  if (dst.is_contiguous() && src.is_contiguous()) {
    char* d = static_cast<char*>(dst.data);
    const char* s = static_cast<const char*>(src.data);
    parallel_for(n * static_cast<int64_t>(es), 1 << 20, [&](int64_t lo, int64_t hi) {
      std::memcpy(d + lo, s + lo, static_cast<size_t>(hi - lo));
    });
    return;
  }
  auto run = [&](auto tag) {
    using U = typename decltype(tag)::type;
    map<U, U>(dst, {&src}, [](U x) { return x; });
  };
  switch (es) {
    case 1: return run(sdk::kernel::TypeTag<uint8_t>{});
    case 2: return run(sdk::kernel::TypeTag<uint16_t>{});
    case 4: return run(sdk::kernel::TypeTag<uint32_t>{});
    default: return run(sdk::kernel::TypeTag<uint64_t>{});
  }
}

// Dims [FROM, rank) of T are dense row-major (size-1 dims' strides ignored).
bool dense_from(const Tensor& t, int from) {
  int64_t expect = 1;
  for (int d = t.rank - 1; d >= from; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

// ---- data checks (before any output is written) --------------------------------------

// Each length in [0, MAX].
void check_lengths(const OpCall& c, const char* arg, const std::vector<int64_t>& lens, int64_t max, const char* why) {
  for (size_t b = 0; b < lens.size(); ++b)
    if (lens[b] < 0 || lens[b] > max)
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": '", arg, "' value ", lens[b], " at position ", b,
                " is out of range [0, ", max, "] (", why, ")");
}

// The entries of each block table row that its context length covers are
// block ids in [0, NUM_BLOCKS).
void check_block_tables(const OpCall& c, const std::vector<int64_t>& tables, int64_t max_blocks,
                        const std::vector<int64_t>& lens, int64_t block_size, int64_t num_blocks) {
  for (size_t b = 0; b < lens.size(); ++b) {
    const int64_t used = (lens[b] + block_size - 1) / block_size;
    for (int64_t i = 0; i < used; ++i) {
      const int64_t id = tables[b * max_blocks + i];
      if (id < 0 || id >= num_blocks)
        sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": 'block_tables' value ", id, " at position [", b, ", ", i,
                  "] is out of range [0, ", num_blocks, ") (num_blocks of the cache; sequence ", b, " has context length ",
                  lens[b], ")");
    }
  }
}

// Sequence starts [B+1]: 0 first, non-decreasing, TOTAL last.
void check_starts(const OpCall& c, const char* arg, const std::vector<int64_t>& s, int64_t total) {
  if (s.empty()) return;
  if (s[0] != 0)
    sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": '", arg, "' value ", s[0], " at position 0 must be 0");
  for (size_t i = 1; i < s.size(); ++i)
    if (s[i] < s[i - 1])
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": '", arg, "' value ", s[i], " at position ", i,
                " is less than the previous value ", s[i - 1], " (must be non-decreasing)");
  if (s.back() != total)
    sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": '", arg, "' value ", s.back(), " at position ", s.size() - 1,
              " must be ", total, " (the number of tokens)");
}

// Large float32 outputs that alias no input use streaming stores
// (stream_store.hpp).

// ---- add_rms_norm --------------------------------------------------------------------

// One row: s = round(x + r); residual_out = s; out = s·rstd·w. The row is
// staged in BUF before anything is written, so any exact alias is safe.
template <class T, class A = acc_t<T>>
HAL_LLM_INLINE void add_rms_row(const T* x, const T* r, const A* w, T* out, T* res_out, A* buf, int64_t n, A eps) {
  A ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) {
    const A s = round_to<T>(load(x[i]) + load(r[i]));
    buf[i] = s;
    ss += s * s;
  }
  const A rstd = A(1) / std::sqrt(ss / static_cast<A>(n) + eps);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    res_out[i] = store<T>(buf[i]);
    out[i] = store<T>(buf[i] * rstd * w[i]);
  }
}

void add_rms_norm_body(const OpCall& c) {
  const Tensor& x = c.input(0);
  const int64_t n = x.shape[x.rank - 1];
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  sdk::kernel::dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const A eps = static_cast<A>(op::add_rms_norm::eps(c));
    Tensor tx, tr, tw;
    std::vector<unsigned char> sx, sr, sw;
    const T* px = contiguous_as<T>(x, x.dtype, tx, sx);
    const T* pr = contiguous_as<T>(c.input(1), x.dtype, tr, sr);
    const A* w = contiguous_as<A>(c.input(2), kAccDtype<A>, tw, sw);
    ContiguousOut<T> out(c.output(0)), res(c.output(1));
    T* po = out.data();
    T* pro = res.data();
    // In place the lines were just read (cached): plain stores are cheaper.
    const bool aliased = po == px || po == pr || pro == px || pro == pr;
    const bool streaming = std::is_same_v<T, float> && !aliased && rows * n * 4 >= kStreamBytes;
    parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)), [&](int64_t lo, int64_t hi) {
      std::vector<A> buf(static_cast<size_t>(n));
      if constexpr (std::is_same_v<T, float>) {
        if (streaming) {
          std::vector<float> o(static_cast<size_t>(n)), ro(static_cast<size_t>(n));
          for (int64_t row = lo; row < hi; ++row) {
            add_rms_row<T>(px + row * n, pr + row * n, w, o.data(), ro.data(), buf.data(), n, eps);
            stream_copy(po + row * n, o.data(), n);
            stream_copy(pro + row * n, ro.data(), n);
          }
          stream_fence();
          return;
        }
      }
      for (int64_t row = lo; row < hi; ++row)
        add_rms_row<T>(px + row * n, pr + row * n, w, po + row * n, pro + row * n, buf.data(), n, eps);
    });
    out.finish();
    res.finish();
  });
}
HAL_CPU_KERNEL(add_rms_norm_kernel, add_rms_norm_body)

// ---- silu_and_mul ----------------------------------------------------------------------

// O[e] = silu(A[e])·B[e] for e in [0, LEN).
template <class T, class A = acc_t<T>>
HAL_LLM_WIDE void silu_mul_piece(const T* a, const T* b, T* o, int64_t len) {
#pragma omp simd
  for (int64_t e = 0; e < len; ++e) {
    const A av = load(a[e]);
    o[e] = store<T>(av / (A(1) + exp_a(-av)) * load(b[e]));
  }
}

void silu_and_mul_body(const OpCall& c) {
  const Tensor& x = c.input(0);
  const int64_t n = x.shape[x.rank - 1] / 2;
  const int64_t rows = n == 0 ? 0 : x.numel() / (2 * n);
  sdk::kernel::dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor tx;
    std::vector<unsigned char> sx;
    const T* px = contiguous_as<T>(x, x.dtype, tx, sx);
    ContiguousOut<T> out(c.output(0));
    T* po = out.data();
    const bool stream = std::is_same_v<T, float> && static_cast<const void*>(po) != static_cast<const void*>(px) &&
                        rows * n * 4 >= kStreamBytes;
    parallel_for(rows * n, 16384, [&](int64_t lo, int64_t hi) {
      // Streaming: pieces of kPiece computed into a cached buffer, then
      // streamed out (streamed straight from the loop it measured slower,
      // 21 -> 16 GB/s).
      constexpr int64_t kPiece = 1024;
      alignas(64) T buf[kPiece];
      // [lo, hi) over the flattened output; walk it row piece by row piece.
      for (int64_t i = lo; i < hi;) {
        const int64_t row = i / n, col = i % n;
        const int64_t len = std::min(std::min(n - col, hi - i), stream ? kPiece : hi - i);
        const T* a = px + row * 2 * n + col;
        if constexpr (std::is_same_v<T, float>) {
          if (stream) {
            silu_mul_piece<T>(a, a + n, buf, len);
            stream_copy(po + i, buf, len);
            i += len;
            continue;
          }
        }
        silu_mul_piece<T>(a, a + n, po + i, len);
        i += len;
      }
      if (stream) stream_fence();
    });
    out.finish();
  });
}
HAL_CPU_KERNEL(silu_and_mul_kernel, silu_and_mul_body)

// ---- apply_rotary_pos_emb ----------------------------------------------------------------

// Rotates the first 2·HALF dims of the head row X into O (which may be X)
// and copies the rest.
template <class T, class A = acc_t<T>>
HAL_LLM_INLINE void rotate_row(const T* x, T* o, const A* cs, const A* sn, int64_t half, int64_t d, bool interleaved) {
  if (interleaved) {
#pragma omp simd
    for (int64_t k = 0; k < half; ++k) {
      const A a = load(x[2 * k]), b = load(x[2 * k + 1]);
      o[2 * k] = store<T>(a * cs[k] - b * sn[k]);
      o[2 * k + 1] = store<T>(b * cs[k] + a * sn[k]);
    }
  } else {
#pragma omp simd
    for (int64_t k = 0; k < half; ++k) {
      const A a = load(x[k]), b = load(x[k + half]);
      o[k] = store<T>(a * cs[k] - b * sn[k]);
      o[k + half] = store<T>(b * cs[k] + a * sn[k]);
    }
  }
  if (o != x)
    for (int64_t e = 2 * half; e < d; ++e) o[e] = x[e];
}

void apply_rotary_pos_emb_body(const OpCall& c) {
  const Tensor& q = c.input(0);
  const Tensor& k = c.input(1);
  const Tensor& cos = c.input(2);
  const int64_t max_pos = cos.shape[0], half = cos.shape[1];
  const int64_t hq = q.shape[q.rank - 2], hk = k.shape[k.rank - 2], d = q.shape[q.rank - 1];
  std::vector<int64_t> pos = load_index(c.input(4));
  const int64_t tokens = static_cast<int64_t>(pos.size());
  for (int64_t t = 0; t < tokens; ++t)
    if (pos[t] < 0 || pos[t] >= max_pos)
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": 'position_ids' value ", pos[t], " at position ", t,
                " is out of range [0, ", max_pos, ") (max_position, the rows of 'cos' and 'sin')");
  const Tensor& qo = c.output(0);
  const Tensor& ko = c.output(1);
  // An output that is the other input (query_out = key): read copies.
  const bool crossed = (qo.numel() > 0 && qo.data == k.data) || (ko.numel() > 0 && ko.data == q.data);
  sdk::kernel::dispatch_float(q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    Tensor tq, tk, tc, ts;
    std::vector<unsigned char> sq, sk, sc, ss;
    const T* pq = crossed ? cast_contiguous(q, q.dtype, sq).ptr<T>() : contiguous_as<T>(q, q.dtype, tq, sq);
    const T* pk = crossed ? cast_contiguous(k, k.dtype, sk).ptr<T>() : contiguous_as<T>(k, k.dtype, tk, sk);
    const A* pc = contiguous_as<A>(cos, kAccDtype<A>, tc, sc);
    const A* ps = contiguous_as<A>(c.input(3), kAccDtype<A>, ts, ss);
    ContiguousOut<T> oq(qo), ok(ko);
    T* poq = oq.data();
    T* pok = ok.data();
    const bool inter = op::apply_rotary_pos_emb::interleaved(c);
    const int64_t heads = hq + hk;
    parallel_for(tokens * heads, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, d)), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t t = i / heads, h = i % heads;
        const A* cr = pc + pos[t] * half;
        const A* sr = ps + pos[t] * half;
        if (h < hq) rotate_row<T>(pq + (t * hq + h) * d, poq + (t * hq + h) * d, cr, sr, half, d, inter);
        else rotate_row<T>(pk + (t * hk + h - hq) * d, pok + (t * hk + h - hq) * d, cr, sr, half, d, inter);
      }
    });
    oq.finish();
    ok.finish();
  });
}
HAL_CPU_KERNEL(apply_rotary_pos_emb_kernel, apply_rotary_pos_emb_body)

// ---- fill_kv_cache ---------------------------------------------------------------------

// CACHE[slot of t] = SRC[t] for every token t with KEEP[t]; CACHE is
// [num_blocks, block_size, H, D], SRC [T, H, D], any strides, same dtype.
void scatter_rows(const Tensor& cache, const Tensor& src, const std::vector<int64_t>& slots,
                  const std::vector<char>& keep) {
  const int64_t tokens = src.shape[0], h = src.shape[1], d = src.shape[2], bs = cache.shape[1];
  const int64_t es = static_cast<int64_t>(cache.element_size());
  if (h * d == 0) return;
  char* dst = static_cast<char*>(cache.data);
  const char* s = static_cast<const char*>(src.data);
  const bool dense = dense_from(cache, 2) && dense_from(src, 1);
  parallel_for(tokens, std::max<int64_t>(1, 65536 / (h * d * es)), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      if (!keep[t]) continue;
      const int64_t slot = slots[t];
      char* row = dst + ((slot / bs) * cache.strides[0] + (slot % bs) * cache.strides[1]) * es;
      const char* in = s + t * src.strides[0] * es;
      if (dense) {
        std::memcpy(row, in, static_cast<size_t>(h * d * es));
        continue;
      }
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t e = 0; e < d; ++e)
          std::memcpy(row + (hh * cache.strides[2] + e * cache.strides[3]) * es,
                      in + (hh * src.strides[1] + e * src.strides[2]) * es, static_cast<size_t>(es));
    }
  });
}

void fill_kv_cache_body(const OpCall& c) {
  const Tensor& kc = c.input(2);
  const int64_t num_slots = kc.shape[0] * kc.shape[1];
  std::vector<int64_t> slots = load_index(c.input(4));
  const int64_t tokens = static_cast<int64_t>(slots.size());
  for (int64_t t = 0; t < tokens; ++t)
    if (slots[t] != -1 && (slots[t] < 0 || slots[t] >= num_slots))
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": 'slot_mapping' value ", slots[t], " at position ", t,
                " is out of range [0, ", num_slots, ") (num_blocks ", kc.shape[0], " x block_size ", kc.shape[1],
                "; -1 marks padding)");
  // A slot named twice is written by its last token only (no write races).
  std::vector<char> keep(static_cast<size_t>(tokens), 0);
  std::vector<std::pair<int64_t, int64_t>> order;
  order.reserve(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t)
    if (slots[t] >= 0) order.emplace_back(slots[t], t);
  std::sort(order.begin(), order.end());
  for (size_t i = 0; i < order.size(); ++i)
    if (i + 1 == order.size() || order[i + 1].first != order[i].first) keep[order[i].second] = 1;
  // Not in place: the outputs start as copies of the caches.
  copy_tensor(c.output(0), kc);
  copy_tensor(c.output(1), c.input(3));
  scatter_rows(c.output(0), c.input(0), slots, keep);
  scatter_rows(c.output(1), c.input(1), slots, keep);
}
HAL_CPU_KERNEL(fill_kv_cache_kernel, fill_kv_cache_body)

// ---- attention ----------------------------------------------------------------------------

// The key and value rows of one sequence from kv head H0 on: paged (through
// the sequence's block table row) or packed (consecutive tokens).
template <class T>
struct KvRows {
  const T* k = nullptr;  // offset to kv head H0 (and, packed, to the sequence's first token)
  const T* v = nullptr;
  int64_t k_blk = 0, k_row = 0, k_head = 0, v_blk = 0, v_row = 0, v_head = 0;  // element strides
  int64_t bs = 1;
  const int64_t* table = nullptr;  // nullptr: packed
  HAL_LLM_INLINE const T* key(int64_t j) const {
    return table != nullptr ? k + table[j / bs] * k_blk + (j % bs) * k_row : k + j * k_row;
  }
  HAL_LLM_INLINE const T* value(int64_t j) const {
    return table != nullptr ? v + table[j / bs] * v_blk + (j % bs) * v_row : v + j * v_row;
  }
};

constexpr int64_t kChunk = 64;  // keys per online-softmax step
constexpr int64_t kAhead = 12;  // key positions prefetched ahead (blocks are scattered: no hardware stream)

// Prefetches BYTES from P (cache lines).
HAL_LLM_INLINE void prefetch_span(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}

// N query rows attending together, head-major over NH kv heads: rows
// [hh·N/NH, (hh+1)·N/NH) read kv head H0 + hh (the query heads of that kv
// head, for one or a few tokens). Row r reads keys [lo[r], hi[r]) with alibi
// bias slope[r]·(j - pos[r]). Holds each row's running max, sum and output.
template <class A>
struct RowSet {
  int64_t n = 0, nh = 1, d = 0, dv = 0;
  A scale = 1;
  std::vector<A> q;  // [n, d]
  std::vector<int64_t> lo, hi, pos;
  std::vector<A> slope;  // empty: no alibi
  std::vector<A> m, l, acc;  // [n], [n], [n, dv]
  std::vector<A> s, kbuf, vbuf;  // scratch: scores [n, kChunk], one converted K row, four V rows

  RowSet(int64_t rows, int64_t heads, int64_t d_, int64_t dv_, A scale_, bool alibi)
      : n(rows), nh(heads), d(d_), dv(dv_), scale(scale_), q(static_cast<size_t>(rows * d_)), lo(rows), hi(rows),
        pos(rows), slope(alibi ? rows : 0), m(rows), l(rows), acc(static_cast<size_t>(rows * dv_)),
        s(static_cast<size_t>(rows * kChunk)), kbuf(static_cast<size_t>(d_)), vbuf(static_cast<size_t>(4 * dv_)) {}
  void reset() {
    std::fill(m.begin(), m.end(), -std::numeric_limits<A>::infinity());
    std::fill(l.begin(), l.end(), A(0));
    std::fill(acc.begin(), acc.end(), A(0));
  }
};

// One online-softmax pass of the rows over keys [J0, J1). Per key position
// the NH heads' rows are adjacent in a paged cache, so they are read
// together, in address order.
template <class T, class A>
HAL_LLM_WIDE void attend(RowSet<A>& rs, const KvRows<T>& kv, int64_t j0, int64_t j1) {
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const int64_t n = rs.n, d = rs.d, dv = rs.dv, rph = n / rs.nh;
  // Bytes of one position's rows (all NH heads).
  const int64_t k_span = ((rs.nh - 1) * kv.k_head + d) * static_cast<int64_t>(sizeof(T));
  const int64_t v_span = ((rs.nh - 1) * kv.v_head + dv) * static_cast<int64_t>(sizeof(T));
  for (int64_t jj = j0; jj < std::min(j1, j0 + kAhead); ++jj) prefetch_span(kv.key(jj), k_span);
  for (int64_t c0 = j0; c0 < j1; c0 += kChunk) {
    const int64_t cn = std::min(kChunk, j1 - c0);
    // Scores, four query rows per key row load. Prefetched ahead: the
    // chunk's next key rows, then (near its end) its first value rows.
    for (int64_t jj = 0; jj < cn; ++jj) {
      if (jj + kAhead < cn) prefetch_span(kv.key(c0 + jj + kAhead), k_span);
      else if (jj + kAhead - cn < cn) prefetch_span(kv.value(c0 + jj + kAhead - cn), v_span);
      const T* krow = kv.key(c0 + jj);
      for (int64_t hh = 0; hh < rs.nh; ++hh) {
        const A* kp;
        if constexpr (std::is_same_v<T, A>) {
          kp = krow + hh * kv.k_head;
        } else {
          convert_row(krow + hh * kv.k_head, rs.kbuf.data(), d);
          kp = rs.kbuf.data();
        }
        int64_t r = hh * rph;
        const int64_t r_end = r + rph;
        A raw[4];
        for (; r + 4 <= r_end; r += 4) {
          dot4(rs.q.data() + r * d, d, kp, d, raw);
          for (int64_t u = 0; u < 4; ++u) rs.s[(r + u) * kChunk + jj] = raw[u];
        }
        for (; r < r_end; ++r) rs.s[r * kChunk + jj] = dot(rs.q.data() + r * d, kp, d);
      }
    }
    for (int64_t r = 0; r < n; ++r) {
      A* sr = rs.s.data() + r * kChunk;
      const int64_t a = std::max<int64_t>(rs.lo[r] - c0, 0), b = std::min<int64_t>(rs.hi[r] - c0, cn);
      A bm = kNegInf;
      if (rs.slope.empty()) {
        for (int64_t jj = a; jj < b; ++jj) {
          sr[jj] *= rs.scale;
          bm = std::max(bm, sr[jj]);
        }
      } else {
        const A sl = rs.slope[r];
        for (int64_t jj = a; jj < b; ++jj) {
          sr[jj] = sr[jj] * rs.scale + sl * static_cast<A>(c0 + jj - rs.pos[r]);
          bm = std::max(bm, sr[jj]);
        }
      }
      for (int64_t jj = 0; jj < a; ++jj) sr[jj] = 0;
      for (int64_t jj = std::max(a, b); jj < cn; ++jj) sr[jj] = 0;
      if (bm == kNegInf) {  // nothing to attend in this chunk (or -inf scores)
        for (int64_t jj = a; jj < b; ++jj) sr[jj] = 0;
        continue;
      }
      if (bm > rs.m[r]) {
        const A corr = exp_a(rs.m[r] - bm);  // 0 on the row's first chunk
        rs.l[r] *= corr;
        A* acc = rs.acc.data() + r * dv;
#pragma omp simd
        for (int64_t e = 0; e < dv; ++e) acc[e] *= corr;
        rs.m[r] = bm;
      }
      const A mr = rs.m[r];
      A sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t jj = a; jj < b; ++jj) {
        const A p = exp_a(sr[jj] - mr);
        sr[jj] = p;
        sum += p;
      }
      rs.l[r] += sum;
    }
    // out += P·V, four positions at a time: each accumulator element is
    // loaded and stored once per four value rows (the same sums in the same
    // order as one position at a time). Positions whose p is 0 (masked)
    // are skipped, so their values (even inf/NaN) never reach the sum.
    for (int64_t jj = 0; jj < cn; jj += 4) {
      const int64_t np = std::min<int64_t>(4, cn - jj);
      for (int64_t u = 0; u < np; ++u) {
        if (jj + u + kAhead < cn) prefetch_span(kv.value(c0 + jj + u + kAhead), v_span);
        else if (c0 + jj + u + kAhead < j1) prefetch_span(kv.key(c0 + jj + u + kAhead), k_span);
      }
      const T* vrow[4];
      for (int64_t u = 0; u < 4; ++u) vrow[u] = kv.value(c0 + jj + std::min(u, np - 1));
      for (int64_t hh = 0; hh < rs.nh; ++hh) {
        const A* vp[4];
        for (int64_t u = 0; u < np; ++u) {
          if constexpr (std::is_same_v<T, A>) {
            vp[u] = vrow[u] + hh * kv.v_head;
          } else {
            convert_row(vrow[u] + hh * kv.v_head, rs.vbuf.data() + u * dv, dv);
            vp[u] = rs.vbuf.data() + u * dv;
          }
        }
        for (int64_t r = hh * rph; r < (hh + 1) * rph; ++r) {
          const A* p = rs.s.data() + r * kChunk + jj;
          A* acc = rs.acc.data() + r * dv;
          if (np == 4 && p[0] != A(0) && p[1] != A(0) && p[2] != A(0) && p[3] != A(0)) {
            axpy4(p, vp, acc, dv);
            continue;
          }
          for (int64_t u = 0; u < np; ++u)
            if (p[u] != A(0)) axpy(p[u], vp[u], acc, dv);
        }
      }
    }
  }
}

// A cache (or packed key/value) whose last dim is contiguous, as a pointer
// and element strides; other layouts are copied.
template <class T>
struct RowSource {
  Tensor tmp;
  std::vector<unsigned char> storage;
  const T* p = nullptr;
  const int64_t* st = nullptr;
  explicit RowSource(const Tensor& t) {
    const Tensor* use = &t;
    if (t.shape[t.rank - 1] > 1 && t.strides[t.rank - 1] != 1) {
      tmp = cast_contiguous(t, t.dtype, storage);
      use = &tmp;
    }
    p = use->ptr<T>();
    st = use->strides;
  }
};

// The attention ops' shared setup: scale, window, alibi slopes as A.
template <class A>
struct AttnParams {
  A scale;
  int64_t window;
  std::vector<A> slopes;
  AttnParams(double s, int64_t w, int64_t d, const Tensor* alibi)
      : scale(static_cast<A>(s != 0 ? s : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(d, 1))))),
        window(w), slopes(load_values<A>(alibi)) {}
};

// Query row (token t, head h) of QUERY [T, Hq, D] (contiguous) into DST as A.
template <class T, class A>
HAL_LLM_INLINE void load_query(const T* query, int64_t t, int64_t h, int64_t hq, int64_t d, A* dst) {
  const T* src = query + (t * hq + h) * d;
  if constexpr (std::is_same_v<T, A>) std::memcpy(dst, src, static_cast<size_t>(d) * sizeof(A));
  else convert_row(src, dst, d);
}

// OUT row = acc / l (0 when the row attended nothing).
template <class T, class A>
HAL_LLM_INLINE void finish_row(const A* acc, A l, int64_t dv, T* out) {
  const A inv = l > 0 ? A(1) / l : A(0);
#pragma omp simd
  for (int64_t e = 0; e < dv; ++e) out[e] = store<T>(acc[e] * inv);
}

constexpr int64_t kPartition = 256;  // decode: keys per partition of one context

void paged_decode_attention_body(const OpCall& c) {
  const Tensor& query = c.input(0);
  const Tensor& kc = c.input(1);
  const int64_t B = query.shape[0], hq = query.shape[1], d = query.shape[2];
  const int64_t nb = kc.shape[0], bs = kc.shape[1], hk = kc.shape[2], dv = c.input(2).shape[3];
  const int64_t mb = c.input(3).shape[1], g = hq / hk;
  std::vector<int64_t> lens = load_index(c.input(4));
  check_lengths(c, "context_lens", lens, mb * bs, "max_blocks x block_size of 'block_tables' and the cache");
  std::vector<int64_t> tables = load_index(c.input(3));
  check_block_tables(c, tables, mb, lens, bs, nb);
  sdk::kernel::dispatch_float(query.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    AttnParams<A> ap(op::paged_decode_attention::scale(c), op::paged_decode_attention::sliding_window(c), d,
                     op::paged_decode_attention::alibi_slopes(c));
    Tensor tq;
    std::vector<unsigned char> sq;
    const T* q = contiguous_as<T>(query, query.dtype, tq, sq);
    RowSource<T> ks(kc), vs(c.input(2));
    // Work items (sequence, partition of its context, group of kv heads):
    // a whole group reads each cache row [group, D] in one sweep. Heads are
    // split into groups only when sequences × partitions leave cores idle.
    std::vector<int64_t> start(static_cast<size_t>(B));
    int64_t parts = 0;
    for (int64_t b = 0; b < B; ++b) {
      start[b] = ap.window > 0 ? std::max<int64_t>(0, lens[b] - ap.window) : 0;
      if (lens[b] > start[b]) parts += (lens[b] - 1) / kPartition - start[b] / kPartition + 1;
    }
    const int64_t want = 4 * static_cast<int64_t>(omp_get_max_threads());
    const int64_t groups = std::min<int64_t>(hk, parts >= want ? 1 : (want + std::max<int64_t>(parts, 1) - 1) /
                                                                        std::max<int64_t>(parts, 1));
    const int64_t per_group = (hk + groups - 1) / groups;
    struct Item {
      int64_t b, h0, h1, j0, j1, offset;  // offset: of its rows' partials
    };
    std::vector<Item> items;
    std::vector<int64_t> first(static_cast<size_t>(B + 1));
    int64_t offset = 0;
    for (int64_t b = 0; b < B; ++b) {
      first[b] = static_cast<int64_t>(items.size());
      for (int64_t j0 = start[b]; j0 < lens[b]; j0 = (j0 / kPartition + 1) * kPartition)
        for (int64_t h0 = 0; h0 < hk; h0 += per_group) {
          const int64_t h1 = std::min(hk, h0 + per_group);
          items.push_back({b, h0, h1, j0, std::min(lens[b], (j0 / kPartition + 1) * kPartition), offset});
          offset += (h1 - h0) * g * (dv + 2);
        }
    }
    first[B] = static_cast<int64_t>(items.size());
    std::vector<A> partial(static_cast<size_t>(offset));  // per row: max, sum, acc[dv]
    int64_t macs = 0;
    for (const Item& it : items) macs += (it.j1 - it.j0) * (it.h1 - it.h0) * g * (d + dv);
    parallel_items(static_cast<int64_t>(items.size()), macs, [&](int64_t i) {
      const Item& it = items[i];
      const int64_t n = (it.h1 - it.h0) * g;
      RowSet<A> rs(n, it.h1 - it.h0, d, dv, ap.scale, !ap.slopes.empty());
      for (int64_t r = 0; r < n; ++r) {
        const int64_t h = it.h0 * g + r;
        load_query(q, it.b, h, hq, d, rs.q.data() + r * d);
        rs.lo[r] = it.j0;
        rs.hi[r] = it.j1;
        rs.pos[r] = lens[it.b] - 1;
        if (!ap.slopes.empty()) rs.slope[r] = ap.slopes[h];
      }
      rs.reset();
      KvRows<T> kv;
      kv.k = ks.p + it.h0 * ks.st[2];
      kv.v = vs.p + it.h0 * vs.st[2];
      kv.k_blk = ks.st[0];
      kv.k_row = ks.st[1];
      kv.k_head = ks.st[2];
      kv.v_blk = vs.st[0];
      kv.v_row = vs.st[1];
      kv.v_head = vs.st[2];
      kv.bs = bs;
      kv.table = tables.data() + it.b * mb;
      attend(rs, kv, it.j0, it.j1);
      A* p = partial.data() + it.offset;
      for (int64_t r = 0; r < n; ++r) {
        p[r * (dv + 2)] = rs.m[r];
        p[r * (dv + 2) + 1] = rs.l[r];
        std::copy(rs.acc.begin() + r * dv, rs.acc.begin() + (r + 1) * dv, p + r * (dv + 2) + 2);
      }
    });
    // Combine the partitions of each (sequence, query head).
    ContiguousOut<T> out(c.output(0));
    T* po = out.data();
    parallel_for(B * hq, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, dv)), [&](int64_t lo, int64_t hi) {
      std::vector<A> acc(static_cast<size_t>(dv));
      for (int64_t bh = lo; bh < hi; ++bh) {
        const int64_t b = bh / hq, h = bh % hq, kvh = h / g;
        auto row_of = [&](const Item& it) { return partial.data() + it.offset + (h - it.h0 * g) * (dv + 2); };
        A mx = -std::numeric_limits<A>::infinity();
        for (int64_t i = first[b]; i < first[b + 1]; ++i)
          if (kvh >= items[i].h0 && kvh < items[i].h1) mx = std::max(mx, row_of(items[i])[0]);
        std::fill(acc.begin(), acc.end(), A(0));
        A l = 0;
        if (mx != -std::numeric_limits<A>::infinity()) {
          for (int64_t i = first[b]; i < first[b + 1]; ++i) {
            if (kvh < items[i].h0 || kvh >= items[i].h1) continue;
            const A* p = row_of(items[i]);
            if (p[1] == A(0)) continue;
            const A w = exp_a(p[0] - mx);
            l += p[1] * w;
            axpy(w, p + 2, acc.data(), dv);
          }
        }
        finish_row(acc.data(), l, dv, po + bh * dv);
      }
    });
    out.finish();
  });
}
HAL_CPU_KERNEL(paged_decode_attention_kernel, paged_decode_attention_body)

// Prefill (paged or packed KV): sequence b owns query rows [qs[b],
// qs[b+1]) and kv positions [0, lens[b]); its new tokens are the last ones.
// Work items are (sequence, kv head, tile of tokens) with the tile's tokens
// × the kv head's query heads as one row set.
template <class T, class A>
void prefill(const T* q, int64_t hq, int64_t d, int64_t dv, int64_t hk, const AttnParams<A>& ap,
             bool causal, const std::vector<int64_t>& qs, const std::vector<int64_t>& lens,
             const std::function<KvRows<T>(int64_t b, int64_t h)>& rows_of, T* out) {
  const int64_t B = static_cast<int64_t>(lens.size()), g = hq / hk;
  const int64_t tile = std::max<int64_t>(1, 16 / g);
  struct Item {
    int64_t b, h, t0, t1;
  };
  std::vector<Item> items;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < hk; ++h)
      for (int64_t t0 = qs[b]; t0 < qs[b + 1]; t0 += tile) items.push_back({b, h, t0, std::min(qs[b + 1], t0 + tile)});
  int64_t macs = 0;  // (a bound: causal rows read fewer keys)
  for (const Item& it : items) macs += (it.t1 - it.t0) * g * lens[it.b] * (d + dv);
  parallel_items(static_cast<int64_t>(items.size()), macs, [&](int64_t i) {
    const Item& it = items[i];
    const int64_t n = (it.t1 - it.t0) * g, len = lens[it.b], qlen = qs[it.b + 1] - qs[it.b];
    RowSet<A> rs(n, 1, d, dv, ap.scale, !ap.slopes.empty());
    int64_t j0 = len, j1 = 0;
    for (int64_t t = it.t0; t < it.t1; ++t)
      for (int64_t r = 0; r < g; ++r) {
        const int64_t row = (t - it.t0) * g + r, h = it.h * g + r;
        const int64_t p = len - qlen + (t - qs[it.b]);
        load_query(q, t, h, hq, d, rs.q.data() + row * d);
        rs.pos[row] = p;
        rs.hi[row] = causal ? p + 1 : len;
        rs.lo[row] = ap.window > 0 ? std::max<int64_t>(0, p - ap.window + 1) : 0;
        if (!ap.slopes.empty()) rs.slope[row] = ap.slopes[h];
        j0 = std::min(j0, rs.lo[row]);
        j1 = std::max(j1, rs.hi[row]);
      }
    rs.reset();
    if (j0 < j1) attend(rs, rows_of(it.b, it.h), j0, j1);
    for (int64_t t = it.t0; t < it.t1; ++t)
      for (int64_t r = 0; r < g; ++r) {
        const int64_t row = (t - it.t0) * g + r;
        finish_row(rs.acc.data() + row * dv, rs.l[row], dv, out + (t * hq + it.h * g + r) * dv);
      }
  });
}

void paged_prefill_attention_body(const OpCall& c) {
  const Tensor& query = c.input(0);
  const Tensor& kc = c.input(1);
  const int64_t T = query.shape[0], hq = query.shape[1], d = query.shape[2];
  const int64_t nb = kc.shape[0], bs = kc.shape[1], hk = kc.shape[2], dv = c.input(2).shape[3];
  const int64_t mb = c.input(3).shape[1];
  std::vector<int64_t> qs = load_index(c.input(4));
  check_starts(c, "query_start_loc", qs, T);
  std::vector<int64_t> lens = load_index(c.input(5));
  check_lengths(c, "context_lens", lens, mb * bs, "max_blocks x block_size of 'block_tables' and the cache");
  for (size_t b = 0; b < lens.size(); ++b)
    if (qs[b + 1] - qs[b] > lens[b])
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": sequence ", b, " has ", qs[b + 1] - qs[b],
                " new tokens in 'query_start_loc' but 'context_lens' value ", lens[b], " at position ", b,
                " is smaller (the new tokens are part of the context)");
  std::vector<int64_t> tables = load_index(c.input(3));
  check_block_tables(c, tables, mb, lens, bs, nb);
  sdk::kernel::dispatch_float(query.dtype, [&](auto tag) {
    using T_ = typename decltype(tag)::type;
    using A = acc_t<T_>;
    AttnParams<A> ap(op::paged_prefill_attention::scale(c), op::paged_prefill_attention::sliding_window(c), d,
                     op::paged_prefill_attention::alibi_slopes(c));
    Tensor tq;
    std::vector<unsigned char> sq;
    const T_* q = contiguous_as<T_>(query, query.dtype, tq, sq);
    RowSource<T_> ks(kc), vs(c.input(2));
    ContiguousOut<T_> out(c.output(0));
    prefill<T_, A>(q, hq, d, dv, hk, ap, op::paged_prefill_attention::causal(c), qs, lens,
                   [&](int64_t b, int64_t h) {
                     KvRows<T_> kv;
                     kv.k = ks.p + h * ks.st[2];
                     kv.v = vs.p + h * vs.st[2];
                     kv.k_blk = ks.st[0];
                     kv.k_row = ks.st[1];
                     kv.v_blk = vs.st[0];
                     kv.v_row = vs.st[1];
                     kv.bs = bs;
                     kv.table = tables.data() + b * mb;
                     return kv;
                   },
                   out.data());
    out.finish();
  });
}
HAL_CPU_KERNEL(paged_prefill_attention_kernel, paged_prefill_attention_body)

void prefill_attention_body(const OpCall& c) {
  const Tensor& query = c.input(0);
  const int64_t T = query.shape[0], hq = query.shape[1], d = query.shape[2];
  const int64_t hk = c.input(1).shape[1], dv = c.input(2).shape[2];
  std::vector<int64_t> cu = load_index(c.input(3));
  check_starts(c, "cu_seqlens", cu, T);
  std::vector<int64_t> lens(cu.size() - 1);
  for (size_t b = 0; b + 1 < cu.size(); ++b) lens[b] = cu[b + 1] - cu[b];
  sdk::kernel::dispatch_float(query.dtype, [&](auto tag) {
    using T_ = typename decltype(tag)::type;
    using A = acc_t<T_>;
    AttnParams<A> ap(op::prefill_attention::scale(c), op::prefill_attention::sliding_window(c), d,
                     op::prefill_attention::alibi_slopes(c));
    Tensor tq;
    std::vector<unsigned char> sq;
    const T_* q = contiguous_as<T_>(query, query.dtype, tq, sq);
    RowSource<T_> ks(c.input(1)), vs(c.input(2));
    ContiguousOut<T_> out(c.output(0));
    prefill<T_, A>(q, hq, d, dv, hk, ap, op::prefill_attention::causal(c), cu, lens,
                   [&](int64_t b, int64_t h) {
                     KvRows<T_> kv;
                     kv.k = ks.p + cu[b] * ks.st[0] + h * ks.st[1];
                     kv.v = vs.p + cu[b] * vs.st[0] + h * vs.st[1];
                     kv.k_row = ks.st[0];
                     kv.v_row = vs.st[0];
                     return kv;
                   },
                   out.data());
    out.finish();
  });
}
HAL_CPU_KERNEL(prefill_attention_kernel, prefill_attention_body)

// ---- moe_gating_topk_softmax ----------------------------------------------------------------

void moe_gating_topk_softmax_body(const OpCall& c) {
  const Tensor& x = c.input(0);
  const int64_t T = x.shape[0], E = x.shape[1];
  const int64_t k = op::moe_gating_topk_softmax::top_k(c);
  const bool renorm = op::moe_gating_topk_softmax::renormalize(c);
  sdk::kernel::dispatch_float(x.dtype, [&](auto tag) {
    using T_ = typename decltype(tag)::type;
    using A = acc_t<T_>;
    Tensor tx;
    std::vector<unsigned char> sx;
    const T_* px = contiguous_as<T_>(x, x.dtype, tx, sx);
    ContiguousOut<float> ow(c.output(0));
    ContiguousOut<int64_t> oi(c.output(1));
    float* pw = ow.data();
    int64_t* pi = oi.data();
    parallel_for(T, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, E)), [&](int64_t lo, int64_t hi) {
      std::vector<A> p(static_cast<size_t>(E));
      std::vector<int64_t> ids(static_cast<size_t>(E));
      for (int64_t t = lo; t < hi; ++t) {
        const T_* row = px + t * E;
        A mx = -std::numeric_limits<A>::infinity();
        for (int64_t e = 0; e < E; ++e) mx = std::max(mx, load(row[e]));
        A sum = 0;
        for (int64_t e = 0; e < E; ++e) {
          p[e] = exp_a(load(row[e]) - mx);
          sum += p[e];
        }
        for (int64_t e = 0; e < E; ++e) p[e] /= sum;
        for (int64_t e = 0; e < E; ++e) ids[e] = e;
        // Descending p; equal p: the lower expert id first.
        std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                          [&](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
        A total = 0;
        for (int64_t j = 0; j < k; ++j) total += p[ids[j]];
        for (int64_t j = 0; j < k; ++j) {
          pw[t * k + j] = static_cast<float>(renorm && total > 0 ? p[ids[j]] / total : p[ids[j]]);
          pi[t * k + j] = ids[j];
        }
      }
    });
    ow.finish();
    oi.finish();
  });
}
HAL_CPU_KERNEL(moe_gating_topk_softmax_kernel, moe_gating_topk_softmax_body)

// ---- fused_moe ---------------------------------------------------------------------------------

// Rows [0, ROWS) of expert E of W ([E, rows, cols], contiguous T) as A:
// the weights themselves when T is A, else a converted copy in BUF.
template <class T, class A>
const A* expert_weights(const T* w, int64_t e, int64_t rows, int64_t cols, std::vector<A>& buf) {
  const T* src = w + e * rows * cols;
  if constexpr (std::is_same_v<T, A>) {
    return src;
  } else {
    buf.resize(static_cast<size_t>(rows * cols));
    parallel_for(rows * cols, 65536, [&](int64_t lo, int64_t hi) { convert_row(src + lo, buf.data() + lo, hi - lo); });
    return buf.data();
  }
}

void fused_moe_body(const OpCall& c) {
  const Tensor& x = c.input(0);
  const int64_t T = x.shape[0], H = x.shape[1];
  const int64_t E = c.input(1).shape[0], I = c.input(1).shape[1] / 2, k = c.input(3).shape[1];
  std::vector<int64_t> ids = load_index(c.input(4));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= E)
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, c.name(), ": 'topk_ids' value ", ids[i], " at position [", i / k, ", ",
                i % k, "] is out of range [0, ", E, ") (the experts of 'gate_up_weights')");
  sdk::kernel::dispatch_float(x.dtype, [&](auto tag) {
    using T_ = typename decltype(tag)::type;
    using A = acc_t<T_>;
    Tensor tx, tw1, tw2;
    std::vector<unsigned char> sx, sw1, sw2;
    const T_* px = contiguous_as<T_>(x, x.dtype, tx, sx);
    const T_* w13 = contiguous_as<T_>(c.input(1), x.dtype, tw1, sw1);
    const T_* w2 = contiguous_as<T_>(c.input(2), x.dtype, tw2, sw2);
    std::vector<A> weights = load_values<A>(&c.input(3));
    if (op::fused_moe::renormalize(c))
      for (int64_t t = 0; t < T; ++t) {
        A s = 0;
        for (int64_t j = 0; j < k; ++j) s += weights[t * k + j];
        for (int64_t j = 0; j < k; ++j) weights[t * k + j] /= s;
      }
    // Slots (t, j) grouped by expert (counting sort).
    std::vector<int64_t> start(static_cast<size_t>(E + 1), 0), order(ids.size());
    for (int64_t e : ids) ++start[e + 1];
    for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
    {
      std::vector<int64_t> fill(start.begin(), start.end() - 1);
      for (size_t i = 0; i < ids.size(); ++i) order[fill[ids[i]]++] = static_cast<int64_t>(i);
    }
    // Y[slot] = down_e(silu(gate_e·x) ∘ up_e·x), each stage rounded to T.
    std::vector<A> y(static_cast<size_t>(T * k * H));
    std::vector<A> xe, h1, act, ye, wb1, wb2;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = start[e + 1] - start[e];
      if (n == 0) continue;
      const int64_t* slots = order.data() + start[e];
      xe.resize(static_cast<size_t>(n * H));
      h1.resize(static_cast<size_t>(n * 2 * I));
      act.resize(static_cast<size_t>(n * I));
      ye.resize(static_cast<size_t>(n * H));
      parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, H)), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) convert_row(px + (slots[r] / k) * H, xe.data() + r * H, H);
      });
      gemm_nt<A>(n, 2 * I, H, xe.data(), expert_weights<T_, A>(w13, e, 2 * I, H, wb1), h1.data(), 2 * I);
      parallel_for(n * I, 16384, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const int64_t r = i / I, j = i % I;
          const A gv = round_to<T_>(h1[r * 2 * I + j]), uv = round_to<T_>(h1[r * 2 * I + I + j]);
          act[i] = round_to<T_>(gv / (A(1) + exp_a(-gv)) * uv);
        }
      });
      gemm_nt<A>(n, H, I, act.data(), expert_weights<T_, A>(w2, e, H, I, wb2), ye.data(), H);
      parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, H)), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) {
          A* dst = y.data() + slots[r] * H;
          const A* src = ye.data() + r * H;
          for (int64_t i = 0; i < H; ++i) dst[i] = round_to<T_>(src[i]);
        }
      });
    }
    ContiguousOut<T_> out(c.output(0));
    T_* po = out.data();
    parallel_for(T, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, H * k)), [&](int64_t lo, int64_t hi) {
      std::vector<A> acc(static_cast<size_t>(H));
      for (int64_t t = lo; t < hi; ++t) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t j = 0; j < k; ++j) axpy(weights[t * k + j], y.data() + (t * k + j) * H, acc.data(), H);
        for (int64_t i = 0; i < H; ++i) po[t * H + i] = store<T_>(acc[i]);
      }
    });
    out.finish();
  });
}
HAL_CPU_KERNEL(fused_moe_kernel, fused_moe_body)

// ---- dynamic_quant ------------------------------------------------------------------------------

void dynamic_quant_body(const OpCall& c) {
  const Tensor& x = c.input(0);
  const int64_t K = x.shape[x.rank - 1];
  const int64_t rows = K == 0 ? c.output(1).numel() : x.numel() / K;
  sdk::kernel::dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    Tensor tx;
    std::vector<unsigned char> sx;
    const T* px = contiguous_as<T>(x, x.dtype, tx, sx);
    ContiguousOut<int8_t> oq(c.output(0));
    ContiguousOut<float> os(c.output(1));
    int8_t* pq = oq.data();
    float* ps = os.data();
    parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, K)), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T* row = px + r * K;
        A amax = 0;
#pragma omp simd reduction(max : amax)
        for (int64_t i = 0; i < K; ++i) amax = std::max(amax, std::fabs(load(row[i])));
        const float scale = static_cast<float>(amax) / 127.0f;
        ps[r] = scale;
        int8_t* q = pq + r * K;
        if (scale == 0.0f) {
          std::fill(q, q + K, int8_t{0});
          continue;
        }
        const A s = static_cast<A>(scale);
#pragma omp simd
        for (int64_t i = 0; i < K; ++i) {
          const A v = std::nearbyint(load(row[i]) / s);
          q[i] = static_cast<int8_t>(std::min(A(127), std::max(A(-127), v)));
        }
      }
    });
    oq.finish();
    os.finish();
  });
}
HAL_CPU_KERNEL(dynamic_quant_kernel, dynamic_quant_body)

// ---- linear_w8a16 -----------------------------------------------------------------------------

constexpr int64_t kW8Tile = 64;    // weight rows dequantised per sgemm
constexpr int64_t kW8SmallM = 8;   // up to this many input rows: dot loops

void linear_w8a16_body(const OpCall& c) {
  const Tensor& x = c.input(0);
  const Tensor& w = c.input(1);
  const int64_t K = x.shape[x.rank - 1], N = w.shape[0];
  const int64_t M = K == 0 ? c.output(0).numel() / std::max<int64_t>(1, N) : x.numel() / K;
  sdk::kernel::dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    Tensor tx, tw;
    std::vector<unsigned char> sx, sw;
    const A* px;
    std::vector<A> xa;
    if constexpr (std::is_same_v<T, A>) {
      px = contiguous_as<A>(x, x.dtype, tx, sx);
    } else {
      const T* raw = contiguous_as<T>(x, x.dtype, tx, sx);
      xa.resize(static_cast<size_t>(M * K));
      parallel_for(M * K, 65536, [&](int64_t lo, int64_t hi) { convert_row(raw + lo, xa.data() + lo, hi - lo); });
      px = xa.data();
    }
    const int8_t* pw = contiguous_as<int8_t>(w, HAL_DTYPE_INT8, tw, sw);
    std::vector<A> scale = load_values<A>(&c.input(2));
    std::vector<A> bias = load_values<A>(c.optional_input(3));
    ContiguousOut<T> out(c.output(0));
    T* po = out.data();
    auto finish = [&](int64_t m, int64_t n, A v) {
      po[m * N + n] = store<T>(scale[n] * v + (bias.empty() ? A(0) : bias[n]));
    };
    if (std::is_same_v<A, double> || M <= kW8SmallM) {
      // Weight-bound (decode): each int8 weight row read once for all M rows.
      parallel_for(N, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, K * M)), [&](int64_t lo, int64_t hi) {
        for (int64_t n = lo; n < hi; ++n) {
          const int8_t* wr = pw + n * K;
          for (int64_t m = 0; m < M; ++m) {
            const A* xr = px + m * K;
            A s = 0;
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < K; ++i) s += xr[i] * static_cast<A>(wr[i]);
            finish(m, n, s);
          }
        }
      });
    } else if constexpr (std::is_same_v<A, float>) {
      // Tiles of weight rows dequantised to float (unscaled), one sgemm each.
      const int64_t tiles = (N + kW8Tile - 1) / kW8Tile;
      parallel_for(tiles, 1, [&](int64_t lo, int64_t hi) {
        std::vector<float> wt(static_cast<size_t>(kW8Tile * K)), ct(static_cast<size_t>(M * kW8Tile));
        for (int64_t tile = lo; tile < hi; ++tile) {
          const int64_t n0 = tile * kW8Tile, nt = std::min(kW8Tile, N - n0);
          const int8_t* src = pw + n0 * K;
#pragma omp simd
          for (int64_t i = 0; i < nt * K; ++i) wt[i] = static_cast<float>(src[i]);
          if (K == 0) std::fill(ct.begin(), ct.end(), 0.0f);
          else sgemm('N', 'T', M, nt, K, 1.0f, px, K, wt.data(), K, 0.0f, ct.data(), kW8Tile);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < nt; ++n) finish(m, n0 + n, ct[m * kW8Tile + n]);
        }
      });
    }
    out.finish();
  });
}
HAL_CPU_KERNEL(linear_w8a16_kernel, linear_w8a16_body)

}  // namespace

void register_llm_ops(sdk::OpRegistry& ops) {
  ops.add<op::add_rms_norm>(&add_rms_norm_kernel, sdk::kFloatDtypes);
  ops.add<op::apply_rotary_pos_emb>(&apply_rotary_pos_emb_kernel, sdk::kFloatDtypes);
  ops.add<op::silu_and_mul>(&silu_and_mul_kernel, sdk::kFloatDtypes);
  ops.add<op::fill_kv_cache>(&fill_kv_cache_kernel, sdk::kFloatDtypes);
  ops.add<op::paged_decode_attention>(&paged_decode_attention_kernel, sdk::kFloatDtypes);
  ops.add<op::paged_prefill_attention>(&paged_prefill_attention_kernel, sdk::kFloatDtypes);
  ops.add<op::prefill_attention>(&prefill_attention_kernel, sdk::kFloatDtypes);
  ops.add<op::moe_gating_topk_softmax>(&moe_gating_topk_softmax_kernel, sdk::kFloatDtypes);
  ops.add<op::fused_moe>(&fused_moe_kernel, sdk::kFloatDtypes);
  ops.add<op::dynamic_quant>(&dynamic_quant_kernel, sdk::kFloatDtypes);
  ops.add<op::linear_w8a16>(&linear_w8a16_kernel, sdk::kFloatDtypes);
}

}  // namespace hal::cpu
