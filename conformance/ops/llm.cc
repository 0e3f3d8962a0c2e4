// hal-conformance: the "llm" ops (fused inference operators over a paged KV
// cache) — cases and double-precision references, written from
// sdk/catalog/ops/llm.toml alone. Attention is the textbook form: the full
// score row of each query, a max-subtracted softmax, then the weighted sum
// of value rows; the paged cache is read through the block table exactly as
// the spec words it (position j of sequence b is row j % block_size of block
// block_tables[b, j / block_size]).
//
// Strided, offset and permuted (non-contiguous) inputs come from the runner:
// every case that is not a bad-input case runs in all of them.
//
// Not covered here: in-place launches (out aliasing input, which the
// catalog allows for add_rms_norm, apply_rotary_pos_emb and fill_kv_cache).
// The runner gives every output a buffer of its own and an OpCase cannot ask
// for an output to be an input's view, so an aliased call cannot be
// expressed in a suite; it needs a runner feature (or the kernels' tests).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

using Shape = std::vector<int64_t>;
constexpr hal_dtype_e kF32 = HAL_DTYPE_FLOAT32;
constexpr hal_dtype_e kF64 = HAL_DTYPE_FLOAT64;
constexpr hal_dtype_e kI64 = HAL_DTYPE_INT64;
constexpr hal_dtype_e kI32 = HAL_DTYPE_INT32;
constexpr hal_dtype_e kI8 = HAL_DTYPE_INT8;
constexpr hal_status_code_e kBad = HAL_STATUS_INVALID_ARGUMENT;
constexpr hal_status_code_e kRange = HAL_STATUS_OUT_OF_RANGE;
constexpr double kInf = std::numeric_limits<double>::infinity();

HostTensor ints(hal_dtype_e dt, Shape shape, std::vector<double> v) { return HostTensor(dt, std::move(shape), std::move(v)); }

// A float dtype other than DT (for "dtype differs" cases).
hal_dtype_e other_float(hal_dtype_e dt) { return dt == kF32 ? HAL_DTYPE_FLOAT16 : kF32; }

double silu(double a) { return a / (1.0 + std::exp(-a)); }

// OUT[0, DV) = softmax(S)·V over the positions whose score is finite (a
// max-subtracted softmax in double); all 0 when no position is left.
void attend(const std::vector<double>& s, const std::function<double(int64_t j, int64_t e)>& v, int64_t dv, double* out) {
  double m = -kInf;
  for (double x : s) m = std::max(m, x);
  for (int64_t e = 0; e < dv; ++e) out[e] = 0;
  if (m == -kInf) return;
  double z = 0;
  for (double x : s) z += x == -kInf ? 0.0 : std::exp(x - m);
  for (size_t j = 0; j < s.size(); ++j) {
    if (s[j] == -kInf) continue;
    double p = std::exp(s[j] - m) / z;
    for (int64_t e = 0; e < dv; ++e) out[e] += p * v(static_cast<int64_t>(j), e);
  }
}

double attention_scale(const OpCase& c, int64_t d) {
  double given = c.attr_float("scale", 0.0);
  return given != 0 ? given : 1.0 / std::sqrt(static_cast<double>(d));
}

// ---- add_rms_norm -------------------------------------------------------------------

OpCase add_rms(const std::string& name, hal_dtype_e dt, Shape shape, uint64_t seed) {
  Shape w{shape.empty() ? 1 : shape.back()};
  return OpCase(name).in(random(dt, shape, seed)).in(random(dt, shape, seed + 1)).in(random(dt, w, seed + 2, 0.5, 1.5));
}

std::vector<OpCase> add_rms_norm_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      add_rms("[4, 16]", dt, {4, 16}, 1),
      add_rms("rank 3 [2, 3, 8]", dt, {2, 3, 8}, 2),
      add_rms("rank 1 [7]", dt, {7}, 3),
      add_rms("long row [3, 300]", dt, {3, 300}, 4).tol(2),
      add_rms("eps 0.5", dt, {3, 5}, 5).attr(hal::Attr::f("eps", 0.5)),
      add_rms("eps 0", dt, {2, 6}, 6).attr(hal::Attr::f("eps", 0.0)),
      add_rms("zero-size [0, 8]", dt, {0, 8}, 7),
  };
  // input + residual cancels to 0 in one row: out = 0 there (eps keeps it finite).
  OpCase cancel = add_rms("a row summing to zero", dt, {3, 4}, 8);
  for (int64_t k = 0; k < 4; ++k) cancel.inputs[1]->values[4 + k] = -cancel.inputs[0]->values[4 + k];
  cases.push_back(cancel);
  std::vector<HostTensor> outs = {HostTensor(dt, {4, 8}), HostTensor(dt, {4, 8})};
  cases.push_back(OpCase("mismatched residual shape").in(random(dt, {4, 8}, 10)).in(random(dt, {4, 7}, 11))
                      .in(random(dt, {8}, 12)).error(kBad, outs, {"add_rms_norm", "'residual'", "[4, 7]"}));
  cases.push_back(OpCase("weight of the wrong length").in(random(dt, {4, 8}, 10)).in(random(dt, {4, 8}, 11))
                      .in(random(dt, {6}, 12)).error(kBad, outs, {"add_rms_norm", "'weight'", "[6]"}));
  cases.push_back(OpCase("residual dtype differs").in(random(dt, {4, 8}, 10)).in(random(other_float(dt), {4, 8}, 11))
                      .in(random(dt, {8}, 12)).error(kBad, outs, {"add_rms_norm", "'residual'", dtype_str(other_float(dt))}));
  cases.push_back(add_rms("negative eps", dt, {4, 8}, 13).attr(hal::Attr::f("eps", -1e-6))
                      .error(kBad, outs, {"add_rms_norm", "'eps'"}));
  return cases;
}

std::vector<HostTensor> add_rms_norm_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  const HostTensor& r = c.input(1);
  const HostTensor& w = c.input(2);
  const double eps = c.attr_float("eps", 1e-6);
  HostTensor out(x.dtype, x.shape), res(x.dtype, x.shape);
  const int64_t n = x.shape.back();
  for (int64_t row = 0; n > 0 && row < x.numel() / n; ++row) {
    double ss = 0;
    for (int64_t k = 0; k < n; ++k) {
      // The norm reads s rounded to the dtype (as an unfused x = x + r would).
      double s = round_to(x.dtype, x.values[row * n + k] + r.values[row * n + k]);
      res.values[row * n + k] = s;
      ss += s * s;
    }
    double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t k = 0; k < n; ++k) out.values[row * n + k] = res.values[row * n + k] * inv * w.values[k];
  }
  return {out, res};
}
HAL_CONFORMANCE_SUITE(add_rms_norm, add_rms_norm_cases, add_rms_norm_ref);

// ---- apply_rotary_pos_emb -------------------------------------------------------------

// cos (or sin when SINE) of Llama's angles p·10000^(-2k/R), [P, R/2] in DT.
HostTensor rope_table(hal_dtype_e dt, int64_t P, int64_t R, bool sine) {
  HostTensor t(dt, {P, R / 2});
  for (int64_t p = 0; p < P; ++p)
    for (int64_t k = 0; k < R / 2; ++k) {
      double theta = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(k) / static_cast<double>(R));
      t.values[p * (R / 2) + k] = round_to(dt, sine ? std::sin(theta) : std::cos(theta));
    }
  return t;
}

