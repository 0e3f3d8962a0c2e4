// Session: hand-built models run on the CPU plugin and checked against
// results computed here; feeds checked by name, dtype and shape.
#include "hal/onnx/session.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "hal/runtime/error.hpp"
#include "test_models.hpp"

namespace hal::onnx {
namespace {

using testing::attr_f;
using testing::attr_i;
using testing::attr_ints;
using testing::cpu_session;
using testing::floats;
using testing::ModelMaker;
using testing::ref_f32;
using TP = ::onnx::TensorProto;

std::vector<float> iota(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

// x [batch, 4] -> MatMul W1 [4, 3] -> Add b1 -> Relu -> Gemm(W2 [2, 3], b2, transB=1).
ModelMaker mlp() {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {std::string("batch"), int64_t{4}});
  mm.init_f32("W1", {4, 3}, iota(12, -0.5f, 0.1f));
  mm.init_f32("b1", {3}, {0.1f, -0.2f, 0.3f});
  mm.init_f32("W2", {2, 3}, {1, -1, 0.5f, 0.25f, 2, -0.75f});
  mm.init_f32("b2", {2}, {0.5f, -0.5f});
  mm.node("MatMul", {"x", "W1"}, {"h0"});
  mm.node("Add", {"h0", "b1"}, {"h1"});
  mm.node("Relu", {"h1"}, {"h"});
  attr_i(mm.node("Gemm", {"h", "W2", "b2"}, {"y"}), "transB", 1);
  mm.output("y");
  return mm;
}

std::vector<float> mlp_reference(const std::vector<float>& x, size_t batch) {
  std::vector<float> w1 = iota(12, -0.5f, 0.1f), b1 = {0.1f, -0.2f, 0.3f}, w2 = {1, -1, 0.5f, 0.25f, 2, -0.75f},
                     b2 = {0.5f, -0.5f}, y(batch * 2);
  for (size_t n = 0; n < batch; ++n) {
    float h[3];
    for (int j = 0; j < 3; ++j) {
      float s = b1[j];
      for (int k = 0; k < 4; ++k) s += x[n * 4 + k] * w1[k * 3 + j];
      h[j] = std::max(s, 0.0f);
    }
    for (int o = 0; o < 2; ++o) {
      float s = b2[o];
      for (int j = 0; j < 3; ++j) s += h[j] * w2[o * 3 + j];
      y[n * 2 + o] = s;
    }
  }
  return y;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])), "element " << i << ": " << got[i] << " vs " << want[i]);
}

TEST_CASE("an MLP with a symbolic batch runs on the CPU plugin at two batch sizes") {
  Session s(mlp().load(), cpu_session());
  for (size_t batch : {2u, 5u}) {
    std::vector<float> x = iota(batch * 4, -1.0f, 0.37f);
    auto out = s.run({}, {{"x", ref_f32({static_cast<int64_t>(batch), 4}, x)}});
    REQUIRE(out.size() == 1);
    CHECK(out[0].shape == std::vector<int64_t>{static_cast<int64_t>(batch), 2});
    check_close(floats(out[0]), mlp_reference(x, batch));
  }
  CHECK(s.explain().find("cpu:0") != std::string::npos);
  CHECK(s.explain().find("runs: 2") != std::string::npos);
}

