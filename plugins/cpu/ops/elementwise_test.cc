// CPU elementwise kernels through the runtime's op API: a few results and
// the SDK's validation (hal-conformance covers every op and dtype).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hal/testing/op_test_util.hpp"
#include "plugins/cpu/ops/vector_math.hpp"

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

TEST_CASE("dense operands with broadcast scalars and rows: every element, over several chunks") {
  // 1000 elements: the chunked loop for stride-0 operands runs 4 chunks, the last partial.
  OpTester t(HAL_TEST_CPU_PLUGIN);
  std::vector<float> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.25f * static_cast<float>(i) - 100.0f;
    y[i] = 1.0f + 0.5f * static_cast<float>(i % 7);
  }
  auto a = t.tensor({1000}, x), b = t.tensor({1000}, y), c = t.tensor({}, {4.0f});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {1000});
  t.run("div", {&a.view, &c.view}, {&out.view});  // tensor / 0-dim tensor
  std::vector<float> got = t.read<float>(out);
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(got[i] == x[i] / 4.0f);
  t.run("addcdiv", {&a.view, &c.view, &b.view}, {&out.view}, {Attr::f("value", 0.5)});  // a + 0.5 * 4 / b
  got = t.read<float>(out);
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(got[i] == doctest::Approx(x[i] + 0.5f * 4.0f / y[i]));
  // A [4, 250] tensor times a [4, 1] column: a stride-0 operand in every row.
  auto m = t.tensor({4, 250}, x), col = t.tensor({4, 1}, {1.0f, -2.0f, 0.5f, 3.0f});
  auto prod = t.empty(HAL_DTYPE_FLOAT32, {4, 250});
  t.run("mul", {&m.view, &col.view}, {&prod.view});
  got = t.read<float>(prod);
  const float scale[4] = {1.0f, -2.0f, 0.5f, 3.0f};
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(got[i] == x[i] * scale[i / 250]);
  // sqrt, vectorised: exact (IEEE) on every element, NaN for negatives.
  t.run("sqrt", {&b.view}, {&out.view});
  got = t.read<float>(out);
  for (size_t i = 0; i < y.size(); ++i) REQUIRE(got[i] == std::sqrt(y[i]));
  t.run("sqrt", {&a.view}, {&out.view});
  CHECK(std::isnan(t.read<float>(out)[0]));
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

// ---- the vectorisable float math (plugins/cpu/ops/vector_math.hpp) -----------

namespace {

// Distance of GOT from the double WANT in units of float's ulp at WANT.
double ulps(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : 1e30;
  float w = static_cast<float>(want);
  if (got == w) return 0.0;
  if (std::isinf(w) || std::isinf(got)) return 1e30;
  double ulp = std::max(double(std::nextafter(w, INFINITY)) - w, 1.4e-45);
  return std::fabs(got - want) / ulp;
}

// Largest ulp error of F against the double reference G over [LO, HI]
// (STEPS points) and the special values.
template <class F, class G>
double max_ulps(F f, G g, float lo, float hi, int steps = 200000) {
  double worst = 0;
  for (int i = 0; i <= steps; ++i) {
    float x = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(steps);
    worst = std::max(worst, ulps(f(x), g(static_cast<double>(x))));
  }
  return worst;
}

}  // namespace

TEST_CASE("vectorisable exp, tanh and erf are accurate to a few ulp") {
  namespace vm = hal::cpu::vmath;
  CHECK(max_ulps([](float x) { return vm::exp(x); }, [](double x) { return std::exp(x); }, -87.0f, 88.7f) <= 2);
  CHECK(max_ulps([](float x) { return vm::tanh(x); }, [](double x) { return std::tanh(x); }, -10.0f, 10.0f) <= 2);
  CHECK(max_ulps([](float x) { return vm::tanh(x); }, [](double x) { return std::tanh(x); }, -1e-3f, 1e-3f) <= 2);
  CHECK(max_ulps([](float x) { return vm::erf(x); }, [](double x) { return std::erf(x); }, -6.0f, 6.0f) <= 8);
  CHECK(max_ulps([](float x) { return vm::erf(x); }, [](double x) { return std::erf(x); }, -1e-3f, 1e-3f) <= 8);
  CHECK(max_ulps([](float x) { return vm::sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }, -80.0f,
                 80.0f) <= 4);
}

TEST_CASE("vectorisable exp, tanh and erf handle overflow, underflow, inf and NaN") {
  namespace vm = hal::cpu::vmath;
  const float inf = INFINITY, nan = NAN;
  CHECK(vm::exp(89.0f) == inf);
  CHECK(vm::exp(inf) == inf);
  CHECK(vm::exp(-inf) == 0.0f);
  CHECK(vm::exp(-104.0f) == 0.0f);
  CHECK(ulps(vm::exp(88.72f), std::exp(double(88.72f))) <= 2);   // largest exponent (n = 128)
  CHECK(ulps(vm::exp(-100.0f), std::exp(-100.0)) <= 2);
  CHECK(vm::exp(-0.0f) == 1.0f);  // subnormal result
  CHECK(std::isnan(vm::exp(nan)));
  CHECK(vm::tanh(inf) == 1.0f);
  CHECK(vm::tanh(-inf) == -1.0f);
  CHECK(vm::tanh(100.0f) == 1.0f);
  CHECK(std::signbit(vm::tanh(-0.0f)));
  CHECK(std::isnan(vm::tanh(nan)));
  CHECK(vm::erf(inf) == 1.0f);
  CHECK(vm::erf(-inf) == -1.0f);
  CHECK(std::isnan(vm::erf(nan)));
  CHECK(vm::sigmoid(-inf) == 0.0f);
  CHECK(vm::sigmoid(inf) == 1.0f);
  CHECK(std::isnan(vm::sigmoid(nan)));
  CHECK(std::isnan(vm::silu(-inf)));  // -inf / inf, as PyTorch's x / (1 + e^-x)
  CHECK(vm::silu(inf) == inf);
}

