// HAL C++ SDK, internal: the collective table's C entries
// (hal/collective.h): argument validation, groups, and the choice between a
// device's own communicator and the SDK's host communicator. Reached
// through hal/sdk/collectives.hpp, which completes detail::CollectiveTable.
#ifndef HAL_SDK_DETAIL_COLLECTIVE_ENTRIES_HPP_
#define HAL_SDK_DETAIL_COLLECTIVE_ENTRIES_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "hal/collective.h"
#include "hal/common/collective_extent.hpp"
#include "hal/common/dtype.hpp"
#include "hal/common/extension.hpp"
#include "hal/sdk/collective/communicator.hpp"
#include "hal/sdk/collective/host_communicator.hpp"
#include "hal/sdk/collective/reduce.hpp"
#include "hal/sdk/detail/call.hpp"
#include "hal/sdk/detail/memory_entries.hpp"
#include "hal/sdk/detail/registry.hpp"
#include "hal/sdk/device.hpp"

namespace hal::sdk::detail {

template <class Args>
void check_args(const Args* args, size_t needed, const char* name) {
  if (args == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "args is NULL");
  if (args->struct_size < needed)
    fail(HAL_STATUS_INVALID_ARGUMENT, name, ".struct_size ", args->struct_size, " is smaller than ABI 1.6's ", needed);
  common::require_well_formed_extension_chain(args->next, (std::string(name) + ".next").c_str());
}

// Operations recorded between group_start and group_end on this thread.
struct CollectiveGroup {
  int depth = 0;
  Communicator* comm = nullptr;
  Stream* stream = nullptr;
  std::vector<CollectiveCall> calls;
};
inline CollectiveGroup& collective_group() {
  thread_local CollectiveGroup g;
  return g;
}

inline hal_status_t* comm_get_unique_id(const hal_comm_get_unique_id_args_t* args) {
  return call("comm_get_unique_id", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_get_unique_id_args_t, out_id), "hal_comm_get_unique_id_args_t");
    auto* device = as<Device>(args->device, Kind::kDevice, "device");
    if (args->out_id == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_id is NULL");
    std::optional<hal_comm_unique_id_t> id = device->create_unique_id();
    *args->out_id = id ? *id : collective::HostCommunicator::unique_id();
  });
}

inline void register_comm(std::unique_ptr<Communicator> comm, hal_comm_t** out) {
  registry().add(comm.get(), Kind::kComm);
  *out = reinterpret_cast<hal_comm_t*>(comm.release());
}

inline hal_status_t* comm_init(const hal_comm_init_args_t* args) {
  return call("comm_init", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_init_args_t, out_comm), "hal_comm_init_args_t");
    CommInit init;
    init.device = as<Device>(args->device, Kind::kDevice, "device");
    if (args->out_comm == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_comm is NULL");
    if (args->id == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "id is NULL");
    if (args->world_size == 0) fail(HAL_STATUS_INVALID_ARGUMENT, "world_size is 0");
    if (args->rank >= args->world_size)
      fail(HAL_STATUS_INVALID_ARGUMENT, "rank ", args->rank, " is not below world_size ", args->world_size);
    if (args->world_size > 1) {
      const hal_comm_bootstrap_t* b = args->bootstrap;
      if (b == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "bootstrap is NULL but world_size is ", args->world_size);
      if (b->struct_size < HAL_STRUCT_SIZE_TO(hal_comm_bootstrap_t, get) || b->set == nullptr || b->get == nullptr)
        fail(HAL_STATUS_INVALID_ARGUMENT, "bootstrap lacks set or get (struct_size ", b->struct_size, ")");
    }
    if (args->timeout_ms > 365ull * 24 * 3600 * 1000)
      fail(HAL_STATUS_INVALID_ARGUMENT, "timeout_ms ", args->timeout_ms, " is over a year");
    init.world_size = args->world_size;
    init.rank = args->rank;
    init.id = *args->id;
    init.bootstrap = args->bootstrap;
    init.timeout = std::chrono::milliseconds(args->timeout_ms);
    std::unique_ptr<Communicator> comm = init.device->create_communicator(init);
    if (!comm) comm = collective::HostCommunicator::init(init);
    register_comm(std::move(comm), args->out_comm);
  });
}

