// HAL C++ SDK, collectives: the shared-memory transport between the
// processes of one host. Linux (POSIX shm, futex). Header-only.
//
// One segment per communicator, created by its first rank and unlinked as
// soon as every rank has mapped it, so no /dev/shm entry outlives the
// communicator's construction, whatever happens to the processes later.
// The segment holds, per rank, a step counter (a futex word), two
// operation descriptors and a data slot of two halves; and one byte ring
// per (sender, receiver) pair for point-to-point messages.
//
// step() is the one synchronisation: a rank bumps its counter and waits
// until every rank's counter reached its own. Collective algorithms write
// their slot half, step, then read the others'. Halves alternate per round,
// and a rank starts writing round R+2 only after a step of round R+1,
// which every rank enters only after its reads of round R: one step per
// round is enough.
//
// Waits spin briefly, then sleep on the futex; they give up with TIMEOUT
// after the communicator's timeout, or at once with ABORTED when the
// segment's abort flag is set (by comm_abort, by a rank that timed out, or
// by a rank that saw a peer's process exit), so no rank hangs.
#ifndef HAL_SDK_COLLECTIVE_SHM_TRANSPORT_HPP_
#define HAL_SDK_COLLECTIVE_SHM_TRANSPORT_HPP_

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "hal/collective.h"
#include "hal/sdk/buffer.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk::collective {

using Clock = std::chrono::steady_clock;

// ---- unique ids ----

// The layout of hal_comm_unique_id_t.bytes for this transport.
struct IdRecord {
  char magic[8];  // "HALSHM1"
  uint8_t nonce[16];
  uint64_t created_ns;  // CLOCK_REALTIME at creation
  uint32_t creator_pid;
  uint32_t checksum;  // FNV-1a of the bytes before it
};
static_assert(sizeof(IdRecord) <= HAL_COMM_UNIQUE_ID_BYTES);

inline uint32_t fnv1a(const void* data, size_t size) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; ++i) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 16777619u;
  return h;
}

inline hal_comm_unique_id_t make_unique_id() {
  IdRecord r{};
  std::memcpy(r.magic, "HALSHM1", 8);
  size_t got = 0;
  while (got < sizeof(r.nonce)) {
    ssize_t n = getrandom(r.nonce + got, sizeof(r.nonce) - got, 0);
    if (n < 0 && errno != EINTR) fail(HAL_STATUS_INTERNAL, "getrandom failed: ", std::strerror(errno));
    if (n > 0) got += static_cast<size_t>(n);
  }
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  r.created_ns = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  r.creator_pid = static_cast<uint32_t>(getpid());
  r.checksum = fnv1a(&r, offsetof(IdRecord, checksum));
  hal_comm_unique_id_t id{};
  std::memcpy(id.bytes, &r, sizeof(r));
  return id;
}

// Throws INVALID_ARGUMENT unless ID is one make_unique_id made.
inline IdRecord parse_unique_id(const hal_comm_unique_id_t& id) {
  IdRecord r;
  std::memcpy(&r, id.bytes, sizeof(r));
  if (std::memcmp(r.magic, "HALSHM1", 8) != 0 || r.checksum != fnv1a(&r, offsetof(IdRecord, checksum)))
    fail(HAL_STATUS_INVALID_ARGUMENT, "the unique id is not one comm_get_unique_id made (corrupt, or of another plugin)");
  for (size_t i = sizeof(r); i < HAL_COMM_UNIQUE_ID_BYTES; ++i)
    if (id.bytes[i] != 0) fail(HAL_STATUS_INVALID_ARGUMENT, "the unique id has trailing garbage at byte ", i);
  return r;
}

inline std::string hex(const uint8_t* data, size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < size; ++i) {
    s += digits[data[i] >> 4];
    s += digits[data[i] & 15];
  }
  return s;
}

