// HAL C++ SDK, collectives: the transport between hosts, over Gloo's TCP
// pairs (libgloo-dev). Used by the host communicator when some rank is on
// another host (boot id, network or IPC namespace). Compiled when
// HAL_SDK_WITH_GLOO is defined (the hal::sdk_gloo CMake target). Linux.
// Header-only.
//
// Gloo's own copy inside libtorch does not clash with this one: plugins are
// loaded RTLD_LOCAL and link libgloo.so.0, and torch loads libtorch_cpu
// RTLD_LOCAL too, so each resolves gloo:: in its own scope.
#ifndef HAL_SDK_COLLECTIVE_GLOO_TRANSPORT_HPP_
#define HAL_SDK_COLLECTIVE_GLOO_TRANSPORT_HPP_

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hal/collective.h"
#include "hal/common/dtype.hpp"
#include "hal/sdk/collective/communicator.hpp"
#include "hal/sdk/collective/reduce.hpp"
#include "hal/sdk/collective/shm_transport.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk::collective {

// Gloo's rendezvous store over the host's bootstrap (valid during init).
class GlooBootstrapStore final : public gloo::rendezvous::Store {
 public:
  GlooBootstrapStore(const Bootstrap& b, std::chrono::milliseconds timeout) : b_(b), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { b_.set(key, data.data(), data.size()); }
  std::vector<char> get(const std::string& key) override {
    std::vector<uint8_t> v = b_.get(key, timeout_);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& k : keys) b_.get(k, timeout);
  }

 private:
  const Bootstrap& b_;
  std::chrono::milliseconds timeout_;
};

namespace detail {

// Storage-sized element types, so Gloo never splits an element.
struct Bytes16 {
  uint64_t lo, hi;
};

template <uint32_t Dtype, uint32_t Op>
void gloo_reduce(void* out, const void* a, const void* b, size_t n) {
  const void* in[2] = {a, b};
  reduce(Dtype, Op == uint32_t{HAL_REDUCE_AVG} ? uint32_t{HAL_REDUCE_SUM} : Op, out, in, 2, n);
}

template <uint32_t Dtype>
gloo::AllreduceOptions::Func reduce_fn_for_op(uint32_t op) {
  switch (op) {
    case HAL_REDUCE_SUM: case HAL_REDUCE_AVG: return &gloo_reduce<Dtype, HAL_REDUCE_SUM>;
    case HAL_REDUCE_PROD: return &gloo_reduce<Dtype, HAL_REDUCE_PROD>;
    case HAL_REDUCE_MIN: return &gloo_reduce<Dtype, HAL_REDUCE_MIN>;
    case HAL_REDUCE_BAND: return &gloo_reduce<Dtype, HAL_REDUCE_BAND>;
    case HAL_REDUCE_BOR: return &gloo_reduce<Dtype, HAL_REDUCE_BOR>;
    case HAL_REDUCE_BXOR: return &gloo_reduce<Dtype, HAL_REDUCE_BXOR>;
    default: return &gloo_reduce<Dtype, HAL_REDUCE_MAX>;
  }
}

inline gloo::AllreduceOptions::Func reduce_fn(uint32_t dtype, uint32_t op) {
  switch (dtype) {
#define HAL_GLOO_CASE(D) \
  case D: return reduce_fn_for_op<D>(op);
    HAL_GLOO_CASE(HAL_DTYPE_FLOAT32) HAL_GLOO_CASE(HAL_DTYPE_FLOAT16) HAL_GLOO_CASE(HAL_DTYPE_BFLOAT16)
    HAL_GLOO_CASE(HAL_DTYPE_FLOAT64) HAL_GLOO_CASE(HAL_DTYPE_INT8) HAL_GLOO_CASE(HAL_DTYPE_UINT8)
    HAL_GLOO_CASE(HAL_DTYPE_INT16) HAL_GLOO_CASE(HAL_DTYPE_INT32) HAL_GLOO_CASE(HAL_DTYPE_INT64)
    HAL_GLOO_CASE(HAL_DTYPE_BOOL) HAL_GLOO_CASE(HAL_DTYPE_UINT16) HAL_GLOO_CASE(HAL_DTYPE_UINT32)
    HAL_GLOO_CASE(HAL_DTYPE_UINT64) HAL_GLOO_CASE(HAL_DTYPE_COMPLEX64) HAL_GLOO_CASE(HAL_DTYPE_COMPLEX128)
#undef HAL_GLOO_CASE
    default: fail(HAL_STATUS_UNSUPPORTED_DTYPE, "dtype ", dtype, " cannot be reduced");
  }
}

// Calls F(T{}) with an element type of ES bytes.
template <class F>
void by_size(size_t es, F&& f) {
  switch (es) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    case 16: return f(Bytes16{});
    default: fail(HAL_STATUS_UNSUPPORTED_DTYPE, "no element type of ", es, " bytes");
  }
}

