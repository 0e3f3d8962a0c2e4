// CPU random kernels through the runtime's op API: Philox known answers,
// the catalog's (seed, offset) -> value mapping, statistics, layouts and
// the refused launches (hal-conformance re-derives the mapping on its own).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "hal/sdk/kernel/half.hpp"
#include "hal/sdk/kernel/philox.hpp"
#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::testing::OpTester;
namespace philox = hal::sdk::kernel::philox;

namespace {

// Expects OP to be refused with CODE and a message containing MENTION, and
// OUT (float32, all 7) untouched.
void expect_refused(OpTester& t, const std::string& op, const std::vector<const hal::TensorView*>& in,
                    const std::vector<const hal::TensorView*>& out, const std::vector<Attr>& attrs,
                    hal_status_code_e code, const std::string& mention, const hal::testing::DeviceTensor* check) {
  t.expect_refused(op, in, out, attrs, {mention}, code, check ? std::vector<const hal::testing::DeviceTensor*>{check} : std::vector<const hal::testing::DeviceTensor*>{});
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}
double var_of(const std::vector<float>& v) {
  double m = mean_of(v), s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size());
}

}  // namespace

TEST_CASE("philox4x32-10 matches the Random123 known-answer vectors") {
  CHECK(philox::philox4x32_10({0, 0, 0, 0}, {0, 0}) == philox::Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(philox::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
        philox::Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(philox::philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
        philox::Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("uniform follows the catalog's mapping and offset counts 128-bit blocks") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto out = t.empty(HAL_DTYPE_FLOAT32, {3, 5});
  t.run("uniform", {}, {&out.view},
        {Attr::ints("size", {3, 5}), Attr::f("from", -1.0), Attr::f("to", 3.0), Attr::i("seed", 42), Attr::i("offset", 7)});
  std::vector<float> got = t.read<float>(out);
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t w = philox::block(7 + i / 4, 42)[i % 4];
    float expect = -1.0f + 4.0f * static_cast<float>((w >> 8) * 0x1p-24);
    CHECK(got[i] == expect);
    CHECK(got[i] >= -1.0f);
    CHECK(got[i] < 3.0f);
  }
  // offset + 1 skips exactly 4 elements.
  auto shifted = t.empty(HAL_DTYPE_FLOAT32, {11});
  t.run("uniform", {}, {&shifted.view},
        {Attr::ints("size", {11}), Attr::f("from", -1.0), Attr::f("to", 3.0), Attr::i("seed", 42), Attr::i("offset", 8)});
  std::vector<float> s = t.read<float>(shifted);
  CHECK(std::vector<float>(got.begin() + 4, got.end()) == s);
}

TEST_CASE("uniform in float64, float16 and bfloat16 stays within 0 <= x < 1 and float64 uses 53 bits") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto d = t.empty(HAL_DTYPE_FLOAT64, {6});
  t.run("uniform", {}, {&d.view}, {Attr::ints("size", {6}), Attr::dtype("dtype", HAL_DTYPE_FLOAT64), Attr::i("seed", 5)});
  std::vector<double> dv = t.read<double>(d);
  for (size_t i = 0; i < dv.size(); ++i) {
    uint32_t hi = philox::block((2 * i) / 4, 5)[(2 * i) % 4], lo = philox::block((2 * i + 1) / 4, 5)[(2 * i + 1) % 4];
    CHECK(dv[i] == static_cast<double>(((uint64_t{hi} << 32) | lo) >> 11) * 0x1p-53);
  }
  for (hal_dtype_e dt : {HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16}) {
    auto h = t.empty(dt, {4096});
    t.run("uniform", {}, {&h.view}, {Attr::ints("size", {4096}), Attr::dtype("dtype", dt), Attr::i("seed", 9)});
    for (uint16_t bits : t.read<uint16_t>(h)) {
      float v = dt == HAL_DTYPE_FLOAT16 ? hal::sdk::kernel::Half::to_float(bits)
                                        : hal::sdk::kernel::bits_float(static_cast<uint32_t>(bits) << 16);
      CHECK(v >= 0.0f);
      CHECK(v < 1.0f);
    }
  }
}

TEST_CASE("random values depend on the logical index, not the output's layout") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto ref = t.empty(HAL_DTYPE_FLOAT32, {3, 4});
  std::vector<Attr> attrs = {Attr::ints("size", {3, 4}), Attr::i("seed", 3), Attr::f("mean", 1.0)};
  t.run("normal", {}, {&ref.view}, attrs);
  auto buf = t.empty(HAL_DTYPE_FLOAT32, {4, 3});
  hal::TensorView transposed = buf.view;  // logical [3, 4] stored column-major
  transposed.shape = {3, 4};
  transposed.strides = {1, 3};
  t.run("normal", {}, {&transposed}, attrs);
  std::vector<float> r = t.read<float>(ref), b = t.read<float>(buf);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(b[j * 3 + i] == r[i * 4 + j]);
}

