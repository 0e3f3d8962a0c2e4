// Test helpers for the graph passes: run a float32 graph on a device.
#ifndef HAL_GRAPH_PASSES_PASS_TEST_UTIL_HPP_
#define HAL_GRAPH_PASSES_PASS_TEST_UTIL_HPP_

#include <cstring>
#include <vector>

#include "hal/runtime/graph.hpp"
#include "testing/op_test_util.hpp"

namespace hal::testing {

// G's float32 outputs for float32 INPUTS (one vector per graph input, of
// SHAPES, or of the inputs' declared shapes when SHAPES is empty), run on
// TESTER's device.
inline std::vector<std::vector<float>> run_graph(OpTester& tester, const Graph& g,
                                                 const std::vector<std::vector<float>>& inputs,
                                                 std::vector<std::vector<int64_t>> shapes = {}) {
  if (shapes.empty())
    for (uint32_t id : g.inputs()) shapes.push_back(g.values()[id].shape);
  auto all = infer_shapes(g, shapes);
  std::vector<DeviceTensor> in, out;
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back(tester.tensor(shapes[i], inputs[i]));
  for (uint32_t id : g.outputs()) out.push_back(tester.empty(HAL_DTYPE_FLOAT32, all[id]));
  std::vector<const TensorView*> iv, ov;
  for (const DeviceTensor& t : in) iv.push_back(&t.view);
  for (const DeviceTensor& t : out) ov.push_back(&t.view);
  compile(*tester.device(), g).run(iv, ov);
  std::vector<std::vector<float>> result;
  for (const DeviceTensor& t : out) result.push_back(tester.read<float>(t));
  return result;
}

inline std::vector<uint8_t> float_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<float> floats_of(const std::vector<uint8_t>& b) {
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

}  // namespace hal::testing

#endif  // HAL_GRAPH_PASSES_PASS_TEST_UTIL_HPP_
