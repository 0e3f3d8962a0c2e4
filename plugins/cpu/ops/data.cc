// CPU kernels of the "data" op group.
#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"

namespace hal::cpu {

void register_data_ops(sdk::OpRegistry& ops) { (void)ops; }

}  // namespace hal::cpu
