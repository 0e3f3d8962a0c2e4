// CPU kernels of the "transformer" op group. Attention is computed in the
// accumulation type A (float; double for float64) on contiguous copies:
// the forward is flash-style (online softmax over key blocks, tiles of
// query rows in parallel, nothing of size L×S materialised; float32 blocks
// are oneDNN sgemms, small ones plain loops); the backward recomputes the
// probabilities from the saved logsumexp, once per query tile (grad_query)
// and once per key block (grad_key, grad_value), so both passes parallelise
// without atomics.
#include <algorithm>
#include <cmath>
#include <limits>


#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "onednn_util.hpp"
#include "random_layout.hpp"
#include "softmax_simd.hpp"
#include "vector_math.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
using sdk::kernel::compute_t;

template <class A>
inline A dot(const A* a, const A* b, int64_t n) {
  A s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t e = 0; e < n; ++e) s += a[e] * b[e];
  return s;
}
template <class A>
inline void axpy(A alpha, const A* x, A* y, int64_t n) {
#pragma omp simd
  for (int64_t e = 0; e < n; ++e) y[e] += alpha * x[e];
}

// One attention call's operands as contiguous [B, L|S, E|Ev] arrays of A.
template <class A>
struct Attention {
  static constexpr hal_dtype_e kDtype = std::is_same_v<A, double> ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32;
  int64_t B = 1, L = 0, S = 0, E = 0, Ev = 0;
  A scale = 1;
  bool causal = false;
  const A* q = nullptr;
  const A* k = nullptr;
  const A* v = nullptr;
  // Additive mask (0 / -inf for bool masks) in the mask's own shape, read
  // through broadcast element strides; nullptr = none.
  const A* mask = nullptr;
  std::vector<int64_t> mask_batch_off;  // per b
  int64_t mask_sl = 0, mask_ss = 0;

  Tensor tq, tk, tv, tm;
  std::vector<unsigned char> sq, sk, sv, sm;
  std::vector<A> mask_values;

  Attention(const OpCall& c, size_t q_i, size_t mask_i) {
    const Tensor& query = c.input(q_i);
    const Tensor& key = c.input(q_i + 1);
    const Tensor& value = c.input(q_i + 2);
    const int r = query.rank;
    for (int d = 0; d < r - 2; ++d) B *= query.shape[d];
    L = query.shape[r - 2];
    E = query.shape[r - 1];
    S = key.shape[r - 2];
    Ev = value.shape[r - 1];
    double s = c.attr(1).as_float();
    scale = static_cast<A>(s != 0 ? s : E > 0 ? 1.0 / std::sqrt(static_cast<double>(E)) : 1.0);
    causal = c.attr(0).as_bool();
    q = contiguous_as<A>(query, kDtype, tq, sq);
    k = contiguous_as<A>(key, kDtype, tk, sk);
    v = contiguous_as<A>(value, kDtype, tv, sv);
    if (const Tensor* m = c.optional_input(mask_i)) load_mask(*m, query);
  }

  void load_mask(const Tensor& m, const Tensor& query) {
    const int r = query.rank;
    mask_values.resize(static_cast<size_t>(m.numel()));
    if (m.dtype == HAL_DTYPE_BOOL) {
      const bool* b = contiguous_as<bool>(m, HAL_DTYPE_BOOL, tm, sm);
      for (size_t i = 0; i < mask_values.size(); ++i)
        mask_values[i] = b[i] ? A(0) : -std::numeric_limits<A>::infinity();
    } else {
      const A* f = contiguous_as<A>(m, kDtype, tm, sm);
      std::copy(f, f + mask_values.size(), mask_values.begin());
    }
    mask = mask_values.data();
    // Element strides of the contiguous mask broadcast to [batch..., L, S].
    std::vector<int64_t> target = query.sizes(), st(r, 0);
    target[r - 1] = S;
    int64_t stride = 1;
    for (int d = m.rank - 1; d >= 0; --d) {
      int td = r - m.rank + d;
      st[td] = m.shape[d] == 1 ? 0 : stride;
      stride *= m.shape[d];
    }
    mask_sl = st[r - 2];
    mask_ss = st[r - 1];
    mask_batch_off.assign(static_cast<size_t>(B), 0);
    for (int64_t b = 0; b < B; ++b) {
      int64_t rest = b, off = 0;
      for (int d = r - 3; d >= 0; --d) {
        off += (rest % target[d]) * st[d];
        rest /= target[d];
      }
      mask_batch_off[b] = off;
    }
  }

