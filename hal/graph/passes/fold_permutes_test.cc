#include <doctest/doctest.h>

#include <cmath>

#include "hal/runtime/graph_passes.hpp"
#include "pass_test_util.hpp"

using hal::Attr;

TEST_CASE("fold_permutes: a transpose transposed back and an identity permute read the original value") {
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {2, 3}, "x");
  auto t = g.add_op("permute", {x}, {Attr::ints("dims", {1, 0})});
  auto tt = g.add_op("permute", {t}, {Attr::ints("dims", {-1, 0})});  // undoes t
  auto same = g.add_op("permute", {x}, {Attr::ints("dims", {0, 1})});
  g.mark_output(g.add_op("add", {tt, same}), "sum");
  g.mark_output(g.add_op("neg", {t}), "negt");  // t itself stays: read elsewhere
  CHECK(hal::fold_permutes(g) == 2);
  CHECK_NOTHROW(g.verify());
  CHECK(g.dump() ==
        "graph: 1 inputs, 0 constants, 3 nodes, 2 outputs\n"
        "input %0 'x': float32[2, 3]\n"
        "%1: float32[3, 2] = permute(%0) {dims=[1, 0]}\n"
        "%2 'sum': float32[2, 3] = add(%0, %0)\n"
        "%3 'negt': float32[3, 2] = neg(%1)\n"
        "output %2 'sum'\n"
        "output %3 'negt'\n");
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  auto got = hal::testing::run_graph(cpu, g, {{1, 2, 3, 4, 5, 6}});
  CHECK(got[0] == std::vector<float>{2, 4, 6, 8, 10, 12});
  CHECK(got[1] == std::vector<float>{-1, -4, -2, -5, -3, -6});
}

TEST_CASE("fold_permutes: a permute of a permute is one permute, a chain back to the identity reads the original") {
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {2, 3, 4}, "x");
  auto a = g.add_op("permute", {x}, {Attr::ints("dims", {1, 2, 0})});
  auto b = g.add_op("permute", {a}, {Attr::ints("dims", {1, 2, 0})});  // [1,2,0] twice = [2,0,1]: not identity
  auto c = g.add_op("permute", {b}, {Attr::ints("dims", {1, 2, 0})});  // three times: the identity of x
  auto d = g.add_op("permute", {x}, {Attr::ints("dims", {0, 1, 2})});  // identity, but a graph output of an input
  g.mark_output(g.add_op("neg", {c}), "c");
  g.mark_output(g.add_op("exp", {b}), "b");
  g.mark_output(d, "d");
  CHECK(hal::fold_permutes(g) == 2);  // b composed, c folded
  CHECK(hal::eliminate_dead_code(g) == 1);  // a: read by nothing now
  CHECK_NOTHROW(g.verify());
  CHECK(g.dump() ==
        "graph: 1 inputs, 0 constants, 4 nodes, 3 outputs\n"
        "input %0 'x': float32[2, 3, 4]\n"
        "%1 'd': float32[2, 3, 4] = permute(%0) {dims=[0, 1, 2]}\n"
        "%2 'c': float32[2, 3, 4] = neg(%0)\n"
        "%4: float32[4, 2, 3] = permute(%0) {dims=[2, 0, 1]}\n"  // appended, then sorted before its reader
        "%3 'b': float32[4, 2, 3] = exp(%4)\n"
        "output %2 'c'\n"
        "output %3 'b'\n"
        "output %1 'd'\n");
  std::vector<float> xs(24);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = static_cast<float>(k) / 8.0f;
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  auto got = hal::testing::run_graph(cpu, g, {xs});
  std::vector<float> want_b;  // exp of x permuted [2, 0, 1]: out[i][j][k] = x[j][k][i]
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) want_b.push_back(std::exp(xs[static_cast<size_t>((j * 3 + k) * 4 + i)]));
  REQUIRE(got.size() == 3);
  for (size_t k = 0; k < 24; ++k) {
    CHECK(got[0][k] == -xs[k]);
    CHECK(got[1][k] == doctest::Approx(want_b[k]));
    CHECK(got[2][k] == xs[k]);
  }
}

TEST_CASE("fold_permutes: a graph output transposed back becomes the value it started from, once") {
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {2, 3}, "x");
  auto e = g.add_op("exp", {x});
  auto back = g.add_op("permute", {g.add_op("permute", {e}, {Attr::ints("dims", {1, 0})})}, {Attr::ints("dims", {1, 0})});
  auto again = g.add_op("permute", {g.add_op("permute", {e}, {Attr::ints("dims", {1, 0})})}, {Attr::ints("dims", {1, 0})});
  g.mark_output(back, "grad");
  g.mark_output(again, "grad2");  // e is an output by then: this one stays
  CHECK(hal::fold_permutes(g) == 1);
  CHECK(hal::eliminate_dead_code(g) == 1);
  CHECK_NOTHROW(g.verify());
  CHECK(g.value_name(g.outputs()[0]) == "grad");
  CHECK(g.nodes()[static_cast<size_t>(0)].op == "exp");
  CHECK(g.nodes().size() == 3);  // exp; the second pair
}
