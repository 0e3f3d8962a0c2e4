// CPU transformer kernels through the runtime's op API: attention against
// a hand-computed case, a naive softmax and its own float64 result, masks,
// layouts, the backward against finite differences, rotary embeddings, and
// refused launches.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

#include "hal/sdk/kernel/half.hpp"
#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

namespace {

std::vector<double> random_values(size_t n, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}
std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }
size_t count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t s : shape) n *= static_cast<size_t>(s);
  return n;
}

// Runs attention in float64 on Q, K, V ([B, L|S, E|Ev] flattened); returns
// out and logsumexp.
struct AttnResult {
  std::vector<double> out, lse;
};
AttnResult attention64(OpTester& t, const std::vector<int64_t>& qs, const std::vector<int64_t>& ks,
                       const std::vector<int64_t>& vs, const std::vector<double>& q, const std::vector<double>& k,
                       const std::vector<double>& v, const std::vector<Attr>& attrs = {},
                       const hal::TensorView* mask = nullptr) {
  auto tq = t.tensor<double>(qs, q, HAL_DTYPE_FLOAT64);
  auto tk = t.tensor<double>(ks, k, HAL_DTYPE_FLOAT64);
  auto tv = t.tensor<double>(vs, v, HAL_DTYPE_FLOAT64);
  std::vector<int64_t> os = qs, ls = qs;
  os.back() = vs.back();
  ls.pop_back();
  auto out = t.empty(HAL_DTYPE_FLOAT64, os);
  auto lse = t.empty(HAL_DTYPE_FLOAT64, ls);
  std::vector<const hal::TensorView*> in = {&tq.view, &tk.view, &tv.view};
  if (mask != nullptr) in.push_back(mask);
  t.run("scaled_dot_product_attention", in, {&out.view, &lse.view}, attrs);
  return {t.read<double>(out), t.read<double>(lse)};
}

void expect_refused(OpTester& t, const std::string& op, const std::vector<const hal::TensorView*>& in,
                    const std::vector<const hal::TensorView*>& out, const std::vector<Attr>& attrs,
                    const std::string& mention) {
  t.expect_refused(op, in, out, attrs, {mention});
}

}  // namespace

TEST_CASE("attention on a hand-computed case") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  // Scores [0, ln 3] -> probabilities [1/4, 3/4] -> out = 4/4 + 3·8/4 = 7.
  AttnResult r = attention64(t, {1, 1}, {2, 1}, {2, 1}, {1.0}, {0.0, std::log(3.0)}, {4.0, 8.0},
                             {Attr::f("scale", 1.0)});
  CHECK(r.out[0] == doctest::Approx(7.0));
  CHECK(r.lse[0] == doctest::Approx(std::log(4.0)));
}

