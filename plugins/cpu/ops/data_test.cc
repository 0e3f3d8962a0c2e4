// CPU "data" kernels (copy, fill, arange, cat, stack, split, pad, flip,
// roll, repeat, tril, triu, one_hot) through the runtime's op API: results,
// layouts, edge shapes and each op's own bad inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::TensorView;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;
using Views = std::vector<const TensorView*>;

namespace {

std::vector<float> fv(std::initializer_list<float> v) { return v; }

// Expects OP to be refused with CODE and a message naming the op and
// containing MENTION; SENTINEL (filled with 7s) must stay untouched.
void expect_error(OpTester& t, const std::string& op, const Views& in, const Views& out, std::vector<Attr> attrs,
                  hal_status_code_e code, const std::string& mention, const DeviceTensor* sentinel = nullptr) {
  t.expect_refused(op, in, out, attrs, {mention}, code, sentinel ? std::vector<const DeviceTensor*>{sentinel} : std::vector<const DeviceTensor*>{});
}

DeviceTensor sevens(OpTester& t, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return t.tensor(std::move(shape), std::vector<float>(static_cast<size_t>(n), 7.0f));
}

}  // namespace

TEST_CASE("copy converts dtypes as torch does and defines NaN -> int as 0") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = t.tensor({6}, {-1.5f, 2.7f, nan, 0.0f, 300.0f, -0.2f});
  auto i32 = t.empty(HAL_DTYPE_INT32, {6});
  t.run("copy", {&a.view}, {&i32.view});
  CHECK(t.read<int32_t>(i32) == std::vector<int32_t>{-1, 2, 0, 0, 300, 0});
  auto u8 = t.empty(HAL_DTYPE_UINT8, {6});
  t.run("copy", {&a.view}, {&u8.view});
  CHECK(t.read<uint8_t>(u8) == std::vector<uint8_t>{255, 2, 0, 0, 44, 0});
  auto b = t.empty(HAL_DTYPE_BOOL, {6});
  t.run("copy", {&a.view}, {&b.view});
  CHECK(t.read<uint8_t>(b) == std::vector<uint8_t>{1, 1, 1, 0, 1, 1});
  // In int32's range (the vectorised route) and beyond it (via int64).
  auto w = t.tensor({3}, {200.5f, -1.5f, 70000.0f});
  auto w8 = t.empty(HAL_DTYPE_INT8, {3});
  t.run("copy", {&w.view}, {&w8.view});
  CHECK(t.read<int8_t>(w8) == std::vector<int8_t>{-56, -1, 112});
  auto big = t.tensor<double>({2}, {3e9, -1.5}, HAL_DTYPE_FLOAT64);
  auto b16 = t.empty(HAL_DTYPE_INT16, {2});
  t.run("copy", {&big.view}, {&b16.view});
  CHECK(t.read<int16_t>(b16) == std::vector<int16_t>{static_cast<int16_t>(3000000000LL & 0xffff), -1});
  auto back = t.empty(HAL_DTYPE_FLOAT64, {6});
  t.run("copy", {&i32.view}, {&back.view});
  CHECK(t.read<double>(back) == std::vector<double>{-1, 2, 0, 0, 300, 0});
  auto h = t.empty(HAL_DTYPE_FLOAT16, {6});
  t.run("copy", {&back.view}, {&h.view});
  CHECK(t.read<uint16_t>(h) == std::vector<uint16_t>{0xbc00, 0x4000, 0, 0, 0x5cb0, 0});
}

TEST_CASE("copy broadcasts, reads and writes through strides, and handles 0-d and zero-size") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto row = t.tensor({3}, {1, 2, 3});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  t.run("copy", {&row.view}, {&out.view});
  CHECK(t.read<float>(out) == fv({1, 2, 3, 1, 2, 3}));

  auto m = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorView mt = m.view;  // [3, 2] transpose
  mt.shape = {3, 2};
  mt.strides = {1, 3};
  auto o = t.empty(HAL_DTYPE_INT64, {3, 2});
  t.run("copy", {&mt}, {&o.view});
  CHECK(t.read<int64_t>(o) == std::vector<int64_t>{1, 4, 2, 5, 3, 6});

  // A strided output: every other element of a [6] buffer.
  auto base = sevens(t, {6});
  TensorView every_other = base.view;
  every_other.shape = {3};
  every_other.strides = {2};
  t.run("copy", {&row.view}, {&every_other});
  CHECK(t.read<float>(base) == fv({1, 7, 2, 7, 3, 7}));

  auto s = t.tensor({}, {5});
  auto s_out = t.empty(HAL_DTYPE_INT8, {});
  t.run("copy", {&s.view}, {&s_out.view});
  CHECK(t.read<int8_t>(s_out) == std::vector<int8_t>{5});
  auto z = t.empty(HAL_DTYPE_FLOAT32, {0, 3});
  auto z_out = t.empty(HAL_DTYPE_INT32, {0, 3});
  t.run("copy", {&z.view}, {&z_out.view});
  t.run("copy", {&m.view}, {&m.view});  // exact alias: allowed, a no-op
  CHECK(t.read<float>(m) == fv({1, 2, 3, 4, 5, 6}));
}

