// libhal's Communicator: the bitwise reductions of ABI 1.11 reach a plugin
// that negotiated 1.11 and are refused, before the plugin is called, for one
// that negotiated less (which would read them as unknown ops); the per-peer
// transports of ABI 1.12; the send/recv tags of ABI 1.13, likewise refused
// for an older plugin.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "hal/runtime/communicator.hpp"
#include "hal/runtime/runtime.hpp"
#include "loader/loaded_plugin.hpp"
#include "testing/test_util.hpp"

using hal::testing::load_only;

namespace {

const std::string kCpu = HAL_TEST_CPU_PLUGIN;

// The CPU plugin alone, negotiated down to HOST_ABI_MINOR.
std::shared_ptr<hal::Runtime> cpu_runtime(uint32_t host_abi_minor) {
  hal::RuntimeOptions o;
  o.host_abi_minor = host_abi_minor;
  return load_only({kCpu}, o);
}

// A world of one: the reduction of one rank is its own input.
hal::Communicator solo(const std::shared_ptr<hal::Device>& d) {
  return hal::Communicator(d, 1, 0, hal::Communicator::unique_id(*d), nullptr, std::chrono::seconds(10));
}

}  // namespace

TEST_CASE("bitwise reductions run on a plugin of ABI 1.11 and are refused by the plugin for a float dtype") {
  auto rt = cpu_runtime(HAL_ABI_VERSION_MINOR);
  auto d = rt->default_device();
  REQUIRE(d->plugin().negotiated_minor >= 11);
  hal::Communicator comm = solo(d);
  const int32_t in[3] = {-3, 12, 7};
  hal::Buffer b = d->allocate(sizeof(in));
  b.copy_from_host(in, sizeof(in));
  for (hal_reduce_op_e op : {HAL_REDUCE_BAND, HAL_REDUCE_BOR, HAL_REDUCE_BXOR}) {
    comm.allreduce(b, b, 3, HAL_DTYPE_INT32, op);
    int32_t out[3] = {};
    b.copy_to_host(out, sizeof(out));
    CHECK(std::memcmp(out, in, sizeof(in)) == 0);
  }
  try {
    comm.allreduce(b, b, 3, HAL_DTYPE_FLOAT32, HAL_REDUCE_BOR);
    FAIL("bor of float32 was accepted");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_UNSUPPORTED_DTYPE);
    CHECK(std::string(e.what()).find("bor") != std::string::npos);
    CHECK(std::string(e.what()).find("float32") != std::string::npos);
  }
}

TEST_CASE("bitwise reductions are refused with UNIMPLEMENTED for a plugin that negotiated ABI 1.10") {
  auto rt = cpu_runtime(10);
  auto d = rt->default_device();
  REQUIRE(d->plugin().negotiated_minor == 10);
  hal::Communicator comm = solo(d);
  hal::Buffer b = d->allocate(16);
  for (auto kind : {HAL_COLLECTIVE_ALLREDUCE, HAL_COLLECTIVE_REDUCE, HAL_COLLECTIVE_REDUCE_SCATTER}) {
    hal::CollectiveCall c;
    c.kind = kind;
    c.dtype = HAL_DTYPE_INT32;
    c.op = HAL_REDUCE_BXOR;
    c.count = 2;
    c.send = c.recv = &b;
    try {
      comm.run(c);
      FAIL("bxor reached a 1.10 plugin");
    } catch (const hal::Error& e) {
      CHECK(e.code() == HAL_STATUS_UNIMPLEMENTED);
      CHECK(std::string(e.what()).find("bxor needs ABI 1.11") != std::string::npos);
      CHECK(std::string(e.what()).find("1.10") != std::string::npos);
    }
  }
  // The ops of 1.6 still run.
  comm.allreduce(b, b, 4, HAL_DTYPE_INT32, HAL_REDUCE_MAX);
}

TEST_CASE("each peer's transport (ABI 1.12): said per rank, and nothing written past an older caller's struct size") {
  auto rt = cpu_runtime(HAL_ABI_VERSION_MINOR);
  auto d = rt->default_device();
  hal::Communicator comm = solo(d);
  CHECK(comm.transport() == "shm");
  CHECK(comm.peer_transports() == std::vector<std::string>{"self"});
  // A caller built against 1.11 passes the struct without peer_transports: the plugin writes
  // up to that size and not a byte more.
  hal_comm_info_t info;
  std::memset(&info, 0xAB, sizeof(info));
  info.struct_size = offsetof(hal_comm_info_t, peer_transports);
  hal_comm_get_info_args_t args{sizeof(args), nullptr, comm.handle(), &info};
  hal::throw_if_error(d->plugin().collective.comm_get_info(&args));
  CHECK(info.world_size == 1);
  CHECK(std::string(info.transport) == "shm");
  const auto* tail = reinterpret_cast<const unsigned char*>(&info.peer_transports);
  for (size_t i = 0; i < sizeof(info.peer_transports); ++i) CHECK(tail[i] == 0xAB);
}

