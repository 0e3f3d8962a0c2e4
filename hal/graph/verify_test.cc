// Graph::verify: each structural error and a declared output the rules
// disagree with, named by node and value.
#include <doctest/doctest.h>

#include <string>

#include "hal/runtime/graph.hpp"

namespace {
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;
using hal::Attr;
using hal::ValueSpec;

std::string refusal(const hal::Graph& g) {
  try {
    g.verify();
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    return e.what();
  }
  FAIL("verify accepted the graph");
  return "";
}

// x -> relu (node 0) -> exp (node 1) -> add(exp, x) (node 2), output 'y'.
hal::Graph chain() {
  hal::Graph g;
  auto x = g.input(F32, {g.symbol("n"), 4}, "x");
  auto r = g.add_op("relu", {x});
  g.set_value_name(r.id, "r");
  auto e = g.add_op("exp", {r});
  g.mark_output(g.add_op("add", {e, x}), "y");
  return g;
}
}  // namespace

TEST_CASE("verify: a graph built by the inferring builder is valid") {
  hal::Graph g = chain();
  CHECK_NOTHROW(g.verify());
  // Declared outputs that agree with the rules, symbols standing for sizes.
  hal::Graph h;
  auto a = h.input(F32, {h.symbol("s"), 4});
  auto c = h.add_op("cat", {a, a}, ValueSpec{F32, {h.symbol("twice_s"), 4}});  // a derived size
  h.mark_output(h.add_op("relu", {c}, ValueSpec{F32, {-9, 4}}));               // concrete by the rules: a symbol may stand
  CHECK_NOTHROW(h.verify());
}

TEST_CASE("verify: a cycle is refused naming the nodes on it") {
  hal::Graph g = chain();
  g.set_node_input(0, 0, hal::Graph::Value{g.nodes()[1].outputs[0]});  // relu reads exp's output
  CHECK(refusal(g) == "node 0 ('relu') is on a cycle: node 0 ('relu') -> node 1 ('exp') -> node 0 ('relu')");
  hal::Graph self = chain();
  self.set_node_input(1, 0, hal::Graph::Value{self.nodes()[1].outputs[0]});
  CHECK(refusal(self) == "node 1 ('exp') is on a cycle: node 1 ('exp') -> node 1 ('exp')");
}

TEST_CASE("verify: a read of a later node's output is out of order") {
  hal::Graph g;
  auto x = g.input(F32, {4});
  auto a = g.add_op("relu", {x});
  auto b = g.add_op("exp", {x});
  g.mark_output(b);
  g.set_node_input(0, 0, b);
  CHECK(refusal(g) == "node 0 ('relu'): input 0 is value 2, produced by the later node 1 ('exp') (nodes must be in "
                      "topological order)");
  (void)a;
}

TEST_CASE("verify: dangling values, unproduced outputs and the rules' disagreements name the node and value") {
  SUBCASE("a dangling value") {
    hal::Graph g = chain();
    g.remove_nodes({true, false, false});  // relu goes; exp still reads its output
    CHECK(refusal(g) == "node 0 ('exp'): input 0 is value 1 ('r'), which is neither a graph input, a constant nor "
                        "produced by a node (a dangling value)");
  }
  SUBCASE("an output no node produces") {
    hal::Graph g = chain();
    g.remove_nodes({false, false, true});
    CHECK(refusal(g) == "graph output 0 is value 3 ('y'), which no node produces");
  }
  SUBCASE("a declared output the rules disagree with") {
    hal::Graph g;
    auto x = g.input(F32, {g.symbol("n"), 4}, "x");
    g.mark_output(g.add_op("relu", {x}, ValueSpec{F32, {-1, 5}}), "bad");
    CHECK(refusal(g) == "node 0 ('relu'): output 0 (value 1 ('bad')) is declared float32 [n, 5] but the catalog's "
                        "rules give float32 [n, 4] (? = a size derived from symbols)");
  }
  SUBCASE("a concrete size where the rules give a symbol") {
    hal::Graph g;
    auto x = g.input(F32, {g.symbol("n"), 4});
    g.mark_output(g.add_op("relu", {x}, ValueSpec{F32, {3, 4}}));
    CHECK(refusal(g) == "node 0 ('relu'): output 0 (value 1) is declared float32 [3, 4] but the catalog's rules give "
                        "float32 [n, 4] (? = a size derived from symbols)");
  }
  SUBCASE("a dtype other than the rules'") {
    hal::Graph g;
    auto x = g.input(F32, {2});
    g.mark_output(g.add_op("eq", {x, x}, ValueSpec{F32, {2}}));
    CHECK(refusal(g) == "node 0 ('eq'): output 0 (value 1) is declared float32 [2] but the catalog's rules give bool "
                        "[2] (? = a size derived from symbols)");
  }
  SUBCASE("an op not in the catalog") {
    hal::Graph g;
    auto x = g.input(F32, {2});
    g.mark_output(g.add_op("frobnicate", {x}, ValueSpec{F32, {2}}));
    CHECK(refusal(g).rfind("node 0 ('frobnicate'): op 'frobnicate' is not in the op catalog (version ", 0) == 0);
  }
  SUBCASE("a rule's own error keeps its code and names the node") {
    hal::Graph g;
    auto x = g.input(F32, {2});
    g.mark_output(g.add_op("softmax", {x}, ValueSpec{F32, {2}}));
    CHECK_THROWS_WITH_AS(g.verify(), "node 0 ('softmax'): missing required attribute 'dim' (int)", hal::Error);
  }
}
