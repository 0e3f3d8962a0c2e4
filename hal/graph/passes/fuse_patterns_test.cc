#include <doctest/doctest.h>

#include <cmath>

#include "hal/runtime/graph_passes.hpp"
#include "pass_test_util.hpp"
#include "testing/test_util.hpp"

using hal::Attr;
using hal::testing::float_bytes;

namespace {

struct Spelled {
  hal::Graph g;
  hal::Graph::Value x, d, out;
};

// Layer normalisation over the last K dims of a [batch, 3, 8] input as an
// opset-13 exporter writes it: (x - mean) / sqrt(mean((x - mean)^2) + eps)
// [* weight] [+ bias]. SCALE: the weight; SHIFT: the bias; EXPONENT: the
// power's constant.
Spelled spelled(size_t k, bool scale, bool shift, float exponent = 2.0f, float eps = 1e-5f) {
  Spelled s;
  hal::Graph& g = s.g;
  const int64_t batch = g.symbol("batch");
  const std::vector<int64_t> normalized = k == 1 ? std::vector<int64_t>{8} : std::vector<int64_t>{3, 8};
  const std::vector<int64_t> dims = k == 1 ? std::vector<int64_t>{-1} : std::vector<int64_t>{-2, -1};
  s.x = g.input(HAL_DTYPE_FLOAT32, {batch, 3, 8}, "x");
  auto two = g.constant(HAL_DTYPE_FLOAT32, {}, float_bytes({exponent}), "two");
  auto e = g.constant(HAL_DTYPE_FLOAT32, {}, float_bytes({eps}), "eps");
  auto mean_attrs = std::vector<Attr>{Attr::ints("dim", dims), Attr::b("keepdim", true)};
  auto m = g.add_op("mean", {s.x}, mean_attrs);
  s.d = g.add_op("sub", {s.x, m});
  auto v = g.add_op("mean", {g.add_op("pow", {s.d, two})}, mean_attrs);
  auto n = g.add_op("div", {s.d, g.add_op("sqrt", {g.add_op("add", {v, e})})});
  std::vector<float> w(static_cast<size_t>(k == 1 ? 8 : 24)), b(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = 0.5f + 0.1f * static_cast<float>(i);
    b[i] = 0.25f - 0.05f * static_cast<float>(i);
  }
  if (scale) n = g.add_op("mul", {g.constant(HAL_DTYPE_FLOAT32, normalized, float_bytes(w), "w"), n});
  if (scale && shift) n = g.add_op("add", {n, g.constant(HAL_DTYPE_FLOAT32, normalized, float_bytes(b), "b")});
  s.out = n;
  g.mark_output(n, "y");
  return s;
}

std::vector<float> input(int64_t batch) {
  std::vector<float> x(static_cast<size_t>(batch) * 24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i)) * 3.0f + 0.1f;
  return x;
}

}  // namespace

TEST_CASE("fuse_patterns: a layer norm written out becomes one layer_norm node with the same result") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  for (size_t k : {1u, 2u})
    for (int variant = 0; variant < 3; ++variant) {
      CAPTURE(k);
      CAPTURE(variant);
      Spelled s = spelled(k, variant >= 1, variant >= 2);
      const hal::Graph before = s.g;
      CHECK(hal::fuse_patterns(s.g, nullptr) == 1);
      CHECK_NOTHROW(s.g.verify());
      REQUIRE(s.g.nodes().size() == 1);
      const hal::Graph::Node& ln = s.g.nodes()[0];
      CHECK(ln.op == "layer_norm");
      CHECK((ln.inputs[1] != HAL_GRAPH_NO_VALUE) == (variant >= 1));
      CHECK((ln.inputs[2] != HAL_GRAPH_NO_VALUE) == (variant >= 2));
      CHECK(s.g.value_name(s.g.outputs()[0]) == "y");
      for (int64_t batch : {1, 4}) {
        auto want = hal::testing::run_graph(cpu, before, {input(batch)}, {{batch, 3, 8}});
        auto got = hal::testing::run_graph(cpu, s.g, {input(batch)}, {{batch, 3, 8}});
        REQUIRE(got[0].size() == want[0].size());
        for (size_t i = 0; i < got[0].size(); ++i) CHECK(got[0][i] == doctest::Approx(want[0][i]).epsilon(1e-5));
      }
    }
}

