// The host communicator's transports, in one process: with Gloo, that no
// write to a peer that has gone raises a SIGPIPE that would kill a C++ host.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <pthread.h>
#include <sys/wait.h>
#include <signal.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
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

#ifdef HAL_SDK_WITH_GLOO
#include <gloo/rendezvous/hash_store.h>

#include "hal/sdk/collective/gloo_transport.hpp"
#endif

namespace col = hal::sdk::collective;
using namespace std::chrono_literals;

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

TEST_CASE("SigpipeBlocked: a write to a closed socket is EPIPE, not a dead process; nothing is left pending") {
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