TEST_CASE("attention matches a naive softmax over several key blocks, in every float dtype") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t B = 2, L = 5, S = 150, E = 8, Ev = 6;
  auto q = random_values(B * L * E, 1), k = random_values(B * S * E, 2), v = random_values(B * S * Ev, 3);
  AttnResult r = attention64(t, {B, L, E}, {B, S, E}, {B, S, Ev}, q, k, v);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(S);
      double m = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        s[j] = 0;
        for (int64_t e = 0; e < E; ++e) s[j] += q[(b * L + i) * E + e] * k[(b * S + j) * E + e];
        s[j] /= std::sqrt(double(E));
        m = std::max(m, s[j]);
      }
      double z = 0;
      for (double x : s) z += std::exp(x - m);
      CHECK(r.lse[b * L + i] == doctest::Approx(m + std::log(z)));
      for (int64_t e = 0; e < Ev; ++e) {
        double o = 0;
        for (int64_t j = 0; j < S; ++j) o += std::exp(s[j] - m) / z * v[(b * S + j) * Ev + e];
        CHECK(r.out[(b * L + i) * Ev + e] == doctest::Approx(o).epsilon(1e-12));
      }
    }
  // float32: same numbers within float rounding; logsumexp is float32.
  auto tq = t.tensor({B, L, E}, to_float(q));
  auto tk = t.tensor({B, S, E}, to_float(k));
  auto tv = t.tensor({B, S, Ev}, to_float(v));
  auto out = t.empty(HAL_DTYPE_FLOAT32, {B, L, Ev});
  auto lse = t.empty(HAL_DTYPE_FLOAT32, {B, L});
  t.run("scaled_dot_product_attention", {&tq.view, &tk.view, &tv.view}, {&out.view, &lse.view});
  std::vector<float> o32 = t.read<float>(out);
  for (size_t i = 0; i < o32.size(); ++i) CHECK(o32[i] == doctest::Approx(r.out[i]).epsilon(1e-5));
  // float16 and bfloat16 in and out (values within their precision).
  for (hal_dtype_e dt : {HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16}) {
    auto bits = [&](const std::vector<double>& v) {
      std::vector<uint16_t> out(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        out[i] = dt == HAL_DTYPE_FLOAT16 ? hal::sdk::kernel::Half(float(v[i])).bits
                                         : hal::sdk::kernel::BFloat16(float(v[i])).bits;
      return out;
    };
    auto hq = t.tensor<uint16_t>({B, L, E}, bits(q), dt);
    auto hk = t.tensor<uint16_t>({B, S, E}, bits(k), dt);
    auto hv = t.tensor<uint16_t>({B, S, Ev}, bits(v), dt);
    auto hout = t.empty(dt, {B, L, Ev});
    auto hlse = t.empty(HAL_DTYPE_FLOAT32, {B, L});
    t.run("scaled_dot_product_attention", {&hq.view, &hk.view, &hv.view}, {&hout.view, &hlse.view});
    std::vector<uint16_t> got = t.read<uint16_t>(hout);
    double tol = dt == HAL_DTYPE_FLOAT16 ? 5e-3 : 3e-2;
    for (size_t i = 0; i < got.size(); ++i) {
      float g = dt == HAL_DTYPE_FLOAT16 ? hal::sdk::kernel::Half::to_float(got[i])
                                        : hal::sdk::kernel::bits_float(uint32_t(got[i]) << 16);
      CHECK(std::abs(g - r.out[i]) <= tol);
    }
  }
}

TEST_CASE("attention masks: bool = float -inf, causal = tril, broadcast, fully masked rows give 0") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t B = 2, H = 3, L = 4, S = 4, E = 5, Ev = 3;
  auto q = random_values(B * H * L * E, 4), k = random_values(B * H * S * E, 5), v = random_values(B * H * S * Ev, 6);
  std::vector<int64_t> qs = {B, H, L, E}, ks = {B, H, S, E}, vs = {B, H, S, Ev};
  std::vector<uint8_t> tril(L * S);
  std::vector<double> additive(L * S);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) {
      tril[i * S + j] = j <= i;
      additive[i * S + j] = j <= i ? 0.0 : -INFINITY;
    }
  auto bmask = t.tensor<uint8_t>({L, S}, tril, HAL_DTYPE_BOOL);
  auto fmask = t.tensor<double>({1, 1, L, S}, additive, HAL_DTYPE_FLOAT64);
  AttnResult causal = attention64(t, qs, ks, vs, q, k, v, {Attr::b("is_causal", true)});
  AttnResult with_bool = attention64(t, qs, ks, vs, q, k, v, {}, &bmask.view);
  AttnResult with_float = attention64(t, qs, ks, vs, q, k, v, {}, &fmask.view);
  for (size_t i = 0; i < causal.out.size(); ++i) {
    CHECK(with_bool.out[i] == doctest::Approx(causal.out[i]));
    CHECK(with_float.out[i] == doctest::Approx(causal.out[i]));
  }
  // Row 0 of a causal attention sees only key 0: out = value row 0.
  for (int64_t e = 0; e < Ev; ++e) CHECK(causal.out[e] == doctest::Approx(v[e]));

  // A per-head mask [H, 1, S] with every key of head 1 masked out.
  std::vector<uint8_t> heads(H * S, 1);
  for (int64_t j = 0; j < S; ++j) heads[1 * S + j] = 0;
  auto hmask = t.tensor<uint8_t>({H, 1, S}, heads, HAL_DTYPE_BOOL);
  AttnResult masked = attention64(t, qs, ks, vs, q, k, v, {}, &hmask.view);
  AttnResult plain = attention64(t, qs, ks, vs, q, k, v);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        int64_t row = (b * H + h) * L + i;
        if (h == 1) {
          CHECK(std::isinf(masked.lse[row]));
          CHECK(masked.lse[row] < 0);
          for (int64_t e = 0; e < Ev; ++e) CHECK(masked.out[row * Ev + e] == 0.0);
        } else {
          CHECK(masked.lse[row] == doctest::Approx(plain.lse[row]));
        }
      }
  // S = 0: every row is empty.
  AttnResult empty = attention64(t, {2, 3}, {0, 3}, {0, 2}, random_values(6, 7), {}, {});
  CHECK(empty.out == std::vector<double>(4, 0.0));
  CHECK(std::isinf(empty.lse[0]));
}