inline hal_status_t* comm_split(const hal_comm_split_args_t* args) {
  return call("comm_split", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_split_args_t, out_comm), "hal_comm_split_args_t");
    auto* parent = as<Communicator>(args->parent, Kind::kComm, "parent");
    if (args->out_comm == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_comm is NULL");
    if (args->color < HAL_COMM_SPLIT_NO_COLOR)
      fail(HAL_STATUS_INVALID_ARGUMENT, "color ", args->color, " is negative (HAL_COMM_SPLIT_NO_COLOR is -1)");
    std::unique_ptr<Communicator> child = parent->split(args->color, args->key);
    if (!child) {
      *args->out_comm = nullptr;
      return;
    }
    register_comm(std::move(child), args->out_comm);
  });
}

inline hal_status_t* comm_destroy(const hal_comm_args_t* args) {
  return call("comm_destroy", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_args_t, comm), "hal_comm_args_t");
    auto* comm = as<Communicator>(args->comm, Kind::kComm, "comm");
    if (collective_group().comm == comm)
      fail(HAL_STATUS_FAILED_PRECONDITION, "comm is used by this thread's open group (call group_end first)");
    if (registry().remove(comm, Kind::kComm)) delete comm;
  });
}

inline hal_status_t* comm_abort(const hal_comm_args_t* args) {
  return call("comm_abort", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_args_t, comm), "hal_comm_args_t");
    as<Communicator>(args->comm, Kind::kComm, "comm")->abort("requested by the host");
  });
}

inline hal_status_t* comm_get_info(const hal_comm_get_info_args_t* args) {
  return call("comm_get_info", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_get_info_args_t, out_info), "hal_comm_get_info_args_t");
    auto* comm = as<Communicator>(args->comm, Kind::kComm, "comm");
    hal_comm_info_t* out = args->out_info;
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_info is NULL");
    if (out->struct_size < HAL_STRUCT_SIZE_TO(hal_comm_info_t, struct_size))
      fail(HAL_STATUS_INVALID_ARGUMENT, "out_info->struct_size ", out->struct_size, " is too small");
    hal_comm_info_t info{};
    info.struct_size = out->struct_size;
    info.world_size = comm->world_size();
    info.rank = comm->rank();
    info.device = reinterpret_cast<hal_device_t*>(&comm->device());
    info.timeout_ms = static_cast<uint64_t>(comm->timeout().count());
    info.transport = comm->transport();
    info.peer_transports = comm->peer_transports();
    std::memcpy(out, &info, std::min(sizeof(info), out->struct_size));
  });
}

inline hal_status_t* comm_get_async_error(const hal_comm_get_async_error_args_t* args) {
  return call("comm_get_async_error", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_get_async_error_args_t, out_error),
               "hal_comm_get_async_error_args_t");
    auto* comm = as<Communicator>(args->comm, Kind::kComm, "comm");
    if (args->out_error == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_error is NULL");
    std::optional<Error> e = comm->async_error();
    *args->out_error = e ? make_status(e->code(), std::string(info().name) + ": " + e->what()) : nullptr;
  });
}

// Checks COUNT elements of DTYPE at OFFSET in the buffer handle B (of DEVICE).
inline Buffer* collective_buffer(hal_buffer_t* b, uint64_t offset, uint64_t elements, uint32_t dtype, Device& device,
                                 const char* what) {
  auto* buffer = as<Buffer>(b, Kind::kBuffer, what);
  if (&buffer->device() != &device)
    fail(HAL_STATUS_INVALID_ARGUMENT, what, " belongs to another device than the communicator");
  const uint64_t es = common::dtype_size(dtype);
  if (elements > UINT64_MAX / es) fail(HAL_STATUS_INVALID_ARGUMENT, what, ": ", elements, " elements overflow");
  check_range(*buffer, offset, elements * es, what);
  return buffer;
}

