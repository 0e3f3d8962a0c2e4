// CPU "nn" kernels (softmax, normalization, losses) through the runtime's op
// API: results on small cases, backward ops against central differences of
// their forward op in float64, layouts, and the op-specific bad inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::TensorView;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

namespace {

using Views = std::vector<const TensorView*>;

DeviceTensor f64(OpTester& t, std::vector<int64_t> shape, const std::vector<double>& v) {
  return t.tensor<double>(std::move(shape), v, HAL_DTYPE_FLOAT64);
}
DeviceTensor i64(OpTester& t, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  return t.tensor<int64_t>(std::move(shape), v, HAL_DTYPE_INT64);
}

std::vector<double> pseudo_random(size_t n, uint64_t seed, double lo = -2, double hi = 2) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return v;
}

void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i])), "i=", i, " ", a[i], " vs ", b[i]);
}

// Central-difference gradient of F at X.
std::vector<double> numeric_grad(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double h = 1e-6, keep = x[i];
    x[i] = keep + h;
    double up = f(x);
    x[i] = keep - h;
    double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// Runs OP and expects CODE with every MENTION in the message, and OUT unchanged.
void expect_error(OpTester& t, const std::string& op, const Views& in, const DeviceTensor& out, const Views& outs,
                  const std::vector<Attr>& attrs, hal_status_code_e code, std::vector<std::string> mentions) {
  t.expect_refused(op, in, outs, attrs, mentions, code, {&out});
}

}  // namespace

TEST_CASE("softmax and log_softmax along any dim, strided, 0-d, zero-size and in place") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({2, 3}, {1, 2, 3, 1, 1, 1});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  t.run("softmax", {&x.view}, {&out.view}, {Attr::i("dim", -1)});
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  std::vector<float> got = t.read<float>(out);
  std::vector<double> expect = {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 1 / 3., 1 / 3., 1 / 3.};
  check_close(std::vector<double>(got.begin(), got.end()), expect, 1e-6);

  t.run("log_softmax", {&x.view}, {&out.view}, {Attr::i("dim", 0)});
  got = t.read<float>(out);
  double l2 = std::log(std::exp(2.0) + std::exp(1.0)), l3 = std::log(std::exp(3.0) + std::exp(1.0));
  check_close(std::vector<double>(got.begin(), got.end()),
              {-std::log(2.0), 2 - l2, 3 - l3, -std::log(2.0), 1 - l2, 1 - l3}, 1e-6);

  // Transposed input (dim 1 of the [3, 2] view is dim 0 in memory), float16.
  auto h = t.tensor<uint16_t>({2, 3}, {0x3c00, 0x4000, 0x4200, 0x3c00, 0x3c00, 0x3c00}, HAL_DTYPE_FLOAT16);  // 1 2 3 1 1 1
  TensorView ht(h.buffer, HAL_DTYPE_FLOAT16, {3, 2}, {1, 3});
  auto hout16 = t.empty(HAL_DTYPE_FLOAT16, {3, 2});
  t.run("softmax", {&ht}, {&hout16.view}, {Attr::i("dim", 0)});
  // Same values as row 0 / row 1 of the float case, column-wise.
  std::vector<uint16_t> bits = t.read<uint16_t>(hout16);
  CHECK(bits.size() == 6);
  auto half_to_float = [](uint16_t b) {
    int e = (b >> 10) & 0x1f, m = b & 0x3ff;
    return std::ldexp(1.0 + m / 1024.0, e - 15);
  };
  CHECK(std::abs(half_to_float(bits[4]) - std::exp(3.0) / z) < 1e-3);
  CHECK(std::abs(half_to_float(bits[5]) - 1 / 3.) < 1e-3);

  auto s = t.tensor({}, {5});
  auto sout = t.tensor({}, {0});
  t.run("softmax", {&s.view}, {&sout.view}, {Attr::i("dim", 0)});
  CHECK(t.read<float>(sout) == std::vector<float>{1});
  auto e = t.empty(HAL_DTYPE_FLOAT32, {0, 4});
  auto eout = t.empty(HAL_DTYPE_FLOAT32, {0, 4});
  t.run("log_softmax", {&e.view}, {&eout.view}, {Attr::i("dim", 1)});

  t.run("softmax", {&x.view}, {&x.view}, {Attr::i("dim", 1)});  // exact alias: in place
  got = t.read<float>(x);
  CHECK(std::abs(got[2] - std::exp(3.0) / z) < 1e-6);

  expect_error(t, "softmax", {&x.view}, out, {&out.view}, {Attr::i("dim", 2)}, HAL_STATUS_INVALID_ARGUMENT,
               {"'dim' = 2", "rank 2"});
  expect_error(t, "softmax", {&x.view}, out, {&out.view}, {}, HAL_STATUS_INVALID_ARGUMENT, {"missing required attribute 'dim'"});
  auto ints = t.tensor<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}, HAL_DTYPE_INT32);
  expect_error(t, "softmax", {&ints.view}, out, {&out.view}, {Attr::i("dim", 0)}, HAL_STATUS_UNSUPPORTED_DTYPE, {"int32"});
}