TEST_CASE("attention reads non-contiguous inputs and writes a strided output") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t L = 3, S = 4, E = 2, Ev = 2;
  auto q = random_values(L * E, 8), k = random_values(S * E, 9), v = random_values(S * Ev, 10);
  AttnResult r = attention64(t, {L, E}, {S, E}, {S, Ev}, q, k, v);
  // query stored transposed ([E, L] memory), out written column-major.
  std::vector<double> qt(L * E);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t e = 0; e < E; ++e) qt[e * L + i] = q[i * E + e];
  auto tq = t.tensor<double>({E, L}, qt, HAL_DTYPE_FLOAT64);
  hal::TensorView qview = tq.view;
  qview.shape = {L, E};
  qview.strides = {1, L};
  auto tk = t.tensor<double>({S, E}, k, HAL_DTYPE_FLOAT64);
  auto tv = t.tensor<double>({S, Ev}, v, HAL_DTYPE_FLOAT64);
  auto out = t.empty(HAL_DTYPE_FLOAT64, {Ev, L});
  hal::TensorView oview = out.view;
  oview.shape = {L, Ev};
  oview.strides = {1, L};
  auto lse = t.empty(HAL_DTYPE_FLOAT64, {L});
  t.run("scaled_dot_product_attention", {&qview, &tk.view, &tv.view}, {&oview, &lse.view});
  std::vector<double> o = t.read<double>(out);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t e = 0; e < Ev; ++e) CHECK(o[e * L + i] == doctest::Approx(r.out[i * Ev + e]));
}

TEST_CASE("attention backward matches finite differences of the forward") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t B = 2, L = 3, S = 5, E = 3, Ev = 2;
  std::vector<int64_t> qs = {B, L, E}, ks = {B, S, E}, vs = {B, S, Ev}, os = {B, L, Ev};
  auto q = random_values(count(qs), 11), k = random_values(count(ks), 12), v = random_values(count(vs), 13);
  auto g = random_values(count(os), 14);
  std::vector<double> fmask_values = random_values(L * S, 15);
  fmask_values[1 * S + 2] = -INFINITY;
  auto fmask = t.tensor<double>({L, S}, fmask_values, HAL_DTYPE_FLOAT64);
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    std::vector<Attr> attrs = {Attr::f("scale", 0.7)};
    if (variant == 1) attrs.push_back(Attr::b("is_causal", true));
    const hal::TensorView* mask = variant == 2 ? &fmask.view : nullptr;
    auto loss = [&](const std::vector<double>& qq, const std::vector<double>& kk, const std::vector<double>& vv) {
      AttnResult r = attention64(t, qs, ks, vs, qq, kk, vv, attrs, mask);
      double s = 0;
      for (size_t i = 0; i < g.size(); ++i) s += r.out[i] * g[i];
      return s;
    };
    AttnResult fwd = attention64(t, qs, ks, vs, q, k, v, attrs, mask);
    auto tg = t.tensor<double>(os, g, HAL_DTYPE_FLOAT64);
    auto tq = t.tensor<double>(qs, q, HAL_DTYPE_FLOAT64);
    auto tk = t.tensor<double>(ks, k, HAL_DTYPE_FLOAT64);
    auto tv = t.tensor<double>(vs, v, HAL_DTYPE_FLOAT64);
    auto to = t.tensor<double>(os, fwd.out, HAL_DTYPE_FLOAT64);
    auto tl = t.tensor<double>({B, L}, fwd.lse, HAL_DTYPE_FLOAT64);
    auto gq = t.empty(HAL_DTYPE_FLOAT64, qs), gk = t.empty(HAL_DTYPE_FLOAT64, ks), gv = t.empty(HAL_DTYPE_FLOAT64, vs);
    std::vector<const hal::TensorView*> in = {&tg.view, &tq.view, &tk.view, &tv.view, &to.view, &tl.view};
    if (mask != nullptr) in.push_back(mask);
    t.run("scaled_dot_product_attention_backward", in, {&gq.view, &gk.view, &gv.view}, attrs);
    std::vector<std::vector<double>> grads = {t.read<double>(gq), t.read<double>(gk), t.read<double>(gv)};
    for (int which = 0; which < 3; ++which) {
      std::vector<double> p[3] = {q, k, v};
      for (size_t i = 0; i < p[which].size(); ++i) {
        const double h = 1e-6, x = p[which][i];
        p[which][i] = x + h;
        double up = loss(p[0], p[1], p[2]);
        p[which][i] = x - h;
        double down = loss(p[0], p[1], p[2]);
        p[which][i] = x;
        CHECK(grads[which][i] == doctest::Approx((up - down) / (2 * h)).epsilon(1e-6).scale(1.0));
      }
    }
  }
}

