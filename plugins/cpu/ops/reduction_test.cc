// CPU reduction and scan kernels through the runtime's op API: results of
// each op, every schedule of the reduction driver (outputs in parallel,
// column tiles, one reduction split across threads), layouts, 0-d and
// zero-size tensors, and the op-specific refusals.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Runs OP on IN into a new output of DTYPE and SHAPE; returns its values.
template <class T>
std::vector<T> run(OpTester& t, const std::string& op, const hal::TensorView& in, hal_dtype_e dtype,
                   std::vector<int64_t> shape, std::vector<Attr> attrs = {}) {
  DeviceTensor out = t.empty(dtype, std::move(shape));
  t.run(op, {&in}, {&out.view}, attrs);
  return t.read<T>(out);
}

// The launch must fail with CODE, mention every string of MENTIONS and the
// op, and leave OUT untouched.
void expect_error(OpTester& t, const std::string& op, const std::vector<const hal::TensorView*>& ins,
                  DeviceTensor& out, std::vector<Attr> attrs, hal_status_code_e code,
                  std::vector<std::string> mentions) {
  t.expect_refused(op, ins, {&out.view}, attrs, mentions, code, {&out});
}

bool same(double a, double b, double rel = 1e-5) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::abs(a - b) <= rel * std::max(1.0, std::abs(b));
}
template <class T>
void check_close(const std::vector<T>& got, const std::vector<double>& want, double rel = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(same(static_cast<double>(got[i]), want[i], rel), "at ", i, ": ", got[i], " vs ", want[i]);
}

std::vector<float> ramp(int64_t n, float scale = 1.0f, float offset = 0.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = offset + scale * static_cast<float>((i * 37) % 101 - 50);
  return v;
}

}  // namespace

TEST_CASE("sum over dims, all dims, keepdim and negative dims") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {2}, {Attr::ints("dim", {1})}) == std::vector<float>{6, 15});
  CHECK(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {3}, {Attr::ints("dim", {-2})}) == std::vector<float>{5, 7, 9});
  CHECK(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {}) == std::vector<float>{21});
  CHECK(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {1, 1}, {Attr::b("keepdim", true)}) == std::vector<float>{21});
  CHECK(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {2, 1}, {Attr::ints("dim", {1}), Attr::b("keepdim", true)}) ==
        std::vector<float>{6, 15});
  CHECK(run<double>(t, "sum", a.view, HAL_DTYPE_FLOAT64, {}, {Attr::dtype("dtype", HAL_DTYPE_FLOAT64)}) ==
        std::vector<double>{21});
}

TEST_CASE("sum and prod of integers and bool give int64") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto i = t.tensor<int32_t>({2, 2}, {100000, 100000, -3, 7}, HAL_DTYPE_INT32);
  CHECK(run<int64_t>(t, "sum", i.view, HAL_DTYPE_INT64, {2}, {Attr::ints("dim", {1})}) == std::vector<int64_t>{200000, 4});
  CHECK(run<int64_t>(t, "prod", i.view, HAL_DTYPE_INT64, {2}, {Attr::ints("dim", {1})}) ==
        std::vector<int64_t>{10000000000, -21});
  auto b = t.tensor<uint8_t>({4}, {1, 0, 1, 1}, HAL_DTYPE_BOOL);
  CHECK(run<int64_t>(t, "sum", b.view, HAL_DTYPE_INT64, {}) == std::vector<int64_t>{3});
  CHECK(run<int64_t>(t, "prod", b.view, HAL_DTYPE_INT64, {}) == std::vector<int64_t>{0});
  // An explicit dtype keeps int32 (wrapping like torch).
  CHECK(run<int32_t>(t, "sum", i.view, HAL_DTYPE_INT32, {}, {Attr::dtype("dtype", HAL_DTYPE_INT32)}) ==
        std::vector<int32_t>{200004});
}