TEST_CASE("a long softmax row matches double precision (vectorised exp)") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t n = 1000;
  std::vector<double> v = pseudo_random(n, 3, -30, 30);
  auto x = t.tensor({2, n}, [&] {
    std::vector<float> f(2 * n);
    for (int64_t i = 0; i < 2 * n; ++i) f[i] = static_cast<float>(v[i % n]);
    return f;
  }());
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, n});
  auto lout = t.empty(HAL_DTYPE_FLOAT32, {2, n});
  t.run("softmax", {&x.view}, {&out.view}, {Attr::i("dim", 1)});
  t.run("log_softmax", {&x.view}, {&lout.view}, {Attr::i("dim", 1)});
  double m = -1e300, s = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(float(v[i])));
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(float(v[i])) - m);
  std::vector<float> got = t.read<float>(out), lgot = t.read<float>(lout);
  for (int64_t i = 0; i < 2 * n; ++i) {
    double ref = std::exp(double(float(v[i % n])) - m) / s;
    // float's rounding of x - max (|x - max| <= 60) bounds the relative error.
    CHECK(std::abs(got[i] - ref) <= 1e-5 * ref + 1e-30);
    CHECK(std::abs(lgot[i] - std::log(ref)) <= 2e-5 * (1 + std::abs(std::log(ref))));
  }
}

TEST_CASE("float softmax rows of every SIMD tail length: masked -inf gives 0, a NaN row NaN, in place") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 2, 3, 7, 15, 16, 17, 31, 33, 47, 64}) {
    CAPTURE(n);
    std::vector<double> v = pseudo_random(static_cast<size_t>(2 * n), static_cast<uint64_t>(n), -20, 20);
    std::vector<float> f(v.begin(), v.end());
    if (n > 2) f[0] = f[n - 1] = -inf;  // masked: first and last (a tail lane) entries of row 0
    f[n + n / 2] = std::nanf("");      // row 1 holds a NaN
    auto x = t.tensor({2, n}, f);
    auto out = t.empty(HAL_DTYPE_FLOAT32, {2, n});
    auto lout = t.empty(HAL_DTYPE_FLOAT32, {2, n});
    t.run("softmax", {&x.view}, {&out.view}, {Attr::i("dim", 1)});
    t.run("log_softmax", {&x.view}, {&lout.view}, {Attr::i("dim", 1)});
    double m = -1e300, s = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, double(f[i]));
    for (int64_t i = 0; i < n; ++i) s += std::exp(double(f[i]) - m);
    std::vector<float> got = t.read<float>(out), lgot = t.read<float>(lout);
    for (int64_t i = 0; i < n; ++i) {
      if (f[i] == -inf) {
        CHECK(got[i] == 0.0f);
        CHECK(lgot[i] == -inf);
        continue;
      }
      double ref = std::exp(double(f[i]) - m) / s;
      CHECK(std::abs(got[i] - ref) <= 1e-5 * ref + 1e-30);
      CHECK(std::abs(lgot[i] - std::log(ref)) <= 2e-5 * (1 + std::abs(std::log(ref))));
    }
    for (int64_t i = n; i < 2 * n; ++i) {
      CHECK(std::isnan(got[i]));
      CHECK(std::isnan(lgot[i]));
    }
    t.run("softmax", {&x.view}, {&x.view}, {Attr::i("dim", 1)});  // in place: same values
    std::vector<float> inplace = t.read<float>(x);
    for (int64_t i = 0; i < n; ++i) CHECK(inplace[i] == got[i]);
  }
}

TEST_CASE("softmax_backward and log_softmax_backward match central differences") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  std::vector<double> xv = pseudo_random(12, 1), gv = pseudo_random(12, 2);
  for (const char* name : {"softmax", "log_softmax"}) {
    for (int64_t dim : {0, 1, 2}) {
      auto fwd = [&](const std::vector<double>& xs) {
        auto x = f64(t, {2, 3, 2}, xs);
        auto y = t.empty(HAL_DTYPE_FLOAT64, {2, 3, 2});
        t.run(name, {&x.view}, {&y.view}, {Attr::i("dim", dim)});
        std::vector<double> yv = t.read<double>(y);
        double r = 0;
        for (size_t i = 0; i < yv.size(); ++i) r += yv[i] * gv[i];
        return r;
      };
      auto x = f64(t, {2, 3, 2}, xv);
      auto y = t.empty(HAL_DTYPE_FLOAT64, {2, 3, 2});
      t.run(name, {&x.view}, {&y.view}, {Attr::i("dim", dim)});
      auto g = f64(t, {2, 3, 2}, gv);
      auto gi = t.empty(HAL_DTYPE_FLOAT64, {2, 3, 2});
      t.run(std::string(name) + "_backward", {&g.view, &y.view}, {&gi.view}, {Attr::i("dim", dim)});
      check_close(t.read<double>(gi), numeric_grad(fwd, xv), 1e-6);
    }
  }
  auto g = f64(t, {2, 3}, pseudo_random(6, 1));
  auto y = f64(t, {3, 2}, pseudo_random(6, 1));
  auto gi = f64(t, {2, 3}, pseudo_random(6, 4));
  expect_error(t, "softmax_backward", {&g.view, &y.view}, gi, {&gi.view}, {Attr::i("dim", 0)},
               HAL_STATUS_INVALID_ARGUMENT, {"'output' has shape [3, 2]", "[2, 3]"});
}