TEST_CASE("float32 attention and its backward over several query tiles and key blocks match float64") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  // Blocks through oneDNN and, at the edges, as loops; then a short head whose blocks are all loops.
  const int64_t shapes[2][5] = {{2, 70, 150, 16, 8}, {3, 16, 20, 8, 4}};
  for (const auto& shape : shapes) {
    const int64_t B = shape[0], L = shape[1], S = shape[2], E = shape[3], Ev = shape[4];
    CAPTURE(L);
    std::vector<int64_t> qs = {B, L, E}, ks = {B, S, E}, vs = {B, S, Ev}, os = {B, L, Ev}, ls = {B, L};
    auto q = random_values(count(qs), 21), k = random_values(count(ks), 22), v = random_values(count(vs), 23);
    auto g = random_values(count(os), 24);
    std::vector<uint8_t> keep(L * S);
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 7919) % 5 != 0;
    for (int64_t j = 0; j < S; ++j) keep[3 * S + j] = 0;  // an empty row
    for (int variant = 0; variant < 3; ++variant) {
      CAPTURE(variant);
      std::vector<Attr> attrs;
      if (variant == 1) attrs.push_back(Attr::b("is_causal", true));
      auto mask = t.tensor<uint8_t>({L, S}, keep, HAL_DTYPE_BOOL);
      std::vector<std::vector<double>> grads[2];
      for (hal_dtype_e dt : {HAL_DTYPE_FLOAT64, HAL_DTYPE_FLOAT32}) {
        auto make = [&](const std::vector<int64_t>& shape, const std::vector<double>& values) {
          return dt == HAL_DTYPE_FLOAT64 ? t.tensor<double>(shape, values, dt) : t.tensor(shape, to_float(values));
        };
        auto read = [&](const DeviceTensor& x) {
          if (dt == HAL_DTYPE_FLOAT64) return t.read<double>(x);
          std::vector<float> f = t.read<float>(x);
          return std::vector<double>(f.begin(), f.end());
        };
        auto tq = make(qs, q), tk = make(ks, k), tv = make(vs, v), tg = make(os, g);
        auto out = t.empty(dt, os), lse = t.empty(dt, ls);
        std::vector<const hal::TensorView*> in = {&tq.view, &tk.view, &tv.view};
        if (variant == 2) in.push_back(&mask.view);
        t.run("scaled_dot_product_attention", in, {&out.view, &lse.view}, attrs);
        auto gq = t.empty(dt, qs), gk = t.empty(dt, ks), gv = t.empty(dt, vs);
        std::vector<const hal::TensorView*> bin = {&tg.view, &tq.view, &tk.view, &tv.view, &out.view, &lse.view};
        if (variant == 2) bin.push_back(&mask.view);
        t.run("scaled_dot_product_attention_backward", bin, {&gq.view, &gk.view, &gv.view}, attrs);
        grads[dt == HAL_DTYPE_FLOAT32] = {read(out), read(gq), read(gk), read(gv)};
      }
      for (size_t w = 0; w < 4; ++w)
        for (size_t i = 0; i < grads[0][w].size(); ++i)
          CHECK(grads[1][w][i] == doctest::Approx(grads[0][w][i]).epsilon(1e-4).scale(1.0));
    }
  }
}

