// HAL C++ SDK: a collective communicator (the object behind hal_comm_t; see
// hal/collective.h), and the validated calls the SDK hands it.
//
// A plugin that declares HAL_CAPABILITY_COLLECTIVE and includes
// "hal/sdk/collectives.hpp" gets working collectives for every device with
// no code: the SDK's host communicator (host_communicator.hpp) runs them on
// host memory over shared memory between processes, reading device memory
// through Buffer::host_pointer() or staging it through host copies. A
// device with its own interconnect overrides Device::create_communicator.
// Header-only.
#ifndef HAL_SDK_COLLECTIVE_COMMUNICATOR_HPP_
#define HAL_SDK_COLLECTIVE_COMMUNICATOR_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/collective.h"
#include "hal/sdk/buffer.hpp"
#include "hal/sdk/status.hpp"
#include "hal/sdk/stream.hpp"

namespace hal::sdk {

class Device;

// One operation, validated by the SDK: KIND's buffers are non-null live
// buffers of the communicator's device with every range inside them, counts
// and ranks in range, DTYPE and OP meaningful together. For ALLTOALL the
// count vectors are empty (equal blocks of COUNT) or world_size long. For
// BARRIER nothing else is set.
struct CollectiveCall {
  enum Kind : uint32_t {
    kAllreduce = HAL_COLLECTIVE_ALLREDUCE,
    kBroadcast = HAL_COLLECTIVE_BROADCAST,
    kReduce = HAL_COLLECTIVE_REDUCE,
    kAllgather = HAL_COLLECTIVE_ALLGATHER,
    kReduceScatter = HAL_COLLECTIVE_REDUCE_SCATTER,
    kAlltoall = HAL_COLLECTIVE_ALLTOALL,
    kSend = HAL_COLLECTIVE_SEND,
    kRecv = HAL_COLLECTIVE_RECV,
    kBarrier = 0x100,  // not a hal_collective_kind_e: the barrier entry
  };
  Kind kind = kBarrier;
  uint32_t dtype = HAL_DTYPE_FLOAT32;
  hal_reduce_op_e op = HAL_REDUCE_SUM;
  uint32_t root = 0;  // root, or the peer of SEND / RECV
  uint64_t count = 0;
  uint64_t tag = 0;   // SEND / RECV: matched per (sender, receiver, tag)
  Buffer* send = nullptr;
  uint64_t send_offset = 0;
  Buffer* recv = nullptr;
  uint64_t recv_offset = 0;
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
};

// What comm_init passes down. BOOTSTRAP is the host's store, valid only
// during the call.
struct CommInit {
  Device* device = nullptr;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  hal_comm_unique_id_t id{};
  const hal_comm_bootstrap_t* bootstrap = nullptr;  // nullptr only for world_size 1
  std::chrono::milliseconds timeout{0};              // 0: the implementation's default
};

// Created by Device::create_communicator (or the SDK's host communicator),
// owned by the SDK, destroyed on comm_destroy: the destructor waits for the
// operations it queued and releases shared resources even when peers are
// gone. launch/barrier/split are called in the same order on every rank
// (the caller's promise); abort and async_error may be called from any
// thread at any time.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual Device& device() const = 0;
  virtual uint32_t rank() const = 0;
  virtual uint32_t world_size() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  // Transports in use ("shm"); static storage.
  virtual const char* transport() const = 0;
  // How this rank reaches each rank, in rank order, comma-separated
  // ("self,shm,tcp"), valid while the communicator lives; nullptr: not said
  // (hal_comm_info_t.peer_transports, ABI 1.12).
  virtual const char* peer_transports() const { return nullptr; }
  // Queues CALLS (one operation, or a group's in issue order) on STREAM
  // (a stream of device(); nullptr: runs them before returning). Errors
  // found while they run are thrown (stream nullptr) or reported to the
  // stream and kept for async_error.
  virtual void launch(std::vector<CollectiveCall> calls, Stream* stream) = 0;
  // A new communicator of the ranks with COLOR (>= 0), ranked by (KEY,
  // rank); nullptr for HAL_COMM_SPLIT_NO_COLOR. Blocks until done.
  virtual std::unique_ptr<Communicator> split(int32_t color, int32_t key) = 0;
  // Makes pending and later operations here and at reachable peers fail
  // with ABORTED naming WHY. Never blocks for long; thread-safe.
  virtual void abort(const std::string& why) = 0;
  // The error that broke the communicator, if any.
  virtual std::optional<Error> async_error() const = 0;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_COLLECTIVE_COMMUNICATOR_HPP_
