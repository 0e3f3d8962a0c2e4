// CPU layer_norm / rms_norm forward at the sizes that switch to streaming
// stores (float32 outputs of 32 MiB and more): the same bits as calls on
// single rows (plain stores), rows not 64-byte aligned. The
// ops' formulas, backward and errors are tested in nn_test.cc.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::testing::OpTester;

namespace {

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

}  // namespace

TEST_CASE("layer_norm and rms_norm: a large float32 call (streaming stores, unaligned rows) equals row-by-row calls") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t R = 2048, N = 4099;  // 32 MiB and more of output; rows start off 64-byte boundaries
  const std::vector<float> x = random_floats(R * N, 1), w = random_floats(N, 2), b = random_floats(N, 3);
  const std::vector<Attr> attrs = {Attr::ints("normalized_shape", {N}), Attr::f("eps", 1e-5)};
  auto tx = t.tensor({R, N}, x), tw = t.tensor({N}, w), tb = t.tensor({N}, b);
  for (bool rms : {false, true}) {
    CAPTURE(rms);
    // The op on IN ([ROWS, N]): out, mean (zeros for rms_norm), rstd.
    auto run = [&](const hal::testing::DeviceTensor& in, int64_t rows) {
      auto out = t.empty(HAL_DTYPE_FLOAT32, {rows, N});
      auto mean = t.empty(HAL_DTYPE_FLOAT32, {rows, 1}), rstd = t.empty(HAL_DTYPE_FLOAT32, {rows, 1});
      if (rms) t.run("rms_norm", {&in.view, &tw.view}, {&out.view, &rstd.view}, attrs);
      else t.run("layer_norm", {&in.view, &tw.view, &tb.view}, {&out.view, &mean.view, &rstd.view}, attrs);
      return std::vector<std::vector<float>>{t.read<float>(out), rms ? std::vector<float>(rows) : t.read<float>(mean),
                                             t.read<float>(rstd)};
    };
    const auto big = run(tx, R);
    for (int64_t i : {int64_t{0}, int64_t{1}, R / 2 + 1, R - 1}) {
      CAPTURE(i);
      auto row = t.tensor({1, N}, std::vector<float>(x.begin() + i * N, x.begin() + (i + 1) * N));
      const auto small = run(row, 1);  // 16 KiB: plain stores
      CHECK(small[0] == std::vector<float>(big[0].begin() + i * N, big[0].begin() + (i + 1) * N));
      CHECK(small[1][0] == big[1][i]);
      CHECK(small[2][0] == big[2][i]);
      // And against the formula.
      double mu = 0, ss = 0;
      if (!rms) {
        for (int64_t j = 0; j < N; ++j) mu += x[i * N + j];
        mu /= N;
      }
      for (int64_t j = 0; j < N; ++j) ss += (x[i * N + j] - mu) * (x[i * N + j] - mu);
      const double rs = 1 / std::sqrt(ss / N + 1e-5);
      for (int64_t j = 0; j < N; j += 97) {
        const double want = (x[i * N + j] - mu) * rs * w[j] + (rms ? 0.0 : b[j]);
        CHECK(big[0][i * N + j] == doctest::Approx(want).epsilon(1e-4));
      }
    }
  }
}
