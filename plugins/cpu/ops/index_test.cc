// CPU "index" kernels through the runtime's op API: results, strided and
// edge-case inputs, and every op-specific refusal (hal-conformance covers
// every op and dtype).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hal/testing/op_test_util.hpp"

using hal::Attr;
using hal::TensorView;
using hal::testing::DeviceTensor;
using hal::testing::OpTester;

namespace {

using Views = std::vector<const TensorView*>;

DeviceTensor i64(OpTester& t, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  return t.tensor<int64_t>(std::move(shape), v, HAL_DTYPE_INT64);
}
DeviceTensor i32(OpTester& t, std::vector<int64_t> shape, const std::vector<int32_t>& v) {
  return t.tensor<int32_t>(std::move(shape), v, HAL_DTYPE_INT32);
}

// Runs OP expecting a refusal with CODE whose message names the op and
// contains MENTION; SENTINEL (a float output filled with 7) stays untouched.
void expect_error(OpTester& t, const std::string& op, const Views& in, const Views& out, const std::vector<Attr>& attrs,
                  hal_status_code_e code, const std::string& mention, const DeviceTensor* sentinel = nullptr) {
  t.expect_refused(op, in, out, attrs, {mention}, code, sentinel ? std::vector<const DeviceTensor*>{sentinel} : std::vector<const DeviceTensor*>{});
}

DeviceTensor sevens(OpTester& t, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return t.tensor(std::move(shape), std::vector<float>(static_cast<size_t>(n), 7.0f));
}

}  // namespace

TEST_CASE("gather picks along dim, reads strided self and int32 indices") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto self = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto idx = i64(t, {2, 2}, {2, 0, 1, 1});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  t.run("gather", {&self.view, &idx.view}, {&out.view}, {Attr::i("dim", 1)});
  CHECK(t.read<float>(out) == std::vector<float>{3, 1, 5, 5});
  // dim 0, index smaller than self in dim 1.
  auto idx0 = i32(t, {1, 2}, {1, 0});
  auto out0 = t.empty(HAL_DTYPE_FLOAT32, {1, 2});
  t.run("gather", {&self.view, &idx0.view}, {&out0.view}, {Attr::i("dim", 0)});
  CHECK(t.read<float>(out0) == std::vector<float>{4, 2});
  // Transposed self [3, 2] = [[1, 4], [2, 5], [3, 6]].
  TensorView st = self.view;
  st.shape = {3, 2};
  st.strides = {1, 3};
  auto idx1 = i64(t, {3, 1}, {1, 0, 1});
  auto out1 = t.empty(HAL_DTYPE_FLOAT32, {3, 1});
  t.run("gather", {&st, &idx1.view}, {&out1.view}, {Attr::i("dim", -1)});
  CHECK(t.read<float>(out1) == std::vector<float>{4, 2, 6});
}

TEST_CASE("gather refuses bad indices, shapes, dims and index dtypes without writing") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto self = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = sevens(t, {2, 2});
  auto bad = i64(t, {2, 2}, {0, 1, 3, 0});
  expect_error(t, "gather", {&self.view, &bad.view}, {&out.view}, {Attr::i("dim", 1)}, HAL_STATUS_OUT_OF_RANGE,
               "index 3 in 'index' at position 2 is out of range [0, 3)", &out);
  auto neg = i64(t, {2, 2}, {0, -1, 1, 0});
  expect_error(t, "gather", {&self.view, &neg.view}, {&out.view}, {Attr::i("dim", 1)}, HAL_STATUS_OUT_OF_RANGE,
               "index -1 in 'index' at position 1", &out);
  auto big = i64(t, {3, 2}, {0, 0, 0, 0, 0, 0});
  auto out32 = sevens(t, {3, 2});
  expect_error(t, "gather", {&self.view, &big.view}, {&out32.view}, {Attr::i("dim", 1)}, HAL_STATUS_INVALID_ARGUMENT,
               "at dim 0 (3 > 2)", &out32);
  auto ok = i64(t, {2, 2}, {0, 0, 0, 0});
  expect_error(t, "gather", {&self.view, &ok.view}, {&out.view}, {Attr::i("dim", 2)}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'dim' = 2 is out of range", &out);
  expect_error(t, "gather", {&self.view, &ok.view}, {&out.view}, {}, HAL_STATUS_INVALID_ARGUMENT, "dim", &out);
  auto flt = t.tensor({2, 2}, {0, 0, 0, 0});
  expect_error(t, "gather", {&self.view, &flt.view}, {&out.view}, {Attr::i("dim", 1)}, HAL_STATUS_UNSUPPORTED_DTYPE,
               "float32", &out);
  auto rank1 = i64(t, {2}, {0, 0});
  auto out2 = sevens(t, {2});
  expect_error(t, "gather", {&self.view, &rank1.view}, {&out2.view}, {Attr::i("dim", 1)},
               HAL_STATUS_INVALID_ARGUMENT, "must have the rank of input 'self'", &out2);
}

