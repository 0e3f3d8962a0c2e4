#include "collectives/collective_suite.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "hal/common/dtype.hpp"
#include "hal/runtime/communicator.hpp"
#include "runner/storage.hpp"

extern char** environ;

namespace hal::conformance {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using cplx = std::complex<double>;

// ---- host values of any dtype ----

const char* reduce_name(hal_reduce_op_e op) {
  static const char* const names[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};
  return names[op];
}

bool is_complex(hal_dtype_e d) { return d == HAL_DTYPE_COMPLEX64 || d == HAL_DTYPE_COMPLEX128; }
bool is_bitwise(hal_reduce_op_e op) { return op == HAL_REDUCE_BAND || op == HAL_REDUCE_BOR || op == HAL_REDUCE_BXOR; }
bool is_signed_integer(hal_dtype_e d) {
  return d == HAL_DTYPE_INT8 || d == HAL_DTYPE_INT16 || d == HAL_DTYPE_INT32 || d == HAL_DTYPE_INT64;
}

void put(hal_dtype_e d, cplx v, void* p) {
  switch (d) {
    case HAL_DTYPE_UINT16: *static_cast<uint16_t*>(p) = static_cast<uint16_t>(v.real()); return;
    case HAL_DTYPE_UINT32: *static_cast<uint32_t*>(p) = static_cast<uint32_t>(v.real()); return;
    case HAL_DTYPE_UINT64: *static_cast<uint64_t*>(p) = static_cast<uint64_t>(v.real()); return;
    case HAL_DTYPE_COMPLEX64: *static_cast<std::complex<float>*>(p) = std::complex<float>(v); return;
    case HAL_DTYPE_COMPLEX128: *static_cast<cplx*>(p) = v; return;
    default: encode(d, v.real(), p);
  }
}
cplx get(hal_dtype_e d, const void* p) {
  switch (d) {
    case HAL_DTYPE_UINT16: return static_cast<double>(*static_cast<const uint16_t*>(p));
    case HAL_DTYPE_UINT32: return static_cast<double>(*static_cast<const uint32_t*>(p));
    case HAL_DTYPE_UINT64: return static_cast<double>(*static_cast<const uint64_t*>(p));
    case HAL_DTYPE_COMPLEX64: return cplx(*static_cast<const std::complex<float>*>(p));
    case HAL_DTYPE_COMPLEX128: return *static_cast<const cplx*>(p);
    default: return decode(d, p);
  }
}

// Rank R's element I: small values every dtype holds exactly, and whose
// sums (<= 5 * world) and products (1s and 2s) stay exact too. Bitwise ops:
// 7-bit patterns that differ between ranks, negative (high bits set) for
// signed dtypes.
cplx value(hal_dtype_e d, hal_reduce_op_e op, uint32_t r, uint64_t i) {
  if (d == HAL_DTYPE_BOOL) return (i + r) % 3 == 0 ? 1.0 : 0.0;
  if (is_bitwise(op)) {
    const double bits = static_cast<double>((i * 13 + r * 29 + 7) % 128);
    return is_signed_integer(d) ? bits - 64 : bits;
  }
  double v = op == HAL_REDUCE_PROD ? 1.0 + static_cast<double>((i + r) % 2) : 1.0 + static_cast<double>((i * 7 + r * 3) % 5);
  return is_complex(d) ? cplx(v, v - 3) : cplx(v, 0);
}

cplx combine(hal_dtype_e d, hal_reduce_op_e op, cplx a, cplx b) {
  if (d == HAL_DTYPE_BOOL) {
    const bool x = a.real() != 0, y = b.real() != 0;
    if (op == HAL_REDUCE_BXOR) return x != y;
    return (op == HAL_REDUCE_SUM || op == HAL_REDUCE_MAX || op == HAL_REDUCE_BOR) ? (x || y) : (x && y);
  }
  if (is_bitwise(op)) {  // on the values' int64 two's complement; narrower dtypes keep the low bits
    const int64_t x = std::llround(a.real()), y = std::llround(b.real());
    return static_cast<double>(op == HAL_REDUCE_BAND ? (x & y) : op == HAL_REDUCE_BOR ? (x | y) : (x ^ y));
  }
  switch (op) {
    case HAL_REDUCE_SUM: case HAL_REDUCE_AVG: return a + b;
    case HAL_REDUCE_PROD: return a * b;
    case HAL_REDUCE_MIN: return std::min(a.real(), b.real());
    default: return std::max(a.real(), b.real());
  }
}

// The reduction of element I over all ranks, as DTYPE would hold it.
cplx reduced(hal_dtype_e d, hal_reduce_op_e op, uint32_t world, uint64_t i) {
  cplx acc = value(d, op, 0, i);
  for (uint32_t r = 1; r < world; ++r) acc = combine(d, op, acc, value(d, op, r, i));
  if (op == HAL_REDUCE_AVG) {
    if (hal::common::is_floating(d) || is_complex(d)) acc /= static_cast<double>(world);
    else acc = std::trunc(acc.real() / world);
  }
  return acc;
}

bool close(hal_dtype_e d, cplx got, cplx want) {
  const double tol = d == HAL_DTYPE_FLOAT16 ? 2e-3 : d == HAL_DTYPE_BFLOAT16 ? 1e-2
                     : (d == HAL_DTYPE_FLOAT32 || d == HAL_DTYPE_COMPLEX64) ? 1e-6 : 1e-12;
  return std::abs(got - want) <= tol * std::max(1.0, std::abs(want));
}

// ---- one rank ----

class Rank {
 public:
  Rank(std::shared_ptr<hal::Device> device, const CollectiveOptions& o) : device_(std::move(device)), o_(o) {
    store_ = std::make_unique<hal::FileStore>(o.store_dir);
  }

