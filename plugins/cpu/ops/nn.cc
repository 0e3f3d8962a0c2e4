// CPU kernels of the "nn" op group.
#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"

namespace hal::cpu {

void register_nn_ops(sdk::OpRegistry& ops) { (void)ops; }

}  // namespace hal::cpu
