// CPU kernels of the "transformer" op group.
#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"

namespace hal::cpu {

void register_transformer_ops(sdk::OpRegistry& ops) { (void)ops; }

}  // namespace hal::cpu