TEST_CASE("normal and uniform statistics over a large sample, 0-d and empty outputs") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t n = 200001;  // odd: the last pair's second value is dropped
  auto out = t.empty(HAL_DTYPE_FLOAT32, {n});
  t.run("normal", {}, {&out.view},
        {Attr::ints("size", {n}), Attr::f("mean", 2.0), Attr::f("std", 3.0), Attr::i("seed", 1234)});
  std::vector<float> v = t.read<float>(out);
  CHECK(mean_of(v) == doctest::Approx(2.0).epsilon(0.02));
  CHECK(var_of(v) == doctest::Approx(9.0).epsilon(0.02));
  t.run("uniform", {}, {&out.view}, {Attr::ints("size", {n}), Attr::i("seed", 1234)});
  v = t.read<float>(out);
  CHECK(mean_of(v) == doctest::Approx(0.5).epsilon(0.01));
  CHECK(var_of(v) == doctest::Approx(1.0 / 12).epsilon(0.02));

  auto scalar = t.empty(HAL_DTYPE_FLOAT32, {});
  t.run("normal", {}, {&scalar.view}, {Attr::ints("size", {}), Attr::i("seed", 1234)});
  // Element 0 of any normal call with the same stream.
  t.run("normal", {}, {&out.view}, {Attr::ints("size", {n}), Attr::i("seed", 1234)});
  CHECK(t.read<float>(scalar)[0] == t.read<float>(out)[0]);
  auto empty = t.empty(HAL_DTYPE_FLOAT32, {0, 3});
  t.run("uniform", {}, {&empty.view}, {Attr::ints("size", {0, 3}), Attr::i("seed", 1)});
}

TEST_CASE("bernoulli: 0 and 1 are exact, p gives the right rate, bad probabilities are refused") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t n = 100000;
  std::vector<float> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i % 4 == 0 ? 0.0f : i % 4 == 1 ? 1.0f : 0.3f;
  auto prob = t.tensor({n}, p);
  auto out = t.empty(HAL_DTYPE_FLOAT32, {n});
  t.run("bernoulli", {&prob.view}, {&out.view}, {Attr::i("seed", 77)});
  std::vector<float> v = t.read<float>(out);
  int64_t ones = 0, count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 4 == 0) CHECK(v[i] == 0.0f);
    if (i % 4 == 1) CHECK(v[i] == 1.0f);
    if (i % 4 >= 2) {
      CHECK((v[i] == 0.0f || v[i] == 1.0f));
      ones += v[i] == 1.0f;
      ++count;
    }
  }
  CHECK(static_cast<double>(ones) / count == doctest::Approx(0.3).epsilon(0.03));

  auto bad = t.tensor({2, 2}, {0.5f, 0.2f, 1.5f, 0.1f});
  auto untouched = t.tensor({2, 2}, {7, 7, 7, 7});
  expect_refused(t, "bernoulli", {&bad.view}, {&untouched.view}, {Attr::i("seed", 1)}, HAL_STATUS_OUT_OF_RANGE,
                 "probability 1.5 in 'self' at position 2", &untouched);
  auto nan = t.tensor({1}, {std::nanf("")});
  auto out1 = t.tensor({1}, {7});
  expect_refused(t, "bernoulli", {&nan.view}, {&out1.view}, {Attr::i("seed", 1)}, HAL_STATUS_OUT_OF_RANGE,
                 "out of range [0, 1]", &out1);
  auto ints = t.tensor<int32_t>({2, 2}, {0, 1, 0, 1}, HAL_DTYPE_INT32);
  auto iout = t.empty(HAL_DTYPE_INT32, {2, 2});
  expect_refused(t, "bernoulli", {&ints.view}, {&iout.view}, {Attr::i("seed", 1)}, HAL_STATUS_UNSUPPORTED_DTYPE,
                 "dtype int32", nullptr);
}