  // Score of query row (b, i) with key j: scaled dot product plus mask;
  // -inf when masked out. RAW is the dot product.
  A finish_score(int64_t b, int64_t i, int64_t j, A raw) const { return mask_score(b, i, j, raw * scale); }
  // SCALED with the causal mask and attn_mask applied.
  A mask_score(int64_t b, int64_t i, int64_t j, A scaled) const {
    if (causal && j > i) return -std::numeric_limits<A>::infinity();
    if (mask != nullptr) scaled += mask[mask_batch_off[b] + i * mask_sl + j * mask_ss];
    return scaled;
  }
  A score(int64_t b, int64_t i, int64_t j) const {
    return finish_score(b, i, j, dot(q + (b * L + i) * E, k + (b * S + j) * E, E));
  }
  // Keys row i may attend: [0, key_end(i)).
  int64_t key_end(int64_t i) const { return causal ? std::min(S, i + 1) : S; }
  int64_t grain(int64_t work_per_row) const { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_row)); }
};

// An output of N values of A, zeroed: the output's own memory when it is
// dense in A's dtype (the usual case: no scratch array, no copy after),
// else a scratch array that commit() stores, converting and honouring strides.
// Inputs never share the output's bytes (the SDK rejects an overlap).
template <class A>
class OutArray {
 public:
  OutArray(const Tensor& dst, int64_t n) : dst_(dst) {
    if (dst.dtype == Attention<A>::kDtype && dst.is_contiguous()) {
      data_ = dst.ptr<A>();
      std::fill_n(data_, n, A(0));
    } else {
      scratch_.assign(static_cast<size_t>(n), A(0));
      data_ = scratch_.data();
    }
  }
  A* data() const { return data_; }
  void commit() const {
    if (!scratch_.empty()) store<A>(dst_, data_, Attention<A>::kDtype);  // staged (not written in place)
  }

 private:
  const Tensor& dst_;
  std::vector<A> scratch_;
  A* data_ = nullptr;
};

constexpr int64_t kKeyBlock = 64;
constexpr int64_t kRowTile = 4;  // query rows sharing each key row load

// Dot products of key row K with the query rows Q[r] (r < kRowTile).
template <class A>
inline void dot4(const A* const* q, const A* k, int64_t n, A* out) {
  A s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (int64_t e = 0; e < n; ++e) {
    const A kv = k[e];
    s0 += q[0][e] * kv;
    s1 += q[1][e] * kv;
    s2 += q[2][e] * kv;
    s3 += q[3][e] * kv;
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}

// Raises row R's running max M[R] to BM when BM is larger, rescaling the
// row's sum L[R] and output row ACC + R·EV; returns the row's max.
template <class A>
inline A raise_max(int64_t r, A bm, A* m, A* l, A* acc, int64_t ev) {
  if (bm > m[r]) {
    const A corr = std::exp(m[r] - bm);  // 0 on the first unmasked block
    l[r] *= corr;
    for (int64_t e = 0; e < ev; ++e) acc[r * ev + e] *= corr;
    m[r] = bm;
  }
  return m[r];
}

// One online-softmax step of ROWS query rows over a block of N scores (row
// stride LD): raises each row's running max M (rescaling its sum L and its
// output row ACC + r·EV), and turns the scores into exp(s - M).
template <class A>
void softmax_block(A* s, int64_t ld, int64_t rows, int64_t n, A* m, A* l, A* acc, int64_t ev) {
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    A* sr = s + r * ld;
    A bm = kNegInf;
#pragma omp simd reduction(max : bm)
    for (int64_t jj = 0; jj < n; ++jj) bm = std::max(bm, sr[jj]);
    const A mr = raise_max(r, bm, m, l, acc, ev);
    if (mr == kNegInf) {  // nothing unmasked yet
      std::fill(sr, sr + n, A(0));
      continue;
    }
    // vmath::exp vectorises (libm's does not) and gives 0 for a -inf score.
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t jj = 0; jj < n; ++jj) {
      const A e = vmath::exp(sr[jj] - mr);
      sr[jj] = e;
      sum += e;
    }
    l[r] += sum;
  }
}