TEST_CASE("fuse_patterns: near misses stay as written") {
  SUBCASE("another exponent") {
    Spelled s = spelled(1, true, true, 3.0f);
    CHECK(hal::fuse_patterns(s.g, nullptr) == 0);
  }
  // With x - mean read elsewhere, or no layer_norm on the target, only the
  // division of d by its root mean square is an RMS norm of d: that fuses.
  SUBCASE("an intermediate read elsewhere") {
    Spelled s = spelled(1, true, true);
    s.g.mark_output(s.d, "centered");
    const hal::Graph before = s.g;
    CHECK(hal::fuse_patterns(s.g, nullptr) == 1);
    CHECK_NOTHROW(s.g.verify());
    size_t ln = 0, rms = 0;
    for (const auto& node : s.g.nodes()) {
      ln += node.op == "layer_norm";
      rms += node.op == "rms_norm";
    }
    CHECK(ln == 0);
    CHECK(rms == 1);
    hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
    auto want = hal::testing::run_graph(cpu, before, {input(2)}, {{2, 3, 8}});
    auto got = hal::testing::run_graph(cpu, s.g, {input(2)}, {{2, 3, 8}});
    for (size_t o = 0; o < got.size(); ++o)
      for (size_t i = 0; i < got[o].size(); ++i) CHECK(got[o][i] == doctest::Approx(want[o][i]).epsilon(1e-5));
  }
  SUBCASE("a target without layer_norm or rms_norm") {
    Spelled s = spelled(1, true, true);
    CHECK(hal::fuse_patterns(s.g, [](const std::string& op) { return op != "layer_norm" && op != "rms_norm"; }) == 0);
  }
  SUBCASE("a weight that is not of the normalised shape") {
    hal::Graph g;
    auto x = g.input(HAL_DTYPE_FLOAT32, {2, 8}, "x");
    auto two = g.constant(HAL_DTYPE_FLOAT32, {}, float_bytes({2.0f}));
    auto e = g.constant(HAL_DTYPE_FLOAT32, {}, float_bytes({1e-5f}));
    auto attrs = std::vector<Attr>{Attr::ints("dim", {-1}), Attr::b("keepdim", true)};
    auto d = g.add_op("sub", {x, g.add_op("mean", {x}, attrs)});
    auto n = g.add_op("div", {d, g.add_op("sqrt", {g.add_op("add", {g.add_op("mean", {g.add_op("pow", {d, two})}, attrs), e})})});
    auto y = g.add_op("mul", {n, g.input(HAL_DTYPE_FLOAT32, {2, 8}, "per_row")});  // a [2, 8] weight
    g.mark_output(y, "y");
    CHECK(hal::fuse_patterns(g, nullptr) == 1);  // the norm fuses; the mul stays outside it
    CHECK_NOTHROW(g.verify());
    CHECK(g.nodes().size() == 2);
    CHECK(g.nodes()[1].op == "mul");
  }
}

TEST_CASE("fuse_patterns: GELU written out becomes one gelu node - a layer norm right after it fuses too") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    hal::Graph g;
    auto x = g.input(HAL_DTYPE_FLOAT32, {3, 8}, "x");
    auto c = [&](float v) { return g.constant(HAL_DTYPE_FLOAT32, {}, float_bytes({v})); };
    // 0: x / sqrt(2) as the exporter writes it; 1: x * (1 / sqrt(2)), operands swapped; 2: another constant.
    auto t = variant == 1 ? g.add_op("mul", {x, c(0.70710678f)}) : g.add_op("div", {x, c(variant == 2 ? 1.5f : 1.41421354f)});
    auto a = variant == 1 ? g.add_op("add", {c(1.0f), g.add_op("erf", {t})}) : g.add_op("add", {g.add_op("erf", {t}), c(1.0f)});
    auto m = variant == 1 ? g.add_op("mul", {a, x}) : g.add_op("mul", {x, a});
    auto y = variant == 1 ? g.add_op("mul", {c(0.5f), m}) : g.add_op("mul", {m, c(0.5f)});
    // then a written-out layer norm of y over the last dim
    auto attrs = std::vector<Attr>{Attr::ints("dim", {-1}), Attr::b("keepdim", true)};
    auto d = g.add_op("sub", {y, g.add_op("mean", {y}, attrs)});
    auto n = g.add_op("div", {d, g.add_op("sqrt", {g.add_op("add", {g.add_op("mean", {g.add_op("pow", {d, c(2.0f)})}, attrs), c(1e-5f)})})});
    g.mark_output(n, "n");
    const hal::Graph before = g;
    CHECK(hal::fuse_patterns(g, nullptr) == (variant == 2 ? 1u : 2u));
    CHECK_NOTHROW(g.verify());
    if (variant != 2) {
      REQUIRE(g.nodes().size() == 2);
      CHECK(g.nodes()[0].op == "gelu");
      CHECK(g.nodes()[1].op == "layer_norm");
    }
    std::vector<float> xs(24);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::cos(0.9f * static_cast<float>(i)) * 2.5f;
    auto want = hal::testing::run_graph(cpu, before, {xs});
    auto got = hal::testing::run_graph(cpu, g, {xs});
    for (size_t i = 0; i < got[0].size(); ++i) CHECK(got[0][i] == doctest::Approx(want[0][i]).epsilon(1e-4));
  }
  SUBCASE("a target without gelu keeps it written out") {
    hal::Graph g;
    auto x = g.input(HAL_DTYPE_FLOAT32, {3, 8}, "x");
    auto c = [&](float v) { return g.constant(HAL_DTYPE_FLOAT32, {}, float_bytes({v})); };
    auto a = g.add_op("add", {g.add_op("erf", {g.add_op("div", {x, c(1.41421354f)})}), c(1.0f)});
    g.mark_output(g.add_op("mul", {g.add_op("mul", {x, a}), c(0.5f)}), "y");
    CHECK(hal::fuse_patterns(g, [](const std::string& op) { return op != "gelu"; }) == 0);
    CHECK(hal::fuse_patterns(g, nullptr) == 1);
  }
}