TEST_CASE("copy refuses shapes that do not broadcast and partly overlapping outputs") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = sevens(t, {3, 2});
  expect_error(t, "copy", {&a.view}, {&out.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "input 'self' of shape [2, 3] does not broadcast to output 'out' of shape [3, 2]", &out);
  auto big = sevens(t, {4});
  auto small = sevens(t, {2, 4});
  expect_error(t, "copy", {&small.view}, {&big.view}, {}, HAL_STATUS_INVALID_ARGUMENT, "does not broadcast", &big);
  auto buf = sevens(t, {8});
  TensorView lo = buf.view, hi = buf.view;
  lo.shape = hi.shape = {6};
  hi.byte_offset = 8;
  expect_error(t, "copy", {&lo}, {&hi}, {}, HAL_STATUS_INVALID_ARGUMENT, "overlaps input 'self'", &buf);
}

TEST_CASE("column slices of one buffer are not an overlap - slices sharing a column are") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto buf = t.tensor({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  TensorView left = buf.view, right = buf.view;  // columns [0, 2) and [2, 4) of each row
  left.shape = right.shape = {3, 2};
  left.strides = right.strides = {4, 1};
  right.byte_offset = 2 * sizeof(float);
  t.run("copy", {&left}, {&right});
  CHECK(t.read<float>(buf) == std::vector<float>{0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9});
  TensorView mid = right;  // columns [1, 3): shares column 1 with left
  mid.byte_offset = sizeof(float);
  expect_error(t, "copy", {&left}, {&mid}, {}, HAL_STATUS_INVALID_ARGUMENT, "overlaps input 'self'", &buf);
}

TEST_CASE("fill writes a converted value into any dtype and layout") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto i = t.empty(HAL_DTYPE_INT32, {2, 2});
  t.run("fill", {}, {&i.view}, {Attr::f("value", -2.9)});
  CHECK(t.read<int32_t>(i) == std::vector<int32_t>{-2, -2, -2, -2});
  auto b = t.empty(HAL_DTYPE_BOOL, {3});
  t.run("fill", {}, {&b.view}, {Attr::i("value", 2)});
  CHECK(t.read<uint8_t>(b) == std::vector<uint8_t>{1, 1, 1});
  auto l = t.empty(HAL_DTYPE_INT64, {2});
  t.run("fill", {}, {&l.view}, {Attr::i("value", std::numeric_limits<int64_t>::max())});
  CHECK(t.read<int64_t>(l) == std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                                                   std::numeric_limits<int64_t>::max()});
  auto base = sevens(t, {2, 3});
  TensorView col = base.view;  // column 1
  col.shape = {2};
  col.strides = {3};
  col.byte_offset = 4;
  t.run("fill", {}, {&col}, {Attr::f("value", 0.5)});
  CHECK(t.read<float>(base) == fv({7, 0.5f, 7, 7, 0.5f, 7}));
  auto s = t.empty(HAL_DTYPE_FLOAT64, {});
  t.run("fill", {}, {&s.view}, {Attr::f("value", 1.25)});
  CHECK(t.read<double>(s) == std::vector<double>{1.25});
  auto z = t.empty(HAL_DTYPE_FLOAT32, {0});
  t.run("fill", {}, {&z.view}, {Attr::f("value", 1.0)});

  auto u8 = t.empty(HAL_DTYPE_UINT8, {2});
  t.run("fill", {}, {&u8.view}, {Attr::f("value", 255.9)});
  CHECK(t.read<uint8_t>(u8) == std::vector<uint8_t>{255, 255});
  auto h = t.empty(HAL_DTYPE_FLOAT16, {2});
  auto f = sevens(t, {2});
  expect_error(t, "fill", {}, {&u8.view}, {Attr::i("value", -1)}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'value' = -1 cannot be converted to uint8 without overflow");
  expect_error(t, "fill", {}, {&u8.view}, {Attr::f("value", NAN)}, HAL_STATUS_INVALID_ARGUMENT,
               "cannot be converted to uint8");
  expect_error(t, "fill", {}, {&h.view}, {Attr::f("value", 1e6)}, HAL_STATUS_INVALID_ARGUMENT,
               "cannot be converted to float16");
  expect_error(t, "fill", {}, {&f.view}, {}, HAL_STATUS_INVALID_ARGUMENT, "missing required attribute 'value'", &f);
  expect_error(t, "fill", {}, {&f.view}, {Attr::s("value", "x")}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'value' must be scalar", &f);
  expect_error(t, "fill", {}, {&f.view}, {Attr::f("valu", 1)}, HAL_STATUS_INVALID_ARGUMENT,
               "unknown attribute 'valu'", &f);
}

TEST_CASE("arange checks the output size and computes in int64 or double") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto i = t.empty(HAL_DTYPE_INT64, {3});
  t.run("arange", {}, {&i.view}, {Attr::i("end", 5), Attr::i("step", 2)});
  CHECK(t.read<int64_t>(i) == std::vector<int64_t>{0, 2, 4});
  auto f = t.empty(HAL_DTYPE_FLOAT32, {4});
  t.run("arange", {}, {&f.view}, {Attr::i("start", 1), Attr::i("end", 0), Attr::f("step", -0.25)});
  CHECK(t.read<float>(f) == fv({1, 0.75f, 0.5f, 0.25f}));
  auto u = t.empty(HAL_DTYPE_UINT8, {3});
  t.run("arange", {}, {&u.view}, {Attr::f("start", 0.5), Attr::f("end", 3.5), Attr::dtype("dtype", HAL_DTYPE_UINT8)});
  CHECK(t.read<uint8_t>(u) == std::vector<uint8_t>{0, 1, 2});
  auto e = t.empty(HAL_DTYPE_FLOAT64, {0});
  t.run("arange", {}, {&e.view}, {Attr::i("start", 3), Attr::i("end", 3), Attr::dtype("dtype", HAL_DTYPE_FLOAT64)});

  auto wrong = sevens(t, {5});
  expect_error(t, "arange", {}, {&wrong.view}, {Attr::f("end", 4)}, HAL_STATUS_INVALID_ARGUMENT,
               "output 'out' has shape [5] but must be [4]", &wrong);
  expect_error(t, "arange", {}, {&wrong.view}, {Attr::i("end", 5)}, HAL_STATUS_INVALID_ARGUMENT,
               "output 'out' has dtype float32 but must be int64", &wrong);
  expect_error(t, "arange", {}, {&wrong.view}, {Attr::i("end", 4), Attr::i("step", 0)},
               HAL_STATUS_INVALID_ARGUMENT, "'step' must be nonzero", &wrong);
  expect_error(t, "arange", {}, {&wrong.view}, {Attr::i("end", 4), Attr::i("step", -1)},
               HAL_STATUS_INVALID_ARGUMENT, "does not lead from 'start'", &wrong);
  expect_error(t, "arange", {}, {&wrong.view}, {Attr::f("end", INFINITY)}, HAL_STATUS_INVALID_ARGUMENT,
               "must be finite", &wrong);
  auto b = t.empty(HAL_DTYPE_BOOL, {4});
  expect_error(t, "arange", {}, {&b.view}, {Attr::i("end", 4), Attr::dtype("dtype", HAL_DTYPE_BOOL)},
               HAL_STATUS_UNSUPPORTED_DTYPE, "attribute 'dtype' = bool is not supported");
  expect_error(t, "arange", {}, {&wrong.view}, {}, HAL_STATUS_INVALID_ARGUMENT, "missing required attribute 'end'",
               &wrong);
}