// query [lead..., Hq, D], key [lead..., Hk, D], tables [P, R/2], positions [lead...].
OpCase rope(const std::string& name, hal_dtype_e dt, Shape lead, int64_t hq, int64_t hk, int64_t d, int64_t r,
            int64_t P, bool interleaved, uint64_t seed, hal_dtype_e pos_dt = kI64, hal_dtype_e table_dt = HAL_DTYPE_INVALID) {
  Shape qs = lead, ks = lead;
  qs.push_back(hq);
  qs.push_back(d);
  ks.push_back(hk);
  ks.push_back(d);
  hal_dtype_e tdt = table_dt == HAL_DTYPE_INVALID ? dt : table_dt;
  return OpCase(name).in(random(dt, qs, seed)).in(random(dt, ks, seed + 1)).in(rope_table(tdt, P, r, false))
      .in(rope_table(tdt, P, r, true)).in(random(pos_dt, lead, seed + 2, 0, static_cast<double>(P)))
      .attr(hal::Attr::b("interleaved", interleaved));
}

std::vector<OpCase> rope_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases;
  for (bool inter : {false, true}) {
    std::string tag = inter ? ", interleaved" : ", neox";
    cases.push_back(rope("T 5, Hq 4, Hk 2, D = R = 8" + tag, dt, {5}, 4, 2, 8, 8, 16, inter, 1));
    cases.push_back(rope("[B 2, S 3] tokens, Hq = Hk = 3, D 6" + tag, dt, {2, 3}, 3, 3, 6, 6, 10, inter, 2));
    cases.push_back(rope("partial R 4 of D 10" + tag, dt, {4}, 2, 1, 10, 4, 9, inter, 3));
    cases.push_back(rope("partial R 2 of D 3 (odd D)" + tag, dt, {3}, 2, 2, 3, 2, 4, inter, 4));
    cases.push_back(rope("int32 positions, GQA 8" + tag, dt, {6}, 8, 1, 4, 4, 32, inter, 5, kI32));
    cases.push_back(rope("float32 cos/sin" + tag, dt, {4}, 2, 2, 8, 8, 12, inter, 6, kI64, kF32));
    cases.push_back(rope("no leading dims (0-d position)" + tag, dt, {}, 2, 1, 8, 8, 5, inter, 7));
    cases.push_back(rope("zero tokens" + tag, dt, {0}, 2, 2, 8, 8, 5, inter, 8));
  }
  OpCase copy = rope("R 0: copies", dt, {3}, 2, 2, 4, 0, 4, false, 9);
  cases.push_back(copy);
  OpCase last = rope("positions 0 and P-1", dt, {2}, 2, 2, 8, 8, 7, false, 10);
  last.inputs[4]->values = {0, 6};
  cases.push_back(last);

  std::vector<HostTensor> outs = {HostTensor(dt, {3, 2, 8}), HostTensor(dt, {3, 1, 8})};
  OpCase far = rope("position id out of range", dt, {3}, 2, 1, 8, 8, 6, false, 11);
  far.inputs[4]->values = {0, 6, 2};
  cases.push_back(far.error(kRange, outs, {"apply_rotary_pos_emb", "'position_ids'", "6"}));
  OpCase neg = rope("negative position id", dt, {3}, 2, 1, 8, 8, 6, true, 12, kI32);
  neg.inputs[4]->values = {1, 2, -1};
  cases.push_back(neg.error(kRange, outs, {"apply_rotary_pos_emb", "'position_ids'", "-1"}));
  OpCase wide = rope("cos wider than the head", dt, {3}, 2, 1, 8, 8, 6, false, 13);
  wide.inputs[2] = rope_table(dt, 6, 10, false);
  wide.inputs[3] = rope_table(dt, 6, 10, true);
  cases.push_back(wide.error(kBad, outs, {"apply_rotary_pos_emb", "'cos'", "D = 8"}));
  OpCase key_lead = rope("key with other leading dims", dt, {3}, 2, 1, 8, 8, 6, false, 14);
  key_lead.inputs[1] = random(dt, {4, 1, 8}, 15);
  cases.push_back(key_lead.error(kBad, outs, {"apply_rotary_pos_emb", "'key'", "[4, 1, 8]"}));
  OpCase pos_shape = rope("position_ids of the wrong shape", dt, {3}, 2, 1, 8, 8, 6, false, 16);
  pos_shape.inputs[4] = ints(kI64, {2}, {0, 1});
  cases.push_back(pos_shape.error(kBad, outs, {"apply_rotary_pos_emb", "'position_ids'", "[2]"}));
  return cases;
}

std::vector<HostTensor> rope_ref(const OpCase& c) {
  const HostTensor& cs = c.input(2);
  const HostTensor& sn = c.input(3);
  const HostTensor& pos = c.input(4);
  const bool interleaved = c.attr_bool("interleaved", false);
  const int64_t half = cs.shape[1];
  std::vector<HostTensor> outs;
  for (size_t which = 0; which < 2; ++which) {
    const HostTensor& x = c.input(which);
    HostTensor out = x;  // dims past R are copied
    const int64_t d = x.shape.back(), heads = x.size(-2);
    for (int64_t t = 0; t < pos.numel(); ++t) {
      const int64_t p = static_cast<int64_t>(pos.values[t]);
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = (t * heads + h) * d;
        for (int64_t k = 0; k < half; ++k) {
          const int64_t ia = base + (interleaved ? 2 * k : k), ib = base + (interleaved ? 2 * k + 1 : k + half);
          const double a = x.values[ia], b = x.values[ib], cv = cs.values[p * half + k], sv = sn.values[p * half + k];
          out.values[ia] = a * cv - b * sv;
          out.values[ib] = b * cv + a * sv;
        }
      }
    }
    outs.push_back(out);
  }
  return outs;
}
HAL_CONFORMANCE_SUITE(apply_rotary_pos_emb, rope_cases, rope_ref);

// ---- silu_and_mul ---------------------------------------------------------------------

std::vector<OpCase> silu_and_mul_cases(hal_dtype_e dt) {
  return {
      OpCase("[4, 16]").in(random(dt, {4, 16}, 1, -4, 4)),
      OpCase("rank 3 [2, 3, 10]").in(random(dt, {2, 3, 10}, 2, -4, 4)),
      OpCase("rank 1 [6]").in(random(dt, {6}, 3, -4, 4)),
      OpCase("long row [2, 258]").in(random(dt, {2, 258}, 4, -4, 4)),
      OpCase("large |a| (exp saturates)").in(ints(dt, {2, 4}, {-60, 60, -20, 30, 1.5, -2, 0.5, 3})),
      OpCase("zero-size [0, 8]").in(HostTensor(dt, {0, 8})),
      OpCase("last dim 0").in(HostTensor(dt, {3, 0})),
      OpCase("odd last dim").in(random(dt, {3, 5}, 5))
          .error(kBad, {HostTensor(dt, {3, 2})}, {"silu_and_mul", "'input'", "[3, 5]"}),
  };
}

std::vector<HostTensor> silu_and_mul_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  Shape s = x.shape;
  s.back() /= 2;
  HostTensor out(x.dtype, s);
  const int64_t n = s.back();
  for (int64_t row = 0; n > 0 && row < out.numel() / n; ++row)
    for (int64_t k = 0; k < n; ++k) out.values[row * n + k] = silu(x.values[row * 2 * n + k]) * x.values[row * 2 * n + n + k];
  return {out};
}
HAL_CONFORMANCE_SUITE(silu_and_mul, silu_and_mul_cases, silu_and_mul_ref);

// ---- fill_kv_cache --------------------------------------------------------------------

// key [T, Hk, D], value [T, Hk, Dv], caches [NB, BS, Hk, *], slots.
OpCase fill(const std::string& name, hal_dtype_e dt, int64_t hk, int64_t d, int64_t dv, int64_t nb, int64_t bs,
            HostTensor slots, uint64_t seed) {
  const int64_t t = slots.numel();
  return OpCase(name).in(random(dt, {t, hk, d}, seed)).in(random(dt, {t, hk, dv}, seed + 1))
      .in(random(dt, {nb, bs, hk, d}, seed + 2)).in(random(dt, {nb, bs, hk, dv}, seed + 3)).in(std::move(slots))
      .cmp({Compare::kExact, Compare::kExact});
}