// float32: the same step with each row's max and sum as vector code and tree
// reductions (softmax_simd.hpp); the template's "omp simd" reductions add the
// lanes one by one, a chain that dominated short rows (16 keys per head).
inline void softmax_block(float* s, int64_t ld, int64_t rows, int64_t n, float* m, float* l, float* acc, int64_t ev) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * ld;
    const simd::Row row(sr, n);
    const float mr = raise_max(r, row.max(), m, l, acc, ev);
    if (mr == kNegInf) {  // nothing unmasked yet
      std::fill(sr, sr + n, 0.0f);
      continue;
    }
    // Scores are at most M, so exp_nonpositive applies (0 for a -inf score).
    l[r] += row.sum_exp<true>(mr, sr);
    if (row.body < n) {
      const simd::VecF tail = simd::exp_nonpositive(row.tail - simd::splat(mr));
      for (int64_t j = row.body; j < n; ++j) sr[j] = tail[j - row.body];
    }
  }
}

// Normalises ROWS output rows and writes their logsumexp; a row with no key
// to attend stays 0 with logsumexp -inf (PyTorch's safe softmax).
template <class A>
void finish_rows(int64_t rows, const A* m, const A* l, A* acc, int64_t ev, A* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    if (l[r] > 0) {
      const A inv = A(1) / l[r];
      for (int64_t e = 0; e < ev; ++e) acc[r * ev + e] *= inv;
      lse[r] = m[r] + std::log(l[r]);
    } else {
      lse[r] = -std::numeric_limits<A>::infinity();
    }
  }
}

// Loop version (float64, and E or Ev = 0): tiles of kRowTile query rows
// share each key row load.
template <class A>
void attention_forward_loops(const Attention<A>& at, A* out, A* lse) {
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const int64_t B = at.B, L = at.L, S = at.S, E = at.E, Ev = at.Ev;
  const int64_t tiles = (L + kRowTile - 1) / kRowTile;
  parallel_for(B * tiles, at.grain(kRowTile * S * (E + Ev)), [&](int64_t begin, int64_t end) {
    A s[kRowTile * kKeyBlock];
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t b = tile / tiles, i0 = (tile % tiles) * kRowTile, rows = std::min(kRowTile, L - i0);
      const int64_t s_end = at.key_end(i0 + rows - 1);
      A* acc = out + (b * L + i0) * Ev;  // output rows accumulate in place
      const A* qr[kRowTile];
      A m[kRowTile], l[kRowTile];
      for (int64_t r = 0; r < kRowTile; ++r) {
        qr[r] = at.q + (b * L + i0 + std::min(r, rows - 1)) * E;  // short tiles repeat their last row
        m[r] = kNegInf;
        l[r] = 0;
      }
      for (int64_t j0 = 0; j0 < s_end; j0 += kKeyBlock) {
        const int64_t n = std::min(kKeyBlock, s_end - j0);
        for (int64_t jj = 0; jj < n; ++jj) {
          A raw[kRowTile];
          dot4(qr, at.k + (b * S + j0 + jj) * E, E, raw);
          for (int64_t r = 0; r < rows; ++r) s[r * kKeyBlock + jj] = at.finish_score(b, i0 + r, j0 + jj, raw[r]);
        }
        softmax_block(s, kKeyBlock, rows, n, m, l, acc, Ev);
        for (int64_t jj = 0; jj < n; ++jj) {
          const A* vj = at.v + (b * S + j0 + jj) * Ev;
          for (int64_t r = 0; r < rows; ++r)
            if (s[r * kKeyBlock + jj] != A(0)) axpy(s[r * kKeyBlock + jj], vj, acc + r * Ev, Ev);
        }
      }
      finish_rows(rows, m, l, acc, Ev, lse + b * L + i0);
    }
  });
}

using onednn::sgemm;

// C = alpha·op(A)·op(B) + beta·C, row-major (sgemm's arguments). Attention's
// blocks with short heads (16x16x8 at head size 8) cost less as plain loops
// than as library calls: a oneDNN sgemm call costs ~0.2 us, such a block's
// arithmetic a tenth of that. Up to kLoopGemmWork multiply-adds with op(B)
// of at most kLoopGemmB elements run as loops, larger blocks through oneDNN.
constexpr int64_t kLoopGemmWork = 8192, kLoopGemmB = 2048;