TEST_CASE("a 1e5-element float32 sum is accurate (blocked, split across threads)") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t n = 100003;
  std::vector<float> v(n);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) {
    v[i] = 0.1f + static_cast<float>(i % 7) * 1e-3f;
    want += v[i];
  }
  auto a = t.tensor({n}, v);
  check_close(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {}), {want}, 1e-6);
  check_close(run<float>(t, "mean", a.view, HAL_DTYPE_FLOAT32, {}), {want / n}, 1e-6);
  // The same as two rows: one reduction per output.
  auto b = t.tensor({2, n / 2}, std::vector<float>(v.begin(), v.begin() + (n / 2) * 2));
  auto got = run<float>(t, "sum", b.view, HAL_DTYPE_FLOAT32, {2}, {Attr::ints("dim", {1})});
  double w0 = 0, w1 = 0;
  for (int64_t i = 0; i < n / 2; ++i) w0 += v[i], w1 += v[n / 2 + i];
  check_close(got, {w0, w1}, 1e-6);
}

TEST_CASE("a float32 sum rounds once: no float partial loses an addend (PyTorch's cascade sum does not)") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  // 2^24 + 1 is not a float: a float partial holding 2^24 drops the +1.
  std::vector<float> v(32, 0.0f);
  v[0] = 16777216.0f, v[16] = 1.0f, v[1] = -16777216.0f, v[17] = 1.0f;
  auto a = t.tensor({32}, v);
  CHECK(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {}) == std::vector<float>{2.0f});
  auto rows = t.tensor({2, 16}, v);  // as dim-0 columns: the tiled schedule
  CHECK(run<float>(t, "sum", rows.view, HAL_DTYPE_FLOAT32, {16}, {Attr::ints("dim", {0})})[0] == 16777216.0f);
  CHECK(run<float>(t, "mean", a.view, HAL_DTYPE_FLOAT32, {}) == std::vector<float>{2.0f / 32});
}

TEST_CASE("every schedule agrees with a double loop: rows, columns, strided and transposed inputs") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t r = 37, c = 70;
  auto v = ramp(r * c, 0.25f);
  auto a = t.tensor({r, c}, v);
  std::vector<double> rows(r, 0), cols(c, 0);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) rows[i] += v[i * c + j], cols[j] += v[i * c + j];
  check_close(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {r}, {Attr::ints("dim", {1})}), rows);
  check_close(run<float>(t, "sum", a.view, HAL_DTYPE_FLOAT32, {c}, {Attr::ints("dim", {0})}), cols);
  // Transposed view [c, r]: reducing its dim 1 is the columns of A.
  hal::TensorView at = a.view;
  at.shape = {c, r};
  at.strides = {1, c};
  check_close(run<float>(t, "sum", at, HAL_DTYPE_FLOAT32, {c}, {Attr::ints("dim", {1})}), cols);
  check_close(run<float>(t, "sum", at, HAL_DTYPE_FLOAT32, {r}, {Attr::ints("dim", {0})}), rows);
  // Every other column, at an offset.
  hal::TensorView strided = a.view;
  strided.shape = {r, c / 2};
  strided.strides = {c, 2};
  strided.byte_offset = sizeof(float);
  std::vector<double> odd(r, 0);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c / 2; ++j) odd[i] += v[i * c + 2 * j + 1];
  check_close(run<float>(t, "sum", strided, HAL_DTYPE_FLOAT32, {r}, {Attr::ints("dim", {1})}), odd);
  // amax and argmax by columns (tile schedule) match the loops too.
  std::vector<double> colmax(c, -1e30), colarg(c, 0);
  for (int64_t j = 0; j < c; ++j)
    for (int64_t i = 0; i < r; ++i)
      if (v[i * c + j] > colmax[j]) colmax[j] = v[i * c + j], colarg[j] = static_cast<double>(i);
  check_close(run<float>(t, "amax", a.view, HAL_DTYPE_FLOAT32, {c}, {Attr::ints("dim", {0})}), colmax);
  check_close(run<int64_t>(t, "argmax", a.view, HAL_DTYPE_INT64, {c}, {Attr::ints("dim", {0})}), colarg);
}

