#include <doctest/doctest.h>

#include "hal/runtime/graph_passes.hpp"

TEST_CASE("eliminate_dead_code: drops nodes no output needs, their values and unread constants") {
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {g.symbol("n"), 2}, "x");
  auto unused_w = g.constant(HAL_DTYPE_FLOAT32, {2}, std::vector<uint8_t>(8), "unused_w");
  auto a = g.add_op("relu", {x});
  auto dead = g.add_op("mul", {a, unused_w});  // read by nothing that is an output
  g.add_op("exp", {dead});
  auto y = g.add_op("neg", {a});
  g.mark_output(y, "y");
  CHECK(hal::eliminate_dead_code(g) == 2);
  CHECK_NOTHROW(g.verify());
  CHECK(g.dump() ==
        "graph: 1 inputs, 0 constants, 2 nodes, 1 outputs\n"
        "symbol -1 'n'\n"
        "input %0 'x': float32[n, 2]\n"
        "%1: float32[n, 2] = relu(%0)\n"
        "%2 'y': float32[n, 2] = neg(%1)\n"
        "output %2 'y'\n");
  CHECK(hal::eliminate_dead_code(g) == 0);
  // Graph inputs stay even when nothing reads them.
  hal::Graph h;
  auto p = h.input(HAL_DTYPE_FLOAT32, {2}, "p");
  auto q = h.input(HAL_DTYPE_FLOAT32, {2}, "q");
  h.mark_output(h.add_op("relu", {q}));
  CHECK(hal::eliminate_dead_code(h) == 0);
  CHECK(h.inputs().size() == 2);
  (void)p;
}
