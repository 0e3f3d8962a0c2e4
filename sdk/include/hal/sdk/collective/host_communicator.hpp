// HAL C++ SDK, collectives: the host communicator, which runs every
// collective on host memory over the shared-memory transport
// (shm_transport.hpp). Device memory is read in place when the buffer is
// host-addressable (Buffer::host_pointer) and staged through host copies
// otherwise, so any device gets collectives. Header-only.
//
// ALGORITHMS (per round of at most half_bytes per rank):
//   allreduce / reduce  up to kDirectBytes per round, every rank (reduce:
//                       the root) reduces all ranks' slots itself: one step.
//                       Above it, rank r reduces slice r of every slot into
//                       its own slot, a step, then every rank copies all
//                       slices (reduce-scatter + allgather): two steps, and
//                       each rank reduces 1/world of the data.
//   broadcast           the root's slot is copied out by the others.
//   allgather           every slot is copied out by every rank.
//   reduce_scatter      slot r holds the pieces for every rank; rank r
//                       reduces its piece of all slots.
//   alltoall            as reduce_scatter, without the reduction; unequal
//                       blocks first exchange every rank's counts (which
//                       also checks them against each other).
//   send / recv         a byte ring per (sender, receiver); a group's
//                       sends and receives progress together.
#ifndef HAL_SDK_COLLECTIVE_HOST_COMMUNICATOR_HPP_
#define HAL_SDK_COLLECTIVE_HOST_COMMUNICATOR_HPP_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hal/collective.h"
#include "hal/common/collective_extent.hpp"
#include "hal/common/dtype.hpp"
#include "hal/sdk/collective/communicator.hpp"
#include "hal/sdk/collective/reduce.hpp"
#include "hal/sdk/collective/shm_transport.hpp"
#ifdef HAL_SDK_WITH_GLOO
#include "hal/sdk/collective/gloo_transport.hpp"
#endif
#include "hal/sdk/device.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk::collective {

inline const char* kind_name(uint32_t kind) {
  static const char* const names[] = {"allreduce", "broadcast", "reduce", "allgather",
                                      "reduce_scatter", "alltoall", "send", "recv"};
  if (kind == CollectiveCall::kBarrier) return "barrier";
  return kind < HAL_COLLECTIVE_KIND_COUNT_ ? names[kind] : "unknown";
}

class HostCommunicator final : public Communicator {
 public:
  // Below this many bytes per round, allreduce and reduce take one step.
  static constexpr uint64_t kDirectBytes = 64u << 10;
  static constexpr std::chrono::milliseconds kDefaultTimeout{600000};

  static hal_comm_unique_id_t unique_id() { return make_unique_id(); }