std::vector<OpCase> fill_kv_cache_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      fill("scattered slots", dt, 2, 4, 4, 4, 4, ints(kI64, {5}, {13, 2, 7, 0, 15}), 1),
      fill("int32 slots, Dv != D", dt, 3, 4, 6, 3, 5, ints(kI32, {4}, {14, 5, 6, 1}), 2),
      fill("slot -1 is padding", dt, 2, 4, 4, 2, 4, ints(kI64, {6}, {3, -1, 4, -1, -1, 7}), 3),
      fill("all padding", dt, 1, 8, 8, 2, 2, ints(kI32, {3}, {-1, -1, -1}), 4),
      fill("two tokens name one slot: the later wins", dt, 2, 4, 2, 2, 3, ints(kI64, {4}, {5, 1, 5, 0}), 5),
      fill("block size 1", dt, 2, 4, 4, 6, 1, ints(kI64, {3}, {5, 0, 3}), 6),
      fill("no tokens", dt, 2, 4, 4, 2, 4, HostTensor(kI64, {0}), 7),
  };
  std::vector<HostTensor> outs = {HostTensor(dt, {2, 4, 2, 4}), HostTensor(dt, {2, 4, 2, 4})};
  cases.push_back(fill("slot mapping outside the cache", dt, 2, 4, 4, 2, 4, ints(kI64, {3}, {1, 8, 2}), 8)
                      .error(kRange, outs, {"fill_kv_cache", "'slot_mapping'", "8"}));
  cases.push_back(fill("slot -2", dt, 2, 4, 4, 2, 4, ints(kI32, {3}, {1, 0, -2}), 9)
                      .error(kRange, outs, {"fill_kv_cache", "'slot_mapping'", "-2"}));
  OpCase cache_dt = fill("cache dtype differs from key", dt, 2, 4, 4, 2, 4, ints(kI64, {3}, {1, 0, 2}), 10);
  cache_dt.inputs[2] = random(other_float(dt), {2, 4, 2, 4}, 11);
  cases.push_back(cache_dt.error(kBad, outs, {"fill_kv_cache", "'key_cache'", dtype_str(other_float(dt))}));
  OpCase key_heads = fill("key heads differ from the cache's", dt, 2, 4, 4, 2, 4, ints(kI64, {3}, {1, 0, 2}), 12);
  key_heads.inputs[0] = random(dt, {3, 3, 4}, 13);
  cases.push_back(key_heads.error(kBad, outs, {"fill_kv_cache", "'key'", "[3, 3, 4]"}));
  OpCase slots_len = fill("slot_mapping shorter than key", dt, 2, 4, 4, 2, 4, ints(kI64, {3}, {1, 0, 2}), 14);
  slots_len.inputs[4] = ints(kI64, {2}, {1, 0});
  cases.push_back(slots_len.error(kBad, outs, {"fill_kv_cache", "'slot_mapping'", "[2]"}));
  return cases;
}

std::vector<HostTensor> fill_kv_cache_ref(const OpCase& c) {
  const HostTensor& slots = c.input(4);
  HostTensor kc = c.input(2), vc = c.input(3);
  for (size_t which = 0; which < 2; ++which) {
    const HostTensor& src = c.input(which);
    HostTensor& cache = which == 0 ? kc : vc;
    const int64_t row = src.numel() / std::max<int64_t>(src.shape[0], 1);  // Hk·D elements per token
    for (int64_t t = 0; t < slots.numel(); ++t) {  // in token order: the later token wins
      const int64_t s = static_cast<int64_t>(slots.values[t]);
      if (s == -1) continue;
      for (int64_t e = 0; e < row; ++e) cache.values[s * row + e] = src.values[t * row + e];
    }
  }
  return {kc, vc};
}
HAL_CONFORMANCE_SUITE(fill_kv_cache, fill_kv_cache_cases, fill_kv_cache_ref);

// ---- paged caches ---------------------------------------------------------------------

int64_t blocks_for(int64_t len, int64_t bs) { return (len + bs - 1) / bs; }

// Block table [B, M] of index dtype IT for context lengths LENS: each
// sequence's covered entries take the next ids of a shuffled permutation of
// [0, NB) (non-contiguous ids, no order between sequences); the entries a
// length does not cover hold garbage (ids past the cache, -1, stale ids),
// which the spec says are never read.
HostTensor block_table(hal_dtype_e it, const std::vector<int64_t>& lens, int64_t bs, int64_t m, int64_t nb, uint64_t seed) {
  HostTensor perm = permutation(kI64, nb, seed);
  HostTensor t(it, {static_cast<int64_t>(lens.size()), m});
  size_t next = 0;
  const double garbage[] = {static_cast<double>(nb + 3), -1.0, 123456.0, 0.0, static_cast<double>(nb)};
  for (size_t b = 0; b < lens.size(); ++b)
    for (int64_t i = 0; i < m; ++i)
      t.values[b * m + i] = i < blocks_for(lens[b], bs) ? perm.values.at(next++) : garbage[(b + i) % 5];
  return t;
}

HostTensor lengths(hal_dtype_e it, const std::vector<int64_t>& lens) {
  HostTensor t(it, {static_cast<int64_t>(lens.size())});
  for (size_t i = 0; i < lens.size(); ++i) t.values[i] = static_cast<double>(lens[i]);
  return t;
}

// A paged cache geometry: NB blocks of BS rows of Hk heads, head dims D, Dv.
struct Cache {
  int64_t nb, bs, hk, d, dv;
};

// Element E of position J's key (KEY) or value row for kv head KVH of
// sequence B, read through the block table.
double cache_at(const HostTensor& cache, const HostTensor& bt, int64_t b, int64_t j, int64_t kvh, int64_t e) {
  const int64_t bs = cache.shape[1], hk = cache.shape[2], dim = cache.shape[3];
  const int64_t blk = static_cast<int64_t>(bt.at({b, j / bs}));
  return cache.values[((blk * bs + j % bs) * hk + kvh) * dim + e];
}

// ---- paged_decode_attention ------------------------------------------------------------

// query [B, Hq, D], caches, block table (M entries per row), lengths, alibi (absent).
OpCase decode(const std::string& name, hal_dtype_e dt, const std::vector<int64_t>& lens, int64_t hq, Cache k, int64_t m,
              uint64_t seed, hal_dtype_e it = kI32) {
  const int64_t b = static_cast<int64_t>(lens.size());
  return OpCase(name).in(random(dt, {b, hq, k.d}, seed, -1, 1)).in(random(dt, {k.nb, k.bs, k.hk, k.d}, seed + 1, -1, 1))
      .in(random(dt, {k.nb, k.bs, k.hk, k.dv}, seed + 2, -1, 1)).in(block_table(it, lens, k.bs, m, k.nb, seed + 3))
      .in(lengths(it, lens)).absent().tol(2);
}

HostTensor slopes(int64_t hq, uint64_t seed) { return random(kF32, {hq}, seed, 0.05, 1.0); }