TEST_CASE("bad feeds are refused naming the input and what is wrong") {
  Session s(mlp().load(), cpu_session());
  std::vector<float> x(8, 1.0f);
  std::vector<double> xd(8, 1.0);
  auto err = [&](const std::vector<std::pair<std::string, HostTensorRef>>& feeds, const std::vector<std::string>& outs = {}) {
    try {
      s.run(outs, feeds);
    } catch (const Error& e) {
      CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err({{"y", ref_f32({2, 4}, x)}}).find("feed 'y' is not an input of the model (inputs: 'x')") != std::string::npos);
  CHECK(err({}).find("input 'x' is missing") != std::string::npos);
  CHECK(err({{"x", ref_f32({2, 4}, x)}, {"x", ref_f32({2, 4}, x)}}).find("fed twice") != std::string::npos);
  CHECK(err({{"x", {HAL_DTYPE_FLOAT64, {2, 4}, xd.data()}}}).find("input 'x' has dtype float64 but the model expects float32") != std::string::npos);
  CHECK(err({{"x", ref_f32({8}, x)}}).find("input 'x' has rank 1") != std::string::npos);
  CHECK(err({{"x", ref_f32({2, 3}, x)}}).find("input 'x' dim 1 is 3 but the model expects 4") != std::string::npos);
  CHECK(err({{"x", ref_f32({2, 4}, x)}}, {"nope"}).find("'nope' is not an output") != std::string::npos);
  CHECK(err({{"x", {HAL_DTYPE_FLOAT32, {2, 4}, nullptr}}}).find("input 'x' has no data") != std::string::npos);
}

TEST_CASE("a symbolic dim bound to two sizes by two inputs is refused naming both") {
  ModelMaker mm(17);
  mm.input("a", TP::FLOAT, {std::string("n")});
  mm.input("b", TP::FLOAT, {std::string("n")});
  mm.node("Add", {"a", "b"}, {"y"});
  mm.output("y");
  Session s(mm.load(), cpu_session());
  std::vector<float> a = {1, 2, 3}, b = {1, 2};
  CHECK_THROWS_WITH_AS(s.run({}, {{"a", ref_f32({3}, a)}, {"b", ref_f32({2}, b)}}),
                       doctest::Contains("input 'b' dim 0 is 2 but dim 'n' is 3 (input 'a' dim 0)"), Error);
  auto out = s.run({"y"}, {{"a", ref_f32({3}, a)}, {"b", ref_f32({3}, a)}});
  check_close(floats(out[0]), {2, 4, 6});
}

TEST_CASE("softmax, layer norm and an erf GELU chain match a reference") {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {int64_t{2}, int64_t{4}});
  mm.init_f32("gamma", {4}, {1, 2, 0.5f, -1});
  mm.init_f32("beta", {4}, {0, 0.1f, 0.2f, 0.3f});
  mm.init_f32("half", {}, {0.5f});
  mm.init_f32("one", {}, {1.0f});
  mm.init_f32("sqrt2", {}, {1.41421356f});
  attr_i(mm.node("Softmax", {"x"}, {"sm"}), "axis", -1);
  attr_f(mm.node("LayerNormalization", {"x", "gamma", "beta"}, {"ln"}), "epsilon", 1e-5f);
  mm.node("Div", {"x", "sqrt2"}, {"g0"});
  mm.node("Erf", {"g0"}, {"g1"});
  mm.node("Add", {"g1", "one"}, {"g2"});
  mm.node("Mul", {"x", "g2"}, {"g3"});
  mm.node("Mul", {"g3", "half"}, {"gelu"});
  mm.output("sm");
  mm.output("ln");
  mm.output("gelu");
  Session s(mm.load(), cpu_session());
  std::vector<float> x = {0.5f, -1, 2, 0.25f, 3, 1, -2, 0};
  auto out = s.run({"gelu", "sm", "ln"}, {{"x", ref_f32({2, 4}, x)}});
  REQUIRE(out.size() == 3);
  std::vector<float> sm(8), ln(8), gelu(8);
  std::vector<float> gamma = {1, 2, 0.5f, -1}, beta = {0, 0.1f, 0.2f, 0.3f};
  for (int r = 0; r < 2; ++r) {
    float mx = -1e30f, sum = 0, mean = 0, var = 0;
    for (int c = 0; c < 4; ++c) mx = std::max(mx, x[r * 4 + c]);
    for (int c = 0; c < 4; ++c) sum += std::exp(x[r * 4 + c] - mx);
    for (int c = 0; c < 4; ++c) sm[r * 4 + c] = std::exp(x[r * 4 + c] - mx) / sum;
    for (int c = 0; c < 4; ++c) mean += x[r * 4 + c] / 4;
    for (int c = 0; c < 4; ++c) var += (x[r * 4 + c] - mean) * (x[r * 4 + c] - mean) / 4;
    for (int c = 0; c < 4; ++c) ln[r * 4 + c] = (x[r * 4 + c] - mean) / std::sqrt(var + 1e-5f) * gamma[c] + beta[c];
  }
  for (int i = 0; i < 8; ++i) gelu[i] = 0.5f * x[i] * (1 + std::erf(x[i] / 1.41421356f));
  check_close(floats(out[0]), gelu, 1e-5f);
  check_close(floats(out[1]), sm, 1e-5f);
  check_close(floats(out[2]), ln, 1e-4f);
}