  // comm_init: see hal/collective.h. Bootstrap keys: "hal/rank/<r>" (each
  // rank's record) and "hal/root" (rank 0's, with the segment name).
  static std::unique_ptr<HostCommunicator> init(const CommInit& a) {
    const auto timeout = a.timeout.count() > 0 ? a.timeout : kDefaultTimeout;
    const IdRecord id = parse_unique_id(a.id);
    const std::string what = "comm_init (rank " + std::to_string(a.rank) + " of " + std::to_string(a.world_size) + ")";
    {
      // An id names one communicator: a second init with it in this
      // process is a stale id (other processes see rank 0's refusal, or
      // the segment gone).
      static std::mutex mu;
      static std::set<std::string> used;
      std::lock_guard<std::mutex> lock(mu);
      if (!used.insert(hex(id.nonce, sizeof(id.nonce))).second)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": this unique id was already used by a communicator of this process "
             "(a stale id): make a new one with comm_get_unique_id for each communicator");
    }
    const std::string prefix = "/hal-" + hex(id.nonce, sizeof(id.nonce));
    if (a.world_size == 1) {
      auto g = ShmGroup::map_segment("", 1, 0, true, timeout, what);
      g->join(what, [](const std::vector<uint32_t>&) {});
      return std::unique_ptr<HostCommunicator>(
          new HostCommunicator(*a.device, std::move(g), prefix, 0, 1, timeout, nullptr));
    }
    Bootstrap bs(a.bootstrap);
    PeerRecord me{};
    std::memcpy(me.nonce, id.nonce, sizeof(me.nonce));
    me.world_size = a.world_size;
    me.rank = a.rank;
    me.host = host_key();
    me.pid = static_cast<int32_t>(getpid());
    bs.set("hal/rank/" + std::to_string(a.rank), &me, sizeof(me));
    std::unique_ptr<ShmGroup> g;
    if (!all_on_this_host(bs, a, id, me, timeout, what)) {
#ifdef HAL_SDK_WITH_GLOO
      auto gloo = std::make_unique<GlooTransport>(bs, a.rank, a.world_size, timeout, what);
      return std::unique_ptr<HostCommunicator>(
          new HostCommunicator(*a.device, nullptr, prefix, a.rank, a.world_size, timeout, std::move(gloo)));
#else
      fail(HAL_STATUS_UNIMPLEMENTED, what,
           ": some rank is on another host (or network namespace), and this build of the plugin has only the "
           "shared-memory transport (built without Gloo)");
#endif
    }
    if (a.rank == 0) {
      g = ShmGroup::map_segment(prefix, a.world_size, 0, true, timeout, what);
      bs.set("hal/root", &me, sizeof(me));
    } else {
      const std::vector<uint8_t> bytes = bs.get("hal/root", timeout);
      PeerRecord root{};
      if (bytes.size() != sizeof(root))
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": the bootstrap's 'hal/root' record has ", bytes.size(),
             " bytes, not ", sizeof(root), ": the store is shared with something else");
      std::memcpy(&root, bytes.data(), sizeof(root));
      if (std::memcmp(root.nonce, id.nonce, sizeof(id.nonce)) != 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": this rank's unique id (", hex(id.nonce, 4),
             "...) differs from rank 0's (", hex(root.nonce, 4),
             "...): it is another job's, or a stale one; every rank must pass the id rank 0 uses");
      if (root.world_size != a.world_size)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": world size ", a.world_size, " but rank 0 has ", root.world_size);
      g = ShmGroup::map_segment(prefix, a.world_size, a.rank, false, timeout, what);
    }
    g->join(what, [&](const std::vector<uint32_t>& missing) {
      // A rank that never joined may hold another id: say so instead.
      for (uint32_t r : missing) {
        std::vector<uint8_t> bytes;
        try {
          bytes = bs.get("hal/rank/" + std::to_string(r), std::chrono::milliseconds(0));
        } catch (const Error&) {
          continue;
        }
        PeerRecord peer{};
        if (bytes.size() != sizeof(peer)) continue;
        std::memcpy(&peer, bytes.data(), sizeof(peer));
        if (std::memcmp(peer.nonce, id.nonce, sizeof(id.nonce)) != 0)
          fail(HAL_STATUS_INVALID_ARGUMENT, what, ": rank ", r,
               " holds a different unique id (another job's, or a stale one)");
      }
    });
    return std::unique_ptr<HostCommunicator>(
        new HostCommunicator(*a.device, std::move(g), prefix, a.rank, a.world_size, timeout, nullptr));
  }

  ~HostCommunicator() override {
    std::unique_lock<std::mutex> lock(inflight_mu_);
    inflight_cv_.wait(lock, [this] { return inflight_ == 0; });
  }

  Device& device() const override { return device_; }
  uint32_t rank() const override { return rank_; }
  uint32_t world_size() const override { return world_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  const char* transport() const override { return group_ ? "shm" : "tcp"; }

  void launch(std::vector<CollectiveCall> calls, Stream* stream) override {
    throw_if_broken();
    if (stream == nullptr) return run(calls);
    // Device memory without a host address is staged by stream-ordered
    // copies around the host function, which then makes no device call (an
    // OpenCL callback must not block on the device).
    std::shared_ptr<std::vector<HostView>> staged;
    for (const CollectiveCall& c : calls)
      if ((c.send != nullptr && c.send->host_pointer() == nullptr) ||
          (c.recv != nullptr && c.recv->host_pointer() == nullptr))
        staged = std::make_shared<std::vector<HostView>>();
    if (staged) {
      for (const CollectiveCall& c : calls) staged->push_back(view(c, stream));
    }
    auto* task = new Task{this, std::move(calls), stream, staged};
    {
      std::lock_guard<std::mutex> lock(inflight_mu_);
      ++inflight_;
    }
    try {
      stream->enqueue_host_func(&Task::run, task);
    } catch (...) {
      delete task;
      finish_one();
      throw;
    }
    if (staged) {
      // TASK may be gone by now: write back from the shared views.
      for (const HostView& v : *staged) write_back(v, stream);
      // The staging lives until the stream has passed the copies.
      auto* keep = new std::shared_ptr<std::vector<HostView>>(staged);
      stream->enqueue_host_func([](void* p) { delete static_cast<std::shared_ptr<std::vector<HostView>>*>(p); }, keep);
    }
  }

  std::unique_ptr<Communicator> split(int32_t color, int32_t key) override {
    throw_if_broken();
    if (!group_) fail(HAL_STATUS_UNIMPLEMENTED, "comm_split: not implemented on the TCP transport");
    std::lock_guard<std::mutex> lock(run_mu_);
    const std::string what = "comm_split #" + std::to_string(splits_);
    const uint32_t world = world_, me = rank_;
    const uint32_t h = next_half();
    post(h, OpDescriptor{sequence_++, 0, kSplitKind, 0, 0, 0}, what);
    const int32_t mine[2] = {color, key};
    std::memcpy(group_->slot(me, h), mine, sizeof(mine));
    checked_step(h, what);
    struct Member {
      int32_t key;
      uint32_t rank;
    };
    std::vector<Member> members;
    for (uint32_t r = 0; r < world; ++r) {
      int32_t theirs[2];
      std::memcpy(theirs, group_->slot(r, h), sizeof(theirs));
      if (color >= 0 && theirs[0] == color) members.push_back({theirs[1], r});
    }
    std::stable_sort(members.begin(), members.end(), [](const Member& x, const Member& y) {
      return x.key != y.key ? x.key < y.key : x.rank < y.rank;
    });
    const std::string name = prefix_ + "-s" + std::to_string(splits_++) + "c" + std::to_string(color);
    uint32_t new_rank = 0;
    for (uint32_t i = 0; i < members.size(); ++i)
      if (members[i].rank == me) new_rank = i;
    const auto size = static_cast<uint32_t>(members.size());
    std::unique_ptr<ShmGroup> child;
    std::optional<Error> failure;
    // Creators first, a parent step, then the others open: every rank takes
    // both steps, whatever happens to it, so the parent stays in step.
    try {
      if (color >= 0 && new_rank == 0)
        child = ShmGroup::map_segment(size == 1 ? "" : name, size, 0, true, group_->timeout(), what);
    } catch (const Error& e) {
      failure = e;
    }
    group_->step(what);
    try {
      if (color >= 0 && new_rank != 0 && !failure)
        child = ShmGroup::map_segment(name, size, new_rank, false, group_->timeout(), what);
      if (child) child->join(what, [](const std::vector<uint32_t>&) {});
    } catch (const Error& e) {
      if (!failure) failure = e;
    }
    if (failure) throw *failure;
    if (color < 0) return nullptr;
    const uint32_t child_world = size;
    return std::unique_ptr<Communicator>(new HostCommunicator(device_, std::move(child), name, new_rank, child_world,
                                                              group_->timeout(), nullptr));
  }

  void abort(const std::string& why) override {
    set_error(Error(HAL_STATUS_ABORTED, "rank " + std::to_string(rank_) + " aborted the communicator: " + why));
    if (group_) group_->abort("comm_abort by rank " + std::to_string(rank_) + ": " + why);
  }

  std::optional<Error> async_error() const override {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_) return error_;
    if (group_ && group_->aborted()) {
      try {
        group_->throw_if_aborted("communicator");
      } catch (const Error& e) {
        return e;
      }
    }
    return std::nullopt;
  }

 private:
  static constexpr uint32_t kSplitKind = 0x200;

  struct PeerRecord {
    uint8_t nonce[16];
    uint32_t world_size, rank;
    uint64_t host;
    int32_t pid;
    uint32_t reserved;
  };

  // Host views of a call's buffers (staged when not host-addressable).
  struct HostView {
    const unsigned char* send = nullptr;
    unsigned char* recv = nullptr;
    std::vector<unsigned char> send_stage, recv_stage;
    // Where a staged receive buffer goes back to (write_back).
    Buffer* recv_buffer = nullptr;
    uint64_t recv_offset = 0;
    bool skip_write_back = false;  // a non-root of reduce
  };

  struct Task {
    HostCommunicator* comm;
    std::vector<CollectiveCall> calls;
    Stream* stream;
    std::shared_ptr<std::vector<HostView>> staged;  // prepared views, or null
    static void run(void* p) {
      std::unique_ptr<Task> t(static_cast<Task*>(p));
      try {
        t->comm->throw_if_broken();
        t->comm->run(t->calls, t->staged.get());
      } catch (const Error& e) {
        t->stream->report_error(e);
      } catch (const std::exception& e) {
        t->stream->report_error(Error(HAL_STATUS_INTERNAL, e.what()));
      }
      t->comm->finish_one();
    }
  };