std::vector<OpCase> decode_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases;
  // lens not multiples of the block size (4), one of length 0, one filling its table.
  const std::vector<int64_t> lens = {5, 0, 16, 13};
  const Cache c{12, 4, 2, 8, 8};
  cases.push_back(decode("GQA 1 (Hq = Hk = 2), lens 5, 0, 16, 13", dt, lens, 2, c, 4, 1));
  cases.push_back(decode("GQA 4 (Hq 8, Hk 2)", dt, lens, 8, c, 4, 2));
  cases.push_back(decode("GQA 8 (Hq 8, Hk 1), Dv 4, int64 tables", dt, {7, 3, 1}, 8, Cache{9, 4, 1, 8, 4}, 3, 3, kI64));
  cases.push_back(decode("block size 16, table with spare entries", dt, {20, 33, 2}, 4, Cache{8, 16, 2, 16, 16}, 5, 4));
  cases.push_back(decode("block size 1", dt, {3, 5}, 2, Cache{10, 1, 1, 4, 4}, 6, 5));
  cases.push_back(decode("long context (several hundred positions)", dt, {300, 129}, 4, Cache{40, 16, 2, 16, 8}, 20, 6).tol(4));
  cases.push_back(decode("scale 0.3", dt, lens, 4, c, 4, 7).attr(hal::Attr::f("scale", 0.3)));
  cases.push_back(decode("sliding window 3", dt, lens, 4, c, 4, 8).attr(hal::Attr::i("sliding_window", 3)));
  cases.push_back(decode("sliding window wider than the context", dt, lens, 2, c, 4, 9)
                      .attr(hal::Attr::i("sliding_window", 40)));
  OpCase alibi = decode("alibi", dt, lens, 8, c, 4, 10);
  alibi.inputs[5] = slopes(8, 11);
  cases.push_back(alibi);
  OpCase alibi_window = decode("alibi and sliding window 5, GQA 4", dt, lens, 8, c, 4, 12);
  alibi_window.inputs[5] = slopes(8, 13);
  cases.push_back(alibi_window.attr(hal::Attr::i("sliding_window", 5)));
  cases.push_back(decode("all lengths 0", dt, {0, 0}, 2, Cache{2, 4, 1, 4, 4}, 2, 14));
  cases.push_back(decode("batch 0", dt, {}, 2, Cache{2, 4, 1, 4, 4}, 2, 15));

  std::vector<HostTensor> outs = {HostTensor(dt, {4, 4, 8})};
  OpCase bad_block = decode("block table entry out of range", dt, lens, 4, c, 4, 16);
  bad_block.inputs[3]->at({2, 1}) = 12;  // covered: len 16 reads entries 0..3
  cases.push_back(bad_block.error(kRange, outs, {"paged_decode_attention", "'block_tables'", "12"}));
  OpCase neg_block = decode("negative block table entry", dt, lens, 4, c, 4, 17, kI64);
  neg_block.inputs[3]->at({0, 1}) = -3;
  cases.push_back(neg_block.error(kRange, outs, {"paged_decode_attention", "'block_tables'", "-3"}));
  OpCase too_long = decode("context length longer than the table covers", dt, lens, 4, c, 4, 18);
  too_long.inputs[4]->values[3] = 17;  // M·BS = 16
  cases.push_back(too_long.error(kRange, outs, {"paged_decode_attention", "'context_lens'", "17"}));
  OpCase neg_len = decode("negative context length", dt, lens, 4, c, 4, 19);
  neg_len.inputs[4]->values[1] = -1;
  cases.push_back(neg_len.error(kRange, outs, {"paged_decode_attention", "'context_lens'", "-1"}));
  cases.push_back(decode("head counts do not divide (6 over 4)", dt, {3, 2}, 6, Cache{4, 4, 4, 8, 8}, 2, 20)
                      .error(kBad, {HostTensor(dt, {2, 6, 8})}, {"paged_decode_attention", "'query'", "'key_cache'", "6"}));
  OpCase cache_dt = decode("cache dtype differs from query", dt, lens, 4, c, 4, 21);
  cache_dt.inputs[1] = random(other_float(dt), {12, 4, 2, 8}, 22);
  cache_dt.inputs[2] = random(other_float(dt), {12, 4, 2, 8}, 23);
  cases.push_back(cache_dt.error(kBad, outs, {"paged_decode_attention", "'key_cache'", dtype_str(other_float(dt))}));
  OpCase alibi_len = decode("alibi_slopes of the wrong length", dt, lens, 4, c, 4, 24);
  alibi_len.inputs[5] = slopes(2, 25);
  cases.push_back(alibi_len.error(kBad, outs, {"paged_decode_attention", "'alibi_slopes'", "[2]"}));
  cases.push_back(decode("negative sliding window", dt, lens, 4, c, 4, 26).attr(hal::Attr::i("sliding_window", -1))
                      .error(kBad, outs, {"paged_decode_attention", "'sliding_window'", "-1"}));
  OpCase lens_len = decode("context_lens of the wrong length", dt, lens, 4, c, 4, 27);
  lens_len.inputs[4] = lengths(kI32, {5, 0, 16});
  cases.push_back(lens_len.error(kBad, outs, {"paged_decode_attention", "'context_lens'", "[3]"}));
  return cases;
}

std::vector<HostTensor> decode_ref(const OpCase& c) {
  const HostTensor& q = c.input(0);
  const HostTensor& kc = c.input(1);
  const HostTensor& vc = c.input(2);
  const HostTensor& bt = c.input(3);
  const HostTensor& lens = c.input(4);
  const int64_t B = q.shape[0], hq = q.shape[1], d = q.shape[2], hk = kc.shape[2], dv = vc.shape[3];
  const double scale = attention_scale(c, d);
  const int64_t window = c.attr_int("sliding_window", 0);
  HostTensor out(q.dtype, {B, hq, dv});
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = static_cast<int64_t>(lens.values[b]), pos = len - 1;
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kvh = h / (hq / hk);
      std::vector<double> s(static_cast<size_t>(len), -kInf);
      for (int64_t j = 0; j < len; ++j) {
        if (window > 0 && j <= pos - window) continue;
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q.values[(b * hq + h) * d + e] * cache_at(kc, bt, b, j, kvh, e);
        s[j] = scale * dot + (c.has_input(5) ? c.input(5).values[h] * static_cast<double>(j - pos) : 0.0);
      }
      attend(s, [&](int64_t j, int64_t e) { return cache_at(vc, bt, b, j, kvh, e); }, dv, &out.values[(b * hq + h) * dv]);
    }
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(paged_decode_attention, decode_cases, decode_ref);

// ---- paged_prefill_attention ------------------------------------------------------------

// New tokens Q_LENS of sequences whose context lengths (new tokens
// included) are LENS: query [T, Hq, D], caches, block table, query_start_loc,
// context_lens, alibi (absent).
OpCase prefill_paged(const std::string& name, hal_dtype_e dt, const std::vector<int64_t>& q_lens,
                     const std::vector<int64_t>& lens, int64_t hq, Cache k, int64_t m, uint64_t seed, hal_dtype_e it = kI32) {
  std::vector<int64_t> starts = {0};
  for (int64_t n : q_lens) starts.push_back(starts.back() + n);
  return OpCase(name).in(random(dt, {starts.back(), hq, k.d}, seed, -1, 1))
      .in(random(dt, {k.nb, k.bs, k.hk, k.d}, seed + 1, -1, 1)).in(random(dt, {k.nb, k.bs, k.hk, k.dv}, seed + 2, -1, 1))
      .in(block_table(it, lens, k.bs, m, k.nb, seed + 3)).in(lengths(it, starts)).in(lengths(it, lens)).absent().tol(2);
}