TEST_CASE("layer_norm and rms_norm: statistics, weight and bias, backward by central differences") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({2, 4}, {1, 2, 3, 4, -1, -1, 1, 1});
  auto w = t.tensor({4}, {1, 2, 1, 1});
  auto b = t.tensor({4}, {0, 0, 0, 10});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 4});
  auto mean = t.empty(HAL_DTYPE_FLOAT32, {2, 1});
  auto rstd = t.empty(HAL_DTYPE_FLOAT32, {2, 1});
  t.run("layer_norm", {&x.view, &w.view, &b.view}, {&out.view, &mean.view, &rstd.view},
        {Attr::ints("normalized_shape", {4}), Attr::f("eps", 0.0)});
  CHECK(t.read<float>(mean) == std::vector<float>{2.5f, 0});
  std::vector<float> r = t.read<float>(rstd);
  CHECK(std::abs(r[0] - 1 / std::sqrt(1.25)) < 1e-6);
  CHECK(std::abs(r[1] - 1) < 1e-6);
  std::vector<float> o = t.read<float>(out);
  CHECK(std::abs(o[1] - 2 * (-0.5) / std::sqrt(1.25)) < 1e-6);
  CHECK(std::abs(o[7] - 11) < 1e-6);

  auto rout = t.empty(HAL_DTYPE_FLOAT32, {2, 4});
  auto rr = t.empty(HAL_DTYPE_FLOAT32, {2, 1});
  t.run("rms_norm", {&x.view}, {&rout.view, &rr.view}, {Attr::ints("normalized_shape", {4})});
  r = t.read<float>(rr);
  CHECK(std::abs(r[0] - 1 / std::sqrt(7.5 + 1.1920929e-7)) < 1e-6);  // default eps: float32's epsilon
  CHECK(std::abs(r[1] - 1 / std::sqrt(1 + 1.1920929e-7)) < 1e-6);

  // Backward ops over two normalized dims, with weight.
  const std::vector<int64_t> shape = {3, 2, 3}, ns = {2, 3};
  std::vector<double> xv = pseudo_random(18, 5), wv = pseudo_random(6, 6), bv = pseudo_random(6, 7),
                      gv = pseudo_random(18, 8);
  for (bool rms : {false, true}) {
    std::string name = rms ? "rms_norm" : "layer_norm";
    std::vector<Attr> attrs = {Attr::ints("normalized_shape", ns), Attr::f("eps", 1e-3)};
    // Forward as a function of (x, weight, bias), dotted with the upstream grad.
    auto run = [&](const std::vector<double>& xs, const std::vector<double>& ws, const std::vector<double>& bs,
                   std::vector<DeviceTensor>* keep) {
      auto x = f64(t, shape, xs), w = f64(t, ns, ws), b = f64(t, ns, bs);
      auto y = t.empty(HAL_DTYPE_FLOAT64, shape), m = t.empty(HAL_DTYPE_FLOAT64, {3, 1, 1}),
           s = t.empty(HAL_DTYPE_FLOAT64, {3, 1, 1});
      if (rms) t.run(name, {&x.view, &w.view}, {&y.view, &s.view}, attrs);
      else t.run(name, {&x.view, &w.view, &b.view}, {&y.view, &m.view, &s.view}, attrs);
      std::vector<double> yv = t.read<double>(y);
      double acc = 0;
      for (size_t i = 0; i < yv.size(); ++i) acc += yv[i] * gv[i];
      if (keep != nullptr) {
        keep->push_back(std::move(x));
        keep->push_back(std::move(w));
        keep->push_back(std::move(m));
        keep->push_back(std::move(s));
      }
      return acc;
    };
    std::vector<DeviceTensor> saved;
    run(xv, wv, bv, &saved);
    auto g = f64(t, shape, gv);
    auto gi = t.empty(HAL_DTYPE_FLOAT64, shape), gw = t.empty(HAL_DTYPE_FLOAT64, ns), gb = t.empty(HAL_DTYPE_FLOAT64, ns);
    std::vector<Attr> battrs = {Attr::ints("normalized_shape", ns)};
    if (rms)
      t.run("rms_norm_backward", {&g.view, &saved[0].view, &saved[3].view, &saved[1].view}, {&gi.view, &gw.view}, battrs);
    else
      t.run("layer_norm_backward", {&g.view, &saved[0].view, &saved[2].view, &saved[3].view, &saved[1].view},
            {&gi.view, &gw.view, &gb.view}, battrs);
    check_close(t.read<double>(gi), numeric_grad([&](const std::vector<double>& v) { return run(v, wv, bv, nullptr); }, xv), 1e-6);
    check_close(t.read<double>(gw), numeric_grad([&](const std::vector<double>& v) { return run(xv, v, bv, nullptr); }, wv), 1e-6);
    if (!rms)
      check_close(t.read<double>(gb), numeric_grad([&](const std::vector<double>& v) { return run(xv, wv, v, nullptr); }, bv), 1e-6);
  }

  // Zero-size leading dim; bad normalized_shape and weight.
  auto e = t.empty(HAL_DTYPE_FLOAT32, {0, 4});
  auto eo = t.empty(HAL_DTYPE_FLOAT32, {0, 4});
  auto em = t.empty(HAL_DTYPE_FLOAT32, {0, 1});
  auto es = t.empty(HAL_DTYPE_FLOAT32, {0, 1});
  t.run("layer_norm", {&e.view}, {&eo.view, &em.view, &es.view}, {Attr::ints("normalized_shape", {4})});
  expect_error(t, "layer_norm", {&x.view}, out, {&out.view, &mean.view, &rstd.view}, {Attr::ints("normalized_shape", {2})},
               HAL_STATUS_INVALID_ARGUMENT, {"'normalized_shape' = [2]", "[2, 4]"});
  expect_error(t, "layer_norm", {&x.view}, out, {&out.view, &mean.view, &rstd.view}, {Attr::ints("normalized_shape", {-4})},
               HAL_STATUS_INVALID_ARGUMENT, {"negative size -4"});
  expect_error(t, "layer_norm", {&x.view, &b.view}, out, {&out.view, &mean.view, &rstd.view}, {},
               HAL_STATUS_INVALID_ARGUMENT, {"missing required attribute 'normalized_shape'"});
  auto w3 = t.tensor({3}, {1, 1, 1});
  expect_error(t, "layer_norm", {&x.view, &w3.view}, out, {&out.view, &mean.view, &rstd.view},
               {Attr::ints("normalized_shape", {4})}, HAL_STATUS_INVALID_ARGUMENT, {"'weight' has shape [3]", "[4]"});
  expect_error(t, "rms_norm", {&x.view}, out, {&out.view, &rstd.view}, {Attr::ints("normalized_shape", {4}), Attr::s("eps", "x")},
               HAL_STATUS_INVALID_ARGUMENT, {"attribute 'eps' must be float"});
}