#ifdef HAL_SDK_WITH_GLOO
  using Tcp = GlooTransport;
#else
  struct Tcp {};
#endif
  HostCommunicator(Device& device, std::unique_ptr<ShmGroup> group, std::string prefix, uint32_t rank, uint32_t world,
                   std::chrono::milliseconds timeout, std::unique_ptr<Tcp> tcp)
      : device_(device), group_(std::move(group)), prefix_(std::move(prefix)), rank_(rank), world_(world),
        timeout_(timeout), tcp_(std::move(tcp)) {}

  // Whether every rank runs on this host: reads every rank's record (each
  // rank reads the same records, so all choose the same transport), and
  // refuses a rank holding another unique id.
  static bool all_on_this_host(const Bootstrap& bs, const CommInit& a, const IdRecord& id, const PeerRecord& me,
                               std::chrono::milliseconds timeout, const std::string& what) {
    bool local = true;
    for (uint32_t r = 0; r < a.world_size; ++r) {
      if (r == a.rank) continue;
      std::vector<uint8_t> bytes;
      try {
        bytes = bs.get("hal/rank/" + std::to_string(r), timeout);
      } catch (const Error& e) {
        fail(e.code(), what, ": rank ", r, " did not join within ", timeout.count(), " ms (", e.what(), ")");
      }
      PeerRecord peer{};
      if (bytes.size() != sizeof(peer))
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": rank ", r, "'s bootstrap record has ", bytes.size(), " bytes");
      std::memcpy(&peer, bytes.data(), sizeof(peer));
      if (std::memcmp(peer.nonce, id.nonce, sizeof(id.nonce)) != 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": rank ", r, "'s unique id (", hex(peer.nonce, 4),
             "...) differs from this rank's (", hex(id.nonce, 4),
             "...): one of them is another job's, or a stale one; every rank must pass the id rank 0 uses");
      if (peer.world_size != a.world_size)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": world size ", a.world_size, " but rank ", r, " has ",
             peer.world_size);
      if (peer.host != me.host) local = false;
    }
    return local;
  }

  void finish_one() {
    std::lock_guard<std::mutex> lock(inflight_mu_);
    if (--inflight_ == 0) inflight_cv_.notify_all();
  }
  void set_error(const Error& e) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_) error_ = e;
  }
  void throw_if_broken() const {
    if (auto e = async_error()) throw *e;
  }

  // ---- running calls ----

  static common::CollectiveExtent extent(const CollectiveCall& c, uint32_t world) {
    const bool unequal = !c.send_counts.empty();
    return common::collective_extent(c.kind, c.count, world, unequal ? c.send_counts.data() : nullptr,
                                     unequal ? c.send_displs.data() : nullptr, unequal ? c.recv_counts.data() : nullptr,
                                     unequal ? c.recv_displs.data() : nullptr);
  }

  // Host views of C's buffers; device memory is copied to staging on
  // STREAM (nullptr: now).
  HostView view(const CollectiveCall& c, Stream* stream = nullptr) {
    HostView v;
    v.recv_buffer = c.recv;
    v.recv_offset = c.recv_offset;
    v.skip_write_back = c.kind == CollectiveCall::kReduce && c.root != rank_;
    const uint64_t es = common::dtype_size(c.dtype), world = world_;
    if (c.send != nullptr) {
      const uint64_t bytes = extent(c, static_cast<uint32_t>(world)).send * es;
      if (auto* p = static_cast<unsigned char*>(c.send->host_pointer())) {
        v.send = p + c.send_offset;
      } else {
        v.send_stage.resize(bytes);
        if (bytes) device_.copy_device_to_host(v.send_stage.data(), *c.send, c.send_offset, bytes, stream);
        v.send = v.send_stage.data();
      }
    }
    if (c.recv != nullptr) {
      const uint64_t bytes = extent(c, static_cast<uint32_t>(world)).recv * es;
      if (auto* p = static_cast<unsigned char*>(c.recv->host_pointer())) {
        v.recv = p + c.recv_offset;
      } else {
        // Staged receive buffers start as the device's bytes: parts the
        // operation does not write (gaps between alltoall blocks) keep them.
        v.recv_stage.resize(bytes);
        if (bytes) device_.copy_device_to_host(v.recv_stage.data(), *c.recv, c.recv_offset, bytes, stream);
        v.recv = v.recv_stage.data();
        if (c.send == c.recv && c.send_offset == c.recv_offset) v.send = v.recv;
      }
    }
    return v;
  }
  void write_back(const HostView& v, Stream* stream) {
    if (v.recv_buffer == nullptr || v.recv_stage.empty() || v.skip_write_back) return;
    device_.copy_host_to_device(*v.recv_buffer, v.recv_offset, v.recv_stage.data(), v.recv_stage.size(), stream);
  }

  // Runs CALLS now on this thread, with PREPARED views (staged on a stream
  // by launch) or views made and written back here.
  void run(std::vector<CollectiveCall>& calls, std::vector<HostView>* prepared = nullptr) {
    std::lock_guard<std::mutex> lock(run_mu_);
    try {
      std::vector<HostView> own;
      if (prepared == nullptr) {
        own.reserve(calls.size());
        for (CollectiveCall& c : calls) own.push_back(view(c));
      }
      std::vector<HostView>& views = prepared != nullptr ? *prepared : own;
      std::vector<size_t> p2p;
      for (size_t i = 0; i < calls.size(); ++i) {
        if (calls[i].kind == CollectiveCall::kSend || calls[i].kind == CollectiveCall::kRecv) {
          p2p.push_back(i);
          continue;
        }
        if (group_) {
          run_collective(calls[i], views[i]);
          continue;
        }
#ifdef HAL_SDK_WITH_GLOO
        const std::string what = std::string(kind_name(calls[i].kind)) + " #" + std::to_string(sequence_++);
        tcp_->run(calls[i], views[i].send, views[i].recv, what);
#endif
      }
      if (!p2p.empty() && group_) run_p2p(calls, views, p2p);
#ifdef HAL_SDK_WITH_GLOO
      if (!p2p.empty() && !group_) {
        std::vector<const CollectiveCall*> cs;
        std::vector<const unsigned char*> sends;
        std::vector<unsigned char*> recvs;
        for (size_t i : p2p) {
          cs.push_back(&calls[i]);
          sends.push_back(views[i].send);
          recvs.push_back(views[i].recv);
        }
        tcp_->run_p2p(cs, sends, recvs, p2p.size() > 1 ? "group of send/recv" : kind_name(calls[p2p[0]].kind));
      }
#endif
      if (prepared == nullptr)
        for (const HostView& v : views) write_back(v, nullptr);
    } catch (const Error& e) {
      // A mismatch found at a step leaves every rank in step: the
      // communicator stays usable. Anything else broke it.
      if (e.code() != HAL_STATUS_INVALID_ARGUMENT) set_error(e);
      throw;
    }
  }

  uint32_t next_half() { return static_cast<uint32_t>(round_++ & 1); }

  void post(uint32_t half, const OpDescriptor& d, const std::string& what) {
    group_->throw_if_aborted(what);
    group_->descriptor(rank_, half) = d;
  }
  // Steps, then compares every rank's descriptor with this rank's: a
  // mismatch is seen by all ranks alike, so all throw.
  void checked_step(uint32_t half, const std::string& what) {
    group_->step(what);
    const OpDescriptor& mine = group_->descriptor(rank_, half);
    for (uint32_t r = 0; r < world_; ++r) {
      const OpDescriptor& theirs = group_->descriptor(r, half);
      if (theirs == mine) continue;
      fail(HAL_STATUS_INVALID_ARGUMENT, what, ": ranks disagree: rank ", rank_, " called ", describe(mine),
           " but rank ", r, " called ", describe(theirs));
    }
  }
  static std::string describe(const OpDescriptor& d) {
    std::string s = "#" + std::to_string(d.sequence) + " ";
    if (d.kind == kSplitKind) return s + "comm_split";
    s += kind_name(d.kind);
    if (d.kind == CollectiveCall::kBarrier) return s;
    s += "(count " + std::to_string(d.count) + ", " + common::dtype_name(d.dtype);
    if (d.kind == CollectiveCall::kAllreduce || d.kind == CollectiveCall::kReduce ||
        d.kind == CollectiveCall::kReduceScatter)
      s += std::string(", ") + reduce_op_name(d.op);
    if (d.kind == CollectiveCall::kBroadcast || d.kind == CollectiveCall::kReduce)
      s += ", root " + std::to_string(d.root);
    return s + ")";
  }

  void run_collective(const CollectiveCall& c, HostView& v) {
    const uint64_t seq = sequence_++;
    const std::string what = std::string(kind_name(c.kind)) + " #" + std::to_string(seq);
    OpDescriptor d{seq, c.count, static_cast<uint32_t>(c.kind), c.dtype, static_cast<uint32_t>(c.op), c.root};
    const bool unequal = c.kind == CollectiveCall::kAlltoall && !c.send_counts.empty();
    if (unequal) d.count = UINT64_MAX;  // compared through the exchanged counts instead
    if (c.kind != CollectiveCall::kAllreduce && c.kind != CollectiveCall::kReduce &&
        c.kind != CollectiveCall::kReduceScatter)
      d.op = 0;
    if (c.kind != CollectiveCall::kBroadcast && c.kind != CollectiveCall::kReduce) d.root = 0;
    if (c.kind == CollectiveCall::kBarrier) d.count = d.dtype = 0;
    switch (c.kind) {
      case CollectiveCall::kBarrier: {
        const uint32_t h = next_half();
        post(h, d, what);
        checked_step(h, what);
        return;
      }
      case CollectiveCall::kAllreduce:
      case CollectiveCall::kReduce: return reduce_all(c, v, d, what);
      case CollectiveCall::kBroadcast: return broadcast(c, v, d, what);
      case CollectiveCall::kAllgather: return allgather(c, v, d, what);
      case CollectiveCall::kReduceScatter: return reduce_scatter(c, v, d, what);
      case CollectiveCall::kAlltoall: return alltoall(c, v, d, what, unequal);
      default: fail(HAL_STATUS_INTERNAL, what, ": not a collective");
    }
  }

  // Rounds of at most CHUNK elements; at least one round (count 0 still
  // meets the peers, so mismatches are seen).
  template <class Body>
  void rounds(uint64_t count, uint64_t chunk, const OpDescriptor& d, const std::string& what, Body&& body) {
    uint64_t off = 0;
    bool first = true;
    do {
      const uint64_t n = std::min(chunk, count - off);
      const uint32_t h = next_half();
      post(h, d, what);
      body(off, n, h, first);
      first = false;
      off += n;
    } while (off < count);
  }

  void reduce_all(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), world = world_, me = rank_;
    const bool all = c.kind == CollectiveCall::kAllreduce, receives = all || c.root == me;
    std::vector<const void*> in(world);
    rounds(c.count, group_->half_bytes() / es, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      std::memcpy(group_->slot(static_cast<uint32_t>(me), h), v.send + off * es, n * es);
      checked_step(h, what);
      if (n * es <= kDirectBytes || world == 1) {
        if (!receives) return;
        for (uint32_t r = 0; r < world; ++r) in[r] = group_->slot(r, h);
        reduce(c.dtype, c.op, v.recv + off * es, in.data(), world, n);
        return;
      }
      // Slice r of every slot, reduced into slot r, then gathered.
      const auto slice = [&](uint64_t r) {
        const uint64_t per = (n + world - 1) / world, lo = std::min(n, r * per);
        return std::pair<uint64_t, uint64_t>{lo, std::min(n, lo + per)};
      };
      const auto [lo, hi] = slice(me);
      for (uint32_t r = 0; r < world; ++r) in[r] = group_->slot(r, h) + lo * es;
      if (hi > lo) reduce(c.dtype, c.op, group_->slot(static_cast<uint32_t>(me), h) + lo * es, in.data(), world, hi - lo);
      group_->step(what);
      if (!receives) return;
      for (uint32_t r = 0; r < world; ++r) {
        const auto [rlo, rhi] = slice(r);
        std::memcpy(v.recv + (off + rlo) * es, group_->slot(r, h) + rlo * es, (rhi - rlo) * es);
      }
    });
  }

  void broadcast(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), me = rank_;
    rounds(c.count, group_->half_bytes() / es, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      if (me == c.root) std::memcpy(group_->slot(c.root, h), v.send + off * es, n * es);
      checked_step(h, what);
      if (v.recv != nullptr && v.recv != v.send) std::memcpy(v.recv + off * es, group_->slot(c.root, h), n * es);
    });
  }

  void allgather(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), world = world_, me = rank_;
    rounds(c.count, group_->half_bytes() / es, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      std::memcpy(group_->slot(static_cast<uint32_t>(me), h), v.send + off * es, n * es);
      checked_step(h, what);
      for (uint32_t r = 0; r < world; ++r)
        std::memcpy(v.recv + (r * c.count + off) * es, group_->slot(r, h), n * es);
    });
  }

  void reduce_scatter(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), world = world_, me = rank_;
    const uint64_t piece = std::max<uint64_t>(1, group_->half_bytes() / es / world);
    std::vector<const void*> in(world);
    rounds(c.count, piece, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      unsigned char* mine = group_->slot(static_cast<uint32_t>(me), h);
      for (uint64_t q = 0; q < world; ++q) std::memcpy(mine + q * piece * es, v.send + (q * c.count + off) * es, n * es);
      checked_step(h, what);
      for (uint32_t r = 0; r < world; ++r) in[r] = group_->slot(r, h) + me * piece * es;
      reduce(c.dtype, c.op, v.recv + off * es, in.data(), world, n);
    });
  }

  void alltoall(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what, bool unequal) {
    const uint64_t es = common::dtype_size(c.dtype), world = world_, me = rank_;
    const uint64_t piece = std::max<uint64_t>(1, group_->half_bytes() / es / world);
    // Per pair (from p to q): element count, and the offsets at both ends.
    std::vector<uint64_t> counts(world * world, c.count);  // counts[p * world + q]
    if (unequal) {
      if (2 * world * sizeof(uint64_t) > group_->half_bytes())
        fail(HAL_STATUS_UNIMPLEMENTED, what, ": unequal blocks for ", world, " ranks exceed the exchange slot");
      const uint32_t h = next_half();
      post(h, d, what);
      auto* mine = reinterpret_cast<uint64_t*>(group_->slot(static_cast<uint32_t>(me), h));
      std::memcpy(mine, c.send_counts.data(), world * sizeof(uint64_t));
      std::memcpy(mine + world, c.recv_counts.data(), world * sizeof(uint64_t));
      checked_step(h, what);
      for (uint64_t p = 0; p < world; ++p) {
        const auto* theirs = reinterpret_cast<const uint64_t*>(group_->slot(static_cast<uint32_t>(p), h));
        std::memcpy(&counts[p * world], theirs, world * sizeof(uint64_t));
      }
      // Every rank checks every pair, so all agree on a mismatch.
      for (uint64_t p = 0; p < world; ++p)
        for (uint64_t q = 0; q < world; ++q) {
          const auto* q_counts = reinterpret_cast<const uint64_t*>(group_->slot(static_cast<uint32_t>(q), h));
          const uint64_t expected = q_counts[world + p];
          if (counts[p * world + q] != expected)
            fail(HAL_STATUS_INVALID_ARGUMENT, what, ": rank ", p, " sends ", counts[p * world + q], " elements to rank ",
                 q, " but rank ", q, " expects ", expected, " (recv_counts[", p, "])");
        }
    }
    uint64_t longest = 0;
    for (uint64_t x : counts) longest = std::max(longest, x);
    const auto send_at = [&](uint64_t q) { return unequal ? c.send_displs[q] : q * c.count; };
    const auto recv_at = [&](uint64_t p) { return unequal ? c.recv_displs[p] : p * c.count; };
    rounds(longest, piece, d, what, [&](uint64_t off, uint64_t, uint32_t h, bool first) {
      unsigned char* mine = group_->slot(static_cast<uint32_t>(me), h);
      for (uint64_t q = 0; q < world; ++q) {
        const uint64_t total = counts[me * world + q];
        if (off < total) std::memcpy(mine + q * piece * es, v.send + (send_at(q) + off) * es, std::min(piece, total - off) * es);
      }
      if (first && !unequal) checked_step(h, what);
      else group_->step(what);
      for (uint64_t p = 0; p < world; ++p) {
        const uint64_t total = counts[p * world + me];
        if (off < total)
          std::memcpy(v.recv + (recv_at(p) + off) * es, group_->slot(static_cast<uint32_t>(p), h) + me * piece * es,
                      std::min(piece, total - off) * es);
      }
    });
  }

  // Sends and receives progress together until all are done. A message
  // starts with a header (dtype, count) the receiver checks.
  void run_p2p(std::vector<CollectiveCall>& calls, std::vector<HostView>& views, const std::vector<size_t>& which) {
    struct Header {
      uint32_t dtype, reserved;
      uint64_t count;
    };
    struct Progress {
      size_t call;
      Header header;
      uint64_t done = 0;  // bytes of header + payload moved
      uint64_t total = 0;
    };
    std::vector<Progress> ps;
    for (size_t i : which) {
      const CollectiveCall& c = calls[i];
      Progress p{i, Header{c.dtype, 0, c.count}};
      p.total = sizeof(Header) + c.count * common::dtype_size(c.dtype);
      ps.push_back(p);
    }
    const std::string what = std::string(which.size() > 1 ? "group of " + std::to_string(which.size()) + " send/recv" : kind_name(calls[which[0]].kind));
    const auto deadline = Clock::now() + group_->timeout();
    size_t remaining = ps.size();
    for (;;) {
      bool moved = false;
      for (Progress& p : ps) {
        if (p.done == p.total) continue;
        const CollectiveCall& c = calls[p.call];
        HostView& v = views[p.call];
        // Only the first pending operation per (peer, direction) moves, so
        // messages on one ring stay in issue order.
        bool blocked = false;
        for (Progress& q : ps) {
          if (&q == &p) break;
          if (q.done != q.total && calls[q.call].kind == c.kind && calls[q.call].root == c.root) blocked = true;
        }
        if (blocked) continue;
        while (p.done < p.total) {
          size_t n;
          if (c.kind == CollectiveCall::kSend) {
            const unsigned char* src = p.done < sizeof(Header) ? reinterpret_cast<const unsigned char*>(&p.header) + p.done
                                                               : v.send + (p.done - sizeof(Header));
            const uint64_t len = p.done < sizeof(Header) ? sizeof(Header) - p.done : p.total - p.done;
            n = group_->try_send(c.root, src, len);
          } else {
            if (p.done < sizeof(Header)) {
              n = group_->try_recv(c.root, reinterpret_cast<unsigned char*>(&p.header) + p.done, sizeof(Header) - p.done);
              if (p.done + n == sizeof(Header) && (p.header.dtype != c.dtype || p.header.count != c.count)) {
                const std::string why = "recv from rank " + std::to_string(c.root) + ": expected " +
                                        std::to_string(c.count) + " " + common::dtype_name(c.dtype) + " but rank " +
                                        std::to_string(c.root) + " sent " + std::to_string(p.header.count) + " " +
                                        common::dtype_name(p.header.dtype);
                // The ring now holds bytes nobody will take: the pair is broken.
                group_->abort(why);
                set_error(Error(HAL_STATUS_INVALID_ARGUMENT, why));
                fail(HAL_STATUS_INVALID_ARGUMENT, why);
              }
            } else {
              n = group_->try_recv(c.root, v.recv + (p.done - sizeof(Header)), p.total - p.done);
            }
          }
          if (n == 0) break;
          p.done += n;
          moved = true;
        }
        if (p.done == p.total) --remaining;
      }
      if (remaining == 0) return;
      if (moved) continue;
      group_->throw_if_aborted(what);
      if (Clock::now() > deadline) {
        const std::string why = what + ": rank " + std::to_string(rank_) + " timed out after " +
                                std::to_string(group_->timeout().count()) + " ms waiting for its peer(s)";
        group_->abort(why);
        fail(HAL_STATUS_TIMEOUT, why);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  Device& device_;
  std::unique_ptr<ShmGroup> group_;  // null on the TCP transport
  std::string prefix_;  // shm name prefix for splits
  uint32_t rank_, world_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Tcp> tcp_;  // the transport between hosts, when some rank is remote
  std::mutex run_mu_;   // one operation at a time (streams may differ)
  uint64_t round_ = 0, sequence_ = 0, splits_ = 0;
  mutable std::mutex error_mu_;
  std::optional<Error> error_;
  std::mutex inflight_mu_;
  std::condition_variable inflight_cv_;
  size_t inflight_ = 0;
};

}  // namespace hal::sdk::collective

#endif  // HAL_SDK_COLLECTIVE_HOST_COMMUNICATOR_HPP_
