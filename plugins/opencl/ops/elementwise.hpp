// OpenCL plugin: the elementwise kernel generator — one OpenCL C kernel per
// (expression, operand dtypes, geometry pattern), over strided, broadcast
// operands (the SDK's merged geometry), with optional data checks that run
// before any output is written. Unary, binary, data and index ops use it,
// and graph compile fuses chains into one expression.
#ifndef HAL_PLUGINS_OPENCL_OPS_ELEMENTWISE_HPP_
#define HAL_PLUGINS_OPENCL_OPS_ELEMENTWISE_HPP_

#include <string>
#include <vector>

#include "cl_kernel.hpp"

namespace hal::opencl {

// out = EXPR, an OpenCL C expression of the inputs "x0".."x<n-1>" (each
// loaded and converted to its compute dtype) and the scalars "s0".. (of
// COMPUTE's type). Stored into OUT converted (bool: != 0).
struct ElementwiseKernel {
  std::string expr;
  std::string helpers;                 // OpenCL C functions EXPR calls (may use the typedef C)
  hal_dtype_e compute = HAL_DTYPE_FLOAT32;  // typedef'd as C in the kernel
  std::vector<const Tensor*> inputs;   // nullptr: absent (no variable)
  std::vector<hal_dtype_e> input_compute;  // per input; INVALID = COMPUTE
  std::vector<sdk::Scalar> scalars;
  // Data check: before computing, a kernel evaluates GUARD (an expression
  // of "v", input GUARD_INPUT's value in its compute dtype); any true
  // element stops the launch with GUARD_KIND reported at GUARD_SITE, and
  // nothing is written.
  std::string guard;
  int guard_input = 1;
  int guard_kind = 0;
  std::string guard_site;
};

// Queues the kernel computing OUT on STREAM (synchronous when nullptr).
void launch_elementwise(ClDevice& device, sdk::Stream* stream, const ElementwiseKernel& k, const Tensor& out);

// The kernel description of elementwise op OP applied to INPUTS (only
// dtype, rank and defined are read; undefined = an absent optional input)
// giving dtype OUT, with ATTRS (every attribute in catalog order, defaults
// applied): the expression, helpers, compute dtypes, scalars and guard a
// launch of it would use; K.inputs point into INPUTS. False (with *WHY)
// when the op is not generated from an expression here or has no
// expression for these dtypes. The graph compiler composes these.
bool elementwise_expression(const sdk::OpSchema& op, const std::vector<sdk::Tensor>& inputs, hal_dtype_e out,
                            const std::vector<sdk::AttrValue>& attrs, ElementwiseKernel& k, std::string* why = nullptr);

// Registers the elementwise ops (unary, binary, copy, fill, masked_fill).
void register_elementwise_ops(sdk::OpRegistry& ops);

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_OPS_ELEMENTWISE_HPP_
