// HAL C++ SDK, internal: the live handles of this plugin library. Every C
// entry looks its handles up here before dereferencing them, so stale or
// foreign handles become INVALID_ARGUMENT statuses, not crashes.
#ifndef HAL_SDK_DETAIL_REGISTRY_HPP_
#define HAL_SDK_DETAIL_REGISTRY_HPP_

#include <mutex>
#include <unordered_map>

#include "hal/sdk/status.hpp"

namespace hal::sdk::detail {

enum class Kind { kPlugin, kDevice, kBuffer, kStream, kEvent, kHostMemory, kExecutable, kComm };

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kPlugin: return "plugin";
    case Kind::kDevice: return "device";
    case Kind::kBuffer: return "buffer";
    case Kind::kStream: return "stream";
    case Kind::kEvent: return "event";
    case Kind::kHostMemory: return "host allocation";
    case Kind::kExecutable: return "executable";
    case Kind::kComm: return "communicator";
  }
  return "handle";
}

// Live handles of this plugin library. A handle is dereferenced only after
// it was found here, so stale or foreign handles become errors, not crashes.
// Thread-safe (one recursive lock).
class Registry {
 public:
  // Holds the registry's lock on this thread while alive, so the lookups a
  // batch makes (an op launch's device and each of its buffers) lock once
  // and each lookup inside re-enters cheaply. Keep the scope to lookups and
  // pure checks: calling into a device (which may lock its own state) under
  // it could order locks against another thread's buffer allocation.
  // Its get() and owner() use the lock it holds (a relock of the recursive
  // mutex is still a pthread call pair: ~10 ns per lookup of a launch).
  class Batch {
   public:
    explicit Batch(Registry& r) : registry_(r), lock_(r.mu_) {}
    template <class T>
    T* get(const void* p, Kind k, const char* what) const {
      return registry_.get_locked<T>(p, k, what);
    }
    const void* owner(const void* p) const { return registry_.owner_locked(p); }

   private:
    Registry& registry_;
    std::lock_guard<std::recursive_mutex> lock_;
  };

  void add(const void* p, Kind k, const void* owner = nullptr) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    live_[p] = {k, owner};
  }
  template <class T>
  T* get(const void* p, Kind k, const char* what) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return get_locked<T>(p, k, what);
  }
  const void* owner(const void* p) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return owner_locked(p);
  }
  // Removes P if it is live and of kind K; returns whether it was.
  bool remove(const void* p, Kind k) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end() || it->second.kind != k) return false;
    live_.erase(it);
    return true;
  }

 private:
  template <class T>
  T* get_locked(const void* p, Kind k, const char* what) const {
    if (p == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, what, " is NULL");
    auto it = live_.find(p);
    if (it == live_.end() || it->second.kind != k)
      fail(HAL_STATUS_INVALID_ARGUMENT, what, " ", p, " is not a live ", kind_name(k),
           " of this plugin (destroyed, freed twice, or never created)");
    return static_cast<T*>(const_cast<void*>(p));
  }
  const void* owner_locked(const void* p) const {
    auto it = live_.find(p);
    return it == live_.end() ? nullptr : it->second.owner;
  }

  struct Entry {
    Kind kind;
    const void* owner;
  };
  std::recursive_mutex mu_;
  std::unordered_map<const void*, Entry> live_;
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
