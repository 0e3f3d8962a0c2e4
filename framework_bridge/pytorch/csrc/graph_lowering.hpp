// torch_hal's torch.compile lowering: FX nodes (aten overloads) become
// catalog nodes of a hal::Graph through the eager mapping table
// (row_conversion.hpp), and a finished segment is compiled by the shared
// pipeline (hal::run_pipeline + hal::compile) into a Segment that runs on
// hal tensors. torch_hal/dynamo/ drives both from Python (the FX walk, the
// partition into segments and eager nodes, the schedule).
#ifndef TORCH_HAL_CSRC_GRAPH_LOWERING_HPP_
#define TORCH_HAL_CSRC_GRAPH_LOWERING_HPP_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "hal/runtime/compiled_graph.hpp"
#include "hal/runtime/graph.hpp"

namespace pybind11 {
class module_;
}

namespace torch_hal {

// A dim of an FX value: a concrete size or a symbol's name ("s0", "s0*4").
using SymDim = std::variant<int64_t, std::string>;

// A compiled segment: a hal::CompiledGraph with the torch dtypes of its
// outputs. Configured by the set_* calls before its first run, immutable
// after that; run() may be called from several threads (CompiledGraph::run
// is thread-safe, the shape memo is locked).
class Segment {
 public:
  // OUTPUT_ALIASES: the CompileOptions::output_aliases COMPILED was made
  // with (a failover compiles again with them).
  Segment(hal::Graph graph, hal::CompiledGraph compiled, std::vector<c10::ScalarType> out_dtypes,
          c10::DeviceIndex dev, std::vector<std::pair<size_t, size_t>> output_aliases = {});
  // Runs the segment on the current torch_hal stream of its device. INPUTS
  // are in graph input order (hal tensors, or 0-dim CPU tensors, which are
  // uploaded: in one copy when there are several); non-contiguous ones are
  // made contiguous where a compiled group reads them (op-by-op nodes take
  // strided views). The outputs are new
  // hal tensors from torch's allocator with the shapes the catalog rules
  // give for the inputs' shapes. Throws hal::Error INVALID_ARGUMENT naming
  // the input for a count, dtype or shape mismatch (nothing runs), and the
  // plugin's errors naming the group or node. A device of the partition
  // other than the segment's own that its plugin reports lost
  // (DEVICE_LOST): the segment is compiled again on the devices left (the
  // home device's hal.toml failover device among them) and run again,
  // counted in failovers(); the home device lost is that error (its
  // tensors are gone with it).
  // WRITE_BACK (may be empty) are the tensors set_write_backs names outputs
  // for, in that order: each gets its output's value copied in (on the same
  // stream, after the segment: an input mutation, BatchNorm's running stats
  // or an optimizer's parameter update); its count must match (c10::Error,
  // nothing runs). A transient output whose write-back tensor is the very
  // tensor passed as the input the compiled graph lets it alias
  // (CompiledGraph::output_aliases: a parameter updated in place) is
  // written there by the run itself, no copy, where no other input shares
  // that tensor's storage.
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs,
                              const std::vector<at::Tensor>& write_back = {}) const;
  // Input I is run as inputs[I].permute(PERMUTES[I]) where that is not
  // empty: a weight's transpose read in place, without an eager view call
  // per run. Set once, before the first run (not thread-safe against run);
  // throws c10::Error when the list is longer than the inputs.
  void set_input_permutes(std::vector<std::vector<int64_t>> permutes);
  // Run's K-th write_back tensor receives output OUTPUTS[K]. Set once,
  // before the first run (not thread-safe against run); throws c10::Error
  // for an index past the outputs.
  void set_write_backs(std::vector<size_t> outputs);
  // Outputs OUTPUTS (each a write-back's source, nothing else reading it)
  // are transient: run allocates them together in one buffer, copies them
  // into their write-back tensors and does not return them (run returns
  // the other outputs, in order, then the view outputs). Set once, after
  // set_write_backs and before the first run (not thread-safe against run);
  // throws c10::Error for an index that is not a write-back's source.
  void set_transient_outputs(std::vector<size_t> outputs);
  // Write-backs the runs so far made in place (the run wrote the output
  // into its write-back tensor, the input it aliases): no copy.
  uint64_t in_place_write_backs() const { return in_place_.load(std::memory_order_relaxed); }
  // Run returns, after the outputs, input INPUTS[K]'s permuted view (a
  // transpose the segment reads in place and a later node reads too): no
  // eager view call per run. Set once, before the first run (not thread-safe
  // against run); throws c10::Error for an input that is not permuted.
  void set_view_outputs(std::vector<size_t> inputs);
  // The partition now (a failover replaces it; replaced ones stay alive
  // with the segment, so the reference stays valid).
  const hal::CompiledGraph& compiled() const { return current()->graph; }
  const hal::Graph& graph() const { return graph_; }
  // Each failover: the devices lost and the partition's devices after it.
  std::vector<std::string> failovers() const;