TEST_CASE("float32 exp, tanh, sigmoid, silu and gelu over a long tensor match libm") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t n = 100003;  // vector body plus a tail, split across threads
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -12.0f + 24.0f * static_cast<float>(i) / static_cast<float>(n);
  auto in = t.tensor({n}, x);
  auto out = t.empty(HAL_DTYPE_FLOAT32, {n});
  auto check_op = [&](const char* op, std::vector<Attr> attrs, double (*ref)(double)) {
    t.run(op, {&in.view}, {&out.view}, attrs);
    std::vector<float> got = t.read<float>(out);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      double want = ref(x[i]);
      // gelu below about -4 is a difference of numbers near 1 (as in libm's
      // and PyTorch's erf form): allow a few 1e-7 absolute there.
      worst = std::max(worst, std::fabs(got[i] - want) / (4e-6 + 2e-6 * std::fabs(want)));
    }
    CHECK_MESSAGE(worst <= 1.0, op);
  };
  check_op("exp", {}, [](double v) { return std::exp(v); });
  check_op("tanh", {}, [](double v) { return std::tanh(v); });
  check_op("sigmoid", {}, [](double v) { return 1 / (1 + std::exp(-v)); });
  check_op("silu", {}, [](double v) { return v / (1 + std::exp(-v)); });
  check_op("erf", {}, [](double v) { return std::erf(v); });
  check_op("gelu", {}, [](double v) { return 0.5 * v * (1 + std::erf(v * M_SQRT1_2)); });
  check_op("gelu", {Attr::s("approximate", "tanh")},
           [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); });
}

TEST_CASE("relu propagates NaN - relu_backward passes the gradient only where self > 0") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({4}, {NAN, -1, 0, 2});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {4});
  t.run("relu", {&x.view}, {&out.view});
  std::vector<float> r = t.read<float>(out);
  CHECK(std::isnan(r[0]));
  CHECK(std::vector<float>(r.begin() + 1, r.end()) == std::vector<float>{0, 0, 2});
  auto g = t.tensor({4}, {5, 6, 7, 8});
  t.run("relu_backward", {&g.view, &x.view}, {&out.view});
  CHECK(t.read<float>(out) == std::vector<float>{5, 0, 0, 8});
}

TEST_CASE("add and sub apply an integer alpha to integer tensors, with wrap-around") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor<int8_t>({3}, {100, -100, 5}, HAL_DTYPE_INT8);
  auto b = t.tensor<int8_t>({3}, {20, -20, 1}, HAL_DTYPE_INT8);
  auto out = t.empty(HAL_DTYPE_INT8, {3});
  t.run("add", {&a.view, &b.view}, {&out.view}, {Attr::i("alpha", 2)});
  CHECK(t.read<int8_t>(out) == std::vector<int8_t>{static_cast<int8_t>(140), static_cast<int8_t>(-140), 7});
  t.run("sub", {&a.view, &b.view}, {&out.view}, {Attr::i("alpha", -1)});
  CHECK(t.read<int8_t>(out) == std::vector<int8_t>{static_cast<int8_t>(120), static_cast<int8_t>(-120), 6});
  t.run("sub", {&a.view, &b.view}, {&out.view});
  CHECK(t.read<int8_t>(out) == std::vector<int8_t>{80, -80, 4});
}

TEST_CASE("integer division by zero and negative integer powers are refused before any output is written") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor<int32_t>({3}, {1, 2, 3}, HAL_DTYPE_INT32);
  auto zero_at_1 = t.tensor<int32_t>({3}, {1, 0, 2}, HAL_DTYPE_INT32);
  auto negative_at_2 = t.tensor<int32_t>({3}, {1, 2, -1}, HAL_DTYPE_INT32);
  auto out = t.tensor<int32_t>({3}, {7, 7, 7}, HAL_DTYPE_INT32);
  auto refused = [&](const char* op, const hal::TensorView& other, std::vector<Attr> attrs, const char* mention) {
    try {
      t.run(op, {&a.view, &other}, {&out.view}, attrs);
      FAIL("launch was accepted");
    } catch (const hal::Error& e) {
      CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
      CHECK_MESSAGE(std::string(e.what()).find(mention) != std::string::npos, e.what());
    }
    CHECK(t.read<int32_t>(out) == std::vector<int32_t>{7, 7, 7});
  };
  refused("div", zero_at_1.view, {Attr::s("rounding_mode", "trunc")}, "integer division by zero: 'other' is 0 at position 1");
  refused("div", zero_at_1.view, {Attr::s("rounding_mode", "floor")}, "position 1");
  refused("fmod", zero_at_1.view, {}, "division by zero");
  refused("remainder", zero_at_1.view, {}, "division by zero");
  refused("pow", negative_at_2.view, {}, "negative integer powers are not allowed: 'other' is -1 at position 2");
  // True division of integers is float division: 1/0 = inf, no error.
  auto fout = t.empty(HAL_DTYPE_FLOAT32, {3});
  t.run("div", {&a.view, &zero_at_1.view}, {&fout.view});
  CHECK(std::isinf(t.read<float>(fout)[1]));
}
