// CPU plugin, linalg group: oneDNN plumbing shared by matmul and convolution —
// one engine, a stream on the calling thread, memory descriptors that carry
// HAL strides (transposed views need no copy), and a thread-safe primitive
// cache (creating a primitive costs far more than a small matmul).
#ifndef HAL_PLUGINS_CPU_OPS_ONEDNN_UTIL_HPP_
#define HAL_PLUGINS_CPU_OPS_ONEDNN_UTIL_HPP_

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hal/sdk/status.hpp"

namespace hal::cpu::onednn {

// C[m, n] = alpha·op(A)·op(B) + beta·C, row-major (dnnl_sgemm's arguments:
// TA/TB 'N' or 'T', leading dims in elements); nothing for an empty product.
// Runs on the calling thread's OpenMP team. Throws DEVICE_ERROR naming the
// sizes when oneDNN refuses.
inline void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) != dnnl_success)
    sdk::fail(HAL_STATUS_DEVICE_ERROR, "dnnl_sgemm failed (", m, "x", n, "x", k, ")");
}

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// oneDNN streams are cheap but not free; one per thread that runs kernels.
inline dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// f32 memory descriptor of DIMS with element STRIDES (any non-negative
// strides). A size-1 dim's stride is never stepped: it gets the dense one
// (the next dim's extent). Not 1: oneDNN 2.6 makes a matmul primitive for
// a 1-row product whose row stride is 1 like its column stride, then
// refuses to execute it (invalid arguments, on every call).
inline dnnl::memory::desc md(const std::vector<int64_t>& dims, std::vector<int64_t> strides) {
  for (size_t d = dims.size(); d-- > 0;)
    if (dims[d] == 1) strides[d] = d + 1 < dims.size() ? std::max<int64_t>(1, dims[d + 1] * strides[d + 1]) : 1;
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

// A cache key: the integers that decide a primitive (shapes, strides, attrs).
class Key {
 public:
  explicit Key(int kind) { add(kind); }
  Key& add(int64_t v) {
    s_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Key& add(const std::vector<int64_t>& v) {
    add(static_cast<int64_t>(v.size()));
    for (int64_t x : v) add(x);
    return *this;
  }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

// LRU cache of built primitives (ENTRY: whatever a kind needs, immutable
// after construction; oneDNN primitives may be executed concurrently).
template <class Entry>
class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity = 256) : capacity_(capacity) {}

  template <class Make>
  std::shared_ptr<const Entry> get(const Key& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key.str());
      if (it != map_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
      }
    }
    std::shared_ptr<const Entry> made = make();  // outside the lock: slow
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key.str());
    if (it != map_.end()) return it->second->second;
    lru_.emplace_front(key.str(), made);
    map_.emplace(key.str(), lru_.begin());
    if (lru_.size() > capacity_) {
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return made;
  }

 private:
  using Item = std::pair<std::string, std::shared_ptr<const Entry>>;
  size_t capacity_;
  std::mutex mu_;
  std::list<Item> lru_;
  std::unordered_map<std::string, typename std::list<Item>::iterator> map_;
};

// Below this many multiply-adds a primitive runs on one thread: waking the
// OpenMP team costs more than the second thread saves (tens to hundreds of
// µs on an idle VM core: the MLP's addmm took 117 µs threaded, 11 µs not).
constexpr double kSmallMacs = 1 << 20;

// The thread count for a primitive of MACS multiply-adds: 1 below
// THRESHOLD, else OpenMP's. A function of the shapes only, so a cached
// primitive always runs under the count it was created with.
inline int threads_for(double macs, double threshold = kSmallMacs) {
  return macs < threshold ? 1 : omp_get_max_threads();
}

// Caps the OpenMP threads of oneDNN primitives created and run on this
// thread while in scope (per-thread ICV; restored on exit).
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads) : saved_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ThreadLimit() { omp_set_num_threads(saved_); }
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int saved_;
};

// A float scratch buffer for a primitive's internal memory (64-byte aligned).
class Scratch {
 public:
  float* get(size_t bytes) {
    size_t n = (bytes + sizeof(float) - 1) / sizeof(float) + 16;
    if (buf_.size() < n) buf_.assign(n, 0.0f);
    auto addr = reinterpret_cast<uintptr_t>(buf_.data());
    return reinterpret_cast<float*>((addr + 63) & ~uintptr_t{63});
  }

 private:
  std::vector<float> buf_;
};

}  // namespace hal::cpu::onednn

#endif  // HAL_PLUGINS_CPU_OPS_ONEDNN_UTIL_HPP_
