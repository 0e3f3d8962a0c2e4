// libhal's Communicator: the bitwise reductions of ABI 1.11 reach a plugin
// that negotiated 1.11 and are refused, before the plugin is called, for one
// that negotiated less (which would read them as unknown ops); the per-peer
// transports of ABI 1.12.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
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
