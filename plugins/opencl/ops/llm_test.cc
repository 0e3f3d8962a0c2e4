// The OpenCL "llm" kernels' in-place launches, which hal-conformance cannot
// express (its runner gives every output a buffer of its own): outputs that
// are the inputs themselves, contiguous and strided, as inference engines
// call add_rms_norm, apply_rotary_pos_emb and fill_kv_cache; and a data
// error leaving the aliased tensors untouched. References are computed here
// from sdk/catalog/ops/llm.toml.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hal/testing/op_test_util.hpp"

namespace {

using hal::Attr;
using hal::TensorView;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

std::vector<float> ramp(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.7f * static_cast<float>(i) + shift) * scale;
  return v;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])), "element ", i, ": ", got[i], " vs ",
                  want[i]);
}

}  // namespace

TEST_CASE("opencl llm: add_rms_norm in place (out = input, residual_out = residual), contiguous and strided") {
  OpTester t(HAL_TEST_OPENCL_PLUGIN);
  const int64_t rows = 3, n = 70;  // a row longer than a work-group
  const double eps = 1e-5;
  std::vector<float> x = ramp(rows * n, 2.f, 0.f), r = ramp(rows * n, 1.f, 1.f), w = ramp(n, 1.f, 2.f);
  for (bool strided : {false, true}) {
    CAPTURE(strided);
    // Strided: the [rows, n] views over column-major storage.
    std::vector<float> xs = x, rs = r;
    if (strided)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < n; ++j) xs[j * rows + i] = x[i * n + j], rs[j * rows + i] = r[i * n + j];
    DeviceTensor X = t.tensor({rows * n}, xs), R = t.tensor({rows * n}, rs), W = t.tensor({n}, w);
    std::vector<int64_t> st = strided ? std::vector<int64_t>{1, rows} : std::vector<int64_t>{};
    TensorView xv(X.buffer, HAL_DTYPE_FLOAT32, {rows, n}, st), rv(R.buffer, HAL_DTYPE_FLOAT32, {rows, n}, st);
    t.run("add_rms_norm", {&xv, &rv, &W.view}, {&xv, &rv}, {Attr::f("eps", eps)});
    std::vector<float> got_x = t.read<float>(X), got_r = t.read<float>(R);
    std::vector<double> want_x(rows * n), want_r(rows * n);
    for (int64_t i = 0; i < rows; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < n; ++j) {
        float s = x[i * n + j] + r[i * n + j];
        ss += double(s) * s;
      }
      double inv = 1 / std::sqrt(ss / n + eps);
      for (int64_t j = 0; j < n; ++j) {
        float s = x[i * n + j] + r[i * n + j];
        int64_t at = strided ? j * rows + i : i * n + j;
        want_r[at] = s;
        want_x[at] = s * inv * w[j];
      }
    }
    check_close(got_r, want_r, 0);
    check_close(got_x, want_x, 1e-5);
  }
}

TEST_CASE("opencl llm: apply_rotary_pos_emb in place matches the reference, neox and interleaved") {
  OpTester t(HAL_TEST_OPENCL_PLUGIN);
  const int64_t tokens = 5, hq = 4, hk = 2, d = 10, half = 3, max_pos = 8;  // R = 6 of D = 10
  std::vector<float> q = ramp(tokens * hq * d, 1.f, 0.f), k = ramp(tokens * hk * d, 1.f, 0.5f);
  std::vector<float> cs(max_pos * half), sn(max_pos * half);
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < half; ++i) cs[p * half + i] = std::cos(0.3f * p * (i + 1)), sn[p * half + i] = std::sin(0.3f * p * (i + 1));
  std::vector<int64_t> pos = {7, 0, 3, 3, 5};
  for (bool interleaved : {false, true}) {
    CAPTURE(interleaved);
    DeviceTensor Q = t.tensor({tokens, hq, d}, q), K = t.tensor({tokens, hk, d}, k), C = t.tensor({max_pos, half}, cs),
                 S = t.tensor({max_pos, half}, sn), P = t.tensor<int64_t>({tokens}, pos, HAL_DTYPE_INT64);
    t.run("apply_rotary_pos_emb", {&Q.view, &K.view, &C.view, &S.view, &P.view}, {&Q.view, &K.view},
          {Attr::b("interleaved", interleaved)});
    auto reference = [&](const std::vector<float>& x, int64_t heads) {
      std::vector<double> y(x.begin(), x.end());
      for (int64_t tk = 0; tk < tokens; ++tk)
        for (int64_t h = 0; h < heads; ++h) {
          int64_t base = (tk * heads + h) * d;
          for (int64_t i = 0; i < half; ++i) {
            int64_t ia = base + (interleaved ? 2 * i : i), ib = base + (interleaved ? 2 * i + 1 : i + half);
            double c = cs[pos[tk] * half + i], s = sn[pos[tk] * half + i];
            y[ia] = x[ia] * c - x[ib] * s;
            y[ib] = x[ib] * c + x[ia] * s;
          }
        }
      return y;
    };
    check_close(t.read<float>(Q), reference(q, hq), 1e-6);
    check_close(t.read<float>(K), reference(k, hk), 1e-6);
  }
}