namespace {

// COUNT int32 elements: FIRST, FIRST + 1, ...
hal::Buffer ints(hal::Device& d, int32_t first, uint64_t count) {
  std::vector<int32_t> v(count);
  for (uint64_t i = 0; i < count; ++i) v[i] = first + static_cast<int32_t>(i);
  hal::Buffer b = d.allocate(count * 4);
  b.copy_from_host(v.data(), count * 4);
  return b;
}

std::vector<int32_t> host_ints(const hal::Buffer& b, uint64_t count) {
  std::vector<int32_t> v(count);
  b.copy_to_host(v.data(), count * 4);
  return v;
}

hal::CollectiveCall tagged(hal_collective_kind_e kind, const hal::Buffer& b, uint64_t count, uint64_t tag) {
  hal::CollectiveCall c;
  c.kind = kind;
  c.dtype = HAL_DTYPE_INT32;
  c.count = count;
  c.tag = tag;
  (kind == HAL_COLLECTIVE_SEND ? c.send : c.recv) = &b;
  return c;
}

}  // namespace

TEST_CASE("send/recv tags (ABI 1.13): a receive takes the oldest message of its tag, in or across operations") {
  auto rt = cpu_runtime(HAL_ABI_VERSION_MINOR);
  auto d = rt->default_device();
  hal::Communicator comm = solo(d);
  const hal::Buffer a = ints(*d, 100, 3), b = ints(*d, 200, 5), c = ints(*d, 300, 3);
  hal::Buffer ra = ints(*d, 0, 3), rb = ints(*d, 0, 5), rc = ints(*d, 0, 3);
  // Tags 1, 2, 1 sent; received as 2, 1, 1.
  const auto exchange = [&](uint64_t one, uint64_t two) {
    comm.run(tagged(HAL_COLLECTIVE_SEND, a, 3, one));
    comm.run(tagged(HAL_COLLECTIVE_SEND, b, 5, two));
    comm.run(tagged(HAL_COLLECTIVE_SEND, c, 3, one));
    comm.run(tagged(HAL_COLLECTIVE_RECV, rb, 5, two));
    comm.run(tagged(HAL_COLLECTIVE_RECV, ra, 3, one));
    comm.run(tagged(HAL_COLLECTIVE_RECV, rc, 3, one));
  };
  SUBCASE("across operations") { exchange(1, 2); }
  SUBCASE("in one group, receives issued in another order than the sends") {
    comm.group_start();
    exchange(1, 2);
    comm.group_end();
  }
  SUBCASE("negative tags (torch's int) are tags like any other") { exchange(static_cast<uint64_t>(int64_t{-1}), 0); }
  CHECK(host_ints(ra, 3) == std::vector<int32_t>{100, 101, 102});
  CHECK(host_ints(rb, 5) == std::vector<int32_t>{200, 201, 202, 203, 204});
  CHECK(host_ints(rc, 3) == std::vector<int32_t>{300, 301, 302});
}

TEST_CASE("send/recv tags: a caller of ABI 1.12 (no tag field) matches as tag 0, whatever lies past its struct") {
  auto rt = cpu_runtime(HAL_ABI_VERSION_MINOR);
  auto d = rt->default_device();
  hal::Communicator comm = solo(d);
  const hal::Buffer a = ints(*d, 7, 2);
  hal::Buffer ra = ints(*d, 0, 2);
  for (hal_collective_kind_e kind : {HAL_COLLECTIVE_SEND, HAL_COLLECTIVE_RECV}) {
    hal_collective_args_t args;
    std::memset(&args, 0xAB, sizeof(args));  // a tag of 0xABAB... past the caller's size
    args.struct_size = offsetof(hal_collective_args_t, tag);
    args.next = nullptr;
    args.comm = comm.handle();
    args.stream = nullptr;
    args.kind = kind;
    args.dtype = HAL_DTYPE_INT32;
    args.op = HAL_REDUCE_SUM;
    args.root = 0;
    args.count = 2;
    args.send = kind == HAL_COLLECTIVE_SEND ? a.handle() : nullptr;
    args.send_offset = 0;
    args.recv = kind == HAL_COLLECTIVE_RECV ? ra.handle() : nullptr;
    args.recv_offset = 0;
    args.send_counts = args.send_displs = args.recv_counts = args.recv_displs = nullptr;
    hal::throw_if_error(d->plugin().collective.collective(&args));
  }
  CHECK(host_ints(ra, 2) == std::vector<int32_t>{7, 8});
}