TEST_CASE("group_norm and its backward, num_groups must divide C") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const std::vector<int64_t> shape = {2, 4, 3};
  std::vector<double> xv = pseudo_random(24, 11), wv = pseudo_random(4, 12), bv = pseudo_random(4, 13),
                      gv = pseudo_random(24, 14);
  std::vector<Attr> attrs = {Attr::i("num_groups", 2), Attr::f("eps", 1e-3)};
  auto run = [&](const std::vector<double>& xs, const std::vector<double>& ws, const std::vector<double>& bs,
                 std::vector<DeviceTensor>* keep) {
    auto x = f64(t, shape, xs), w = f64(t, {4}, ws), b = f64(t, {4}, bs);
    auto y = t.empty(HAL_DTYPE_FLOAT64, shape), m = t.empty(HAL_DTYPE_FLOAT64, {2, 2}), s = t.empty(HAL_DTYPE_FLOAT64, {2, 2});
    t.run("group_norm", {&x.view, &w.view, &b.view}, {&y.view, &m.view, &s.view}, attrs);
    std::vector<double> yv = t.read<double>(y);
    double acc = 0;
    for (size_t i = 0; i < yv.size(); ++i) acc += yv[i] * gv[i];
    if (keep != nullptr) {
      keep->push_back(std::move(x));
      keep->push_back(std::move(w));
      keep->push_back(std::move(m));
      keep->push_back(std::move(s));
      keep->push_back(std::move(y));
    }
    return acc;
  };
  std::vector<DeviceTensor> saved;
  run(xv, wv, bv, &saved);
  // Group 0 of sample 0: channels 0-1, elements 0..5.
  double mu = 0;
  for (int i = 0; i < 6; ++i) mu += xv[i] / 6;
  CHECK(std::abs(t.read<double>(saved[2])[0] - mu) < 1e-12);
  auto g = f64(t, shape, gv);
  auto gi = t.empty(HAL_DTYPE_FLOAT64, shape), gw = t.empty(HAL_DTYPE_FLOAT64, {4}), gb = t.empty(HAL_DTYPE_FLOAT64, {4});
  t.run("group_norm_backward", {&g.view, &saved[0].view, &saved[2].view, &saved[3].view, &saved[1].view},
        {&gi.view, &gw.view, &gb.view}, {Attr::i("num_groups", 2)});
  check_close(t.read<double>(gi), numeric_grad([&](const std::vector<double>& v) { return run(v, wv, bv, nullptr); }, xv), 1e-6);
  check_close(t.read<double>(gw), numeric_grad([&](const std::vector<double>& v) { return run(xv, v, bv, nullptr); }, wv), 1e-6);
  check_close(t.read<double>(gb), numeric_grad([&](const std::vector<double>& v) { return run(xv, wv, v, nullptr); }, bv), 1e-6);

  auto& x = saved[0];
  auto& y = saved[4];
  expect_error(t, "group_norm", {&x.view}, y, {&y.view, &saved[2].view, &saved[3].view}, {Attr::i("num_groups", 3)},
               HAL_STATUS_INVALID_ARGUMENT, {"'num_groups' = 3", "4 channels"});
  expect_error(t, "group_norm", {&x.view}, y, {&y.view, &saved[2].view, &saved[3].view}, {Attr::i("num_groups", 0)},
               HAL_STATUS_INVALID_ARGUMENT, {"'num_groups' = 0"});
  auto flat = f64(t, {4}, {1, 2, 3, 4});
  expect_error(t, "group_norm", {&flat.view}, y, {&y.view, &saved[2].view, &saved[3].view}, {Attr::i("num_groups", 1)},
               HAL_STATUS_INVALID_ARGUMENT, {"[N, C, *]", "[4]"});
}