TEST_CASE("cat concatenates along dim with promotion and zero-size inputs") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 2}, {1, 2, 3, 4});
  auto b = t.tensor<int32_t>({2, 1}, {5, 6}, HAL_DTYPE_INT32);
  auto z = t.empty(HAL_DTYPE_FLOAT32, {2, 0});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  t.run("cat", {&a.view, &z.view, &b.view}, {&out.view}, {Attr::i("dim", -1)});
  CHECK(t.read<float>(out) == fv({1, 2, 5, 3, 4, 6}));
  TensorView at = a.view;  // transposed input
  at.strides = {1, 2};
  auto rows = t.empty(HAL_DTYPE_FLOAT32, {4, 2});
  t.run("cat", {&at, &a.view}, {&rows.view});
  CHECK(t.read<float>(rows) == fv({1, 3, 2, 4, 1, 2, 3, 4}));

  auto sentinel = sevens(t, {2, 3});
  auto c = t.tensor({3, 1}, {1, 2, 3});
  expect_error(t, "cat", {&a.view, &c.view}, {&sentinel.view}, {Attr::i("dim", 1)}, HAL_STATUS_INVALID_ARGUMENT,
               "input 'tensors'[1] has shape [3, 1] but input 'tensors'[0] has shape [2, 2] (they must match except in dim 1)",
               &sentinel);
  auto v = t.tensor({2}, {1, 2});
  expect_error(t, "cat", {&a.view, &v.view}, {&sentinel.view}, {Attr::i("dim", 1)}, HAL_STATUS_INVALID_ARGUMENT,
               "input 'tensors'[1] has shape [2]", &sentinel);
  auto s = t.tensor({}, {1});
  expect_error(t, "cat", {&s.view}, {&sentinel.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "input 'tensors'[0] is 0-d", &sentinel);
  expect_error(t, "cat", {&a.view, &b.view}, {&sentinel.view}, {Attr::i("dim", 2)}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'dim' = 2 is out of range", &sentinel);
  auto i_out = t.empty(HAL_DTYPE_INT32, {2, 3});
  expect_error(t, "cat", {&a.view, &b.view}, {&i_out.view}, {Attr::i("dim", 1)}, HAL_STATUS_INVALID_ARGUMENT,
               "has dtype int32 but must be float32");
}

TEST_CASE("stack inserts a new dim") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2}, {1, 2});
  auto b = t.tensor({2}, {3, 4});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  t.run("stack", {&a.view, &b.view}, {&out.view}, {Attr::i("dim", 1)});
  CHECK(t.read<float>(out) == fv({1, 3, 2, 4}));
  t.run("stack", {&a.view, &b.view}, {&out.view}, {Attr::i("dim", -2)});
  CHECK(t.read<float>(out) == fv({1, 2, 3, 4}));
  auto s = t.tensor({}, {9});
  auto s_out = t.empty(HAL_DTYPE_FLOAT32, {3});
  t.run("stack", {&s.view, &s.view, &s.view}, {&s_out.view});
  CHECK(t.read<float>(s_out) == fv({9, 9, 9}));

  auto c = t.tensor({3}, {1, 2, 3});
  auto sentinel = sevens(t, {2, 2});
  expect_error(t, "stack", {&a.view, &c.view}, {&sentinel.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "input 'tensors'[1] has shape [3] but input 'tensors'[0] has shape [2] (they must match)", &sentinel);
  expect_error(t, "stack", {&a.view, &b.view}, {&sentinel.view}, {Attr::i("dim", 2)}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'dim' = 2 is out of range", &sentinel);
}

TEST_CASE("split by size and by sizes - the output count must match") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto o0 = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  auto o1 = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  auto o2 = t.empty(HAL_DTYPE_FLOAT32, {2, 1});
  t.run("split", {&a.view}, {&o0.view, &o1.view, &o2.view}, {Attr::i("split_size", 2), Attr::i("dim", 1)});
  CHECK(t.read<float>(o0) == fv({0, 1, 5, 6}));
  CHECK(t.read<float>(o1) == fv({2, 3, 7, 8}));
  CHECK(t.read<float>(o2) == fv({4, 9}));
  auto p0 = t.empty(HAL_DTYPE_FLOAT32, {2, 4});
  auto p1 = t.empty(HAL_DTYPE_FLOAT32, {2, 0});
  auto p2 = t.empty(HAL_DTYPE_FLOAT32, {2, 1});
  t.run("split", {&a.view}, {&p0.view, &p1.view, &p2.view}, {Attr::ints("sizes", {4, 0, 1}), Attr::i("dim", -1)});
  CHECK(t.read<float>(p0) == fv({0, 1, 2, 3, 5, 6, 7, 8}));
  CHECK(t.read<float>(p2) == fv({4, 9}));
  auto z = t.empty(HAL_DTYPE_FLOAT32, {0, 5});
  auto z_out = t.empty(HAL_DTYPE_FLOAT32, {0, 5});
  t.run("split", {&z.view}, {&z_out.view}, {Attr::i("split_size", 0)});

  auto s0 = sevens(t, {2, 2});
  auto s1 = sevens(t, {2, 3});
  expect_error(t, "split", {&a.view}, {&s0.view, &s1.view}, {Attr::i("split_size", 2), Attr::i("dim", 1)},
               HAL_STATUS_INVALID_ARGUMENT, "splits into 3 chunks along dim 1 but 2 outputs were given", &s0);
  expect_error(t, "split", {&a.view}, {&s0.view, &s1.view}, {Attr::ints("sizes", {2, 2}), Attr::i("dim", 1)},
               HAL_STATUS_INVALID_ARGUMENT, "attribute 'sizes' [2, 2] sums to 4 but the dim has size 5", &s1);
  expect_error(t, "split", {&a.view}, {&s0.view, &s1.view}, {Attr::ints("sizes", {7, -2}), Attr::i("dim", 1)},
               HAL_STATUS_INVALID_ARGUMENT, "negative entry -2", &s1);
  expect_error(t, "split", {&a.view}, {&s0.view, &s1.view},
               {Attr::ints("sizes", {2, 3}), Attr::i("split_size", 2), Attr::i("dim", 1)}, HAL_STATUS_INVALID_ARGUMENT,
               "exactly one of attributes 'split_size' and 'sizes' (both were given)", &s1);
  expect_error(t, "split", {&a.view}, {&s0.view}, {Attr::i("split_size", 0)}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'split_size' = 0 must be positive", &s0);
  expect_error(t, "split", {&a.view}, {&s0.view}, {Attr::i("split_size", 1), Attr::i("dim", 3)},
               HAL_STATUS_INVALID_ARGUMENT, "attribute 'dim' = 3 is out of range", &s0);
}

TEST_CASE("pad: constant (with crop), reflect and replicate") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto c = t.empty(HAL_DTYPE_FLOAT32, {3, 4});
  t.run("pad", {&a.view}, {&c.view}, {Attr::ints("pad", {1, 0, 0, 1}), Attr::f("value", 9)});
  CHECK(t.read<float>(c) == fv({9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9}));
  auto crop = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  t.run("pad", {&a.view}, {&crop.view}, {Attr::ints("pad", {-1, 0})});
  CHECK(t.read<float>(crop) == fv({2, 3, 5, 6}));
  auto r = t.empty(HAL_DTYPE_FLOAT32, {4, 7});
  t.run("pad", {&a.view}, {&r.view}, {Attr::ints("pad", {2, 2, 1, 1}), Attr::s("mode", "reflect")});
  CHECK(t.read<float>(r) == fv({6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1}));
  auto p = t.empty(HAL_DTYPE_FLOAT32, {2, 5});
  auto colmajor = t.tensor({3, 2}, {1, 4, 2, 5, 3, 6});
  TensorView at = colmajor.view;  // a column-major [2, 3] with a's values
  at.shape = {2, 3};
  at.strides = {1, 2};
  t.run("pad", {&at}, {&p.view}, {Attr::ints("pad", {1, 1}), Attr::s("mode", "replicate")});
  CHECK(t.read<float>(p) == fv({1, 1, 2, 3, 3, 4, 4, 5, 6, 6}));
  auto i = t.tensor<int64_t>({2}, {1, 2}, HAL_DTYPE_INT64);
  auto io = t.empty(HAL_DTYPE_INT64, {5});
  t.run("pad", {&i.view}, {&io.view}, {Attr::ints("pad", {2, 1}), Attr::i("value", -3)});
  CHECK(t.read<int64_t>(io) == std::vector<int64_t>{-3, -3, 1, 2, -3});
  auto s = t.tensor({}, {4});
  auto so = t.empty(HAL_DTYPE_FLOAT32, {});
  t.run("pad", {&s.view}, {&so.view}, {Attr::ints("pad", {})});
  CHECK(t.read<float>(so) == fv({4}));

  auto sentinel = sevens(t, {2, 7});
  expect_error(t, "pad", {&a.view}, {&sentinel.view}, {Attr::ints("pad", {3, 1}), Attr::s("mode", "reflect")},
               HAL_STATUS_INVALID_ARGUMENT, "pads must be smaller than the dim's size", &sentinel);
  expect_error(t, "pad", {&a.view}, {&sentinel.view}, {Attr::ints("pad", {1})}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'pad' [1] must have an even length", &sentinel);
  expect_error(t, "pad", {&a.view}, {&sentinel.view}, {Attr::ints("pad", {-4, 0})}, HAL_STATUS_INVALID_ARGUMENT,
               "the padded size would be negative", &sentinel);
  expect_error(t, "pad", {&a.view}, {&sentinel.view}, {Attr::ints("pad", {-1, 0}), Attr::s("mode", "replicate")},
               HAL_STATUS_INVALID_ARGUMENT, "pads must be non-negative in mode 'replicate'", &sentinel);
  expect_error(t, "pad", {&a.view}, {&sentinel.view}, {Attr::ints("pad", {2, 2}), Attr::s("mode", "circular")},
               HAL_STATUS_INVALID_ARGUMENT, "attribute 'mode' = 'circular' is not one of", &sentinel);
  auto u8 = t.tensor<uint8_t>({2}, {1, 2}, HAL_DTYPE_UINT8);
  auto u8o = t.empty(HAL_DTYPE_UINT8, {4});
  expect_error(t, "pad", {&u8.view}, {&u8o.view}, {Attr::ints("pad", {1, 1}), Attr::i("value", 256)},
               HAL_STATUS_INVALID_ARGUMENT, "attribute 'value' = 256 cannot be converted to uint8");
  auto e = t.empty(HAL_DTYPE_FLOAT32, {2, 0});
  auto eo = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  expect_error(t, "pad", {&e.view}, {&eo.view}, {Attr::ints("pad", {1, 1}), Attr::s("mode", "replicate")},
               HAL_STATUS_INVALID_ARGUMENT, "an empty dim cannot be padded");
  t.run("pad", {&e.view}, {&eo.view}, {Attr::ints("pad", {1, 1}), Attr::f("value", 3)});
  CHECK(t.read<float>(eo) == fv({3, 3, 3, 3}));
}

TEST_CASE("flip, roll and repeat") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  t.run("flip", {&a.view}, {&out.view}, {Attr::ints("dims", {-1})});
  CHECK(t.read<float>(out) == fv({3, 2, 1, 6, 5, 4}));
  t.run("flip", {&a.view}, {&out.view}, {Attr::ints("dims", {0, 1})});
  CHECK(t.read<float>(out) == fv({6, 5, 4, 3, 2, 1}));
  t.run("flip", {&a.view}, {&out.view}, {Attr::ints("dims", {})});
  CHECK(t.read<float>(out) == fv({1, 2, 3, 4, 5, 6}));

  t.run("roll", {&a.view}, {&out.view}, {Attr::ints("shifts", {1})});
  CHECK(t.read<float>(out) == fv({6, 1, 2, 3, 4, 5}));
  t.run("roll", {&a.view}, {&out.view}, {Attr::ints("shifts", {-1, 1}), Attr::ints("dims", {1, 0})});
  CHECK(t.read<float>(out) == fv({5, 6, 4, 2, 3, 1}));
  TensorView at = a.view;  // transposed [3, 2]: 1 4 / 2 5 / 3 6
  at.shape = {3, 2};
  at.strides = {1, 3};
  auto o32 = t.empty(HAL_DTYPE_FLOAT32, {3, 2});
  t.run("roll", {&at}, {&o32.view}, {Attr::ints("shifts", {-7})});
  CHECK(t.read<float>(o32) == fv({4, 2, 5, 3, 6, 1}));

  auto rep = t.empty(HAL_DTYPE_FLOAT32, {2, 2, 6});
  t.run("repeat", {&a.view}, {&rep.view}, {Attr::ints("repeats", {2, 1, 2})});
  CHECK(t.read<float>(rep) == fv({1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  auto s = t.tensor({}, {3});
  auto so = t.empty(HAL_DTYPE_FLOAT32, {2});
  t.run("repeat", {&s.view}, {&so.view}, {Attr::ints("repeats", {2})});
  CHECK(t.read<float>(so) == fv({3, 3}));
  auto z = t.empty(HAL_DTYPE_FLOAT32, {0, 3});
  t.run("repeat", {&a.view}, {&z.view}, {Attr::ints("repeats", {0, 1})});

  auto sentinel = sevens(t, {2, 3});
  expect_error(t, "flip", {&a.view}, {&sentinel.view}, {Attr::ints("dims", {1, -1})}, HAL_STATUS_INVALID_ARGUMENT,
               "names dim 1 twice", &sentinel);
  expect_error(t, "flip", {&sentinel.view}, {&sentinel.view}, {Attr::ints("dims", {0})}, HAL_STATUS_INVALID_ARGUMENT,
               "this op allows no aliasing", &sentinel);
  expect_error(t, "flip", {&a.view}, {&sentinel.view}, {Attr::ints("dims", {2})}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'dims' = 2 is out of range", &sentinel);
  expect_error(t, "roll", {&a.view}, {&sentinel.view}, {Attr::ints("shifts", {1, 2})}, HAL_STATUS_INVALID_ARGUMENT,
               "one entry when 'dims' is empty", &sentinel);
  expect_error(t, "roll", {&a.view}, {&sentinel.view}, {Attr::ints("shifts", {1}), Attr::ints("dims", {0, 1})},
               HAL_STATUS_INVALID_ARGUMENT, "as many entries as 'dims' [0, 1]", &sentinel);
  expect_error(t, "roll", {&a.view}, {&sentinel.view}, {Attr::ints("shifts", {1}), Attr::ints("dims", {-3})},
               HAL_STATUS_INVALID_ARGUMENT, "attribute 'dims' = -3 is out of range", &sentinel);
  expect_error(t, "repeat", {&a.view}, {&sentinel.view}, {Attr::ints("repeats", {2})}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'repeats' [2] has fewer entries", &sentinel);
  expect_error(t, "repeat", {&a.view}, {&sentinel.view}, {Attr::ints("repeats", {1, -1})},
               HAL_STATUS_INVALID_ARGUMENT, "negative entry -1", &sentinel);
  expect_error(t, "repeat", {&a.view}, {&sentinel.view}, {Attr::ints("repeats", {1, 2})},
               HAL_STATUS_INVALID_ARGUMENT, "has shape [2, 3] but must be [2, 6]", &sentinel);
}

TEST_CASE("tril and triu keep a triangle, batched and in place") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  std::vector<float> v(18);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  auto a = t.tensor({2, 3, 3}, v);
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3, 3});
  t.run("tril", {&a.view}, {&out.view});
  CHECK(t.read<float>(out) == fv({1, 0, 0, 4, 5, 0, 7, 8, 9, 10, 0, 0, 13, 14, 0, 16, 17, 18}));
  t.run("triu", {&a.view}, {&out.view}, {Attr::i("diagonal", 1)});
  CHECK(t.read<float>(out) == fv({0, 2, 3, 0, 0, 6, 0, 0, 0, 0, 11, 12, 0, 0, 15, 0, 0, 0}));
  t.run("tril", {&a.view}, {&out.view}, {Attr::i("diagonal", -5)});
  CHECK(t.read<float>(out) == std::vector<float>(18, 0.0f));
  t.run("triu", {&a.view}, {&out.view}, {Attr::i("diagonal", std::numeric_limits<int64_t>::min())});
  CHECK(t.read<float>(out) == v);
  auto m = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorView mt = m.view;  // transposed [3, 2]
  mt.shape = {3, 2};
  mt.strides = {1, 3};
  auto o = t.empty(HAL_DTYPE_FLOAT32, {3, 2});
  t.run("triu", {&mt}, {&o.view}, {Attr::i("diagonal", -1)});
  CHECK(t.read<float>(o) == fv({1, 4, 2, 5, 0, 6}));
  t.run("tril", {&m.view}, {&m.view}, {Attr::i("diagonal", 1)});  // in place
  CHECK(t.read<float>(m) == fv({1, 2, 0, 4, 5, 6}));
  auto z = t.empty(HAL_DTYPE_FLOAT32, {0, 3});
  t.run("tril", {&z.view}, {&z.view});

  auto r1 = t.tensor({3}, {1, 2, 3});
  auto sentinel = sevens(t, {3});
  expect_error(t, "triu", {&r1.view}, {&sentinel.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "input 'self' must have rank >= 2 but has shape [3]", &sentinel);
}

TEST_CASE("one_hot writes rows and refuses out-of-range classes before writing") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto idx = t.tensor<int64_t>({2, 2}, {0, 2, 1, 2}, HAL_DTYPE_INT64);
  auto out = t.empty(HAL_DTYPE_INT64, {2, 2, 3});
  t.run("one_hot", {&idx.view}, {&out.view}, {Attr::i("num_classes", 3)});
  CHECK(t.read<int64_t>(out) == std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1});
  auto s = t.tensor<int64_t>({}, {1}, HAL_DTYPE_INT64);
  auto so = t.empty(HAL_DTYPE_INT64, {2});
  t.run("one_hot", {&s.view}, {&so.view}, {Attr::i("num_classes", 2)});
  CHECK(t.read<int64_t>(so) == std::vector<int64_t>{0, 1});

  auto bad = t.tensor<int64_t>({3}, {0, 3, -1}, HAL_DTYPE_INT64);
  auto sentinel = t.tensor<int64_t>({3, 3}, std::vector<int64_t>(9, 7), HAL_DTYPE_INT64);
  try {
    t.run("one_hot", {&bad.view}, {&sentinel.view}, {Attr::i("num_classes", 3)});
    FAIL("accepted an out-of-range class");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_OUT_OF_RANGE);
    CHECK_MESSAGE(std::string(e.what()).find("one_hot: index 3 in 'self' at position 1 is out of range [0, 3)") !=
                      std::string::npos,
                  e.what());
  }
  CHECK(t.read<int64_t>(sentinel) == std::vector<int64_t>(9, 7));
  auto f = t.tensor({3}, {0, 1, 2});
  expect_error(t, "one_hot", {&f.view}, {&sentinel.view}, {Attr::i("num_classes", 3)}, HAL_STATUS_UNSUPPORTED_DTYPE,
               "input 'self' has dtype float32");
  expect_error(t, "one_hot", {&idx.view}, {&sentinel.view}, {Attr::i("num_classes", -1)},
               HAL_STATUS_INVALID_ARGUMENT, "attribute 'num_classes' = -1 must be non-negative");
  expect_error(t, "one_hot", {&idx.view}, {&sentinel.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "missing required attribute 'num_classes'");
}

TEST_CASE("a data-dependent error on a stream is reported by its synchronize") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto bad = t.tensor<int64_t>({2}, {0, 5}, HAL_DTYPE_INT64);
  auto out = t.tensor<int64_t>({2, 2}, std::vector<int64_t>(4, 7), HAL_DTYPE_INT64);
  hal::Stream stream = t.device()->create_stream();
  hal::OpRunner(t.device(), "one_hot").launch({&bad.view}, {&out.view}, {Attr::i("num_classes", 2)}, &stream);
  CHECK_THROWS_WITH_AS(stream.synchronize(), doctest::Contains("index 5 in 'self' at position 1"), hal::Error);
  CHECK(t.read<int64_t>(out) == std::vector<int64_t>(4, 7));
}

