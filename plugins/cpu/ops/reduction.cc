// CPU kernels of the "reduction" op group.
#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"

namespace hal::cpu {

void register_reduction_ops(sdk::OpRegistry& ops) { (void)ops; }

}  // namespace hal::cpu