TEST_CASE("0-d and zero-size inputs: identities, NaN mean, errors where there is no identity") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto s = t.tensor({}, {4.5f});
  CHECK(run<float>(t, "sum", s.view, HAL_DTYPE_FLOAT32, {}) == std::vector<float>{4.5f});
  CHECK(run<float>(t, "amax", s.view, HAL_DTYPE_FLOAT32, {}, {Attr::ints("dim", {0})}) == std::vector<float>{4.5f});
  CHECK(run<int64_t>(t, "argmax", s.view, HAL_DTYPE_INT64, {}) == std::vector<int64_t>{0});
  CHECK(run<float>(t, "cumsum", s.view, HAL_DTYPE_FLOAT32, {}, {Attr::i("dim", -1)}) == std::vector<float>{4.5f});

  auto e = t.empty(HAL_DTYPE_FLOAT32, {0, 3});
  CHECK(run<float>(t, "sum", e.view, HAL_DTYPE_FLOAT32, {3}, {Attr::ints("dim", {0})}) == std::vector<float>{0, 0, 0});
  CHECK(run<float>(t, "prod", e.view, HAL_DTYPE_FLOAT32, {3}, {Attr::ints("dim", {0})}) == std::vector<float>{1, 1, 1});
  check_close(run<float>(t, "mean", e.view, HAL_DTYPE_FLOAT32, {}), {kNaN});
  check_close(run<float>(t, "var", e.view, HAL_DTYPE_FLOAT32, {}), {kNaN});
  check_close(run<float>(t, "logsumexp", e.view, HAL_DTYPE_FLOAT32, {3}, {Attr::ints("dim", {0})}),
              {-kInf, -kInf, -kInf});
  CHECK(run<float>(t, "norm", e.view, HAL_DTYPE_FLOAT32, {}) == std::vector<float>{0});
  CHECK(run<uint8_t>(t, "any", e.view, HAL_DTYPE_BOOL, {}) == std::vector<uint8_t>{0});
  CHECK(run<uint8_t>(t, "all", e.view, HAL_DTYPE_BOOL, {}) == std::vector<uint8_t>{1});
  CHECK(run<float>(t, "amax", e.view, HAL_DTYPE_FLOAT32, {0}, {Attr::ints("dim", {1})}).empty());
  CHECK(run<float>(t, "cumsum", e.view, HAL_DTYPE_FLOAT32, {0, 3}, {Attr::i("dim", 0)}).empty());

  auto out3 = t.tensor({3}, {7, 7, 7});
  expect_error(t, "amax", {&e.view}, out3, {Attr::ints("dim", {0})}, HAL_STATUS_INVALID_ARGUMENT,
               {"dim 0 of size 0", "[0, 3]"});
  auto out0 = t.tensor({}, {7});
  expect_error(t, "argmax", {&e.view}, out0, {}, HAL_STATUS_INVALID_ARGUMENT, {"empty", "[0, 3]"});
  expect_error(t, "norm", {&e.view}, out0, {Attr::f("p", INFINITY)}, HAL_STATUS_INVALID_ARGUMENT, {"dim 0 of size 0"});
  expect_error(t, "norm", {&e.view}, out0, {Attr::f("p", -1.0)}, HAL_STATUS_INVALID_ARGUMENT, {"dim 0 of size 0", "p = -1"});
  check_close(run<float>(t, "norm", e.view, HAL_DTYPE_FLOAT32, {}, {Attr::f("p", 0.5)}), {0});
}

TEST_CASE("mean needs a floating result dtype") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto i = t.tensor<int32_t>({2, 2}, {1, 2, 3, 5}, HAL_DTYPE_INT32);
  CHECK(run<float>(t, "mean", i.view, HAL_DTYPE_FLOAT32, {2}, {Attr::ints("dim", {0}), Attr::dtype("dtype", HAL_DTYPE_FLOAT32)}) ==
        std::vector<float>{2, 3.5f});
  auto out = t.tensor({}, {7});
  auto iout = t.tensor<int32_t>({}, {7}, HAL_DTYPE_INT32);
  expect_error(t, "mean", {&i.view}, iout, {}, HAL_STATUS_INVALID_ARGUMENT, {"int32", "floating"});
}

