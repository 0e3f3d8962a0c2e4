// CPU "llm" kernels through the runtime's op API: every op against a plain
// float64 reference written here (paged caches with shuffled block ids and
// stale table entries, GQA ratios 1/4/8, partial blocks, several decode
// partitions, alibi, sliding windows), in-place aliasing, strided operands,
// and each data error (OUT_OF_RANGE naming the argument, outputs untouched).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "hal/sdk/kernel/half.hpp"
#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

namespace {

constexpr hal_dtype_e kF32 = HAL_DTYPE_FLOAT32, kF64 = HAL_DTYPE_FLOAT64, kF16 = HAL_DTYPE_FLOAT16,
                      kBF16 = HAL_DTYPE_BFLOAT16;
const hal_dtype_e kAllFloat[] = {kF32, kF64, kF16, kBF16};

std::vector<double> random_values(size_t n, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}
// V rounded to DT (what the kernel will read).
double round_to(hal_dtype_e dt, double v) {
  switch (dt) {
    case kF32: return static_cast<float>(v);
    case kF16: return float(hal::sdk::kernel::Half(static_cast<float>(v)));
    case kBF16: return float(hal::sdk::kernel::BFloat16(static_cast<float>(v)));
    default: return v;
  }
}
std::vector<double> rounded(hal_dtype_e dt, std::vector<double> v) {
  for (double& x : v) x = round_to(dt, x);
  return v;
}
// Relative-ish tolerance of DT for values of magnitude ~1.
double tol(hal_dtype_e dt) {
  switch (dt) {
    case kF32: return 2e-5;
    case kF16: return 4e-3;
    case kBF16: return 3e-2;
    default: return 1e-11;
  }
}

DeviceTensor make(OpTester& t, hal_dtype_e dt, std::vector<int64_t> shape, const std::vector<double>& v) {
  switch (dt) {
    case kF32: return t.tensor<float>(std::move(shape), std::vector<float>(v.begin(), v.end()), dt);
    case kF64: return t.tensor<double>(std::move(shape), v, dt);
    default: {
      std::vector<uint16_t> bits(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        bits[i] = dt == kF16 ? hal::sdk::kernel::Half(static_cast<float>(v[i])).bits
                             : hal::sdk::kernel::BFloat16(static_cast<float>(v[i])).bits;
      return t.tensor<uint16_t>(std::move(shape), bits, dt);
    }
  }
}
DeviceTensor make_index(OpTester& t, hal_dtype_e dt, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  if (dt == HAL_DTYPE_INT32)
    return t.tensor<int32_t>(std::move(shape), std::vector<int32_t>(v.begin(), v.end()), dt);
  return t.tensor<int64_t>(std::move(shape), v, dt);
}
std::vector<double> read(OpTester& t, const DeviceTensor& x) {
  const hal_dtype_e dt = x.view.dtype;
  std::vector<double> out;
  if (dt == kF32) {
    for (float f : t.read<float>(x)) out.push_back(f);
  } else if (dt == kF64) {
    out = t.read<double>(x);
  } else {
    for (uint16_t b : t.read<uint16_t>(x))
      out.push_back(dt == kF16 ? hal::sdk::kernel::Half::to_float(b) : hal::sdk::kernel::bits_float(uint32_t(b) << 16));
  }
  return out;
}
void check_close(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                 const char* what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tolerance * (1 + std::abs(want[i])), what, " at ", i, ": got ",
                  got[i], " want ", want[i]);
}

// ---- references ------------------------------------------------------------------------

// softmax(scale·q·kᵀ + bias)·v over the keys KEYS (indices into K/V rows of
// width D/DV); BIAS(j) per key; empty -> zeros.
std::vector<double> attend_ref(const double* q, const std::vector<const double*>& keys,
                               const std::vector<const double*>& values, const std::vector<double>& bias, int64_t d,
                               int64_t dv, double scale) {
  std::vector<double> out(static_cast<size_t>(dv), 0.0);
  if (keys.empty()) return out;
  std::vector<double> s(keys.size());
  double m = -INFINITY;
  for (size_t j = 0; j < keys.size(); ++j) {
    double acc = 0;
    for (int64_t e = 0; e < d; ++e) acc += q[e] * keys[j][e];
    s[j] = acc * scale + bias[j];
    m = std::max(m, s[j]);
  }
  double z = 0;
  for (double& x : s) z += (x = std::exp(x - m));
  for (size_t j = 0; j < keys.size(); ++j)
    for (int64_t e = 0; e < dv; ++e) out[e] += s[j] / z * values[j][e];
  return out;
}

// A paged cache case: per sequence, context length and a block table whose
// used entries are shuffled distinct block ids and whose unused entries hold
// stale ids (some out of range, which must not be read).
struct PagedCase {
  int64_t B, hq, hk, d, dv, bs, nb, mb;
  std::vector<int64_t> lens, tables;
  std::vector<double> kc, vc;  // [nb, bs, hk, d|dv]
  PagedCase(std::vector<int64_t> lens_, int64_t hq_, int64_t hk_, int64_t d_, int64_t dv_, int64_t bs_, unsigned seed)
      : B(static_cast<int64_t>(lens_.size())), hq(hq_), hk(hk_), d(d_), dv(dv_), bs(bs_), lens(std::move(lens_)) {
    mb = 1;
    int64_t used = 0;
    for (int64_t l : lens) {
      mb = std::max(mb, (l + bs - 1) / bs + 1);  // one spare entry per row at least
      used += (l + bs - 1) / bs;
    }
    nb = used + 3;  // holes: blocks nobody uses
    std::vector<int64_t> ids(static_cast<size_t>(nb));
    std::iota(ids.begin(), ids.end(), 0);
    std::mt19937 gen(seed);
    std::shuffle(ids.begin(), ids.end(), gen);
    tables.assign(static_cast<size_t>(B * mb), 0);
    size_t next = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < mb; ++i)
        tables[b * mb + i] = i < (lens[b] + bs - 1) / bs ? ids[next++] : (i % 2 ? -5 : nb + 7);  // stale
    kc = random_values(static_cast<size_t>(nb * bs * hk * d), seed + 1);
    vc = random_values(static_cast<size_t>(nb * bs * hk * dv), seed + 2);
  }
  const double* key(int64_t b, int64_t j, int64_t h) const {
    return kc.data() + ((tables[b * mb + j / bs] * bs + j % bs) * hk + h) * d;
  }
  const double* value(int64_t b, int64_t j, int64_t h) const {
    return vc.data() + ((tables[b * mb + j / bs] * bs + j % bs) * hk + h) * dv;
  }
  void round(hal_dtype_e dt) {
    kc = rounded(dt, kc);
    vc = rounded(dt, vc);
  }
};