  // The id rank 0 made, through the store (KEY: a fresh one per communicator).
  hal::CommUniqueId shared_id(const std::string& key) {
    if (o_.rank == 0) {
      hal::CommUniqueId id = hal::Communicator::unique_id(*device_);
      store_->set(key, std::vector<uint8_t>(id.bytes, id.bytes + sizeof(id.bytes)));
      return id;
    }
    auto bytes = store_->get(key, std::chrono::seconds(60));
    if (!bytes || bytes->size() != sizeof(hal::CommUniqueId::bytes))
      throw hal::Error(HAL_STATUS_TIMEOUT, "rank 0 did not publish '" + key + "'");
    hal::CommUniqueId id;
    std::memcpy(id.bytes, bytes->data(), sizeof(id.bytes));
    return id;
  }

  hal::Communicator join(const std::string& key, std::chrono::milliseconds timeout) {
    return hal::Communicator(device_, o_.world, static_cast<uint32_t>(o_.rank), shared_id(key), store_.get(), timeout);
  }

  hal::Buffer upload(const std::vector<uint8_t>& bytes) {
    hal::Buffer b = device_->allocate(std::max<size_t>(bytes.size(), 1));
    if (!bytes.empty()) b.copy_from_host(bytes.data(), bytes.size());
    return b;
  }
  std::vector<uint8_t> download(const hal::Buffer& b, size_t size) {
    std::vector<uint8_t> out(size);
    if (size) b.copy_to_host(out.data(), size);
    return out;
  }

  void check(const std::string& name, const std::function<void()>& body) {
    ++checks_;
    try {
      body();
    } catch (const std::exception& e) {
      ++failed_;
      std::printf("rank %d: FAILED %s: %s\n", o_.rank, name.c_str(), e.what());
      std::fflush(stdout);
    }
  }
  [[noreturn]] static void mismatch(const std::string& what, uint64_t i, cplx got, cplx want) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "%s: element %llu is (%g, %g), expected (%g, %g)", what.c_str(),
                  static_cast<unsigned long long>(i), got.real(), got.imag(), want.real(), want.imag());
    throw std::runtime_error(buf);
  }

  int suite(bool tcp = false);
  // VICTIM exits mid-job (status 3); the others must fail within the timeout.
  int kill_scenario(uint32_t victim);
  // comm_init must fail on every rank within the timeout (a job whose ranks
  // disagree on the host topology: tests/host_topology.py).
  int init_fails_scenario();
  int foreign_id_scenario();
  int stale_id_scenario();
  int mismatch_scenario();
  int abort_scenario();

  int summary(const char* scenario) {
    std::printf("rank %d: %s: %d checks, %d failed\n", o_.rank, scenario, checks_, failed_);
    std::fflush(stdout);
    return failed_ == 0 ? 0 : 1;
  }

 private:
  void reduction_check(hal::Communicator& comm, hal::Stream& stream, hal::CollectiveCall c, bool on_stream,
                       bool in_place);
  void data_check(hal::Communicator& comm, hal::Stream& stream, hal::CollectiveCall c, bool on_stream,
                  bool unequal = false);
  std::shared_ptr<hal::Device> device_;
  CollectiveOptions o_;
  std::unique_ptr<hal::FileStore> store_;
  int checks_ = 0, failed_ = 0;
};

std::vector<uint8_t> make_input(hal_dtype_e d, hal_reduce_op_e op, uint32_t r, uint64_t count, uint64_t base = 0) {
  const size_t es = hal::common::dtype_size(d);
  std::vector<uint8_t> out(count * es);
  for (uint64_t i = 0; i < count; ++i) put(d, value(d, op, r, base + i), out.data() + i * es);
  return out;
}

void Rank::reduction_check(hal::Communicator& comm, hal::Stream& stream, hal::CollectiveCall c, bool on_stream,
                           bool in_place) {
  const uint32_t world = o_.world, me = static_cast<uint32_t>(o_.rank);
  const size_t es = hal::common::dtype_size(c.dtype);
  const bool scatter = c.kind == HAL_COLLECTIVE_REDUCE_SCATTER;
  const uint64_t in_count = scatter ? c.count * world : c.count;
  hal::Buffer send = upload(make_input(c.dtype, c.op, me, in_count));
  std::vector<uint8_t> sentinel(c.count * es, 0xA5);
  hal::Buffer recv = upload(sentinel);
  c.send = &send;
  c.recv = in_place ? &send : &recv;
  comm.run(c, on_stream ? &stream : nullptr);
  if (on_stream) stream.synchronize();
  const std::vector<uint8_t> got = download(*c.recv, c.count * es);
  const bool receives = c.kind != HAL_COLLECTIVE_REDUCE || c.root == me;
  for (uint64_t i = 0; i < c.count; ++i) {
    const cplx g = get(c.dtype, got.data() + i * es);
    if (!receives) {
      if (std::memcmp(got.data() + i * es, sentinel.data(), es) != 0 && !in_place)
        mismatch("a non-root's receive buffer was written", i, g, 0);
      continue;
    }
    // The value as the dtype holds it (e.g. avg rounded to float16).
    std::vector<uint8_t> want_bytes(es);
    put(c.dtype, reduced(c.dtype, c.op, world, (scatter ? me * c.count : 0) + i), want_bytes.data());
    const cplx want = get(c.dtype, want_bytes.data());
    if (!close(c.dtype, g, want)) mismatch("result", i, g, want);
  }
}