TEST_CASE("opencl llm: apply_rotary_pos_emb in place with a position out of range writes nothing") {
  OpTester t(HAL_TEST_OPENCL_PLUGIN);
  DeviceTensor Q = t.tensor({2, 1, 4}, ramp(8, 1.f, 0.f)), K = t.tensor({2, 1, 4}, ramp(8, 1.f, 1.f)),
               C = t.tensor({3, 2}, ramp(6, 1.f, 2.f)), S = t.tensor({3, 2}, ramp(6, 1.f, 3.f)),
               P = t.tensor<int32_t>({2}, {1, 3}, HAL_DTYPE_INT32);
  t.expect_refused("apply_rotary_pos_emb", {&Q.view, &K.view, &C.view, &S.view, &P.view}, {&Q.view, &K.view}, {},
                   {"'position_ids'", "3", "position 1"}, HAL_STATUS_OUT_OF_RANGE, {&Q, &K});
}

TEST_CASE("opencl llm: fill_kv_cache in place writes only the named slots (-1 pads, the later token wins)") {
  OpTester t(HAL_TEST_OPENCL_PLUGIN);
  const int64_t blocks = 3, bs = 2, hk = 2, d = 3, dv = 2, tokens = 4;
  std::vector<float> kc = ramp(blocks * bs * hk * d, 1.f, 0.f), vc = ramp(blocks * bs * hk * dv, 1.f, 1.f);
  std::vector<float> key = ramp(tokens * hk * d, 5.f, 2.f), value = ramp(tokens * hk * dv, 5.f, 3.f);
  std::vector<int32_t> slots = {5, -1, 0, 5};
  DeviceTensor KC = t.tensor({blocks, bs, hk, d}, kc), VC = t.tensor({blocks, bs, hk, dv}, vc),
               Kt = t.tensor({tokens, hk, d}, key), Vt = t.tensor({tokens, hk, dv}, value),
               SM = t.tensor<int32_t>({tokens}, slots, HAL_DTYPE_INT32);
  t.run("fill_kv_cache", {&Kt.view, &Vt.view, &KC.view, &VC.view, &SM.view}, {&KC.view, &VC.view});
  auto expect = [&](std::vector<float> cache, const std::vector<float>& src, int64_t row) {
    for (int64_t tk = 0; tk < tokens; ++tk)
      if (slots[tk] >= 0)
        for (int64_t e = 0; e < row; ++e) cache[slots[tk] * row + e] = src[tk * row + e];
    return std::vector<double>(cache.begin(), cache.end());
  };
  check_close(t.read<float>(KC), expect(kc, key, hk * d), 0);
  check_close(t.read<float>(VC), expect(vc, value, hk * dv), 0);

  SUBCASE("a slot past the cache leaves both caches untouched") {
    DeviceTensor bad = t.tensor<int64_t>({tokens}, {1, 2, 6, -1}, HAL_DTYPE_INT64);
    t.expect_refused("fill_kv_cache", {&Kt.view, &Vt.view, &KC.view, &VC.view, &bad.view}, {&KC.view, &VC.view}, {},
                     {"'slot_mapping'", "6", "position 2"}, HAL_STATUS_OUT_OF_RANGE, {&KC, &VC});
  }
}