TEST_CASE("batch_norm: training updates running stats in place, eval uses them, backward by central differences") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = t.tensor({2, 2, 2}, {1, 2, 10, 20, 3, 4, 30, 40});
  auto rm = t.tensor({2}, {0, 0});
  auto rv = t.tensor({2}, {1, 1});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 2, 2});
  auto sm = t.empty(HAL_DTYPE_FLOAT32, {2});
  auto si = t.empty(HAL_DTYPE_FLOAT32, {2});
  t.run("batch_norm", {&x.view, nullptr, nullptr, &rm.view, &rv.view}, {&out.view, &sm.view, &si.view, &rm.view, &rv.view},
        {Attr::b("training", true), Attr::f("momentum", 0.5), Attr::f("eps", 0.0)});
  CHECK(t.read<float>(sm) == std::vector<float>{2.5f, 25});
  CHECK(t.read<float>(rm) == std::vector<float>{1.25f, 12.5f});
  std::vector<float> v = t.read<float>(rv);  // unbiased var of {1,2,3,4} = 5/3, of {10,..,40} = 500/3
  CHECK(std::abs(v[0] - (0.5 + 0.5 * 5 / 3.)) < 1e-5);
  CHECK(std::abs(v[1] - (0.5 + 0.5 * 500 / 3.)) < 1e-3);
  CHECK(std::abs(t.read<float>(si)[0] - 1 / std::sqrt(1.25)) < 1e-6);

  // Eval: y = (x - rm) / sqrt(rv + eps); save_* are empty.
  auto e0 = t.empty(HAL_DTYPE_FLOAT32, {0});
  auto e1 = t.empty(HAL_DTYPE_FLOAT32, {0});
  auto rm2 = t.empty(HAL_DTYPE_FLOAT32, {2});
  auto rv2 = t.empty(HAL_DTYPE_FLOAT32, {2});
  t.run("batch_norm", {&x.view, nullptr, nullptr, &rm.view, &rv.view}, {&out.view, &e0.view, &e1.view, &rm2.view, &rv2.view},
        {Attr::f("eps", 0.0)});
  CHECK(t.read<float>(rm2) == t.read<float>(rm));
  CHECK(std::abs(t.read<float>(out)[0] - (1 - 1.25) / std::sqrt(v[0])) < 1e-6);

  // In place on a transposed input view.
  auto xt = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorView xtv(xt.buffer, HAL_DTYPE_FLOAT32, {3, 2}, {1, 3});  // [N=3, C=2]: channel 0 = {1, 2, 3}
  auto sm3 = t.empty(HAL_DTYPE_FLOAT32, {2}), si3 = t.empty(HAL_DTYPE_FLOAT32, {2});
  t.run("batch_norm", {&xtv}, {&xtv, &sm3.view, &si3.view, &e0.view, &e1.view}, {Attr::b("training", true), Attr::f("eps", 0.0)});
  CHECK(t.read<float>(sm3) == std::vector<float>{2, 5});
  std::vector<float> xn = t.read<float>(xt);
  CHECK(std::abs(xn[0] + std::sqrt(1.5)) < 1e-6);  // (1 - 2) / sqrt(2/3)

  // Backward, training and eval, against central differences in float64.
  const std::vector<int64_t> shape = {3, 2, 2};
  std::vector<double> xv = pseudo_random(12, 21), wv = pseudo_random(2, 22), bv = pseudo_random(2, 23),
                      gv = pseudo_random(12, 24), rmv = {0.5, -0.5}, rvv = {2, 0.5};
  for (bool training : {true, false}) {
    std::vector<Attr> attrs = {Attr::b("training", training), Attr::f("eps", 1e-3)};
    auto run = [&](const std::vector<double>& xs, const std::vector<double>& ws, const std::vector<double>& bs,
                   std::vector<DeviceTensor>* keep) {
      auto x = f64(t, shape, xs), w = f64(t, {2}, ws), b = f64(t, {2}, bs), m = f64(t, {2}, rmv), s = f64(t, {2}, rvv);
      int64_t c = training ? 2 : 0;
      auto y = t.empty(HAL_DTYPE_FLOAT64, shape), sm = t.empty(HAL_DTYPE_FLOAT64, {c}), si = t.empty(HAL_DTYPE_FLOAT64, {c});
      auto mo = t.empty(HAL_DTYPE_FLOAT64, {2}), vo = t.empty(HAL_DTYPE_FLOAT64, {2});
      t.run("batch_norm", {&x.view, &w.view, &b.view, &m.view, &s.view}, {&y.view, &sm.view, &si.view, &mo.view, &vo.view}, attrs);
      std::vector<double> yv = t.read<double>(y);
      double acc = 0;
      for (size_t i = 0; i < yv.size(); ++i) acc += yv[i] * gv[i];
      if (keep != nullptr) {
        keep->push_back(std::move(x));
        keep->push_back(std::move(w));
        keep->push_back(std::move(m));
        keep->push_back(std::move(s));
        keep->push_back(std::move(sm));
        keep->push_back(std::move(si));
      }
      return acc;
    };
    std::vector<DeviceTensor> k;
    run(xv, wv, bv, &k);
    auto g = f64(t, shape, gv);
    auto gi = t.empty(HAL_DTYPE_FLOAT64, shape), gw = t.empty(HAL_DTYPE_FLOAT64, {2}), gb = t.empty(HAL_DTYPE_FLOAT64, {2});
    Views in = {&g.view, &k[0].view, &k[1].view, &k[2].view, &k[3].view};
    if (training) in.insert(in.end(), {&k[4].view, &k[5].view});
    t.run("batch_norm_backward", in, {&gi.view, &gw.view, &gb.view}, attrs);
    check_close(t.read<double>(gi), numeric_grad([&](const std::vector<double>& v) { return run(v, wv, bv, nullptr); }, xv), 1e-6);
    check_close(t.read<double>(gw), numeric_grad([&](const std::vector<double>& v) { return run(xv, v, bv, nullptr); }, wv), 1e-6);
    check_close(t.read<double>(gb), numeric_grad([&](const std::vector<double>& v) { return run(xv, wv, v, nullptr); }, bv), 1e-6);
  }

  // Bad inputs.
  auto w3 = t.tensor({3}, {1, 1, 1});
  expect_error(t, "batch_norm", {&x.view, &w3.view}, out, {&out.view, &sm.view, &si.view, &e0.view, &e1.view},
               {Attr::b("training", true)}, HAL_STATUS_INVALID_ARGUMENT, {"'weight' has shape [3]", "[2]"});
  expect_error(t, "batch_norm", {&x.view}, out, {&out.view, &e0.view, &e1.view, &e0.view, &e1.view}, {},
               HAL_STATUS_INVALID_ARGUMENT, {"required when training is false"});
  auto one = t.tensor({1, 2}, {1, 2});
  auto one_out = t.empty(HAL_DTYPE_FLOAT32, {1, 2});
  expect_error(t, "batch_norm", {&one.view}, one_out, {&one_out.view, &sm.view, &si.view, &e0.view, &e1.view},
               {Attr::b("training", true)}, HAL_STATUS_INVALID_ARGUMENT, {"more than 1 value per channel", "[1, 2]"});
  expect_error(t, "batch_norm", {&x.view, nullptr, nullptr, &rm.view, &rv.view}, out,
               {&out.view, &sm.view, &si.view, &rm.view, &rv.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               {"save_mean", "[0]"});
}