TEST_CASE("copy of a large float32 tensor is a parallel memcpy - casts and reversal agree") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t n = 1 << 20;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 1000) - 500.25f;
  auto a = t.tensor({n}, v);
  auto b = t.empty(HAL_DTYPE_FLOAT32, {n});
  t.run("copy", {&a.view}, {&b.view});
  CHECK(t.read<float>(b) == v);
  auto i = t.empty(HAL_DTYPE_INT32, {n});
  t.run("copy", {&a.view}, {&i.view});
  auto iv = t.read<int32_t>(i);
  auto f = t.empty(HAL_DTYPE_FLOAT32, {n});
  t.run("flip", {&a.view}, {&f.view}, {Attr::ints("dims", {0})});
  auto fv2 = t.read<float>(f);
  bool ok = true;
  for (int64_t k = 0; k < n; ++k) {
    ok = ok && iv[static_cast<size_t>(k)] == static_cast<int32_t>(std::trunc(v[static_cast<size_t>(k)]));
    ok = ok && fv2[static_cast<size_t>(k)] == v[static_cast<size_t>(n - 1 - k)];
  }
  CHECK(ok);
}

TEST_CASE("copy of transposed views (tiled) matches element-wise indexing") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t B = 3, R = 40, C = 50;
  std::vector<int16_t> v(static_cast<size_t>(B * R * C));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int16_t>(i);
  auto a = t.tensor<int16_t>({B, R, C}, v, HAL_DTYPE_INT16);
  TensorView at = a.view;  // permute(0, 2, 1): [B, C, R]
  at.shape = {B, C, R};
  at.strides = {R * C, 1, C};
  for (hal_dtype_e dt : {HAL_DTYPE_INT16, HAL_DTYPE_INT32}) {
    auto out = t.empty(dt, {B, C, R});
    t.run("copy", {&at}, {&out.view});
    std::vector<int32_t> got;
    if (dt == HAL_DTYPE_INT16) {
      for (int16_t x : t.read<int16_t>(out)) got.push_back(x);
    } else {
      got = t.read<int32_t>(out);
    }
    bool ok = true;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t r = 0; r < R; ++r)
          ok = ok && got[static_cast<size_t>((b * C + c) * R + r)] == v[static_cast<size_t>((b * R + r) * C + c)];
    CHECK_MESSAGE(ok, hal::sdk::dtype_name(dt));
  }
}

