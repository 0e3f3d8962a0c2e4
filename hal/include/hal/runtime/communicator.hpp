// HAL runtime: collective communicators (hal/collective.h) over a device's
// plugin, and the key/value stores that bootstrap them.
//
//   // rank 0 makes the id and shares it (here through the store itself):
//   hal::FileStore store("/tmp/job42");
//   hal::CommUniqueId id = rank == 0 ? hal::Communicator::unique_id(*dev) : ...;
//   hal::Communicator comm(dev, world, rank, id, store, std::chrono::seconds(30));
//   comm.allreduce(buf, buf, n, HAL_DTYPE_FLOAT32, HAL_REDUCE_SUM, &stream);
//
// Every call throws hal::Error with the plugin's code and message
// (UNIMPLEMENTED when the plugin has no collective interface).
#ifndef HAL_RUNTIME_COMMUNICATOR_HPP_
#define HAL_RUNTIME_COMMUNICATOR_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/hal.h"
#include "hal/runtime/device.hpp"
#include "hal/runtime/error.hpp"
#include "hal/runtime/stream.hpp"

namespace hal {

using CommUniqueId = hal_comm_unique_id_t;

// The host side of hal_comm_bootstrap_t: a key/value store shared by the
// ranks of one communicator (and private to it). Implementations must be
// thread-safe.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // The value of KEY once it exists; nullopt when TIMEOUT passes first.
  virtual std::optional<std::vector<uint8_t>> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
};

// A store in a directory every rank can read and write (one file per key,
// written atomically by rename). For local jobs and tests; torch's bridge
// uses torch's Store instead. The directory must exist; the caller removes
// it.
class FileStore final : public KeyValueStore {
 public:
  explicit FileStore(std::string directory);
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::optional<std::vector<uint8_t>> get(const std::string& key, std::chrono::milliseconds timeout) override;

 private:
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

// One operation (see hal_collective_args_t for what each kind reads).
// Buffers must be of the communicator's device and outlive the operation
// (record them on STREAM if they are freed before it runs).
struct CollectiveCall {
  hal_collective_kind_e kind = HAL_COLLECTIVE_ALLREDUCE;
  hal_dtype_e dtype = HAL_DTYPE_FLOAT32;
  hal_reduce_op_e op = HAL_REDUCE_SUM;
  uint32_t root = 0;  // root, or the peer of SEND / RECV
  uint64_t count = 0;
  // SEND / RECV: a RECV takes the oldest SEND from its peer with this tag.
  // Nonzero needs a plugin of ABI >= 1.13 (else run() throws UNIMPLEMENTED).
  uint64_t tag = 0;
  const Buffer* send = nullptr;
  uint64_t send_offset = 0;  // bytes
  const Buffer* recv = nullptr;
  uint64_t recv_offset = 0;  // bytes
  // ALLTOALL with unequal blocks: world_size entries each, or all empty.
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
};

// One rank's communicator. Move-only; destroying it waits for its queued
// operations. Operations must be issued in the same order on every rank;
// abort() and async_error() may be called from any thread.
class Communicator {
 public:
  // A new unique id from DEVICE's plugin, to hand to every rank.
  static CommUniqueId unique_id(Device& device);

  // Joins the communicator ID names (blocks until every rank joined, or
  // TIMEOUT; 0 = the plugin's default). STORE is used only during the call
  // (may be null when WORLD_SIZE is 1).
  Communicator(std::shared_ptr<Device> device, uint32_t world_size, uint32_t rank, const CommUniqueId& id,
               KeyValueStore* store, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  ~Communicator();

  uint32_t rank() const { return rank_; }
  uint32_t world_size() const { return world_size_; }
  Device& device() const { return *device_; }
  std::chrono::milliseconds timeout() const;
  std::string transport() const;
  // How this rank reaches each rank, in rank order ("self", "shm", "tcp"):
  // hal_comm_info_t.peer_transports (ABI 1.12); empty when the plugin does
  // not say (an older plugin). Throws as transport().
  std::vector<std::string> peer_transports() const;
  hal_comm_t* handle() const { return handle_; }

  // Queues CALL on STREAM (nullptr: runs it before returning).
  void run(const CollectiveCall& call, const Stream* stream = nullptr);
  void allreduce(const Buffer& send, const Buffer& recv, uint64_t count, hal_dtype_e dtype, hal_reduce_op_e op,
                 const Stream* stream = nullptr);
  void broadcast(const Buffer& buffer, uint64_t count, hal_dtype_e dtype, uint32_t root,
                 const Stream* stream = nullptr);
  void allgather(const Buffer& send, const Buffer& recv, uint64_t count, hal_dtype_e dtype,
                 const Stream* stream = nullptr);
  void barrier(const Stream* stream = nullptr);
  // Operations between group_start and group_end (this thread) are issued
  // together at the outermost group_end.
  void group_start();
  void group_end();

  // See hal_comm_split_args_t; nullptr for HAL_COMM_SPLIT_NO_COLOR.
  std::unique_ptr<Communicator> split(int32_t color, int32_t key);
  void abort();
  // The error that broke the communicator, if any.
  std::optional<Error> async_error() const;

 private:
  Communicator(std::shared_ptr<Device> device, hal_comm_t* handle);
  const hal_collective_api_t& api() const;
  hal_comm_info_t info() const;  // comm_get_info
  void release() noexcept;
  std::shared_ptr<Device> device_;
  hal_comm_t* handle_ = nullptr;
  uint32_t world_size_ = 0, rank_ = 0;
};

}  // namespace hal

#endif  // HAL_RUNTIME_COMMUNICATOR_HPP_