TEST_CASE("dropout scales kept elements, its mask keeps 1 - p, and train = false copies") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t n = 50000;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f + static_cast<float>(i % 7);
  auto self = t.tensor({n}, x);
  auto out = t.empty(HAL_DTYPE_FLOAT32, {n});
  auto mask = t.empty(HAL_DTYPE_BOOL, {n});
  t.run("dropout", {&self.view}, {&out.view, &mask.view}, {Attr::f("p", 0.2), Attr::i("seed", 11), Attr::i("offset", 3)});
  std::vector<float> o = t.read<float>(out);
  std::vector<uint8_t> m = t.read<uint8_t>(mask);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t w = philox::block(3 + i / 4, 11)[i % 4];
    bool keep = (w >> 8) * 0x1p-24 < 1.0 - 0.2;
    CHECK(m[i] == (keep ? 1 : 0));
    CHECK(o[i] == (keep ? x[i] * static_cast<float>(1.0 / (1.0 - 0.2)) : 0.0f));
    kept += keep;
  }
  CHECK(static_cast<double>(kept) / n == doctest::Approx(0.8).epsilon(0.01));

  // In place (out is self) gives the same values.
  t.run("dropout", {&self.view}, {&self.view, &mask.view}, {Attr::f("p", 0.2), Attr::i("seed", 11), Attr::i("offset", 3)});
  CHECK(t.read<float>(self) == o);

  auto small = t.tensor({2, 2}, {1, 2, 3, 4});
  auto sout = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  auto smask = t.empty(HAL_DTYPE_BOOL, {2, 2});
  t.run("dropout", {&small.view}, {&sout.view, &smask.view}, {Attr::b("train", false), Attr::i("seed", 1)});
  CHECK(t.read<float>(sout) == std::vector<float>{1, 2, 3, 4});
  CHECK(t.read<uint8_t>(smask) == std::vector<uint8_t>{1, 1, 1, 1});
  t.run("dropout", {&small.view}, {&sout.view, &smask.view}, {Attr::f("p", 1.0), Attr::i("seed", 1)});
  CHECK(t.read<float>(sout) == std::vector<float>{0, 0, 0, 0});
  CHECK(t.read<uint8_t>(smask) == std::vector<uint8_t>{0, 0, 0, 0});
  t.run("dropout", {&small.view}, {&sout.view, &smask.view}, {Attr::f("p", 0.0), Attr::i("seed", 1)});
  CHECK(t.read<float>(sout) == std::vector<float>{1, 2, 3, 4});

  auto scalar = t.tensor({}, {3});
  auto s_out = t.empty(HAL_DTYPE_FLOAT32, {});
  auto s_mask = t.empty(HAL_DTYPE_BOOL, {});
  t.run("dropout", {&scalar.view}, {&s_out.view, &s_mask.view}, {Attr::f("p", 0.5), Attr::i("seed", 2)});
  float so = t.read<float>(s_out)[0];
  CHECK((so == 0.0f || so == 6.0f));
}