// Reference of query row (sequence b, query head h) at POSITION attending to
// positions [lo, hi) of the sequence's context.
std::vector<double> paged_ref(const PagedCase& pc, const double* q, int64_t b, int64_t h, int64_t position, int64_t lo,
                              int64_t hi, double scale, const std::vector<double>& slopes) {
  std::vector<const double*> keys, values;
  std::vector<double> bias;
  const int64_t kvh = h / (pc.hq / pc.hk);
  for (int64_t j = lo; j < hi; ++j) {
    keys.push_back(pc.key(b, j, kvh));
    values.push_back(pc.value(b, j, kvh));
    bias.push_back(slopes.empty() ? 0.0 : slopes[h] * double(j - position));
  }
  return attend_ref(q, keys, values, bias, pc.d, pc.dv, scale);
}

}  // namespace

// ---- add_rms_norm / silu_and_mul ------------------------------------------------------------

TEST_CASE("add_rms_norm matches the unfused reference in every float dtype, in place too") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t R = 5, N = 37;
  for (hal_dtype_e dt : kAllFloat) {
    const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
    auto x = rounded(dt, random_values(R * N, 1)), r = rounded(dt, random_values(R * N, 2));
    auto w = rounded(dt, random_values(N, 3, 0.5, 1.5));
    const double eps = 1e-5;
    std::vector<double> want_out(R * N), want_res(R * N);
    for (int64_t i = 0; i < R; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < N; ++j) {
        double s = round_to(dt, x[i * N + j] + r[i * N + j]);
        want_res[i * N + j] = s;
        ss += s * s;
      }
      double rstd = 1 / std::sqrt(ss / N + eps);
      for (int64_t j = 0; j < N; ++j) want_out[i * N + j] = want_res[i * N + j] * rstd * w[j];
    }
    auto tx = make(t, dt, {R, N}, x), tr = make(t, dt, {R, N}, r), tw = make(t, dt, {N}, w);
    auto out = t.empty(dt, {R, N}), res = t.empty(dt, {R, N});
    t.run("add_rms_norm", {&tx.view, &tr.view, &tw.view}, {&out.view, &res.view}, {Attr::f("eps", eps)});
    check_close(read(t, out), want_out, tol(dt), "out");
    check_close(read(t, res), want_res, tol(dt), "residual_out");
    // vLLM's in-place form: out = input, residual_out = residual.
    t.run("add_rms_norm", {&tx.view, &tr.view, &tw.view}, {&tx.view, &tr.view}, {Attr::f("eps", eps)});
    check_close(read(t, tx), want_out, tol(dt), "out in place");
    check_close(read(t, tr), want_res, tol(dt), "residual_out in place");
  }
}

TEST_CASE("add_rms_norm: swapped aliases and strided operands") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t R = 3, N = 8;
  auto x = random_values(R * N, 4), r = random_values(R * N, 5), w = random_values(N, 6);
  auto tx = make(t, kF64, {R, N}, x), tr = make(t, kF64, {R, N}, r), tw = make(t, kF64, {N}, w);
  auto out = t.empty(kF64, {R, N}), res = t.empty(kF64, {R, N});
  t.run("add_rms_norm", {&tx.view, &tr.view, &tw.view}, {&out.view, &res.view});
  auto want_out = read(t, out), want_res = read(t, res);
  // out = residual and residual_out = input.
  t.run("add_rms_norm", {&tx.view, &tr.view, &tw.view}, {&tr.view, &tx.view});
  check_close(read(t, tr), want_out, 1e-12, "out aliasing residual");
  check_close(read(t, tx), want_res, 1e-12, "residual_out aliasing input");
  // Input stored transposed, out written with padded rows.
  std::vector<double> xt(R * N);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < N; ++j) xt[j * R + i] = x[i * N + j];
  auto txt = make(t, kF64, {N, R}, xt);
  hal::TensorView xv = txt.view;
  xv.shape = {R, N};
  xv.strides = {1, R};
  auto tr2 = make(t, kF64, {R, N}, r);
  auto padded = t.empty(kF64, {R, N + 3});
  hal::TensorView ov = padded.view;
  ov.shape = {R, N};
  ov.strides = {N + 3, 1};
  auto res2 = t.empty(kF64, {R, N});
  t.run("add_rms_norm", {&xv, &tr2.view, &tw.view}, {&ov, &res2.view});
  auto p = read(t, padded);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < N; ++j) CHECK(p[i * (N + 3) + j] == doctest::Approx(want_out[i * N + j]).epsilon(1e-12));
}

TEST_CASE("add_rms_norm: a large float32 call (streaming stores, unaligned rows) equals the in-place one") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t R = 2048, N = 4097;  // 32 MiB and more per output
  auto x = random_values(R * N, 90), r = random_values(R * N, 91), w = random_values(N, 92);
  auto tx = make(t, kF32, {R, N}, x), tr = make(t, kF32, {R, N}, r), tw = make(t, kF32, {N}, w);
  auto out = t.empty(kF32, {R, N}), res = t.empty(kF32, {R, N});
  t.run("add_rms_norm", {&tx.view, &tr.view, &tw.view}, {&out.view, &res.view});
  t.run("add_rms_norm", {&tx.view, &tr.view, &tw.view}, {&tx.view, &tr.view});
  CHECK(t.read<float>(out) == t.read<float>(tx));
  CHECK(t.read<float>(res) == t.read<float>(tr));
  // Spot rows against the reference.
  auto got = t.read<float>(out);
  for (int64_t i : {int64_t{0}, int64_t{1}, R / 2 + 1, R - 1}) {
    double ss = 0;
    for (int64_t j = 0; j < N; ++j) {
      double s = static_cast<float>(static_cast<float>(x[i * N + j]) + static_cast<float>(r[i * N + j]));
      ss += s * s;
    }
    double rstd = 1 / std::sqrt(ss / N + 1e-6);
    for (int64_t j = 0; j < N; j += 97) {
      double s = static_cast<float>(static_cast<float>(x[i * N + j]) + static_cast<float>(r[i * N + j]));
      CHECK(got[i * N + j] == doctest::Approx(s * rstd * static_cast<float>(w[j])).epsilon(1e-5));
    }
  }
}

