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
#include <gloo/allgatherv.h>
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

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
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

// Blocks SIGPIPE on this thread for its lifetime. Gloo's TCP pairs write
// with writev, which raises SIGPIPE when the peer has gone, and SIGPIPE's
// default action kills the process: a C++ host of the HAL (hal-conformance,
// a service) would die where Python, which ignores SIGPIPE, gets the error.
// The write's EPIPE becomes Gloo's exception either way. A SIGPIPE raised
// while blocked is discarded on the way out unless one was pending before
// (then it is the host's, and left for it); the process's disposition is
// never changed. Threads Gloo starts inherit the mask (its event loop:
// construct the device under this).
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlocked() {
    if (!was_pending_) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// AVG: the sum divided by WORLD, in place.
inline void divide(uint32_t dtype, void* data, size_t n, uint32_t world) {
  // x / world = the avg of (x, 0, ..., 0) over world inputs.
  std::vector<unsigned char> zeros(n * common::dtype_size(dtype), 0);
  std::vector<const void*> in(world, zeros.data());
  in[0] = data;
  reduce(dtype, HAL_REDUCE_AVG, data, in.data(), world, n);
}

}  // namespace detail

// A full mesh of Gloo TCP pairs among some ranks: every rank of a
// communicator (the mesh, for messages between hosts), or one leader per
// host. Ranks here are the mesh's own (0..world-1). One thread runs
// operations at a time (the host communicator's lock); close() may be called
// from any thread.
class GlooTransport {
 public:
  // Connects the full mesh of WORLD ranks through STORE (every member calls
  // it at once). The interface: $HAL_SOCKET_IFNAME, else the address the
  // host name resolves to.
  GlooTransport(gloo::rendezvous::Store& store, uint32_t rank, uint32_t world, std::chrono::milliseconds timeout,
                const std::string& what)
      : rank_(rank), world_(world), timeout_(timeout) {
    detail::SigpipeBlocked no_sigpipe;  // here and in Gloo's event loop, started by CreateDevice
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
      context->connectFullMesh(store, device_);
      context_ = context;
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(HAL_STATUS_DEVICE_ERROR, what, ": connecting the TCP transport (Gloo) failed: ", e.what(),
           " (set HAL_SOCKET_IFNAME to the network interface to use)");
    }
  }
  // The mesh through the host's bootstrap, its keys under PREFIX.
  static std::unique_ptr<GlooTransport> over_bootstrap(const Bootstrap& bootstrap, const std::string& prefix,
                                                       uint32_t rank, uint32_t world, std::chrono::milliseconds timeout,
                                                       const std::string& what) {
    GlooBootstrapStore store(bootstrap, timeout);
    gloo::rendezvous::PrefixStore prefixed(prefix, store);
    return std::make_unique<GlooTransport>(prefixed, rank, world, timeout, what);
  }

  uint32_t rank() const { return rank_; }
  uint32_t world() const { return world_; }

  // Runs C (ranks and roots of this mesh) on host memory SEND/RECV (see
  // HostCommunicator's views). Errors from Gloo (a peer gone, a timeout)
  // become ABORTED / TIMEOUT.
  void run(const CollectiveCall& c, const unsigned char* send, unsigned char* recv, const std::string& what) {
    guard(what, [&] { run_unchecked(c, send, recv); });
  }

  // Every rank's IN (BYTES[rank] bytes) into OUT, back to back in rank order.
  void allgatherv(const unsigned char* in, unsigned char* out, const std::vector<size_t>& bytes,
                  const std::string& what) {
    guard(what, [&] {
      const uint32_t tag = next_tag_++;
      size_t total = 0;
      for (size_t b : bytes) total += b;
      if (total == 0) return barrier_with(tag);
      std::vector<unsigned char> mine(in, in + bytes[rank_]);  // OUT may hold IN
      mine.resize(std::max<size_t>(mine.size(), 1));
      gloo::AllgathervOptions o(context_);
      o.setInput<uint8_t>(mine.data(), bytes[rank_]);
      o.setOutput<uint8_t>(out, bytes);
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::allgatherv(o);
    });
  }

  // One send or receive of a group: DTYPE x COUNT elements to or from PEER.
  struct Message {
    bool send = false;
    uint32_t peer = 0;
    uint32_t dtype = 0;
    uint64_t count = 0;
    const unsigned char* data = nullptr;  // a send's
    unsigned char* out = nullptr;         // a receive's
    // Matched per (sender, receiver, tag, internal). INTERNAL (the
    // default): the communicator's own (a rendezvous's, an agreement's, an
    // alltoall's), never matched to a user's send or receive.
    uint64_t tag = 0;
    bool internal = true;
  };
  // A buffered send: the copy Gloo sends from, kept until taken.
  struct PendingSend {
    bool done = false;
    uint64_t header[2];
    std::vector<unsigned char> data;
    std::unique_ptr<gloo::transport::UnboundBuffer> header_buffer, buffer;
  };
  // Receives posted by post(), completed by finish().
  struct Posted {
    struct Recv {
      const Message* m;
      uint64_t header[2];
      std::unique_ptr<gloo::transport::UnboundBuffer> header_buffer;
      uint64_t number;
    };
    std::vector<std::unique_ptr<Recv>> recvs;  // stable addresses: Gloo writes the headers
    std::vector<PendingSend*> sends;            // owned by the transport
  };

  // Posts MSGS: sends are buffered (copied, posted, completed later) as the
  // shared-memory rings buffer them, so two ranks may send to each other
  // first; a message is a header (dtype, count), which the receiver checks,
  // then the payload. MSGS must outlive finish().
  Posted post(const std::vector<Message>& msgs, const std::string& what) {
    Posted posted;
    guard(what, [&] {
      for (const Message& m : msgs) {
        const Channel channel{m.peer, m.tag, m.internal};
        uint64_t& number = m.send ? sent_[channel] : received_[channel];
        const uint64_t n = number++;
        if (m.send) {
          const size_t bytes = m.count * common::dtype_size(m.dtype);
          auto pending = std::make_unique<PendingSend>();
          pending->header[0] = m.dtype;
          pending->header[1] = m.count;
          pending->data.assign(m.data, m.data + bytes);
          pending->data.resize(std::max<size_t>(bytes, 1));
          pending->header_buffer = context_->createUnboundBuffer(pending->header, sizeof(pending->header));
          pending->header_buffer->send(static_cast<int>(m.peer), p2p_slot(rank_, m.peer, m, 2 * n));
          pending->buffer = context_->createUnboundBuffer(pending->data.data(), bytes);
          pending->buffer->send(static_cast<int>(m.peer), p2p_slot(rank_, m.peer, m, 2 * n + 1));
          posted.sends.push_back(pending.get());
          pending_sends_.push_back(std::move(pending));
        } else {
          posted.recvs.push_back(std::make_unique<Posted::Recv>(Posted::Recv{&m, {0, 0}, nullptr, n}));
          Posted::Recv& back = *posted.recvs.back();
          back.header_buffer = context_->createUnboundBuffer(back.header, sizeof(back.header));
          back.header_buffer->recv(static_cast<int>(m.peer), p2p_slot(m.peer, rank_, m, 2 * n));
        }
      }
    });
    return posted;
  }

  // Waits for POSTED's receives: each header is checked against what the
  // receive expects (a mismatch is INVALID_ARGUMENT and breaks the mesh, as
  // the payload will not be taken), then the payload is received. WAIT_SENDS:
  // also until POSTED's sends were taken (a collective's, so that a rank
  // returning from it may exit without stranding its peers).
  void finish(Posted& posted, const std::string& what, bool wait_sends = false) {
    guard(what, [&] {
      for (auto& posted_recv : posted.recvs) {
        Posted::Recv& r = *posted_recv;
        if (!wait_recv(*r.header_buffer)) fail(HAL_STATUS_ABORTED, what, ": rank ", rank_, ": a receive was aborted (the communicator was aborted)");
        const Message& m = *r.m;
        if (r.header[0] != m.dtype || r.header[1] != m.count) {
          const std::string why = "recv from rank " + std::to_string(m.peer) + ": expected " + std::to_string(m.count) +
                                  " " + common::dtype_name(m.dtype) + " but rank " + std::to_string(m.peer) +
                                  " sent " + std::to_string(r.header[1]) + " " +
                                  common::dtype_name(static_cast<uint32_t>(r.header[0]));
          close();
          fail(HAL_STATUS_INVALID_ARGUMENT, why);
        }
        const size_t bytes = m.count * common::dtype_size(m.dtype);
        static unsigned char dummy;
        auto buf = context_->createUnboundBuffer(bytes ? m.out : &dummy, bytes);
        buf->recv(static_cast<int>(m.peer), p2p_slot(m.peer, rank_, m, 2 * r.number + 1));
        if (!wait_recv(*buf)) fail(HAL_STATUS_ABORTED, what, ": rank ", rank_, ": a receive was aborted (the communicator was aborted)");
      }
      if (wait_sends)  // delivered before returning: this rank may exit next
        for (PendingSend* p : posted.sends) {
          if (!wait_send(*p->header_buffer) || !wait_send(*p->buffer))
            fail(HAL_STATUS_ABORTED, what, ": rank ", rank_, ": a send was aborted (the communicator was aborted)");
          p->done = true;
        }
      while (!pending_sends_.empty() && pending_sends_.front()->done) pending_sends_.erase(pending_sends_.begin());
      while (pending_sends_.size() > kMaxPendingSends) {  // bound the buffered bytes
        if (!wait_send(*pending_sends_.front()->header_buffer) || !wait_send(*pending_sends_.front()->buffer))
          fail(HAL_STATUS_ABORTED, what, ": rank ", rank_, ": a send was aborted (the communicator was aborted)");
        pending_sends_.erase(pending_sends_.begin());
      }
    });
  }

  // Closes every connection: peers blocked on this rank fail at once
  // (ABORTED), and so does every later operation here, and a wait of this
  // rank's for a message. Thread-safe.
  void close() noexcept {
    if (closed_.exchange(true)) return;
    detail::SigpipeBlocked no_sigpipe;
    {
      std::lock_guard<std::mutex> lock(waiting_mu_);
      for (auto& [buffer, recv] : waiting_) {
        if (recv) buffer->abortWaitRecv();
        else buffer->abortWaitSend();
      }
    }
    try {
      if (context_) context_->closeConnections();
    } catch (...) {  // already broken: nothing more to close
    }
  }

  // Waits (bounded by the timeout) for buffered sends, so peers get them.
  ~GlooTransport() {
    detail::SigpipeBlocked no_sigpipe;
    for (auto& p : pending_sends_) {
      if (closed_) break;
      if (p->done) continue;  // a second wait would wait for another send
      try {
        p->header_buffer->waitSend(timeout_);
        p->buffer->waitSend(timeout_);
      } catch (...) {  // a peer gone: nothing to deliver to
      }
    }
    pending_sends_.clear();
  }

 private:
  // Runs F, turning Gloo's exceptions into HAL errors.
  template <class F>
  void guard(const std::string& what, F&& f) {
    if (closed_) fail(HAL_STATUS_ABORTED, what, ": rank ", rank_, ": the TCP transport was closed (the communicator was aborted)");
    detail::SigpipeBlocked no_sigpipe;
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const gloo::IoException& e) {
      const bool timed_out = std::string(e.what()).find("Timed out") != std::string::npos;
      fail(timed_out ? HAL_STATUS_TIMEOUT : HAL_STATUS_ABORTED, what, ": rank ", rank_,
           ": the TCP transport failed (a peer exited or aborted, or timed out after ", timeout_.count(),
           " ms): ", e.what());
    } catch (const std::exception& e) {
      fail(HAL_STATUS_ABORTED, what, ": rank ", rank_, ": the TCP transport failed: ", e.what());
    }
  }

  // Waits for B's receive (send), interruptible by close(); false: aborted.
  bool wait_recv(gloo::transport::UnboundBuffer& b) { return wait(b, true); }
  bool wait_send(gloo::transport::UnboundBuffer& b) { return wait(b, false); }
  bool wait(gloo::transport::UnboundBuffer& b, bool recv) {
    {
      std::lock_guard<std::mutex> lock(waiting_mu_);
      if (closed_) return false;
      waiting_.emplace_back(&b, recv);
    }
    struct Unregister {
      GlooTransport* t;
      gloo::transport::UnboundBuffer* b;
      ~Unregister() {
        std::lock_guard<std::mutex> lock(t->waiting_mu_);
        for (auto it = t->waiting_.begin(); it != t->waiting_.end(); ++it)
          if (it->first == b) {
            t->waiting_.erase(it);
            break;
          }
      }
    } unregister{this, &b};
    return recv ? b.waitRecv(timeout_) : b.waitSend(timeout_);
  }

  // A pair's N-th message: its own slot, so messages match in issue order.
  // Gloo matches by slot: each (sender, receiver, tag, internal) channel
  // numbers its messages, and the slot mixes all of it (splitmix64) into
  // the 56 bits below this transport's prefix, clear of Gloo's collectives'
  // slots; two messages in flight at once collide with odds of 2^-56.
  uint64_t p2p_slot(uint32_t src, uint32_t dst, const Message& m, uint64_t n) const {
    const auto mix = [](uint64_t x) {
      x += 0x9e3779b97f4a7c15ull;
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
      return x ^ (x >> 31);
    };
    uint64_t h = mix((static_cast<uint64_t>(src) << 32 | dst) ^ (m.internal ? 1ull << 63 : 0));
    h = mix(h ^ m.tag);
    h = mix(h ^ n);
    return (0x48ull << 56) | (h & ((1ull << 56) - 1));
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

  static constexpr size_t kMaxPendingSends = 64;

  uint32_t rank_, world_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  std::atomic<bool> closed_{false};
  std::mutex waiting_mu_;  // guards waiting_
  std::vector<std::pair<gloo::transport::UnboundBuffer*, bool>> waiting_;  // (buffer, a receive?)
  uint32_t next_tag_ = 1;
  // Messages numbered per channel (peer, tag, internal), as matched.
  struct Channel {
    uint32_t peer;
    uint64_t tag;
    bool internal;
    bool operator<(const Channel& o) const {
      return std::tie(peer, tag, internal) < std::tie(o.peer, o.tag, o.internal);
    }
  };
  std::map<Channel, uint64_t> sent_, received_;
  std::vector<std::unique_ptr<PendingSend>> pending_sends_;
};

