// The host communicator's transports, in one process: cross-memory attach
// between the ranks of a shared-memory group (the probe at join, what a
// failed copy says and does), and, with Gloo, that no write to a peer that
// has gone raises a SIGPIPE that would kill a C++ host.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hal/sdk/collective/shm_transport.hpp"
#include "hal/sdk/host_memory.hpp"
#ifdef HAL_SDK_WITH_GLOO
#include <gloo/rendezvous/hash_store.h>

#include "hal/sdk/collective/gloo_transport.hpp"
#endif

namespace col = hal::sdk::collective;
using namespace std::chrono_literals;

namespace {

// Two ranks of one group in this process (threads), joined. The process
// reaches its own memory, so the probe succeeds unless HAL_COMM_CMA=0.
std::vector<std::unique_ptr<col::ShmGroup>> two_ranks(const std::string& tag) {
  const std::string name = "/hal-test-" + tag + "-" + std::to_string(getpid());
  std::vector<std::unique_ptr<col::ShmGroup>> g(2);
  g[0] = col::ShmGroup::map_segment(name, 2, 0, true, 5000ms, "test");
  g[1] = col::ShmGroup::map_segment(name, 2, 1, false, 5000ms, "test");
  std::thread other([&] { g[1]->join("test", [](const std::vector<uint32_t>&) {}); });
  g[0]->join("test", [](const std::vector<uint32_t>&) {});
  other.join();
  return g;
}

}  // namespace

TEST_CASE("cross-memory attach: the ranks probe each other at join, and a rank's copies reach its peer's memory") {
  auto g = two_ranks("cma");
  CHECK(g[0]->cma_failure().empty());
  CHECK(g[0]->cma_agreed());
  CHECK(g[1]->cma_agreed());
  std::vector<int32_t> theirs = {1, 2, 3, 4}, mine(4, 0);
  g[0]->peer_read(1, mine.data(), reinterpret_cast<uintptr_t>(theirs.data()), 16, "test");
  CHECK(mine == theirs);
  const std::vector<int32_t> back = {9, 8, 7, 6};
  g[0]->peer_write(1, back.data(), reinterpret_cast<uintptr_t>(theirs.data()) + 8, 8, "test");
  CHECK(theirs == std::vector<int32_t>{1, 2, 9, 8});
  CHECK_FALSE(g[1]->aborted());
}

TEST_CASE("cross-memory attach: a copy that fails names the peer and the errno, aborts the group, moves nothing") {
  auto g = two_ranks("cma-fault");
  std::vector<int32_t> mine = {5, 5};
  try {
    g[1]->peer_read(0, mine.data(), 0x10, 8, "allreduce #3");  // an unmapped address
    FAIL("no error");
  } catch (const hal::sdk::Error& e) {
    CHECK(e.code() == HAL_STATUS_DEVICE_ERROR);
    const std::string m = e.what();
    CHECK(m.find("allreduce #3: reading from rank 0's buffer (pid ") != std::string::npos);
    CHECK(m.find(std::strerror(EFAULT)) != std::string::npos);
  }
  CHECK(mine == std::vector<int32_t>{5, 5});
  CHECK(g[0]->aborted());  // the peer waiting at a step stops at once
}

