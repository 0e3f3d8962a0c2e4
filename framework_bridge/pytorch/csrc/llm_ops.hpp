// torch.ops.hal.<op> (llm_ops.cc): how a call of one of these custom ops
// becomes its catalog call, shared by the eager kernel and the
// torch.compile lowering (graph_lowering.cc).
#ifndef TORCH_HAL_CSRC_LLM_OPS_HPP_
#define TORCH_HAL_CSRC_LLM_OPS_HPP_

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

#include "hal/runtime/op.hpp"

namespace torch_hal {

// A torch.ops.hal call as its catalog op sees it.
struct HalOpCall {
  std::string catalog;                          // the op's name without "hal::"
  std::vector<at::Tensor> inputs;               // tensor arguments in order (undefined: None)
  std::vector<const std::string*> input_names;  // their argument names (static storage)
  std::vector<at::Tensor> mutated;              // the arguments written in place, in order
  std::vector<hal::Attr> attrs;                 // the other arguments, by name
};

// The catalog call of OP (a torch.ops.hal op) on ARGS, its schema's
// arguments. Reads ARGS only during the call. Thread-safe. Throws c10::Error
// for an argument type no catalog attribute takes.
HalOpCall hal_op_call(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

}  // namespace torch_hal

#endif  // TORCH_HAL_CSRC_LLM_OPS_HPP_
