// CPU elementwise kernels through the runtime's op API: a few results and
// the SDK's validation (hal-conformance covers every op and dtype).
#include <doctest/doctest.h>

#include <cmath>

#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::testing::OpTester;

TEST_CASE("add broadcasts, applies alpha and runs in place") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = t.tensor({3}, {10, 20, 30});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  t.run("add", {&a.view, &b.view}, {&out.view}, {Attr::f("alpha", 2.0)});
  CHECK(t.read<float>(out) == std::vector<float>{21, 42, 63, 24, 45, 66});
  t.run("add", {&a.view, &b.view}, {&a.view});  // exact alias: in place
  CHECK(t.read<float>(a) == std::vector<float>{11, 22, 33, 14, 25, 36});
}

TEST_CASE("binary ops promote int32 with float32 to float32") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor<int32_t>({3}, {1, 2, 3}, HAL_DTYPE_INT32);
  auto b = t.tensor({3}, {0.5f, 0.25f, 2.0f});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {3});
  t.run("mul", {&a.view, &b.view}, {&out.view});
  CHECK(t.read<float>(out) == std::vector<float>{0.5f, 0.5f, 6.0f});
}

TEST_CASE("a non-contiguous (transposed) input is read through its strides") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  hal::TensorView at = a.view;
  at.shape = {3, 2};
  at.strides = {1, 3};
  auto out = t.empty(HAL_DTYPE_FLOAT32, {3, 2});
  t.run("neg", {&at}, {&out.view});
  CHECK(t.read<float>(out) == std::vector<float>{-1, -4, -2, -5, -3, -6});
}

TEST_CASE("refused launches name the op and the values and leave outputs untouched") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = t.tensor({4}, {1, 2, 3, 4});
  auto out = t.tensor({2, 3}, {7, 7, 7, 7, 7, 7});
  auto expect_error = [&](const std::vector<const hal::TensorView*>& in, const std::vector<const hal::TensorView*>& o,
                          std::vector<Attr> attrs, const char* mention) {
    try {
      t.run("add", in, o, attrs);
      FAIL("launch was accepted");
    } catch (const hal::Error& e) {
      CHECK(std::string(e.what()).find("add") != std::string::npos);
      CHECK_MESSAGE(std::string(e.what()).find(mention) != std::string::npos, e.what());
    }
    CHECK(t.read<float>(out) == std::vector<float>{7, 7, 7, 7, 7, 7});
  };
  expect_error({&a.view, &b.view}, {&out.view}, {}, "does not broadcast");
  expect_error({&a.view, &a.view}, {&out.view}, {Attr::f("beta", 1.0)}, "unknown attribute 'beta'");
  expect_error({&a.view, &a.view}, {&out.view}, {Attr::s("alpha", "x")}, "attribute 'alpha' must be scalar");
  hal::TensorView wrong_shape = out.view;
  wrong_shape.shape = {3, 2};
  expect_error({&a.view, &a.view}, {&wrong_shape}, {}, "has shape [3, 2] but must be [2, 3]");
  hal::TensorView past_end = a.view;
  past_end.byte_offset = 8;
  expect_error({&past_end, &a.view}, {&out.view}, {}, "input 0 (shape [2, 3], strides [], float32) needs bytes [8, 32) but its buffer has 24 bytes");
  hal::TensorView negative = a.view;
  negative.shape = {-2, 3};
  expect_error({&negative, &a.view}, {&out.view}, {}, "negative size -2");
}
