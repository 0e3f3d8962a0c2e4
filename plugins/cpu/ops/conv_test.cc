// CPU convolution kernels (conv1d, conv2d, conv_backward, conv_transpose2d):
// hand-computed values, the float32 (oneDNN) path against the float64
// (direct loop) path, adjoint identities for the backward and transposed
// ops, empty shapes and refused launches.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "hal/sdk/kernel/half.hpp"
#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

namespace {

int64_t count(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<double> values(int64_t n, int seed) {
  std::vector<double> v(static_cast<size_t>(n));
  uint32_t x = 2463534242u + static_cast<uint32_t>(seed) * 7919u;
  for (auto& e : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    e = static_cast<double>(x % 2001) / 1000.0 - 1.0;
  }
  return v;
}

// The same values as a float32 and a float64 tensor.
struct Pair {
  DeviceTensor f32, f64;
};
Pair pair(OpTester& t, const std::vector<int64_t>& shape, int seed) {
  std::vector<double> d = values(count(shape), seed);
  std::vector<float> f(d.begin(), d.end());
  for (size_t i = 0; i < d.size(); ++i) d[i] = f[i];
  return {t.tensor(shape, f), t.tensor<double>(shape, d, HAL_DTYPE_FLOAT64)};
}
Pair empty_pair(OpTester& t, const std::vector<int64_t>& shape) {
  return {t.empty(HAL_DTYPE_FLOAT32, shape), t.empty(HAL_DTYPE_FLOAT64, shape)};
}

// Runs OP in float32 and float64 and checks the outputs agree.
void run_both(OpTester& t, const char* op, const std::vector<Pair*>& in, const std::vector<Pair*>& out,
              const std::vector<Attr>& attrs, double tol = 1e-4) {
  std::vector<const hal::TensorView*> i32, i64, o32, o64;
  for (Pair* p : in) i32.push_back(&p->f32.view), i64.push_back(&p->f64.view);
  for (Pair* p : out) o32.push_back(&p->f32.view), o64.push_back(&p->f64.view);
  t.run(op, i32, o32, attrs);
  t.run(op, i64, o64, attrs);
  for (Pair* p : out) {
    std::vector<float> a = t.read<float>(p->f32);
    std::vector<double> b = t.read<double>(p->f64);
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k)
      CHECK_MESSAGE(std::fabs(a[k] - b[k]) <= tol * (1 + std::fabs(b[k])), op, " at ", k, ": ", a[k], " vs ", b[k]);
  }
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

void expect_error(OpTester& t, const char* op, const std::vector<const hal::TensorView*>& in,
                  const std::vector<const hal::TensorView*>& out, const std::vector<Attr>& attrs,
                  const std::string& mention, const DeviceTensor& untouched) {
  t.expect_refused(op, in, out, attrs, {mention}, std::nullopt, {&untouched});
}

}  // namespace

TEST_CASE("conv2d: hand-computed values with bias, stride and padding") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto w = t.tensor({1, 1, 2, 2}, {1, 0, 0, 1});
  auto b = t.tensor({1}, {10});
  auto y = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 2, 2});
  t.run("conv2d", {&x.view, &w.view, &b.view}, {&y.view});
  CHECK(t.read<float>(y) == std::vector<float>{16, 18, 22, 24});
  t.run("conv2d", {&x.view, &w.view}, {&y.view}, {Attr::ints("stride", {2}), Attr::ints("padding", {1, 1})});
  CHECK(t.read<float>(y) == std::vector<float>{1, 3, 7, 14});
  // Unbatched [C, H, W].
  hal::TensorView xu = x.view;
  xu.shape = {1, 3, 3};
  xu.strides = {9, 3, 1};
  auto yu = t.empty(HAL_DTYPE_FLOAT32, {1, 2, 2});
  t.run("conv2d", {&xu, &w.view, &b.view}, {&yu.view});
  CHECK(t.read<float>(yu) == std::vector<float>{16, 18, 22, 24});
}