void Rank::data_check(hal::Communicator& comm, hal::Stream& stream, hal::CollectiveCall c, bool on_stream,
                      bool unequal) {
  const uint32_t world = o_.world, me = static_cast<uint32_t>(o_.rank);
  const size_t es = hal::common::dtype_size(c.dtype);
  const hal_reduce_op_e op = HAL_REDUCE_SUM;  // value pattern
  // What rank R sends to rank P: the pattern of (R, P * 1000 + i).
  const auto element = [&](uint32_t r, uint64_t at) { return value(c.dtype, op, r, at); };
  uint64_t send_count = c.count, recv_count = c.count;
  std::vector<uint64_t> sc, sd, rc, rd;
  if (c.kind == HAL_COLLECTIVE_ALLGATHER) recv_count = c.count * world;
  if (c.kind == HAL_COLLECTIVE_ALLTOALL) {
    if (unequal) {
      // Rank R sends (R + P) % 3 + count elements to P, packed, with one gap element.
      uint64_t at = 0;
      for (uint32_t p = 0; p < world; ++p) {
        sc.push_back((me + p) % 3 + c.count);
        sd.push_back(at);
        at += sc.back() + 1;
      }
      send_count = at;
      at = 0;
      for (uint32_t p = 0; p < world; ++p) {
        rc.push_back((p + me) % 3 + c.count);
        rd.push_back(at);
        at += rc.back() + 1;
      }
      recv_count = at;
      c.send_counts = sc, c.send_displs = sd, c.recv_counts = rc, c.recv_displs = rd;
    } else {
      send_count = recv_count = c.count * world;
    }
  }
  std::vector<uint8_t> in(send_count * es);
  for (uint64_t i = 0; i < send_count; ++i) put(c.dtype, element(me, i), in.data() + i * es);
  hal::Buffer send = upload(in);
  std::vector<uint8_t> sentinel(recv_count * es, 0x5A);
  hal::Buffer recv = upload(sentinel);
  c.send = &send;
  c.recv = &recv;
  if (c.kind == HAL_COLLECTIVE_BROADCAST) c.recv = me == c.root ? nullptr : &recv;
  comm.run(c, on_stream ? &stream : nullptr);
  if (on_stream) stream.synchronize();
  if (c.kind == HAL_COLLECTIVE_BROADCAST && me == c.root) return;
  const std::vector<uint8_t> got = download(recv, recv_count * es);
  const auto expect = [&](uint64_t i, cplx want) {
    std::vector<uint8_t> w(es);
    put(c.dtype, want, w.data());
    if (std::memcmp(got.data() + i * es, w.data(), es) != 0) mismatch("result", i, get(c.dtype, got.data() + i * es), want);
  };
  switch (c.kind) {
    case HAL_COLLECTIVE_BROADCAST:
      for (uint64_t i = 0; i < c.count; ++i) expect(i, element(c.root, i));
      break;
    case HAL_COLLECTIVE_ALLGATHER:
      for (uint32_t r = 0; r < world; ++r)
        for (uint64_t i = 0; i < c.count; ++i) expect(r * c.count + i, element(r, i));
      break;
    case HAL_COLLECTIVE_ALLTOALL:
      for (uint32_t p = 0; p < world; ++p) {
        // Rank P's block for me starts at its send displacement for me.
        uint64_t p_at = 0;
        if (!rc.empty()) {
          for (uint32_t q = 0; q < me; ++q) p_at += (p + q) % 3 + c.count + 1;
        } else {
          p_at = me * c.count;
        }
        const uint64_t n = rc.empty() ? c.count : rc[p], at = rc.empty() ? p * c.count : rd[p];
        for (uint64_t i = 0; i < n; ++i) expect(at + i, element(p, p_at + i));
        if (!rc.empty())
          if (std::memcmp(got.data() + (at + n) * es, sentinel.data(), es) != 0)
            mismatch("the gap after block " + std::to_string(p) + " was written", at + n, 0, 0);
      }
      break;
    default: break;
  }
}