// Gloo's rendezvous store among MEMBERS (ranks of PARENT's mesh), for a
// communicator split from one spanning hosts, which has no bootstrap: each
// set() is an exchange round over PARENT (every member publishes its own
// entry under the same step of the rendezvous, so members call set() alike
// and their rounds line up), after which every member's entry of that round
// is known; get() of a key no member set fails instead of waiting. Used
// during the split only, under the parent's lock.
class MeshStore final : public gloo::rendezvous::Store {
 public:
  MeshStore(GlooTransport& parent, std::vector<uint32_t> members, std::chrono::milliseconds timeout,
            std::string what)
      : parent_(parent), members_(std::move(members)), timeout_(timeout), what_(std::move(what)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    known_[key] = data;
    unsent_.emplace_back(key, data);
    exchange();
  }
  std::vector<char> get(const std::string& key) override {
    auto it = known_.find(key);
    if (it == known_.end())
      fail(HAL_STATUS_INTERNAL, what_, ": no member of the split set the rendezvous key '", key, "'");
    return it->second;
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const std::string& k : keys) get(k);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

 private:
  void exchange() {
    std::vector<char> out;
    const auto put = [&](const void* p, size_t n) { out.insert(out.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n); };
    for (const auto& [k, v] : unsent_) {
      const uint64_t kn = k.size(), vn = v.size();
      put(&kn, 8);
      put(k.data(), kn);
      put(&vn, 8);
      put(v.data(), vn);
    }
    unsent_.clear();
    const uint64_t size = out.size();
    std::vector<uint64_t> sizes(members_.size());
    std::vector<GlooTransport::Message> msgs;
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i] == parent_.rank()) continue;
      msgs.push_back({true, members_[i], HAL_DTYPE_UINT64, 1, reinterpret_cast<const unsigned char*>(&size), nullptr});
      msgs.push_back({false, members_[i], HAL_DTYPE_UINT64, 1, nullptr, reinterpret_cast<unsigned char*>(&sizes[i])});
    }
    auto posted = parent_.post(msgs, what_);
    parent_.finish(posted, what_);
    std::vector<std::vector<char>> in(members_.size());
    msgs.clear();
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i] == parent_.rank()) continue;
      in[i].resize(sizes[i]);
      msgs.push_back({true, members_[i], HAL_DTYPE_UINT8, size, reinterpret_cast<const unsigned char*>(out.data()), nullptr});
      msgs.push_back({false, members_[i], HAL_DTYPE_UINT8, sizes[i], nullptr, reinterpret_cast<unsigned char*>(in[i].data())});
    }
    posted = parent_.post(msgs, what_);
    parent_.finish(posted, what_);
    for (const std::vector<char>& bytes : in) {
      size_t at = 0;
      const auto take = [&](void* p, size_t n) {
        if (at + n > bytes.size()) fail(HAL_STATUS_INTERNAL, what_, ": a malformed rendezvous message");
        std::memcpy(p, bytes.data() + at, n);
        at += n;
      };
      while (at < bytes.size()) {
        uint64_t kn = 0, vn = 0;
        take(&kn, 8);
        std::string k(kn, '\0');
        take(k.data(), kn);
        take(&vn, 8);
        std::vector<char> v(vn);
        take(v.data(), vn);
        known_[k] = std::move(v);
      }
    }
  }

  GlooTransport& parent_;
  std::vector<uint32_t> members_;
  std::chrono::milliseconds timeout_;
  std::string what_;
  std::map<std::string, std::vector<char>> known_;
  std::vector<std::pair<std::string, std::vector<char>>> unsent_;
};

}  // namespace hal::sdk::collective

#endif  // HAL_SDK_COLLECTIVE_GLOO_TRANSPORT_HPP_