TEST_CASE("an out-of-range gather on a stream is reported by synchronize, output untouched") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto self = t.tensor({4}, {1, 2, 3, 4});
  auto idx = i64(t, {3}, {0, 9, 1});
  auto out = sevens(t, {3});
  hal::Stream stream = t.device()->create_stream();
  hal::OpRunner(t.device(), "gather").launch({&self.view, &idx.view}, {&out.view}, {Attr::i("dim", 0)}, &stream);
  try {
    stream.synchronize();
    FAIL("synchronize did not report the bad index");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_OUT_OF_RANGE);
    CHECK_MESSAGE(std::string(e.what()).find("gather: index 9 in 'index' at position 1") != std::string::npos,
                  e.what());
  }
  CHECK(t.read<float>(out) == std::vector<float>{7, 7, 7});
}

TEST_CASE("index_select and embedding copy rows, bad ids are refused") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto w = t.tensor({3, 2}, {0, 1, 10, 11, 20, 21});
  auto ids = i32(t, {2, 2}, {2, 0, 1, 2});
  auto emb = t.empty(HAL_DTYPE_FLOAT32, {2, 2, 2});
  t.run("embedding", {&w.view, &ids.view}, {&emb.view});
  CHECK(t.read<float>(emb) == std::vector<float>{20, 21, 0, 1, 10, 11, 20, 21});
  auto scalar_id = i64(t, {}, {1});
  auto emb0 = t.empty(HAL_DTYPE_FLOAT32, {2});
  t.run("embedding", {&w.view, &scalar_id.view}, {&emb0.view});
  CHECK(t.read<float>(emb0) == std::vector<float>{10, 11});
  auto none = i64(t, {0}, {});
  auto emb_empty = t.empty(HAL_DTYPE_FLOAT32, {0, 2});
  t.run("embedding", {&w.view, &none.view}, {&emb_empty.view});

  auto sel = i64(t, {3}, {1, 1, 0});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {3, 3});
  TensorView wt = w.view;  // [2, 3] transposed view: [[0, 10, 20], [1, 11, 21]]
  wt.shape = {2, 3};
  wt.strides = {1, 2};
  auto out_t = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  t.run("index_select", {&wt, &sel.view}, {&out_t.view}, {Attr::i("dim", 1)});
  CHECK(t.read<float>(out_t) == std::vector<float>{10, 10, 0, 11, 11, 1});
  auto out_d0 = t.empty(HAL_DTYPE_FLOAT32, {3, 2});
  t.run("index_select", {&w.view, &sel.view}, {&out_d0.view}, {Attr::i("dim", 0)});
  CHECK(t.read<float>(out_d0) == std::vector<float>{10, 11, 10, 11, 0, 1});

  auto bad = i64(t, {2}, {0, 3});
  auto sent = sevens(t, {2, 2});
  expect_error(t, "embedding", {&w.view, &bad.view}, {&sent.view}, {}, HAL_STATUS_OUT_OF_RANGE,
               "index 3 in 'indices' at position 1 is out of range [0, 3)", &sent);
  auto sent2 = sevens(t, {3, 2});
  auto bad_sel = i64(t, {2}, {-1, 0});
  auto sent3 = sevens(t, {2, 2});
  expect_error(t, "index_select", {&w.view, &bad_sel.view}, {&sent3.view}, {Attr::i("dim", 0)},
               HAL_STATUS_OUT_OF_RANGE, "index -1 in 'index' at position 0", &sent3);
  auto idx2d = i64(t, {1, 1}, {0});
  expect_error(t, "index_select", {&w.view, &idx2d.view}, {&sent2.view}, {Attr::i("dim", 0)},
               HAL_STATUS_INVALID_ARGUMENT, "must be 0-d or 1-d", &sent2);
  auto w1 = t.tensor({3}, {1, 2, 3});
  expect_error(t, "embedding", {&w1.view, &ids.view}, {&sent.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "input 'weight' must have rank 2");
  expect_error(t, "embedding", {&w.view, &ids.view}, {&emb.view}, {Attr::i("padding_idx", 3)},
               HAL_STATUS_INVALID_ARGUMENT, "'padding_idx' = 3 must be < num_weights = 3");
}

