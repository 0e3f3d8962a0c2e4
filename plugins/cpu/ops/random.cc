// CPU kernels of the "random" op group.
#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"

namespace hal::cpu {

void register_random_ops(sdk::OpRegistry& ops) { (void)ops; }

}  // namespace hal::cpu
