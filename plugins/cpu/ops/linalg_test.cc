// CPU matrix-product kernels (mm, bmm, matmul, addmm, baddbmm, linear,
// linear_backward) through the runtime's op API: results against simple
// loops, strided inputs, empty shapes and refused launches.
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

std::vector<float> ramp(int64_t n, float scale = 0.25f, int mod = 7) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 5 + 3) % mod - mod / 2) * scale;
  return v;
}

// C[m, p] = A[m, k] · B[k, p], row-major, in double.
std::vector<double> naive_mm(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t k,
                             int64_t p) {
  std::vector<double> c(static_cast<size_t>(m * p), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < p; ++j)
      for (int64_t q = 0; q < k; ++q) c[i * p + j] += static_cast<double>(a[i * k + q]) * b[q * p + j];
  return c;
}

template <class T>
void check_close(const std::vector<T>& got, const std::vector<double>& want, double tol = 1e-4) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol * (1 + std::fabs(want[i])),
                  "at ", i, ": ", static_cast<double>(got[i]), " vs ", want[i]);
}

void expect_error(OpTester& t, const char* op, const std::vector<const hal::TensorView*>& in,
                  const std::vector<const hal::TensorView*>& out, const std::vector<Attr>& attrs,
                  const std::string& mention, const DeviceTensor& untouched) {
  t.expect_refused(op, in, out, attrs, {mention}, std::nullopt, {&untouched});
}

}  // namespace

TEST_CASE("mm matches loops for float32 (oneDNN), transposed views and float64") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t m = 37, k = 29, p = 41;
  std::vector<float> av = ramp(m * k), bv = ramp(k * p, 0.5f, 11);
  auto a = t.tensor({m, k}, av);
  auto b = t.tensor({k, p}, bv);
  auto out = t.empty(HAL_DTYPE_FLOAT32, {m, p});
  t.run("mm", {&a.view, &b.view}, {&out.view});
  std::vector<double> want = naive_mm(av, bv, m, k, p);
  check_close(t.read<float>(out), want);

  // (Bᵀ)ᵀ: B stored as [p, k] and viewed transposed through strides.
  std::vector<float> bt(static_cast<size_t>(k * p));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < p; ++j) bt[j * k + i] = bv[i * p + j];
  auto bt_dev = t.tensor({p, k}, bt);
  hal::TensorView bt_view = bt_dev.view;
  bt_view.shape = {k, p};
  bt_view.strides = {1, k};
  t.run("mm", {&a.view, &bt_view}, {&out.view});
  check_close(t.read<float>(out), want);

  std::vector<double> ad(av.begin(), av.end()), bd(bv.begin(), bv.end());
  auto a64 = t.tensor<double>({m, k}, ad, HAL_DTYPE_FLOAT64);
  auto b64 = t.tensor<double>({k, p}, bd, HAL_DTYPE_FLOAT64);
  auto out64 = t.empty(HAL_DTYPE_FLOAT64, {m, p});
  t.run("mm", {&a64.view, &b64.view}, {&out64.view});
  check_close(t.read<double>(out64), want, 1e-12);
}

TEST_CASE("mm in float16 and bfloat16 computes in float32") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  using hal::sdk::kernel::BFloat16;
  using hal::sdk::kernel::Half;
  std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {0.5f, -1, 2, 0.25f, -3, 1};
  std::vector<double> want = naive_mm(av, bv, 2, 3, 2);
  std::vector<uint16_t> ah, bh, ab, bb;
  for (float x : av) ah.push_back(Half(x).bits), ab.push_back(BFloat16(x).bits);
  for (float x : bv) bh.push_back(Half(x).bits), bb.push_back(BFloat16(x).bits);
  auto a = t.tensor<uint16_t>({2, 3}, ah, HAL_DTYPE_FLOAT16);
  auto b = t.tensor<uint16_t>({3, 2}, bh, HAL_DTYPE_FLOAT16);
  auto out = t.empty(HAL_DTYPE_FLOAT16, {2, 2});
  t.run("mm", {&a.view, &b.view}, {&out.view});
  std::vector<float> got;
  for (uint16_t h : t.read<uint16_t>(out)) got.push_back(Half::to_float(h));
  check_close(got, want, 1e-3);
  auto a2 = t.tensor<uint16_t>({2, 3}, ab, HAL_DTYPE_BFLOAT16);
  auto b2 = t.tensor<uint16_t>({3, 2}, bb, HAL_DTYPE_BFLOAT16);
  auto out2 = t.empty(HAL_DTYPE_BFLOAT16, {2, 2});
  t.run("mm", {&a2.view, &b2.view}, {&out2.view});
  got.clear();
  for (uint16_t h : t.read<uint16_t>(out2)) got.push_back(hal::sdk::kernel::bits_float(uint32_t{h} << 16));
  check_close(got, want, 1e-2);
}