TEST_CASE("embedding_backward accumulates repeated ids, zeroes padding_idx, scales by frequency") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto grad = t.tensor({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto ids = i64(t, {4}, {1, 3, 1, 0});
  auto gw = t.empty(HAL_DTYPE_FLOAT32, {4, 2});
  t.run("embedding_backward", {&grad.view, &ids.view}, {&gw.view}, {Attr::i("num_weights", 4)});
  CHECK(t.read<float>(gw) == std::vector<float>{7, 8, 6, 8, 0, 0, 3, 4});
  t.run("embedding_backward", {&grad.view, &ids.view}, {&gw.view},
        {Attr::i("num_weights", 4), Attr::i("padding_idx", 3), Attr::b("scale_grad_by_freq", true)});
  CHECK(t.read<float>(gw) == std::vector<float>{7, 8, 3, 4, 0, 0, 0, 0});
  auto sent = sevens(t, {4, 2});
  auto bad = i64(t, {4}, {1, 4, 1, 0});
  expect_error(t, "embedding_backward", {&grad.view, &bad.view}, {&sent.view}, {Attr::i("num_weights", 4)},
               HAL_STATUS_OUT_OF_RANGE, "index 4 in 'indices' at position 1 is out of range [0, 4)", &sent);
  expect_error(t, "embedding_backward", {&grad.view, &ids.view}, {&sent.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "num_weights", &sent);
  auto ids3 = i64(t, {3}, {0, 0, 0});
  expect_error(t, "embedding_backward", {&grad.view, &ids3.view}, {&sent.view}, {Attr::i("num_weights", 4)},
               HAL_STATUS_INVALID_ARGUMENT, "must have shape indices.shape + [embedding_dim]", &sent);
}

TEST_CASE("scatter and scatter_add write into a copy of self or in place") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto self = t.tensor({2, 3}, {0, 0, 0, 0, 0, 0});
  auto src = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto idx = i64(t, {2, 2}, {1, 0, 0, 1});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {2, 3});
  t.run("scatter", {&self.view, &idx.view, &src.view}, {&out.view}, {Attr::i("dim", 0)});
  CHECK(t.read<float>(out) == std::vector<float>{4, 2, 0, 1, 5, 0});
  auto dup = i64(t, {2, 3}, {2, 2, 0, 1, 0, 0});
  t.run("scatter_add", {&src.view, &dup.view, &src.view}, {&out.view}, {Attr::i("dim", 1)});
  CHECK(t.read<float>(out) == std::vector<float>{4, 2, 6, 4 + 11, 5 + 4, 6});
  // In place (out is self), dim -1.
  t.run("scatter", {&self.view, &idx.view, &src.view}, {&self.view}, {Attr::i("dim", -1)});
  CHECK(t.read<float>(self) == std::vector<float>{2, 1, 0, 4, 5, 0});
  // out exactly aliasing src: src must be read before it is overwritten.
  auto a = t.tensor({3}, {1, 2, 3});
  auto b = t.tensor({3}, {10, 20, 30});
  auto rev = i64(t, {3}, {2, 1, 0});
  t.run("scatter", {&a.view, &rev.view, &b.view}, {&b.view}, {Attr::i("dim", 0)});
  CHECK(t.read<float>(b) == std::vector<float>{30, 20, 10});

  auto sent = sevens(t, {2, 3});
  auto bad = i64(t, {2, 2}, {0, 0, 2, 0});
  expect_error(t, "scatter", {&self.view, &bad.view, &src.view}, {&sent.view}, {Attr::i("dim", 0)},
               HAL_STATUS_OUT_OF_RANGE, "index 2 in 'index' at position 2 is out of range [0, 2)", &sent);
  auto src_small = t.tensor({1, 3}, {1, 2, 3});
  expect_error(t, "scatter", {&self.view, &idx.view, &src_small.view}, {&sent.view}, {Attr::i("dim", 0)},
               HAL_STATUS_INVALID_ARGUMENT, "larger than input 'src'", &sent);
  auto src_i = t.tensor<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}, HAL_DTYPE_INT32);
  expect_error(t, "scatter_add", {&self.view, &idx.view, &src_i.view}, {&sent.view}, {Attr::i("dim", 0)},
               HAL_STATUS_INVALID_ARGUMENT, "input 'src' has dtype int32", &sent);
}

