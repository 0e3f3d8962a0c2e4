// CPU plugin: kernels for fused node patterns of its graph executables
// (graph/fusion.cc finds the patterns), defined beside the single-op
// kernels whose oneDNN plumbing they share.
#ifndef HAL_PLUGINS_CPU_OPS_FUSED_HPP_
#define HAL_PLUGINS_CPU_OPS_FUSED_HPP_

#include <memory>

#include "hal/sdk/host_graph.hpp"

namespace hal::cpu {

// Y = relu?(conv2d(X, W) + B + RESIDUAL?) in float32 as one oneDNN primitive
// (binary-add and eltwise post-ops), for the shapes of CALL: an assembled
// metadata call of a batched conv2d node (inputs x, weight, bias?; its
// attributes; no data). The step's run takes inputs (x, weight, bias or
// nullptr, residual when RESIDUAL) and one output, row-major contiguous
// except x and residual, which may be strided (copied first). The primitive
// and its buffers are made here, once; WEIGHTS_CONSTANT: every run passes
// the same weight bytes, reordered into the primitive's layout on the first
// run only. Throws DEVICE_ERROR when oneDNN refuses the shapes.
std::unique_ptr<sdk::HostGraphStep> make_conv2d_step(const sdk::OpCall& call, bool residual, bool relu,
                                                     bool weights_constant);

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_OPS_FUSED_HPP_
