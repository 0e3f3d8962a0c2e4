// HAL runtime: a hal::Graph compiled for a device — the partition the
// plugin's graph-compile interface chose, its executables, and the nodes run
// op by op — and running it (see hal/runtime/graph.hpp for building graphs).
#ifndef HAL_RUNTIME_COMPILED_GRAPH_HPP_
#define HAL_RUNTIME_COMPILED_GRAPH_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hal/runtime/device.hpp"
#include "hal/runtime/graph.hpp"
#include "hal/runtime/op.hpp"
#include "hal/runtime/stream.hpp"

namespace hal {

// What compile() made of a graph.
struct CompiledGraphStats {
  size_t groups = 0;          // groups the plugin claimed = executables compiled
  uint64_t kernel_count = 0;  // device kernels one run launches for them (sum of executable_get_info)
  size_t op_nodes = 0;        // nodes run one by one through the operator interface
  std::vector<std::string> descriptions;  // per executable, as the plugin describes it
};

// A graph compiled for one device. Move-only; destroying it releases the
// executables (no run of it may still be queued: synchronize first).
// run() may be called from several threads at once.
class CompiledGraph {
 public:
  CompiledGraph(CompiledGraph&&) noexcept;
  CompiledGraph& operator=(CompiledGraph&&) noexcept;
  ~CompiledGraph();

  // Runs the graph on STREAM (nullptr: synchronously). INPUTS[i] feeds graph
  // input i, OUTPUTS[j] receives output j (preallocated by the caller, on
  // the graph's device). Each view's dtype and rank must be its value's,
  // concrete dims equal and symbolic dims bound consistently; otherwise
  // INVALID_ARGUMENT naming the value ("input 1 (value 4): dim 0 is 5 but
  // symbol -1 is 3 (bound by input 0 (value 0))") and nothing runs.
  // Intermediates come from the device's caching allocator. Errors from a
  // step name its group or node.
  void run(const std::vector<const TensorView*>& inputs, const std::vector<const TensorView*>& outputs,
           const Stream* stream = nullptr) const;

  const CompiledGraphStats& stats() const;
  Device& device() const;

 private:
  friend CompiledGraph compile(Device& device, const Graph& graph);
  struct Impl;
  explicit CompiledGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Compiles GRAPH for DEVICE: asks the plugin's graph_partition which nodes
// it takes (none without a graph-compile interface), compiles each claimed
// group as a self-contained subgraph (values crossing the group's boundary
// become its inputs and outputs), and resolves every other node's op for
// op-by-op launch. Throws hal::Error: the plugin's refusal of the graph or
// a group, UNIMPLEMENTED naming a node whose op the plugin has no kernel
// for, FAILED_PRECONDITION for a partition whose groups cannot be ordered.
CompiledGraph compile(Device& device, const Graph& graph);

}  // namespace hal

#endif  // HAL_RUNTIME_COMPILED_GRAPH_HPP_