TEST_CASE("index_put sets or accumulates slices with wrapped, broadcast-stacked indices") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto self = t.tensor({3, 2}, {0, 0, 0, 0, 0, 0});
  // self[[0, -1]] = [5, 6] (values broadcast over the slice dim)
  auto rows = i64(t, {1, 2}, {0, -1});
  auto vals = t.tensor({2, 1}, {5, 6});
  auto out = t.empty(HAL_DTYPE_FLOAT32, {3, 2});
  t.run("index_put", {&self.view, &rows.view, &vals.view}, {&out.view});
  CHECK(t.read<float>(out) == std::vector<float>{5, 5, 0, 0, 6, 6});
  // self[[1, 1, 2], [0, 0, 1]] += 1 (accumulate repeats), in place.
  auto pts = i64(t, {2, 3}, {1, 1, 2, 0, 0, 1});
  auto one = t.tensor({}, {1});
  t.run("index_put", {&self.view, &pts.view, &one.view}, {&self.view}, {Attr::b("accumulate", true)});
  CHECK(t.read<float>(self) == std::vector<float>{0, 0, 2, 0, 0, 1});
  // Strided values: transposed [2, 2] into rows 0 and 2.
  auto v = t.tensor({2, 2}, {1, 2, 3, 4});
  TensorView vt = v.view;
  vt.strides = {1, 2};
  auto r02 = i64(t, {1, 2}, {0, 2});
  t.run("index_put", {&self.view, &r02.view, &vt}, {&out.view});
  CHECK(t.read<float>(out) == std::vector<float>{1, 3, 2, 0, 2, 4});

  auto sent = sevens(t, {3, 2});
  auto bad = i64(t, {2, 2}, {0, 1, 0, -3});
  expect_error(t, "index_put", {&self.view, &bad.view, &one.view}, {&sent.view}, {}, HAL_STATUS_OUT_OF_RANGE,
               "index -3 in 'indices' at position 3 is out of range [-2, 2)", &sent);
  auto k3 = i64(t, {3, 1}, {0, 0, 0});
  expect_error(t, "index_put", {&self.view, &k3.view, &one.view}, {&sent.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "1 <= K <= rank", &sent);
  auto v3 = t.tensor({3}, {1, 2, 3});
  expect_error(t, "index_put", {&self.view, &rows.view, &v3.view}, {&sent.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "does not broadcast to the indexed shape [2, 2]", &sent);
  auto i32idx = i32(t, {1, 2}, {0, 1});
  expect_error(t, "index_put", {&self.view, &i32idx.view, &one.view}, {&sent.view}, {},
               HAL_STATUS_UNSUPPORTED_DTYPE, "int32", &sent);
}

TEST_CASE("masked_fill broadcasts the mask and fills in place") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto self = t.tensor<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}, HAL_DTYPE_INT32);
  auto mask = t.tensor<uint8_t>({3}, {true, false, true}, HAL_DTYPE_BOOL);
  auto out = t.empty(HAL_DTYPE_INT32, {2, 3});
  t.run("masked_fill", {&self.view, &mask.view}, {&out.view}, {Attr::i("value", -9)});
  CHECK(t.read<int32_t>(out) == std::vector<int32_t>{-9, 2, -9, -9, 5, -9});
  t.run("masked_fill", {&self.view, &mask.view}, {&self.view}, {Attr::f("value", 2.75)});
  CHECK(t.read<int32_t>(self) == std::vector<int32_t>{2, 2, 2, 2, 5, 2});
  auto fmask = t.tensor({3}, {1, 0, 1});
  auto sent = sevens(t, {2, 3});
  auto fself = t.tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_error(t, "masked_fill", {&fself.view, &fmask.view}, {&sent.view}, {Attr::f("value", 0)},
               HAL_STATUS_UNSUPPORTED_DTYPE, "'mask' has dtype float32", &sent);
  auto mask4 = t.tensor<uint8_t>({4}, {true, false, true, true}, HAL_DTYPE_BOOL);
  expect_error(t, "masked_fill", {&fself.view, &mask4.view}, {&sent.view}, {Attr::f("value", 0)},
               HAL_STATUS_INVALID_ARGUMENT, "does not broadcast", &sent);
  expect_error(t, "masked_fill", {&fself.view, &mask.view}, {&sent.view}, {}, HAL_STATUS_INVALID_ARGUMENT, "value",
               &sent);
}

