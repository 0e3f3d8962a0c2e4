// HAL C++ SDK, internal: the live handles of this plugin library. Every C
// entry looks its handles up here before dereferencing them, so stale or
// foreign handles become INVALID_ARGUMENT statuses, not crashes.
#ifndef HAL_SDK_DETAIL_REGISTRY_HPP_
#define HAL_SDK_DETAIL_REGISTRY_HPP_

#include <cstdint>
#include <mutex>
#include <vector>

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

// The registry's map from handle to kind and owner: open addressing with
// linear probing over a power-of-two table, a multiplicative hash and
// backward-shift deletion. Every op launch looks up its device and each
// buffer; std::unordered_map's prime modulo (a 64-bit divide) and node hop
// were ~2 % of a 1-element launch. Not thread-safe (the Registry locks).
class HandleTable {
 public:
  struct Entry {
    Kind kind;
    const void* owner;
  };
  // P's entry, or nullptr (P == nullptr included). Valid until the next insert or erase.
  const Entry* find(const void* p) const {
    if (p == nullptr || slots_.empty()) return nullptr;
    for (size_t i = home(p);; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.key == p) return &s.entry;
      if (s.key == nullptr) return nullptr;
    }
  }
  // Sets P's entry, replacing any. A null P is never live (lookups of it fail): ignored.
  void insert(const void* p, Entry e) {
    if (p == nullptr) return;
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = home(p);
    while (slots_[i].key != nullptr && slots_[i].key != p) i = (i + 1) & mask();
    if (slots_[i].key == nullptr) ++size_;
    slots_[i] = Slot{p, e};
  }
  // Removes P; false when absent.
  bool erase(const void* p) {
    if (p == nullptr || slots_.empty()) return false;
    size_t i = home(p);
    while (slots_[i].key != p) {
      if (slots_[i].key == nullptr) return false;
      i = (i + 1) & mask();
    }
    // Shift later members of the probe run back so no lookup stops early.
    for (size_t j = (i + 1) & mask(); slots_[j].key != nullptr; j = (j + 1) & mask()) {
      const size_t h = home(slots_[j].key);
      if (((j - h) & mask()) >= ((j - i) & mask())) {  // H is not cyclically in (I, J]: J may move to I
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    return true;
  }

 private:
  struct Slot {
    const void* key = nullptr;
    Entry entry{};
  };
  size_t mask() const { return slots_.size() - 1; }
  size_t home(const void* p) const {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(p) * UINT64_C(0x9E3779B97F4A7C15)) >> shift_);
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    const size_t capacity = old.empty() ? 64 : old.size() * 2;
    slots_.assign(capacity, Slot{});
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (const Slot& s : old)
      if (s.key != nullptr) insert(s.key, s.entry);
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
  unsigned shift_ = 64;
};

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
    live_.insert(p, {k, owner});
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
    const HandleTable::Entry* e = live_.find(p);
    if (e == nullptr || e->kind != k) return false;
    return live_.erase(p);
  }

 private:
  template <class T>
  T* get_locked(const void* p, Kind k, const char* what) const {
    if (p == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, what, " is NULL");
    const HandleTable::Entry* e = live_.find(p);
    if (e == nullptr || e->kind != k)
      fail(HAL_STATUS_INVALID_ARGUMENT, what, " ", p, " is not a live ", kind_name(k),
           " of this plugin (destroyed, freed twice, or never created)");
    return static_cast<T*>(const_cast<void*>(p));
  }
  const void* owner_locked(const void* p) const {
    const HandleTable::Entry* e = live_.find(p);
    return e == nullptr ? nullptr : e->owner;
  }

  std::recursive_mutex mu_;
  HandleTable live_;
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