TEST_CASE("amax, max and argmax propagate NaN, ties give the first index") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 4}, {1, 3, 3, 2, 5, NAN, 9, NAN});
  check_close(run<float>(t, "amax", a.view, HAL_DTYPE_FLOAT32, {2}, {Attr::ints("dim", {1})}), {3, kNaN});
  check_close(run<float>(t, "amin", a.view, HAL_DTYPE_FLOAT32, {2}, {Attr::ints("dim", {1})}), {1, kNaN});
  CHECK(run<int64_t>(t, "argmax", a.view, HAL_DTYPE_INT64, {2}, {Attr::ints("dim", {1})}) == std::vector<int64_t>{1, 1});
  CHECK(run<int64_t>(t, "argmin", a.view, HAL_DTYPE_INT64, {2}, {Attr::ints("dim", {-1})}) == std::vector<int64_t>{0, 1});
  CHECK(run<int64_t>(t, "argmax", a.view, HAL_DTYPE_INT64, {}) == std::vector<int64_t>{5});
  CHECK(run<int64_t>(t, "argmax", a.view, HAL_DTYPE_INT64, {1, 1}, {Attr::b("keepdim", true)}) == std::vector<int64_t>{5});

  auto values = t.empty(HAL_DTYPE_FLOAT32, {2, 1});
  auto indices = t.empty(HAL_DTYPE_INT64, {2, 1});
  t.run("max", {&a.view}, {&values.view, &indices.view}, {Attr::i("dim", 1), Attr::b("keepdim", true)});
  check_close(t.read<float>(values), {3, kNaN});
  CHECK(t.read<int64_t>(indices) == std::vector<int64_t>{1, 1});
  auto v4 = t.empty(HAL_DTYPE_FLOAT32, {4});
  auto i4 = t.empty(HAL_DTYPE_INT64, {4});
  t.run("min", {&a.view}, {&v4.view, &i4.view}, {Attr::i("dim", 0)});
  check_close(t.read<float>(v4), {1, kNaN, 3, kNaN});
  CHECK(t.read<int64_t>(i4) == std::vector<int64_t>{0, 1, 0, 1});

  // Integers and bool, through a transposed view.
  auto n = t.tensor<int16_t>({2, 3}, {4, -1, 4, 9, 9, -7}, HAL_DTYPE_INT16);
  hal::TensorView nt = n.view;
  nt.shape = {3, 2};
  nt.strides = {1, 3};
  CHECK(run<int64_t>(t, "argmax", nt, HAL_DTYPE_INT64, {3}, {Attr::ints("dim", {1})}) == std::vector<int64_t>{1, 1, 0});
  CHECK(run<int16_t>(t, "amin", nt, HAL_DTYPE_INT16, {2}, {Attr::ints("dim", {0})}) == std::vector<int16_t>{-1, -7});
  auto b = t.tensor<uint8_t>({3}, {0, 1, 1}, HAL_DTYPE_BOOL);
  CHECK(run<int64_t>(t, "argmax", b.view, HAL_DTYPE_INT64, {}) == std::vector<int64_t>{1});
  CHECK(run<uint8_t>(t, "amin", b.view, HAL_DTYPE_BOOL, {}) == std::vector<uint8_t>{0});
}