TEST_CASE("strided bias and grad_bias are read and written through their stride") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto w = t.tensor({2, 1, 2, 2}, {1, 0, 0, 1, 0, 0, 0, 0});
  auto b = t.tensor({3}, {10, 99, 20});
  hal::TensorView bs = b.view;
  bs.shape = {2};
  bs.strides = {2};
  auto y = t.empty(HAL_DTYPE_FLOAT32, {1, 2, 2, 2});
  t.run("conv2d", {&x.view, &w.view, &bs}, {&y.view});
  CHECK(t.read<float>(y) == std::vector<float>{16, 18, 22, 24, 20, 20, 20, 20});
  auto gx = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 3, 3});
  auto gw = t.empty(HAL_DTYPE_FLOAT32, {2, 1, 2, 2});
  auto gb = t.tensor({3}, {7, 7, 7});
  hal::TensorView gbs = gb.view;
  gbs.shape = {2};
  gbs.strides = {2};
  t.run("conv_backward", {&y.view, &x.view, &w.view}, {&gx.view, &gw.view, &gbs});
  CHECK(t.read<float>(gb) == std::vector<float>{80, 7, 80});
}

TEST_CASE("conv2d and conv1d: float32 (oneDNN) agrees with float64 loops, float16 too") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  Pair x = pair(t, {2, 4, 9, 8}, 1), w = pair(t, {6, 2, 3, 2}, 2), b = pair(t, {6}, 3);
  // (9 + 2 - 2·2 - 1) / 2 + 1 = 4, (8 + 2 - 1·1 - 1) / 2 + 1 = 5
  Pair y = empty_pair(t, {2, 6, 4, 5});
  std::vector<Attr> attrs{Attr::ints("stride", {2, 2}), Attr::ints("padding", {1}), Attr::ints("dilation", {2, 1}),
                          Attr::i("groups", 2)};
  run_both(t, "conv2d", {&x, &w, &b}, {&y}, attrs);

  // A transposed (non-contiguous) input: [N, C, W, H] memory seen as [N, C, H, W].
  Pair xt = pair(t, {2, 4, 8, 9}, 4);
  for (auto* v : {&xt.f32.view, &xt.f64.view}) {
    v->shape = {2, 4, 9, 8};
    v->strides = {288, 72, 1, 9};
  }
  run_both(t, "conv2d", {&xt, &w, &b}, {&y}, attrs);

  Pair x1 = pair(t, {3, 4, 11}, 5), w1 = pair(t, {6, 2, 3}, 6);
  Pair y1 = empty_pair(t, {3, 6, 6});  // (11 + 2 - 3) / 2 + 1
  run_both(t, "conv1d", {&x1, &w1}, {&y1},
           {Attr::ints("stride", {2}), Attr::ints("padding", {1}), Attr::i("groups", 2)});

  std::vector<float> xf = t.read<float>(x.f32), wf = t.read<float>(w.f32), yf = t.read<float>(y.f32);
  (void)yf;
  std::vector<uint16_t> xh, wh;
  for (float v : xf) xh.push_back(hal::sdk::kernel::Half(v).bits);
  for (float v : wf) wh.push_back(hal::sdk::kernel::Half(v).bits);
  auto x16 = t.tensor<uint16_t>({2, 4, 9, 8}, xh, HAL_DTYPE_FLOAT16);
  auto w16 = t.tensor<uint16_t>({6, 2, 3, 2}, wh, HAL_DTYPE_FLOAT16);
  auto y16 = t.empty(HAL_DTYPE_FLOAT16, {2, 6, 4, 5});
  t.run("conv2d", {&x.f32.view, &w.f32.view}, {&y.f32.view}, attrs);
  t.run("conv2d", {&x16.view, &w16.view}, {&y16.view}, attrs);
  std::vector<float> ref = t.read<float>(y.f32);
  std::vector<uint16_t> got = t.read<uint16_t>(y16);
  for (size_t i = 0; i < ref.size(); ++i)
    CHECK(std::fabs(hal::sdk::kernel::Half::to_float(got[i]) - ref[i]) <= 2e-2 * (1 + std::fabs(ref[i])));
}