// Columns [J0, J0 + W) of rows [I, I + R) of C = alpha·op(A)·B + beta·C
// (B's rows contiguous). W and R are compile-time, so the R·W sums stay in
// vector registers as R independent chains (one row's chain of K
// multiply-adds alone is latency-bound). C is not read when BETA is 0
// (sgemm's rule: it may hold anything).
template <int W, int R>
inline void product_block(bool ta, int64_t i, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                          int64_t j0, float alpha, float beta, float* c, int64_t ldc) {
  float acc[R][W] = {};
  for (int64_t l = 0; l < k; ++l) {
    const float* bl = b + l * ldb + j0;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float ail = ta ? a[l * lda + i + r] : a[(i + r) * lda + l];
#pragma GCC unroll 16
      for (int j = 0; j < W; ++j) acc[r][j] += ail * bl[j];
    }
  }
  for (int r = 0; r < R; ++r) {
    float* ci = c + (i + r) * ldc + j0;
    if (beta == 0.0f) {
      for (int j = 0; j < W; ++j) ci[j] = alpha * acc[r][j];
    } else {
      for (int j = 0; j < W; ++j) ci[j] = alpha * acc[r][j] + beta * ci[j];
    }
  }
}

// Rows [I, I + R) of the product, all N columns.
template <int R>
inline void product_rows(bool ta, int64_t i, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                         int64_t ldb, float alpha, float beta, float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) product_block<16, R>(ta, i, k, a, lda, b, ldb, j, alpha, beta, c, ldc);
  for (; j + 8 <= n; j += 8) product_block<8, R>(ta, i, k, a, lda, b, ldb, j, alpha, beta, c, ldc);
  for (; j < n; ++j) product_block<1, R>(ta, i, k, a, lda, b, ldb, j, alpha, beta, c, ldc);
}

void block_gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m * n * k > kLoopGemmWork || n * k > kLoopGemmB) {
    sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  float bt[kLoopGemmB];  // op(B) with contiguous rows
  if (tb == 'T') {
    for (int64_t l = 0; l < k; ++l)
      for (int64_t j = 0; j < n; ++j) bt[l * n + j] = b[j * ldb + l];
    b = bt;
    ldb = n;
  }
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) product_rows<4>(ta == 'T', i, n, k, a, lda, b, ldb, alpha, beta, c, ldc);
  for (; i < m; ++i) product_rows<1>(ta == 'T', i, n, k, a, lda, b, ldb, alpha, beta, c, ldc);
}

// float32 version: per tile of kGemmRows query rows and block of kGemmKeys
// keys, scores = scale·Q·Kᵀ and out += P·V are block_gemms.
constexpr int64_t kGemmRows = 64, kGemmKeys = 64;  // 64 keys: a causal backward skips more blocks
void attention_forward_gemm(const Attention<float>& at, float* out, float* lse) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t B = at.B, L = at.L, S = at.S, E = at.E, Ev = at.Ev;
  const int64_t tiles = (L + kGemmRows - 1) / kGemmRows;
  parallel_for(B * tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> s(static_cast<size_t>(kGemmRows * kGemmKeys));
    float m[kGemmRows], l[kGemmRows];
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t b = tile / tiles, i0 = (tile % tiles) * kGemmRows, rows = std::min(kGemmRows, L - i0);
      const int64_t s_end = at.key_end(i0 + rows - 1);
      float* acc = out + (b * L + i0) * Ev;
      std::fill(m, m + rows, kNegInf);
      std::fill(l, l + rows, 0.0f);
      for (int64_t j0 = 0; j0 < s_end; j0 += kGemmKeys) {
        const int64_t n = std::min(kGemmKeys, s_end - j0);
        block_gemm('N', 'T', rows, n, E, at.scale, at.q + (b * L + i0) * E, E, at.k + (b * S + j0) * E, E, 0.0f,
                   s.data(), kGemmKeys);
        if (at.mask != nullptr)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t jj = 0; jj < n; ++jj)
              s[r * kGemmKeys + jj] = at.mask_score(b, i0 + r, j0 + jj, s[r * kGemmKeys + jj]);
        else if (at.causal)  // only the keys past each row's index
          for (int64_t r = 0; r < rows; ++r)
            std::fill(s.data() + r * kGemmKeys + std::clamp<int64_t>(i0 + r - j0 + 1, 0, n), s.data() + r * kGemmKeys + n,
                      kNegInf);
        softmax_block(s.data(), kGemmKeys, rows, n, m, l, acc, Ev);
        block_gemm('N', 'N', rows, Ev, n, 1.0f, s.data(), kGemmKeys, at.v + (b * S + j0) * Ev, Ev, 1.0f, acc, Ev);
      }
      finish_rows(rows, m, l, acc, Ev, lse + b * L + i0);
    }
  });
}