std::vector<OpCase> paged_prefill_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases;
  // Prefix caching (7 = 4 cached + 3 new), a sequence with no new token, a
  // pure prefill (5 of 5), a decode-like step (1 of 9) and an empty one.
  const std::vector<int64_t> q_lens = {3, 0, 5, 1, 0}, lens = {7, 4, 5, 9, 0};
  const Cache c{14, 4, 2, 8, 8};
  cases.push_back(prefill_paged("causal, GQA 1", dt, q_lens, lens, 2, c, 3, 1));
  cases.push_back(prefill_paged("causal, GQA 4", dt, q_lens, lens, 8, c, 3, 2));
  cases.push_back(prefill_paged("causal, GQA 8, Dv 4, int64", dt, {4, 2}, {6, 11}, 8, Cache{7, 4, 1, 8, 4}, 4, 3, kI64));
  cases.push_back(prefill_paged("non-causal", dt, q_lens, lens, 4, c, 3, 4).attr(hal::Attr::b("causal", false)));
  cases.push_back(prefill_paged("sliding window 3", dt, q_lens, lens, 4, c, 3, 5).attr(hal::Attr::i("sliding_window", 3)));
  cases.push_back(prefill_paged("non-causal, sliding window 2", dt, q_lens, lens, 4, c, 3, 6)
                      .attr(hal::Attr::b("causal", false)).attr(hal::Attr::i("sliding_window", 2)));
  OpCase alibi = prefill_paged("alibi", dt, q_lens, lens, 4, c, 3, 7);
  alibi.inputs[6] = slopes(4, 8);
  cases.push_back(alibi);
  OpCase alibi_nc = prefill_paged("alibi, non-causal, scale 0.25", dt, q_lens, lens, 8, c, 3, 9);
  alibi_nc.inputs[6] = slopes(8, 10);
  cases.push_back(alibi_nc.attr(hal::Attr::f("scale", 0.25)).attr(hal::Attr::b("causal", false)));
  cases.push_back(prefill_paged("long prefill over block size 16", dt, {40, 70}, {100, 70}, 4, Cache{16, 16, 2, 16, 16}, 8,
                                11).tol(4));
  cases.push_back(prefill_paged("no tokens", dt, {0, 0}, {3, 0}, 2, Cache{2, 4, 1, 4, 4}, 2, 12));

  std::vector<HostTensor> outs = {HostTensor(dt, {9, 4, 8})};
  OpCase bad_block = prefill_paged("block table entry out of range", dt, q_lens, lens, 4, c, 3, 13);
  bad_block.inputs[3]->at({0, 1}) = 14;
  cases.push_back(bad_block.error(kRange, outs, {"paged_prefill_attention", "'block_tables'", "14"}));
  OpCase too_long = prefill_paged("context length longer than the table covers", dt, q_lens, lens, 4, c, 3, 14);
  too_long.inputs[5]->values[3] = 13;  // M·BS = 12
  cases.push_back(too_long.error(kRange, outs, {"paged_prefill_attention", "'context_lens'", "13"}));
  OpCase q_long = prefill_paged("q_len > context_len", dt, q_lens, lens, 4, c, 3, 15);
  q_long.inputs[5]->values[2] = 4;  // 5 new tokens, context 4
  cases.push_back(q_long.error(kRange, outs, {"paged_prefill_attention", "'context_lens'", "4"}));
  OpCase end_t = prefill_paged("query_start_loc not ending at T", dt, q_lens, lens, 4, c, 3, 16);
  end_t.inputs[4]->values = {0, 3, 3, 8, 8, 8};  // non-decreasing, but ends at 8 < T = 9
  cases.push_back(end_t.error(kRange, outs, {"paged_prefill_attention", "'query_start_loc'", "8"}));
  OpCase decreasing = prefill_paged("query_start_loc decreasing", dt, q_lens, lens, 4, c, 3, 17);
  decreasing.inputs[4]->values = {0, 3, 2, 8, 9, 9};
  cases.push_back(decreasing.error(kRange, outs, {"paged_prefill_attention", "'query_start_loc'"}));
  cases.push_back(prefill_paged("head counts do not divide (4 over 3)", dt, {2}, {2}, 4, Cache{2, 4, 3, 8, 8}, 1, 18)
                      .error(kBad, {HostTensor(dt, {2, 4, 8})}, {"paged_prefill_attention", "'query'", "'key_cache'"}));
  OpCase cache_dt = prefill_paged("cache dtype differs from query", dt, q_lens, lens, 4, c, 3, 19);
  cache_dt.inputs[1] = random(other_float(dt), {14, 4, 2, 8}, 20);
  cache_dt.inputs[2] = random(other_float(dt), {14, 4, 2, 8}, 21);
  cases.push_back(cache_dt.error(kBad, outs, {"paged_prefill_attention", "'key_cache'", dtype_str(other_float(dt))}));
  OpCase qsl_len = prefill_paged("query_start_loc not [B + 1]", dt, q_lens, lens, 4, c, 3, 22);
  qsl_len.inputs[4] = lengths(kI32, {0, 3, 3, 8, 9});
  cases.push_back(qsl_len.error(kBad, outs, {"paged_prefill_attention", "'query_start_loc'", "[5]"}));
  return cases;
}