TEST_CASE("nonzero writes count rows of coordinates and leaves the rest") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  auto self = t.tensor({2, 3}, {0, 1.5f, 0, std::nanf(""), 0, -2});
  auto out = i64(t, {6, 2}, std::vector<int64_t>(12, -7));
  auto count = t.empty(HAL_DTYPE_INT64, {});
  t.run("nonzero", {&self.view}, {&out.view, &count.view});
  CHECK(t.read<int64_t>(count) == std::vector<int64_t>{3});
  CHECK(t.read<int64_t>(out) == std::vector<int64_t>{0, 1, 1, 0, 1, 2, -7, -7, -7, -7, -7, -7});
  // Transposed self: row-major order of the view.
  TensorView st = self.view;
  st.shape = {3, 2};
  st.strides = {1, 3};
  t.run("nonzero", {&st}, {&out.view, &count.view});
  CHECK(t.read<int64_t>(count) == std::vector<int64_t>{3});
  CHECK(t.read<int64_t>(out) == std::vector<int64_t>{0, 1, 1, 0, 2, 1, -7, -7, -7, -7, -7, -7});
  auto s0 = t.tensor<uint8_t>({}, {true}, HAL_DTYPE_BOOL);
  auto out0 = t.empty(HAL_DTYPE_INT64, {1, 0});
  t.run("nonzero", {&s0.view}, {&out0.view, &count.view});
  CHECK(t.read<int64_t>(count) == std::vector<int64_t>{1});
  auto empty = t.empty(HAL_DTYPE_FLOAT32, {0, 3});
  auto out_e = t.empty(HAL_DTYPE_INT64, {0, 2});
  t.run("nonzero", {&empty.view}, {&out_e.view, &count.view});
  CHECK(t.read<int64_t>(count) == std::vector<int64_t>{0});
  auto small = t.empty(HAL_DTYPE_INT64, {5, 2});
  expect_error(t, "nonzero", {&self.view}, {&small.view, &count.view}, {}, HAL_STATUS_INVALID_ARGUMENT,
               "has shape [5, 2] but must be [6, 2]");
}