// AVG: the sum divided by WORLD, in place.
inline void divide(uint32_t dtype, void* data, size_t n, uint32_t world) {
  // x / world = the avg of (x, 0, ..., 0) over world inputs.
  std::vector<unsigned char> zeros(n * common::dtype_size(dtype), 0);
  std::vector<const void*> in(world, zeros.data());
  in[0] = data;
  reduce(dtype, HAL_REDUCE_AVG, data, in.data(), world, n);
}

}  // namespace detail

class GlooTransport {
 public:
  // Builds the full mesh of WORLD ranks through the bootstrap (every rank
  // calls it during comm_init). The interface: $HAL_SOCKET_IFNAME, else the
  // address the host name resolves to.
  GlooTransport(const Bootstrap& bootstrap, uint32_t rank, uint32_t world, std::chrono::milliseconds timeout,
                const std::string& what)
      : rank_(rank), world_(world), timeout_(timeout) {
    try {
      gloo::transport::tcp::attr attr;
      if (const char* ifname = std::getenv("HAL_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0')
        attr.iface = ifname;
      else {
        char host[256] = {};
        gethostname(host, sizeof(host) - 1);
        attr.hostname = host;
      }
      device_ = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(static_cast<int>(rank), static_cast<int>(world));
      context->setTimeout(timeout);
      GlooBootstrapStore store(bootstrap, timeout);
      gloo::rendezvous::PrefixStore prefixed("hal/gloo", store);
      context->connectFullMesh(prefixed, device_);
      context_ = context;
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(HAL_STATUS_DEVICE_ERROR, what, ": connecting the TCP transport (Gloo) failed: ", e.what(),
           " (set HAL_SOCKET_IFNAME to the network interface to use)");
    }
  }

  // Runs C on host memory SEND/RECV (see HostCommunicator's views). Errors
  // from Gloo (a peer gone, a timeout) become ABORTED / TIMEOUT.
  void run(const CollectiveCall& c, const unsigned char* send, unsigned char* recv, const std::string& what) {
    try {
      run_unchecked(c, send, recv);
    } catch (const Error&) {
      throw;
    } catch (const gloo::IoException& e) {
      fail(std::string(e.what()).find("Timed out") != std::string::npos ? HAL_STATUS_TIMEOUT : HAL_STATUS_ABORTED,
           what, ": rank ", rank_, ": the TCP transport failed (a peer exited, or timed out after ",
           timeout_.count(), " ms): ", e.what());
    } catch (const std::exception& e) {
      fail(HAL_STATUS_ABORTED, what, ": rank ", rank_, ": the TCP transport failed: ", e.what());
    }
  }

  // Sends and receives of a group, issued together, then awaited.
  void run_p2p(const std::vector<const CollectiveCall*>& calls, const std::vector<const unsigned char*>& sends,
               const std::vector<unsigned char*>& recvs, const std::string& what) {
    try {
      // Sends are buffered (a copy, posted, completed later) as the shared-
      // memory rings buffer them: a send returns before its receive is
      // posted, so two ranks may send to each other first.
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs_posted;
      for (size_t i = 0; i < calls.size(); ++i) {
        const CollectiveCall& c = *calls[i];
        const size_t bytes = c.count * common::dtype_size(c.dtype);
        const bool s = c.kind == CollectiveCall::kSend;
        // Slot: the pair's message number, so messages match in issue order.
        uint64_t& seq = s ? sent_[c.root] : received_[c.root];
        const uint64_t slot = p2p_slot(s ? rank_ : c.root, s ? c.root : rank_, seq++);
        if (s) {
          auto pending = std::make_unique<PendingSend>();
          pending->data.assign(sends[i], sends[i] + bytes);
          pending->data.resize(std::max<size_t>(bytes, 1));
          pending->buffer = context_->createUnboundBuffer(pending->data.data(), bytes);
          pending->buffer->send(static_cast<int>(c.root), slot);
          pending_sends_.push_back(std::move(pending));
        } else {
          static unsigned char dummy;
          auto buf = context_->createUnboundBuffer(bytes ? recvs[i] : &dummy, bytes);
          buf->recv(static_cast<int>(c.root), slot);
          recvs_posted.push_back(std::move(buf));
        }
      }
      for (auto& buf : recvs_posted)
        if (!buf->waitRecv(timeout_)) fail(HAL_STATUS_ABORTED, what, ": a receive was aborted");
      while (pending_sends_.size() > kMaxPendingSends) {  // bound the buffered bytes
        if (!pending_sends_.front()->buffer->waitSend(timeout_)) fail(HAL_STATUS_ABORTED, what, ": a send was aborted");
        pending_sends_.erase(pending_sends_.begin());
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(HAL_STATUS_ABORTED, what, ": rank ", rank_, ": the TCP transport failed: ", e.what());
    }
  }

 private:
  // A pair's N-th message: its own slot, so messages match in issue order.
  uint64_t p2p_slot(uint32_t src, uint32_t dst, uint64_t n) const {
    return (0x48ull << 56) | ((static_cast<uint64_t>(src) * world_ + dst) & 0xffffffull) << 32 | (n & 0xffffffffull);
  }

  void run_unchecked(const CollectiveCall& c, const unsigned char* send, unsigned char* recv) {
    const size_t es = common::dtype_size(c.dtype), n = c.count;
    const uint32_t tag = next_tag_++;
    switch (c.kind) {
      case CollectiveCall::kBarrier: {
        gloo::BarrierOptions o(context_);
        o.setTag(tag);
        o.setTimeout(timeout_);
        gloo::barrier(o);
        return;
      }
      case CollectiveCall::kAllreduce:
      case CollectiveCall::kReduceScatter: {
        // reduce_scatter: the whole reduction, then this rank's block.
        const size_t total = c.kind == CollectiveCall::kAllreduce ? n : n * world_;
        std::vector<unsigned char> tmp;
        unsigned char* out = recv;
        if (c.kind == CollectiveCall::kReduceScatter) {
          tmp.resize(total * es);
          out = tmp.data();
        }
        if (out != send && total) std::memcpy(out, send, total * es);
        if (total) {
          detail::by_size(es, [&](auto t) {
            using T = decltype(t);
            gloo::AllreduceOptions o(context_);
            o.setOutput<T>(reinterpret_cast<T*>(out), total);
            o.setReduceFunction(detail::reduce_fn(c.dtype, c.op));
            o.setTag(tag);
            o.setTimeout(timeout_);
            gloo::allreduce(o);
          });
          if (c.op == HAL_REDUCE_AVG) detail::divide(c.dtype, out, total, world_);
        } else {
          barrier_with(tag);
        }
        if (c.kind == CollectiveCall::kReduceScatter && n) std::memcpy(recv, out + rank_ * n * es, n * es);
        return;
      }
      case CollectiveCall::kReduce: {
        std::vector<unsigned char> tmp(n * es);
        if (n) std::memcpy(tmp.data(), send, n * es);
        if (!n) return barrier_with(tag);
        detail::by_size(es, [&](auto t) {
          using T = decltype(t);
          gloo::ReduceOptions o(context_);
          o.setRoot(static_cast<int>(c.root));
          o.setInput<T>(reinterpret_cast<T*>(tmp.data()), n);
          o.setOutput<T>(reinterpret_cast<T*>(tmp.data()), n);
          o.setReduceFunction(detail::reduce_fn(c.dtype, c.op));
          o.setTag(tag);
          o.setTimeout(timeout_);
          gloo::reduce(o);
        });
        if (rank_ == c.root) {
          if (c.op == HAL_REDUCE_AVG) detail::divide(c.dtype, tmp.data(), n, world_);
          std::memcpy(recv, tmp.data(), n * es);
        }
        return;
      }
      case CollectiveCall::kBroadcast: {
        if (!n) return barrier_with(tag);
        unsigned char* buf = rank_ == c.root ? const_cast<unsigned char*>(send) : recv;
        detail::by_size(es, [&](auto t) {
          using T = decltype(t);
          gloo::BroadcastOptions o(context_);
          o.setRoot(static_cast<int>(c.root));
          o.setOutput<T>(reinterpret_cast<T*>(buf), n);
          o.setTag(tag);
          o.setTimeout(timeout_);
          gloo::broadcast(o);
        });
        if (rank_ == c.root && recv != nullptr && recv != send) std::memcpy(recv, send, n * es);
        return;
      }
      case CollectiveCall::kAllgather: {
        if (!n) return barrier_with(tag);
        detail::by_size(es, [&](auto t) {
          using T = decltype(t);
          gloo::AllgatherOptions o(context_);
          std::vector<unsigned char> in(send, send + n * es);  // recv may hold send (in place)
          o.setInput<T>(reinterpret_cast<T*>(in.data()), n);
          o.setOutput<T>(reinterpret_cast<T*>(recv), n * world_);
          o.setTag(tag);
          o.setTimeout(timeout_);
          gloo::allgather(o);
        });
        return;
      }
      case CollectiveCall::kAlltoall: {
        std::vector<int64_t> in_counts(world_, static_cast<int64_t>(n)), out_counts(world_, static_cast<int64_t>(n));
        std::vector<unsigned char> packed_in, packed_out;
        const unsigned char* in = send;
        unsigned char* out = recv;
        const bool unequal = !c.send_counts.empty();
        if (unequal) {
          // Gloo's alltoallv packs blocks back to back: pack by displacement.
          size_t total_in = 0, total_out = 0;
          for (uint32_t p = 0; p < world_; ++p) {
            in_counts[p] = static_cast<int64_t>(c.send_counts[p]);
            out_counts[p] = static_cast<int64_t>(c.recv_counts[p]);
            total_in += c.send_counts[p];
            total_out += c.recv_counts[p];
          }
          packed_in.resize(std::max<size_t>(total_in, 1) * es);
          packed_out.resize(std::max<size_t>(total_out, 1) * es);
          size_t at = 0;
          for (uint32_t p = 0; p < world_; ++p) {
            std::memcpy(packed_in.data() + at * es, send + c.send_displs[p] * es, c.send_counts[p] * es);
            at += c.send_counts[p];
          }
          in = packed_in.data();
          out = packed_out.data();
        }
        detail::by_size(es, [&](auto t) {
          using T = decltype(t);
          gloo::AlltoallvOptions o(context_);
          o.setInput<T>(reinterpret_cast<T*>(const_cast<unsigned char*>(in)), in_counts);
          o.setOutput<T>(reinterpret_cast<T*>(out), out_counts);
          o.setTag(tag);
          o.setTimeout(timeout_);
          gloo::alltoallv(o);
        });
        if (unequal) {
          size_t at = 0;
          for (uint32_t p = 0; p < world_; ++p) {
            std::memcpy(recv + c.recv_displs[p] * es, packed_out.data() + at * es, c.recv_counts[p] * es);
            at += c.recv_counts[p];
          }
        }
        return;
      }
      default: fail(HAL_STATUS_INTERNAL, "not a collective");
    }
  }

  void barrier_with(uint32_t tag) {
    gloo::BarrierOptions o(context_);
    o.setTag(tag);
    o.setTimeout(timeout_);
    gloo::barrier(o);
  }

  struct PendingSend {
    std::vector<unsigned char> data;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  };
  static constexpr size_t kMaxPendingSends = 64;

  uint32_t rank_, world_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t next_tag_ = 1;
  std::map<uint32_t, uint64_t> sent_, received_;
  std::vector<std::unique_ptr<PendingSend>> pending_sends_;

 public:
  // Waits (bounded by the timeout) for buffered sends, so peers get them.
  ~GlooTransport() {
    for (auto& p : pending_sends_) {
      try {
        p->buffer->waitSend(timeout_);
      } catch (...) {  // a peer gone: nothing to deliver to
      }
    }
    pending_sends_.clear();
  }
};

}  // namespace hal::sdk::collective

#endif  // HAL_SDK_COLLECTIVE_GLOO_TRANSPORT_HPP_