// Validates ARGS into a CollectiveCall for COMM.
inline CollectiveCall collective_call(const hal_collective_args_t* a, Communicator& comm) {
  CollectiveCall c;
  if (a->kind >= HAL_COLLECTIVE_KIND_COUNT_)
    fail(HAL_STATUS_INVALID_ARGUMENT, "kind ", a->kind, " is not a hal_collective_kind_e");
  c.kind = static_cast<CollectiveCall::Kind>(a->kind);
  const char* name = collective::kind_name(a->kind);
  if (common::dtype_size(a->dtype) == 0)
    fail(HAL_STATUS_UNSUPPORTED_DTYPE, name, ": dtype ", a->dtype, " is not a hal_dtype_e");
  c.dtype = a->dtype;
  const bool reduces = c.kind == CollectiveCall::kAllreduce || c.kind == CollectiveCall::kReduce ||
                       c.kind == CollectiveCall::kReduceScatter;
  if (reduces) {
    try {
      collective::check_reduction(a->dtype, a->op);
    } catch (const Error& e) {
      fail(e.code(), name, ": ", e.what());
    }
    c.op = static_cast<hal_reduce_op_e>(a->op);
  }
  const uint32_t world = comm.world_size(), me = comm.rank();
  const bool rooted = c.kind == CollectiveCall::kBroadcast || c.kind == CollectiveCall::kReduce ||
                      c.kind == CollectiveCall::kSend || c.kind == CollectiveCall::kRecv;
  if (rooted && a->root >= world)
    fail(HAL_STATUS_INVALID_ARGUMENT, name, ": ", (c.kind == CollectiveCall::kSend || c.kind == CollectiveCall::kRecv) ? "peer " : "root ",
         a->root, " is not below the world size ", world);
  c.root = a->root;
  c.count = a->count;
  if (HAL_STRUCT_HAS_FIELD(a, hal_collective_args_t, tag)) c.tag = a->tag;  // 1.13
  const uint64_t n = a->count;
  if (n > UINT64_MAX / world / 16) fail(HAL_STATUS_INVALID_ARGUMENT, name, ": count ", n, " is too large");
  Device& device = comm.device();
  bool needs_send = true, needs_recv = true;
  switch (c.kind) {
    case CollectiveCall::kBroadcast:
      needs_send = me == a->root;
      needs_recv = me != a->root;
      break;
    case CollectiveCall::kReduce: needs_recv = me == a->root; break;
    case CollectiveCall::kSend: needs_recv = false; break;
    case CollectiveCall::kRecv: needs_send = false; break;
    case CollectiveCall::kAlltoall: {
      const bool any = a->send_counts || a->send_displs || a->recv_counts || a->recv_displs;
      if (!any) break;
      if (!a->send_counts || !a->send_displs || !a->recv_counts || !a->recv_displs)
        fail(HAL_STATUS_INVALID_ARGUMENT, name,
             ": send_counts, send_displs, recv_counts and recv_displs must all be set, or none");
      c.send_counts.assign(a->send_counts, a->send_counts + world);
      c.send_displs.assign(a->send_displs, a->send_displs + world);
      c.recv_counts.assign(a->recv_counts, a->recv_counts + world);
      c.recv_displs.assign(a->recv_displs, a->recv_displs + world);
      for (uint32_t p = 0; p < world; ++p)
        for (auto [counts, displs, label] : {std::tuple{&c.send_counts, &c.send_displs, "send"},
                                             std::tuple{&c.recv_counts, &c.recv_displs, "recv"}}) {
          const uint64_t cnt = (*counts)[p], at = (*displs)[p];
          if (cnt > UINT64_MAX / 32 || at > UINT64_MAX / 32)
            fail(HAL_STATUS_INVALID_ARGUMENT, name, ": ", label, " block ", p, " (count ", cnt, " at ", at,
                 ") is too large");
        }
      break;
    }
    default: break;
  }
  const bool unequal = !c.send_counts.empty();
  const common::CollectiveExtent extent = common::collective_extent(
      c.kind, n, world, unequal ? c.send_counts.data() : nullptr, unequal ? c.send_displs.data() : nullptr,
      unequal ? c.recv_counts.data() : nullptr, unequal ? c.recv_displs.data() : nullptr);
  const uint64_t send_elems = extent.send, recv_elems = extent.recv;
  if (needs_send) {
    c.send = collective_buffer(a->send, a->send_offset, send_elems, c.dtype, device, "send");
    c.send_offset = a->send_offset;
  }
  if (needs_recv) {
    c.recv = collective_buffer(a->recv, a->recv_offset, recv_elems, c.dtype, device, "recv");
    c.recv_offset = a->recv_offset;
  } else if (c.kind == CollectiveCall::kBroadcast && a->recv != nullptr) {  // the root's optional copy
    c.recv = collective_buffer(a->recv, a->recv_offset, n, c.dtype, device, "recv");
    c.recv_offset = a->recv_offset;
  }
  if (c.send != nullptr && c.send == c.recv) {
    const uint64_t es = common::dtype_size(c.dtype);
    const uint64_t s0 = c.send_offset, s1 = s0 + send_elems * es, r0 = c.recv_offset, r1 = r0 + recv_elems * es;
    const bool overlap = s0 < r1 && r0 < s1 && send_elems > 0 && recv_elems > 0;
    // In place: the same start, or NCCL's forms for allgather (send is
    // this rank's block of recv) and reduce_scatter (recv is this rank's
    // block of send).
    const bool in_place =
        (s0 == r0 && (c.kind == CollectiveCall::kAllreduce || c.kind == CollectiveCall::kBroadcast ||
                      c.kind == CollectiveCall::kReduce)) ||
        (c.kind == CollectiveCall::kAllgather && s0 == r0 + me * n * es) ||
        (c.kind == CollectiveCall::kReduceScatter && r0 == s0 + me * n * es);
    if (overlap && !in_place)
      fail(HAL_STATUS_INVALID_ARGUMENT, name, ": send [", s0, ", ", s1, ") and recv [", r0, ", ", r1,
           ") overlap in one buffer (only the in-place forms may)");
  }
  return c;
}

