// HAL C++ SDK, internal: the live handles of this plugin library. Every C
// entry looks its handles up here before dereferencing them, so stale or
// foreign handles become INVALID_ARGUMENT statuses, not crashes.
#ifndef HAL_SDK_DETAIL_REGISTRY_HPP_
#define HAL_SDK_DETAIL_REGISTRY_HPP_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "hal/sdk/status.hpp"

namespace hal::sdk::detail {

enum class Kind { kPlugin, kDevice, kBuffer, kStream, kEvent, kHostMemory, kExecutable };

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kPlugin: return "plugin";
    case Kind::kDevice: return "device";
    case Kind::kBuffer: return "buffer";
    case Kind::kStream: return "stream";
    case Kind::kEvent: return "event";
    case Kind::kHostMemory: return "host allocation";
    case Kind::kExecutable: return "executable";
  }
  return "handle";
}

// Live handles of this plugin library. A handle is dereferenced only after
// it was found here, so stale or foreign handles become errors, not crashes.
// Every C entry looks up its handles (an op launch: device, stream, one
// buffer per tensor), so the map is split into shards by address, each with
// its own lock: threads launching on different streams rarely meet
// (bench/sdk_registry_bench.cc measures it). Thread-safe.
class Registry {
 public:
  void add(const void* p, Kind k, const void* owner = nullptr) {
    Shard& s = shard(p);
    std::lock_guard<std::mutex> lock(s.mu);
    s.live[p] = {k, owner};
  }
  template <class T>
  T* get(const void* p, Kind k, const char* what) {
    if (p == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, what, " is NULL");
    Shard& s = shard(p);
    bool live;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.live.find(p);
      live = it != s.live.end() && it->second.kind == k;
    }
    if (!live)
      fail(HAL_STATUS_INVALID_ARGUMENT, what, " ", p, " is not a live ", kind_name(k),
           " of this plugin (destroyed, freed twice, or never created)");
    return static_cast<T*>(const_cast<void*>(p));
  }
  const void* owner(const void* p) {
    Shard& s = shard(p);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.live.find(p);
    return it == s.live.end() ? nullptr : it->second.owner;
  }
  // Removes P if it is live and of kind K; returns whether it was.
  bool remove(const void* p, Kind k) {
    Shard& s = shard(p);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.live.find(p);
    if (it == s.live.end() || it->second.kind != k) return false;
    s.live.erase(it);
    return true;
  }

 private:
  struct Entry {
    Kind kind;
    const void* owner;
  };
  struct alignas(64) Shard {  // one cache line of its own per lock
    std::mutex mu;
    std::unordered_map<const void*, Entry> live;
  };
  static constexpr size_t kShards = 16;
  Shard& shard(const void* p) {
    // Objects are at least 16-byte aligned; mix the bits above that.
    auto a = reinterpret_cast<uintptr_t>(p) >> 4;
    return shards_[(a ^ (a >> 4) ^ (a >> 8)) % kShards];
  }
  Shard shards_[kShards];
};

inline Registry& registry() {
  static Registry* r = new Registry();  // leaked: outlives static destructors
  return *r;
}

template <class T>
T* as(const void* handle, Kind k, const char* what) {
  return registry().get<T>(handle, k, what);
}

}  // namespace hal::sdk::detail

#endif  // HAL_SDK_DETAIL_REGISTRY_HPP_