TEST_CASE("fuse_patterns: RMS norm written out, in each spelling, becomes one rms_norm node") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    hal::Graph g;
    const int64_t rows = g.symbol("rows");
    auto x = g.input(HAL_DTYPE_FLOAT32, {rows, 16}, "x");
    auto c = [&](float v) { return g.constant(HAL_DTYPE_FLOAT32, {}, float_bytes({v})); };
    auto sq = variant == 1 ? g.add_op("mul", {x, x}) : g.add_op("pow", {x, c(2.0f)});
    auto e = g.add_op("add", {g.add_op("mean", {sq}, {Attr::ints("dim", {-1}), Attr::b("keepdim", true)}), c(1e-6f)});
    hal::Graph::Value n;
    if (variant == 0 || variant == 1) n = g.add_op("mul", {x, g.add_op("rsqrt", {e})});           // Llama's spelling
    else if (variant == 2) n = g.add_op("mul", {g.add_op("reciprocal", {g.add_op("sqrt", {e})}), x});  // opset 13's
    else n = g.add_op("div", {x, g.add_op("sqrt", {e})});
    std::vector<float> wv(16);
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = 1.0f + 0.03f * static_cast<float>(i);
    if (variant != 3) n = g.add_op("mul", {n, g.constant(HAL_DTYPE_FLOAT32, {16}, float_bytes(wv), "w")});
    g.mark_output(n, "y");
    const hal::Graph before = g;
    CHECK(hal::fuse_patterns(g, nullptr) == 1);
    CHECK_NOTHROW(g.verify());
    REQUIRE(g.nodes().size() == 1);
    CHECK(g.nodes()[0].op == "rms_norm");
    CHECK((g.nodes()[0].inputs[1] != HAL_GRAPH_NO_VALUE) == (variant != 3));
    std::vector<float> xs(5 * 16);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(1.3f * static_cast<float>(i)) * 2.0f;
    auto want = hal::testing::run_graph(cpu, before, {xs}, {{5, 16}});
    auto got = hal::testing::run_graph(cpu, g, {xs}, {{5, 16}});
    for (size_t i = 0; i < got[0].size(); ++i) CHECK(got[0][i] == doctest::Approx(want[0][i]).epsilon(1e-5));
  }
  SUBCASE("the mean of squares read elsewhere stays written out") {
    hal::Graph g;
    auto x = g.input(HAL_DTYPE_FLOAT32, {4, 16}, "x");
    auto m = g.add_op("mean", {g.add_op("mul", {x, x})}, {Attr::ints("dim", {-1}), Attr::b("keepdim", true)});
    auto e = g.add_op("add", {m, g.constant(HAL_DTYPE_FLOAT32, {}, float_bytes({1e-6f}))});
    g.mark_output(g.add_op("mul", {x, g.add_op("rsqrt", {e})}), "y");
    g.mark_output(m, "mean_square");
    CHECK(hal::fuse_patterns(g, nullptr) == 0);
  }
}