TEST_CASE("silu_and_mul in every float dtype, with a strided input") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t R = 3, N = 21;
  for (hal_dtype_e dt : kAllFloat) {
    const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
    auto x = rounded(dt, random_values(R * 2 * N, 7, -6, 6));
    std::vector<double> want(R * N);
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double a = x[i * 2 * N + j], b = x[i * 2 * N + N + j];
        want[i * N + j] = a / (1 + std::exp(-a)) * b;
      }
    auto tx = make(t, dt, {R, 2 * N}, x);
    auto out = t.empty(dt, {R, N});
    t.run("silu_and_mul", {&tx.view}, {&out.view});
    check_close(read(t, out), want, 2 * tol(dt), "out");
  }
  // Rows of the input 2 apart (every other row of a [2R, 2N] tensor).
  auto x = random_values(2 * R * 2 * N, 8);
  auto tx = make(t, kF64, {2 * R, 2 * N}, x);
  hal::TensorView xv = tx.view;
  xv.shape = {R, 2 * N};
  xv.strides = {4 * N, 1};
  auto out = t.empty(kF64, {R, N});
  t.run("silu_and_mul", {&xv}, {&out.view});
  auto got = read(t, out);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double a = x[2 * i * 2 * N + j], b = x[2 * i * 2 * N + N + j];
      CHECK(got[i * N + j] == doctest::Approx(a / (1 + std::exp(-a)) * b).epsilon(1e-12));
    }
}

TEST_CASE("silu_and_mul: a large float32 call (streaming stores, unaligned rows) equals small calls row by row") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t R = 2048, N = 4099;  // 32 MiB and more of output
  auto x = random_values(R * 2 * N, 93, -6, 6);
  auto tx = make(t, kF32, {R, 2 * N}, x);
  auto out = t.empty(kF32, {R, N});
  t.run("silu_and_mul", {&tx.view}, {&out.view});
  const std::vector<float> got = t.read<float>(out);
  for (int64_t i : {int64_t{0}, int64_t{1}, R / 2 + 1, R - 1}) {
    CAPTURE(i);
    auto row = make(t, kF32, {1, 2 * N}, std::vector<double>(x.begin() + i * 2 * N, x.begin() + (i + 1) * 2 * N));
    auto small = t.empty(kF32, {1, N});
    t.run("silu_and_mul", {&row.view}, {&small.view});
    CHECK(t.read<float>(small) == std::vector<float>(got.begin() + i * N, got.begin() + (i + 1) * N));
  }
}

// ---- apply_rotary_pos_emb -----------------------------------------------------------------------

TEST_CASE("apply_rotary_pos_emb: neox and interleaved pairs, partial rotary dim, GQA heads, in place") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t T = 5, hq = 4, hk = 2, D = 10, half = 3, P = 9;
  std::vector<int64_t> pos = {0, 8, 3, 3, 5};
  for (hal_dtype_e dt : kAllFloat)
    for (bool inter : {false, true}) {
      const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
      CAPTURE(inter);
      auto q = rounded(dt, random_values(T * hq * D, 9)), k = rounded(dt, random_values(T * hk * D, 10));
      std::vector<double> cs(P * half), sn(P * half);
      for (int64_t p = 0; p < P; ++p)
        for (int64_t i = 0; i < half; ++i) {
          double th = p * std::pow(100.0, -double(i) / half);
          cs[p * half + i] = round_to(dt, std::cos(th));
          sn[p * half + i] = round_to(dt, std::sin(th));
        }
      auto rope = [&](std::vector<double> x, int64_t h) {
        for (int64_t tk = 0; tk < T; ++tk)
          for (int64_t hh = 0; hh < h; ++hh) {
            double* row = x.data() + (tk * h + hh) * D;
            for (int64_t i = 0; i < half; ++i) {
              int64_t ia = inter ? 2 * i : i, ib = inter ? 2 * i + 1 : i + half;
              double a = row[ia], b = row[ib], c = cs[pos[tk] * half + i], s = sn[pos[tk] * half + i];
              row[ia] = a * c - b * s;
              row[ib] = b * c + a * s;
            }
          }
        return x;
      };
      auto want_q = rope(q, hq), want_k = rope(k, hk);
      auto tq = make(t, dt, {T, hq, D}, q), tk = make(t, dt, {T, hk, D}, k);
      auto tc = make(t, dt, {P, half}, cs), ts = make(t, dt, {P, half}, sn);
      auto tp = make_index(t, HAL_DTYPE_INT32, {T}, pos);
      auto oq = t.empty(dt, {T, hq, D}), ok = t.empty(dt, {T, hk, D});
      std::vector<Attr> attrs = {Attr::b("interleaved", inter)};
      t.run("apply_rotary_pos_emb", {&tq.view, &tk.view, &tc.view, &ts.view, &tp.view}, {&oq.view, &ok.view}, attrs);
      check_close(read(t, oq), want_q, tol(dt), "query_out");
      check_close(read(t, ok), want_k, tol(dt), "key_out");
      t.run("apply_rotary_pos_emb", {&tq.view, &tk.view, &tc.view, &ts.view, &tp.view}, {&tq.view, &tk.view}, attrs);
      check_close(read(t, tq), want_q, tol(dt), "query in place");
      check_close(read(t, tk), want_k, tol(dt), "key in place");
    }
}

TEST_CASE("apply_rotary_pos_emb: batched leading dims and a strided query (a slice of a qkv tensor)") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t B = 2, S = 3, H = 2, D = 4, half = 2, P = 6;
  // qkv [B, S, 3H, D]; query = heads [0, H), key = heads [H, 2H).
  auto qkv = random_values(B * S * 3 * H * D, 11);
  auto cs = random_values(P * half, 12), sn = random_values(P * half, 13);
  std::vector<int64_t> pos = {0, 1, 2, 5, 4, 3};
  auto tqkv = make(t, kF64, {B, S, 3 * H, D}, qkv);
  hal::TensorView qv = tqkv.view, kv = tqkv.view;
  qv.shape = kv.shape = {B, S, H, D};
  qv.strides = kv.strides = {S * 3 * H * D, 3 * H * D, D, 1};
  kv.byte_offset = H * D * sizeof(double);
  auto tc = make(t, kF64, {P, half}, cs), ts = make(t, kF64, {P, half}, sn);
  auto tp = make_index(t, HAL_DTYPE_INT64, {B, S}, pos);
  // In place into the qkv tensor.
  t.run("apply_rotary_pos_emb", {&qv, &kv, &tc.view, &ts.view, &tp.view}, {&qv, &kv});
  auto got = read(t, tqkv);
  for (int64_t tok = 0; tok < B * S; ++tok)
    for (int64_t h = 0; h < 3 * H; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double* x = qkv.data() + (tok * 3 * H + h) * D;
        const double* g = got.data() + (tok * 3 * H + h) * D;
        if (h >= 2 * H) {  // value heads untouched
          CHECK(g[i] == x[i]);
          continue;
        }
        double c = cs[pos[tok] * half + i], s = sn[pos[tok] * half + i];
        CHECK(g[i] == doctest::Approx(x[i] * c - x[i + half] * s).epsilon(1e-12));
        CHECK(g[i + half] == doctest::Approx(x[i + half] * c + x[i] * s).epsilon(1e-12));
      }
}

// ---- fill_kv_cache ----------------------------------------------------------------------------------