inline void issue(Communicator& comm, CollectiveCall call, hal_stream_t* s) {
  Stream* stream = s == nullptr ? nullptr : as<Stream>(s, Kind::kStream, "stream");
  if (stream != nullptr && &stream->device() != &comm.device())
    fail(HAL_STATUS_INVALID_ARGUMENT, "stream belongs to another device than the communicator");
  CollectiveGroup& g = collective_group();
  if (g.depth > 0) {
    if (g.comm == nullptr) {
      g.comm = &comm;
      g.stream = stream;
    } else if (g.comm != &comm || g.stream != stream) {
      fail(HAL_STATUS_INVALID_ARGUMENT,
           "a group's operations must use one communicator and one stream (this one differs from the group's first)");
    }
    g.calls.push_back(std::move(call));
    return;
  }
  std::vector<CollectiveCall> calls;
  calls.push_back(std::move(call));
  comm.launch(std::move(calls), stream);
}

inline hal_status_t* collective(const hal_collective_args_t* args) {
  return call("collective", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_collective_args_t, recv_displs), "hal_collective_args_t");
    auto* comm = as<Communicator>(args->comm, Kind::kComm, "comm");
    issue(*comm, collective_call(args, *comm), args->stream);
  });
}

inline hal_status_t* barrier(const hal_comm_args_t* args) {
  return call("barrier", [&] {
    check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_args_t, stream), "hal_comm_args_t");
    auto* comm = as<Communicator>(args->comm, Kind::kComm, "comm");
    issue(*comm, CollectiveCall{}, args->stream);
  });
}

inline hal_status_t* group_start(const hal_comm_args_t* args) {
  return call("group_start", [&] {
    if (args != nullptr) check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_args_t, struct_size), "hal_comm_args_t");
    ++collective_group().depth;
  });
}

inline hal_status_t* group_end(const hal_comm_args_t* args) {
  return call("group_end", [&] {
    if (args != nullptr) check_args(args, HAL_STRUCT_SIZE_TO(hal_comm_args_t, struct_size), "hal_comm_args_t");
    CollectiveGroup& g = collective_group();
    if (g.depth == 0) fail(HAL_STATUS_FAILED_PRECONDITION, "group_end without group_start");
    if (--g.depth > 0) return;
    CollectiveGroup taken = std::move(g);
    g = CollectiveGroup{};
    if (taken.calls.empty()) return;
    if (registry().get<Communicator>(taken.comm, Kind::kComm, "the group's comm") != taken.comm) return;
    taken.comm->launch(std::move(taken.calls), taken.stream);
  });
}

inline constexpr hal_collective_api_t kCollectiveApi = {
    sizeof(hal_collective_api_t), &comm_get_unique_id, &comm_init, &comm_split, &comm_destroy, &comm_abort,
    &comm_get_info, &comm_get_async_error, &collective, &barrier, &group_start, &group_end};

}  // namespace hal::sdk::detail

#endif  // HAL_SDK_DETAIL_COLLECTIVE_ENTRIES_HPP_