int Rank::suite(bool tcp) {
  hal::Communicator comm = join("suite/id", std::chrono::seconds(120));
  const std::vector<std::string> peers = comm.peer_transports();
  std::string peer_list;
  for (size_t r = 0; r < peers.size(); ++r) peer_list += (r ? ", " : "") + std::to_string(r) + " " + peers[r];
  std::printf("rank %d: transport %s; peers: %s\n", o_.rank, comm.transport().c_str(),
              peers.empty() ? "(not said)" : peer_list.c_str());
  check("each peer's transport is said and agrees with the communicator's", [&] {
    // ABI 1.12: one entry per rank, "self" here; "shm" means one host, "tcp" one rank per host.
    if (peers.size() != o_.world) throw std::runtime_error(std::to_string(peers.size()) + " entries for " + std::to_string(o_.world) + " ranks");
    size_t shm = 0, net = 0;
    for (size_t r = 0; r < peers.size(); ++r) {
      if ((static_cast<int>(r) == o_.rank) != (peers[r] == "self")) throw std::runtime_error("rank " + std::to_string(r) + " is '" + peers[r] + "'");
      shm += peers[r] == "shm";
      net += peers[r] == "tcp";
    }
    const std::string t = comm.transport();
    if (shm + net != o_.world - 1 || (t == "shm" && net) || (t == "tcp" && shm) || (t == "shm+tcp" && !net))
      throw std::runtime_error("transport '" + t + "' with peers " + peer_list);
  });
  if (tcp) {
    check("the ranks talk over TCP", [&] {
      if (comm.transport() != "tcp" && comm.transport() != "shm+tcp")
        throw std::runtime_error("transport is '" + comm.transport() + "'");
    });
  }
  hal::Stream stream = device_->create_stream();
  const uint32_t world = o_.world;
  const std::vector<uint64_t> sizes = {1, 7, 4099, 300001};
  int n = 0;
  const auto tag = [&](const char* kind, hal_dtype_e d, const std::string& extra, uint64_t count) {
    return std::string(kind) + " " + hal::common::dtype_name(d) + (extra.empty() ? "" : " " + extra) + " count " +
           std::to_string(count);
  };
  for (int d = HAL_DTYPE_FLOAT32; d < HAL_DTYPE_COUNT_; ++d) {
    const auto dt = static_cast<hal_dtype_e>(d);
    for (uint64_t count : sizes) {
      if (hal::common::dtype_size(dt) >= 8 && count > 5000 && dt != HAL_DTYPE_FLOAT64) continue;  // keep it quick
      for (int op = 0; op < HAL_REDUCE_OP_COUNT_; ++op) {
        const auto rop = static_cast<hal_reduce_op_e>(op);
        if (is_complex(dt) && (rop == HAL_REDUCE_MIN || rop == HAL_REDUCE_MAX)) continue;
        if (dt == HAL_DTYPE_BOOL && rop == HAL_REDUCE_AVG) continue;
        if (is_bitwise(rop) && (hal::common::is_floating(dt) || is_complex(dt))) continue;
        for (auto kind : {HAL_COLLECTIVE_ALLREDUCE, HAL_COLLECTIVE_REDUCE, HAL_COLLECTIVE_REDUCE_SCATTER}) {
          if (kind != HAL_COLLECTIVE_ALLREDUCE && count > 5000 && rop != HAL_REDUCE_SUM) continue;
          hal::CollectiveCall c;
          c.kind = kind;
          c.dtype = dt;
          c.op = rop;
          c.count = count;
          c.root = kind == HAL_COLLECTIVE_REDUCE ? (n % world) : 0;
          const bool in_place = kind == HAL_COLLECTIVE_ALLREDUCE && n % 3 == 1;
          const char* names[] = {"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter"};
          check(tag(names[kind], dt, std::string(reduce_name(rop)) + (in_place ? " in place" : ""), count),
                [&] { reduction_check(comm, stream, c, n % 2 == 0, in_place); });
          ++n;
        }
      }
      for (auto kind : {HAL_COLLECTIVE_BROADCAST, HAL_COLLECTIVE_ALLGATHER, HAL_COLLECTIVE_ALLTOALL}) {
        for (int unequal = 0; unequal < (kind == HAL_COLLECTIVE_ALLTOALL ? 2 : 1); ++unequal) {
          hal::CollectiveCall c;
          c.kind = kind;
          c.dtype = dt;
          c.count = count;
          c.root = kind == HAL_COLLECTIVE_BROADCAST ? (world - 1 - n % world) : 0;
          const char* names[] = {"", "broadcast", "", "allgather", "", "alltoall"};
          check(tag(names[kind], dt, unequal ? "unequal" : "", count),
                [&] { data_check(comm, stream, c, n % 2 == 0, unequal != 0); });
          ++n;
        }
      }
    }
  }
  // The largest message: a float32 allreduce and broadcast of max_bytes.
  for (auto kind : {HAL_COLLECTIVE_ALLREDUCE, HAL_COLLECTIVE_BROADCAST}) {
    hal::CollectiveCall c;
    c.kind = kind;
    c.dtype = HAL_DTYPE_FLOAT32;
    c.count = o_.max_bytes / 4;
    check(tag(kind == HAL_COLLECTIVE_ALLREDUCE ? "allreduce" : "broadcast", HAL_DTYPE_FLOAT32, "", c.count), [&] {
      if (kind == HAL_COLLECTIVE_ALLREDUCE) reduction_check(comm, stream, c, true, false);
      else data_check(comm, stream, c, true);
    });
  }
  // Send / recv: a ring in one group (each rank sends to the next and
  // receives from the previous), at several sizes, bytes as int32.
  for (uint64_t count : {uint64_t{1}, uint64_t{1000}, uint64_t{200000}}) {
    check("send/recv ring int32 count " + std::to_string(count), [&] {
      const uint32_t me = static_cast<uint32_t>(o_.rank), next = (me + 1) % world, prev = (me + world - 1) % world;
      hal::Buffer send = upload(make_input(HAL_DTYPE_INT32, HAL_REDUCE_SUM, me, count));
      hal::Buffer recv = upload(std::vector<uint8_t>(count * 4, 0));
      hal::CollectiveCall s, r;
      s.kind = HAL_COLLECTIVE_SEND, s.dtype = HAL_DTYPE_INT32, s.count = count, s.root = next, s.send = &send;
      r.kind = HAL_COLLECTIVE_RECV, r.dtype = HAL_DTYPE_INT32, r.count = count, r.root = prev, r.recv = &recv;
      comm.group_start();
      comm.run(s, &stream);
      comm.run(r, &stream);
      comm.group_end();
      stream.synchronize();
      const auto got = download(recv, count * 4);
      for (uint64_t i = 0; i < count; ++i) {
        const cplx g = get(HAL_DTYPE_INT32, got.data() + i * 4), want = value(HAL_DTYPE_INT32, HAL_REDUCE_SUM, prev, i);
        if (g != want) mismatch("received", i, g, want);
      }
    });
  }
  // Send / recv tags (ABI 1.13): a receive takes the oldest message from
  // its peer with its tag. Each rank sends tag 7 (large), tag 3, tag 7
  // (small) to the next; the group receives only tag 3, so the first tag-7
  // message must be kept until the receives of tag 7 after the group.
  check("send/recv tags received out of order", [&] {
    const uint32_t me = static_cast<uint32_t>(o_.rank), next = (me + 1) % world, prev = (me + world - 1) % world;
    const uint64_t counts[3] = {300000, 1000, 5};
    const uint64_t tags[3] = {7, 3, 7};
    const auto payload = [](uint32_t rank, int message, uint64_t count) {
      std::vector<uint8_t> bytes(count * 4);
      for (uint64_t i = 0; i < count; ++i) {
        const int32_t v = static_cast<int32_t>(rank * 1000000 + message * 100000 + i % 100000);
        std::memcpy(bytes.data() + i * 4, &v, 4);
      }
      return bytes;
    };
    std::vector<hal::Buffer> sends, recvs;
    for (int m = 0; m < 3; ++m) {
      sends.push_back(upload(payload(me, m, counts[m])));
      recvs.push_back(upload(std::vector<uint8_t>(counts[m] * 4, 0)));
    }
    const auto call = [&](hal_collective_kind_e kind, int m) {
      hal::CollectiveCall c;
      c.kind = kind, c.dtype = HAL_DTYPE_INT32, c.count = counts[m], c.tag = tags[m];
      if (kind == HAL_COLLECTIVE_SEND) c.root = next, c.send = &sends[m];
      else c.root = prev, c.recv = &recvs[m];
      return c;
    };
    comm.group_start();
    for (int m = 0; m < 3; ++m) comm.run(call(HAL_COLLECTIVE_SEND, m), &stream);
    comm.run(call(HAL_COLLECTIVE_RECV, 1), &stream);
    comm.group_end();
    comm.run(call(HAL_COLLECTIVE_RECV, 0), &stream);
    comm.run(call(HAL_COLLECTIVE_RECV, 2), &stream);
    stream.synchronize();
    for (int m = 0; m < 3; ++m)
      if (download(recvs[m], counts[m] * 4) != payload(prev, m, counts[m]))
        throw std::runtime_error("message " + std::to_string(m) + " (tag " + std::to_string(tags[m]) +
                                 ") holds another message's bytes");
  });
  check("barrier", [&] {
    comm.barrier();
    comm.barrier(&stream);
    stream.synchronize();
  });
  check("split into even and odd ranks, then allreduce in each", [&] {
    const uint32_t me = static_cast<uint32_t>(o_.rank);
    std::unique_ptr<hal::Communicator> half = comm.split(static_cast<int32_t>(me % 2), -static_cast<int32_t>(me));
    if (!half) throw std::runtime_error("no communicator for a color");
    const uint32_t size = (world + 1 - me % 2) / 2;
    if (half->world_size() != size) throw std::runtime_error("split world size " + std::to_string(half->world_size()));
    // Keyed by -rank: the highest parent rank of the color is rank 0.
    std::vector<uint32_t> members;
    for (uint32_t r = me % 2; r < world; r += 2) members.insert(members.begin(), r);
    if (members[half->rank()] != me) throw std::runtime_error("split rank " + std::to_string(half->rank()));
    const int32_t mine = static_cast<int32_t>(me) + 1;
    hal::Buffer b = upload(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&mine), reinterpret_cast<const uint8_t*>(&mine) + 4));
    half->allreduce(b, b, 1, HAL_DTYPE_INT32, HAL_REDUCE_SUM);
    int32_t got = 0;
    b.copy_to_host(&got, 4);
    int32_t want = 0;
    for (uint32_t r : members) want += static_cast<int32_t>(r) + 1;
    if (got != want) throw std::runtime_error("allreduce in the split gave " + std::to_string(got));
    // A rank with no color gets no communicator.
    std::unique_ptr<hal::Communicator> none = comm.split(me == 0 ? HAL_COMM_SPLIT_NO_COLOR : 0, 0);
    if ((me == 0) != (none == nullptr)) throw std::runtime_error("HAL_COMM_SPLIT_NO_COLOR");
    if (none) {  // ranks 1..world-1: across hosts when hosts interleave ranks
      hal::Buffer c = upload(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&mine), reinterpret_cast<const uint8_t*>(&mine) + 4));
      none->allreduce(c, c, 1, HAL_DTYPE_INT32, HAL_REDUCE_SUM);
      c.copy_to_host(&got, 4);
      want = 0;
      for (uint32_t r = 1; r < world; ++r) want += static_cast<int32_t>(r) + 1;
      if (got != want) throw std::runtime_error("allreduce in the split without rank 0 gave " + std::to_string(got));
    }
  });
  check("bad arguments are refused before anything runs", [&] {
    hal::Buffer b = upload(std::vector<uint8_t>(16, 0));
    const auto expect_code = [&](hal_status_code_e code, const hal::CollectiveCall& c, const char* what) {
      try {
        comm.run(c);
      } catch (const hal::Error& e) {
        if (e.code() == code) return;
        throw std::runtime_error(std::string(what) + ": got " + e.what());
      }
      throw std::runtime_error(std::string(what) + ": no error");
    };
    hal::CollectiveCall c;
    c.dtype = HAL_DTYPE_FLOAT32, c.count = 5, c.send = &b, c.recv = &b;  // 20 bytes in a 16-byte buffer
    expect_code(HAL_STATUS_OUT_OF_RANGE, c, "a range past the buffer");
    c.count = 2, c.kind = HAL_COLLECTIVE_BROADCAST, c.root = world;
    expect_code(HAL_STATUS_INVALID_ARGUMENT, c, "root out of range");
    c.kind = HAL_COLLECTIVE_ALLREDUCE, c.root = 0, c.dtype = HAL_DTYPE_COMPLEX64, c.op = HAL_REDUCE_MAX;
    expect_code(HAL_STATUS_UNSUPPORTED_DTYPE, c, "max of complex");
    for (hal_reduce_op_e bitwise : {HAL_REDUCE_BAND, HAL_REDUCE_BOR, HAL_REDUCE_BXOR})
      for (hal_dtype_e d : {HAL_DTYPE_FLOAT32, HAL_DTYPE_BFLOAT16, HAL_DTYPE_COMPLEX64}) {
        c.dtype = d, c.op = bitwise;
        const std::string what = std::string(reduce_name(bitwise)) + " of " + hal::common::dtype_name(d);
        expect_code(HAL_STATUS_UNSUPPORTED_DTYPE, c, what.c_str());
        try {
          comm.run(c);
        } catch (const hal::Error& e) {  // names the op and the dtype
          const std::string m = e.what();
          if (m.find(reduce_name(bitwise)) == std::string::npos || m.find(hal::common::dtype_name(d)) == std::string::npos)
            throw std::runtime_error(what + ": the message does not name both: " + m);
        }
      }
    c.op = HAL_REDUCE_OP_COUNT_, c.dtype = HAL_DTYPE_INT32;
    expect_code(HAL_STATUS_INVALID_ARGUMENT, c, "an op past hal_reduce_op_e");
    hal::Buffer big = upload(std::vector<uint8_t>(256, 0));
    c.dtype = HAL_DTYPE_FLOAT32, c.op = HAL_REDUCE_SUM, c.kind = HAL_COLLECTIVE_ALLGATHER, c.send = c.recv = &big;
    c.recv_offset = 4;  // neither NCCL's in-place form nor apart
    expect_code(HAL_STATUS_INVALID_ARGUMENT, c, "an allgather overlapping itself");
    c.recv_offset = 0, c.kind = HAL_COLLECTIVE_SEND, c.root = 0, c.dtype = static_cast<hal_dtype_e>(99);
    expect_code(HAL_STATUS_UNSUPPORTED_DTYPE, c, "an unknown dtype");
    comm.barrier();  // still in step: nothing was issued
  });
  return summary("suite");
}

