#include <doctest/doctest.h>

#include <cmath>

#include "graph/passes/pass_test_util.hpp"
#include "hal/runtime/graph_passes.hpp"
#include "testing/test_util.hpp"

using hal::testing::float_bytes;
using hal::testing::floats_of;

TEST_CASE("fold_constants: constant chains run once on the device and become constants") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {g.symbol("n"), 2}, "x");
  auto a = g.constant(HAL_DTYPE_FLOAT32, {2}, float_bytes({1, 4}), "a");
  auto b = g.constant(HAL_DTYPE_FLOAT32, {2}, float_bytes({2, 3}), "b");
  auto s = g.add_op("add", {a, b});    // [3, 7]
  auto r = g.add_op("sqrt", {s});      // folds next, from the folded s
  g.set_value_name(r.id, "root");
  auto y = g.add_op("mul", {x, r});    // reads a graph input: stays
  g.mark_output(y, "y");
  hal::Graph original = g;
  CHECK(hal::fold_constants(g, *cpu.device()) == 2);
  CHECK_NOTHROW(g.verify());
  REQUIRE(g.nodes().size() == 1);
  REQUIRE(g.constants().size() == 1);
  uint32_t c = g.constants()[0];
  CHECK(g.value_name(c) == "root");
  std::vector<float> folded = floats_of(*g.constant_data(c));
  CHECK(folded[0] == doctest::Approx(std::sqrt(3.0f)));
  CHECK(folded[1] == doctest::Approx(std::sqrt(7.0f)));
  // The same results as the unfolded graph.
  std::vector<float> in = {1, 2, 3, 4, 5, 6};
  auto want = hal::testing::run_graph(cpu, original, {in}, {{3, 2}});
  auto got = hal::testing::run_graph(cpu, g, {in}, {{3, 2}});
  CHECK(got == want);
}

TEST_CASE("fold_constants: the size cap, graph outputs and random ops are left alone") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {4});
  auto big = g.constant(HAL_DTYPE_FLOAT32, {4}, float_bytes({1, 2, 3, 4}), "big");
  auto e = g.add_op("exp", {big});                                        // 16 bytes > cap of 8
  auto d = g.add_node("dropout", {big}, {hal::Attr::i("seed", 3)})[0];    // random
  auto n = g.add_op("neg", {big});                                        // a graph output
  g.mark_output(g.add_op("add", {x, e}));
  g.mark_output(g.add_op("add", {x, d}));
  g.mark_output(n);
  CHECK(hal::fold_constants(g, *cpu.device(), 8) == 0);
  CHECK(hal::fold_constants(g, *cpu.device(), 16) == 1);  // exp only
}

TEST_CASE("fold_constants: a node the device does not run stays for the partitioner") {
  hal::testing::OpTester fx(hal::testing::fixture("graph"));  // add, mul, matmul; no exp
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {2});
  auto a = g.constant(HAL_DTYPE_FLOAT32, {2}, float_bytes({1, 2}), "a");
  auto e = g.add_op("exp", {a});
  auto s = g.add_op("add", {a, a});
  g.mark_output(g.add_op("mul", {x, e}));
  g.mark_output(g.add_op("mul", {x, s}));
  CHECK(hal::fold_constants(g, *fx.device()) == 1);
  CHECK_NOTHROW(g.verify());
  std::vector<std::string> ops;
  for (const auto& n : g.nodes()) ops.push_back(n.op);
  CHECK(ops == std::vector<std::string>{"exp", "mul", "mul"});
  CHECK(floats_of(*g.constant_data(g.nodes()[2].inputs[1])) == std::vector<float>{2, 4});
}