TEST_CASE("var and std with corrections, norm for every kind of p") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 4, -3, 0, 3});
  check_close(run<float>(t, "var", a.view, HAL_DTYPE_FLOAT32, {2}, {Attr::ints("dim", {1})}), {7.0 / 3, 9});
  check_close(run<float>(t, "var", a.view, HAL_DTYPE_FLOAT32, {2}, {Attr::ints("dim", {1}), Attr::i("correction", 0)}),
              {14.0 / 9, 6});
  check_close(run<float>(t, "std", a.view, HAL_DTYPE_FLOAT32, {3}, {Attr::ints("dim", {0})}),
              {std::sqrt(8.0), std::sqrt(2.0), std::sqrt(0.5)});
  auto one = t.tensor({1}, {5});
  check_close(run<float>(t, "var", one.view, HAL_DTYPE_FLOAT32, {}), {kNaN});
  // Large offset: the two-pass/Welford form keeps the digits.
  std::vector<double> big(1000);
  for (int i = 0; i < 1000; ++i) big[i] = 1e8 + (i % 10);
  auto bd = t.tensor<double>({1000}, big, HAL_DTYPE_FLOAT64);
  check_close(run<double>(t, "var", bd.view, HAL_DTYPE_FLOAT64, {}), {8.25 * 1000 / 999}, 1e-9);

  auto x = t.tensor({4}, {3, -4, 0, 1});
  check_close(run<float>(t, "norm", x.view, HAL_DTYPE_FLOAT32, {}), {std::sqrt(26.0)});
  check_close(run<float>(t, "norm", x.view, HAL_DTYPE_FLOAT32, {}, {Attr::f("p", 1)}), {8});
  check_close(run<float>(t, "norm", x.view, HAL_DTYPE_FLOAT32, {}, {Attr::f("p", 0)}), {3});
  check_close(run<float>(t, "norm", x.view, HAL_DTYPE_FLOAT32, {}, {Attr::f("p", INFINITY)}), {4});
  check_close(run<float>(t, "norm", x.view, HAL_DTYPE_FLOAT32, {}, {Attr::f("p", -INFINITY)}), {0});
  check_close(run<float>(t, "norm", x.view, HAL_DTYPE_FLOAT32, {}, {Attr::f("p", 3)}), {std::cbrt(92.0)});
}

TEST_CASE("logsumexp is stable and promotes integers to float32") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 2}, {1000, 1000, -kInf, -kInf});
  check_close(run<float>(t, "logsumexp", a.view, HAL_DTYPE_FLOAT32, {2}, {Attr::ints("dim", {1})}),
              {1000 + std::log(2.0), -kInf});
  auto b = t.tensor({3}, {1, kInf, 2});
  check_close(run<float>(t, "logsumexp", b.view, HAL_DTYPE_FLOAT32, {}, {Attr::ints("dim", {})}), {kInf});
  auto i = t.tensor<int32_t>({2}, {0, 0}, HAL_DTYPE_INT32);
  check_close(run<float>(t, "logsumexp", i.view, HAL_DTYPE_FLOAT32, {}, {Attr::ints("dim", {0})}), {std::log(2.0)});
}

TEST_CASE("any and all over any dtype") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {0, 0, NAN, 1, 2, 3});
  CHECK(run<uint8_t>(t, "any", a.view, HAL_DTYPE_BOOL, {2}, {Attr::ints("dim", {1})}) == std::vector<uint8_t>{1, 1});
  CHECK(run<uint8_t>(t, "all", a.view, HAL_DTYPE_BOOL, {2}, {Attr::ints("dim", {1})}) == std::vector<uint8_t>{0, 1});
  CHECK(run<uint8_t>(t, "all", a.view, HAL_DTYPE_BOOL, {3}, {Attr::ints("dim", {0})}) == std::vector<uint8_t>{0, 0, 1});
  std::vector<int64_t> big(5000, 3);
  big[4321] = 0;
  auto b = t.tensor<int64_t>({5000}, big, HAL_DTYPE_INT64);
  CHECK(run<uint8_t>(t, "all", b.view, HAL_DTYPE_BOOL, {}) == std::vector<uint8_t>{0});
  CHECK(run<uint8_t>(t, "any", b.view, HAL_DTYPE_BOOL, {}) == std::vector<uint8_t>{1});
}