int Rank::init_fails_scenario() {
  const auto start = Clock::now();
  check("comm_init fails on every rank within the timeout", [&] {
    try {
      hal::Communicator comm = join("init/id", o_.fault_timeout);
    } catch (const hal::Error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      if (ms > o_.fault_timeout.count() + 1000) throw std::runtime_error("took " + std::to_string(ms) + " ms");
      std::printf("rank %d: comm_init failed after %lld ms: %s\n", o_.rank, static_cast<long long>(ms), e.what());
      return;
    }
    throw std::runtime_error("comm_init succeeded");
  });
  return summary("init_fails");
}

int Rank::kill_scenario(uint32_t victim) {
  hal::Communicator comm = join("kill/id", o_.fault_timeout);
  hal::Buffer b = upload(std::vector<uint8_t>(4096 * 4, 0));
  comm.allreduce(b, b, 4096, HAL_DTYPE_FLOAT32, HAL_REDUCE_SUM);
  if (static_cast<uint32_t>(o_.rank) == victim) {
    std::fflush(stdout);
    _exit(3);  // dies without a word, mid-job
  }
  const auto start = Clock::now();
  check("the others get an error within the timeout, not a hang", [&] {
    try {
      for (int i = 0; i < 3; ++i) comm.allreduce(b, b, 4096, HAL_DTYPE_FLOAT32, HAL_REDUCE_SUM);
    } catch (const hal::Error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      if (e.code() != HAL_STATUS_ABORTED && e.code() != HAL_STATUS_TIMEOUT)
        throw std::runtime_error(std::string("wrong error: ") + e.what());
      if (ms > o_.fault_timeout.count() + 1000) throw std::runtime_error("took " + std::to_string(ms) + " ms");
      std::printf("rank %d: error after %lld ms: %s\n", o_.rank, static_cast<long long>(ms), e.what());
      return;
    }
    throw std::runtime_error("the allreduce succeeded with a dead rank");
  });
  check("a later operation fails at once with the same cause", [&] {
    try {
      comm.barrier();
    } catch (const hal::Error& e) {
      if (e.code() == HAL_STATUS_ABORTED || e.code() == HAL_STATUS_TIMEOUT) return;
      throw;
    }
    throw std::runtime_error("barrier succeeded");
  });
  return summary("kill");
}

