// OpenCL plugin, graph compiler (1 of 3): what the fuser makes of a node, and
// the partition. partition_graph claims chains and trees of elementwise
// nodes (every op ops/elementwise.cc generates from an expression, in the
// dtypes it has expressions for, without data checks) whose outputs share
// one shape, the group's iteration shape, optionally closed by one trailing
// reduction (sum, mean, amax, amin over some or all dims) of a value of the
// group. graph/codegen.hpp turns a group into OpenCL C, graph/executable.hpp
// into an executable.
#ifndef HAL_PLUGINS_OPENCL_GRAPH_PARTITION_HPP_
#define HAL_PLUGINS_OPENCL_GRAPH_PARTITION_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "../ops/elementwise.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::opencl {

class ClDevice;

namespace fusion {

// Operands (inputs + outputs) one fused kernel takes at most.
constexpr size_t kMaxFusedOperands = 24;

enum class Reduce { kSum, kMean, kMax, kMin };
// Row ops: normalise over some dims of a value of the group's shape.
enum class RowOp { kSoftmax, kLogSoftmax, kLayerNorm, kRmsNorm };

// What one node is to the fuser.
struct NodeInfo {
  enum Role { kNone, kElementwise, kReduction, kRow } role = kNone;
  std::string why;  // kNone: the reason
  // kElementwise
  std::vector<sdk::Tensor> metas;  // K.inputs point here (dtype, rank, defined)
  ElementwiseKernel k;
  // kReduction
  Reduce reduce = Reduce::kSum;
  uint32_t mask = 0;  // reduced (kRow: normalised) dims of the input
  hal_dtype_e in = HAL_DTYPE_INVALID, out = HAL_DTYPE_INVALID;
  // kRow (in == out; mask as above)
  RowOp row = RowOp::kSoftmax;
  double eps = 0;  // layer_norm, rms_norm (resolved: never negative)
};

// What node N of G is to the fuser on DEVICE (kNone with the reason when it
// cannot be fused). Pure: reads only its arguments.
NodeInfo analyse(const ClDevice& device, const sdk::Graph& g, const sdk::GraphNode& n);

}  // namespace fusion

// A group id per node of GRAPH (0: not claimed); each group convex. Pure;
// called by ClDevice::partition_graph (graph/graph_hooks.cc).
std::vector<uint32_t> partition_fused(const ClDevice& device, const sdk::Graph& graph);

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_GRAPH_PARTITION_HPP_