std::vector<HostTensor> paged_prefill_ref(const OpCase& c) {
  const HostTensor& q = c.input(0);
  const HostTensor& kc = c.input(1);
  const HostTensor& vc = c.input(2);
  const HostTensor& bt = c.input(3);
  const HostTensor& starts = c.input(4);
  const HostTensor& lens = c.input(5);
  const int64_t T = q.shape[0], hq = q.shape[1], d = q.shape[2], hk = kc.shape[2], dv = vc.shape[3];
  const double scale = attention_scale(c, d);
  const bool causal = c.attr_bool("causal", true);
  const int64_t window = c.attr_int("sliding_window", 0);
  HostTensor out(q.dtype, {T, hq, dv});
  for (int64_t b = 0; b < lens.numel(); ++b) {
    const int64_t s0 = static_cast<int64_t>(starts.values[b]), ql = static_cast<int64_t>(starts.values[b + 1]) - s0;
    const int64_t len = static_cast<int64_t>(lens.values[b]);
    for (int64_t i = 0; i < ql; ++i) {
      const int64_t t = s0 + i, pos = len - ql + i;
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kvh = h / (hq / hk);
        std::vector<double> s(static_cast<size_t>(len), -kInf);
        for (int64_t j = 0; j < len; ++j) {
          if ((causal && j > pos) || (window > 0 && j <= pos - window)) continue;
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += q.values[(t * hq + h) * d + e] * cache_at(kc, bt, b, j, kvh, e);
          s[j] = scale * dot + (c.has_input(6) ? c.input(6).values[h] * static_cast<double>(j - pos) : 0.0);
        }
        attend(s, [&](int64_t j, int64_t e) { return cache_at(vc, bt, b, j, kvh, e); }, dv, &out.values[(t * hq + h) * dv]);
      }
    }
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(paged_prefill_attention, paged_prefill_cases, paged_prefill_ref);

// ---- prefill_attention ------------------------------------------------------------------

// Sequences of lengths SEQS packed: query [T, Hq, D], key [T, Hk, D],
// value [T, Hk, Dv], cu_seqlens, alibi (absent).
OpCase varlen(const std::string& name, hal_dtype_e dt, const std::vector<int64_t>& seqs, int64_t hq, int64_t hk,
              int64_t d, int64_t dv, uint64_t seed, hal_dtype_e it = kI32) {
  std::vector<int64_t> cu = {0};
  for (int64_t n : seqs) cu.push_back(cu.back() + n);
  const int64_t t = cu.back();
  return OpCase(name).in(random(dt, {t, hq, d}, seed, -1, 1)).in(random(dt, {t, hk, d}, seed + 1, -1, 1))
      .in(random(dt, {t, hk, dv}, seed + 2, -1, 1)).in(lengths(it, cu)).absent().tol(2);
}

std::vector<OpCase> prefill_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases;
  const std::vector<int64_t> seqs = {3, 0, 5, 1, 7};
  cases.push_back(varlen("causal, GQA 1, lens 3, 0, 5, 1, 7", dt, seqs, 2, 2, 8, 8, 1));
  cases.push_back(varlen("causal, GQA 4", dt, seqs, 8, 2, 8, 8, 2));
  cases.push_back(varlen("causal, GQA 8, Dv 4, int64", dt, seqs, 8, 1, 8, 4, 3, kI64));
  cases.push_back(varlen("non-causal", dt, seqs, 4, 2, 8, 8, 4).attr(hal::Attr::b("causal", false)));
  cases.push_back(varlen("non-causal, GQA 8", dt, seqs, 8, 1, 4, 6, 5).attr(hal::Attr::b("causal", false)));
  cases.push_back(varlen("sliding window 2", dt, seqs, 4, 2, 8, 8, 6).attr(hal::Attr::i("sliding_window", 2)));
  cases.push_back(varlen("non-causal, sliding window 3", dt, seqs, 4, 2, 8, 8, 7).attr(hal::Attr::b("causal", false))
                      .attr(hal::Attr::i("sliding_window", 3)));
  OpCase alibi = varlen("alibi", dt, seqs, 4, 1, 8, 8, 8);
  alibi.inputs[4] = slopes(4, 9);
  cases.push_back(alibi);
  OpCase alibi_nc = varlen("alibi, non-causal, scale 0.5", dt, seqs, 4, 2, 8, 8, 10);
  alibi_nc.inputs[4] = slopes(4, 11);
  cases.push_back(alibi_nc.attr(hal::Attr::b("causal", false)).attr(hal::Attr::f("scale", 0.5)));
  cases.push_back(varlen("long sequences (several tiles)", dt, {70, 150}, 4, 2, 16, 8, 12).tol(4));
  cases.push_back(varlen("one sequence", dt, {6}, 2, 1, 4, 4, 13));
  cases.push_back(varlen("no tokens, batch 2", dt, {0, 0}, 2, 1, 4, 4, 14));
  cases.push_back(varlen("batch 0", dt, {}, 2, 1, 4, 4, 15));

  std::vector<HostTensor> outs = {HostTensor(dt, {16, 4, 8})};
  OpCase end_t = varlen("cu_seqlens not ending at T", dt, seqs, 4, 2, 8, 8, 16);
  end_t.inputs[3]->values.back() = 15;
  cases.push_back(end_t.error(kRange, outs, {"prefill_attention", "'cu_seqlens'", "15"}));
  OpCase past_t = varlen("cu_seqlens past T", dt, seqs, 4, 2, 8, 8, 17);
  past_t.inputs[3]->values.back() = 17;
  cases.push_back(past_t.error(kRange, outs, {"prefill_attention", "'cu_seqlens'", "17"}));
  OpCase start = varlen("cu_seqlens not starting at 0", dt, seqs, 4, 2, 8, 8, 18);
  start.inputs[3]->values[0] = 1;
  cases.push_back(start.error(kRange, outs, {"prefill_attention", "'cu_seqlens'"}));
  OpCase decreasing = varlen("cu_seqlens decreasing", dt, seqs, 4, 2, 8, 8, 19);
  decreasing.inputs[3]->values = {0, 3, 2, 8, 9, 16};
  cases.push_back(decreasing.error(kRange, outs, {"prefill_attention", "'cu_seqlens'"}));
  cases.push_back(varlen("head counts do not divide (6 over 4)", dt, {3}, 6, 4, 8, 8, 20)
                      .error(kBad, {HostTensor(dt, {3, 6, 8})}, {"prefill_attention", "'query'", "'key'", "6"}));
  OpCase key_dt = varlen("key dtype differs from query", dt, seqs, 4, 2, 8, 8, 21);
  key_dt.inputs[1] = random(other_float(dt), {16, 2, 8}, 22);
  cases.push_back(key_dt.error(kBad, outs, {"prefill_attention", "'key'", dtype_str(other_float(dt))}));
  OpCase alibi_len = varlen("alibi_slopes of the wrong length", dt, seqs, 4, 2, 8, 8, 23);
  alibi_len.inputs[4] = slopes(3, 24);
  cases.push_back(alibi_len.error(kBad, outs, {"prefill_attention", "'alibi_slopes'", "[3]"}));
  return cases;
}

std::vector<HostTensor> prefill_ref(const OpCase& c) {
  const HostTensor& q = c.input(0);
  const HostTensor& k = c.input(1);
  const HostTensor& v = c.input(2);
  const HostTensor& cu = c.input(3);
  const int64_t T = q.shape[0], hq = q.shape[1], d = q.shape[2], hk = k.shape[1], dv = v.shape[2];
  const double scale = attention_scale(c, d);
  const bool causal = c.attr_bool("causal", true);
  const int64_t window = c.attr_int("sliding_window", 0);
  HostTensor out(q.dtype, {T, hq, dv});
  for (int64_t b = 0; b + 1 < cu.numel(); ++b) {
    const int64_t s0 = static_cast<int64_t>(cu.values[b]), n = static_cast<int64_t>(cu.values[b + 1]) - s0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kvh = h / (hq / hk);
        std::vector<double> s(static_cast<size_t>(n), -kInf);
        for (int64_t j = 0; j < n; ++j) {
          if ((causal && j > i) || (window > 0 && j <= i - window)) continue;
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += q.values[((s0 + i) * hq + h) * d + e] * k.values[((s0 + j) * hk + kvh) * d + e];
          s[j] = scale * dot + (c.has_input(4) ? c.input(4).values[h] * static_cast<double>(j - i) : 0.0);
        }
        attend(s, [&](int64_t j, int64_t e) { return v.values[((s0 + j) * hk + kvh) * dv + e]; }, dv,
               &out.values[((s0 + i) * hq + h) * dv]);
      }
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(prefill_attention, prefill_cases, prefill_ref);

// ---- moe_gating_topk_softmax --------------------------------------------------------------

OpCase gating(const std::string& name, HostTensor logits, int64_t k, bool renormalize) {
  return OpCase(name).in(std::move(logits)).attr(hal::Attr::i("top_k", k)).attr(hal::Attr::b("renormalize", renormalize));
}

std::vector<OpCase> gating_cases(hal_dtype_e dt) {
  // Ties: equal logits give equal probabilities in any precision; the lower
  // expert id comes first.
  HostTensor ties = ints(dt, {3, 6}, {1, 3, 3, 0, 3, -1,   //
                                      2, 2, 2, 2, 2, 2,    //
                                      -1, 0.5, -1, 0.5, 4, 4});
  std::vector<OpCase> cases = {
      gating("[5, 8], top 2", random(dt, {5, 8}, 1, -3, 3), 2, false),
      gating("[5, 8], top 2, renormalize", random(dt, {5, 8}, 2, -3, 3), 2, true),
      gating("top 1", random(dt, {4, 6}, 3, -3, 3), 1, false),
      gating("top 1, renormalize (weight 1)", random(dt, {4, 6}, 4, -3, 3), 1, true),
      gating("top_k = E", random(dt, {3, 4}, 5, -3, 3), 4, false),
      gating("64 experts, top 6, renormalize", random(dt, {3, 64}, 6, -3, 3), 6, true),
      gating("large logits (max-subtracted)", random(dt, {3, 8}, 7, 40, 80), 3, false),
      gating("ties: lower id first", ties, 3, false),
      gating("ties, renormalize", ties, 2, true),
      gating("no tokens", HostTensor(dt, {0, 8}), 2, false),
  };
  cases.push_back(gating("top_k larger than the expert count", random(dt, {3, 4}, 8), 5, false)
                      .error(kBad, {HostTensor(kF32, {3, 5}), HostTensor(kI64, {3, 5})},
                             {"moe_gating_topk_softmax", "'top_k'", "5"}));
  cases.push_back(gating("top_k 0", random(dt, {3, 4}, 9), 0, false)
                      .error(kBad, {HostTensor(kF32, {3, 1}), HostTensor(kI64, {3, 1})},
                             {"moe_gating_topk_softmax", "'top_k'", "0"}));
  cases.push_back(OpCase("missing top_k").in(random(dt, {3, 4}, 10))
                      .error(kBad, {HostTensor(kF32, {3, 1}), HostTensor(kI64, {3, 1})}, {"moe_gating_topk_softmax", "top_k"}));
  cases.push_back(gating("router_logits rank 1", random(dt, {4}, 11), 1, false)
                      .error(kBad, {HostTensor(kF32, {1}), HostTensor(kI64, {1})},
                             {"moe_gating_topk_softmax", "'router_logits'", "rank"}));
  return cases;
}

std::vector<HostTensor> gating_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  const int64_t T = x.shape[0], E = x.shape[1], k = c.attr_int("top_k", 1);
  const bool renormalize = c.attr_bool("renormalize", false);
  HostTensor w(kF32, {T, k}), ids(kI64, {T, k});
  for (int64_t t = 0; t < T; ++t) {
    const double* row = &x.values[t * E];
    double m = *std::max_element(row, row + E), z = 0;
    std::vector<double> p(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) z += p[e] = std::exp(row[e] - m);
    for (double& v : p) v /= z;
    std::vector<int64_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      w.values[t * k + j] = p[order[j]] / (renormalize ? sum : 1.0);
      ids.values[t * k + j] = static_cast<double>(order[j]);
    }
  }
  return {w, ids};
}
HAL_CONFORMANCE_SUITE(moe_gating_topk_softmax, gating_cases, gating_ref);