TEST_CASE("cross-memory attach: HAL_COMM_CMA=0 on one rank (a process of its own) turns it off for the group") {
  const std::string name = "/hal-test-cma-off-" + std::to_string(getpid());
  auto g = col::ShmGroup::map_segment(name, 2, 0, true, 5000ms, "test");
  int go[2];
  REQUIRE(pipe(go) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // rank 1: joins under HAL_COMM_CMA=0, stays until rank 0 has probed it
    close(go[1]);
    setenv("HAL_COMM_CMA", "0", 1);
    int code = 1;
    try {
      auto mine = col::ShmGroup::map_segment(name, 2, 1, false, 5000ms, "test");
      mine->join("test", [](const std::vector<uint32_t>&) {});
      char byte;
      if (read(go[0], &byte, 1) == 1 && mine->cma_failure() == "HAL_COMM_CMA=0") code = 0;
    } catch (...) {
    }
    _exit(code);
  }
  close(go[0]);
  g->join("test", [](const std::vector<uint32_t>&) {});
  CHECK(g->cma_failure().empty());  // rank 0 reached rank 1's memory
  CHECK(write(go[1], "x", 1) == 1);
  close(go[1]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK_FALSE(g->cma_agreed());  // rank 1's verdict, published before its join returned
}

TEST_CASE("host memory: large allocations are memfds a peer can map, small ones and those past the descriptor share are not") {
  hal::sdk::SharedMemory f;
  auto small = hal::sdk::HostMemory::allocate(4096, 64);
  CHECK_FALSE(small.shared_memory(&f));
  auto big = hal::sdk::HostMemory::allocate(2u << 20, 64);
  REQUIRE(big.shared_memory(&f));
  CHECK(f.fd >= 0);
  CHECK(f.offset == 0);
  auto* p = static_cast<int32_t*>(big.data());
  p[0] = 7;
  p[(2u << 20) / 4 - 1] = 9;
  // A large allocation once descriptors are short (a quarter of the soft limit is ours): plain memory.
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit tight = old;
  tight.rlim_cur = 8;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  auto plain = hal::sdk::HostMemory::allocate(2u << 20, 64);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK_FALSE(plain.shared_memory(&f));
  static_cast<char*>(plain.data())[(2u << 20) - 1] = 1;  // and it is memory
  // Alignment past a page: plain memory, aligned.
  auto wide = hal::sdk::HostMemory::allocate(2u << 20, 1u << 16);
  CHECK(reinterpret_cast<uintptr_t>(wide.data()) % (1u << 16) == 0);
}

TEST_CASE("peer mappings: a peer's shared buffer mapped here is the same memory, a wrong file or range is refused") {
  auto mem = hal::sdk::HostMemory::allocate(4u << 20, 64);
  hal::sdk::SharedMemory f;
  REQUIRE(mem.shared_memory(&f));
  hal::sdk::SharedMemory r = f;
  r.offset += 4096;
  col::PeerMappings maps;
  maps.begin_operation();
  std::string failure;
  unsigned char* p = maps.map(1, getpid(), r, 1u << 20, &failure);
  REQUIRE(p != nullptr);
  CHECK(failure.empty());
  CHECK(p != static_cast<unsigned char*>(mem.data()) + 4096);  // another mapping...
  p[10] = 42;
  CHECK(static_cast<unsigned char*>(mem.data())[4096 + 10] == 42);  // ...of the same memory
  CHECK(maps.map(1, getpid(), r, 1u << 20, &failure) == p);          // kept
  CHECK(maps.size() == 1);

  hal::sdk::SharedMemory wrong = r;
  wrong.inode += 1;  // a descriptor number now naming another file
  CHECK(maps.map(2, getpid(), wrong, 16, &failure) == nullptr);
  CHECK(failure.find("is not the file rank 2 posted") != std::string::npos);
  hal::sdk::SharedMemory past = r;
  past.offset = (4u << 20) - 8;
  CHECK(maps.map(1, getpid(), past, 16, &failure) == nullptr);
  CHECK(failure.find("past the end of its file") != std::string::npos);
  hal::sdk::SharedMemory gone = r;
  gone.fd = 1 << 20;
  CHECK(maps.map(3, getpid(), gone, 16, &failure) == nullptr);
  CHECK(failure.find("/fd/1048576 failed") != std::string::npos);
  hal::sdk::SharedMemory none = r;
  none.fd = -1;
  CHECK(maps.map(1, getpid(), none, 16, &failure) == nullptr);
}

TEST_CASE("peer mappings: past the mapping count, the least recently used of earlier operations are unmapped") {
  std::vector<hal::sdk::HostMemory> files;
  col::PeerMappings maps;
  std::string failure;
  for (size_t i = 0; i < col::PeerMappings::kMaxMappings + 3; ++i) {
    files.push_back(hal::sdk::HostMemory::allocate(1u << 20, 64));
    hal::sdk::SharedMemory f;
    REQUIRE(files.back().shared_memory(&f));
    maps.begin_operation();
    REQUIRE(maps.map(0, getpid(), f, 1u << 20, &failure) != nullptr);
    CHECK(maps.size() <= col::PeerMappings::kMaxMappings);
  }
  CHECK(maps.size() == col::PeerMappings::kMaxMappings);
  // Within one operation nothing it uses is unmapped, even past the count.
  maps.begin_operation();
  std::vector<unsigned char*> held;
  for (size_t i = 0; i < files.size(); ++i) {
    hal::sdk::SharedMemory f;
    files[i].shared_memory(&f);
    held.push_back(maps.map(0, getpid(), f, 1u << 20, &failure));
    REQUIRE(held.back() != nullptr);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    held[i][5] = static_cast<unsigned char>(i);  // every pointer of this operation still mapped
    CHECK(static_cast<unsigned char*>(files[i].data())[5] == static_cast<unsigned char>(i));
  }
}

#ifdef HAL_SDK_WITH_GLOO

namespace {

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}
bool sigpipe_blocked() {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

// A write into a socket whose other end is closed: EPIPE, and a SIGPIPE.
int write_to_closed_socket() {
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  close(fds[1]);
  const char byte = 1;
  const ssize_t n = write(fds[0], &byte, 1);
  const int e = errno;
  close(fds[0]);
  return n < 0 ? e : 0;
}

// The threads of this process and whether each blocks SIGPIPE (/proc's SigBlk).
std::map<std::string, bool> threads_blocking_sigpipe() {
  std::map<std::string, bool> out;
  DIR* d = opendir("/proc/self/task");
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigBlk:", 0) == 0) out[e->d_name] = (std::stoull(line.substr(7), nullptr, 16) >> (SIGPIPE - 1)) & 1;
  }
  closedir(d);
  return out;
}

}  // namespace