TEST_CASE("mm with empty inner or outer dims gives zeros or nothing") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.empty(HAL_DTYPE_FLOAT32, {2, 0});
  auto b = t.empty(HAL_DTYPE_FLOAT32, {0, 3});
  auto out = t.tensor({2, 3}, {7, 7, 7, 7, 7, 7});
  t.run("mm", {&a.view, &b.view}, {&out.view});
  CHECK(t.read<float>(out) == std::vector<float>(6, 0.0f));
  auto c = t.empty(HAL_DTYPE_FLOAT32, {0, 4});
  auto d = t.tensor({4, 3}, ramp(12));
  auto out0 = t.empty(HAL_DTYPE_FLOAT32, {0, 3});
  t.run("mm", {&c.view, &d.view}, {&out0.view});
  auto bz = t.empty(HAL_DTYPE_FLOAT32, {0, 2, 0});
  auto bz2 = t.empty(HAL_DTYPE_FLOAT32, {0, 0, 3});
  auto bout = t.empty(HAL_DTYPE_FLOAT32, {0, 2, 3});
  t.run("bmm", {&bz.view, &bz2.view}, {&bout.view});
}

TEST_CASE("matmul: dot, matrix-vector, vector-matrix and broadcast batches") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto v = t.tensor({3}, {1, 2, 3});
  auto w = t.tensor({3}, {4, 5, 6});
  auto dot = t.empty(HAL_DTYPE_FLOAT32, {});
  t.run("matmul", {&v.view, &w.view}, {&dot.view});
  CHECK(t.read<float>(dot) == std::vector<float>{32});

  auto m = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto mv = t.empty(HAL_DTYPE_FLOAT32, {2});
  t.run("matmul", {&m.view, &v.view}, {&mv.view});
  CHECK(t.read<float>(mv) == std::vector<float>{14, 32});
  auto u = t.tensor({2}, {1, -1});
  auto vm = t.empty(HAL_DTYPE_FLOAT32, {3});
  t.run("matmul", {&u.view, &m.view}, {&vm.view});
  CHECK(t.read<float>(vm) == std::vector<float>{-3, -3, -3});

  // [2, 1, 4, 3] @ [3, 3, 5] -> [2, 3, 4, 5]
  std::vector<float> av = ramp(2 * 4 * 3), bv = ramp(3 * 3 * 5, 0.5f, 9);
  auto a = t.tensor({2, 1, 4, 3}, av);
  auto b = t.tensor({3, 3, 5}, bv);
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3, 4, 5});
  t.run("matmul", {&a.view, &b.view}, {&out.view});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      std::vector<float> ai(av.begin() + i * 12, av.begin() + (i + 1) * 12);
      std::vector<float> bj(bv.begin() + j * 15, bv.begin() + (j + 1) * 15);
      auto c = naive_mm(ai, bj, 4, 3, 5);
      want.insert(want.end(), c.begin(), c.end());
    }
  check_close(t.read<float>(out), want);

  // A batch dim that cannot fold: self's batch dims [2, 3] permuted in memory.
  std::vector<float> pv = ramp(2 * 3 * 4 * 3);
  auto p = t.tensor({3, 2, 4, 3}, pv);
  hal::TensorView pt = p.view;
  pt.shape = {2, 3, 4, 3};
  pt.strides = {12, 24, 3, 1};
  auto b2 = t.tensor({3, 5}, ramp(15));
  auto out2 = t.empty(HAL_DTYPE_FLOAT32, {2, 3, 4, 5});
  t.run("matmul", {&pt, &b2.view}, {&out2.view});
  std::vector<double> want2;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      std::vector<float> aij(pv.begin() + (j * 2 + i) * 12, pv.begin() + (j * 2 + i + 1) * 12);
      auto c = naive_mm(aij, ramp(15), 4, 3, 5);
      want2.insert(want2.end(), c.begin(), c.end());
    }
  check_close(t.read<float>(out2), want2);
}