int Rank::foreign_id_scenario() {
  check("a rank with another job's unique id is refused, and no rank hangs", [&] {
    const bool foreign = static_cast<uint32_t>(o_.rank) == o_.world - 1;
    hal::CommUniqueId id = foreign ? hal::Communicator::unique_id(*device_) : shared_id("foreign/id");
    try {
      hal::Communicator comm(device_, o_.world, static_cast<uint32_t>(o_.rank), id, store_.get(), o_.fault_timeout);
    } catch (const hal::Error& e) {
      if (foreign && e.code() != HAL_STATUS_INVALID_ARGUMENT)
        throw std::runtime_error(std::string("the foreign rank got ") + e.what());
      if (foreign && std::string(e.what()).find("another job") == std::string::npos)
        throw std::runtime_error(std::string("message does not say why: ") + e.what());
      std::printf("rank %d: refused: %s\n", o_.rank, e.what());
      return;
    }
    throw std::runtime_error("comm_init succeeded");
  });
  return summary("foreign_id");
}

int Rank::stale_id_scenario() {
  hal::CommUniqueId id = shared_id("stale/id");
  { hal::Communicator first(device_, o_.world, static_cast<uint32_t>(o_.rank), id, store_.get(), o_.fault_timeout); }
  check("the id of a communicator that already started is refused", [&] {
    try {
      hal::Communicator again(device_, o_.world, static_cast<uint32_t>(o_.rank), id, store_.get(), o_.fault_timeout);
    } catch (const hal::Error& e) {
      if (e.code() != HAL_STATUS_INVALID_ARGUMENT && e.code() != HAL_STATUS_TIMEOUT && e.code() != HAL_STATUS_ABORTED)
        throw;
      std::printf("rank %d: refused: %s\n", o_.rank, e.what());
      return;
    }
    throw std::runtime_error("comm_init with a used id succeeded");
  });
  return summary("stale_id");
}