TEST_CASE("fill_kv_cache: copy then scatter, in place, padding slots, the later token wins") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t T = 5, hk = 2, D = 3, Dv = 4, nb = 3, bs = 4;
  std::vector<int64_t> slots = {7, -1, 0, 11, 7};  // token 4 overwrites token 0's slot
  for (hal_dtype_e dt : kAllFloat) {
    const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
    auto k = rounded(dt, random_values(T * hk * D, 14)), v = rounded(dt, random_values(T * hk * Dv, 15));
    auto kc = rounded(dt, random_values(nb * bs * hk * D, 16)), vc = rounded(dt, random_values(nb * bs * hk * Dv, 17));
    auto want_k = kc, want_v = vc;
    for (int64_t tok = 0; tok < T; ++tok) {
      if (slots[tok] < 0) continue;
      std::copy(k.begin() + tok * hk * D, k.begin() + (tok + 1) * hk * D, want_k.begin() + slots[tok] * hk * D);
      std::copy(v.begin() + tok * hk * Dv, v.begin() + (tok + 1) * hk * Dv, want_v.begin() + slots[tok] * hk * Dv);
    }
    auto tk = make(t, dt, {T, hk, D}, k), tv = make(t, dt, {T, hk, Dv}, v);
    auto tkc = make(t, dt, {nb, bs, hk, D}, kc), tvc = make(t, dt, {nb, bs, hk, Dv}, vc);
    auto ts = make_index(t, HAL_DTYPE_INT64, {T}, slots);
    auto okc = t.empty(dt, {nb, bs, hk, D}), ovc = t.empty(dt, {nb, bs, hk, Dv});
    t.run("fill_kv_cache", {&tk.view, &tv.view, &tkc.view, &tvc.view, &ts.view}, {&okc.view, &ovc.view});
    CHECK(read(t, okc) == want_k);
    CHECK(read(t, ovc) == want_v);
    CHECK(read(t, tkc) == kc);  // the inputs stay as they were
    t.run("fill_kv_cache", {&tk.view, &tv.view, &tkc.view, &tvc.view, &ts.view}, {&tkc.view, &tvc.view});
    CHECK(read(t, tkc) == want_k);
    CHECK(read(t, tvc) == want_v);
  }
}

TEST_CASE("fill_kv_cache: caches as views of one [num_blocks, 2, block_size, Hk, D] tensor, strided key") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t T = 3, hk = 2, D = 2, nb = 2, bs = 2;
  std::vector<int64_t> slots = {3, 0, 2};
  auto kv = random_values(nb * 2 * bs * hk * D, 18);
  auto tkv = make(t, kF64, {nb, 2, bs, hk, D}, kv);
  hal::TensorView kcv = tkv.view, vcv = tkv.view;
  kcv.shape = vcv.shape = {nb, bs, hk, D};
  kcv.strides = vcv.strides = {2 * bs * hk * D, hk * D, D, 1};
  vcv.byte_offset = bs * hk * D * sizeof(double);
  // key [T, hk, D] as a transposed [T, D, hk] buffer.
  auto kt = random_values(T * D * hk, 19), v = random_values(T * hk * D, 20);
  auto tkt = make(t, kF64, {T, D, hk}, kt);
  hal::TensorView kview = tkt.view;
  kview.shape = {T, hk, D};
  kview.strides = {D * hk, 1, hk};
  auto tv = make(t, kF64, {T, hk, D}, v);
  auto ts = make_index(t, HAL_DTYPE_INT32, {T}, slots);
  t.run("fill_kv_cache", {&kview, &tv.view, &kcv, &vcv, &ts.view}, {&kcv, &vcv});
  auto want = kv;
  for (int64_t tok = 0; tok < T; ++tok) {
    int64_t blk = slots[tok] / bs, row = slots[tok] % bs;
    for (int64_t h = 0; h < hk; ++h)
      for (int64_t e = 0; e < D; ++e) {
        want[(((blk * 2 + 0) * bs + row) * hk + h) * D + e] = kt[(tok * D + e) * hk + h];
        want[(((blk * 2 + 1) * bs + row) * hk + h) * D + e] = v[(tok * hk + h) * D + e];
      }
  }
  CHECK(read(t, tkv) == want);
}

// ---- paged attention --------------------------------------------------------------------------------

namespace {

// Runs paged_decode_attention on PC in DT and checks it against the reference.
void check_decode(OpTester& t, PagedCase pc, hal_dtype_e dt, hal_dtype_e idx, double scale, int64_t window,
                  bool alibi, unsigned seed) {
  pc.round(dt);
  auto q = rounded(dt, random_values(pc.B * pc.hq * pc.d, seed));
  std::vector<double> slopes;
  if (alibi)
    for (int64_t h = 0; h < pc.hq; ++h) slopes.push_back(static_cast<float>(-0.05 * (h + 1)));
  const double sc = scale != 0 ? scale : 1 / std::sqrt(double(pc.d));
  std::vector<double> want;
  for (int64_t b = 0; b < pc.B; ++b)
    for (int64_t h = 0; h < pc.hq; ++h) {
      int64_t len = pc.lens[b], lo = window > 0 ? std::max<int64_t>(0, len - window) : 0;
      auto o = paged_ref(pc, q.data() + (b * pc.hq + h) * pc.d, b, h, len - 1, lo, len, sc, slopes);
      want.insert(want.end(), o.begin(), o.end());
    }
  auto tq = make(t, dt, {pc.B, pc.hq, pc.d}, q);
  auto tkc = make(t, dt, {pc.nb, pc.bs, pc.hk, pc.d}, pc.kc), tvc = make(t, dt, {pc.nb, pc.bs, pc.hk, pc.dv}, pc.vc);
  auto tbt = make_index(t, idx, {pc.B, pc.mb}, pc.tables), tl = make_index(t, idx, {pc.B}, pc.lens);
  auto ta = t.tensor<float>({pc.hq}, std::vector<float>(slopes.begin(), slopes.end()), kF32);
  auto out = t.empty(dt, {pc.B, pc.hq, pc.dv});
  std::vector<const hal::TensorView*> in = {&tq.view, &tkc.view, &tvc.view, &tbt.view, &tl.view};
  if (alibi) in.push_back(&ta.view);
  t.run("paged_decode_attention", in, {&out.view}, {Attr::f("scale", scale), Attr::i("sliding_window", window)});
  check_close(read(t, out), want, 2 * tol(dt), "out");
}

}  // namespace