TEST_CASE("conv_backward: adjoint identities and float32 against float64") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  for (int spatial : {1, 2}) {
    CAPTURE(spatial);
    std::vector<int64_t> xs = spatial == 2 ? std::vector<int64_t>{2, 4, 7, 6} : std::vector<int64_t>{2, 4, 13};
    std::vector<int64_t> ws = spatial == 2 ? std::vector<int64_t>{6, 2, 3, 2} : std::vector<int64_t>{6, 2, 3};
    std::vector<int64_t> ys = spatial == 2 ? std::vector<int64_t>{2, 6, 4, 4} : std::vector<int64_t>{2, 6, 7};
    std::vector<Attr> attrs{Attr::ints("stride", {2}), Attr::ints("padding", {1}), Attr::i("groups", 2)};
    Pair x = pair(t, xs, 11), w = pair(t, ws, 12), gy = pair(t, ys, 13);
    Pair gx = empty_pair(t, xs), gw = empty_pair(t, ws), gb = empty_pair(t, {6}), y = empty_pair(t, ys);
    run_both(t, "conv_backward", {&gy, &x, &w}, {&gx, &gw, &gb}, attrs);
    t.run(spatial == 2 ? "conv2d" : "conv1d", {&x.f64.view, &w.f64.view}, {&y.f64.view}, attrs);
    // <gy, conv(x, w)> = <gx, x> = <gw, w> (conv is linear in x and in w).
    std::vector<double> gyv = t.read<double>(gy.f64), yv = t.read<double>(y.f64);
    double lhs = dot(gyv, yv);
    CHECK(dot(t.read<double>(gx.f64), t.read<double>(x.f64)) == doctest::Approx(lhs).epsilon(1e-10));
    CHECK(dot(t.read<double>(gw.f64), t.read<double>(w.f64)) == doctest::Approx(lhs).epsilon(1e-10));
    std::vector<double> gbv = t.read<double>(gb.f64);
    int64_t per = count(ys) / 12;
    for (int64_t c = 0; c < 6; ++c) {
      double s = 0;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t i = 0; i < per; ++i) s += gyv[(n * 6 + c) * per + i];
      CHECK(gbv[c] == doctest::Approx(s).epsilon(1e-12));
    }
  }
}

TEST_CASE("conv_transpose2d is the adjoint of conv2d, output_padding and bias") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  std::vector<Attr> conv_attrs{Attr::ints("stride", {2, 2}), Attr::ints("padding", {1, 1}), Attr::i("groups", 2),
                               Attr::ints("dilation", {1, 2})};
  // conv: x [2, 4, 7, 10] (w [6, 2, 3, 2]) -> y [2, 6, 4, 5]; transposed back: [2, 4, 7, 9] + output_padding [0, 1].
  Pair x = pair(t, {2, 4, 7, 10}, 21), w = pair(t, {6, 2, 3, 2}, 22), y = pair(t, {2, 6, 4, 5}, 23);
  Pair cy = empty_pair(t, {2, 6, 4, 5}), tx = empty_pair(t, {2, 4, 7, 10});
  std::vector<Attr> t_attrs = conv_attrs;
  t_attrs.push_back(Attr::ints("output_padding", {0, 1}));
  run_both(t, "conv_transpose2d", {&y, &w}, {&tx}, t_attrs);
  t.run("conv2d", {&x.f64.view, &w.f64.view}, {&cy.f64.view}, conv_attrs);
  double lhs = dot(t.read<double>(cy.f64), t.read<double>(y.f64));
  CHECK(dot(t.read<double>(x.f64), t.read<double>(tx.f64)) == doctest::Approx(lhs).epsilon(1e-10));

  auto xs = t.tensor({1, 1, 2, 2}, {1, 2, 3, 4});
  auto ws = t.tensor({1, 1, 2, 2}, {1, 1, 1, 1});
  auto bs = t.tensor({1}, {0.5f});
  auto ys = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 3, 3});
  t.run("conv_transpose2d", {&xs.view, &ws.view, &bs.view}, {&ys.view});
  CHECK(t.read<float>(ys) == std::vector<float>{1.5f, 3.5f, 2.5f, 4.5f, 10.5f, 6.5f, 3.5f, 7.5f, 4.5f});
}

TEST_CASE("convolutions with empty batches or channels") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x0 = t.empty(HAL_DTYPE_FLOAT32, {0, 3, 5, 5});
  auto w = t.tensor({2, 3, 3, 3}, std::vector<float>(54, 1.0f));
  auto y0 = t.empty(HAL_DTYPE_FLOAT32, {0, 2, 3, 3});
  t.run("conv2d", {&x0.view, &w.view}, {&y0.view});
  auto gx0 = t.empty(HAL_DTYPE_FLOAT32, {0, 3, 5, 5});
  auto gw = t.tensor({2, 3, 3, 3}, std::vector<float>(54, 7.0f));
  auto gb = t.tensor({2}, {7, 7});
  t.run("conv_backward", {&y0.view, &x0.view, &w.view}, {&gx0.view, &gw.view, &gb.view});
  CHECK(t.read<float>(gw) == std::vector<float>(54, 0.0f));
  CHECK(t.read<float>(gb) == std::vector<float>{0, 0});
  // No input channels: the output is the bias.
  auto xc = t.empty(HAL_DTYPE_FLOAT32, {1, 0, 4, 4});
  auto wc = t.empty(HAL_DTYPE_FLOAT32, {2, 0, 3, 3});
  auto b = t.tensor({2}, {1.5f, -2});
  auto yc = t.empty(HAL_DTYPE_FLOAT32, {1, 2, 2, 2});
  t.run("conv2d", {&xc.view, &wc.view, &b.view}, {&yc.view});
  CHECK(t.read<float>(yc) == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f, -2, -2, -2, -2});
}