TEST_CASE("cross_entropy and nll_loss: reductions, weights, ignore_index, label smoothing, targets out of range") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  std::vector<double> xv = {1, 2, 3, 0, 0, 0};
  auto x = f64(t, {2, 3}, xv);
  auto tg = i64(t, {2}, {2, 0});
  auto none = t.empty(HAL_DTYPE_FLOAT64, {2});
  t.run("cross_entropy", {&x.view, &tg.view}, {&none.view}, {Attr::s("reduction", "none")});
  double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3, l1 = std::log(3.0);
  check_close(t.read<double>(none), {l0, l1}, 1e-12);
  auto scalar = t.empty(HAL_DTYPE_FLOAT64, {});
  t.run("cross_entropy", {&x.view, &tg.view}, {&scalar.view});
  check_close(t.read<double>(scalar), {(l0 + l1) / 2}, 1e-12);
  auto w = f64(t, {3}, {1, 2, 3});
  t.run("cross_entropy", {&x.view, &tg.view, &w.view}, {&scalar.view});
  check_close(t.read<double>(scalar), {(3 * l0 + 1 * l1) / 4}, 1e-12);
  auto tg_ign = i64(t, {2}, {2, -100});
  t.run("cross_entropy", {&x.view, &tg_ign.view}, {&scalar.view}, {Attr::s("reduction", "sum")});
  check_close(t.read<double>(scalar), {l0}, 1e-12);
  t.run("nll_loss", {&x.view, &tg.view, &w.view}, {&none.view}, {Attr::s("reduction", "none")});
  check_close(t.read<double>(none), {-9, 0}, 1e-12);

  // Backward ops: [N, C, d] inputs with weight, ignore_index and smoothing.
  const std::vector<int64_t> shape = {2, 3, 2};
  std::vector<double> lv = pseudo_random(12, 31), wv = {0.5, 1, 2};
  auto target = i64(t, {2, 2}, {0, 2, 1, 1});
  auto wt = f64(t, {3}, wv);
  for (const char* op : {"cross_entropy", "nll_loss"}) {
    for (const char* red : {"none", "mean", "sum"}) {
      std::vector<Attr> attrs = {Attr::s("reduction", red), Attr::i("ignore_index", 2)};
      if (std::string(op) == "cross_entropy") attrs.push_back(Attr::f("label_smoothing", 0.25));
      std::vector<int64_t> oshape = std::string(red) == "none" ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{};
      std::vector<double> gv = pseudo_random(std::string(red) == "none" ? 4 : 1, 32);
      auto fwd = [&](const std::vector<double>& xs) {
        auto in = f64(t, shape, xs);
        auto o = t.empty(HAL_DTYPE_FLOAT64, oshape);
        t.run(op, {&in.view, &target.view, &wt.view}, {&o.view}, attrs);
        std::vector<double> ov = t.read<double>(o);
        double acc = 0;
        for (size_t i = 0; i < ov.size(); ++i) acc += ov[i] * gv[i];
        return acc;
      };
      auto in = f64(t, shape, lv);
      auto g = f64(t, oshape, gv);
      auto gi = t.empty(HAL_DTYPE_FLOAT64, shape);
      t.run(std::string(op) + "_backward", {&g.view, &in.view, &target.view, &wt.view}, {&gi.view}, attrs);
      check_close(t.read<double>(gi), numeric_grad(fwd, lv), 1e-6);
    }
  }

  // nll_loss reads a strided input in place (its one entry per position):
  // a transposed [N, C, d] view and a broadcast -1 (whose sum is the summed
  // weight of the counted targets, as the PyTorch bridge's total_weight).
  {
    auto ncd = f64(t, {2, 2, 3}, lv);  // [N, d, C] bytes, read as [N, C, d] through strides
    hal::TensorView nd = ncd.view;
    nd.shape = {2, 3, 2};
    nd.strides = {6, 1, 3};
    std::vector<double> dense(12);
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 3; ++k)
        for (int j = 0; j < 2; ++j) dense[n * 6 + k * 2 + j] = lv[n * 6 + j * 3 + k];
    auto dense_in = f64(t, shape, dense);
    for (const char* red : {"none", "mean", "sum"}) {
      std::vector<Attr> attrs = {Attr::s("reduction", red), Attr::i("ignore_index", 2)};
      std::vector<int64_t> oshape = std::string(red) == "none" ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{};
      auto a = t.empty(HAL_DTYPE_FLOAT64, oshape), b = t.empty(HAL_DTYPE_FLOAT64, oshape);
      t.run("nll_loss", {&nd, &target.view, &wt.view}, {&a.view}, attrs);
      t.run("nll_loss", {&dense_in.view, &target.view, &wt.view}, {&b.view}, attrs);
      CHECK(t.read<double>(a) == t.read<double>(b));
    }
    auto minus_one = f64(t, {1}, {-1});
    hal::TensorView broadcast = minus_one.view;
    broadcast.shape = shape;
    broadcast.strides = {0, 0, 0};
    t.run("nll_loss", {&broadcast, &target.view, &wt.view}, {&scalar.view},
          {Attr::s("reduction", "sum"), Attr::i("ignore_index", 2)});
    CHECK(t.read<double>(scalar) == std::vector<double>{wv[0] + 2 * wv[1]});  // targets 0, (2 ignored), 1, 1
  }

  // [C] input with a 0-d target; zero-size batch.
  auto c = f64(t, {3}, {0, 0, 0});
  auto t0 = i64(t, {}, {1});
  t.run("cross_entropy", {&c.view, &t0.view}, {&scalar.view});
  check_close(t.read<double>(scalar), {std::log(3.0)}, 1e-12);
  auto e = t.empty(HAL_DTYPE_FLOAT64, {0, 3});
  auto et = t.empty(HAL_DTYPE_INT64, {0});
  t.run("cross_entropy", {&e.view, &et.view}, {&scalar.view}, {Attr::s("reduction", "sum")});
  CHECK(t.read<double>(scalar) == std::vector<double>{0});

  // Bad inputs: nothing is written.
  auto bad = i64(t, {2}, {0, 3});
  expect_error(t, "cross_entropy", {&x.view, &bad.view}, none, {&none.view}, {Attr::s("reduction", "none")},
               HAL_STATUS_OUT_OF_RANGE, {"target 3", "'target' at position 1", "[0, 3)"});
  auto neg = i64(t, {2}, {-1, 0});
  expect_error(t, "nll_loss", {&x.view, &neg.view}, none, {&none.view}, {Attr::s("reduction", "none")},
               HAL_STATUS_OUT_OF_RANGE, {"target -1", "position 0"});
  auto gone = f64(t, {2}, {1, 1});
  auto gi = f64(t, {2, 3}, pseudo_random(6, 9));
  expect_error(t, "cross_entropy_backward", {&gone.view, &x.view, &bad.view}, gi, {&gi.view},
               {Attr::s("reduction", "none")}, HAL_STATUS_OUT_OF_RANGE, {"target 3"});
  auto tg3 = i64(t, {3}, {0, 1, 2});
  expect_error(t, "cross_entropy", {&x.view, &tg3.view}, none, {&none.view}, {Attr::s("reduction", "none")},
               HAL_STATUS_INVALID_ARGUMENT, {"'target' has shape [3]", "[2]"});
  auto w2 = f64(t, {2}, {1, 1});
  expect_error(t, "cross_entropy", {&x.view, &tg.view, &w2.view}, none, {&none.view}, {Attr::s("reduction", "none")},
               HAL_STATUS_INVALID_ARGUMENT, {"'weight' has shape [2]", "[3]"});
  expect_error(t, "cross_entropy", {&x.view, &tg.view}, none, {&none.view},
               {Attr::s("reduction", "none"), Attr::f("label_smoothing", 1.5)}, HAL_STATUS_INVALID_ARGUMENT,
               {"'label_smoothing' = 1.5"});
  expect_error(t, "cross_entropy", {&x.view, &tg.view}, none, {&none.view}, {Attr::s("reduction", "avg")},
               HAL_STATUS_INVALID_ARGUMENT, {"'avg' is not one of none, mean, sum"});
  auto ftg = f64(t, {2}, {0, 1});
  expect_error(t, "cross_entropy", {&x.view, &ftg.view}, none, {&none.view}, {Attr::s("reduction", "none")},
               HAL_STATUS_UNSUPPORTED_DTYPE, {"'target'", "float64"});
}

