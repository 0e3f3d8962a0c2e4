#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "graph/passes/pass_test_util.hpp"
#include "hal/runtime/graph_passes.hpp"

using hal::Attr;

namespace {
// One node OP(x[, y, z]) on float32 [2, 3]; decomposed with OP unsupported;
// both run on the CPU plugin and compared.
void check_rule(hal::testing::OpTester& cpu, const std::string& op, size_t inputs, const std::vector<Attr>& attrs = {}) {
  CAPTURE(op);
  hal::Graph g;
  std::vector<hal::Graph::Value> in;
  for (size_t i = 0; i < inputs; ++i) in.push_back(g.input(HAL_DTYPE_FLOAT32, {g.symbol("n"), 3}));
  g.mark_output(g.add_op(op, in, attrs), "out");
  hal::Graph d = g;
  CHECK(hal::decompose(d, [&](const std::string& o) { return o != op; }) == 1);
  CHECK_NOTHROW(d.verify());
  for (const auto& node : d.nodes()) CHECK(node.op != op);
  CHECK(d.value_name(d.outputs()[0]) == "out");
  std::vector<std::vector<float>> data = {{-2, -0.5, 0, 0.3, 1, 2.5}, {1, 2, 3, 4, 5, 6}, {0.5, 0.25, 2, 1, 0, 3}};
  data.resize(inputs);
  std::vector<std::vector<int64_t>> shapes(inputs, std::vector<int64_t>{2, 3});  // n = 2
  auto want = hal::testing::run_graph(cpu, g, data, shapes);
  auto got = hal::testing::run_graph(cpu, d, data, shapes);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want[0].size(); ++i) {
    float w = want[0][i], h = got[0][i];
    if (std::isnan(w) || std::isinf(w)) CHECK(std::to_string(h) == std::to_string(w));  // sqrt(-2), 1/0 alike
    else CHECK(h == doctest::Approx(w).epsilon(1e-5));
  }
}
}  // namespace

TEST_CASE("decompose: every rule of the table matches the op it replaces on the CPU plugin") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  check_rule(cpu, "silu", 1);
  check_rule(cpu, "gelu", 1);
  check_rule(cpu, "gelu", 1, {Attr::s("approximate", "tanh")});
  check_rule(cpu, "sigmoid", 1);
  check_rule(cpu, "rsqrt", 1);
  check_rule(cpu, "log_softmax", 1, {Attr::i("dim", 1)});
  check_rule(cpu, "softmax", 1, {Attr::i("dim", -1)});
  check_rule(cpu, "addcmul", 3, {Attr::f("value", 0.5)});
  check_rule(cpu, "addcdiv", 3, {Attr::f("value", 2)});
  check_rule(cpu, "lerp", 3);
  CHECK(hal::decomposable_ops() == std::vector<std::string>{"addcdiv", "addcmul", "gelu", "lerp", "log_softmax",
                                                            "rsqrt", "sigmoid", "silu", "softmax"});
}

TEST_CASE("decompose: supported ops stay, rules chain, and a rule needing an unsupported op is skipped") {
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {4}, "x");
  g.mark_output(g.add_op("silu", {x}), "y");
  hal::Graph all = g;
  CHECK(hal::decompose(all, [](const std::string&) { return true; }) == 0);
  // silu -> sigmoid * x -> sigmoid itself unsupported -> neg, exp, add, reciprocal.
  hal::Graph chained = g;
  CHECK(hal::decompose(chained, [](const std::string& op) { return op != "silu" && op != "sigmoid"; }) == 2);
  std::vector<std::string> ops;
  for (const auto& n : chained.nodes()) ops.push_back(n.op);
  CHECK(ops == std::vector<std::string>{"neg", "exp", "add", "reciprocal", "mul"});
  // No exp: neither silu nor sigmoid can be expressed; silu stays.
  hal::Graph stuck = g;
  CHECK(hal::decompose(stuck, [](const std::string& op) { return op != "silu" && op != "sigmoid" && op != "exp"; }) ==
        0);
  CHECK(stuck.nodes()[0].op == "silu");
}