TEST_CASE("send/recv tags are refused with UNIMPLEMENTED for a plugin that negotiated ABI 1.12, and tag 0 still runs") {
  auto rt = cpu_runtime(12);
  auto d = rt->default_device();
  REQUIRE(d->plugin().negotiated_minor == 12);
  hal::Communicator comm = solo(d);
  const hal::Buffer a = ints(*d, 1, 2);
  hal::Buffer ra = ints(*d, 0, 2);
  for (auto kind : {HAL_COLLECTIVE_SEND, HAL_COLLECTIVE_RECV}) {
    try {
      comm.run(tagged(kind, kind == HAL_COLLECTIVE_SEND ? a : ra, 2, 9));
      FAIL("a tag reached a 1.12 plugin");
    } catch (const hal::Error& e) {
      CHECK(e.code() == HAL_STATUS_UNIMPLEMENTED);
      CHECK(std::string(e.what()).find("with tag 9 needs ABI 1.13") != std::string::npos);
      CHECK(std::string(e.what()).find("1.12") != std::string::npos);
    }
  }
  comm.run(tagged(HAL_COLLECTIVE_SEND, a, 2, 0));
  comm.run(tagged(HAL_COLLECTIVE_RECV, ra, 2, 0));
  CHECK(host_ints(ra, 2) == std::vector<int32_t>{1, 2});
}

TEST_CASE("send/recv tags: bad input") {
  auto rt = cpu_runtime(HAL_ABI_VERSION_MINOR);
  auto d = rt->default_device();
  const hal::Buffer a = ints(*d, 1, 4);
  hal::Buffer ra = ints(*d, -5, 4);
  // CALL must fail with CODE and a message holding each of NEEDLES, leaving RA as it was.
  const auto refused = [&](hal::Communicator& comm, const hal::CollectiveCall& call, hal_status_code_e code,
                           std::initializer_list<const char*> needles) {
    try {
      comm.run(call);
      FAIL("no error");
    } catch (const hal::Error& e) {
      CHECK(e.code() == code);
      for (const char* needle : needles) CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
    CHECK(host_ints(ra, 4) == std::vector<int32_t>{-5, -4, -3, -2});
  };
  SUBCASE("a receive of the tag with another count: INVALID_ARGUMENT naming both, receive buffer untouched") {
    hal::Communicator comm = solo(d);
    comm.run(tagged(HAL_COLLECTIVE_SEND, a, 2, 4));
    refused(comm, tagged(HAL_COLLECTIVE_RECV, ra, 3, 4), HAL_STATUS_INVALID_ARGUMENT,
            {"recv from rank 0 with tag 4: expected 3 int32 but rank 0 sent 2 int32"});
  }
  SUBCASE("a receive whose tag never comes: TIMEOUT naming the tag and the messages kept") {
    hal::Communicator comm(d, 1, 0, hal::Communicator::unique_id(*d), nullptr, std::chrono::milliseconds(300));
    comm.run(tagged(HAL_COLLECTIVE_SEND, a, 2, 9));
    refused(comm, tagged(HAL_COLLECTIVE_RECV, ra, 2, 8), HAL_STATUS_TIMEOUT,
            {"recv from rank 0 with tag 8 unmatched", "1 message(s) from rank 0 with other tags are kept"});
  }
}

TEST_CASE("a send larger than its ring completes before its receive is issued (the rest is deferred), in order") {
  auto rt = cpu_runtime(HAL_ABI_VERSION_MINOR);
  auto d = rt->default_device();
  hal::Communicator comm = solo(d);
  // 4 MiB and 2 MiB to itself: far more than a 256 KiB ring. Without deferral the first send
  // waits for a receive that this thread has not issued yet, until the timeout.
  const uint64_t big = 1u << 20, next = 1u << 19;
  const hal::Buffer a = ints(*d, 1, big), b = ints(*d, -7, next), c = ints(*d, 42, 3);
  hal::Buffer ra = ints(*d, 0, big), rb = ints(*d, 0, next), rc = ints(*d, 0, 3);
  comm.run(tagged(HAL_COLLECTIVE_SEND, a, big, 1));
  comm.run(tagged(HAL_COLLECTIVE_SEND, b, next, 2));  // queued behind the first
  comm.run(tagged(HAL_COLLECTIVE_SEND, c, 3, 1));
  comm.run(tagged(HAL_COLLECTIVE_RECV, rb, next, 2));
  comm.run(tagged(HAL_COLLECTIVE_RECV, ra, big, 1));
  comm.run(tagged(HAL_COLLECTIVE_RECV, rc, 3, 1));
  CHECK(host_ints(ra, big) == host_ints(a, big));
  CHECK(host_ints(rb, next) == host_ints(b, next));
  CHECK(host_ints(rc, 3) == std::vector<int32_t>{42, 43, 44});
}