inline uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// What decides whether two processes can share a segment: the boot id, the
// IPC namespace and the /dev/shm file system.
inline std::string shm_identity() {
  std::string key;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, key);
  char buf[128] = {};
  ssize_t n = readlink("/proc/self/ns/ipc", buf, sizeof(buf) - 1);
  if (n > 0) key.append(buf, static_cast<size_t>(n));
  struct stat shm{};
  if (stat("/dev/shm", &shm) == 0) key += ":" + std::to_string(static_cast<uint64_t>(shm.st_dev));
  return key;
}
inline uint64_t shm_key() { return fnv1a64(shm_identity()); }

// Identifies "this host" for transport selection: $HAL_COMM_HOST_ID when
// set, else the shared-memory identity above and the network namespace
// (ranks in different namespaces, or with their own /dev/shm, are different
// hosts).
inline uint64_t host_key() {
  if (const char* id = std::getenv("HAL_COMM_HOST_ID"); id != nullptr && *id != '\0')
    return fnv1a64(std::string("id:") + id);
  std::string key = shm_identity();
  char buf[128] = {};
  ssize_t n = readlink("/proc/self/ns/net", buf, sizeof(buf) - 1);
  if (n > 0) key.append(buf, static_cast<size_t>(n));
  return fnv1a64(key);
}

// ---- the host's bootstrap store ----

class Bootstrap {
 public:
  explicit Bootstrap(const hal_comm_bootstrap_t* b) : b_(b) {}
  void set(const std::string& key, const void* value, size_t size) const {
    take(b_->set(b_->context, key.c_str(), value, size), "set", key);
  }
  // The value of KEY, waiting up to TIMEOUT for it.
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) const {
    std::vector<uint8_t> value(256);
    size_t size = 0;
    take(b_->get(b_->context, key.c_str(), static_cast<uint64_t>(timeout.count()), value.data(), value.size(), &size),
         "get", key);
    if (size > value.size()) {
      value.resize(size);
      take(b_->get(b_->context, key.c_str(), 0, value.data(), value.size(), &size), "get", key);
    }
    value.resize(std::min(size, value.size()));
    return value;
  }

 private:
  static void take(hal_status_t* st, const char* what, const std::string& key) {
    if (st == nullptr) return;
    const uint32_t code = st->code;
    std::string message = st->message ? st->message : "";
    st->destroy(st);
    const uint32_t known = code == HAL_STATUS_OK || code >= HAL_STATUS_CODE_COUNT_ ? uint32_t{HAL_STATUS_INTERNAL} : code;
    fail(static_cast<hal_status_code_e>(known), "bootstrap ", what, "('", key, "') failed: ", message);
  }
  const hal_comm_bootstrap_t* b_;
};

