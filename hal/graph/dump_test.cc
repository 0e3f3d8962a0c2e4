// Graph::dump: the whole text of a small graph (symbols, input, constant
// with its short hash, nodes with attributes, outputs).
#include <doctest/doctest.h>

#include "hal/runtime/graph.hpp"

TEST_CASE("dump: one stable line per symbol, input, constant, node and output") {
  hal::Graph g;
  int64_t batch = g.symbol("batch");
  auto x = g.input(HAL_DTYPE_FLOAT32, {batch, 4}, "x");
  auto w = g.constant(HAL_DTYPE_FLOAT32, {4, 4}, std::vector<uint8_t>(64, 0), "w");
  auto h = g.add_op("matmul", {x, w});
  auto parts = g.add_node("split", {h}, {hal::Attr::ints("sizes", {1, 3}), hal::Attr::i("dim", 1)}, 2);
  auto s = g.add_op("sum", {parts[1]}, {hal::Attr::ints("dim", {1}), hal::Attr::b("keepdim", true),
                                        hal::Attr::dtype("dtype", HAL_DTYPE_FLOAT64)});
  auto c = g.add_op("gelu", {parts[0]}, {hal::Attr::s("approximate", "tanh")});
  auto ln = g.add_node("layer_norm", {c, hal::Graph::Value{}, hal::Graph::Value{}},
                       {hal::Attr::ints("normalized_shape", {1}), hal::Attr::f("eps", 0.1)});
  g.mark_output(s, "total");
  g.mark_output(ln[0]);
  CHECK(g.dump() ==
        "graph: 1 inputs, 1 constants, 5 nodes, 2 outputs\n"
        "symbol -1 'batch'\n"
        "input %0 'x': float32[batch, 4]\n"
        "constant %1 'w': float32[4, 4] sha256:f5a5fd42d16a\n"
        "%2: float32[batch, 4] = matmul(%0, %1)\n"
        "%3: float32[batch, 1], %4: float32[batch, 3] = split(%2) {sizes=[1, 3], dim=1}\n"
        "%5 'total': float64[batch, 1] = sum(%4) {dim=[1], keepdim=true, dtype=float64}\n"
        "%6: float32[batch, 1] = gelu(%3) {approximate='tanh'}\n"
        "%7: float32[batch, 1], %8: float32[batch, 1], %9: float32[batch, 1] = layer_norm(%6, _, _) "
        "{normalized_shape=[1], eps=0.10000000000000001}\n"
        "output %5 'total'\n"
        "output %7\n");
  hal::Graph copy = g;
  CHECK(copy.dump() == g.dump());
}
