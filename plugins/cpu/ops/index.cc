// CPU kernels of the "index" op group.
#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"

namespace hal::cpu {

void register_index_ops(sdk::OpRegistry& ops) { (void)ops; }

}  // namespace hal::cpu
