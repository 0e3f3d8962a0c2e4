#include <doctest/doctest.h>

#include "hal/runtime/graph_passes.hpp"

using hal::Attr;

TEST_CASE("eliminate_common_subexpressions: merges same op, inputs and attributes, chains included") {
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {4, 3}, "x");
  auto s1 = g.add_op("sum", {x}, {Attr::ints("dim", {1}), Attr::b("keepdim", true)});
  auto s2 = g.add_op("sum", {x}, {Attr::b("keepdim", true), Attr::ints("dim", {1})});  // same, other order
  auto s3 = g.add_op("sum", {x}, {Attr::ints("dim", {0}), Attr::b("keepdim", true)});  // other attrs
  auto e1 = g.add_op("exp", {s1});
  auto e2 = g.add_op("exp", {s2});  // same once s2 is s1
  auto out = g.add_op("add", {e1, e2});
  g.mark_output(out, "out");
  g.mark_output(g.add_op("neg", {s3}), "other");
  CHECK(hal::eliminate_common_subexpressions(g) == 2);
  CHECK_NOTHROW(g.verify());
  CHECK(g.dump() ==
        "graph: 1 inputs, 0 constants, 5 nodes, 2 outputs\n"
        "input %0 'x': float32[4, 3]\n"
        "%1: float32[4, 1] = sum(%0) {dim=[1], keepdim=true}\n"
        "%2: float32[1, 3] = sum(%0) {dim=[0], keepdim=true}\n"
        "%3: float32[4, 1] = exp(%1)\n"
        "%4 'out': float32[4, 1] = add(%3, %3)\n"
        "%5 'other': float32[1, 3] = neg(%2)\n"
        "output %4 'out'\n"
        "output %5 'other'\n");
}

TEST_CASE("eliminate_common_subexpressions: random ops and graph outputs are never merged") {
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {8}, "x");
  auto d1 = g.add_node("dropout", {x}, {Attr::f("p", 0.5), Attr::i("seed", 1)})[0];
  auto d2 = g.add_node("dropout", {x}, {Attr::f("p", 0.5), Attr::i("seed", 1)})[0];
  g.mark_output(g.add_op("add", {d1, d2}), "sum");
  g.mark_output(g.add_op("relu", {x}), "a");
  g.mark_output(g.add_op("relu", {x}), "b");
  CHECK(hal::eliminate_common_subexpressions(g) == 0);
  CHECK(g.nodes().size() == 5);
}