// Whether process PID still runs: not gone, and not a zombie waiting for
// its parent to reap it (it will never reach another step).
inline bool process_alive(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no procfs: assume alive
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

// ---- futex ----

inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::microseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000), static_cast<long>(timeout.count() % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
inline void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// ---- the segment ----

// What every rank posts for the operation it is in, compared across ranks
// at the operation's first step.
struct OpDescriptor {
  uint64_t sequence;  // operations issued on this communicator so far
  uint64_t count;
  uint32_t kind, dtype, op, root;
  bool operator==(const OpDescriptor& o) const {
    return sequence == o.sequence && count == o.count && kind == o.kind && dtype == o.dtype && op == o.op &&
           root == o.root;
  }
};

struct alignas(128) RankControl {
  std::atomic<uint32_t> step;
  std::atomic<int32_t> pid;
  OpDescriptor descriptor[2];
  // This rank's buffers of the operation posted in each half (addresses in
  // its own process, for cross-memory attach); not compared.
  uint64_t send_address[2], recv_address[2];
  // The same buffers' files (Buffer::shared_memory, the fd in this rank's
  // process), for the peers to map; fd -1 if not shareable.
  SharedMemory send_file[2], recv_file[2];
  // A word of this rank's memory and its value, read by the peers at join
  // to tell whether cross-memory attach reaches this process; then this
  // rank's own verdict on its peers (CmaVerdict).
  uint64_t probe_address, probe_value;
  std::atomic<uint32_t> cma;
};
static_assert(sizeof(RankControl) == 256);

enum CmaVerdict : uint32_t { kCmaUnknown = 0, kCmaWorks = 1, kCmaUnavailable = 2 };

struct alignas(128) Channel {  // SEND side writes head, RECV side tail (bytes, monotonic)
  std::atomic<uint64_t> head;
  std::atomic<uint32_t> head_seq;  // futex word bumped with head
  char pad[116];
  std::atomic<uint64_t> tail;
  std::atomic<uint32_t> tail_seq;
};

struct SegmentHeader {
  char magic[8];  // "HALSEG1"
  uint32_t world_size;
  uint32_t reserved;
  uint64_t half_bytes, channel_bytes, total_bytes;
  std::atomic<uint32_t> attached;  // futex word
  std::atomic<uint32_t> aborted;   // 0, or 1 + the rank that aborted
  char abort_reason[512];
  std::atomic<uint32_t> reason_lock;
};

// Peers' shareable buffers (SharedMemory, as posted) mapped into this process, keyed
// by rank and file identity. A file is opened through /proc/<pid>/fd (the
// same ptrace-level access as cross-memory attach), checked to be the file
// the peer posted, mapped whole and closed; mappings stay for later
// operations on the same buffers. Past kBudgetBytes or kMaxMappings, those
// least recently used, and not by the current operation, are unmapped (a
// mapping keeps a buffer its owner freed alive until then). One thread at
// a time (the communicator's lock).
class PeerMappings {
 public:
  static constexpr uint64_t kBudgetBytes = 1ull << 30;
  static constexpr size_t kMaxMappings = 64;

  PeerMappings() = default;
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;
  ~PeerMappings() {
    for (auto& [key, m] : maps_) munmap(m.base, m.size);
  }

  // Starts an operation: mappings used from here on are kept until the next.
  void begin_operation() { ++clock_; }
  // Byte 0 of the BYTES-byte buffer R of rank PEER (process PID) in this
  // process, or nullptr if it cannot be mapped (why: in FAILURE).
  unsigned char* map(uint32_t peer, int32_t pid, const SharedMemory& r, uint64_t bytes, std::string* failure) {
    if (r.fd < 0) return nullptr;
    const auto key = std::make_tuple(peer, r.device, r.inode);
    auto it = maps_.find(key);
    if (it == maps_.end()) {
      const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(r.fd);
      const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) {
        *failure = "opening " + path + " failed: " + std::strerror(errno);
        return nullptr;
      }
      struct stat st{};
      void* p = MAP_FAILED;
      if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_dev) != r.device ||
          static_cast<uint64_t>(st.st_ino) != r.inode)
        *failure = path + " is not the file rank " + std::to_string(peer) + " posted";
      else if ((p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
               MAP_FAILED)
        *failure = "mapping " + path + " failed: " + std::strerror(errno);
      close(fd);
      if (p == MAP_FAILED) return nullptr;
      evict();
      it = maps_.emplace(key, Mapping{static_cast<unsigned char*>(p), static_cast<size_t>(st.st_size), 0}).first;
      total_ += it->second.size;
    }
    Mapping& m = it->second;
    if (r.offset + bytes > m.size) {
      *failure = "rank " + std::to_string(peer) + "'s buffer lies past the end of its file";
      return nullptr;
    }
    m.used = clock_;
    return m.base + r.offset;
  }
  size_t size() const { return maps_.size(); }

 private:
  struct Mapping {
    unsigned char* base;
    size_t size;
    uint64_t used;  // clock_ at the last use
  };
  void evict() {
    while (total_ > kBudgetBytes || maps_.size() >= kMaxMappings) {
      auto oldest = maps_.end();
      for (auto it = maps_.begin(); it != maps_.end(); ++it)
        if (it->second.used < clock_ && (oldest == maps_.end() || it->second.used < oldest->second.used)) oldest = it;
      if (oldest == maps_.end()) return;  // all in use by this operation
      munmap(oldest->second.base, oldest->second.size);
      total_ -= oldest->second.size;
      maps_.erase(oldest);
    }
  }
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, Mapping> maps_;
  uint64_t clock_ = 1, total_ = 0;
};