int Rank::abort_scenario() {
  hal::Communicator comm = join("abort/id", std::chrono::seconds(60));  // long: the abort must end the wait
  comm.barrier();
  check("comm_abort from another thread unblocks this rank and its peers with ABORTED", [&] {
    std::thread aborter;
    if (o_.rank == 0)
      aborter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        comm.abort();
      });
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // arrives after the abort
    const auto start = Clock::now();
    std::string failure;
    try {
      comm.barrier();
      failure = "the barrier succeeded";
    } catch (const hal::Error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      if (e.code() != HAL_STATUS_ABORTED) failure = std::string("wrong error: ") + e.what();
      else if (ms > 2000) failure = "took " + std::to_string(ms) + " ms";
      else std::printf("rank %d: aborted after %lld ms: %s\n", o_.rank, static_cast<long long>(ms), e.what());
    }
    if (aborter.joinable()) aborter.join();
    if (!failure.empty()) throw std::runtime_error(failure);
    if (!comm.async_error()) throw std::runtime_error("async_error() reports nothing after the abort");
  });
  return summary("abort");
}

int Rank::mismatch_scenario() {
  hal::Communicator comm = join("mismatch/id", o_.fault_timeout);
  hal::Buffer b = upload(std::vector<uint8_t>(64 * 4, 0));
  check("mismatched counts are reported on every rank", [&] {
    try {
      comm.allreduce(b, b, o_.rank == 0 ? 10 : 12, HAL_DTYPE_FLOAT32, HAL_REDUCE_SUM);
    } catch (const hal::Error& e) {
      if (e.code() != HAL_STATUS_INVALID_ARGUMENT || std::string(e.what()).find("disagree") == std::string::npos)
        throw;
      return;
    }
    throw std::runtime_error("no error");
  });
  check("mismatched dtypes are reported on every rank", [&] {
    try {
      comm.allreduce(b, b, 8, o_.rank == 0 ? HAL_DTYPE_FLOAT32 : HAL_DTYPE_INT32, HAL_REDUCE_SUM);
    } catch (const hal::Error& e) {
      if (e.code() != HAL_STATUS_INVALID_ARGUMENT) throw;
      return;
    }
    throw std::runtime_error("no error");
  });
  check("the communicator still works afterwards", [&] {
    const float one = 1.0f;
    hal::Buffer x = upload(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&one), reinterpret_cast<const uint8_t*>(&one) + 4));
    comm.allreduce(x, x, 1, HAL_DTYPE_FLOAT32, HAL_REDUCE_SUM);
    float got = 0;
    x.copy_to_host(&got, 4);
    if (got != static_cast<float>(o_.world)) throw std::runtime_error("allreduce gave " + std::to_string(got));
  });
  return summary("mismatch");
}

std::set<std::string> shm_entries() {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec))
    if (e.path().filename().string().rfind("hal-", 0) == 0) out.insert(e.path().filename().string());
  return out;
}

}  // namespace