// ---- fused_moe ------------------------------------------------------------------------------

// Top-K distinct expert ids per token of E, [T, K].
HostTensor expert_ids(hal_dtype_e it, int64_t t, int64_t e, int64_t k, uint64_t seed) {
  HostTensor ids(it, {t, k});
  for (int64_t i = 0; i < t; ++i) {
    HostTensor p = permutation(kI64, e, seed + static_cast<uint64_t>(i));
    for (int64_t j = 0; j < k; ++j) ids.values[i * k + j] = p.values[j];
  }
  return ids;
}

// hidden [T, H], w13 [E, 2I, H], w2 [E, H, I], weights [T, K] (WDT), ids.
OpCase moe(const std::string& name, hal_dtype_e dt, int64_t t, int64_t h, int64_t inter, int64_t e, int64_t k,
           bool renormalize, uint64_t seed, hal_dtype_e wdt = kF32, hal_dtype_e it = kI64) {
  return OpCase(name).in(random(dt, {t, h}, seed, -1, 1)).in(random(dt, {e, 2 * inter, h}, seed + 1, -0.5, 0.5))
      .in(random(dt, {e, h, inter}, seed + 2, -0.5, 0.5)).in(random(wdt, {t, k}, seed + 3, 0.05, 1.0))
      .in(expert_ids(it, t, e, k, seed + 4)).attr(hal::Attr::b("renormalize", renormalize)).tol(4);
}

std::vector<OpCase> fused_moe_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      moe("top 2 of 4 experts", dt, 5, 8, 6, 4, 2, false, 1),
      moe("top 2, renormalize", dt, 5, 8, 6, 4, 2, true, 2),
      moe("top 1", dt, 4, 8, 4, 3, 1, false, 3),
      moe("top 1, renormalize", dt, 4, 8, 4, 3, 1, true, 4),
      moe("weights in the hidden dtype, int32 ids", dt, 3, 6, 5, 4, 2, false, 5, dt, kI32),
      moe("every token on one expert", dt, 6, 8, 4, 5, 1, false, 6),
      moe("larger: H 32, I 24, 8 experts, top 2", dt, 9, 32, 24, 8, 2, true, 7),
      moe("no tokens", dt, 0, 8, 4, 3, 2, false, 8),
  };
  OpCase same = cases[5];
  for (double& v : same.inputs[4]->values) v = 2;  // all tokens routed to expert 2
  cases[5] = same;
  std::vector<HostTensor> outs = {HostTensor(dt, {4, 8})};
  OpCase far = moe("topk_ids out of range", dt, 4, 8, 4, 3, 2, false, 9);
  far.inputs[4]->at({2, 1}) = 3;
  cases.push_back(far.error(kRange, outs, {"fused_moe", "'topk_ids'", "3"}));
  OpCase neg = moe("negative topk_id", dt, 4, 8, 4, 3, 2, false, 10, kF32, kI32);
  neg.inputs[4]->at({0, 0}) = -1;
  cases.push_back(neg.error(kRange, outs, {"fused_moe", "'topk_ids'", "-1"}));
  OpCase wide = moe("top_k larger than the expert count", dt, 4, 8, 4, 2, 2, false, 11);
  wide.inputs[3] = random(kF32, {4, 3}, 12, 0.1, 1);
  wide.inputs[4] = ints(kI64, {4, 3}, std::vector<double>(12, 0.0));
  cases.push_back(wide.error(kBad, outs, {"fused_moe", "'topk_weights'", "top_k = 3"}));
  OpCase down = moe("down_weights of the wrong shape", dt, 4, 8, 4, 3, 2, false, 13);
  down.inputs[2] = random(dt, {3, 8, 5}, 14);
  cases.push_back(down.error(kBad, outs, {"fused_moe", "'down_weights'", "[3, 8, 5]"}));
  OpCase ids_shape = moe("topk_ids shape differs from topk_weights", dt, 4, 8, 4, 3, 2, false, 15);
  ids_shape.inputs[4] = expert_ids(kI64, 4, 3, 1, 16);
  cases.push_back(ids_shape.error(kBad, outs, {"fused_moe", "'topk_ids'", "[4, 1]"}));
  return cases;
}

std::vector<HostTensor> fused_moe_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  const HostTensor& w13 = c.input(1);
  const HostTensor& w2 = c.input(2);
  const HostTensor& tw = c.input(3);
  const HostTensor& ids = c.input(4);
  const bool renormalize = c.attr_bool("renormalize", false);
  const int64_t T = x.shape[0], H = x.shape[1], I = w13.shape[1] / 2, K = tw.shape[1];
  HostTensor out(x.dtype, {T, H});
  std::vector<double> inter(static_cast<size_t>(I));
  for (int64_t t = 0; t < T; ++t) {
    double wsum = 0;
    for (int64_t j = 0; j < K; ++j) wsum += tw.values[t * K + j];
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = static_cast<int64_t>(ids.values[t * K + j]);
      const double w = tw.values[t * K + j] / (renormalize ? wsum : 1.0);
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t k = 0; k < H; ++k) {
          g += w13.values[(e * 2 * I + i) * H + k] * x.values[t * H + k];
          u += w13.values[(e * 2 * I + I + i) * H + k] * x.values[t * H + k];
        }
        inter[i] = round_to(x.dtype, silu(g) * u);  // the spec rounds the intermediate to the dtype
      }
      for (int64_t o = 0; o < H; ++o) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += w2.values[(e * H + o) * I + i] * inter[i];
        out.values[t * H + o] += w * y;
      }
    }
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(fused_moe, fused_moe_cases, fused_moe_ref);

// ---- dynamic_quant --------------------------------------------------------------------------