TEST_CASE("conv, batch norm, max pool and global average pool match a reference") {
  ModelMaker mm(13);
  mm.input("x", TP::FLOAT, {int64_t{1}, int64_t{1}, int64_t{4}, int64_t{4}});
  std::vector<float> w = {0, 1, 0, 1, -4, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1};  // 2 filters 3x3
  mm.init_f32("w", {2, 1, 3, 3}, w);
  mm.init_f32("cb", {2}, {0.5f, -1});
  mm.init_f32("scale", {2}, {2, 0.5f});
  mm.init_f32("bias", {2}, {0.1f, 0.2f});
  mm.init_f32("mean", {2}, {0.3f, -0.4f});
  mm.init_f32("var", {2}, {4, 0.25f});
  auto& conv = mm.node("Conv", {"x", "w", "cb"}, {"c"});
  attr_ints(conv, "kernel_shape", {3, 3});
  attr_ints(conv, "pads", {1, 1, 1, 1});
  attr_f(mm.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"}), "epsilon", 1e-5f);
  mm.node("Relu", {"bn"}, {"r"});
  auto& pool = mm.node("MaxPool", {"r"}, {"p"});
  attr_ints(pool, "kernel_shape", {2, 2});
  attr_ints(pool, "strides", {2, 2});
  mm.node("GlobalAveragePool", {"p"}, {"y"});
  mm.output("p");
  mm.output("y");
  Session s(mm.load(), cpu_session());
  std::vector<float> x = iota(16, -2, 0.3f);
  auto out = s.run({}, {{"x", ref_f32({1, 1, 4, 4}, x)}});
  CHECK(out[0].shape == std::vector<int64_t>{1, 2, 2, 2});
  CHECK(out[1].shape == std::vector<int64_t>{1, 2, 1, 1});
  std::vector<float> scale = {2, 0.5f}, bias = {0.1f, 0.2f}, mean = {0.3f, -0.4f}, var = {4, 0.25f}, cb = {0.5f, -1};
  std::vector<float> p(8), y(2, 0);
  for (int f = 0; f < 2; ++f) {
    float r[4][4];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        float acc = cb[f];
        for (int di = -1; di <= 1; ++di)
          for (int dj = -1; dj <= 1; ++dj)
            if (i + di >= 0 && i + di < 4 && j + dj >= 0 && j + dj < 4) acc += x[(i + di) * 4 + j + dj] * w[f * 9 + (di + 1) * 3 + dj + 1];
        float bn = (acc - mean[f]) / std::sqrt(var[f] + 1e-5f) * scale[f] + bias[f];
        r[i][j] = std::max(bn, 0.0f);
      }
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        float m = std::max(std::max(r[2 * i][2 * j], r[2 * i][2 * j + 1]), std::max(r[2 * i + 1][2 * j], r[2 * i + 1][2 * j + 1]));
        p[f * 4 + i * 2 + j] = m;
        y[f] += m / 4;
      }
  }
  check_close(floats(out[0]), p, 1e-4f);
  check_close(floats(out[1]), y, 1e-4f);
}

// A decoder's input stage: token and position embeddings, positions from
// Range over the symbolic sequence length, a causal mask from
// ConstantOfShape + Trilu + Where.
TEST_CASE("embeddings over a symbolic sequence length and a causal mask run at two lengths") {
  ModelMaker mm(18);
  mm.input("ids", TP::INT64, {int64_t{1}, std::string("seq")});
  std::vector<float> tok = iota(10 * 3, 0, 0.5f), pos = iota(8 * 3, 100, 1);
  mm.init_f32("tok", {10, 3}, tok);
  mm.init_f32("pos", {8, 3}, pos);
  mm.init_i64("one", {}, {1});
  mm.init_i64("zero", {}, {0});
  mm.init_i64("axis0", {1}, {0});
  mm.init_f32("neg", {}, {-1000.0f});
  mm.node("Shape", {"ids"}, {"shape"});
  mm.node("Gather", {"shape", "one"}, {"seq"});
  mm.node("Range", {"zero", "seq", "one"}, {"positions"});
  mm.node("Gather", {"tok", "ids"}, {"te"});
  mm.node("Gather", {"pos", "positions"}, {"pe"});
  mm.node("Add", {"te", "pe"}, {"emb"});
  mm.node("Unsqueeze", {"seq", "axis0"}, {"seq1"});
  attr_i(mm.node("Concat", {"seq1", "seq1"}, {"sq"}), "axis", 0);
  auto& cos = mm.node("ConstantOfShape", {"sq"}, {"ones"});
  auto* v = cos.add_attribute();
  v->set_name("value");
  v->set_type(::onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(TP::BOOL);
  v->mutable_t()->add_dims(1);
  v->mutable_t()->add_int32_data(1);
  attr_i(mm.node("Trilu", {"ones"}, {"causal"}), "upper", 0);
  mm.init_f32("score", {}, {1.0f});
  mm.node("Where", {"causal", "score", "neg"}, {"mask"});
  mm.output("emb");
  mm.output("mask");
  Session s(mm.load(), cpu_session());
  for (int64_t seq : {3, 5}) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < seq; ++i) ids.push_back((i * 7 + 2) % 10);
    auto out = s.run({}, {{"ids", {HAL_DTYPE_INT64, {1, seq}, ids.data()}}});
    CHECK(out[0].shape == std::vector<int64_t>{1, seq, 3});
    std::vector<float> emb;
    for (int64_t i = 0; i < seq; ++i)
      for (int c = 0; c < 3; ++c) emb.push_back(tok[ids[i] * 3 + c] + pos[i * 3 + c]);
    check_close(floats(out[0]), emb);
    CHECK(out[1].shape == std::vector<int64_t>{seq, seq});
    std::vector<float> mask;
    for (int64_t i = 0; i < seq; ++i)
      for (int64_t j = 0; j < seq; ++j) mask.push_back(j <= i ? 1.0f : -1000.0f);
    check_close(floats(out[1]), mask);
  }
}

}  // namespace
}  // namespace hal::onnx