TEST_CASE("paged_decode_attention: shuffled blocks, stale table entries, GQA 1/4/8, partial blocks") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  for (int64_t ratio : {1, 4, 8}) {
    CAPTURE(ratio);
    PagedCase pc({5, 16, 1, 23}, 2 * ratio, 2, 16, 12, 4, 100 + static_cast<unsigned>(ratio));
    for (hal_dtype_e dt : kAllFloat) {
      const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
      check_decode(t, pc, dt, HAL_DTYPE_INT32, 0.0, 0, false, 1);
    }
  }
}

TEST_CASE("paged_decode_attention: long contexts over several partitions, an empty sequence, alibi, window") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  PagedCase pc({700, 0, 257, 1030}, 8, 2, 32, 32, 16, 7);
  for (hal_dtype_e dt : {kF32, kF64, kBF16}) {
    const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
    check_decode(t, pc, dt, HAL_DTYPE_INT64, 0.0, 0, false, 2);
    check_decode(t, pc, dt, HAL_DTYPE_INT64, 0.3, 0, true, 3);
    check_decode(t, pc, dt, HAL_DTYPE_INT64, 0.0, 300, false, 4);
    check_decode(t, pc, dt, HAL_DTYPE_INT64, 0.0, 5, true, 5);
  }
  PagedCase big_block({40, 3}, 4, 1, 8, 8, 64, 8);  // one block larger than every context
  check_decode(t, big_block, kF64, HAL_DTYPE_INT32, 0.0, 0, false, 6);
}

TEST_CASE("paged_decode_attention reads caches with padded rows (a strided view)") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  PagedCase pc({9, 4}, 4, 2, 8, 8, 4, 21);
  // Cache rows padded from hk·d = 16 to 20 elements.
  const int64_t pad = pc.hk * pc.d + 4;
  std::vector<double> kpad(pc.nb * pc.bs * pad, 99.0), vpad(pc.nb * pc.bs * pad, 99.0);
  for (int64_t r = 0; r < pc.nb * pc.bs; ++r)
    for (int64_t i = 0; i < pc.hk * pc.d; ++i) {
      kpad[r * pad + i] = pc.kc[r * pc.hk * pc.d + i];
      vpad[r * pad + i] = pc.vc[r * pc.hk * pc.d + i];
    }
  auto q = random_values(pc.B * pc.hq * pc.d, 22);
  auto tq = make(t, kF64, {pc.B, pc.hq, pc.d}, q);
  auto tk = make(t, kF64, {pc.nb * pc.bs * pad}, kpad), tv = make(t, kF64, {pc.nb * pc.bs * pad}, vpad);
  hal::TensorView kv = tk.view, vv = tv.view;
  kv.shape = vv.shape = {pc.nb, pc.bs, pc.hk, pc.d};
  kv.strides = vv.strides = {pc.bs * pad, pad, pc.d, 1};
  auto tbt = make_index(t, HAL_DTYPE_INT32, {pc.B, pc.mb}, pc.tables), tl = make_index(t, HAL_DTYPE_INT32, {pc.B}, pc.lens);
  auto out = t.empty(kF64, {pc.B, pc.hq, pc.d});
  t.run("paged_decode_attention", {&tq.view, &kv, &vv, &tbt.view, &tl.view}, {&out.view});
  std::vector<double> want;
  for (int64_t b = 0; b < pc.B; ++b)
    for (int64_t h = 0; h < pc.hq; ++h) {
      auto o = paged_ref(pc, q.data() + (b * pc.hq + h) * pc.d, b, h, pc.lens[b] - 1, 0, pc.lens[b],
                         1 / std::sqrt(double(pc.d)), {});
      want.insert(want.end(), o.begin(), o.end());
    }
  check_close(read(t, out), want, 1e-11, "out");
}

TEST_CASE("paged_prefill_attention: chunked prefill over a cached prefix, causal or not, alibi, window") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  for (int64_t ratio : {1, 4}) {
    PagedCase pc({9, 5, 20, 3}, 2 * ratio, 2, 8, 6, 4, 30 + static_cast<unsigned>(ratio));
    std::vector<int64_t> qlens = {3, 5, 7, 0};  // sequence 1 is all new, 3 has no new token
    std::vector<int64_t> qsl = {0};
    for (int64_t l : qlens) qsl.push_back(qsl.back() + l);
    const int64_t T = qsl.back();
    for (hal_dtype_e dt : kAllFloat)
      for (int variant = 0; variant < 4; ++variant) {
        CAPTURE(ratio);
        const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
        CAPTURE(variant);
        PagedCase c = pc;
        c.round(dt);
        const bool causal = variant != 1, alibi = variant == 2;
        const int64_t window = variant == 3 ? 4 : 0;
        auto q = rounded(dt, random_values(T * c.hq * c.d, 40 + variant));
        std::vector<double> slopes;
        if (alibi)
          for (int64_t h = 0; h < c.hq; ++h) slopes.push_back(static_cast<float>(-0.1 * (h + 1)));
        std::vector<double> want;
        for (int64_t b = 0; b < c.B; ++b)
          for (int64_t i = 0; i < qlens[b]; ++i)
            for (int64_t h = 0; h < c.hq; ++h) {
              int64_t p = c.lens[b] - qlens[b] + i;
              int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0, hi = causal ? p + 1 : c.lens[b];
              auto o = paged_ref(c, q.data() + ((qsl[b] + i) * c.hq + h) * c.d, b, h, p, lo, hi,
                                 1 / std::sqrt(double(c.d)), slopes);
              want.insert(want.end(), o.begin(), o.end());
            }
        auto tq = make(t, dt, {T, c.hq, c.d}, q);
        auto tkc = make(t, dt, {c.nb, c.bs, c.hk, c.d}, c.kc), tvc = make(t, dt, {c.nb, c.bs, c.hk, c.dv}, c.vc);
        auto tbt = make_index(t, HAL_DTYPE_INT32, {c.B, c.mb}, c.tables);
        auto tqs = make_index(t, HAL_DTYPE_INT32, {c.B + 1}, qsl), tl = make_index(t, HAL_DTYPE_INT32, {c.B}, c.lens);
        auto ta = t.tensor<float>({c.hq}, std::vector<float>(slopes.begin(), slopes.end()), kF32);
        auto out = t.empty(dt, {T, c.hq, c.dv});
        std::vector<const hal::TensorView*> in = {&tq.view, &tkc.view, &tvc.view, &tbt.view, &tqs.view, &tl.view};
        if (alibi) in.push_back(&ta.view);
        t.run("paged_prefill_attention", in, {&out.view},
              {Attr::b("causal", causal), Attr::i("sliding_window", window)});
        check_close(read(t, out), want, 2 * tol(dt), "out");
      }
  }
}