TEST_CASE("rotary embedding: both pairings, and the backward is the op with sin negated") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  // One position, D = 4, angle θ_k: cos/sin [1, 2].
  auto x = t.tensor({1, 4}, {1, 2, 3, 4});
  auto cs = t.tensor({1, 2}, {0.0f, 0.5f});
  auto sn = t.tensor({1, 2}, {1.0f, 2.0f});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {1, 4});
  t.run("rotary_embedding", {&x.view, &cs.view, &sn.view}, {&out.view});
  // halves: (a, b) = (1, 3), (2, 4)
  CHECK(t.read<float>(out) == std::vector<float>{1 * 0.0f - 3 * 1.0f, 2 * 0.5f - 4 * 2.0f, 3 * 0.0f + 1 * 1.0f,
                                                 4 * 0.5f + 2 * 2.0f});
  t.run("rotary_embedding", {&x.view, &cs.view, &sn.view}, {&out.view}, {Attr::b("interleaved", true)});
  // pairs: (1, 2), (3, 4)
  CHECK(t.read<float>(out) == std::vector<float>{1 * 0.0f - 2 * 1.0f, 2 * 0.0f + 1 * 1.0f, 3 * 0.5f - 4 * 2.0f,
                                                 4 * 0.5f + 3 * 2.0f});

  const int64_t B = 2, S = 3, D = 8;
  auto xv = to_float(random_values(B * S * D, 16));
  std::vector<float> c(S * D / 2), s(S * D / 2), ns(S * D / 2);
  for (int64_t p = 0; p < S; ++p)
    for (int64_t k2 = 0; k2 < D / 2; ++k2) {
      double theta = p * std::pow(10000.0, -2.0 * k2 / D);
      c[p * D / 2 + k2] = std::cos(theta);
      s[p * D / 2 + k2] = std::sin(theta);
      ns[p * D / 2 + k2] = -s[p * D / 2 + k2];
    }
  auto tx = t.tensor({B, S, D}, xv);
  auto tc = t.tensor({S, D / 2}, c), ts = t.tensor({S, D / 2}, s), tns = t.tensor({S, D / 2}, ns);
  for (bool inter : {false, true}) {
    auto y = t.empty(HAL_DTYPE_FLOAT32, {B, S, D});
    auto back = t.empty(HAL_DTYPE_FLOAT32, {B, S, D});
    t.run("rotary_embedding", {&tx.view, &tc.view, &ts.view}, {&y.view}, {Attr::b("interleaved", inter)});
    // grad_x = Rᵀ·grad_out: with grad_out = y, Rᵀ·R·x = x.
    t.run("rotary_embedding", {&y.view, &tc.view, &tns.view}, {&back.view}, {Attr::b("interleaved", inter)});
    std::vector<float> bx = t.read<float>(back);
    for (size_t i = 0; i < bx.size(); ++i) CHECK(bx[i] == doctest::Approx(xv[i]).epsilon(1e-5));
    // In place gives the same as out of place.
    auto xi = t.tensor({B, S, D}, xv);
    t.run("rotary_embedding", {&xi.view, &tc.view, &ts.view}, {&xi.view}, {Attr::b("interleaved", inter)});
    CHECK(t.read<float>(xi) == t.read<float>(y));
  }
}