TEST_CASE("SigpipeBlocked: a write to a closed socket is EPIPE, not a dead process, and nothing is left pending") {
  REQUIRE_FALSE(sigpipe_blocked());
  {
    col::detail::SigpipeBlocked guard;
    CHECK(sigpipe_blocked());
    CHECK(write_to_closed_socket() == EPIPE);
  }
  CHECK_FALSE(sigpipe_pending());
  CHECK_FALSE(sigpipe_blocked());  // the caller's mask again
}

TEST_CASE("SigpipeBlocked: a SIGPIPE that was pending before is the host's and stays pending") {
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  pthread_kill(pthread_self(), SIGPIPE);
  {
    col::detail::SigpipeBlocked guard;
    CHECK(write_to_closed_socket() == EPIPE);
  }
  CHECK(sigpipe_pending());
  CHECK(sigpipe_blocked());  // blocked by the caller before
  const timespec zero{0, 0};
  CHECK(sigtimedwait(&pipe, nullptr, &zero) == SIGPIPE);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST_CASE("GlooTransport: Gloo's own threads block SIGPIPE, and a peer gone is an error on the survivor") {
  const auto before = threads_blocking_sigpipe();
  gloo::rendezvous::HashStore store;
  setenv("HAL_SOCKET_IFNAME", "lo", 1);
  std::unique_ptr<col::GlooTransport> t[2];
  std::thread other([&] { t[1] = std::make_unique<col::GlooTransport>(store, 1, 2, 3000ms, "test"); });
  t[0] = std::make_unique<col::GlooTransport>(store, 0, 2, 3000ms, "test");
  other.join();
  unsetenv("HAL_SOCKET_IFNAME");
  CHECK_FALSE(sigpipe_blocked());  // this thread's mask is as it was
  size_t started = 0;
  for (const auto& [tid, blocks] : threads_blocking_sigpipe()) {
    if (before.count(tid)) continue;
    ++started;
    CHECK_MESSAGE(blocks, "thread " << tid << " started by Gloo does not block SIGPIPE");
  }
  CHECK(started >= 2);  // each device's event loop
  t[1].reset();         // rank 1 goes: its sockets close
  std::vector<float> x(1 << 20, 1.0f);
  hal::sdk::CollectiveCall c;
  c.kind = hal::sdk::CollectiveCall::kAllreduce;
  c.dtype = HAL_DTYPE_FLOAT32;
  c.op = HAL_REDUCE_SUM;
  c.count = x.size();
  bool failed = false;
  for (int i = 0; i < 5 && !failed; ++i) {
    try {
      t[0]->run(c, reinterpret_cast<unsigned char*>(x.data()), reinterpret_cast<unsigned char*>(x.data()), "test");
    } catch (const hal::sdk::Error& e) {
      failed = true;
      CHECK((e.code() == HAL_STATUS_ABORTED || e.code() == HAL_STATUS_TIMEOUT));
    }
  }
  CHECK(failed);
  CHECK_FALSE(sigpipe_pending());
}

#endif
