// CPU pooling kernels (max_pool2d, avg_pool2d, adaptive_avg_pool2d and their
// backward ops): hand-computed values, strided inputs, other dtypes, empty
// batches and refused launches.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "hal/sdk/kernel/half.hpp"
#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

namespace {

std::vector<float> iota(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

void expect_error(OpTester& t, const char* op, const std::vector<const hal::TensorView*>& in,
                  const std::vector<const hal::TensorView*>& out, const std::vector<Attr>& attrs,
                  const std::string& mention, const DeviceTensor& untouched) {
  t.expect_refused(op, in, out, attrs, {mention}, std::nullopt, {&untouched});
}

}  // namespace

TEST_CASE("max_pool2d: values, flat indices, ceil_mode, NaN and strided input") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({1, 1, 4, 4}, iota(16));
  auto y = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 2, 2});
  auto idx = t.empty(HAL_DTYPE_INT64, {1, 1, 2, 2});
  t.run("max_pool2d", {&x.view}, {&y.view, &idx.view}, {Attr::ints("kernel_size", {2})});
  CHECK(t.read<float>(y) == std::vector<float>{5, 7, 13, 15});
  CHECK(t.read<int64_t>(idx) == std::vector<int64_t>{5, 7, 13, 15});

  // Transposed view: element (h, w) is 4w + h.
  hal::TensorView xt = x.view;
  xt.strides = {16, 16, 1, 4};
  t.run("max_pool2d", {&xt}, {&y.view, &idx.view}, {Attr::ints("kernel_size", {2})});
  CHECK(t.read<float>(y) == std::vector<float>{5, 13, 7, 15});
  CHECK(t.read<int64_t>(idx) == std::vector<int64_t>{5, 7, 13, 15});

  auto x5 = t.tensor({1, 5, 5}, iota(25));  // unbatched
  auto y3 = t.empty(HAL_DTYPE_FLOAT32, {1, 3, 3});
  auto i3 = t.empty(HAL_DTYPE_INT64, {1, 3, 3});
  t.run("max_pool2d", {&x5.view}, {&y3.view, &i3.view}, {Attr::ints("kernel_size", {2, 2}), Attr::b("ceil_mode", true)});
  CHECK(t.read<float>(y3) == std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24});
  CHECK(t.read<int64_t>(i3) == std::vector<int64_t>{6, 8, 9, 16, 18, 19, 21, 23, 24});

  std::vector<float> with_nan = iota(16);
  with_nan[0] = std::numeric_limits<float>::quiet_NaN();
  auto xn = t.tensor({1, 1, 4, 4}, with_nan);
  t.run("max_pool2d", {&xn.view}, {&y.view, &idx.view}, {Attr::ints("kernel_size", {2})});
  CHECK(std::isnan(t.read<float>(y)[0]));
  CHECK(t.read<int64_t>(idx)[0] == 0);
  // NaNs past the first tap: the last NaN of the window wins, a larger number after it does not (PyTorch's rule).
  std::vector<float> nans = iota(16);
  nans[1] = nans[4] = std::numeric_limits<float>::quiet_NaN();
  nans[5] = 100;
  auto xm = t.tensor({1, 1, 4, 4}, nans);
  t.run("max_pool2d", {&xm.view}, {&y.view, &idx.view}, {Attr::ints("kernel_size", {2})});
  CHECK(std::isnan(t.read<float>(y)[0]));
  CHECK(t.read<int64_t>(idx)[0] == 4);

  // Dilation 2, padding 1, stride 1 on 4x4: out (4 + 2 - 3) / 1 + 1 = 4.
  auto y4 = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 4, 4});
  auto i4 = t.empty(HAL_DTYPE_INT64, {1, 1, 4, 4});
  t.run("max_pool2d", {&x.view}, {&y4.view, &i4.view},
        {Attr::ints("kernel_size", {2}), Attr::ints("stride", {1}), Attr::ints("padding", {1}), Attr::ints("dilation", {2})});
  CHECK(t.read<float>(y4) == std::vector<float>{5, 6, 7, 6, 9, 10, 11, 10, 13, 14, 15, 14, 9, 10, 11, 10});
}