TEST_CASE("mse_loss and binary_cross_entropy_with_logits with their backward ops") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto x = f64(t, {2, 2}, {1, 2, 3, 4});
  auto y = f64(t, {2, 2}, {1, 0, 0, 0});
  auto s = t.empty(HAL_DTYPE_FLOAT64, {});
  t.run("mse_loss", {&x.view, &y.view}, {&s.view});
  CHECK(t.read<double>(s) == std::vector<double>{(0 + 4 + 9 + 16) / 4.0});
  auto p = f64(t, {2, 2}, {0, 0, 1, 1});
  t.run("binary_cross_entropy_with_logits", {&x.view, &p.view}, {&s.view}, {Attr::s("reduction", "sum")});
  auto sp = [](double v) { return std::log1p(std::exp(-v)); };  // -log σ(v)
  check_close(t.read<double>(s), {1 + sp(1) + 2 + sp(2) + sp(3) + sp(4)}, 1e-12);

  const std::vector<int64_t> shape = {3, 4};
  std::vector<double> xv = pseudo_random(12, 41), tv = pseudo_random(12, 42, 0, 1), wv = pseudo_random(4, 43, 0.5, 2),
                      pv = pseudo_random(4, 44, 0.5, 3);
  auto target = f64(t, shape, tv);
  auto weight = f64(t, {4}, wv);
  auto pos = f64(t, {1, 4}, pv);
  for (const char* op : {"mse_loss", "binary_cross_entropy_with_logits"}) {
    bool bce = std::string(op) != "mse_loss";
    for (const char* red : {"none", "mean", "sum"}) {
      std::vector<int64_t> oshape = std::string(red) == "none" ? shape : std::vector<int64_t>{};
      std::vector<double> gv = pseudo_random(std::string(red) == "none" ? 12 : 1, 45);
      std::vector<Attr> attrs = {Attr::s("reduction", red)};
      auto fwd = [&](const std::vector<double>& xs) {
        auto in = f64(t, shape, xs);
        auto o = t.empty(HAL_DTYPE_FLOAT64, oshape);
        Views ins = {&in.view, &target.view};
        if (bce) ins.insert(ins.end(), {&weight.view, &pos.view});
        t.run(op, ins, {&o.view}, attrs);
        std::vector<double> ov = t.read<double>(o);
        double acc = 0;
        for (size_t i = 0; i < ov.size(); ++i) acc += ov[i] * gv[i];
        return acc;
      };
      auto in = f64(t, shape, xv);
      auto g = f64(t, oshape, gv);
      auto gi = t.empty(HAL_DTYPE_FLOAT64, shape);
      Views ins = {&g.view, &in.view, &target.view};
      if (bce) ins.insert(ins.end(), {&weight.view, &pos.view});
      t.run(std::string(op) + "_backward", ins, {&gi.view}, attrs);
      check_close(t.read<double>(gi), numeric_grad(fwd, xv), 1e-6);
    }
  }

  // float32, strided input, zero-size.
  auto a = t.tensor({2, 2}, {1, 2, 3, 4});
  auto b = t.tensor({2, 2}, {0, 0, 0, 0});
  TensorView at(a.buffer, HAL_DTYPE_FLOAT32, {2, 2}, {1, 2});
  auto o = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  t.run("mse_loss", {&at, &b.view}, {&o.view}, {Attr::s("reduction", "none")});
  CHECK(t.read<float>(o) == std::vector<float>{1, 9, 4, 16});
  auto e = t.empty(HAL_DTYPE_FLOAT32, {0});
  auto eo = t.empty(HAL_DTYPE_FLOAT32, {});
  t.run("mse_loss", {&e.view, &e.view}, {&eo.view}, {Attr::s("reduction", "sum")});
  CHECK(t.read<float>(eo) == std::vector<float>{0});

  auto y3 = f64(t, {3}, {1, 2, 3});
  auto out = f64(t, {}, {7});
  expect_error(t, "mse_loss", {&x.view, &y3.view}, out, {&out.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               {"'target' has shape [3]", "[2, 2]"});
  auto w3 = f64(t, {3}, {1, 2, 3});
  expect_error(t, "binary_cross_entropy_with_logits", {&x.view, &p.view, &w3.view}, out, {&out.view}, {},
               HAL_STATUS_INVALID_ARGUMENT, {"'weight' of shape [3] does not broadcast", "[2, 2]"});
  expect_error(t, "mse_loss", {&x.view, &b.view}, out, {&out.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               {"'target' has dtype float32", "float64"});
  auto g2 = f64(t, {2}, {1, 1});
  auto gi = f64(t, {2, 2}, {7, 7, 7, 7});
  expect_error(t, "mse_loss_backward", {&g2.view, &x.view, &y.view}, gi, {&gi.view}, {Attr::s("reduction", "none")},
               HAL_STATUS_INVALID_ARGUMENT, {"'grad_output' has shape [2]", "[2, 2]"});
}