// The kernel may compute input / scale as input · (127 / amax), or divide in
// float32: the quotient can then land on the other side of a .5 boundary
// than the exact one. So q may differ from the reference by 1 where the
// exact quotient is within 1e-4 of a rounding tie, and must be equal
// everywhere else; scale is float32(amax / 127) within float32 rounding.
std::string dynamic_quant_check(const OpCase& c, const std::vector<HostTensor>& expected,
                                const std::vector<HostTensor>& actual, bool tie_slack) {
  const HostTensor& x = c.input(0);
  const HostTensor& scale_e = expected[1];
  for (size_t o = 0; o < 2; ++o)
    if (actual[o].values.size() != expected[o].values.size()) return "output " + std::to_string(o) + " has the wrong size";
  for (int64_t r = 0; r < scale_e.numel(); ++r) {
    double e = round_to(kF32, scale_e.values[r]), a = actual[1].values[r];
    if (!(std::fabs(a - e) <= 2e-7 * std::fabs(e)))
      return "scale of row " + std::to_string(r) + " is " + std::to_string(a) + ", expected " + std::to_string(e);
  }
  const int64_t K = x.shape.back();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double e = expected[0].values[i], a = actual[0].values[i];
    if (a == e) continue;
    const double s = round_to(kF32, scale_e.values[i / K]);
    const double quotient = s == 0 ? 0 : std::fabs(x.values[i] / s);
    const bool near_tie = tie_slack && std::fabs(quotient - std::floor(quotient) - 0.5) < 1e-4;
    if (!(near_tie && std::fabs(a - e) <= 1))
      return "out at flat index " + std::to_string(i) + " (input " + std::to_string(x.values[i]) + ") is " +
             std::to_string(a) + ", expected " + std::to_string(e) + (near_tie ? " (off by more than 1)" : " (not a tie)");
  }
  return "";
}

// TIE_SLACK false: the quotients are exact (scale 1), no slack at ties.
OpCase quant(const std::string& name, HostTensor x, bool tie_slack = true) {
  OpCase c(name);
  c.in(std::move(x)).custom_check = [tie_slack](const OpCase& oc, const std::vector<HostTensor>& e,
                                                const std::vector<HostTensor>& a) {
    return dynamic_quant_check(oc, e, a, tie_slack);
  };
  return c;
}

std::vector<OpCase> dynamic_quant_cases(hal_dtype_e dt) {
  HostTensor zero_row = random(dt, {3, 8}, 4);
  for (int64_t k = 0; k < 8; ++k) zero_row.values[8 + k] = 0;
  // amax 127 gives scale 1 exactly: the quotients are exact and the .5 ties
  // must round half to even (exact check, no tie slack needed).
  HostTensor halves = ints(dt, {1, 10}, {127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -126.5, 126.5});
  return {
      quant("[4, 16]", random(dt, {4, 16}, 1)),
      quant("rank 3 [2, 3, 8]", random(dt, {2, 3, 8}, 2, -50, 50)),
      quant("rank 1 [10]", random(dt, {10}, 3)),
      quant("an all-zero row", zero_row),
      quant("all zero", HostTensor(dt, {2, 5})),
      quant("exact ties round half to even", halves, false),
      quant("a weight [N, K] per output channel", random(dt, {6, 40}, 5, -0.2, 0.2)),
      quant("tiny values", random(dt, {2, 8}, 6, -1e-3, 1e-3)),
      quant("zero-size rows [0, 5]", HostTensor(dt, {0, 5})),
  };
}

std::vector<HostTensor> dynamic_quant_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  const int64_t K = x.shape.back();
  Shape ss = x.shape;
  ss.back() = 1;
  HostTensor q(kI8, x.shape), scale(kF32, ss);
  for (int64_t r = 0; r < scale.numel(); ++r) {
    double amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x.values[r * K + k]));
    const double s = round_to(kF32, amax / 127.0);
    scale.values[r] = s;
    for (int64_t k = 0; k < K; ++k)
      q.values[r * K + k] = s == 0 ? 0 : std::clamp(std::nearbyint(x.values[r * K + k] / s), -127.0, 127.0);
  }
  return {q, scale};
}
HAL_CONFORMANCE_SUITE(dynamic_quant, dynamic_quant_cases, dynamic_quant_ref);

// ---- linear_w8a16 -----------------------------------------------------------------------------

// input [lead..., K], weight [N, K] int8, scale SCALE_SHAPE in SDT, bias (absent).
OpCase w8a16(const std::string& name, hal_dtype_e dt, Shape lead, int64_t k, int64_t n, Shape scale_shape, hal_dtype_e sdt,
             uint64_t seed) {
  Shape xs = lead;
  xs.push_back(k);
  return OpCase(name).in(random(dt, xs, seed, -1, 1)).in(random(kI8, {n, k}, seed + 1, -127, 128))
      .in(random(sdt, scale_shape, seed + 2, 0.001, 0.02)).absent();
}

std::vector<OpCase> linear_w8a16_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      w8a16("[4, 32] x [8, 32], scale [N] float32", dt, {4}, 32, 8, {8}, kF32, 1),
      w8a16("scale [N, 1] float32", dt, {4}, 32, 8, {8, 1}, kF32, 2),
      w8a16("scale [N] in the input dtype", dt, {3}, 16, 5, {5}, dt, 3),
      w8a16("rank 3 input", dt, {2, 3}, 24, 7, {7, 1}, kF32, 4),
      w8a16("rank 1 input", dt, {}, 20, 6, {6}, kF32, 5),
      w8a16("long K 300", dt, {2}, 300, 4, {4}, kF32, 6).tol(2),
      w8a16("no rows", dt, {0}, 16, 4, {4}, kF32, 7),
  };
  OpCase bias = w8a16("bias", dt, {4}, 32, 8, {8}, kF32, 8);
  bias.inputs[3] = random(dt, {8}, 9);
  cases.push_back(bias);
  OpCase bias_n1 = w8a16("bias, scale [N, 1] in the input dtype", dt, {2, 2}, 16, 6, {6, 1}, dt, 10);
  bias_n1.inputs[3] = random(dt, {6}, 11);
  cases.push_back(bias_n1);
  OpCase k0 = w8a16("K 0: out = bias", dt, {3}, 0, 4, {4}, kF32, 12);
  k0.inputs[3] = random(dt, {4}, 13);
  cases.push_back(k0);
  std::vector<HostTensor> outs = {HostTensor(dt, {4, 8})};
  OpCase wk = w8a16("weight in_features differ", dt, {4}, 32, 8, {8}, kF32, 14);
  wk.inputs[1] = random(kI8, {8, 30}, 15, -127, 128);
  cases.push_back(wk.error(kBad, outs, {"linear_w8a16", "'weight'", "[8, 30]"}));
  OpCase sc = w8a16("scale of the wrong shape", dt, {4}, 32, 8, {8}, kF32, 16);
  sc.inputs[2] = random(kF32, {1, 8}, 17, 0.001, 0.02);
  cases.push_back(sc.error(kBad, outs, {"linear_w8a16", "'scale'", "[1, 8]"}));
  OpCase bias_dt = w8a16("bias dtype differs", dt, {4}, 32, 8, {8}, kF32, 18);
  bias_dt.inputs[3] = random(other_float(dt), {8}, 19);
  cases.push_back(bias_dt.error(kBad, outs, {"linear_w8a16", "'bias'", dtype_str(other_float(dt))}));
  OpCase bias_len = w8a16("bias of the wrong length", dt, {4}, 32, 8, {8}, kF32, 20);
  bias_len.inputs[3] = random(dt, {7}, 21);
  cases.push_back(bias_len.error(kBad, outs, {"linear_w8a16", "'bias'", "[7]"}));
  return cases;
}

std::vector<HostTensor> linear_w8a16_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  const HostTensor& w = c.input(1);
  const HostTensor& scale = c.input(2);
  const int64_t K = x.shape.back(), N = w.shape[0];
  Shape os = x.shape;
  os.back() = N;
  HostTensor out(x.dtype, os);
  for (int64_t r = 0; r < out.numel() / std::max<int64_t>(N, 1); ++r)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x.values[r * K + k] * w.values[n * K + k];
      out.values[r * N + n] = scale.values[n] * acc + (c.has_input(3) ? c.input(3).values[n] : 0.0);
    }
  return {out};
}
HAL_CONFORMANCE_SUITE(linear_w8a16, linear_w8a16_cases, linear_w8a16_ref);

}  // namespace
}  // namespace hal::conformance