template <class A>
void attention_forward(const OpCall& c) {
  Attention<A> at(c, 0, 3);
  const OutArray<A> out(c.output(0), at.B * at.L * at.Ev), lse(c.output(1), at.B * at.L);
  if constexpr (std::is_same_v<A, float>) {
    if (at.E > 0 && at.Ev > 0) attention_forward_gemm(at, out.data(), lse.data());
    else attention_forward_loops(at, out.data(), lse.data());
  } else {
    attention_forward_loops(at, out.data(), lse.data());
  }
  out.commit();
  lse.commit();
}

void attention_body(const OpCall& c) {
  if (c.input(0).dtype == HAL_DTYPE_FLOAT64) attention_forward<double>(c);
  else attention_forward<float>(c);
}
HAL_CPU_KERNEL(attention_kernel, attention_body)

// The backward's operands: the forward's plus grad_out, out, logsumexp,
// D_i = grad_out_i·out_i, and the (zeroed) gradients.
template <class A>
struct Backward {
  const Attention<A>& at;
  const A* dout;
  const A* lse;
  std::vector<A> d;
  A* dq;  // [B, L, E], [B, S, E], [B, S, Ev]: zeroed, accumulated into (OutArray)
  A* dk;
  A* dv;

  Backward(const Attention<A>& a, const A* grad_out, const A* out, const A* logsumexp, A* grad_q, A* grad_k,
           A* grad_v)
      : at(a), dout(grad_out), lse(logsumexp), d(static_cast<size_t>(a.B * a.L)), dq(grad_q), dk(grad_k),
        dv(grad_v) {
    const int64_t ev = a.Ev;
    parallel_for(a.B * a.L, a.grain(ev), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) d[row] = dot(dout + row * ev, out + row * ev, ev);
    });
  }
  // P = exp(SCORE - lse) of query row ROW (0 when masked or the row is empty).
  A prob(int64_t row, A score) const {
    constexpr A kNegInf = -std::numeric_limits<A>::infinity();
    return score == kNegInf || lse[row] == kNegInf ? A(0) : std::exp(score - lse[row]);
  }
};

// Loop version (float64, and E or Ev = 0): grad_query per query row, then
// grad_key and grad_value per key row.
template <class A>
void attention_backward_loops(Backward<A>& g) {
  const Attention<A>& at = g.at;
  const int64_t L = at.L, S = at.S, E = at.E, Ev = at.Ev;
  auto probs = [&](int64_t b, int64_t i, int64_t j, A& p, A& ds) {
    const int64_t row = b * L + i;
    p = g.prob(row, at.score(b, i, j));
    ds = p == A(0) ? A(0) : p * (dot(g.dout + row * Ev, at.v + (b * S + j) * Ev, Ev) - g.d[row]);
  };
  parallel_for(at.B * L, at.grain(S * (E + Ev)), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / L, i = row % L;
      for (int64_t j = 0, je = at.key_end(i); j < je; ++j) {
        A p, ds;
        probs(b, i, j, p, ds);
        if (ds != A(0)) axpy(ds * at.scale, at.k + (b * S + j) * E, g.dq + row * E, E);
      }
    }
  });
  parallel_for(at.B * S, at.grain(L * (E + 2 * Ev)), [&](int64_t begin, int64_t end) {
    for (int64_t key_row = begin; key_row < end; ++key_row) {
      const int64_t b = key_row / S, j = key_row % S;
      for (int64_t i = at.causal ? j : 0; i < L; ++i) {
        A p, ds;
        probs(b, i, j, p, ds);
        if (p != A(0)) axpy(p, g.dout + (b * L + i) * Ev, g.dv + key_row * Ev, Ev);
        if (ds != A(0)) axpy(ds * at.scale, at.q + (b * L + i) * E, g.dk + key_row * E, E);
      }
    }
  });
}