TEST_CASE("transformer ops refuse mismatched shapes and attributes, naming the argument and values") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto q = t.empty(HAL_DTYPE_FLOAT32, {2, 3, 4});
  auto k = t.empty(HAL_DTYPE_FLOAT32, {2, 5, 4});
  auto v = t.empty(HAL_DTYPE_FLOAT32, {2, 5, 6});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3, 6});
  auto lse = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  auto k_bad = t.empty(HAL_DTYPE_FLOAT32, {2, 5, 3});
  auto v_bad = t.empty(HAL_DTYPE_FLOAT32, {2, 4, 6});
  auto k_batch = t.empty(HAL_DTYPE_FLOAT32, {3, 5, 4});
  auto k64 = t.empty(HAL_DTYPE_FLOAT64, {2, 5, 4});
  auto mask_bad = t.empty(HAL_DTYPE_BOOL, {3, 4});
  auto mask_ok = t.empty(HAL_DTYPE_BOOL, {3, 5});
  auto mask_int = t.empty(HAL_DTYPE_INT32, {3, 5});
  auto q1 = t.empty(HAL_DTYPE_FLOAT32, {4});
  const std::string sdpa = "scaled_dot_product_attention";
  expect_refused(t, sdpa, {&q.view, &k_bad.view, &v.view}, {&out.view, &lse.view}, {}, "'key' of shape [2, 5, 3] has E = 3");
  expect_refused(t, sdpa, {&q.view, &k.view, &v_bad.view}, {&out.view, &lse.view}, {}, "'value' of shape [2, 4, 6] has S = 4");
  expect_refused(t, sdpa, {&q.view, &k_batch.view, &v.view}, {&out.view, &lse.view}, {}, "batch dim 0 = 3");
  expect_refused(t, sdpa, {&q.view, &k64.view, &v.view}, {&out.view, &lse.view}, {}, "'key' has dtype float64");
  expect_refused(t, sdpa, {&q1.view, &k.view, &v.view}, {&out.view, &lse.view}, {}, "'query' must have rank >= 2");
  expect_refused(t, sdpa, {&q.view, &k.view, &v.view, &mask_bad.view}, {&out.view, &lse.view}, {},
                 "'attn_mask' of shape [3, 4] does not broadcast to [..., L, S] = [2, 3, 5]");
  expect_refused(t, sdpa, {&q.view, &k.view, &v.view, &mask_ok.view}, {&out.view, &lse.view},
                 {Attr::b("is_causal", true)}, "cannot be combined with is_causal");
  expect_refused(t, sdpa, {&q.view, &k.view, &v.view, &mask_int.view}, {&out.view, &lse.view}, {}, "dtype int32");
  expect_refused(t, sdpa, {&q.view, &k.view, &v.view}, {&out.view, &lse.view}, {Attr::f("scale", INFINITY)},
                 "'scale' = inf");
  expect_refused(t, sdpa, {&q.view, &k.view, &v.view}, {&out.view, &out.view}, {}, "output 'logsumexp' has shape");
  auto lse64 = t.empty(HAL_DTYPE_FLOAT64, {2, 3});
  expect_refused(t, sdpa, {&q.view, &k.view, &v.view}, {&out.view, &lse64.view}, {},
                 "output 'logsumexp' has dtype float64 but must be float32");
  expect_refused(t, sdpa, {&q.view, &k.view, &v.view}, {&q.view, &lse.view}, {}, "output 'out' has shape [2, 3, 4]");

  const std::string bwd = "scaled_dot_product_attention_backward";
  auto gq = t.empty(HAL_DTYPE_FLOAT32, {2, 3, 4});
  auto gk = t.empty(HAL_DTYPE_FLOAT32, {2, 5, 4});
  auto gv = t.empty(HAL_DTYPE_FLOAT32, {2, 5, 6});
  expect_refused(t, bwd, {&out.view, &q.view, &k.view, &v.view, &out.view, &lse64.view}, {&gq.view, &gk.view, &gv.view},
                 {}, "input 'logsumexp' has dtype float64 but must be float32");
  expect_refused(t, bwd, {&q.view, &q.view, &k.view, &v.view, &out.view, &lse.view}, {&gq.view, &gk.view, &gv.view}, {},
                 "input 'grad_out' has shape [2, 3, 4] but must be [2, 3, 6]");
  expect_refused(t, bwd, {&out.view, &q.view, &k.view, &v.view, &out.view, &lse.view}, {&gq.view, &gq.view, &gv.view},
                 {}, "output 'grad_key' has shape [2, 3, 4] but must be [2, 5, 4]");

  auto x = t.empty(HAL_DTYPE_FLOAT32, {2, 3, 5});
  auto x8 = t.empty(HAL_DTYPE_FLOAT32, {2, 3, 8});
  auto c = t.empty(HAL_DTYPE_FLOAT32, {3, 4});
  auto c_bad = t.empty(HAL_DTYPE_FLOAT32, {4, 4});
  auto xi = t.empty(HAL_DTYPE_INT32, {2, 3, 8});
  expect_refused(t, "rotary_embedding", {&x.view, &c.view, &c.view}, {&x.view}, {}, "has odd D = 5");
  expect_refused(t, "rotary_embedding", {&x8.view, &c_bad.view, &c.view}, {&x8.view}, {},
                 "input 'cos' has shape [4, 4] but must be [S, D/2] = [3, 4]");
  expect_refused(t, "rotary_embedding", {&x8.view, &c.view, &c_bad.view}, {&x8.view}, {}, "input 'sin' has shape [4, 4]");
  expect_refused(t, "rotary_embedding", {&xi.view, &c.view, &c.view}, {&xi.view}, {}, "dtype int32");
  auto big = t.empty(HAL_DTYPE_FLOAT32, {60});  // out overlaps x without being exactly x
  hal::TensorView xa(big.buffer, HAL_DTYPE_FLOAT32, {2, 3, 8}), xb(big.buffer, HAL_DTYPE_FLOAT32, {2, 3, 8}, {}, 4);
  expect_refused(t, "rotary_embedding", {&xa, &c.view, &c.view}, {&xb}, {}, "overlaps input 'x'");
}