TEST_CASE("addmm and baddbmm apply beta and alpha, beta = 0 ignores self") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto self = t.tensor({2}, {1, 10});
  auto a = t.tensor({2, 2}, {1, 2, 3, 4});
  auto b = t.tensor({2, 2}, {1, 0, 0, 1});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  t.run("addmm", {&self.view, &a.view, &b.view}, {&out.view});
  CHECK(t.read<float>(out) == std::vector<float>{2, 12, 4, 14});
  t.run("addmm", {&self.view, &a.view, &b.view}, {&out.view}, {Attr::f("beta", 0.5), Attr::f("alpha", 2.0)});
  CHECK(t.read<float>(out) == std::vector<float>{2.5f, 9, 6.5f, 13});
  auto nan = t.tensor({1}, {std::numeric_limits<float>::quiet_NaN()});
  t.run("addmm", {&nan.view, &a.view, &b.view}, {&out.view}, {Attr::f("beta", 0.0)});
  CHECK(t.read<float>(out) == std::vector<float>{1, 2, 3, 4});

  auto bself = t.tensor({2, 1, 1}, {100, 200});
  auto b1 = t.tensor({2, 1, 2}, {1, 2, 3, 4});
  auto b2 = t.tensor({2, 2, 1}, {1, 1, 2, 2});
  auto bout = t.empty(HAL_DTYPE_FLOAT32, {2, 1, 1});
  t.run("baddbmm", {&bself.view, &b1.view, &b2.view}, {&bout.view}, {Attr::f("alpha", -1.0)});
  CHECK(t.read<float>(bout) == std::vector<float>{97, 186});
}

TEST_CASE("linear and linear_backward on a 3-D input") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t rows = 6, in = 5, outf = 4;
  std::vector<float> xv = ramp(rows * in), wv = ramp(outf * in, 0.5f, 9), bv = {1, -1, 0.5f, 2};
  auto x = t.tensor({2, 3, in}, xv);
  auto w = t.tensor({outf, in}, wv);
  auto bias = t.tensor({outf}, bv);
  auto y = t.empty(HAL_DTYPE_FLOAT32, {2, 3, outf});
  t.run("linear", {&x.view, &w.view, &bias.view}, {&y.view});
  std::vector<float> wt(static_cast<size_t>(in * outf));
  for (int64_t o = 0; o < outf; ++o)
    for (int64_t i = 0; i < in; ++i) wt[i * outf + o] = wv[o * in + i];
  std::vector<double> want = naive_mm(xv, wt, rows, in, outf);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < outf; ++o) want[r * outf + o] += bv[o];
  check_close(t.read<float>(y), want);
  t.run("linear", {&x.view, &w.view}, {&y.view});  // no bias
  check_close(t.read<float>(y), naive_mm(xv, wt, rows, in, outf));

  std::vector<float> gv = ramp(rows * outf, 1.0f, 5);
  auto g = t.tensor({2, 3, outf}, gv);
  auto gi = t.empty(HAL_DTYPE_FLOAT32, {2, 3, in});
  auto gw = t.empty(HAL_DTYPE_FLOAT32, {outf, in});
  auto gb = t.empty(HAL_DTYPE_FLOAT32, {outf});
  t.run("linear_backward", {&g.view, &x.view, &w.view}, {&gi.view, &gw.view, &gb.view});
  check_close(t.read<float>(gi), naive_mm(gv, wv, rows, outf, in));
  std::vector<float> gt(static_cast<size_t>(outf * rows));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < outf; ++o) gt[o * rows + r] = gv[r * outf + o];
  check_close(t.read<float>(gw), naive_mm(gt, xv, outf, rows, in));
  std::vector<double> sums(outf, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < outf; ++o) sums[o] += gv[r * outf + o];
  check_close(t.read<float>(gb), sums);

  // No rows: grad_weight and grad_bias are zeros.
  auto g0 = t.empty(HAL_DTYPE_FLOAT32, {0, outf});
  auto x0 = t.empty(HAL_DTYPE_FLOAT32, {0, in});
  auto gi0 = t.empty(HAL_DTYPE_FLOAT32, {0, in});
  t.run("linear_backward", {&g0.view, &x0.view, &w.view}, {&gi0.view, &gw.view, &gb.view});
  CHECK(t.read<float>(gw) == std::vector<float>(outf * in, 0.0f));
  CHECK(t.read<float>(gb) == std::vector<float>(outf, 0.0f));
}