// float32 version: the same two passes over (query tile, key block) pairs,
// each block's P and dS from two block_gemms, the gradients from one or two more.
void attention_backward_gemm(Backward<float>& g) {
  const Attention<float>& at = g.at;
  const int64_t L = at.L, S = at.S, E = at.E, Ev = at.Ev, ld = kGemmKeys;
  const int64_t q_tiles = (L + kGemmRows - 1) / kGemmRows, k_blocks = (S + kGemmKeys - 1) / kGemmKeys;
  // P and dS of query rows [i0, i0 + rows) of batch b with keys [j0, j0 + n).
  auto block = [&](int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t n, float* p, float* ds) {
    block_gemm('N', 'T', rows, n, E, at.scale, at.q + (b * L + i0) * E, E, at.k + (b * S + j0) * E, E, 0.0f, p, ld);
    block_gemm('N', 'T', rows, n, Ev, 1.0f, g.dout + (b * L + i0) * Ev, Ev, at.v + (b * S + j0) * Ev, Ev, 0.0f, ds,
               ld);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = b * L + i0 + r;
      float* pr = p + r * ld;
      float* dsr = ds + r * ld;
      if (at.mask != nullptr)
        for (int64_t jj = 0; jj < n; ++jj) pr[jj] = at.mask_score(b, i0 + r, j0 + jj, pr[jj]);
      const float lse = g.lse[row], d = g.d[row];
      if (lse == -std::numeric_limits<float>::infinity()) {  // a row with nothing to attend
        std::fill(pr, pr + n, 0.0f);
        std::fill(dsr, dsr + n, 0.0f);
        continue;
      }
      // Causal: keys past the row's own index (jj > last) are masked out.
      const int64_t last = at.causal ? i0 + r - j0 : n;
#pragma omp simd
      for (int64_t jj = 0; jj < n; ++jj) {
        const float e = vmath::select(jj > last, 0.0f, vmath::exp(pr[jj] - lse));
        pr[jj] = e;
        dsr[jj] = e * (dsr[jj] - d);
      }
    }
  };
  // grad_value += Pᵀ·grad_out and grad_key += scale·dSᵀ·Q for keys [j0, j0 + n) of batch b.
  auto key_grads = [&](int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t n, const float* p, const float* ds) {
    block_gemm('T', 'N', n, Ev, rows, 1.0f, p, ld, g.dout + (b * L + i0) * Ev, Ev, 1.0f,
               g.dv + (b * S + j0) * Ev, Ev);
    block_gemm('T', 'N', n, E, rows, at.scale, ds, ld, at.q + (b * L + i0) * E, E, 1.0f,
               g.dk + (b * S + j0) * E, E);
  };
  // With two batch entries (of B·heads) per thread or more, each task owns whole entries: one pass
  // over (key block, query tile) pairs makes each P and dS once and accumulates all three
  // gradients from them (5 GEMMs a pair, not the 7 of the two passes below).
  if (at.B >= 2 * static_cast<int64_t>(omp_get_max_threads())) {
    parallel_for(at.B, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> p(static_cast<size_t>(kGemmRows * ld)), ds(p.size());
      for (int64_t b = begin; b < end; ++b)
        for (int64_t j0 = 0; j0 < S; j0 += kGemmKeys) {
          const int64_t n = std::min(kGemmKeys, S - j0);
          for (int64_t i0 = at.causal ? j0 / kGemmRows * kGemmRows : 0; i0 < L; i0 += kGemmRows) {
            const int64_t rows = std::min(kGemmRows, L - i0);
            block(b, i0, rows, j0, n, p.data(), ds.data());
            key_grads(b, i0, rows, j0, n, p.data(), ds.data());
            block_gemm('N', 'N', rows, E, n, at.scale, ds.data(), ld, at.k + (b * S + j0) * E, E, 1.0f,
                       g.dq + (b * L + i0) * E, E);
          }
        }
    });
    return;
  }
  parallel_for(at.B * q_tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(kGemmRows * ld)), ds(p.size());
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / q_tiles, i0 = (t % q_tiles) * kGemmRows, rows = std::min(kGemmRows, L - i0);
      const int64_t s_end = at.key_end(i0 + rows - 1);
      for (int64_t j0 = 0; j0 < s_end; j0 += kGemmKeys) {
        const int64_t n = std::min(kGemmKeys, s_end - j0);
        block(b, i0, rows, j0, n, p.data(), ds.data());
        block_gemm('N', 'N', rows, E, n, at.scale, ds.data(), ld, at.k + (b * S + j0) * E, E, 1.0f,
                   g.dq + (b * L + i0) * E, E);
      }
    }
  });
  parallel_for(at.B * k_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(kGemmRows * ld)), ds(p.size());
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / k_blocks, j0 = (t % k_blocks) * kGemmKeys, n = std::min(kGemmKeys, S - j0);
      for (int64_t i0 = at.causal ? j0 / kGemmRows * kGemmRows : 0; i0 < L; i0 += kGemmRows) {
        const int64_t rows = std::min(kGemmRows, L - i0);
        block(b, i0, rows, j0, n, p.data(), ds.data());
        key_grads(b, i0, rows, j0, n, p.data(), ds.data());
      }
    }
  });
}