TEST_CASE("refused convolutions name the op, the argument and the values") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({1, 4, 5, 5}, std::vector<float>(100, 1.0f));
  auto w = t.tensor({2, 3, 3, 3}, std::vector<float>(54, 1.0f));
  auto w4 = t.tensor({2, 4, 3, 3}, std::vector<float>(72, 1.0f));
  auto y = t.tensor({1, 2, 3, 3}, std::vector<float>(18, 5.0f));
  expect_error(t, "conv2d", {&x.view, &w.view}, {&y.view}, {}, "has 4 channels but weight [2, 3, 3, 3]", y);
  auto w3 = t.tensor({3, 2, 3, 3}, std::vector<float>(54, 1.0f));
  expect_error(t, "conv2d", {&x.view, &w3.view}, {&y.view}, {Attr::i("groups", 2)},
               "not divisible by groups = 2", y);
  expect_error(t, "conv2d", {&x.view, &w4.view}, {&y.view}, {Attr::i("groups", 0)}, "'groups' = 0 must be positive", y);
  expect_error(t, "conv2d", {&x.view, &w4.view}, {&y.view}, {Attr::ints("stride", {0, 1})},
               "attribute 'stride' = [0, 1] must be positive", y);
  expect_error(t, "conv2d", {&x.view, &w4.view}, {&y.view}, {Attr::ints("padding", {-1})},
               "attribute 'padding' = [-1, -1] must not be negative", y);
  expect_error(t, "conv2d", {&x.view, &w4.view}, {&y.view}, {Attr::ints("dilation", {1, 1, 1})},
               "attribute 'dilation' = [1, 1, 1] must hold 1 or 2 values", y);
  expect_error(t, "conv2d", {&x.view, &w4.view}, {&y.view}, {Attr::ints("dilation", {3})},
               "kernel size 7 (weight [2, 4, 3, 3], dilation 3) is larger than the padded input size 5", y);
  expect_error(t, "conv2d", {&x.view, &w4.view}, {&y.view}, {Attr::s("stride", "1")}, "attribute 'stride' must be ints", y);
  expect_error(t, "conv2d", {&x.view, &w4.view}, {&y.view}, {Attr::i("stides", 1)}, "unknown attribute 'stides'", y);
  auto bias = t.tensor({3}, {1, 2, 3});
  expect_error(t, "conv2d", {&x.view, &w4.view, &bias.view}, {&y.view}, {}, "input 'bias' has shape [3] but must be [2]", y);
  auto x3 = t.tensor({4, 5}, std::vector<float>(20, 1.0f));
  expect_error(t, "conv2d", {&x3.view, &w4.view}, {&y.view}, {}, "input 'input' must have rank 3 or 4 but has shape [4, 5]", y);
  auto gy = t.tensor({1, 2, 4, 3}, std::vector<float>(24, 1.0f));
  auto gx = t.tensor({1, 4, 5, 5}, std::vector<float>(100, 5.0f));
  auto gw = t.tensor({2, 4, 3, 3}, std::vector<float>(72, 5.0f));
  auto gb = t.tensor({2}, {5, 5});
  expect_error(t, "conv_backward", {&gy.view, &x.view, &w4.view}, {&gx.view, &gw.view, &gb.view}, {},
               "input 'grad_output' has shape [1, 2, 4, 3] but the forward output is [1, 2, 3, 3]", gx);
  auto tw = t.tensor({4, 1, 3, 3}, std::vector<float>(36, 1.0f));
  auto ty = t.tensor({1, 1, 11, 11}, std::vector<float>(121, 5.0f));
  expect_error(t, "conv_transpose2d", {&x.view, &tw.view}, {&ty.view},
               {Attr::ints("stride", {2}), Attr::ints("output_padding", {2})},
               "'output_padding' = 2 must be smaller than stride (2) or dilation (1)", ty);
}