TEST_CASE("copy of short rows (heads of a permute) matches element-wise indexing, into and out of views") {
  // Rows of up to 64 bytes are copied row by row with stepped pointers: every row size case (8,
  // 16, 32, 64 bytes and others), 2- and 4-byte elements, and a copy large enough to split across
  // threads mid-dim; rows of 68 bytes take the general loop.
  OpTester t(HAL_TEST_CPU_PLUGIN);
  struct Case {
    int64_t B, T, H, D;
    hal_dtype_e dt;
  };
  const hal_dtype_e i32 = HAL_DTYPE_INT32, i16 = HAL_DTYPE_INT16;
  const Case cases[] = {{3, 5, 4, 2, i32}, {3, 5, 4, 3, i32},  {3, 5, 4, 4, i32}, {3, 5, 4, 8, i32},
                        {2, 7, 3, 16, i32}, {2, 7, 3, 17, i32}, {3, 5, 4, 8, i16}, {2, 3, 5, 5, i16},
                        {64, 128, 4, 8, i32}};
  for (const Case& c : cases) {
    CAPTURE(c.D);
    CAPTURE(c.B);
    const int64_t n = c.B * c.T * c.H * c.D;
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>(i % 30011);  // fits int16
    auto make = [&](const std::vector<int64_t>& shape, const std::vector<int32_t>& values) {
      if (c.dt == HAL_DTYPE_INT32) return t.tensor<int32_t>(shape, values, c.dt);
      return t.tensor<int16_t>(shape, std::vector<int16_t>(values.begin(), values.end()), c.dt);
    };
    auto read = [&](const DeviceTensor& x) {
      if (c.dt == HAL_DTYPE_INT32) return t.read<int32_t>(x);
      std::vector<int32_t> r;
      for (int16_t e : t.read<int16_t>(x)) r.push_back(e);
      return r;
    };
    // [B, T, H, D] -> [B, H, T, D]: element (b, h, s, d) of the permute is v[((b*T + s)*H + h)*D + d].
    auto index = [&](int64_t b, int64_t h, int64_t s, int64_t d) { return ((b * c.T + s) * c.H + h) * c.D + d; };
    auto a = make({c.B, c.T, c.H, c.D}, v);
    TensorView perm = a.view;
    perm.shape = {c.B, c.H, c.T, c.D};
    perm.strides = {c.T * c.H * c.D, c.D, c.H * c.D, 1};
    auto out = t.empty(c.dt, {c.B, c.H, c.T, c.D});
    t.run("copy", {&perm}, {&out.view});
    std::vector<int32_t> got = read(out);
    bool ok = true;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t s = 0; s < c.T; ++s)
          for (int64_t d = 0; d < c.D; ++d)
            ok = ok && got[static_cast<size_t>(((b * c.H + h) * c.T + s) * c.D + d)] ==
                           v[static_cast<size_t>(index(b, h, s, d))];
    CHECK(ok);
    // Back into a permuted view of a fresh buffer: the original layout again.
    auto back = make({c.B, c.T, c.H, c.D}, std::vector<int32_t>(static_cast<size_t>(n), 0));
    TensorView back_perm = back.view;
    back_perm.shape = perm.shape;
    back_perm.strides = perm.strides;
    t.run("copy", {&out.view}, {&back_perm});
    std::vector<int32_t> round = read(back);
    ok = true;
    for (int64_t i = 0; i < n; ++i)
      ok = ok && round[static_cast<size_t>(i)] == v[static_cast<size_t>(i)];
    CHECK(ok);
  }
}