TEST_CASE("refused matrix products name the op and the sizes") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto a = t.tensor({2, 3}, ramp(6));
  auto b = t.tensor({4, 5}, ramp(20));
  auto out = t.tensor({2, 5}, ramp(10));
  expect_error(t, "mm", {&a.view, &b.view}, {&out.view}, {}, "mm: self [2, 3] and mat2 [4, 5]: sizes 3 and 4 must match",
               out);
  auto v = t.tensor({3}, ramp(3));
  expect_error(t, "mm", {&a.view, &v.view}, {&out.view}, {}, "input 'mat2' must have rank 2 but has shape [3]", out);
  auto d = t.tensor<double>({3, 5}, std::vector<double>(15, 1.0), HAL_DTYPE_FLOAT64);
  expect_error(t, "mm", {&a.view, &d.view}, {&out.view}, {}, "has dtype float64 but input 'self' has dtype float32",
               out);
  auto i32 = t.tensor<int32_t>({3, 5}, std::vector<int32_t>(15, 1), HAL_DTYPE_INT32);
  expect_error(t, "mm", {&i32.view, &i32.view}, {&out.view}, {}, "int32", out);
  auto b3 = t.tensor({2, 2, 3}, ramp(12));
  auto c3 = t.tensor({3, 3, 5}, ramp(45));
  auto o3 = t.tensor({2, 2, 5}, ramp(20));
  expect_error(t, "bmm", {&b3.view, &c3.view}, {&o3.view}, {}, "batch sizes 2 and 3 must match", o3);
  auto m1 = t.tensor({2, 2, 3}, ramp(12));
  auto m2 = t.tensor({3, 3, 5}, ramp(45));
  expect_error(t, "matmul", {&m1.view, &m2.view}, {&o3.view}, {}, "do not broadcast (size 2 vs 3)", o3);
  auto self = t.tensor({3}, ramp(3));
  auto b35 = t.tensor({3, 5}, ramp(15));
  expect_error(t, "addmm", {&self.view, &a.view, &b35.view}, {&out.view}, {}, "does not broadcast to the result shape [2, 5]",
               out);
  expect_error(t, "addmm", {&self.view, &a.view, &b35.view}, {&out.view}, {Attr::s("beta", "x")},
               "attribute 'beta' must be scalar", out);
  auto w = t.tensor({5, 4}, ramp(20));
  expect_error(t, "linear", {&a.view, &w.view}, {&out.view}, {}, "linear: input [2, 3] and weight [5, 4]: sizes 3 and 4",
               out);
  auto w53 = t.tensor({5, 3}, ramp(15));
  auto bias = t.tensor({4}, ramp(4));
  expect_error(t, "linear", {&a.view, &w53.view, &bias.view}, {&out.view}, {}, "input 'bias' has shape [4] but must be [5]",
               out);
  auto g = t.tensor({2, 4}, ramp(8));
  auto gi = t.tensor({2, 3}, ramp(6));
  auto gw = t.tensor({5, 3}, ramp(15));
  auto gb = t.tensor({5}, ramp(5));
  expect_error(t, "linear_backward", {&g.view, &a.view, &w53.view}, {&gi.view, &gw.view, &gb.view}, {},
               "input 'grad_output' has shape [2, 4] but must be [2, 5]", gw);
  // Output aliasing an input is refused (the op reads its inputs while writing).
  auto sq = t.tensor({3, 3}, ramp(9));
  expect_error(t, "mm", {&sq.view, &sq.view}, {&sq.view}, {}, "", sq);
}

TEST_CASE("bmm with batch strides oneDNN's optimised matmul refuses (head-split views) matches loops") {
  // A [H, S, S] dense and B [H, S, D] read from storage [S, D, H] (batch
  // stride 1, the smallest): oneDNN offers only its reference matmul for
  // that, so the kernel densifies B and runs one sgemm per batch matrix.
  OpTester t(HAL_TEST_CPU_PLUGIN);
  const int64_t h = 4, s = 32, d = 8;
  std::vector<float> av = ramp(h * s * s), storage = ramp(s * d * h, 0.5f, 11);
  auto a = t.tensor({h, s, s}, av);
  auto b_dev = t.tensor({s, d, h}, storage);
  hal::TensorView b = b_dev.view;
  b.shape = {h, s, d};
  b.strides = {1, d * h, h};
  auto out = t.empty(HAL_DTYPE_FLOAT32, {h, s, d});
  t.run("bmm", {&a.view, &b}, {&out.view});
  std::vector<double> want;
  for (int64_t g = 0; g < h; ++g) {
    std::vector<float> ag(av.begin() + g * s * s, av.begin() + (g + 1) * s * s), bg(static_cast<size_t>(s * d));
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < d; ++j) bg[i * d + j] = storage[(i * d + j) * h + g];
    std::vector<double> cg = naive_mm(ag, bg, s, s, d);
    want.insert(want.end(), cg.begin(), cg.end());
  }
  check_close(t.read<float>(out), want);
}