TEST_CASE("prefill_attention: varlen packed sequences, GQA, causal or not, alibi, window") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  std::vector<int64_t> cu = {0, 4, 4, 21, 22};
  const int64_t T = cu.back(), d = 8, dv = 5;
  for (int64_t ratio : {1, 4, 8})
    for (hal_dtype_e dt : kAllFloat)
      for (int variant = 0; variant < 4; ++variant) {
        CAPTURE(ratio);
        const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
        CAPTURE(variant);
        const int64_t hk = 2, hq = hk * ratio;
        const bool causal = variant != 1, alibi = variant == 2;
        const int64_t window = variant == 3 ? 3 : 0;
        auto q = rounded(dt, random_values(T * hq * d, 50)), k = rounded(dt, random_values(T * hk * d, 51));
        auto v = rounded(dt, random_values(T * hk * dv, 52));
        std::vector<double> slopes;
        if (alibi)
          for (int64_t h = 0; h < hq; ++h) slopes.push_back(static_cast<float>(-0.2 * (h + 1)));
        std::vector<double> want;
        for (size_t b = 0; b + 1 < cu.size(); ++b)
          for (int64_t i = 0; i < cu[b + 1] - cu[b]; ++i)
            for (int64_t h = 0; h < hq; ++h) {
              std::vector<const double*> keys, values;
              std::vector<double> bias;
              int64_t lo = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0, hi = causal ? i + 1 : cu[b + 1] - cu[b];
              for (int64_t j = lo; j < hi; ++j) {
                keys.push_back(k.data() + ((cu[b] + j) * hk + h / ratio) * d);
                values.push_back(v.data() + ((cu[b] + j) * hk + h / ratio) * dv);
                bias.push_back(alibi ? slopes[h] * double(j - i) : 0.0);
              }
              auto o = attend_ref(q.data() + ((cu[b] + i) * hq + h) * d, keys, values, bias, d, dv, 0.5);
              want.insert(want.end(), o.begin(), o.end());
            }
        auto tq = make(t, dt, {T, hq, d}, q), tk = make(t, dt, {T, hk, d}, k), tv = make(t, dt, {T, hk, dv}, v);
        auto tcu = make_index(t, HAL_DTYPE_INT64, {static_cast<int64_t>(cu.size())}, cu);
        auto ta = t.tensor<float>({hq}, std::vector<float>(slopes.begin(), slopes.end()), kF32);
        auto out = t.empty(dt, {T, hq, dv});
        std::vector<const hal::TensorView*> in = {&tq.view, &tk.view, &tv.view, &tcu.view};
        if (alibi) in.push_back(&ta.view);
        t.run("prefill_attention", in, {&out.view},
              {Attr::f("scale", 0.5), Attr::b("causal", causal), Attr::i("sliding_window", window)});
        check_close(read(t, out), want, 2 * tol(dt), "out");
      }
}

// ---- MoE ----------------------------------------------------------------------------------------------

TEST_CASE("moe_gating_topk_softmax: top-k in order, ties to the lower expert id, renormalised") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t T = 4, E = 6, k = 3;
  std::vector<double> logits = {0.1, 2.0, -1.0, 2.0, 0.5, 0.3,   // tie between experts 1 and 3
                                1.0, 1.0, 1.0, 1.0, 1.0, 1.0,    // all equal: ids 0, 1, 2
                                -3.0, 0.0, 4.0, 1.0, 2.0, -1.0,  //
                                0.0, 0.0, 0.0, 5.0, 0.0, 0.0};
  for (hal_dtype_e dt : kAllFloat)
    for (bool renorm : {false, true}) {
      const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
      CAPTURE(renorm);
      std::vector<double> want_w;
      std::vector<int64_t> want_id;
      const auto xr = rounded(dt, logits);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> p(E);
        double z = 0;
        for (int64_t e = 0; e < E; ++e) z += (p[e] = std::exp(xr[i * E + e]));
        for (double& x : p) x /= z;
        std::vector<int64_t> id(E);
        std::iota(id.begin(), id.end(), 0);
        std::stable_sort(id.begin(), id.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
        double s = 0;
        for (int64_t j = 0; j < k; ++j) s += p[id[j]];
        for (int64_t j = 0; j < k; ++j) {
          want_id.push_back(id[j]);
          want_w.push_back(renorm ? p[id[j]] / s : p[id[j]]);
        }
      }
      auto tx = make(t, dt, {T, E}, logits);
      auto w = t.empty(kF32, {T, k});
      auto ids = t.empty(HAL_DTYPE_INT64, {T, k});
      t.run("moe_gating_topk_softmax", {&tx.view}, {&w.view, &ids.view},
            {Attr::i("top_k", k), Attr::b("renormalize", renorm)});
      CHECK(t.read<int64_t>(ids) == want_id);
      check_close(read(t, w), want_w, 1e-6, "topk_weights");
    }
}

namespace {
std::vector<double> fused_moe_ref(hal_dtype_e dt, const std::vector<double>& x, const std::vector<double>& w13,
                                  const std::vector<double>& w2, const std::vector<double>& tw,
                                  const std::vector<int64_t>& ids, int64_t T, int64_t H, int64_t I, int64_t k,
                                  bool renorm) {
  std::vector<double> out(T * H, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    double s = 0;
    for (int64_t j = 0; j < k; ++j) s += tw[t * k + j];
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = ids[t * k + j];
      double wj = renorm ? tw[t * k + j] / s : tw[t * k + j];
      std::vector<double> act(I);
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t h = 0; h < H; ++h) {
          g += w13[(e * 2 * I + i) * H + h] * x[t * H + h];
          u += w13[(e * 2 * I + I + i) * H + h] * x[t * H + h];
        }
        g = round_to(dt, g);
        u = round_to(dt, u);
        act[i] = round_to(dt, g / (1 + std::exp(-g)) * u);
      }
      for (int64_t h = 0; h < H; ++h) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += w2[(e * H + h) * I + i] * act[i];
        out[t * H + h] += wj * round_to(dt, y);
      }
    }
  }
  return out;
}
}  // namespace

TEST_CASE("fused_moe against the unfused expert chain, tokens grouped by expert, every dtype") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t T = 7, H = 12, I = 10, E = 5, k = 2;
  std::vector<int64_t> ids = {0, 3, 3, 1, 4, 0, 3, 2, 1, 0, 0, 4, 3, 1};  // expert 2 once, all used
  for (hal_dtype_e dt : kAllFloat)
    for (bool renorm : {false, true}) {
      const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
      CAPTURE(renorm);
      auto x = rounded(dt, random_values(T * H, 60)), w13 = rounded(dt, random_values(E * 2 * I * H, 61, -0.5, 0.5));
      auto w2 = rounded(dt, random_values(E * H * I, 62, -0.5, 0.5));
      auto tw = rounded(kF32, random_values(T * k, 63, 0.1, 1.0));
      auto want = fused_moe_ref(dt, x, w13, w2, tw, ids, T, H, I, k, renorm);
      auto tx = make(t, dt, {T, H}, x), t13 = make(t, dt, {E, 2 * I, H}, w13), t2 = make(t, dt, {E, H, I}, w2);
      auto ttw = make(t, kF32, {T, k}, tw);
      auto tid = make_index(t, HAL_DTYPE_INT32, {T, k}, ids);
      auto out = t.empty(dt, {T, H});
      t.run("fused_moe", {&tx.view, &t13.view, &t2.view, &ttw.view, &tid.view}, {&out.view},
            {Attr::b("renormalize", renorm)});
      check_close(read(t, out), want, dt == kBF16 ? 5e-2 : dt == kF16 ? 1e-2 : tol(dt) * 10, "out");
    }
}

