// torch_hal: the torch.distributed "hal" backend (distributed.cc).
#ifndef TORCH_HAL_CSRC_DISTRIBUTED_HPP_
#define TORCH_HAL_CSRC_DISTRIBUTED_HPP_

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace torch_hal {

// The c10d backend of one process group: joins the communicator of SIZE
// ranks as RANK on the current hal device, bootstrapped through STORE (the
// group's PrefixStore), with TIMEOUT for every wait on a peer. Blocks until
// every rank joined; throws c10::Error / hal::Error on failure.
c10::intrusive_ptr<c10d::Backend> create_distributed_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                             int size, std::chrono::milliseconds timeout);

// At interpreter exit, before it finalizes: ends every backend's completion
// thread once the operations queued on it have completed (that thread drops
// Works, which may hold Python objects).
void shutdown_distributed_backends() noexcept;

}  // namespace torch_hal

#endif  // TORCH_HAL_CSRC_DISTRIBUTED_HPP_
