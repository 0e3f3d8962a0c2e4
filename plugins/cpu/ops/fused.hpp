// CPU plugin: kernels for fused node patterns of its graph executables
// (graph/fusion.cc finds the patterns), defined beside the single-op
// kernels whose oneDNN plumbing they share.
#ifndef HAL_PLUGINS_CPU_OPS_FUSED_HPP_
#define HAL_PLUGINS_CPU_OPS_FUSED_HPP_

#include <memory>

#include "hal/sdk/host_graph.hpp"

namespace hal::cpu {

// Y = relu?(conv2d(X, W) + B + RESIDUAL?) in float32 as one oneDNN primitive
// (sum and eltwise post-ops), for the shapes of CALL (an assembled metadata
// call of a batched conv2d node: inputs x, weight, bias?; its attributes; no
// data), OUTPUT (Y's shape and strides: dense, in any dim order) and
// RESIDUAL (its shape and strides; nullptr: none). The step's run takes
// inputs (x, weight, bias or nullptr, residual when given) and one output
// in those layouts; x and the residual in the layout given here when it is
// dense in some dim order (a channels-last intermediate), else row-major or
// any strided view (copied row-major first); weight and bias row-major or
// strided (copied). The primitive and its buffers are made here, once;
// WEIGHTS_CONSTANT: every run passes the same weight bytes, reordered into
// the primitive's layout on the first run only. Throws DEVICE_ERROR when
// oneDNN refuses the shapes, INTERNAL for a strided OUTPUT.
std::unique_ptr<sdk::HostGraphStep> make_conv2d_step(const sdk::OpCall& call, const sdk::Tensor& output,
                                                     const sdk::Tensor* residual, bool relu, bool weights_constant);

// Whether the primitive make_conv2d_step makes for CALL's shapes (with a
// residual and relu as given) computes its destination channels-last, so an
// output in that order ({0, 2, 3, 1}) needs no reorder, nor does the next
// such step reading it. Throws DEVICE_ERROR when oneDNN refuses the shapes.
bool conv2d_prefers_channels_last(const sdk::OpCall& call, bool residual, bool relu);

// max_pool2d(X)'s values (not its indices) in float32, for the shapes of
// CALL (an assembled metadata call of a batched max_pool2d node). The
// step's run takes X and the values in any layout (read through their
// strides each run); channels-last input and output are read and written a
// vector of channels at a time. NaN wins, as in the op's kernel. Throws
// UNIMPLEMENTED for an unbatched input.
std::unique_ptr<sdk::HostGraphStep> make_max_pool2d_step(const sdk::OpCall& call);

// The activations a GEMM step applies to its result (relu; gelu, exact or
// tanh; tanh; sigmoid; silu): oneDNN eltwise post-ops; kNone: none.
enum class GemmActivation { kRelu, kGelu, kGeluTanh, kTanh, kSigmoid, kSilu, kNone };

// Y = ACT(linear(X, W, B?)), ACT(addmm(SELF, A, B)) or ACT(mm(A, B)) in
// float32 as one step, for the GEMM node of SCHEMA ("linear", "addmm" or
// "mm") with ATTRS (every
// attribute, defaults applied): the product, the bias and the activation in
// one oneDNN matmul with an eltwise post-op (one pass over Y) where oneDNN
// takes the shapes; a small product through sgemm, activated while its
// rows are in the caches; otherwise (a bias addmm cannot pass as one, oneDNN
// refusing) the op's kernel, then the activation over Y. The step's run
// takes the node's inputs (nullptr: an absent bias) and Y, in any strides.
// WEIGHT_CONSTANT (a linear whose weight is a graph constant: the same
// bytes every run): a float32 weight of at most 1 MiB is transposed once,
// at the first run, into a row-major [in, out] copy the step keeps, so each
// run's product reads B untransposed (sgemm's faster form; 25-35% at
// [32, 64..128] x [.., 128]); a larger one is not held twice.
// DEVICE outlives the step.
std::unique_ptr<sdk::HostGraphStep> make_gemm_activation_step(sdk::Device& device, const sdk::OpSchema& schema,
                                                              std::vector<sdk::AttrValue> attrs, GemmActivation act,
                                                              bool weight_constant = false);
// The largest weight (bytes) a GEMM step keeps a transposed copy of.
inline constexpr int64_t kMaxTransposedWeightBytes = int64_t{1} << 20;

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_OPS_FUSED_HPP_