// ---- quantisation ----------------------------------------------------------------------------------------

TEST_CASE("dynamic_quant: per-row scale, round half to even, zero rows") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t R = 4, K = 9;
  auto x = random_values(R * K, 70, -3, 3);
  for (int64_t i = 0; i < K; ++i) x[2 * K + i] = 0;  // row 2 all zero
  // Row 3: amax 127 -> scale 1; ±2.5 and 0.5 round to even.
  for (int64_t i = 0; i < K; ++i) x[3 * K + i] = 0;
  x[3 * K] = 127;
  x[3 * K + 1] = 2.5;
  x[3 * K + 2] = -2.5;
  x[3 * K + 3] = 0.5;
  x[3 * K + 4] = 1.5;
  for (hal_dtype_e dt : kAllFloat) {
    const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
    auto xr = rounded(dt, x);
    auto tx = make(t, dt, {2, 2, K}, xr);
    auto q = t.empty(HAL_DTYPE_INT8, {2, 2, K}), s = t.empty(kF32, {2, 2, 1});
    t.run("dynamic_quant", {&tx.view}, {&q.view, &s.view});
    auto gq = t.read<int8_t>(q);
    auto gs = t.read<float>(s);
    for (int64_t r = 0; r < R; ++r) {
      double amax = 0;
      for (int64_t i = 0; i < K; ++i) amax = std::max(amax, std::abs(xr[r * K + i]));
      float scale = static_cast<float>(amax) / 127.0f;
      CHECK(gs[r] == doctest::Approx(scale).epsilon(1e-7));
      for (int64_t i = 0; i < K; ++i) {
        double want = scale == 0 ? 0 : std::clamp(std::nearbyint(xr[r * K + i] / scale), -127.0, 127.0);
        CHECK_MESSAGE(std::abs(gq[r * K + i] - want) <= (r == 3 ? 0 : 1), "row ", r, " col ", i);
      }
    }
    CHECK(gq[3 * K + 1] == 2);
    CHECK(gq[3 * K + 2] == -2);
    CHECK(gq[3 * K + 3] == 0);
    CHECK(gq[3 * K + 4] == 2);
  }
}

TEST_CASE("linear_w8a16: decode (few rows) and prefill (many rows) paths, bias, scale [N] or [N, 1]") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t K = 40, N = 70;
  std::mt19937 gen(80);
  std::uniform_int_distribution<int> wd(-127, 127);
  std::vector<int8_t> w(N * K);
  for (int8_t& v : w) v = static_cast<int8_t>(wd(gen));
  auto scale = random_values(N, 81, 0.001, 0.02), bias = random_values(N, 82);
  for (int64_t M : {1, 3, 8, 9, 33})
    for (hal_dtype_e dt : kAllFloat)
      for (bool with_bias : {false, true}) {
        CAPTURE(M);
        const std::string dtype = hal::sdk::dtype_name(dt);
      CAPTURE(dtype);
        auto x = rounded(dt, random_values(M * K, 83));
        auto sc = rounded(kF32, scale), bi = rounded(dt, bias);
        std::vector<double> want(M * N);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double s = 0;
            for (int64_t i = 0; i < K; ++i) s += x[m * K + i] * w[n * K + i];
            want[m * N + n] = sc[n] * s + (with_bias ? bi[n] : 0);
          }
        auto tx = make(t, dt, {M, K}, x);
        auto tw = t.tensor<int8_t>({N, K}, w, HAL_DTYPE_INT8);
        auto ts = make(t, kF32, with_bias ? std::vector<int64_t>{N} : std::vector<int64_t>{N, 1}, sc);
        auto tb = make(t, dt, {N}, bi);
        auto out = t.empty(dt, {M, N});
        std::vector<const hal::TensorView*> in = {&tx.view, &tw.view, &ts.view};
        if (with_bias) in.push_back(&tb.view);
        t.run("linear_w8a16", in, {&out.view});
        check_close(read(t, out), want, tol(dt) * 5, "out");
      }
}

// ---- data errors --------------------------------------------------------------------------------------------

