// OpenCL plugin: one registration function per op group (ops/<group>.cc).
#ifndef HAL_PLUGINS_OPENCL_OPS_OPENCL_OPS_HPP_
#define HAL_PLUGINS_OPENCL_OPS_OPENCL_OPS_HPP_

#include "hal/sdk/plugin.hpp"

namespace hal::opencl {

void register_elementwise_ops(sdk::OpRegistry& ops);
void register_reduction_ops(sdk::OpRegistry& ops);
void register_index_ops(sdk::OpRegistry& ops);
void register_linalg_ops(sdk::OpRegistry& ops);
void register_nn_ops(sdk::OpRegistry& ops);
void register_transformer_ops(sdk::OpRegistry& ops);
void register_data_ops(sdk::OpRegistry& ops);
void register_random_ops(sdk::OpRegistry& ops);
void register_llm_ops(sdk::OpRegistry& ops);
void register_rnn_ops(sdk::OpRegistry& ops);
void register_factorization_ops(sdk::OpRegistry& ops);

inline void register_opencl_ops(sdk::OpRegistry& ops) {
  register_elementwise_ops(ops);
  register_reduction_ops(ops);
  register_index_ops(ops);
  register_linalg_ops(ops);
  register_nn_ops(ops);
  register_transformer_ops(ops);
  register_data_ops(ops);
  register_random_ops(ops);
  register_llm_ops(ops);
  register_rnn_ops(ops);
  register_factorization_ops(ops);
}

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_OPS_OPENCL_OPS_HPP_