TEST_CASE("max_pool2d in float64 and float16, empty batches") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  std::vector<double> xd(16);
  std::vector<uint16_t> xh(16);
  for (int i = 0; i < 16; ++i) xd[i] = 15 - i, xh[i] = hal::sdk::kernel::Half(static_cast<float>(15 - i)).bits;
  auto x64 = t.tensor<double>({1, 1, 4, 4}, xd, HAL_DTYPE_FLOAT64);
  auto y64 = t.empty(HAL_DTYPE_FLOAT64, {1, 1, 2, 2});
  auto idx = t.empty(HAL_DTYPE_INT64, {1, 1, 2, 2});
  t.run("max_pool2d", {&x64.view}, {&y64.view, &idx.view}, {Attr::ints("kernel_size", {2})});
  CHECK(t.read<double>(y64) == std::vector<double>{15, 13, 7, 5});
  CHECK(t.read<int64_t>(idx) == std::vector<int64_t>{0, 2, 8, 10});
  auto x16 = t.tensor<uint16_t>({1, 1, 4, 4}, xh, HAL_DTYPE_FLOAT16);
  auto y16 = t.empty(HAL_DTYPE_FLOAT16, {1, 1, 2, 2});
  t.run("max_pool2d", {&x16.view}, {&y16.view, &idx.view}, {Attr::ints("kernel_size", {2})});
  std::vector<float> got;
  for (uint16_t h : t.read<uint16_t>(y16)) got.push_back(hal::sdk::kernel::Half::to_float(h));
  CHECK(got == std::vector<float>{15, 13, 7, 5});

  auto x0 = t.empty(HAL_DTYPE_FLOAT32, {0, 3, 4, 4});
  auto y0 = t.empty(HAL_DTYPE_FLOAT32, {0, 3, 2, 2});
  auto i0 = t.empty(HAL_DTYPE_INT64, {0, 3, 2, 2});
  t.run("max_pool2d", {&x0.view}, {&y0.view, &i0.view}, {Attr::ints("kernel_size", {2})});
  t.run("avg_pool2d", {&x0.view}, {&y0.view}, {Attr::ints("kernel_size", {2})});
  t.run("adaptive_avg_pool2d", {&x0.view}, {&y0.view}, {Attr::ints("output_size", {2})});
}

TEST_CASE("max_pool2d_backward accumulates into the argmax and checks indices") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({1, 1, 3, 3}, {0, 0, 0, 0, 9, 0, 0, 0, 0});
  auto y = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 2, 2});
  auto idx = t.empty(HAL_DTYPE_INT64, {1, 1, 2, 2});
  std::vector<Attr> attrs{Attr::ints("kernel_size", {2}), Attr::ints("stride", {1})};
  t.run("max_pool2d", {&x.view}, {&y.view, &idx.view}, attrs);
  auto gy = t.tensor({1, 1, 2, 2}, {1, 2, 3, 4});
  auto gx = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 3, 3});
  t.run("max_pool2d_backward", {&gy.view, &x.view, &idx.view}, {&gx.view}, attrs);
  CHECK(t.read<float>(gx) == std::vector<float>{0, 0, 0, 0, 10, 0, 0, 0, 0});

  auto bad = t.tensor<int64_t>({1, 1, 2, 2}, {4, 4, 9, 4}, HAL_DTYPE_INT64);
  auto sentinel = t.tensor({1, 1, 3, 3}, std::vector<float>(9, 7.0f));
  try {
    t.run("max_pool2d_backward", {&gy.view, &x.view, &bad.view}, {&sentinel.view}, attrs);
    FAIL("an out-of-range index was accepted");
  } catch (const hal::Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find("max_pool2d_backward: index 9 in 'indices' at position 2 is out of range [0, 9)") !=
                      std::string::npos,
                  e.what());
  }
  CHECK(t.read<float>(sentinel) == std::vector<float>(9, 7.0f));
}

TEST_CASE("avg_pool2d: padding, count_include_pad, divisor_override, float64 and backward") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({1, 1, 4, 4}, iota(16));
  auto y = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 2, 2});
  t.run("avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("kernel_size", {2})});
  CHECK(t.read<float>(y) == std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f});
  auto y3 = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 3, 3});
  std::vector<Attr> padded{Attr::ints("kernel_size", {2}), Attr::ints("padding", {1})};
  t.run("avg_pool2d", {&x.view}, {&y3.view}, padded);
  CHECK(t.read<float>(y3) == std::vector<float>{0, 0.75f, 0.75f, 3, 7.5f, 4.5f, 3, 6.75f, 3.75f});
  std::vector<Attr> exclude = padded;
  exclude.push_back(Attr::b("count_include_pad", false));
  t.run("avg_pool2d", {&x.view}, {&y3.view}, exclude);
  CHECK(t.read<float>(y3) == std::vector<float>{0, 1.5f, 3, 6, 7.5f, 9, 12, 13.5f, 15});
  std::vector<Attr> divisor = padded;
  divisor.push_back(Attr::i("divisor_override", 3));
  t.run("avg_pool2d", {&x.view}, {&y3.view}, divisor);
  CHECK(t.read<float>(y3) == std::vector<float>{0, 1, 1, 4, 10, 6, 4, 9, 5});

  std::vector<double> xd(16);
  for (int i = 0; i < 16; ++i) xd[i] = i;
  auto x64 = t.tensor<double>({1, 1, 4, 4}, xd, HAL_DTYPE_FLOAT64);
  auto y64 = t.empty(HAL_DTYPE_FLOAT64, {1, 1, 3, 3});
  t.run("avg_pool2d", {&x64.view}, {&y64.view}, exclude);
  CHECK(t.read<double>(y64) == std::vector<double>{0, 1.5, 3, 6, 7.5, 9, 12, 13.5, 15});

  auto gy = t.tensor({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  auto gx = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 4, 4});
  t.run("avg_pool2d_backward", {&gy.view, &x.view}, {&gx.view}, exclude);
  // Each input element is in exactly one window; its share is 1 / (valid count).
  CHECK(t.read<float>(gx) == std::vector<float>{1, 0.5f, 0.5f, 1, 0.5f, 0.25f, 0.25f, 0.5f, 0.5f, 0.25f, 0.25f, 0.5f,
                                                1, 0.5f, 0.5f, 1});
}