 private:
  struct Compiled {
    hal::CompiledGraph graph;
    std::vector<bool> strided_ok;  // per input: CompiledGraph::accepts_strided_input
    std::vector<int64_t> alias_input;  // per output: the input it may be written into (output_aliases), or -1
  };
  std::shared_ptr<const Compiled> current() const;
  std::shared_ptr<const Compiled> make(hal::CompiledGraph graph) const;
  std::vector<at::Tensor> run_on(const Compiled& compiled, const std::vector<at::Tensor>& inputs,
                                 const std::vector<at::Tensor>& write_back) const;
  // Replaces AT after a DEVICE_LOST; false when the home device is the one lost.
  bool fail_over(const std::shared_ptr<const Compiled>& at) const;
  // The outputs' shapes for the shapes of IN (infer_shapes, which re-runs
  // every node's rule), remembering the last answer: runs repeat shapes.
  std::shared_ptr<const std::vector<std::vector<int64_t>>> output_shapes(const std::vector<at::Tensor>& in) const;

  hal::Graph graph_;
  mutable std::mutex compiled_mu_;
  mutable std::shared_ptr<const Compiled> compiled_;
  mutable std::vector<std::shared_ptr<const Compiled>> retired_;
  mutable std::vector<std::string> failovers_;
  std::vector<c10::ScalarType> out_dtypes_;
  c10::DeviceIndex dev_;
  std::vector<std::vector<int64_t>> permutes_;  // per input: set_input_permutes
  std::vector<size_t> write_backs_;             // set_write_backs
  std::vector<bool> transient_;                 // per output: set_transient_outputs
  bool any_transient_ = false;                  // any of them
  std::vector<std::pair<size_t, size_t>> output_aliases_;  // CompileOptions::output_aliases
  mutable std::atomic<uint64_t> in_place_{0};              // write-backs the runs made in place
  std::vector<size_t> view_outputs_;            // set_view_outputs
  mutable std::mutex shapes_mu_;
  mutable std::vector<std::vector<int64_t>> last_in_;
  mutable std::shared_ptr<const std::vector<std::vector<int64_t>>> last_out_;
  // A run's views of its tensors, kept for the next run (their vectors keep
  // their capacity): a run takes them when no other run holds them.
  struct Views {
    std::vector<hal::TensorView> all;
    std::vector<const hal::TensorView*> in, out;
  };
  mutable std::mutex views_mu_;
  mutable Views views_;
  // The 0-dim CPU inputs' device copy (an optimizer's step counters), kept
  // between runs on the default (synchronous) stream under views_mu_: HOST
  // is what BLOCK holds; a run uploads only when an input's value differs,
  // and a counter's output the graph lets alias its input is written into
  // BLOCK by the run and downloaded from there (no re-upload next run).
  struct HostScalars {
    at::Tensor block;
    std::vector<uint8_t> host;  // empty: BLOCK's contents unknown
  };
  mutable HostScalars scalars_;
};

// How a segment on HOME compiles: HOME, then the runtime's other devices in
// config order, and its fallback device (compile() leaves lost ones out).
hal::CompileOptions segment_compile_options(const std::shared_ptr<hal::Device>& home);

// Adds this area's classes to torch_hal._C: _SegmentBuilder (declare,
// lower, mark_output, input_names, dump, compile) and _Segment (run,
// set_input_permutes, set_write_backs, set_view_outputs, explain, stats,
// graph_dump), and _hal_compile_counters.
void bind_lowering(pybind11::module_& m);

}  // namespace torch_hal

#endif  // TORCH_HAL_CSRC_GRAPH_LOWERING_HPP_
