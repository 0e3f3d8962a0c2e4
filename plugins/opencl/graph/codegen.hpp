// OpenCL plugin, graph compiler (2 of 3): code generation. A group
// partition_fused formed becomes ONE OpenCL kernel: the nodes' expressions
// composed inline (ops/elementwise.cc gives them), graph inputs broadcast to
// the iteration shape with runtime strides, casts between node dtypes
// explicit; with a reduction each work-item (or a work-group with a
// local-memory tree, and the last work-group of an output combining the
// partial results) accumulates the chain's values without storing them;
// with a row op one work-group per row makes a pass over the row per
// statistic (max and sum of exponentials; mean and variance; mean square),
// recomputing the prologue from the inputs each time, and the last pass
// writes the row op's output and the epilogue.
// Sources are specialised on dtypes and structure only: sizes and strides
// are bound at execute, through the geometry buffer (GeoLayout).
#ifndef HAL_PLUGINS_OPENCL_GRAPH_CODEGEN_HPP_
#define HAL_PLUGINS_OPENCL_GRAPH_CODEGEN_HPP_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "partition.hpp"

namespace hal::opencl {

namespace fusion {

// The geometry buffer a fused kernel reads its sizes and strides from
// (cl_long words; the kernel's KSZ/RSZ/KST/RST macros): the kept and reduced
// ranks, kMaxDims sizes of the kept dims, kMaxDims of the reduced dims,
// then per operand k kMaxDims element strides over the kept dims and
// kMaxDims over the reduced dims.
struct GeoLayout {
  static constexpr size_t kMaxDims = 8;
  static constexpr size_t kKeptRank = 0;
  static constexpr size_t kReducedRank = 1;
  static constexpr size_t kKeptSizes = 2;
  static constexpr size_t kReducedSizes = kKeptSizes + kMaxDims;
  static constexpr size_t kKeptStrides = kReducedSizes + kMaxDims;  // of operand 0
  static constexpr size_t kReducedStrides = kKeptStrides + kMaxDims;  // of operand 0
  static constexpr size_t kOperandWords = 2 * kMaxDims;  // from one operand's strides to the next's
  // Words of the buffer for OPERANDS operands.
  static constexpr size_t words(size_t operands) { return kKeptStrides + kOperandWords * operands; }
};
static_assert(GeoLayout::kMaxDims >= HAL_TENSOR_MAX_RANK, "a fused kernel's geometry holds every dim");

// A compiled group.
struct Plan {
  std::vector<int64_t> shape;  // iteration shape (symbolic dims < 0)
  // Operands: the elementwise outputs (graph output index), then the inputs.
  std::vector<size_t> ew_outputs;
  bool has_reduction = false;
  bool reduction_written = false;
  size_t reduction_output = 0;  // graph output index
  NodeInfo red;
  hal_dtype_e acc = HAL_DTYPE_INVALID;
  // With a row op: its node (mask, kind, dtype) and the graph output index
  // of each statistics output written (mean, rstd: kernel operands after the
  // inputs, one element per row).
  bool has_row = false;
  NodeInfo row;
  std::vector<size_t> stat_outputs;
  std::vector<std::pair<hal_dtype_e, sdk::Scalar>> scalars;  // in kernel argument order
  std::string source;
  std::string description;
  std::string file_stem;
  // Per node: its op, its inputs' value ids and the shape rule (for the
  // checks at execute).
  struct Check {
    std::string op;
    bool broadcast;
    std::vector<uint32_t> inputs;
  };
  std::vector<Check> checks;
  // The kernel execute launches.
  const char* entry() const { return has_row ? "fused_row" : has_reduction ? "fused_rows" : "fused"; }
};

// The plan (kernel source included) for GRAPH, a group partition_fused
// formed, on DEVICE. Throws UNIMPLEMENTED naming a node it cannot fuse.
Plan plan_group(ClDevice& device, const sdk::Graph& g);

}  // namespace fusion

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_GRAPH_CODEGEN_HPP_