TEST_CASE("llm data errors are OUT_OF_RANGE naming the argument and value, with nothing written") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const auto oor = HAL_STATUS_OUT_OF_RANGE;
  SUBCASE("fill_kv_cache slot_mapping, in place and not") {
    auto k = make(t, kF32, {3, 1, 2}, random_values(6, 1)), v = make(t, kF32, {3, 1, 2}, random_values(6, 2));
    auto kc = make(t, kF32, {2, 2, 1, 2}, random_values(8, 3)), vc = make(t, kF32, {2, 2, 1, 2}, random_values(8, 4));
    auto okc = make(t, kF32, {2, 2, 1, 2}, std::vector<double>(8, 5.0));
    auto ovc = make(t, kF32, {2, 2, 1, 2}, std::vector<double>(8, 6.0));
    for (int64_t bad : {4, -2}) {
      auto s = make_index(t, HAL_DTYPE_INT64, {3}, {0, bad, 1});
      t.expect_refused("fill_kv_cache", {&k.view, &v.view, &kc.view, &vc.view, &s.view}, {&kc.view, &vc.view}, {},
                       {"'slot_mapping'", std::to_string(bad), "position 1"}, oor, {&kc, &vc});
      t.expect_refused("fill_kv_cache", {&k.view, &v.view, &kc.view, &vc.view, &s.view}, {&okc.view, &ovc.view}, {},
                       {"'slot_mapping'", std::to_string(bad)}, oor, {&okc, &ovc});
    }
  }
  SUBCASE("apply_rotary_pos_emb position_ids") {
    auto q = make(t, kF32, {2, 1, 4}, random_values(8, 5)), k = make(t, kF32, {2, 1, 4}, random_values(8, 6));
    auto cs = make(t, kF32, {3, 2}, random_values(6, 7));
    for (int64_t bad : {3, -1}) {
      auto p = make_index(t, HAL_DTYPE_INT32, {2}, {0, bad});
      t.expect_refused("apply_rotary_pos_emb", {&q.view, &k.view, &cs.view, &cs.view, &p.view}, {&q.view, &k.view}, {},
                       {"'position_ids'", std::to_string(bad), "position 1"}, oor, {&q, &k});
    }
  }
  SUBCASE("paged attention: context_lens, block_tables, query_start_loc") {
    auto q = make(t, kF32, {2, 2, 4}, random_values(16, 8));
    auto kc = make(t, kF32, {3, 2, 1, 4}, random_values(24, 9)), vc = make(t, kF32, {3, 2, 1, 4}, random_values(24, 10));
    auto out = make(t, kF32, {2, 2, 4}, std::vector<double>(16, 7.0));
    // max_blocks 2 x block_size 2: lengths up to 4.
    auto bt = make_index(t, HAL_DTYPE_INT32, {2, 2}, {0, 1, 2, -1});  // -1 unused while len <= 2
    auto lens_bad = make_index(t, HAL_DTYPE_INT32, {2}, {5, 1});
    t.expect_refused("paged_decode_attention", {&q.view, &kc.view, &vc.view, &bt.view, &lens_bad.view}, {&out.view}, {},
                     {"'context_lens'", "5", "position 0"}, oor, {&out});
    auto lens_neg = make_index(t, HAL_DTYPE_INT32, {2}, {1, -1});
    t.expect_refused("paged_decode_attention", {&q.view, &kc.view, &vc.view, &bt.view, &lens_neg.view}, {&out.view}, {},
                     {"'context_lens'", "-1"}, oor, {&out});
    auto lens_ok = make_index(t, HAL_DTYPE_INT32, {2}, {4, 2});
    t.run("paged_decode_attention", {&q.view, &kc.view, &vc.view, &bt.view, &lens_ok.view}, {&out.view});
    auto lens_reach = make_index(t, HAL_DTYPE_INT32, {2}, {4, 3});  // covers the -1 entry
    t.expect_refused("paged_decode_attention", {&q.view, &kc.view, &vc.view, &bt.view, &lens_reach.view}, {&out.view},
                     {}, {"'block_tables'", "-1", "[1, 1]"}, oor);
    auto bt_big = make_index(t, HAL_DTYPE_INT32, {2, 2}, {0, 3, 2, 1});
    auto out2 = make(t, kF32, {2, 2, 4}, std::vector<double>(16, 7.0));
    t.expect_refused("paged_decode_attention", {&q.view, &kc.view, &vc.view, &bt_big.view, &lens_ok.view},
                     {&out2.view}, {}, {"'block_tables'", "3", "[0, 1]"}, oor, {&out2});
    // Prefill: T = 3 new tokens.
    auto pq = make(t, kF32, {3, 2, 4}, random_values(24, 11));
    auto pout = make(t, kF32, {3, 2, 4}, std::vector<double>(24, 7.0));
    auto lens_p = make_index(t, HAL_DTYPE_INT32, {2}, {4, 2});
    for (auto qs : std::vector<std::vector<int64_t>>{{1, 2, 3}, {0, 2, 1}, {0, 1, 4}}) {
      auto tqs = make_index(t, HAL_DTYPE_INT64, {3}, qs);
      t.expect_refused("paged_prefill_attention", {&pq.view, &kc.view, &vc.view, &bt.view, &tqs.view, &lens_p.view},
                       {&pout.view}, {}, {"'query_start_loc'"}, oor, {&pout});
    }
    auto long_q = make_index(t, HAL_DTYPE_INT64, {3}, {0, 0, 3});  // 3 new tokens, context 2
    t.expect_refused("paged_prefill_attention", {&pq.view, &kc.view, &vc.view, &bt.view, &long_q.view, &lens_p.view},
                     {&pout.view}, {}, {"'context_lens'", "sequence 1"}, oor, {&pout});
    auto ok_q = make_index(t, HAL_DTYPE_INT64, {3}, {0, 2, 3});
    auto plens_bad = make_index(t, HAL_DTYPE_INT32, {2}, {4, 9});
    t.expect_refused("paged_prefill_attention", {&pq.view, &kc.view, &vc.view, &bt.view, &ok_q.view, &plens_bad.view},
                     {&pout.view}, {}, {"'context_lens'", "9"}, oor, {&pout});
  }
  SUBCASE("prefill_attention cu_seqlens") {
    auto q = make(t, kF32, {4, 1, 2}, random_values(8, 12));
    auto out = make(t, kF32, {4, 1, 2}, std::vector<double>(8, 3.0));
    for (auto cu : std::vector<std::vector<int64_t>>{{1, 4}, {0, 3, 2, 4}, {0, 3}}) {
      auto tcu = make_index(t, HAL_DTYPE_INT32, {static_cast<int64_t>(cu.size())}, cu);
      t.expect_refused("prefill_attention", {&q.view, &q.view, &q.view, &tcu.view}, {&out.view}, {}, {"'cu_seqlens'"},
                       oor, {&out});
    }
  }
  SUBCASE("fused_moe topk_ids") {
    auto x = make(t, kF32, {2, 3}, random_values(6, 13));
    auto w13 = make(t, kF32, {2, 4, 3}, random_values(24, 14)), w2 = make(t, kF32, {2, 3, 2}, random_values(12, 15));
    auto tw = make(t, kF32, {2, 1}, {0.5, 0.5});
    auto out = make(t, kF32, {2, 3}, std::vector<double>(6, 1.0));
    for (int64_t bad : {2, -1}) {
      auto ids = make_index(t, HAL_DTYPE_INT64, {2, 1}, {0, bad});
      t.expect_refused("fused_moe", {&x.view, &w13.view, &w2.view, &tw.view, &ids.view}, {&out.view}, {},
                       {"'topk_ids'", std::to_string(bad), "[1, 0]"}, oor, {&out});
    }
  }
}

TEST_CASE("fill_kv_cache: a refused launch leaves the cache as it was and usable") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto k = make(t, kF32, {1, 1, 2}, {1, 2});
  auto kc = make(t, kF32, {1, 2, 1, 2}, {0, 0, 0, 0}), vc = make(t, kF32, {1, 2, 1, 2}, {0, 0, 0, 0});
  auto bad = make_index(t, HAL_DTYPE_INT32, {1}, {2});
  t.expect_refused("fill_kv_cache", {&k.view, &k.view, &kc.view, &vc.view, &bad.view}, {&kc.view, &vc.view}, {},
                   {"'slot_mapping'", "[0, 2)"}, HAL_STATUS_OUT_OF_RANGE, {&kc, &vc});
  auto good = make_index(t, HAL_DTYPE_INT32, {1}, {1});
  t.run("fill_kv_cache", {&k.view, &k.view, &kc.view, &vc.view, &good.view}, {&kc.view, &vc.view});
  CHECK(read(t, kc) == std::vector<double>{0, 0, 1, 2});
}
