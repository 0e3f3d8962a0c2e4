// libFuzzer target: Model::load_bytes over arbitrary bytes, and the first
// stage of a model that runs in stages (subgraphs, run-time requests). Any
// hal::Error is a clean refusal; a crash, hang, leak or sanitizer report is a bug.
// Built only with -DHAL_BUILD_FUZZ=ON and clang (see CMakeLists.txt);
// the seed corpus is fuzz/corpus/.
#include <cstddef>
#include <cstdint>

#include "hal/onnx/model.hpp"
#include "hal/runtime/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    hal::onnx::Model m = hal::onnx::Model::load_bytes(data, size);  // external data refused: no model_dir
    (void)m.graph().nodes().size();
    if (m.runs_in_stages()) (void)m.stage({}).graph.nodes().size();
  } catch (const hal::Error&) {
  }
  return 0;
}