TEST_CASE("cumsum and cumprod along each dim, integers to int64, in place") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(run<float>(t, "cumsum", a.view, HAL_DTYPE_FLOAT32, {2, 3}, {Attr::i("dim", 1)}) ==
        std::vector<float>{1, 3, 6, 4, 9, 15});
  CHECK(run<float>(t, "cumsum", a.view, HAL_DTYPE_FLOAT32, {2, 3}, {Attr::i("dim", 0)}) ==
        std::vector<float>{1, 2, 3, 5, 7, 9});
  CHECK(run<float>(t, "cumprod", a.view, HAL_DTYPE_FLOAT32, {2, 3}, {Attr::i("dim", -1)}) ==
        std::vector<float>{1, 2, 6, 4, 20, 120});
  auto i = t.tensor<int8_t>({4}, {100, 100, 100, -5}, HAL_DTYPE_INT8);
  CHECK(run<int64_t>(t, "cumsum", i.view, HAL_DTYPE_INT64, {4}, {Attr::i("dim", 0)}) ==
        std::vector<int64_t>{100, 200, 300, 295});
  CHECK(run<double>(t, "cumprod", i.view, HAL_DTYPE_FLOAT64, {4}, {Attr::i("dim", 0), Attr::dtype("dtype", HAL_DTYPE_FLOAT64)}) ==
        std::vector<double>{100, 1e4, 1e6, -5e6});
  // Column tiles: [3, 20] along dim 0, then in place along dim 1.
  auto v = ramp(60);
  auto m = t.tensor({3, 20}, v);
  std::vector<double> want(60);
  for (int j = 0; j < 20; ++j) {
    double s = 0;
    for (int r = 0; r < 3; ++r) want[r * 20 + j] = s += v[r * 20 + j];
  }
  check_close(run<float>(t, "cumsum", m.view, HAL_DTYPE_FLOAT32, {3, 20}, {Attr::i("dim", 0)}), want);
  t.run("cumsum", {&m.view}, {&m.view}, {Attr::i("dim", 1)});
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int j = 0; j < 20; ++j) want[r * 20 + j] = s += v[r * 20 + j];
  }
  check_close(t.read<float>(m), want);
}

TEST_CASE("refused launches name the op, the attribute and the values") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out2 = t.tensor({2}, {7, 7});
  auto out0 = t.tensor({}, {7});
  expect_error(t, "sum", {&a.view}, out2, {Attr::ints("dim", {2})}, HAL_STATUS_INVALID_ARGUMENT,
               {"'dim' = 2", "rank 2"});
  expect_error(t, "sum", {&a.view}, out0, {Attr::ints("dim", {1, -1})}, HAL_STATUS_INVALID_ARGUMENT,
               {"'dim'", "twice", "[1, -1]"});
  expect_error(t, "sum", {&a.view}, out2, {Attr::i("dim", 1)}, HAL_STATUS_INVALID_ARGUMENT, {"'dim' must be ints"});
  expect_error(t, "sum", {&a.view}, out2, {Attr::ints("axis", {1})}, HAL_STATUS_INVALID_ARGUMENT, {"unknown attribute 'axis'"});
  expect_error(t, "sum", {&a.view}, out2, {Attr::ints("dim", {0})}, HAL_STATUS_INVALID_ARGUMENT, {"[2]", "[3]"});
  expect_error(t, "amax", {&a.view}, out2, {Attr::ints("dim", {-3})}, HAL_STATUS_INVALID_ARGUMENT, {"-3", "rank 2"});
  expect_error(t, "argmax", {&a.view}, out0, {Attr::ints("dim", {0, 1})}, HAL_STATUS_INVALID_ARGUMENT, {"at most one"});
  expect_error(t, "cumsum", {&a.view}, out2, {}, HAL_STATUS_INVALID_ARGUMENT, {"missing required attribute 'dim'"});
  expect_error(t, "logsumexp", {&a.view}, out0, {}, HAL_STATUS_INVALID_ARGUMENT, {"missing required attribute 'dim'"});
  auto c = t.tensor({2, 3}, {7, 7, 7, 7, 7, 7});
  expect_error(t, "cumsum", {&a.view}, c, {Attr::i("dim", 2)}, HAL_STATUS_INVALID_ARGUMENT, {"'dim' = 2"});
  auto i = t.tensor<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}, HAL_DTYPE_INT32);
  expect_error(t, "var", {&i.view}, out0, {}, HAL_STATUS_UNSUPPORTED_DTYPE, {"int32"});
  expect_error(t, "sum", {&i.view}, out0, {}, HAL_STATUS_INVALID_ARGUMENT, {"dtype float32", "int64"});
  // The output may not overlap the input (no in-place reduction).
  hal::TensorView alias = a.view;
  alias.shape = {2};
  try {
    t.run("sum", {&a.view}, {&alias}, {Attr::ints("dim", {1})});
    FAIL("aliasing output was accepted");
  } catch (const hal::Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find("overlaps") != std::string::npos, e.what());
  }
  CHECK(t.read<float>(a) == std::vector<float>{1, 2, 3, 4, 5, 6});
}