TEST_CASE("adaptive_avg_pool2d and its backward with overlapping windows") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({1, 1, 4, 4}, iota(16));
  auto y = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 3, 3});
  t.run("adaptive_avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("output_size", {3})});
  CHECK(t.read<float>(y) == std::vector<float>{2.5f, 3.5f, 4.5f, 6.5f, 7.5f, 8.5f, 10.5f, 11.5f, 12.5f});
  auto y1 = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 1, 2});
  t.run("adaptive_avg_pool2d", {&x.view}, {&y1.view}, {Attr::ints("output_size", {1, 2})});
  CHECK(t.read<float>(y1) == std::vector<float>{6.5f, 8.5f});
  auto gy = t.tensor({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  auto gx = t.empty(HAL_DTYPE_FLOAT32, {1, 1, 4, 4});
  t.run("adaptive_avg_pool2d_backward", {&gy.view, &x.view}, {&gx.view});
  std::vector<float> want;
  const float rc[4] = {1, 2, 2, 1};
  for (float r : rc)
    for (float c : rc) want.push_back(r * c / 4);
  CHECK(t.read<float>(gx) == want);
}

TEST_CASE("refused pooling launches name the op, the argument and the values") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({1, 1, 4, 4}, iota(16));
  auto y = t.tensor({1, 1, 2, 2}, {7, 7, 7, 7});
  auto idx = t.tensor<int64_t>({1, 1, 2, 2}, {0, 0, 0, 0}, HAL_DTYPE_INT64);
  expect_error(t, "avg_pool2d", {&x.view}, {&y.view}, {}, "missing required attribute 'kernel_size'", y);
  expect_error(t, "avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("kernel_size", {0, 2})},
               "attribute 'kernel_size' = [0, 2] must be positive", y);
  expect_error(t, "avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("kernel_size", {2}), Attr::ints("stride", {-1})},
               "attribute 'stride' = [-1, -1] must be positive", y);
  expect_error(t, "avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("kernel_size", {3}), Attr::ints("padding", {2})},
               "attribute 'padding' = 2 must be at most half the kernel size 3", y);
  expect_error(t, "avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("kernel_size", {5})},
               "kernel size 5 is larger than the padded input size 4", y);
  expect_error(t, "avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("kernel_size", {2}), Attr::i("divisor_override", -1)},
               "attribute 'divisor_override' = -1 must not be negative", y);
  expect_error(t, "max_pool2d", {&x.view}, {&y.view, &idx.view}, {Attr::ints("kernel_size", {2}), Attr::ints("dilation", {0})},
               "attribute 'dilation' = [0, 0] must be positive", y);
  expect_error(t, "max_pool2d", {&x.view}, {&y.view, &y.view}, {Attr::ints("kernel_size", {2})},
               "output 'indices' has dtype float32 but must be int64", y);
  auto flat = t.tensor({4, 4}, iota(16));
  expect_error(t, "max_pool2d", {&flat.view}, {&y.view, &idx.view}, {Attr::ints("kernel_size", {2})},
               "input 'self' must have rank 3 to 4 but has shape [4, 4]", y);
  auto gy = t.tensor({1, 1, 3, 2}, std::vector<float>(6, 1.0f));
  auto gx = t.tensor({1, 1, 4, 4}, std::vector<float>(16, 7.0f));
  expect_error(t, "avg_pool2d_backward", {&gy.view, &x.view}, {&gx.view}, {Attr::ints("kernel_size", {2})},
               "input 'grad_output' has shape [1, 1, 3, 2] but the forward output is [1, 1, 2, 2]", gx);
  expect_error(t, "adaptive_avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("output_size", {-1, 2})},
               "attribute 'output_size' = [-1, 2] must not be negative", y);
  expect_error(t, "adaptive_avg_pool2d", {&x.view}, {&y.view}, {Attr::ints("output_size", {1, 2, 3})},
               "attribute 'output_size' = [1, 2, 3] must hold 1 or 2 values", y);
}
