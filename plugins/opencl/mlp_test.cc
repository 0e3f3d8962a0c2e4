// A small MLP's forward and backward pass built from catalog ops through
// the C++ runtime API (no framework): the same computation on the OpenCL
// device and on the CPU plugin must agree.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "hal/testing/op_test_util.hpp"

namespace {

using hal::Attr;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

struct MlpResult {
  float loss;
  std::vector<float> logits, grad_w1, grad_b1, grad_w2, grad_b2, new_w1;
};

// x [N, I] -> linear(w1 [H, I], b1) -> relu -> linear(w2 [C, H], b2) ->
// cross_entropy(target); then the backward pass and one SGD step on w1.
MlpResult run_mlp(const std::string& plugin) {
  const int64_t N = 32, I = 64, H = 128, C = 10;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto randn = [&](size_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng) * scale;
    return v;
  };
  std::vector<float> x = randn(N * I, 1.f), w1 = randn(H * I, 0.1f), b1 = randn(H, 0.1f), w2 = randn(C * H, 0.1f),
                     b2 = randn(C, 0.1f);
  std::vector<int64_t> target(N);
  for (int64_t i = 0; i < N; ++i) target[i] = (i * 7) % C;

  OpTester t(plugin);
  DeviceTensor X = t.tensor({N, I}, x), W1 = t.tensor({H, I}, w1), B1 = t.tensor({H}, b1), W2 = t.tensor({C, H}, w2),
               B2 = t.tensor({C}, b2), T = t.tensor<int64_t>({N}, target, HAL_DTYPE_INT64);
  DeviceTensor Z1 = t.empty(HAL_DTYPE_FLOAT32, {N, H}), A1 = t.empty(HAL_DTYPE_FLOAT32, {N, H}),
               Z2 = t.empty(HAL_DTYPE_FLOAT32, {N, C}), L = t.empty(HAL_DTYPE_FLOAT32, {});
  hal::TensorView none;
  t.run("linear", {&X.view, &W1.view, &B1.view}, {&Z1.view});
  t.run("relu", {&Z1.view}, {&A1.view});
  t.run("linear", {&A1.view, &W2.view, &B2.view}, {&Z2.view});
  t.run("cross_entropy", {&Z2.view, &T.view, nullptr}, {&L.view});

  DeviceTensor one = t.tensor({}, std::vector<float>{1.f});
  DeviceTensor dZ2 = t.empty(HAL_DTYPE_FLOAT32, {N, C}), dA1 = t.empty(HAL_DTYPE_FLOAT32, {N, H}),
               dW2 = t.empty(HAL_DTYPE_FLOAT32, {C, H}), dB2 = t.empty(HAL_DTYPE_FLOAT32, {C}),
               dZ1 = t.empty(HAL_DTYPE_FLOAT32, {N, H}), dX = t.empty(HAL_DTYPE_FLOAT32, {N, I}),
               dW1 = t.empty(HAL_DTYPE_FLOAT32, {H, I}), dB1 = t.empty(HAL_DTYPE_FLOAT32, {H});
  t.run("cross_entropy_backward", {&one.view, &Z2.view, &T.view, nullptr}, {&dZ2.view});
  t.run("linear_backward", {&dZ2.view, &A1.view, &W2.view}, {&dA1.view, &dW2.view, &dB2.view});
  t.run("relu_backward", {&dA1.view, &Z1.view}, {&dZ1.view});
  t.run("linear_backward", {&dZ1.view, &X.view, &W1.view}, {&dX.view, &dW1.view, &dB1.view});
  // SGD: w1 -= 0.1 * grad_w1, in place.
  t.run("sub", {&W1.view, &dW1.view}, {&W1.view}, {Attr::scalar("alpha", 0.1)});

  return {t.read<float>(L)[0], t.read<float>(Z2), t.read<float>(dW1), t.read<float>(dB1),
          t.read<float>(dW2),  t.read<float>(dB2), t.read<float>(W1)};
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::abs(double(got[i]) - want[i]) / (1e-4 + std::abs(double(want[i])));
    worst = std::max(worst, err);
  }
  CHECK_MESSAGE(worst < 1e-3, what, ": worst relative error ", worst);
}

}  // namespace

TEST_CASE("opencl: an MLP's forward and backward pass matches the CPU plugin") {
  MlpResult cl = run_mlp(HAL_TEST_OPENCL_PLUGIN);
  MlpResult cpu = run_mlp(HAL_TEST_CPU_PLUGIN);
  CHECK(std::isfinite(cl.loss));
  CHECK(cl.loss == doctest::Approx(cpu.loss).epsilon(1e-5));
  check_close(cl.logits, cpu.logits, "logits");
  check_close(cl.grad_w2, cpu.grad_w2, "grad w2");
  check_close(cl.grad_b2, cpu.grad_b2, "grad b2");
  check_close(cl.grad_w1, cpu.grad_w1, "grad w1");
  check_close(cl.grad_b1, cpu.grad_b1, "grad b1");
  check_close(cl.new_w1, cpu.new_w1, "w1 after one SGD step");
}