class ShmGroup {
 public:
  // Per-rank slot half and p2p ring sizes: a round moves up to half_bytes
  // per rank. Kept small for large worlds (the segment is world * 2 halves
  // plus world^2 rings).
  static uint64_t default_half_bytes(uint32_t world) { return world <= 8 ? (1u << 20) : (256u << 10); }
  static uint64_t default_channel_bytes(uint32_t world) { return world <= 8 ? (256u << 10) : (32u << 10); }

  // The segment NAME for WORLD ranks, created (CREATOR: O_EXCL; NAME empty:
  // private memory, for world 1) or opened. Call join() next.
  static std::unique_ptr<ShmGroup> map_segment(const std::string& name, uint32_t world, uint32_t rank, bool creator,
                                               std::chrono::milliseconds timeout, const std::string& what) {
    std::unique_ptr<ShmGroup> g(new ShmGroup());
    g->world_ = world;
    g->rank_ = rank;
    g->timeout_ = timeout;
    const uint64_t half = default_half_bytes(world), chan = default_channel_bytes(world);
    g->layout(half, chan);
    if (name.empty()) {
      void* p = mmap(nullptr, g->total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) fail(HAL_STATUS_OUT_OF_MEMORY, "mmap of ", g->total_, " bytes failed: ", std::strerror(errno));
      g->base_ = static_cast<unsigned char*>(p);
      g->init_header(half, chan);
    } else if (creator) {
      int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) fail(HAL_STATUS_DEVICE_ERROR, what, ": shm_open('", name, "') failed: ", std::strerror(errno));
      g->name_ = name;  // unlinked by the destructor until join() succeeds
      g->owns_name_ = true;
      if (ftruncate(fd, static_cast<off_t>(g->total_)) != 0) {
        int e = errno;
        close(fd);
        fail(HAL_STATUS_OUT_OF_MEMORY, what, ": sizing shared memory '", name, "' to ", g->total_, " bytes failed: ",
             std::strerror(e));
      }
      g->map(fd, name);
      g->init_header(half, chan);
    } else {
      // The creator publishes the name only after creating it, so a name
      // that is gone comes from a stale id.
      int fd = shm_open(name.c_str(), O_RDWR, 0);
      if (fd < 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": the communicator's shared memory '", name,
             "' does not exist (", std::strerror(errno),
             "): a stale unique id, whose communicator already started or ended");
      struct stat st{};
      if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < g->total_) {
        close(fd);
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": shared memory '", name, "' is smaller than a ", world,
             "-rank segment: another job's, or world sizes differ");
      }
      g->map(fd, name);
      const SegmentHeader* h = g->header();
      if (std::memcmp(h->magic, "HALSEG1", 8) != 0 || h->world_size != world)
        fail(HAL_STATUS_INVALID_ARGUMENT, what, ": shared memory '", name, "' belongs to a communicator of ",
             h->world_size, " ranks, not ", world);
    }
    return g;
  }

  // Marks this rank attached and waits until all are; the creator then
  // unlinks the name. TIMEOUT names the ranks that never came (ON_TIMEOUT,
  // if set, may throw a more precise error first).
  template <class OnTimeout>
  void join(const std::string& what, OnTimeout&& on_timeout) {
    join(what, on_timeout, [](const std::vector<uint32_t>&) {});
  }
  // As above; POLL(the ranks not attached yet) runs every 100 ms while
  // waiting and may throw (a peer known to have failed).
  template <class OnTimeout, class Poll>
  void join(const std::string& what, OnTimeout&& on_timeout, Poll&& poll) {
    probe_token_ = reinterpret_cast<uintptr_t>(this) ^ (static_cast<uint64_t>(getpid()) << 32) ^ 0x9e3779b97f4a7c15ull;
    rank_control(rank_).probe_address = reinterpret_cast<uintptr_t>(&probe_token_);
    rank_control(rank_).probe_value = probe_token_;
    rank_control(rank_).pid.store(static_cast<int32_t>(getpid()), std::memory_order_release);
    SegmentHeader* h = header();
    h->attached.fetch_add(1, std::memory_order_acq_rel);
    futex_wake_all(&h->attached);
    const auto deadline = Clock::now() + timeout_;
    auto next_poll = Clock::now() + std::chrono::milliseconds(100);
    const auto missing = [&] {
      std::vector<uint32_t> m;
      for (uint32_t r = 0; r < world_; ++r)
        if (rank_control(r).pid.load() == 0) m.push_back(r);
      return m;
    };
    for (;;) {
      uint32_t n = h->attached.load(std::memory_order_acquire);
      if (n >= world_) break;
      throw_if_aborted(what);
      if (Clock::now() > next_poll) {
        next_poll = Clock::now() + std::chrono::milliseconds(100);
        poll(missing());
      }
      if (Clock::now() > deadline) {
        std::vector<uint32_t> missing;
        std::string names;
        for (uint32_t r = 0; r < world_; ++r)
          if (rank_control(r).pid.load() == 0) {
            missing.push_back(r);
            names += (names.empty() ? "" : ", ") + std::to_string(r);
          }
        const std::string why = what + ": rank(s) " + names + " did not join within " +
                                std::to_string(timeout_.count()) + " ms";
        abort(why);
        on_timeout(missing);
        fail(HAL_STATUS_TIMEOUT, why);
      }
      futex_wait(&h->attached, n, std::chrono::milliseconds(5));
    }
    if (owns_name_) {
      shm_unlink(name_.c_str());
      owns_name_ = false;
    }
    cma_failure_ = probe_peers();
    rank_control(rank_).cma.store(cma_failure_.empty() ? kCmaWorks : kCmaUnavailable, std::memory_order_release);
  }

  // ---- cross-memory attach (CMA) ----
  //
  // process_vm_readv/writev copy between this process's memory and a
  // peer's in one kernel copy, so a collective can read its peers' buffers
  // in place instead of passing every byte through the segment. It needs
  // ptrace-level access to the peer (the same user where Yama's
  // ptrace_scope is 0, or CAP_SYS_PTRACE; container seccomp profiles may
  // refuse it) and the peer's pid in this PID namespace, so each rank
  // probes its peers at join and publishes its verdict.

  // Whether every rank found every peer reachable. Each rank publishes its
  // verdict before it leaves join, so after any step of the group all
  // ranks read the same verdicts and agree. $HAL_COMM_CMA=0 on a rank
  // turns CMA off for its groups.
  bool cma_agreed() const {
    for (uint32_t r = 0; r < world_; ++r)
      if (rank_control(r).cma.load(std::memory_order_acquire) != kCmaWorks) return false;
    return world_ > 1;
  }
  // Why this rank found CMA unusable at join ("HAL_COMM_CMA=0", a failed
  // process_vm_readv with its errno, ...), or empty.
  const std::string& cma_failure() const { return cma_failure_; }
  uint64_t& send_address(uint32_t r, uint32_t half) const { return rank_control(r).send_address[half]; }
  uint64_t& recv_address(uint32_t r, uint32_t half) const { return rank_control(r).recv_address[half]; }
  SharedMemory& send_file(uint32_t r, uint32_t half) const { return rank_control(r).send_file[half]; }
  SharedMemory& recv_file(uint32_t r, uint32_t half) const { return rank_control(r).recv_file[half]; }
  int32_t pid(uint32_t r) const { return rank_control(r).pid.load(std::memory_order_acquire); }

  // Copies BYTES from address REMOTE of rank PEER's process to LOCAL
  // (peer_read), or from LOCAL to REMOTE (peer_write). Throws DEVICE_ERROR
  // naming the peer, its pid and the errno (ESRCH: the peer exited) after
  // aborting the group, so the others stop waiting for this rank.
  void peer_read(uint32_t peer, void* local, uint64_t remote, size_t bytes, const std::string& what) {
    peer_copy(peer, false, local, remote, bytes, what);
  }
  void peer_write(uint32_t peer, const void* local, uint64_t remote, size_t bytes, const std::string& what) {
    peer_copy(peer, true, const_cast<void*>(local), remote, bytes, what);  // iovec's pointer is not const
  }

  ~ShmGroup() {
    if (owns_name_) shm_unlink(name_.c_str());
    if (base_ != nullptr) munmap(base_, total_);
  }
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  uint32_t rank() const { return rank_; }
  uint32_t world() const { return world_; }
  uint64_t half_bytes() const { return half_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  unsigned char* slot(uint32_t r, uint32_t half) const { return base_ + slots_ + (2ull * r + half) * half_; }
  OpDescriptor& descriptor(uint32_t r, uint32_t half) const { return rank_control(r).descriptor[half]; }

  // Bumps this rank's counter and waits until every rank's reached it.
  // WHAT names the operation for errors.
  void step(const std::string& what) {
    RankControl& me = rank_control(rank_);
    const uint32_t target = me.step.fetch_add(1, std::memory_order_acq_rel) + 1;
    futex_wake_all(&me.step);
    const auto deadline = Clock::now() + timeout_;
    for (uint32_t q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      wait_for([&] { return static_cast<int32_t>(rank_control(q).step.load(std::memory_order_acquire) - target) >= 0; },
               &rank_control(q).step, deadline, what, q);
    }
  }

  // Waits until READY() holds, sleeping on WORD between checks; throws
  // ABORTED / TIMEOUT (aborting the group) as described at the top.
  template <class Ready>
  void wait_for(Ready&& ready, std::atomic<uint32_t>* word, Clock::time_point deadline, const std::string& what,
                uint32_t peer) {
    for (int spin = 0; spin < 256; ++spin) {
      if (ready()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    auto next_liveness = Clock::now() + std::chrono::milliseconds(50);
    for (;;) {
      const uint32_t seen = word->load(std::memory_order_acquire);
      if (ready()) return;
      throw_if_aborted(what);
      const auto now = Clock::now();
      if (now >= next_liveness) {
        next_liveness = now + std::chrono::milliseconds(50);
        const int32_t pid = rank_control(peer).pid.load(std::memory_order_acquire);
        if (pid > 0 && !process_alive(pid)) {
          std::string why = what + ": rank " + std::to_string(peer) + " (pid " + std::to_string(pid) +
                            ") exited while rank " + std::to_string(rank_) + " waited for it";
          abort(why);
          fail(HAL_STATUS_ABORTED, why);
        }
      }
      if (now > deadline) {
        std::string why = what + ": rank " + std::to_string(rank_) + " timed out after " +
                          std::to_string(timeout_.count()) + " ms waiting for rank " + std::to_string(peer);
        abort(why);
        fail(HAL_STATUS_TIMEOUT, why);
      }
      futex_wait(word, seen, std::chrono::milliseconds(2));
    }
  }

  // Sets the abort flag (first reason wins) and wakes every waiter.
  void abort(const std::string& why) {
    SegmentHeader* h = header();
    uint32_t expected = 0;
    if (h->reason_lock.compare_exchange_strong(expected, 1)) {
      const size_t n = std::min(why.size(), sizeof(h->abort_reason) - 1);
      std::memcpy(h->abort_reason, why.data(), n);
      h->abort_reason[n] = '\0';
      h->aborted.store(1 + rank_, std::memory_order_release);
    }
    for (uint32_t r = 0; r < world_; ++r) futex_wake_all(&rank_control(r).step);
    futex_wake_all(&h->attached);
    for (uint32_t s = 0; s < world_; ++s)
      for (uint32_t d = 0; d < world_; ++d) {
        futex_wake_all(&channel(s, d).head_seq);
        futex_wake_all(&channel(s, d).tail_seq);
      }
  }
  bool aborted() const { return header()->aborted.load(std::memory_order_acquire) != 0; }
  void throw_if_aborted(const std::string& what) const {
    const uint32_t a = header()->aborted.load(std::memory_order_acquire);
    if (a == 0) return;
    fail(HAL_STATUS_ABORTED, what, ": the communicator was aborted by rank ", a - 1, ": ", header()->abort_reason);
  }

  // ---- point to point ----

  Channel& channel(uint32_t src, uint32_t dst) const {
    return *reinterpret_cast<Channel*>(base_ + channels_ + (static_cast<uint64_t>(src) * world_ + dst) * sizeof(Channel));
  }
  unsigned char* ring(uint32_t src, uint32_t dst) const {
    return base_ + rings_ + (static_cast<uint64_t>(src) * world_ + dst) * chan_;
  }
  uint64_t channel_bytes() const { return chan_; }

  // Moves as many bytes as fit into the ring to DST; returns how many.
  size_t try_send(uint32_t dst, const unsigned char* data, size_t size) {
    Channel& c = channel(rank_, dst);
    const uint64_t head = c.head.load(std::memory_order_relaxed), tail = c.tail.load(std::memory_order_acquire);
    const size_t n = std::min<uint64_t>(size, chan_ - (head - tail));
    if (n == 0) return 0;
    ring_write(ring(rank_, dst), head, data, n);
    c.head.store(head + n, std::memory_order_release);
    c.head_seq.fetch_add(1, std::memory_order_release);
    futex_wake_all(&c.head_seq);
    return n;
  }
  // Sleeps until the ring to DST has room, or TIMEOUT passed, or the group
  // was aborted (a send's progress wait, without spinning).
  void wait_for_room(uint32_t dst, std::chrono::microseconds timeout) {
    Channel& c = channel(rank_, dst);
    const uint32_t seen = c.tail_seq.load(std::memory_order_acquire);
    if (c.head.load(std::memory_order_relaxed) - c.tail.load(std::memory_order_acquire) < chan_ || aborted()) return;
    futex_wait(&c.tail_seq, seen, timeout);
  }
  // Whether rank PEER's process is known to have exited.
  bool exited(uint32_t peer) const {
    const int32_t pid = rank_control(peer).pid.load(std::memory_order_acquire);
    return pid > 0 && !process_alive(pid);
  }

  // Moves as many bytes as are there from SRC's ring; returns how many.
  size_t try_recv(uint32_t src, unsigned char* data, size_t size) {
    Channel& c = channel(src, rank_);
    const uint64_t tail = c.tail.load(std::memory_order_relaxed), head = c.head.load(std::memory_order_acquire);
    const size_t n = std::min<uint64_t>(size, head - tail);
    if (n == 0) return 0;
    ring_read(ring(src, rank_), tail, data, n);
    c.tail.store(tail + n, std::memory_order_release);
    c.tail_seq.fetch_add(1, std::memory_order_release);
    futex_wake_all(&c.tail_seq);
    return n;
  }

 private:
  ShmGroup() = default;

  void peer_copy(uint32_t peer, bool write, void* local, uint64_t remote, size_t bytes, const std::string& what) {
    const int32_t pid = rank_control(peer).pid.load(std::memory_order_acquire);
    size_t done = 0;
    while (done < bytes) {
      iovec l{static_cast<unsigned char*>(local) + done, bytes - done};
      iovec r{reinterpret_cast<void*>(static_cast<uintptr_t>(remote + done)), bytes - done};
      const ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
      if (n <= 0) {
        const int e = n < 0 ? errno : EFAULT;
        if (e == EINTR) continue;
        const std::string why = what + ": " + (write ? "writing to" : "reading from") + " rank " +
                                std::to_string(peer) + "'s buffer (pid " + std::to_string(pid) +
                                ") failed: " + std::strerror(e) +
                                (e == ESRCH ? " (the process exited)" : "");
        abort(why);
        fail(HAL_STATUS_DEVICE_ERROR, why);
      }
      done += static_cast<size_t>(n);
    }
  }

  // Reads every peer's probe word through CMA (see cma_agreed): empty, or
  // why this rank cannot.
  std::string probe_peers() const {
    if (world_ < 2) return "one rank";
    if (const char* e = std::getenv("HAL_COMM_CMA"); e != nullptr && std::strcmp(e, "0") == 0)
      return "HAL_COMM_CMA=0";
    for (uint32_t q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      const RankControl& c = rank_control(q);
      uint64_t got = 0;
      iovec l{&got, sizeof(got)};
      iovec r{reinterpret_cast<void*>(static_cast<uintptr_t>(c.probe_address)), sizeof(got)};
      const int32_t pid = c.pid.load(std::memory_order_acquire);
      const ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
      if (n != sizeof(got))
        return "process_vm_readv of rank " + std::to_string(q) + " (pid " + std::to_string(pid) +
               ") failed: " + std::strerror(n < 0 ? errno : EFAULT);
      if (got != c.probe_value)
        return "pid " + std::to_string(pid) + " is not rank " + std::to_string(q) + "'s process here (another PID namespace?)";
    }
    return "";
  }

  void layout(uint64_t half, uint64_t chan) {
    const auto page = [](uint64_t x) { return (x + 4095) / 4096 * 4096; };
    half_ = half;
    chan_ = chan;
    ranks_ = page(sizeof(SegmentHeader));
    channels_ = ranks_ + page(world_ * sizeof(RankControl));
    slots_ = channels_ + page(static_cast<uint64_t>(world_) * world_ * sizeof(Channel));
    rings_ = slots_ + 2ull * world_ * half_;
    total_ = rings_ + static_cast<uint64_t>(world_) * world_ * chan_;
  }
  void map(int fd, const std::string& name) {
    void* p = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) fail(HAL_STATUS_OUT_OF_MEMORY, "mmap of shared memory '", name, "' failed: ", std::strerror(e));
    base_ = static_cast<unsigned char*>(p);
  }
  void init_header(uint64_t half, uint64_t chan) {
    SegmentHeader* h = header();
    h->world_size = world_;
    h->half_bytes = half;
    h->channel_bytes = chan;
    h->total_bytes = total_;
    std::memcpy(h->magic, "HALSEG1", 8);  // last: openers check it
  }
  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  RankControl& rank_control(uint32_t r) const {
    return *reinterpret_cast<RankControl*>(base_ + ranks_ + r * sizeof(RankControl));
  }
  // Copies N bytes into the ring at monotonic position POS (wrapping).
  void ring_write(unsigned char* ring, uint64_t pos, const unsigned char* data, size_t n) const {
    const size_t at = static_cast<size_t>(pos % chan_), first = std::min<size_t>(n, chan_ - at);
    std::memcpy(ring + at, data, first);
    std::memcpy(ring, data + first, n - first);
  }
  // Copies N bytes out of the ring from monotonic position POS (wrapping).
  void ring_read(const unsigned char* ring, uint64_t pos, unsigned char* data, size_t n) const {
    const size_t at = static_cast<size_t>(pos % chan_), first = std::min<size_t>(n, chan_ - at);
    std::memcpy(data, ring + at, first);
    std::memcpy(data + first, ring, n - first);
  }

  unsigned char* base_ = nullptr;
  uint64_t total_ = 0, half_ = 0, chan_ = 0, ranks_ = 0, channels_ = 0, slots_ = 0, rings_ = 0;
  uint32_t world_ = 1, rank_ = 0;
  std::chrono::milliseconds timeout_{0};
  std::string name_;
  bool owns_name_ = false;
  uint64_t probe_token_ = 0;  // read by the peers' probes (join)
  std::string cma_failure_;   // why this rank cannot reach its peers' memory (join), or empty
};

}  // namespace hal::sdk::collective

#endif  // HAL_SDK_COLLECTIVE_SHM_TRANSPORT_HPP_
