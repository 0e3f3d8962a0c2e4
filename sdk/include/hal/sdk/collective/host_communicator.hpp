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
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
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
#include "hal/sdk/detail/call.hpp"
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
  // Above kDirectBytes, an allreduce reads its peers' buffers in place
  // when they are reachable (allreduce_in_place), this many bytes a copy.
  static constexpr uint64_t kCmaChunkBytes = 128u << 10;
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
          new HostCommunicator(*a.device, std::move(g), prefix, 0, 1, timeout, Topology::single(1)));
    }
    Bootstrap bs(a.bootstrap);
    PeerRecord me{};
    std::memcpy(me.nonce, id.nonce, sizeof(me.nonce));
    me.world_size = a.world_size;
    me.rank = a.rank;
    me.host = host_key();
    me.pid = static_cast<int32_t>(getpid());
    me.flags = transport_choice(what);
    me.shm = shm_key();
    bs.set("hal/rank/" + std::to_string(a.rank), &me, sizeof(me));
    try {
      return connect(a, bs, id, me, prefix, timeout, what);
    } catch (const Error& e) {
      // Peers waiting for this rank name its reason, not just a timeout.
      const std::string why = e.what();
      try {
        bs.set("hal/error/" + std::to_string(a.rank), why.data(), why.size());
      } catch (const Error&) {  // the store is gone too: the original error says enough
      }
      throw;
    }
  }

  ~HostCommunicator() override {
    {
      std::unique_lock<std::mutex> lock(inflight_mu_);
      inflight_cv_.wait(lock, [this] { return inflight_ == 0; });
    }
    // Deferred sends still reach receivers that are alive and receiving
    // (the progress thread drops a peer's once it exited or on abort).
    {
      std::unique_lock<std::mutex> lock(backlog_mu_);
      backlog_cv_.wait_for(lock, timeout_, [this] { return backlog_.empty(); });
      progress_stop_ = true;
    }
    backlog_cv_.notify_all();
    if (progress_.joinable()) progress_.join();
  }

  Device& device() const override { return device_; }
  uint32_t rank() const override { return rank_; }
  uint32_t world_size() const override { return world_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  // "shm" (one host), "tcp" (one rank per host), "shm+tcp" (hierarchical).
  const char* transport() const override {
    if (topo_.hosts.size() == 1) return "shm";
    return topo_.hosts.size() == world_ ? "tcp" : "shm+tcp";
  }
  // "self" here, "shm" to a rank on this host, "tcp" to one on another
  // (send/recv and alltoall's per-peer choice; the other operations go
  // through the host's leader).
  const char* peer_transports() const override { return peers_.c_str(); }

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
    if (hierarchical()) return split_hierarchical(color, key);
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
                                                              group_->timeout(), Topology::single(child_world)));
  }

  void abort(const std::string& why) override {
    set_error(Error(HAL_STATUS_ABORTED, "rank " + std::to_string(rank_) + " aborted the communicator: " + why));
    group_->abort("comm_abort by rank " + std::to_string(rank_) + ": " + why);
    close_tcp();
  }

  std::optional<Error> async_error() const override {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_) return error_;
    if (group_->aborted()) {
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
    uint32_t flags;   // kTransportAuto or kTransportTcp (HAL_COMM_TRANSPORT)
    uint64_t shm;     // shm_key(): who can open this rank's segments
  };
  static constexpr uint32_t kTransportAuto = 0, kTransportTcp = 1;

  // Which ranks share a host: hosts in the order of their first ranks (host
  // 0 holds rank 0), each host's ranks ascending; its first is its leader.
  struct Topology {
    std::vector<uint32_t> host_of;             // rank -> host
    std::vector<std::vector<uint32_t>> hosts;  // host -> ranks
    static Topology single(uint32_t world) {
      Topology t;
      t.host_of.assign(world, 0);
      t.hosts.assign(1, {});
      for (uint32_t r = 0; r < world; ++r) t.hosts[0].push_back(r);
      return t;
    }
    // EACH_ALONE: every rank its own host (HAL_COMM_TRANSPORT=tcp).
    static Topology of(const std::vector<PeerRecord>& peers, bool each_alone) {
      Topology t;
      std::vector<uint64_t> keys;
      for (uint32_t r = 0; r < peers.size(); ++r) {
        const uint64_t key = each_alone ? r : peers[r].host;
        auto it = std::find(keys.begin(), keys.end(), key);
        if (it == keys.end()) {
          keys.push_back(key);
          t.hosts.emplace_back();
          it = keys.end() - 1;
        }
        const auto h = static_cast<uint32_t>(it - keys.begin());
        t.host_of.push_back(h);
        t.hosts[h].push_back(r);
      }
      return t;
    }
    // Rank R's index among its host's ranks.
    uint32_t local_index(uint32_t r) const {
      const std::vector<uint32_t>& l = hosts[host_of[r]];
      return static_cast<uint32_t>(std::find(l.begin(), l.end(), r) - l.begin());
    }
    // More than one host, each with as many ranks as the others.
    bool uniform() const {
      return hosts.size() > 1 && std::all_of(hosts.begin(), hosts.end(),
                                             [&](const std::vector<uint32_t>& h) { return h.size() == hosts[0].size(); });
    }
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
    // The files behind SEND and RECV when their buffers are shareable
    // (Buffer::shared_memory, offsets at SEND and RECV); fd -1 otherwise.
    SharedMemory send_file, recv_file;
  };
  static SharedMemory file_of(Buffer& b, uint64_t offset) {
    SharedMemory m;
    if (!b.shared_memory(&m)) return SharedMemory{};
    m.offset += offset;
    return m;
  }

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
                   std::chrono::milliseconds timeout, Topology topo)
      : device_(device), group_(std::move(group)), prefix_(std::move(prefix)), rank_(rank), world_(world),
        timeout_(timeout), topo_(std::move(topo)), host_(topo_.host_of[rank]) {
    for (uint32_t r = 0; r < world_; ++r)
      peers_ += std::string(r ? "," : "") + (r == rank_ ? "self" : topo_.host_of[r] == host_ ? "shm" : "tcp");
  }

  // The transports of a communicator whose ranks' records are in BS: one
  // host's ranks share a segment; with more than one host, every rank also
  // joins the TCP mesh and each host's first rank (its leader) the leaders'.
  static std::unique_ptr<HostCommunicator> connect(const CommInit& a, const Bootstrap& bs, const IdRecord& id,
                                                   const PeerRecord& me, const std::string& prefix,
                                                   std::chrono::milliseconds timeout, const std::string& what) {
    const std::vector<PeerRecord> peers = read_records(bs, a, id, me, timeout, what);
    Topology topo = Topology::of(peers, me.flags == kTransportTcp);
    const uint32_t host = topo.host_of[a.rank];
    const std::vector<uint32_t>& local = topo.hosts[host];
    const uint32_t local_rank = topo.local_index(a.rank);
    const auto local_world = static_cast<uint32_t>(local.size());
    if (topo.hosts.size() > 1) {
#ifndef HAL_SDK_WITH_GLOO
      fail(HAL_STATUS_UNIMPLEMENTED, what,
           ": some rank is on another host (or network namespace), and this build of the plugin has only the "
           "shared-memory transport (built without Gloo)");
#endif
    }
    // This host's segment: its first rank creates it and says so in the
    // store; the others open it once it exists.
    const std::string segment = topo.hosts.size() == 1 ? prefix : prefix + "-h" + std::to_string(host);
    const std::string created = "hal/host/" + std::to_string(host);
    std::unique_ptr<ShmGroup> g;
    if (local_world == 1) {
      g = ShmGroup::map_segment("", 1, 0, true, timeout, what);
    } else if (local_rank == 0) {
      g = ShmGroup::map_segment(segment, local_world, 0, true, timeout, what);
      bs.set(created, &me, sizeof(me));
    } else {
      const std::vector<uint8_t> bytes = bs.get(created, timeout);
      PeerRecord creator{};
      if (bytes.size() != sizeof(creator))
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": the bootstrap's '", created, "' record has ", bytes.size(),
             " bytes, not ", sizeof(creator), ": the store is shared with something else");
      std::memcpy(&creator, bytes.data(), sizeof(creator));
      if (std::memcmp(creator.nonce, id.nonce, sizeof(id.nonce)) != 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": this rank's unique id (", hex(id.nonce, 4),
             "...) differs from rank ", creator.rank, "'s (", hex(creator.nonce, 4),
             "...): it is another job's, or a stale one; every rank must pass the id rank 0 uses");
      try {
        g = ShmGroup::map_segment(segment, local_world, local_rank, false, timeout, what);
      } catch (const Error&) {
        if (creator.shm == me.shm) throw;  // the segment is gone: a stale id
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": the ranks disagree on the host topology: rank ", a.rank,
             " and rank ", creator.rank, " both say they are on host ", hex_host(me.host),
             " (boot id, namespaces and /dev/shm, or $HAL_COMM_HOST_ID) but they do not share /dev/shm: rank ",
             a.rank, " cannot open rank ", creator.rank, "'s shared memory '", segment, "'");
      }
    }
    g->join(
        what,
        [&](const std::vector<uint32_t>& missing) {
          // A rank that never joined may hold another id, or have failed: say so.
          for (uint32_t lr : missing) {
            const uint32_t r = local[lr];
            if (auto why = peer_error(bs, r)) fail(HAL_STATUS_INVALID_ARGUMENT, what, ": rank ", r, " failed: ", *why);
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
        },
        [&](const std::vector<uint32_t>& missing) {
          for (uint32_t lr : missing)
            if (auto why = peer_error(bs, local[lr])) {
              const std::string msg = what + ": rank " + std::to_string(local[lr]) + " failed: " + *why;
              g->abort(msg);
              fail(HAL_STATUS_INVALID_ARGUMENT, msg);
            }
        });
    std::unique_ptr<HostCommunicator> comm(
        new HostCommunicator(*a.device, std::move(g), prefix, a.rank, a.world_size, timeout, std::move(topo)));
#ifdef HAL_SDK_WITH_GLOO
    if (comm->topo_.hosts.size() > 1) {
      const auto hosts = static_cast<uint32_t>(comm->topo_.hosts.size());
      try {
        comm->mesh_ = GlooTransport::over_bootstrap(bs, "hal/gloo", a.rank, a.world_size, timeout, what);
        if (local_rank == 0) {
          if (hosts == a.world_size) comm->leaders_ = comm->mesh_.get();
          else {
            comm->leaders_owned_ = GlooTransport::over_bootstrap(bs, "hal/gloo-leaders", host, hosts, timeout, what);
            comm->leaders_ = comm->leaders_owned_.get();
          }
        }
        // Every host with the same number of ranks: rank i of each host also
        // joins column i (the ranks i of all hosts; column 0 is the leaders),
        // over which large allreduces run (allreduce_columns).
        if (comm->topo_.uniform() && local_world > 1) {
          if (local_rank == 0) {
            comm->column_ = comm->leaders_;
          } else {
            comm->column_owned_ = GlooTransport::over_bootstrap(bs, "hal/gloo-column" + std::to_string(local_rank),
                                                                host, hosts, timeout, what);
            comm->column_ = comm->column_owned_.get();
          }
        }
        // Gloo's connect returns on one side of a pair before the other side
        // has finished; a rank that then returned and destroyed its
        // communicator would fail a peer still connecting. No rank leaves
        // comm_init before every rank has connected every mesh.
        comm->mesh_->run(tcp_call(CollectiveCall::kBarrier, 0, 0, 0, 0), nullptr, nullptr, what);
      } catch (const Error& e) {
        for (uint32_t r = 0; r < a.world_size; ++r)
          if (r != a.rank)
            if (auto why = peer_error(bs, r)) fail(HAL_STATUS_INVALID_ARGUMENT, what, ": rank ", r, " failed: ", *why);
        throw;
      }
    }
#endif
    return comm;
  }

  // A peer's reason for failing comm_init, if it left one in the store.
  static std::optional<std::string> peer_error(const Bootstrap& bs, uint32_t r) {
    try {
      std::vector<uint8_t> bytes = bs.get("hal/error/" + std::to_string(r), std::chrono::milliseconds(0));
      return std::string(bytes.begin(), bytes.end());
    } catch (const Error&) {
      return std::nullopt;
    }
  }

  static std::string hex_host(uint64_t host) {
    uint8_t b[8];
    std::memcpy(b, &host, sizeof(b));
    return hex(b, sizeof(b));
  }

  // HAL_COMM_TRANSPORT: unset or "auto" (shared memory within a host, TCP
  // between hosts), or "tcp" (every rank on its own: the flat TCP mesh).
  static uint32_t transport_choice(const std::string& what) {
    const char* v = std::getenv("HAL_COMM_TRANSPORT");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return kTransportAuto;
    if (std::strcmp(v, "tcp") == 0) return kTransportTcp;
    fail(HAL_STATUS_INVALID_ARGUMENT, what, ": HAL_COMM_TRANSPORT='", v, "' is not one of auto, tcp");
  }

  // Every rank's record (each rank reads the same records, so all choose the
  // same transports); refuses a rank holding another unique id, world size
  // or HAL_COMM_TRANSPORT.
  static std::vector<PeerRecord> read_records(const Bootstrap& bs, const CommInit& a, const IdRecord& id,
                                              const PeerRecord& me, std::chrono::milliseconds timeout,
                                              const std::string& what) {
    std::vector<PeerRecord> peers(a.world_size);
    peers[a.rank] = me;
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
      if (peer.flags != me.flags)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": rank ", r, " has HAL_COMM_TRANSPORT=",
             peer.flags == kTransportTcp ? "tcp" : "auto", " but rank ", a.rank, " has ",
             me.flags == kTransportTcp ? "tcp" : "auto", ": every rank must choose the same");
      if (peer.rank != r)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": the bootstrap's record of rank ", r, " says rank ", peer.rank);
      peers[r] = peer;
    }
    return peers;
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
        v.send_file = file_of(*c.send, c.send_offset);
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
        v.recv_file = file_of(*c.recv, c.recv_offset);
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
        if (hierarchical()) run_hierarchical(calls[i], views[i]);
        else run_collective(calls[i], views[i]);
      }
      if (!p2p.empty()) {
        if (hierarchical()) run_p2p_hierarchical(calls, views, p2p);
        else run_p2p(calls, views, p2p);
      }
      if (prepared == nullptr)
        for (const HostView& v : views) write_back(v, nullptr);
    } catch (const Error& e) {
      // A mismatch found at a step leaves every rank in step: the
      // communicator stays usable. Anything else broke it: this host's ranks
      // and (closing its connections) the other hosts' fail too.
      if (e.code() != HAL_STATUS_INVALID_ARGUMENT || async_error()) {
        set_error(e);
        group_->abort(e.what());
        close_tcp();
      }
      throw;
    }
  }

  uint32_t next_half() { return static_cast<uint32_t>(round_++ & 1); }

  void post(uint32_t half, const OpDescriptor& d, const std::string& what) {
    group_->throw_if_aborted(what);
    group_->descriptor(group_->rank(), half) = d;
  }
  // Steps, then compares every rank's descriptor with this rank's: a
  // mismatch is seen by all ranks alike, so all throw.
  void checked_step(uint32_t half, const std::string& what) {
    group_->step(what);
    const OpDescriptor& mine = group_->descriptor(group_->rank(), half);
    for (uint32_t r = 0; r < group_->world(); ++r) {
      const OpDescriptor& theirs = group_->descriptor(r, half);
      if (theirs == mine) continue;
      fail(HAL_STATUS_INVALID_ARGUMENT, what, ": ranks disagree: rank ", rank_, " called ", describe(mine),
           " but rank ", global_rank(r), " called ", describe(theirs));
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

  // What ranks compare for C, the SEQ-th operation: only the fields C's
  // kind uses.
  static OpDescriptor descriptor_of(const CollectiveCall& c, uint64_t seq) {
    OpDescriptor d{seq, c.count, static_cast<uint32_t>(c.kind), c.dtype, static_cast<uint32_t>(c.op), c.root};
    if (c.kind == CollectiveCall::kAlltoall && !c.send_counts.empty())
      d.count = UINT64_MAX;  // compared through the exchanged counts instead
    if (c.kind != CollectiveCall::kAllreduce && c.kind != CollectiveCall::kReduce &&
        c.kind != CollectiveCall::kReduceScatter)
      d.op = 0;
    if (c.kind != CollectiveCall::kBroadcast && c.kind != CollectiveCall::kReduce) d.root = 0;
    if (c.kind == CollectiveCall::kBarrier) d.count = d.dtype = 0;
    return d;
  }

  // One host: every rank is in the segment.
  void run_collective(const CollectiveCall& c, HostView& v) {
    const uint64_t seq = sequence_++;
    const std::string what = std::string(kind_name(c.kind)) + " #" + std::to_string(seq);
    const OpDescriptor d = descriptor_of(c, seq);
    const bool unequal = c.kind == CollectiveCall::kAlltoall && !c.send_counts.empty();
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
    const uint64_t es = common::dtype_size(c.dtype), world = group_->world(), me = group_->rank();
    const bool all = c.kind == CollectiveCall::kAllreduce, receives = all || c.root == me;
    if (all && world > 1 && c.count * es > kDirectBytes) {
      uint32_t h = 0;
      if (post_buffers(d, v, c.count * es, h, what)) return allreduce_in_place(c, v, h, what);
    }
    std::vector<const void*> in(world);
    rounds(c.count, group_->half_bytes() / es, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      unsigned char* mine = group_->slot(static_cast<uint32_t>(me), h);
      if (n * es <= kDirectBytes || world == 1) {
        std::memcpy(mine, v.send + off * es, n * es);
        checked_step(h, what);
        if (!receives) return;
        for (uint32_t r = 0; r < world; ++r) in[r] = group_->slot(r, h);
        reduce(c.dtype, c.op, v.recv + off * es, in.data(), world, n);
        return;
      }
      // Slice r of every slot is reduced by rank r into its slot, then
      // gathered. This rank's own slice is read from SEND and its result
      // written to RECV as it is made: only the others' slices pass
      // through its slot on the way in, and only theirs on the way out.
      const auto slice = [&](uint64_t r) {
        const uint64_t per = (n + world - 1) / world, lo = std::min(n, r * per);
        return std::pair<uint64_t, uint64_t>{lo, std::min(n, lo + per)};
      };
      const auto [lo, hi] = slice(me);
      std::memcpy(mine, v.send + off * es, lo * es);
      std::memcpy(mine + hi * es, v.send + (off + hi) * es, (n - hi) * es);
      checked_step(h, what);
      for (uint32_t r = 0; r < world; ++r) in[r] = r == me ? v.send + (off + lo) * es : group_->slot(r, h) + lo * es;
      if (hi > lo)
        reduce(c.dtype, c.op, mine + lo * es, in.data(), world, hi - lo, receives ? v.recv + (off + lo) * es : nullptr);
      group_->step(what);
      if (!receives) return;
      for (uint32_t r = 0; r < world; ++r) {
        if (r == me) continue;
        const auto [rlo, rhi] = slice(r);
        std::memcpy(v.recv + (off + rlo) * es, group_->slot(r, h) + rlo * es, (rhi - rlo) * es);
      }
    });
  }

  // ---- peers' buffers in place ----
  //
  // A rank reaches a peer's buffer by mapping the file behind it when the
  // peer's device memory is shareable (Buffer::shared_memory, e.g. the CPU
  // plugin's large buffers: PeerMappings), else by cross-memory attach
  // (ShmGroup::peer_read/peer_write, one kernel copy). Both need the same
  // ptrace-level access to the peer, which the ranks probe at join.

  // Unless CMA is known to be unusable: posts D and this rank's buffers
  // (addresses and files) in a new half (H) and steps; true if every rank
  // reaches its peers' memory. The first call learns that
  // (ShmGroup::cma_agreed, the same on every rank); when false, its step
  // served as a barrier and the caller goes on through the segment. When
  // true, maps what it can of the peers' buffers (BYTES each) into
  // peer_send_/peer_recv_: a choice each rank makes alone, as the others
  // need not know how their memory is reached.
  bool post_buffers(const OpDescriptor& d, const HostView& v, uint64_t bytes, uint32_t& h, const std::string& what) {
    if (cma_ == kCmaUnavailable) return false;
    h = next_half();
    post(h, d, what);
    const uint32_t me = group_->rank(), world = group_->world();
    group_->send_address(me, h) = reinterpret_cast<uintptr_t>(v.send);
    group_->recv_address(me, h) = reinterpret_cast<uintptr_t>(v.recv);
    group_->send_file(me, h) = v.send_file;
    group_->recv_file(me, h) = v.recv_file;
    checked_step(h, what);
    if (cma_ == kCmaUnknown) decide_cma(what);
    if (cma_ != kCmaWorks) return false;
    peer_send_.assign(world, nullptr);
    peer_recv_.assign(world, nullptr);
    peer_maps_.begin_operation();
    std::string failure;
    for (uint32_t q = 0; q < world; ++q) {
      if (q == me) continue;
      peer_send_[q] = peer_maps_.map(q, group_->pid(q), group_->send_file(q, h), bytes, &failure);
      peer_recv_[q] = peer_maps_.map(q, group_->pid(q), group_->recv_file(q, h), bytes, &failure);
    }
    if (!said_mapping_ && (peer_maps_.size() > 0 || !failure.empty())) {
      said_mapping_ = true;
      sdk::log(HAL_LOG_DEBUG, what + " (rank " + std::to_string(rank_) + "): " +
                                  (failure.empty() ? "maps the peers' shared buffers"
                                                   : "copies by cross-memory attach where a peer's buffer cannot be "
                                                     "mapped: " + failure));
    }
    return true;
  }
  // Reads the ranks' verdicts (all published before this step) and says
  // the outcome once, at debug level (HAL_LOG_LEVEL=debug).
  void decide_cma(const std::string& what) {
    cma_ = group_->cma_agreed() ? kCmaWorks : kCmaUnavailable;
    std::string line = what + " (rank " + std::to_string(rank_) + "): large allreduces ";
    if (cma_ == kCmaWorks) line += "read and write the peers' buffers in place (cross-memory attach)";
    else if (!group_->cma_failure().empty()) line += "go through the shared segment: " + group_->cma_failure();
    else line += "go through the shared segment: another rank cannot reach its peers' memory";
    sdk::log(HAL_LOG_DEBUG, line);
  }
  // OUT[0, COUNT) = the reduction (OP) of elements [AT, AT + COUNT) of every
  // rank's send buffer posted in half H, a chunk at a time (its own from
  // SEND, a peer's where mapped, else copied by CMA into this rank's
  // scratch), in rank order as the segment path reduces.
  void reduce_from_peers(uint32_t dtype, uint32_t op, const unsigned char* send, unsigned char* out, uint64_t at,
                         uint64_t count, uint32_t h, const std::string& what) {
    const uint64_t es = common::dtype_size(dtype), world = group_->world(), me = group_->rank();
    const uint64_t chunk = std::max<uint64_t>(1, kCmaChunkBytes / es);
    cma_scratch_.resize(static_cast<size_t>((world - 1) * chunk * es));
    std::vector<const void*> in(world);
    for (uint64_t done = 0; done < count; done += chunk) {
      const uint64_t m = std::min(chunk, count - done), from = (at + done) * es;
      group_->throw_if_aborted(what);
      for (uint32_t q = 0, k = 0; q < world; ++q) {
        if (q == me || peer_send_[q] != nullptr) {
          in[q] = q == me ? send + from : peer_send_[q] + from;
          continue;
        }
        unsigned char* scratch = cma_scratch_.data() + (k++) * chunk * es;
        group_->peer_read(q, scratch, group_->send_address(q, h) + from, m * es, what);
        in[q] = scratch;
      }
      reduce(dtype, op, out + done * es, in.data(), world, m);
    }
  }
  // Writes BYTES from SRC into every peer's receive buffer (posted in half
  // H) at byte offset AT: a memcpy where mapped, else by CMA.
  void write_to_peers(const unsigned char* src, uint64_t at, uint64_t bytes, uint32_t h, const std::string& what) {
    for (uint32_t q = 0; q < group_->world(); ++q) {
      if (q == group_->rank()) continue;
      if (peer_recv_[q] != nullptr) std::memcpy(peer_recv_[q] + at, src, bytes);
      else group_->peer_write(q, src, group_->recv_address(q, h) + at, bytes, what);
    }
  }

  // Allreduce on the peers' buffers in place, after post_buffers: rank r
  // reduces slice r of all ranks' send buffers into its receive buffer, a
  // chunk at a time, and writes each chunk into every peer's receive buffer
  // while it is in cache. Each slice of every buffer is read, then written,
  // by its one owner, so in-place buffers are safe. With mapped buffers a
  // rank's memory traffic is one read and one write of the data, as a
  // memcpy (the segment path's: two of each); CMA adds the kernel's copy
  // into scratch. A last step keeps every rank's buffers alive until all
  // are written.
  void allreduce_in_place(const CollectiveCall& c, HostView& v, uint32_t h, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), world = group_->world(), me = group_->rank();
    const uint64_t per = (c.count + world - 1) / world, lo = std::min(c.count, me * per),
                   hi = std::min(c.count, lo + per);
    const uint64_t chunk = std::max<uint64_t>(1, kCmaChunkBytes / es);
    for (uint64_t off = lo; off < hi; off += chunk) {
      const uint64_t m = std::min(chunk, hi - off);
      reduce_from_peers(c.dtype, c.op, v.send, v.recv + off * es, off, m, h, what);
      write_to_peers(v.recv + off * es, off * es, m * es, h, what);
    }
    group_->step(what);
  }

  void broadcast(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), me = group_->rank();
    rounds(c.count, group_->half_bytes() / es, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      if (me == c.root) std::memcpy(group_->slot(c.root, h), v.send + off * es, n * es);
      checked_step(h, what);
      if (v.recv != nullptr && v.recv != v.send) std::memcpy(v.recv + off * es, group_->slot(c.root, h), n * es);
    });
  }

  void allgather(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), world = group_->world(), me = group_->rank();
    rounds(c.count, group_->half_bytes() / es, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      std::memcpy(group_->slot(static_cast<uint32_t>(me), h), v.send + off * es, n * es);
      checked_step(h, what);
      for (uint32_t r = 0; r < world; ++r)
        std::memcpy(v.recv + (r * c.count + off) * es, group_->slot(r, h), n * es);
    });
  }

  void reduce_scatter(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), world = group_->world(), me = group_->rank();
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
    const uint64_t es = common::dtype_size(c.dtype), world = group_->world(), me = group_->rank();
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
  // starts with a header (dtype, count, tag) the receiver checks. A receive
  // takes the oldest message from its peer with its tag: one that arrives
  // for no issued receive is kept (unexpected_) until one is issued, so
  // tags may be received out of order. INTERNAL: an alltoall's messages,
  // which match among themselves only, never a user's of the same tag.
  struct P2pHeader {
    uint32_t dtype, internal;
    uint64_t count, tag;
  };
  struct Unexpected {
    P2pHeader header;
    std::vector<unsigned char> bytes;
  };

  void run_p2p(std::vector<CollectiveCall>& calls, std::vector<HostView>& views, const std::vector<size_t>& which,
               bool internal = false) {
    struct Progress {
      size_t call;
      uint64_t done = 0, total = 0;  // a send's bytes, its header included
      bool finished = false;
      bool matched = false;  // a receive: its message was found
      P2pHeader header{};    // a send's
    };
    // Per peer with receives waiting: the message being read from it, into
    // a receive or kept.
    struct Incoming {
      size_t waiting = 0;  // receives from this peer not finished
      P2pHeader header{};
      uint64_t header_done = 0, done = 0, total = 0;
      unsigned char* into = nullptr;
      Progress* receive = nullptr;  // null: kept in unexpected_
    };
    std::vector<Progress> ps;
    ps.reserve(which.size());
    for (size_t i : which) {
      const CollectiveCall& c = calls[i];
      Progress p{i};
      if (c.kind == CollectiveCall::kSend) {
        p.header = P2pHeader{c.dtype, internal ? 1u : 0u, c.count, c.tag};
        p.total = sizeof(P2pHeader) + c.count * common::dtype_size(c.dtype);
      }
      ps.push_back(p);
    }
    const std::string what = std::string(which.size() > 1 ? "group of " + std::to_string(which.size()) + " send/recv" : kind_name(calls[which[0]].kind));
    const auto tag_text = [](uint64_t tag) { return tag == 0 ? std::string() : " with tag " + std::to_string(tag); };
    // A receive and the message it matched by tag disagree: the sender's
    // bytes cannot be taken as asked, and the pair is broken.
    const auto check = [&](const CollectiveCall& c, const P2pHeader& h) {
      if (h.dtype == c.dtype && h.count == c.count) return;
      const std::string from = std::to_string(global_rank(c.root));
      const std::string why = "recv from rank " + from + tag_text(c.tag) + ": expected " + std::to_string(c.count) + " " +
                              common::dtype_name(c.dtype) + " but rank " + from + " sent " + std::to_string(h.count) +
                              " " + common::dtype_name(h.dtype);
      group_->abort(why);
      set_error(Error(HAL_STATUS_INVALID_ARGUMENT, why));
      fail(HAL_STATUS_INVALID_ARGUMENT, why);
    };
    const auto matches = [&](const CollectiveCall& c, const P2pHeader& h) {
      return h.tag == c.tag && (h.internal != 0) == internal;
    };
    size_t remaining = ps.size();
    std::map<uint32_t, Incoming> incoming;
    for (Progress& p : ps) {
      const CollectiveCall& c = calls[p.call];
      if (c.kind != CollectiveCall::kRecv) continue;
      // A message that arrived earlier, oldest first.
      auto found = unexpected_.find(c.root);
      if (found != unexpected_.end()) {
        std::deque<Unexpected>& kept = found->second;
        for (auto it = kept.begin(); it != kept.end(); ++it) {
          if (!matches(c, it->header)) continue;
          check(c, it->header);
          if (!it->bytes.empty()) std::memcpy(views[p.call].recv, it->bytes.data(), it->bytes.size());
          kept.erase(it);
          p.matched = p.finished = true;
          --remaining;
          break;
        }
        if (kept.empty()) unexpected_.erase(found);
      }
      if (!p.finished) ++incoming[c.root].waiting;
    }
    const auto deadline = Clock::now() + group_->timeout();
    auto stalled_since = Clock::now();
    for (;;) {
      if (remaining == 0) return;
      bool moved = false;
      for (Progress& p : ps) {
        const CollectiveCall& c = calls[p.call];
        if (p.finished || c.kind != CollectiveCall::kSend) continue;
        // Only the first pending send per peer moves: one ring, in order.
        bool blocked = false;
        for (Progress& q : ps) {
          if (&q == &p) break;
          if (!q.finished && calls[q.call].kind == c.kind && calls[q.call].root == c.root) blocked = true;
        }
        if (blocked) continue;
        if (p.done == 0 && has_backlog(c.root)) {  // behind deferred bytes: keep the ring's order
          defer(c.root, p.header, views[p.call].send, 0, p.total);
          p.done = p.total;
        }
        while (p.done < p.total) {
          const unsigned char* src = p.done < sizeof(P2pHeader)
                                         ? reinterpret_cast<const unsigned char*>(&p.header) + p.done
                                         : views[p.call].send + (p.done - sizeof(P2pHeader));
          const uint64_t len = p.done < sizeof(P2pHeader) ? sizeof(P2pHeader) - p.done : p.total - p.done;
          const size_t n = group_->try_send(c.root, src, len);
          if (n == 0) break;
          p.done += n;
          moved = true;
        }
        if (p.done == p.total) {
          p.finished = true;
          --remaining;
        }
      }
      // Each peer's messages, read until its receives are finished.
      for (auto& [peer, in] : incoming) {
        while (in.waiting > 0) {
          if (in.header_done < sizeof(P2pHeader)) {
            const size_t n = group_->try_recv(peer, reinterpret_cast<unsigned char*>(&in.header) + in.header_done,
                                              sizeof(P2pHeader) - in.header_done);
            if (n == 0) break;
            in.header_done += n;
            moved = true;
            if (in.header_done < sizeof(P2pHeader)) continue;
            // Whole header: the oldest waiting receive of its tag takes it.
            in.receive = nullptr;
            for (Progress& q : ps)
              if (!q.matched && calls[q.call].kind == CollectiveCall::kRecv && calls[q.call].root == peer &&
                  matches(calls[q.call], in.header)) {
                check(calls[q.call], in.header);
                q.matched = true;
                in.receive = &q;
                break;
              }
            in.total = in.header.count * common::dtype_size(in.header.dtype);
            in.done = 0;
            if (in.receive != nullptr) {
              in.into = views[in.receive->call].recv;
            } else {
              std::deque<Unexpected>& kept = unexpected_[peer];
              kept.push_back(Unexpected{in.header, std::vector<unsigned char>(in.total)});
              in.into = kept.back().bytes.data();
            }
          }
          if (in.done < in.total) {
            const size_t n = group_->try_recv(peer, in.into + in.done, in.total - in.done);
            if (n == 0) break;
            in.done += n;
            moved = true;
            if (in.done < in.total) continue;
          }
          // Whole message.
          if (in.receive != nullptr) {
            in.receive->finished = true;
            --in.waiting;
            --remaining;
          }
          in.header_done = 0;
          in.receive = nullptr;
          in.into = nullptr;
        }
      }
      if (moved) {
        stalled_since = Clock::now();
        continue;
      }
      group_->throw_if_aborted(what);
      // Sends whose receivers are not receiving yet (every rank isends,
      // then receives) finish by copying their rest to the backlog.
      if (Clock::now() - stalled_since > kDeferSendsAfter) {
        bool deferred = false;
        for (Progress& p : ps) {
          const CollectiveCall& c = calls[p.call];
          if (p.finished || c.kind != CollectiveCall::kSend) continue;
          defer(c.root, p.header, views[p.call].send, p.done, p.total);
          p.done = p.total;
          p.finished = true;
          --remaining;
          deferred = true;
        }
        if (deferred) {
          stalled_since = Clock::now();
          continue;
        }
      }
      if (Clock::now() > deadline) {
        std::string why = what + ": rank " + std::to_string(rank_) + " timed out after " +
                          std::to_string(group_->timeout().count()) + " ms waiting for its peer(s)";
        for (const Progress& p : ps) {
          const CollectiveCall& c = calls[p.call];
          if (c.kind != CollectiveCall::kRecv || p.matched) continue;
          why += "; recv from rank " + std::to_string(global_rank(c.root)) + tag_text(c.tag) + " unmatched";
          auto found = unexpected_.find(c.root);
          if (found == unexpected_.end()) continue;
          why += " (" + std::to_string(found->second.size()) + " message(s) from rank " +
                 std::to_string(global_rank(c.root)) + " with other tags are kept for later receives)";
        }
        group_->abort(why);
        fail(HAL_STATUS_TIMEOUT, why);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }


  // ---- sends deferred to a progress thread ----
  //
  // A send over a ring completes once its bytes are in the ring. One whose
  // ring stays full (its receiver is in another operation: every rank
  // isends, then receives) would wait for the receiver, maybe forever; after
  // kDeferSendsAfter without progress its remaining bytes are copied here
  // instead and the send completes, as Gloo's and MPI's buffered sends do.
  // A progress thread moves them into the ring as the receiver frees room;
  // later sends to that peer queue behind them, so each ring keeps its
  // order. Only run_p2p (under run_mu_) adds to the backlog, and it writes
  // a ring itself only while that peer has none: one writer per ring.
  static constexpr std::chrono::milliseconds kDeferSendsAfter{1};

  bool has_backlog(uint32_t peer) {
    std::lock_guard<std::mutex> lock(backlog_mu_);
    return backlog_.count(peer) != 0;
  }

  // Keeps bytes [DONE, TOTAL) of the message HEADER then PAYLOAD for PEER.
  void defer(uint32_t peer, const P2pHeader& header, const unsigned char* payload, uint64_t done, uint64_t total) {
    std::vector<unsigned char> rest(total - done);
    const uint64_t in_header = done < sizeof(P2pHeader) ? sizeof(P2pHeader) - done : 0;
    if (in_header) std::memcpy(rest.data(), reinterpret_cast<const unsigned char*>(&header) + done, in_header);
    const uint64_t from = done + in_header - sizeof(P2pHeader);  // payload bytes already sent
    if (total - done > in_header) std::memcpy(rest.data() + in_header, payload + from, total - done - in_header);
    std::lock_guard<std::mutex> lock(backlog_mu_);
    backlog_[peer].push_back(std::move(rest));
    if (!progress_.joinable()) progress_ = std::thread([this] { progress_backlog(); });
    backlog_cv_.notify_all();
  }

  void progress_backlog() {
    std::unique_lock<std::mutex> lock(backlog_mu_);
    std::map<uint32_t, uint64_t> front_done;  // bytes of each peer's oldest message moved
    for (;;) {
      backlog_cv_.wait(lock, [this] { return progress_stop_ || !backlog_.empty(); });
      if (progress_stop_) return;
      bool moved = false;
      for (auto it = backlog_.begin(); it != backlog_.end();) {
        const uint32_t peer = it->first;
        std::deque<std::vector<unsigned char>>& queue = it->second;
        while (!queue.empty()) {
          uint64_t& done = front_done[peer];
          const size_t n = group_->try_send(peer, queue.front().data() + done, queue.front().size() - done);
          if (n == 0) break;
          moved = true;
          if ((done += n) == queue.front().size()) {
            queue.pop_front();
            done = 0;
          }
        }
        // A receiver that exited, or an aborted group, takes nothing more.
        if (queue.empty() || group_->aborted() || group_->exited(peer)) {
          front_done.erase(peer);
          it = backlog_.erase(it);
        } else {
          ++it;
        }
      }
      if (backlog_.empty()) {
        backlog_cv_.notify_all();  // the destructor may wait for this
      } else if (!moved) {
        const uint32_t peer = backlog_.begin()->first;
        lock.unlock();
        group_->wait_for_room(peer, std::chrono::milliseconds(1));
        lock.lock();
      }
    }
  }

  // ---- more than one host ----
  //
  // Every operation starts by agreeing (agree(): each host compares its
  // ranks' descriptors, the leaders exchange theirs over TCP, each leader
  // tells its host the verdict), so a mismatch anywhere is INVALID_ARGUMENT
  // on every rank and leaves every rank in step. Then:
  //   allreduce       hosts of equal size L >= 2: reduce-scatter on the
  //                   host, allreduce of slice i among the ranks i of every
  //                   host (Gloo, the L columns at once), allgather on the
  //                   host (allreduce_columns). Else: reduce to the leader
  //                   (shared memory), allreduce among leaders (Gloo),
  //                   broadcast from the leader.
  //   reduce          as allreduce with a reduce among leaders to the root's
  //                   host, whose leader hands it to the root.
  //   broadcast       on the root's host from the root, among leaders from
  //                   its leader, on the other hosts from their leaders.
  //   allgather       gathered to each leader, allgatherv among leaders,
  //                   broadcast from the leader.
  //   reduce_scatter  the whole reduction (as allreduce) at each leader,
  //                   which scatters its host's blocks.
  //   alltoall, send/recv  per peer: shared memory on this host, the TCP
  //                   mesh to other hosts.
  // AVG reduces as SUM and the leader divides by the world size.

  bool hierarchical() const { return topo_.hosts.size() > 1; }

#ifdef HAL_SDK_WITH_GLOO
  // comm_split across hosts: (color, key) gathered from every rank; each
  // child's ranks on one host share a new segment (its first rank creates
  // it before a parent barrier, the others open it after), and a child
  // spanning hosts connects its own TCP mesh (and leaders) through a store
  // whose entries travel over the parent's mesh.
  std::unique_ptr<Communicator> split_hierarchical(int32_t color, int32_t key) {
    std::lock_guard<std::mutex> lock(run_mu_);
    const std::string what = "comm_split #" + std::to_string(splits_);
    const OpDescriptor d{sequence_++, 0, kSplitKind, 0, 0, 0};
    agree(d, what);
    const int32_t mine[2] = {color, key};
    std::vector<int32_t> all(2 * world_);
    allgather_hierarchical(HAL_DTYPE_INT32, 2, reinterpret_cast<const unsigned char*>(mine),
                           reinterpret_cast<unsigned char*>(all.data()), d, what);
    struct Member {
      int32_t key;
      uint32_t rank;
    };
    std::vector<Member> members;
    for (uint32_t r = 0; r < world_; ++r)
      if (color >= 0 && all[2 * r] == color) members.push_back({all[2 * r + 1], r});
    std::stable_sort(members.begin(), members.end(), [](const Member& x, const Member& y) {
      return x.key != y.key ? x.key < y.key : x.rank < y.rank;
    });
    const auto size = static_cast<uint32_t>(members.size());
    uint32_t new_rank = 0;
    std::vector<uint32_t> parent_of(size);  // child rank -> parent rank
    std::vector<PeerRecord> records(size);
    for (uint32_t i = 0; i < size; ++i) {
      parent_of[i] = members[i].rank;
      records[i].host = topo_.host_of[members[i].rank];
      if (members[i].rank == rank_) new_rank = i;
    }
    Topology topo = Topology::of(records, false);
    const std::string name = prefix_ + "-s" + std::to_string(splits_++) + "c" + std::to_string(color);
    std::unique_ptr<ShmGroup> child;
    std::optional<Error> failure;
    uint32_t local_rank = 0, local_world = 1;
    std::string segment;
    if (color >= 0) {
      const uint32_t child_host = topo.host_of[new_rank];
      local_rank = topo.local_index(new_rank);
      local_world = static_cast<uint32_t>(topo.hosts[child_host].size());
      segment = topo.hosts.size() == 1 ? name : name + "h" + std::to_string(child_host);
    }
    // Creators first, a parent barrier, then the others open: every rank
    // takes the barrier, whatever happens to it, so the parent stays in step.
    try {
      if (color >= 0 && local_rank == 0)
        child = ShmGroup::map_segment(local_world == 1 ? "" : segment, local_world, 0, true, timeout_, what);
    } catch (const Error& e) {
      failure = e;
    }
    agree(d, what);
    try {
      if (color >= 0 && local_rank != 0 && !failure)
        child = ShmGroup::map_segment(segment, local_world, local_rank, false, timeout_, what);
      if (child) child->join(what, [](const std::vector<uint32_t>&) {});
    } catch (const Error& e) {
      if (!failure) failure = e;
    }
    if (failure) throw *failure;
    if (color < 0) return nullptr;
    std::unique_ptr<HostCommunicator> comm(
        new HostCommunicator(device_, std::move(child), name, new_rank, size, timeout_, topo));
    if (topo.hosts.size() > 1) {
      // The child's mesh among its members, then its leaders' among them.
      MeshStore store(*mesh_, parent_of, timeout_, what);
      comm->mesh_ = std::make_unique<GlooTransport>(store, new_rank, size, timeout_, what);
      if (local_rank == 0) {
        if (topo.hosts.size() == size) comm->leaders_ = comm->mesh_.get();
        else {
          std::vector<uint32_t> leaders;
          for (const auto& host : topo.hosts) leaders.push_back(parent_of[host[0]]);
          MeshStore leader_store(*mesh_, leaders, timeout_, what);
          comm->leaders_owned_ = std::make_unique<GlooTransport>(
              leader_store, topo.host_of[new_rank], static_cast<uint32_t>(topo.hosts.size()), timeout_, what);
          comm->leaders_ = comm->leaders_owned_.get();
        }
      }
    }
    return comm;
  }
#else
  std::unique_ptr<Communicator> split_hierarchical(int32_t, int32_t) {
    fail(HAL_STATUS_INTERNAL, "comm_split: built without Gloo");
  }
#endif
  bool leader() const { return group_->rank() == 0; }
  uint32_t global_rank(uint32_t local) const { return topo_.hosts[host_][local]; }

  void close_tcp() noexcept {
#ifdef HAL_SDK_WITH_GLOO
    if (mesh_) mesh_->close();
    if (leaders_owned_) leaders_owned_->close();
    if (column_owned_) column_owned_->close();
#endif
  }

#ifdef HAL_SDK_WITH_GLOO
  // Record a leader sends the others: its host's descriptor, or why its
  // ranks disagree.
  struct Agreement {
    OpDescriptor d;
    uint64_t payload_bytes;  // what follows it
    char why[464];
  };

  // Every leader's record and payload, in host order: the records first
  // (fixed size), then each payload, whose size its record gives, so
  // leaders whose ranks called different sizes still meet.
  void leaders_exchange(const Agreement& mine, const unsigned char* payload, std::vector<Agreement>& records,
                        std::vector<std::vector<unsigned char>>& payloads, const std::string& what) {
    const uint32_t hosts = leaders_->world(), me = leaders_->rank();
    records.assign(hosts, Agreement{});
    payloads.assign(hosts, {});
    records[me] = mine;
    payloads[me].assign(payload, payload + mine.payload_bytes);
    std::vector<GlooTransport::Message> first;
    for (uint32_t k = 0; k < hosts; ++k) {
      if (k == me) continue;
      first.push_back({true, k, HAL_DTYPE_UINT8, sizeof(Agreement), reinterpret_cast<const unsigned char*>(&mine), nullptr});
      first.push_back({true, k, HAL_DTYPE_UINT8, mine.payload_bytes, payload, nullptr});
      first.push_back({false, k, HAL_DTYPE_UINT8, sizeof(Agreement), nullptr, reinterpret_cast<unsigned char*>(&records[k])});
    }
    GlooTransport::Posted posted = leaders_->post(first, what);
    leaders_->finish(posted, what);  // the payload sends complete only once phase two posts their receives
    std::vector<GlooTransport::Message> second;
    for (uint32_t k = 0; k < hosts; ++k) {
      if (k == me) continue;
      payloads[k].resize(records[k].payload_bytes);
      second.push_back({false, k, HAL_DTYPE_UINT8, records[k].payload_bytes, nullptr, payloads[k].data()});
    }
    const std::vector<GlooTransport::PendingSend*> sent = posted.sends;
    posted = leaders_->post(second, what);
    posted.sends = sent;
    leaders_->finish(posted, what, true);
  }

  void agree(const OpDescriptor& d, const std::string& what) {
    agree_with(d, what, nullptr, 0, nullptr, nullptr);
  }

  // The agreement, carrying data: after the host's descriptors are compared
  // (one step), PREPARE(half) runs on every rank of a host whose ranks agree
  // (it may take steps) and leaves BYTES at PAYLOAD on the leader; the
  // leaders exchange their descriptors, verdicts and payloads in one
  // allgatherv; on a leader, FINISH(every host's payload, in host order,
  // OUT) writes up to half_bytes - 8 - 472 bytes to OUT, which reaches every
  // rank of the host with the verdict (returned through OUT's size as
  // FINISH set it). Nullptr PREPARE / FINISH: a bare agreement.
  template <class Prepare = std::nullptr_t, class Finish = std::nullptr_t>
  std::vector<unsigned char> agree_with(const OpDescriptor& d, const std::string& what, Prepare&& prepare,
                                        uint64_t bytes, const unsigned char* const* payload, Finish&& finish) {
    const uint32_t h = next_half();
    post(h, d, what);
    group_->step(what);
    std::string local_why;
    for (uint32_t r = 0; r < group_->world() && local_why.empty(); ++r) {
      const OpDescriptor& theirs = group_->descriptor(r, h);
      if (!(theirs == d))
        local_why = "ranks disagree: rank " + std::to_string(rank_) + " called " + describe(d) + " but rank " +
                    std::to_string(global_rank(r)) + " called " + describe(theirs);
    }
    if constexpr (!std::is_same_v<std::decay_t<Prepare>, std::nullptr_t>) {
      if (local_why.empty()) prepare();
    }
    std::string verdict;
    std::vector<unsigned char> out;
    const uint32_t vh = next_half();
    post(vh, d, what);
    if (leader()) {
      Agreement mine{};
      mine.d = d;
      mine.payload_bytes = local_why.empty() ? bytes : 0;
      std::strncpy(mine.why, local_why.c_str(), sizeof(mine.why) - 1);
      std::vector<Agreement> all;
      std::vector<std::vector<unsigned char>> payloads;
      leaders_exchange(mine, payload != nullptr ? *payload : nullptr, all, payloads, what);
      const uint32_t hosts = leaders_->world();
      for (uint32_t k = 0; k < hosts && verdict.empty(); ++k)
        if (all[k].why[0] != '\0') verdict.assign(all[k].why, strnlen(all[k].why, sizeof(all[k].why)));
      for (uint32_t k = 1; k < hosts && verdict.empty(); ++k)
        if (!(all[k].d == all[0].d))
          verdict = "ranks disagree: rank " + std::to_string(topo_.hosts[0][0]) + " called " + describe(all[0].d) +
                    " but rank " + std::to_string(topo_.hosts[k][0]) + " called " + describe(all[k].d);
      if constexpr (!std::is_same_v<std::decay_t<Finish>, std::nullptr_t>) {
        if (verdict.empty()) {
          std::vector<const unsigned char*> in(hosts);
          for (uint32_t k = 0; k < hosts; ++k) in[k] = payloads[k].data();
          finish(in, out);
        }
      }
      // The verdict, then the result: [verdict size][verdict][result size][result].
      unsigned char* slot = group_->slot(0, vh);
      const uint64_t vn = std::min<uint64_t>(verdict.size(), sizeof(Agreement::why)), rn = out.size();
      std::memcpy(slot, &vn, 8);
      std::memcpy(slot + 8, verdict.data(), vn);
      std::memcpy(slot + 8 + vn, &rn, 8);
      if (rn) std::memcpy(slot + 16 + vn, out.data(), rn);
    }
    group_->step(what);
    if (!leader()) {
      const unsigned char* slot = group_->slot(0, vh);
      uint64_t vn = 0, rn = 0;
      std::memcpy(&vn, slot, 8);
      verdict.assign(reinterpret_cast<const char*>(slot + 8), vn);
      std::memcpy(&rn, slot + 8 + vn, 8);
      out.assign(slot + 16 + vn, slot + 16 + vn + rn);
    }
    if (!verdict.empty()) fail(HAL_STATUS_INVALID_ARGUMENT, what, ": ", verdict);
    return out;
  }

  // Up to this many bytes, an allreduce across hosts is one exchange among
  // leaders, folded into the agreement (Gloo's ring costs rounds per step).
  uint64_t small_bytes() const { return std::min<uint64_t>(64u << 10, group_->half_bytes() - 1024); }

  void allreduce_small(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), n = c.count, bytes = n * es;
    const uint32_t op = c.op == HAL_REDUCE_AVG ? uint32_t{HAL_REDUCE_SUM} : uint32_t{c.op};
    std::vector<unsigned char> acc(leader() ? std::max<uint64_t>(bytes, 1) : 0);
    const unsigned char* payload = acc.data();
    auto prepare = [&] {
      // This host's reduction at the leader: one step through the slots.
      const uint32_t h = next_half();
      post(h, d, what);
      if (bytes) std::memcpy(group_->slot(group_->rank(), h), v.send, bytes);
      group_->step(what);
      if (!leader() || !bytes) return;
      std::vector<const void*> in(group_->world());
      for (uint32_t r = 0; r < group_->world(); ++r) in[r] = group_->slot(r, h);
      reduce(c.dtype, op, acc.data(), in.data(), group_->world(), n);
    };
    auto finish = [&](const std::vector<const unsigned char*>& hosts, std::vector<unsigned char>& out) {
      out.resize(bytes);
      if (!bytes) return;
      std::vector<const void*> in(hosts.begin(), hosts.end());
      reduce(c.dtype, op, out.data(), in.data(), static_cast<uint32_t>(in.size()), n);
      if (c.op == HAL_REDUCE_AVG) detail::divide(c.dtype, out.data(), n, world_);
    };
    const std::vector<unsigned char> result = agree_with(d, what, prepare, bytes, &payload, finish);
    if (bytes) std::memcpy(v.recv, result.data(), bytes);
  }

  // Local phases: CollectiveCalls of this host's segment (roots local).
  void local_reduce_to_leader(const CollectiveCall& c, uint64_t count, const unsigned char* send, unsigned char* recv,
                              const OpDescriptor& d, const std::string& what) {
    CollectiveCall lc;
    lc.kind = CollectiveCall::kReduce;
    lc.dtype = c.dtype;
    lc.op = c.op == HAL_REDUCE_AVG ? HAL_REDUCE_SUM : c.op;
    lc.root = 0;
    lc.count = count;
    HostView lv;
    lv.send = send;
    lv.recv = leader() ? recv : nullptr;
    reduce_all(lc, lv, d, what);
  }
  void local_broadcast(uint32_t dtype, uint64_t count, uint32_t root, const unsigned char* send, unsigned char* recv,
                       const OpDescriptor& d, const std::string& what) {
    CollectiveCall lc;
    lc.kind = CollectiveCall::kBroadcast;
    lc.dtype = dtype;
    lc.root = root;
    lc.count = count;
    HostView lv;
    lv.send = group_->rank() == root ? send : nullptr;  // the others only receive
    lv.recv = recv;
    broadcast(lc, lv, d, what);
  }
  // Each rank's COUNT elements at SEND, to the leader at AT(local rank).
  template <class At>
  void local_gather(uint32_t dtype, uint64_t count, const unsigned char* send, At&& at, const OpDescriptor& d,
                    const std::string& what) {
    const uint64_t es = common::dtype_size(dtype), world = group_->world(), me = group_->rank();
    rounds(count, group_->half_bytes() / es, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      std::memcpy(group_->slot(static_cast<uint32_t>(me), h), send + off * es, n * es);
      group_->step(what);
      if (me != 0) return;
      for (uint32_t r = 0; r < world; ++r) std::memcpy(at(r) + off * es, group_->slot(r, h), n * es);
    });
  }
  // The leader's COUNT elements at FROM(local rank), to each rank's RECV.
  template <class From>
  void local_scatter(uint32_t dtype, uint64_t count, From&& from, unsigned char* recv, const OpDescriptor& d,
                     const std::string& what) {
    const uint64_t es = common::dtype_size(dtype), world = group_->world(), me = group_->rank();
    rounds(count, group_->half_bytes() / es, d, what, [&](uint64_t off, uint64_t n, uint32_t h, bool) {
      if (me == 0)
        for (uint32_t r = 1; r < world; ++r) std::memcpy(group_->slot(r, h), from(r) + off * es, n * es);
      group_->step(what);
      std::memcpy(recv + off * es, me == 0 ? from(0) + off * es : group_->slot(static_cast<uint32_t>(me), h), n * es);
    });
  }

  static CollectiveCall tcp_call(CollectiveCall::Kind kind, uint32_t dtype, uint32_t op, uint32_t root, uint64_t count) {
    CollectiveCall c;
    c.kind = kind;
    c.dtype = dtype;
    c.op = static_cast<hal_reduce_op_e>(op == HAL_REDUCE_AVG ? uint32_t{HAL_REDUCE_SUM} : op);
    c.root = root;
    c.count = count;
    return c;
  }

  void run_hierarchical(const CollectiveCall& c, HostView& v) {
    const uint64_t seq = sequence_++;
    const std::string what = std::string(kind_name(c.kind)) + " #" + std::to_string(seq);
    const OpDescriptor d = descriptor_of(c, seq);
    const uint64_t es = common::dtype_size(c.dtype), n = c.count;
    if (c.kind == CollectiveCall::kAllreduce && n * es <= small_bytes()) return allreduce_small(c, v, d, what);
    agree(d, what);
    switch (c.kind) {
      case CollectiveCall::kBarrier: return;  // agreeing is a barrier
      case CollectiveCall::kAllreduce: {
        if (column_ != nullptr && n >= group_->world()) return allreduce_columns(c, v, d, what);
        local_reduce_to_leader(c, n, v.send, v.recv, d, what);
        if (leader()) {
          leaders_->run(tcp_call(CollectiveCall::kAllreduce, c.dtype, c.op, 0, n), v.recv, v.recv, what);
          if (c.op == HAL_REDUCE_AVG) detail::divide(c.dtype, v.recv, n, world_);
        }
        return local_broadcast(c.dtype, n, 0, v.recv, v.recv, d, what);
      }
      case CollectiveCall::kReduce: {
        const uint32_t root_host = topo_.host_of[c.root];
        std::vector<unsigned char> acc(leader() ? std::max<uint64_t>(n * es, 1) : 0);
        local_reduce_to_leader(c, n, v.send, acc.data(), d, what);
        if (leader()) {
          leaders_->run(tcp_call(CollectiveCall::kReduce, c.dtype, c.op, root_host, n), acc.data(), acc.data(), what);
          if (host_ == root_host && c.op == HAL_REDUCE_AVG) detail::divide(c.dtype, acc.data(), n, world_);
        }
        if (host_ != root_host) return;
        if (global_rank(0) == c.root) {  // the leader is the root
          if (rank_ == c.root && n) std::memcpy(v.recv, acc.data(), n * es);
          return;
        }
        // The leader hands the result to the root.
        return local_broadcast(c.dtype, n, 0, acc.data(), rank_ == c.root ? v.recv : nullptr, d, what);
      }
      case CollectiveCall::kBroadcast: {
        const uint32_t root_host = topo_.host_of[c.root];
        if (host_ == root_host) local_broadcast(c.dtype, n, topo_.local_index(c.root), v.send, v.recv, d, what);
        if (leader()) {
          // The root's host's leader holds the data: the root's send, or its recv.
          const unsigned char* data = rank_ == c.root ? v.send : v.recv;
          leaders_->run(tcp_call(CollectiveCall::kBroadcast, c.dtype, 0, root_host, n), data, v.recv, what);
        }
        if (host_ != root_host) local_broadcast(c.dtype, n, 0, v.recv, v.recv, d, what);
        return;
      }
      case CollectiveCall::kAllgather: return allgather_hierarchical(c.dtype, n, v.send, v.recv, d, what);
      case CollectiveCall::kReduceScatter: {
        std::vector<unsigned char> acc(leader() ? std::max<uint64_t>(n * world_ * es, 1) : 0);
        local_reduce_to_leader(c, n * world_, v.send, acc.data(), d, what);
        if (leader()) {
          leaders_->run(tcp_call(CollectiveCall::kAllreduce, c.dtype, c.op, 0, n * world_), acc.data(), acc.data(),
                        what);
          if (c.op == HAL_REDUCE_AVG) detail::divide(c.dtype, acc.data(), n * world_, world_);
        }
        return local_scatter(
            c.dtype, n, [&](uint32_t r) { return acc.data() + global_rank(r) * n * es; }, v.recv, d, what);
      }
      case CollectiveCall::kAlltoall: return alltoall_hierarchical(c, v, d, what);
      default: fail(HAL_STATUS_INTERNAL, what, ": not a collective");
    }
  }

  // Allreduce across hosts of L ranks each (L >= 2, COUNT >= L), as NCCL's
  // hierarchical allreduce over several rails: local rank i owns slice i
  // (elements [COUNT i / L, COUNT (i + 1) / L)). Its host's sum of slice i
  // is reduced at rank i (shared memory: a reduce-scatter), slice i is
  // allreduced among the ranks i of every host (Gloo, column i; the L
  // columns at once), and every rank gathers the other slices (shared
  // memory: an allgather). Each rank sends 1/L of what a leader would (a
  // NIC the host's ranks share still carries all of it; the reductions,
  // copies and message latencies are what L ranks share). Slices go in
  // pieces of kColumnPieceBytes, pipelined: the column's allreduce of piece
  // k runs on a thread of this call while this one reduces piece k + 1 and
  // gathers piece k - 1.
  static constexpr uint64_t kColumnPieceBytes = 4u << 20;
  void allreduce_columns(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype), L = group_->world(), me = group_->rank(), n = c.count;
    const uint32_t op = c.op == HAL_REDUCE_AVG ? uint32_t{HAL_REDUCE_SUM} : uint32_t{c.op};
    const auto lo = [&](uint64_t r) { return n * r / L; };
    const auto len = [&](uint64_t r) { return lo(r + 1) - lo(r); };
    const uint64_t longest = (n + L - 1) / L;
    // Reduce-scatter of slice elements [FROM, TO): per round, each rank
    // copies its send buffer's chunk of every other rank's slice into its
    // slot (the chunk for rank q at place q, less one past this rank), then
    // reduces its own chunk from its send buffer and every other slot into
    // its receive buffer.
    const uint64_t chunk = std::max<uint64_t>(1, group_->half_bytes() / es / (L - 1));
    const auto place = [&](uint64_t q, uint64_t of) { return (q < of ? q : q - 1) * chunk * es; };
    std::vector<const void*> in(L);
    // With the host's peers' buffers in reach (post_buffers), both host
    // phases read and write them in place: no step until the last.
    uint32_t posted = 0;
    const bool direct = post_buffers(d, v, n * es, posted, what);
    const auto reduce_scatter = [&](uint64_t from, uint64_t to) {
      if (direct) {
        const uint64_t end = std::min(to, len(me));
        if (end > from)
          reduce_from_peers(c.dtype, op, v.send, v.recv + (lo(me) + from) * es, lo(me) + from, end - from, posted, what);
        return;
      }
      rounds(to - from, chunk, d, what, [&](uint64_t at, uint64_t m, uint32_t h, bool) {
        const uint64_t off = from + at;
        unsigned char* mine = group_->slot(static_cast<uint32_t>(me), h);
        for (uint64_t q = 0; q < L; ++q)
          if (q != me && off < len(q))
            std::memcpy(mine + place(q, me), v.send + (lo(q) + off) * es, std::min(m, len(q) - off) * es);
        checked_step(h, what);
        if (off >= len(me)) return;
        for (uint64_t q = 0; q < L; ++q)
          in[q] = q == me ? v.send + (lo(me) + off) * es : group_->slot(static_cast<uint32_t>(q), h) + place(me, q);
        reduce(c.dtype, op, v.recv + (lo(me) + off) * es, in.data(), L, std::min(m, len(me) - off));
      });
    };
    // Allgather of slice elements [FROM, TO), a chunk per round.
    unsigned char* slice = v.recv + lo(me) * es;
    const auto allgather = [&](uint64_t from, uint64_t to) {
      if (direct) {
        const uint64_t end = std::min(to, len(me));
        if (end > from) write_to_peers(slice + from * es, (lo(me) + from) * es, (end - from) * es, posted, what);
        return;
      }
      rounds(to - from, group_->half_bytes() / es, d, what, [&](uint64_t at, uint64_t m, uint32_t h, bool) {
        const uint64_t off = from + at;
        if (off < len(me))
          std::memcpy(group_->slot(static_cast<uint32_t>(me), h), slice + off * es, std::min(m, len(me) - off) * es);
        checked_step(h, what);
        for (uint64_t q = 0; q < L; ++q)
          if (q != me && off < len(q))
            std::memcpy(v.recv + (lo(q) + off) * es, group_->slot(static_cast<uint32_t>(q), h),
                        std::min(m, len(q) - off) * es);
      });
    };
    // Piece k of this rank's slice among the ranks me of every host (their
    // slices have this one's length: same count, same L).
    const uint64_t piece = std::max<uint64_t>(chunk, kColumnPieceBytes / es);
    const uint64_t pieces = (longest + piece - 1) / piece;
    const auto piece_end = [&](uint64_t k) { return std::min(longest, (k + 1) * piece); };
    const auto across = [&](uint64_t k) {
      const uint64_t from = std::min(len(me), k * piece), count = std::min(len(me), piece_end(k)) - from;
      if (count == 0) return;
      column_->run(tcp_call(CollectiveCall::kAllreduce, c.dtype, op, 0, count), slice + from * es, slice + from * es,
                   what);
      if (c.op == HAL_REDUCE_AVG) detail::divide(c.dtype, slice + from * es, count, world_);
    };
    if (pieces == 1) {
      reduce_scatter(0, longest);
      across(0);
      allgather(0, longest);
      if (direct) group_->step(what);  // every rank's buffers written
      return;
    }
    std::mutex mu;
    std::condition_variable cv;
    uint64_t handed = 0, crossed = 0;  // pieces reduced on the host / allreduced across hosts
    bool stop = false;
    std::exception_ptr failed;
    std::thread tcp([&] {
      for (uint64_t k = 0; k < pieces; ++k) {
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return handed > k || stop; });
          if (stop) return;
        }
        try {
          across(k);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          failed = std::current_exception();
          cv.notify_all();
          return;
        }
        std::lock_guard<std::mutex> lock(mu);
        ++crossed;
        cv.notify_all();
      }
    });
    const auto wait_crossed = [&](uint64_t k) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return crossed > k || failed; });
      if (crossed <= k) std::rethrow_exception(failed);
    };
    try {
      for (uint64_t k = 0; k < pieces; ++k) {
        reduce_scatter(k * piece, piece_end(k));
        {
          std::lock_guard<std::mutex> lock(mu);
          handed = k + 1;
        }
        cv.notify_all();
        if (k == 0) continue;
        wait_crossed(k - 1);
        allgather((k - 1) * piece, piece_end(k - 1));
      }
      wait_crossed(pieces - 1);
      allgather((pieces - 1) * piece, longest);
      if (direct) group_->step(what);  // every rank's buffers written
    } catch (...) {
      // The communicator is broken (the caller aborts it): closing the TCP
      // meshes ends the thread's wait for its column at once.
      {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
      }
      cv.notify_all();
      close_tcp();
      tcp.join();
      throw;
    }
    tcp.join();
  }

  // Every rank's COUNT elements at SEND into RECV (WORLD * COUNT, rank order).
  void allgather_hierarchical(uint32_t dtype, uint64_t count, const unsigned char* send, unsigned char* recv,
                              const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(dtype), block = count * es;
    local_gather(dtype, count, send, [&](uint32_t r) { return recv + global_rank(r) * block; }, d, what);
    if (leader()) {
      // Hosts' ranks need not be consecutive: blocks travel packed per host.
      const auto hosts = static_cast<uint32_t>(topo_.hosts.size());
      std::vector<size_t> bytes(hosts);
      for (uint32_t k = 0; k < hosts; ++k) bytes[k] = topo_.hosts[k].size() * block;
      std::vector<unsigned char> mine(bytes[host_]), all(world_ * block);
      for (size_t i = 0; i < topo_.hosts[host_].size(); ++i)
        std::memcpy(mine.data() + i * block, recv + topo_.hosts[host_][i] * block, block);
      leaders_->allgatherv(mine.data(), all.data(), bytes, what);
      size_t at = 0;
      for (uint32_t k = 0; k < hosts; ++k)
        for (uint32_t r : topo_.hosts[k]) {
          std::memcpy(recv + r * block, all.data() + at, block);
          at += block;
        }
    }
    local_broadcast(dtype, count * world_, 0, recv, recv, d, what);
  }

  // Per peer: this host's through the segment's rings, others' over TCP.
  void alltoall_hierarchical(const CollectiveCall& c, HostView& v, const OpDescriptor& d, const std::string& what) {
    const uint64_t es = common::dtype_size(c.dtype);
    const bool unequal = !c.send_counts.empty();
    std::vector<uint64_t> counts(world_ * world_, c.count);  // counts[p * world + q]: p sends q
    if (unequal) {
      // Every rank's send and receive counts, checked pair by pair on every rank.
      std::vector<uint64_t> mine(2 * world_), all(2 * world_ * world_);
      std::copy(c.send_counts.begin(), c.send_counts.end(), mine.begin());
      std::copy(c.recv_counts.begin(), c.recv_counts.end(), mine.begin() + world_);
      allgather_hierarchical(HAL_DTYPE_UINT64, 2 * world_, reinterpret_cast<const unsigned char*>(mine.data()),
                             reinterpret_cast<unsigned char*>(all.data()), d, what);
      for (uint64_t p = 0; p < world_; ++p)
        for (uint64_t q = 0; q < world_; ++q) {
          counts[p * world_ + q] = all[p * 2 * world_ + q];
          const uint64_t expected = all[q * 2 * world_ + world_ + p];
          if (counts[p * world_ + q] != expected)
            fail(HAL_STATUS_INVALID_ARGUMENT, what, ": rank ", p, " sends ", counts[p * world_ + q],
                 " elements to rank ", q, " but rank ", q, " expects ", expected, " (recv_counts[", p, "])");
        }
    }
    const auto send_at = [&](uint64_t q) { return unequal ? c.send_displs[q] : q * c.count; };
    const auto recv_at = [&](uint64_t p) { return unequal ? c.recv_displs[p] : p * c.count; };
    std::vector<CollectiveCall> calls;
    std::vector<HostView> views;
    for (uint32_t q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      CollectiveCall s;
      s.kind = CollectiveCall::kSend;
      s.dtype = c.dtype;
      s.root = q;
      s.count = counts[rank_ * world_ + q];
      HostView sv;
      sv.send = v.send + send_at(q) * es;
      calls.push_back(s);
      views.push_back(sv);
      CollectiveCall r = s;
      r.kind = CollectiveCall::kRecv;
      r.count = counts[q * world_ + rank_];
      HostView rv;
      rv.recv = v.recv + recv_at(q) * es;
      calls.push_back(r);
      views.push_back(std::move(rv));
    }
    // This rank's own block (SEND and RECV do not overlap: validated).
    const uint64_t own = counts[rank_ * world_ + rank_];
    if (own) std::memmove(v.recv + recv_at(rank_) * es, v.send + send_at(rank_) * es, own * es);
    std::vector<size_t> all(calls.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    run_p2p_hierarchical(calls, views, all, true);
  }

  // Sends and receives: this host's peers through the rings (run_p2p, with
  // local ranks), other hosts' over the TCP mesh, posted first so both
  // progress together.
  // COLLECTIVE: wait until the other hosts took this rank's messages (an
  // alltoall's), not only until they are buffered.
  void run_p2p_hierarchical(std::vector<CollectiveCall>& calls, std::vector<HostView>& views,
                            const std::vector<size_t>& which, bool collective = false) {
    const std::string what = which.size() > 1 ? "group of " + std::to_string(which.size()) + " send/recv"
                                               : std::string(kind_name(calls[which[0]].kind));
    std::vector<GlooTransport::Message> remote;
    std::vector<size_t> local;
    for (size_t i : which) {
      CollectiveCall& c = calls[i];
      if (topo_.host_of[c.root] == host_) {
        c.root = topo_.local_index(c.root);
        local.push_back(i);
        continue;
      }
      GlooTransport::Message m;
      m.send = c.kind == CollectiveCall::kSend;
      m.peer = c.root;
      m.dtype = c.dtype;
      m.count = c.count;
      m.tag = c.tag;
      m.internal = collective;
      m.data = views[i].send;
      m.out = views[i].recv;
      remote.push_back(m);
    }
    GlooTransport::Posted posted;
    if (!remote.empty()) posted = mesh_->post(remote, what);
    if (!local.empty()) run_p2p(calls, views, local, collective);
    try {
      if (!remote.empty()) mesh_->finish(posted, what, collective);
    } catch (const Error& e) {
      if (e.code() == HAL_STATUS_INVALID_ARGUMENT) set_error(e);  // the pair is broken
      throw;
    }
  }
#else
  void agree(const OpDescriptor&, const std::string&) {}
  void run_hierarchical(const CollectiveCall&, HostView&) { fail(HAL_STATUS_INTERNAL, "built without Gloo"); }
  void run_p2p_hierarchical(std::vector<CollectiveCall>&, std::vector<HostView>&, const std::vector<size_t>&, bool = false) {
    fail(HAL_STATUS_INTERNAL, "built without Gloo");
  }
#endif

  Device& device_;
  std::unique_ptr<ShmGroup> group_;  // null on the TCP transport
  std::string prefix_;  // shm name prefix for splits
  uint32_t rank_, world_;
  std::chrono::milliseconds timeout_;
  Topology topo_;
  uint32_t host_;                          // this rank's host
  std::string peers_;                      // peer_transports()
  std::unique_ptr<Tcp> mesh_;              // every rank, over TCP (more than one host)
  std::unique_ptr<Tcp> leaders_owned_;     // the hosts' leaders, when not every rank is one
  Tcp* leaders_ = nullptr;                 // set on a leader (more than one host)
  std::unique_ptr<Tcp> column_owned_;      // this rank's column, when it is not the leaders
  Tcp* column_ = nullptr;                  // the ranks of this local index on every host (uniform hosts)
  std::mutex run_mu_;   // one operation at a time (streams may differ)
  // Per ring peer: messages that came before a receive matching their tag
  // (run_p2p); guarded by run_mu_.
  std::map<uint32_t, std::deque<Unexpected>> unexpected_;
  // Deferred sends per ring peer, oldest first, and the thread moving them.
  std::mutex backlog_mu_;
  std::condition_variable backlog_cv_;
  std::map<uint32_t, std::deque<std::vector<unsigned char>>> backlog_;
  bool progress_stop_ = false;
  std::thread progress_;
  uint64_t round_ = 0, sequence_ = 0, splits_ = 0;
  CmaVerdict cma_ = kCmaUnknown;              // whether allreduce_in_place runs (reduce_all)
  std::vector<unsigned char> cma_scratch_;    // its peers' chunks; guarded by run_mu_
  PeerMappings peer_maps_;                    // guarded by run_mu_
  // This operation's peers' send and receive buffers where mapped, else
  // null (post_buffers); guarded by run_mu_.
  std::vector<unsigned char*> peer_send_, peer_recv_;
  bool said_mapping_ = false;
  mutable std::mutex error_mu_;
  std::optional<Error> error_;
  std::mutex inflight_mu_;
  std::condition_variable inflight_cv_;
  size_t inflight_ = 0;
};

}  // namespace hal::sdk::collective

#endif  // HAL_SDK_COLLECTIVE_HOST_COMMUNICATOR_HPP_