int run_collective_rank(const std::shared_ptr<hal::Device>& device, const CollectiveOptions& opts) {
  try {
    Rank rank(device, opts);
    if (opts.scenario == "suite") return rank.suite();
    // The suite between hosts (comm_split is shared-memory only).
    if (opts.scenario == "tcp") return rank.suite(true);
    if (opts.scenario == "kill") return rank.kill_scenario(opts.world - 1);
    // Rank 1 leads host 1 when hosts interleave ranks (--collective-hosts):
    // its death strands the other hosts in the phase between leaders.
    if (opts.scenario == "kill_leader") return rank.kill_scenario(1);
    if (opts.scenario == "init_fails") return rank.init_fails_scenario();
    if (opts.scenario == "foreign_id") return rank.foreign_id_scenario();
    if (opts.scenario == "stale_id") return rank.stale_id_scenario();
    if (opts.scenario == "mismatch") return rank.mismatch_scenario();
    if (opts.scenario == "abort") return rank.abort_scenario();
    std::fprintf(stderr, "hal-conformance: unknown collective scenario '%s'\n", opts.scenario.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::printf("rank %d: FAILED %s: %s\n", opts.rank, opts.scenario.c_str(), e.what());
    return 1;
  }
}

int spawn_collectives(const std::vector<std::string>& argv, const std::vector<std::string>& odd_argv,
                      const CollectiveOptions& opts) {
  std::vector<std::string> scenarios;
  if (opts.scenario == "all") scenarios = {"suite", "mismatch", "abort", "foreign_id", "stale_id", "kill", "kill_leader"};
  else scenarios = {opts.scenario};
  if (opts.world < 2)  // the fault scenarios need a peer
    scenarios.erase(std::remove_if(scenarios.begin(), scenarios.end(), [](const std::string& s) { return s != "suite"; }),
                    scenarios.end());
  int failures = 0;
  for (const std::string& scenario : scenarios) {
    const std::set<std::string> before = shm_entries();
    char tmpl[] = "/tmp/hal-collectives-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("hal-conformance: mkdtemp");
      return 2;
    }
    const std::string dir = tmpl;
    std::vector<pid_t> pids;
    for (uint32_t r = 0; r < opts.world; ++r) {
      std::vector<std::string> args = r % 2 ? odd_argv : argv;
      for (const std::string& extra :
           {std::string("--collective-rank"), std::to_string(r), std::string("--collective-store"), dir,
            std::string("--collective-scenario"), scenario, std::string("--world"), std::to_string(opts.world),
            std::string("--collective-fault-timeout-ms"), std::to_string(opts.fault_timeout.count()),
            std::string("--collective-max-bytes"), std::to_string(opts.max_bytes)})
        args.push_back(extra);
      std::vector<char*> cargv;
      for (auto& a : args) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      // Emulated hosts: the rank's environment names its host.
      std::vector<std::string> env_strings;
      for (char** e = environ; *e != nullptr; ++e)
        if (opts.hosts <= 1 || std::strncmp(*e, "HAL_COMM_HOST_ID=", 17) != 0) env_strings.emplace_back(*e);
      if (opts.hosts > 1)
        env_strings.push_back("HAL_COMM_HOST_ID=hal-conformance-" + std::to_string(getpid()) + "-host" +
                              std::to_string(r % opts.hosts));
      std::vector<char*> cenv;
      for (auto& e : env_strings) cenv.push_back(e.data());
      cenv.push_back(nullptr);
      pid_t pid = 0;
      if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, cargv.data(), cenv.data()) != 0) {
        std::perror("hal-conformance: posix_spawn");
        return 2;
      }
      pids.push_back(pid);
    }
    // Every child must end; a hang is a failure (and is killed).
    const auto deadline = Clock::now() + std::chrono::minutes(10);
    std::vector<int> status(opts.world, -1);
    size_t left = pids.size();
    while (left > 0) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (status[i] != -1) continue;
        int st = 0;
        if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
          status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          --left;
        }
      }
      if (left > 0 && Clock::now() > deadline) {
        std::printf("hal-conformance: collectives %s: ranks still running after 10 minutes (a hang): killed\n",
                    scenario.c_str());
        for (size_t i = 0; i < pids.size(); ++i)
          if (status[i] == -1) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], nullptr, 0);
            status[i] = 200;
          }
        left = 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    bool ok = true;
    for (uint32_t r = 0; r < opts.world; ++r) {
      const int expected =
          (scenario == "kill" && r == opts.world - 1) || (scenario == "kill_leader" && r == 1) ? 3 : 0;
      if (status[r] != expected) {
        std::printf("hal-conformance: collectives %s: rank %u exited with %d (expected %d)\n", scenario.c_str(), r,
                    status[r], expected);
        ok = false;
      }
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    // Another job's communicator may be starting right now: its segment
    // exists for milliseconds. One left behind by this scenario stays.
    std::set<std::string> fresh;
    for (const std::string& e : shm_entries())
      if (!before.count(e)) fresh.insert(e);
    if (!fresh.empty()) std::this_thread::sleep_for(std::chrono::seconds(1));
    const std::set<std::string> now = shm_entries();
    for (const std::string& e : fresh)
      if (now.count(e)) {
        std::printf("hal-conformance: collectives %s: /dev/shm/%s was left behind\n", scenario.c_str(), e.c_str());
        ok = false;
      }
    std::printf("hal-conformance: collectives %s, world %u: %s\n", scenario.c_str(), opts.world, ok ? "PASSED" : "FAILED");
    std::fflush(stdout);
    if (!ok) ++failures;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace hal::conformance