TEST_CASE("sort, argsort and topk order rows, NaN largest, along any dim") {
  OpTester t(HAL_TEST_CPU_PLUGIN);
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto self = t.tensor({2, 4}, {3, nan, 1, 2, 5, 5, -1, 0});
  auto v = t.empty(HAL_DTYPE_FLOAT32, {2, 4});
  auto i = t.empty(HAL_DTYPE_INT64, {2, 4});
  t.run("sort", {&self.view}, {&v.view, &i.view}, {Attr::b("stable", true)});
  auto vals = t.read<float>(v);
  CHECK(std::vector<float>(vals.begin(), vals.begin() + 3) == std::vector<float>{1, 2, 3});
  CHECK(std::isnan(vals[3]));
  CHECK(std::vector<float>(vals.begin() + 4, vals.end()) == std::vector<float>{-1, 0, 5, 5});
  CHECK(t.read<int64_t>(i) == std::vector<int64_t>{2, 3, 0, 1, 2, 3, 0, 1});
  t.run("argsort", {&self.view}, {&i.view}, {Attr::b("descending", true), Attr::b("stable", true)});
  CHECK(t.read<int64_t>(i) == std::vector<int64_t>{1, 0, 3, 2, 0, 1, 3, 2});
  // dim 0 of a transposed view.
  TensorView st = self.view;
  st.shape = {4, 2};
  st.strides = {1, 4};
  auto i0 = t.empty(HAL_DTYPE_INT64, {4, 2});
  t.run("argsort", {&st}, {&i0.view}, {Attr::i("dim", 0), Attr::b("stable", true)});
  CHECK(t.read<int64_t>(i0) == std::vector<int64_t>{2, 2, 3, 3, 0, 0, 1, 1});

  auto x = t.tensor({2, 5}, {4, 9, 1, 7, 3, 0, -2, 8, 6, 5});
  auto tv = t.empty(HAL_DTYPE_FLOAT32, {2, 2});
  auto ti = t.empty(HAL_DTYPE_INT64, {2, 2});
  t.run("topk", {&x.view}, {&tv.view, &ti.view}, {Attr::i("k", 2)});
  CHECK(t.read<float>(tv) == std::vector<float>{9, 7, 8, 6});
  CHECK(t.read<int64_t>(ti) == std::vector<int64_t>{1, 3, 2, 3});
  t.run("topk", {&x.view}, {&tv.view, &ti.view}, {Attr::i("k", 2), Attr::b("largest", false)});
  CHECK(t.read<float>(tv) == std::vector<float>{1, 3, -2, 0});
  auto tv0 = t.empty(HAL_DTYPE_FLOAT32, {1, 5});
  auto ti0 = t.empty(HAL_DTYPE_INT64, {1, 5});
  t.run("topk", {&x.view}, {&tv0.view, &ti0.view}, {Attr::i("k", 1), Attr::i("dim", 0)});
  CHECK(t.read<float>(tv0) == std::vector<float>{4, 9, 8, 7, 5});
  CHECK(t.read<int64_t>(ti0) == std::vector<int64_t>{0, 0, 1, 0, 1});
  // Small k of a long row (the one-pass heap), NaN largest.
  std::vector<float> long_row(40);
  for (int j = 0; j < 40; ++j) long_row[j] = static_cast<float>((j * 17) % 40);
  long_row[23] = nan;
  auto lr = t.tensor({40}, long_row);
  auto lv = t.empty(HAL_DTYPE_FLOAT32, {2});
  auto li = t.empty(HAL_DTYPE_INT64, {2});
  t.run("topk", {&lr.view}, {&lv.view, &li.view}, {Attr::i("k", 2)});
  CHECK(std::isnan(t.read<float>(lv)[0]));
  CHECK(t.read<float>(lv)[1] == 39);
  CHECK(t.read<int64_t>(li) == std::vector<int64_t>{23, 7});
  t.run("topk", {&lr.view}, {&lv.view, &li.view}, {Attr::i("k", 2), Attr::b("largest", false)});
  CHECK(t.read<float>(lv) == std::vector<float>{0, 1});
  CHECK(t.read<int64_t>(li) == std::vector<int64_t>{0, 33});
  auto s = t.tensor({}, {3});
  auto sv = t.empty(HAL_DTYPE_FLOAT32, {});
  auto si = t.empty(HAL_DTYPE_INT64, {});
  t.run("sort", {&s.view}, {&sv.view, &si.view});
  CHECK(t.read<float>(sv) == std::vector<float>{3});
  CHECK(t.read<int64_t>(si) == std::vector<int64_t>{0});

  auto big = t.empty(HAL_DTYPE_FLOAT32, {2, 6});
  auto bigi = t.empty(HAL_DTYPE_INT64, {2, 6});
  expect_error(t, "topk", {&x.view}, {&big.view, &bigi.view}, {Attr::i("k", 6)}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'k' = 6 is out of range [0, 5]");
  expect_error(t, "sort", {&x.view}, {&v.view, &i.view}, {Attr::i("dim", 2)}, HAL_STATUS_INVALID_ARGUMENT,
               "attribute 'dim' = 2 is out of range");
  auto b = t.tensor<uint8_t>({2}, {true, false}, HAL_DTYPE_BOOL);
  auto bv = t.empty(HAL_DTYPE_BOOL, {1});
  auto bi = t.empty(HAL_DTYPE_INT64, {1});
  expect_error(t, "topk", {&b.view}, {&bv.view, &bi.view}, {Attr::i("k", 1)}, HAL_STATUS_UNSUPPORTED_DTYPE, "bool");
}
