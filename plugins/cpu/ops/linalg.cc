// CPU kernels of the "linalg" op group.
#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"

namespace hal::cpu {

void register_linalg_ops(sdk::OpRegistry& ops) { (void)ops; }

}  // namespace hal::cpu