template <class A>
void attention_backward(const OpCall& c) {
  Attention<A> at(c, 1, 6);
  Tensor t_do, t_o, t_lse;
  std::vector<unsigned char> s_do, s_o, s_lse;
  const OutArray<A> dq(c.output(0), at.B * at.L * at.E), dk(c.output(1), at.B * at.S * at.E),
      dv(c.output(2), at.B * at.S * at.Ev);
  Backward<A> g(at, contiguous_as<A>(c.input(0), Attention<A>::kDtype, t_do, s_do),
                contiguous_as<A>(c.input(4), Attention<A>::kDtype, t_o, s_o),
                contiguous_as<A>(c.input(5), Attention<A>::kDtype, t_lse, s_lse), dq.data(), dk.data(), dv.data());
  if constexpr (std::is_same_v<A, float>) {
    if (at.E > 0 && at.Ev > 0) attention_backward_gemm(g);
    else attention_backward_loops(g);
  } else {
    attention_backward_loops(g);
  }
  dq.commit();
  dk.commit();
  dv.commit();
}

void attention_backward_body(const OpCall& c) {
  if (c.input(1).dtype == HAL_DTYPE_FLOAT64) attention_backward<double>(c);
  else attention_backward<float>(c);
}
HAL_CPU_KERNEL(attention_backward_kernel, attention_backward_body)

void rotary_body(const OpCall& c) {
  const Tensor& x = c.input(0);
  const int64_t S = x.shape[x.rank - 2], D = x.shape[x.rank - 1], H = D / 2;
  const int64_t rows = x.numel() / std::max<int64_t>(1, D);
  const bool interleaved = op::rotary_embedding::interleaved(c);
  sdk::kernel::dispatch_float(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    constexpr hal_dtype_e kC = std::is_same_v<C, double> ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32;
    Tensor tx, tc, ts;
    std::vector<unsigned char> sx, sc, ss;
    const T* in = contiguous_as<T>(x, x.dtype, tx, sx);
    const C* cs = contiguous_as<C>(c.input(1), kC, tc, sc);
    const C* sn = contiguous_as<C>(c.input(2), kC, ts, ss);
    ContiguousOut<T> dst(c.output(0));
    T* o = dst.data();
    // a·c - b·n, b·c + a·n per pair; a and b are read before either is
    // written, so an exact in-place alias is safe.
    parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, D)), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = in + r * D;
        T* orow = o + r * D;
        const C* cr = cs + (r % S) * H;
        const C* sr = sn + (r % S) * H;
        if (interleaved) {
          for (int64_t k = 0; k < H; ++k) {
            const C a = static_cast<C>(xr[2 * k]), b = static_cast<C>(xr[2 * k + 1]);
            orow[2 * k] = static_cast<T>(a * cr[k] - b * sr[k]);
            orow[2 * k + 1] = static_cast<T>(b * cr[k] + a * sr[k]);
          }
        } else {
          for (int64_t k = 0; k < H; ++k) {
            const C a = static_cast<C>(xr[k]), b = static_cast<C>(xr[k + H]);
            orow[k] = static_cast<T>(a * cr[k] - b * sr[k]);
            orow[k + H] = static_cast<T>(b * cr[k] + a * sr[k]);
          }
        }
      }
    });
    dst.finish();
  });
}
HAL_CPU_KERNEL(rotary_kernel, rotary_body)

}  // namespace

void register_transformer_ops(sdk::OpRegistry& ops) {
  ops.add<op::scaled_dot_product_attention>(&attention_kernel, sdk::kFloatDtypes);
  ops.add<op::scaled_dot_product_attention_backward>(&attention_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::rotary_embedding>(&rotary_kernel, sdk::kFloatDtypes);
}

}  // namespace hal::cpu