TEST_CASE("random ops refuse bad attributes, naming the op, the attribute and the value") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto out = t.tensor({2, 2}, {7, 7, 7, 7});
  auto mask = t.empty(HAL_DTYPE_BOOL, {2, 2});
  auto self = t.tensor({2, 2}, {1, 2, 3, 4});
  auto I = HAL_STATUS_INVALID_ARGUMENT;
  expect_refused(t, "dropout", {&self.view}, {&out.view, &mask.view}, {Attr::f("p", 1.5), Attr::i("seed", 1)}, I,
                 "attribute 'p' = 1.5 must be in [0, 1]", &out);
  expect_refused(t, "dropout", {&self.view}, {&out.view, &mask.view}, {Attr::f("p", -0.1), Attr::i("seed", 1)}, I,
                 "attribute 'p' = -0.1", &out);
  expect_refused(t, "dropout", {&self.view}, {&out.view, &mask.view}, {Attr::f("p", 0.5)}, I,
                 "missing required attribute 'seed'", &out);
  expect_refused(t, "dropout", {&self.view}, {&out.view, &mask.view}, {Attr::i("seed", 1), Attr::i("offset", -4)}, I,
                 "attribute 'offset' = -4", &out);
  expect_refused(t, "dropout", {&self.view}, {&out.view, &mask.view}, {Attr::f("seed", 1.0)}, I,
                 "attribute 'seed' must be int", &out);
  expect_refused(t, "dropout", {&self.view}, {&out.view, &self.view}, {Attr::i("seed", 1)}, I, "must be bool", nullptr);
  auto sizes = [](std::vector<int64_t> s) { return Attr::ints("size", std::move(s)); };
  expect_refused(t, "uniform", {}, {&out.view}, {sizes({2, 2}), Attr::f("from", 2.0), Attr::f("to", 1.0), Attr::i("seed", 1)},
                 I, "'from' = 2 and 'to' = 1", &out);
  expect_refused(t, "normal", {}, {&out.view}, {sizes({2, 2}), Attr::f("std", -1.0), Attr::i("seed", 1)}, I,
                 "attribute 'std' = -1", &out);
  expect_refused(t, "normal", {}, {&out.view}, {sizes({2, -2}), Attr::i("seed", 1)}, I, "negative size -2", &out);
  expect_refused(t, "normal", {}, {&out.view}, {sizes({1LL << 40, 1LL << 40}), Attr::i("seed", 1)}, I,
                 "too many elements", &out);
  expect_refused(t, "normal", {}, {&out.view}, {sizes({2, 3}), Attr::i("seed", 1)}, I, "has shape [2, 2] but must be [2, 3]",
                 &out);
  expect_refused(t, "uniform", {}, {&out.view}, {sizes({2, 2}), Attr::dtype("dtype", HAL_DTYPE_INT32), Attr::i("seed", 1)},
                 HAL_STATUS_UNSUPPORTED_DTYPE, "attribute 'dtype' = int32", &out);
  expect_refused(t, "uniform", {}, {&out.view}, {sizes({2, 2}), Attr::dtype("dtype", HAL_DTYPE_FLOAT64), Attr::i("seed", 1)},
                 I, "has dtype float32 but must be float64", &out);
  expect_refused(t, "uniform", {}, {&out.view}, {sizes({2, 2}), Attr::i("seed", 1), Attr::i("mean", 1)}, I,
                 "unknown attribute 'mean'", &out);
}

TEST_CASE("dropout and bernoulli read non-contiguous inputs by logical index, 0-d and empty tensors") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto xt_buf = t.tensor({3, 2}, {1, 4, 2, 5, 3, 6});  // x stored column-major
  hal::TensorView xt = xt_buf.view;
  xt.shape = {2, 3};
  xt.strides = {1, 2};
  auto o1 = t.empty(HAL_DTYPE_FLOAT32, {2, 3}), o2 = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  auto m1 = t.empty(HAL_DTYPE_BOOL, {2, 3}), m2 = t.empty(HAL_DTYPE_BOOL, {2, 3});
  std::vector<Attr> attrs = {Attr::f("p", 0.4), Attr::i("seed", 21)};
  t.run("dropout", {&x.view}, {&o1.view, &m1.view}, attrs);
  t.run("dropout", {&xt}, {&o2.view, &m2.view}, attrs);
  CHECK(t.read<float>(o1) == t.read<float>(o2));
  CHECK(t.read<uint8_t>(m1) == t.read<uint8_t>(m2));

  auto p = t.tensor({}, {1.0f});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {});
  t.run("bernoulli", {&p.view}, {&out.view}, {Attr::i("seed", 4)});
  CHECK(t.read<float>(out)[0] == 1.0f);
  auto empty = t.empty(HAL_DTYPE_FLOAT32, {0, 2});
  auto empty_out = t.empty(HAL_DTYPE_FLOAT32, {0, 2});
  t.run("bernoulli", {&empty.view}, {&empty_out.view}, {Attr::i("seed", 4)});
}

TEST_CASE("long streams (batched Philox blocks) match block by block, from any start") {
  for (uint64_t begin : {0u, 3u, 5u}) {
    std::vector<uint32_t> words;
    philox::for_each_word(0x123456789abcdefull, 77, begin, begin + 1000, [&](uint64_t w, uint32_t x) {
      CHECK(w == begin + words.size());
      words.push_back(x);
    });
    REQUIRE(words.size() == 1000);
    for (size_t i = 0; i < words.size(); ++i) CHECK(words[i] == philox::block(77 + (begin + i) / 4, 0x123456789abcdefull)[(begin + i) % 4]);
  }
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto out = t.empty(HAL_DTYPE_FLOAT32, {1000});
  t.run("uniform", {}, {&out.view}, {Attr::ints("size", {1000}), Attr::i("seed", 8), Attr::i("offset", 2)});
  std::vector<float> got = t.read<float>(out);
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == static_cast<float>((philox::block(2 + i / 4, 8)[i % 4] >> 8) * 0x1p-24));
}
