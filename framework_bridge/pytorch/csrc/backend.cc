// torch_hal backend: runtime, allocators, memory statistics, PrivateUse1 hooks.
#include "backend.hpp"
#include "row_conversion.hpp"

#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/AutogradState.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

namespace torch_hal {
namespace {

struct RuntimeState {
  std::mutex mu;
  std::optional<std::string> config;
  std::vector<std::string> plugins;
  std::shared_ptr<hal::Runtime> runtime;  // set once, never reset
  std::vector<std::shared_ptr<hal::Device>> devices;
  std::atomic<bool> initialized{false};
};

RuntimeState& state() {
  static auto* s = new RuntimeState();  // leaked: tensors may outlive static destruction
  return *s;
}

std::string describe_skipped(const hal::Runtime& rt) {
  std::ostringstream os;
  if (rt.skipped().empty()) os << " (no plugin was found; searched:";
  for (const auto& p : rt.search_paths()) if (rt.skipped().empty()) os << " " << p;
  if (rt.skipped().empty()) os << ")";
  for (const auto& s : rt.skipped())
    os << "\n  skipped " << (s.name.empty() ? s.path : s.name) << " (" << s.path
       << "): " << hal::skip_reason_name(s.reason) << ": " << s.message;
  return os.str();
}

RuntimeState& initialized_state() {
  RuntimeState& s = state();
  if (s.initialized.load(std::memory_order_acquire)) return s;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.runtime) return s;
  hal::RuntimeOptions options;
  options.config_path = s.config;
  options.plugin_paths = s.plugins;
  std::shared_ptr<hal::Runtime> rt;
  try {
    rt = hal::Runtime::create(options);
  } catch (const hal::Error& e) {
    TORCH_CHECK(false, "torch_hal: cannot start the HAL runtime: ", e.what());
  }
  auto devices = rt->devices();
  TORCH_CHECK(!devices.empty(), "torch_hal: no HAL device is available", describe_skipped(*rt));
  s.devices = std::move(devices);
  s.runtime = std::move(rt);
  s.initialized.store(true, std::memory_order_release);
  return s;
}

thread_local c10::DeviceIndex tls_current_device = 0;

}  // namespace

void set_init_options(std::optional<std::string> config, std::vector<std::string> plugins) {
  RuntimeState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  TORCH_CHECK(!s.runtime, "torch_hal.init(): the HAL runtime already started (first use of a \"hal\" device); "
              "call init() before using the device");
  s.config = std::move(config);
  s.plugins = std::move(plugins);
}

bool is_initialized() noexcept { return state().initialized.load(std::memory_order_acquire); }

hal::Runtime& runtime() { return *initialized_state().runtime; }

c10::DeviceIndex device_count() noexcept {
  try {
    return static_cast<c10::DeviceIndex>(initialized_state().devices.size());
  } catch (...) {
    return 0;  // the error is raised again, with its reasons, at first real use
  }
}

const std::shared_ptr<hal::Device>& device(c10::DeviceIndex index) {
  const auto& devices = initialized_state().devices;
  if (C10_UNLIKELY(index < 0 || static_cast<size_t>(index) >= devices.size())) {
    // Worded as CUDA's "CUDA error: invalid device ordinal\nGPU device may be
    // out of range, do you have enough GPUs?" (a torch.AcceleratorError, as
    // C10_CUDA_CHECK raises it), naming the hal device and the count.
    std::ostringstream os;
    os << "hal error: invalid device ordinal\nhal device may be out of range, do you have enough hal devices? (hal:"
       << int(index) << " does not exist; there "
       << (devices.size() == 1 ? "is 1 device" : "are " + std::to_string(devices.size()) + " devices")
       << ": hal:0..hal:" << devices.size() - 1 << ")";
    throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, HAL_STATUS_INVALID_ARGUMENT,
                                os.str());
  }
  return devices[index];
}

c10::DeviceIndex current_device() noexcept { return tls_current_device; }

void set_current_device(c10::DeviceIndex index) {
  if (index == tls_current_device) return;
  device(index);  // checks the index
  tls_current_device = index;
}

void set_current_device_unchecked(c10::DeviceIndex index) noexcept { tls_current_device = index; }

// ---- memory ----

namespace {

// Tokens are never reused, so address-range checks in PyTorch (overlap,
// aliasing) see disjoint ranges for distinct allocations.
uintptr_t next_token = uintptr_t{1} << 44;  // guarded by registry_mu

// Bridge-side counts per device (the core allocator counts bytes, not live
// tensors): allocation.{current,peak,allocated,freed} and num_ooms.
struct Counts {
  int64_t live = 0, peak = 0, allocated = 0, freed = 0, ooms = 0;
  // Cumulative core counters at the last resetAccumulatedStats.
  uint64_t base_device_alloc = 0, base_device_free = 0, base_retries = 0;
};

// Live allocations by token, in token order. Tokens only grow, so an
// allocation almost always appends; a free leaves a hole, removed once holes
// outnumber live entries. No heap allocation per tensor (a std::map node
// cost a malloc/free pair on every output of every op).
class Registry {
 public:
  void add(Allocation* a) {
    if (entries_.empty() || entries_.back().first < a->token) {
      entries_.emplace_back(a->token, a);
    } else {  // another thread took a smaller token but registered later
      entries_.insert(lower(a->token), {a->token, a});
    }
    ++live_;
  }
  void remove(const Allocation* a) {
    auto it = lower(a->token);
    TORCH_INTERNAL_ASSERT(it != entries_.end() && it->second == a, "torch_hal: freeing an unregistered allocation");
    it->second = nullptr;
    --live_;
    if (entries_.size() >= 64 && live_ * 2 < entries_.size())
      entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [](const auto& e) { return e.second == nullptr; }),
                     entries_.end());
  }
  // The live allocation whose range holds ADDR, or nullptr.
  Allocation* find(uintptr_t addr) const {
    auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                               [](uintptr_t v, const auto& e) { return v < e.first; });
    if (it == entries_.begin()) return nullptr;
    const Allocation* a = (--it)->second;  // a hole: ADDR is in no live range (ranges are disjoint)
    if (a == nullptr || !(addr < a->token + a->nbytes || addr == a->token)) return nullptr;
    return const_cast<Allocation*>(a);
  }

 private:
  using Entries = std::vector<std::pair<uintptr_t, Allocation*>>;  // nullptr: freed
  Entries::iterator lower(uintptr_t token) {
    return std::lower_bound(entries_.begin(), entries_.end(), token,
                            [](const auto& e, uintptr_t v) { return e.first < v; });
  }
  Entries entries_;
  size_t live_ = 0;
};

std::mutex registry_mu;
Registry& registry() {  // guarded by registry_mu
  static auto* r = new Registry();
  return *r;
}
Counts& counts(c10::DeviceIndex index) {  // guarded by registry_mu; index >= 0
  static auto* c = new std::array<Counts, std::numeric_limits<c10::DeviceIndex>::max() + 1>();
  return (*c)[static_cast<size_t>(index)];
}

// Freed Allocation objects kept for reuse (guarded by registry_mu, which
// both ends hold anyway): a malloc/free pair less per tensor. Bounded.
std::vector<std::unique_ptr<Allocation>>& spare_allocations() {
  static auto* spare = new std::vector<std::unique_ptr<Allocation>>();
  return *spare;
}
constexpr size_t kSpareAllocations = 256;

void delete_allocation(void* ctx) {
  std::unique_ptr<Allocation> a(static_cast<Allocation*>(ctx));
  a->buffer = hal::Buffer();  // released outside the lock (it takes the device allocator's)
  std::lock_guard<std::mutex> lock(registry_mu);
  registry().remove(a.get());
  Counts& c = counts(a->device);
  --c.live;
  ++c.freed;
  if (spare_allocations().size() < kSpareAllocations) spare_allocations().push_back(std::move(a));
}

// The allocation holding address P and P's byte offset in it.
std::pair<Allocation*, uint64_t> find_allocation(const void* p) {
  auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(registry_mu);
  Allocation* a = registry().find(addr);
  TORCH_CHECK(a != nullptr, "torch_hal: ", p, " is not hal device memory");
  return {a, addr - a->token};
}

void set_stat(c10::CachingAllocator::Stat& s, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
  s.current = current;
  s.peak = peak;
  s.allocated = allocated;
  s.freed = freed;
}

class HalAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(current_device(), nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }  // ctx != data
  void copy_data(void* dest, const void* src, size_t count) const override {
    if (count == 0) return;
    auto [d, doff] = find_allocation(dest);
    auto [s, soff] = find_allocation(src);
    TORCH_CHECK(d->device == s->device, "torch_hal: copy_data across devices");
    d->buffer.copy_from(s->buffer, count, doff, soff, current_hal_stream(d->device));
  }

  bool initialized() override { return is_initialized(); }
  void emptyCache(c10::MempoolId_t) override {
    if (!is_initialized()) return;
    clear_device_scalars();  // their blocks go back to the cache first
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) device(i)->allocator().empty_cache();
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (ptr.get() == nullptr) return;
    TORCH_CHECK(ptr.get_deleter() == &delete_allocation || ptr.get_deleter() == &release_shared_allocation,
                "torch_hal: record_stream on memory torch_hal did not allocate");
    Allocation* a = allocation_of(ptr);
    TORCH_CHECK(stream.device_index() == a->device, "torch_hal: record_stream: the tensor is on hal:", int(a->device),
                " but the stream is on hal:", int(stream.device_index()));
    // Default-stream work has completed on return: nothing to wait for.
    if (const hal::Stream* s = hal_stream(stream)) a->buffer.record_stream(*s);
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex index) override {
    const hal::AllocatorStats core = device(index)->allocator().stats();
    Counts c;
    {
      std::lock_guard<std::mutex> lock(registry_mu);
      c = counts(index);
    }
    c10::CachingDeviceAllocator::DeviceStats out;
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    const auto bytes = [](uint64_t v) { return static_cast<int64_t>(v); };
    set_stat(out.allocation[all], c.live, c.peak, c.allocated, c.freed);
    set_stat(out.active[all], c.live, c.peak, c.allocated, c.freed);
    // No split blocks: active = allocated. Cumulative byte totals are not
    // kept by the core allocator (0).
    set_stat(out.allocated_bytes[all], bytes(core.allocated_bytes), bytes(core.peak_allocated_bytes), 0, 0);
    set_stat(out.active_bytes[all], bytes(core.allocated_bytes), bytes(core.peak_allocated_bytes), 0, 0);
    set_stat(out.requested_bytes[all], bytes(core.requested_bytes), bytes(core.requested_bytes), 0, 0);
    set_stat(out.reserved_bytes[all], bytes(core.reserved_bytes), bytes(core.peak_reserved_bytes), 0, 0);
    const int64_t device_alloc = bytes(core.plugin_allocations - c.base_device_alloc);
    const int64_t device_free = bytes(core.plugin_frees - c.base_device_free);
    set_stat(out.segment[all], bytes(core.plugin_allocations - core.plugin_frees), 0, device_alloc, device_free);
    out.num_device_alloc = device_alloc;
    out.num_device_free = device_free;
    out.num_ooms = c.ooms;
    out.num_alloc_retries = bytes(core.alloc_retries - c.base_retries);
    return out;
  }
  void resetAccumulatedStats(c10::DeviceIndex index) override {
    const hal::AllocatorStats core = device(index)->allocator().stats();
    std::lock_guard<std::mutex> lock(registry_mu);
    Counts& c = counts(index);
    c.allocated = c.freed = c.ooms = 0;
    c.base_device_alloc = core.plugin_allocations;
    c.base_device_free = core.plugin_frees;
    c.base_retries = core.alloc_retries;
  }
  void resetPeakStats(c10::DeviceIndex index) override {
    device(index)->allocator().reset_peak_stats();
    std::lock_guard<std::mutex> lock(registry_mu);
    Counts& c = counts(index);
    c.peak = c.live;
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex index) override {
    uint64_t free_bytes = 0, total = 0;
    try {
      device(index)->memory_info(&free_bytes, &total);
    } catch (const hal::Error& e) {
      TORCH_CHECK(false, "torch_hal: memory info of hal:", int(index), ": ", e.what());
    }
    return {free_bytes, total};
  }
};

HalAllocator the_allocator;

// ---- pinned host memory ----

std::mutex pinned_mu;
std::map<uintptr_t, size_t>& pinned_ranges() {  // start -> size of live blocks
  static auto* r = new std::map<uintptr_t, size_t>();
  return *r;
}

void free_pinned(void* p) {
  {
    std::lock_guard<std::mutex> lock(pinned_mu);
    pinned_ranges().erase(reinterpret_cast<uintptr_t>(p));
  }
  c10::free_cpu(p);
}

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU));
    void* p = c10::alloc_cpu(nbytes);
    {
      std::lock_guard<std::mutex> lock(pinned_mu);
      pinned_ranges()[reinterpret_cast<uintptr_t>(p)] = nbytes;
    }
    return c10::DataPtr(p, p, &free_pinned, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }
};

PinnedAllocator the_pinned_allocator;

}  // namespace

c10::DeviceAllocator* allocator() { return &the_allocator; }

c10::Allocator* pinned_allocator() { return &the_pinned_allocator; }

bool is_pinned_ptr(const void* p) noexcept {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(pinned_mu);
  auto it = pinned_ranges().upper_bound(addr);
  if (it == pinned_ranges().begin()) return false;
  --it;
  return addr < it->first + it->second;
}

std::string lost_device_hint(c10::DeviceIndex index) {
  const auto& dev = device(index);
  if (dev->state() != hal::DeviceState::kLost) return "";
  const std::string lost = "; hal:" + std::to_string(index) + " (" + dev->id() + ") is lost";
  const std::shared_ptr<hal::Device> failover = dev->failover_device();
  const auto& all = initialized_state().devices;
  for (size_t k = 0; failover && k < all.size(); ++k)
    if (all[k] == failover)
      return lost + ": move the model and its tensors to hal:" + std::to_string(k) + " (" + failover->id() +
             ", the hal.toml failover device), e.g. model.to(\"hal:" + std::to_string(k) + "\")";
  return lost + " and hal.toml names no failover device (failover = \"cpu\"): move the model and its tensors to "
                "another device";
}

namespace {

bool backward_on_calling_thread() {
  static const bool calling = [] {
    const char* v = std::getenv("TORCH_HAL_AUTOGRAD_THREADS");
    const std::string s = v ? v : "calling";
    TORCH_CHECK(s == "calling" || s == "device", "torch_hal: TORCH_HAL_AUTOGRAD_THREADS is '", s,
                "' (must be 'calling': a backward runs on the thread that calls it, or 'device': on autograd's "
                "per-device thread, as for CUDA)");
    return s == "calling";
  }();
  return calling;
}

// PyTorch's autograd runs the backward of a non-CPU tensor on the device's
// engine thread while the calling thread waits: two thread hand-offs per
// backward, which on a 2-vCPU VM cost ~210 us and move the caller between
// cores (docs/pytorch.md, "Where backward runs"). The hand-off pays where
// several devices' backward run at once; a HAL plugin's one-device backward
// gains nothing from it, so a thread that makes hal tensors runs backward
// itself, as for CPU tensors. Once per thread: a later explicit
// torch.autograd.set_multithreading_enabled(True) stands.
void adopt_thread() {
  thread_local bool adopted = false;
  if (C10_LIKELY(adopted)) return;
  if (backward_on_calling_thread()) c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
  adopted = true;  // after the check: a bad setting is reported again, not skipped
}

}  // namespace

c10::DataPtr allocate_on(c10::DeviceIndex index, size_t nbytes) {
  adopt_thread();
  c10::Device where(c10::DeviceType::PrivateUse1, index);
  if (nbytes == 0) return c10::DataPtr(nullptr, where);
  const auto& dev = device(index);
  hal::Buffer buffer;
  try {
    buffer = dev->allocate(nbytes, current_hal_stream(index));
  } catch (const hal::Error& e) {
    if (e.code() == HAL_STATUS_OUT_OF_MEMORY) {
      {
        std::lock_guard<std::mutex> lock(registry_mu);
        ++counts(index).ooms;
      }
      uint64_t free_bytes = 0, total = 0;
      try {
        dev->memory_info(&free_bytes, &total);
      } catch (const hal::Error&) {
      }
      const hal::AllocatorStats st = dev->allocator().stats();
      TORCH_CHECK_WITH(OutOfMemoryError, false, "torch_hal: out of memory on hal:", int(index), " (", dev->id(),
                       "): tried to allocate ", nbytes, " bytes; the device reports ", free_bytes, " of ", total,
                       " bytes free; tensors hold ", st.allocated_bytes, " bytes and the cache reserves ",
                       st.reserved_bytes, " bytes in all: ", e.what());
    }
    TORCH_CHECK(false, "torch_hal: allocating ", nbytes, " bytes on hal:", int(index), " failed: ", e.what(),
                lost_device_hint(index));
  }
  Allocation* raw = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    // Round so the next token starts past this range; +1 page keeps neighbours apart.
    const uintptr_t token = next_token;
    next_token += ((nbytes + 4095) & ~uintptr_t{4095}) + 4096;
    auto& spare = spare_allocations();
    if (spare.empty()) {
      raw = new Allocation();
    } else {
      raw = spare.back().release();
      spare.pop_back();
    }
    raw->buffer = std::move(buffer);
    raw->nbytes = nbytes;
    raw->device = index;
    raw->token = token;
    registry().add(raw);
    Counts& c = counts(index);
    c.peak = std::max(c.peak, ++c.live);
    ++c.allocated;
  }
  return c10::DataPtr(reinterpret_cast<void*>(raw->token), raw, &delete_allocation, where);
}

at::Tensor empty_dense(c10::IntArrayRef shape, c10::ScalarType dtype, c10::DeviceIndex index) {
  const caffe2::TypeMeta meta = c10::scalarTypeToTypeMeta(dtype);
  const size_t nbytes = at::detail::computeStorageNbytesContiguous(shape, meta.itemsize());
  // The storage keeps the device-generic allocator for a later resize, as at::empty's does.
  auto storage = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), nbytes,
                                                       allocate_on(index, nbytes), allocator(), /*resizable=*/true);
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    meta);
  if (shape.size() != 1 || shape[0] != 0) t.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return t;
}

Allocation* allocation_of(const c10::DataPtr& p) {
  if (p.get() == nullptr) return nullptr;
  if (p.get_deleter() == &delete_allocation) return static_cast<Allocation*>(p.get_context());
  if (p.get_deleter() == &release_shared_allocation) return static_cast<SharedAllocation*>(p.get_context())->allocation;
  TORCH_CHECK(false, "torch_hal: a hal tensor whose storage (data pointer ", p.get(),
              ") was not allocated by torch_hal nor shares a hal allocation");
}

Allocation* allocation_of(const c10::Storage& storage) { return allocation_of(storage.data_ptr()); }

std::pair<Allocation*, uint64_t> allocation_at(const void* p) noexcept {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(registry_mu);
  Allocation* a = registry().find(addr);
  if (a == nullptr) return {nullptr, 0};
  return {a, addr - a->token};
}

hal::Buffer& buffer_of(const at::Tensor& t) {
  Allocation* a = allocation_of(t.storage());
  TORCH_CHECK(a != nullptr, "torch_hal: the ", t.device(), " tensor of shape ", t.sizes(),
              " has an empty storage (0 bytes: freed, or resized to 0) but its view needs ",
              t.numel() * t.element_size(), " bytes");
  return a->buffer;
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "torch_hal: trying to resize a storage that is not resizable");
  const c10::DeviceIndex index = storage.device().index();
  c10::DataPtr fresh = allocate_on(index, nbytes);
  if (Allocation* old = allocation_of(storage)) {
    const size_t keep = std::min(nbytes, storage.nbytes());
    if (keep > 0)
      static_cast<Allocation*>(fresh.get_context())->buffer.copy_from(old->buffer, keep, 0, 0, current_hal_stream(index));
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(nbytes);
}

// ---- tensors ----

namespace {
// [ScalarType] -> HAL dtype, HAL_DTYPE_INVALID where HAL has none: a load
// instead of a switch (three per launch of a binary op).
struct DtypeTable {
  hal_dtype_e to_hal[static_cast<size_t>(c10::ScalarType::NumOptions)];
  constexpr DtypeTable() : to_hal() {
    for (auto& d : to_hal) d = HAL_DTYPE_INVALID;
    using S = c10::ScalarType;
    auto set = [&](S s, hal_dtype_e d) { to_hal[static_cast<size_t>(s)] = d; };
    set(S::Float, HAL_DTYPE_FLOAT32);
    set(S::Half, HAL_DTYPE_FLOAT16);
    set(S::BFloat16, HAL_DTYPE_BFLOAT16);
    set(S::Double, HAL_DTYPE_FLOAT64);
    set(S::Char, HAL_DTYPE_INT8);
    set(S::Byte, HAL_DTYPE_UINT8);
    set(S::Short, HAL_DTYPE_INT16);
    set(S::Int, HAL_DTYPE_INT32);
    set(S::Long, HAL_DTYPE_INT64);
    set(S::Bool, HAL_DTYPE_BOOL);
    set(S::UInt16, HAL_DTYPE_UINT16);
    set(S::UInt32, HAL_DTYPE_UINT32);
    set(S::UInt64, HAL_DTYPE_UINT64);
    set(S::ComplexFloat, HAL_DTYPE_COMPLEX64);
    set(S::ComplexDouble, HAL_DTYPE_COMPLEX128);
  }
};
constexpr DtypeTable kDtypes;
}  // namespace

std::optional<hal_dtype_e> hal_dtype_of(c10::ScalarType type) noexcept {
  const auto i = static_cast<size_t>(type);
  if (i >= std::size(kDtypes.to_hal) || kDtypes.to_hal[i] == HAL_DTYPE_INVALID) return std::nullopt;
  return kDtypes.to_hal[i];
}

hal_dtype_e to_hal_dtype(c10::ScalarType type) {
  const auto d = hal_dtype_of(type);
  TORCH_CHECK(d.has_value(), "torch_hal: dtype ", type, " has no HAL dtype");
  return *d;
}

c10::ScalarType scalar_type_of(hal_dtype_e dtype) {
  for (size_t i = 0; i < std::size(kDtypes.to_hal); ++i)
    if (kDtypes.to_hal[i] == dtype) return static_cast<c10::ScalarType>(i);
  TORCH_CHECK(false, "torch_hal: HAL dtype ", static_cast<int>(dtype), " has no PyTorch dtype");
}

hal::TensorRef ref_of(const at::Tensor& t) {
  hal::TensorRef r;
  r.dtype = to_hal_dtype(t.scalar_type());
  r.rank = static_cast<uint32_t>(t.dim());
  r.shape = t.sizes().data();
  r.strides = t.strides().data();
  r.byte_offset = static_cast<uint64_t>(t.storage_offset()) * t.element_size();
  if (Allocation* a = allocation_of(t.storage())) {
    r.buffer = a->buffer.handle();
    r.buffer_bytes = a->buffer.size();
  }
  return r;
}

std::pair<int64_t, int64_t> byte_span(const at::Tensor& t) {
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return {t.storage_offset() * t.element_size(), (last + 1) * t.element_size()};
}

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.storage().is_alias_of(b.storage()) && a.storage_offset() == b.storage_offset() &&
         a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.strides() == b.strides();
}

hal::TensorView view_of(const at::Tensor& t) {
  return hal::TensorView(ref_of(t));
}

void assign_view(hal::TensorView& view, const at::Tensor& t) {
  const hal::TensorRef r = ref_of(t);
  view.buffer = r.buffer;
  view.buffer_bytes = r.buffer_bytes;
  view.byte_offset = r.byte_offset;
  view.dtype = r.dtype;
  view.shape.assign(r.shape, r.shape + r.rank);
  view.strides.assign(r.strides, r.strides + r.rank);
}

const hal::OpRunner& op_runner(c10::DeviceIndex index, const std::string& name) {
  static std::mutex mu;
  static auto* cache = new std::map<std::pair<c10::DeviceIndex, std::string>, std::unique_ptr<hal::OpRunner>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*cache)[{index, name}];
  if (!slot) slot = std::make_unique<hal::OpRunner>(device(index), name);
  return *slot;
}

// ---- fallback accounting ----

namespace {
std::mutex stats_mu;
std::map<std::string, uint64_t>& stats() {
  static auto* s = new std::map<std::string, uint64_t>();
  return *s;
}
std::set<std::string>& warned() {
  static auto* w = new std::set<std::string>();
  return *w;
}
bool warn_enabled() {
  const char* v = std::getenv("HAL_FALLBACK_WARN");
  return v == nullptr || std::string(v) != "0";
}
}  // namespace

void count_fallback(const std::string& op, const std::string& reason) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    ++stats()[op];
    first = warned().insert(op).second;
  }
  if (first && warn_enabled())
    TORCH_WARN("torch_hal: ", op, " runs on the CPU fallback (", reason, "); HAL_FALLBACK_WARN=0 silences this");
}

std::map<std::string, uint64_t> fallback_stats() {
  std::lock_guard<std::mutex> lock(stats_mu);
  return stats();
}

void reset_fallback_stats() {
  std::lock_guard<std::mutex> lock(stats_mu);
  stats().clear();
}

// ---- hooks ----

namespace {

constexpr auto kHal = c10::DeviceType::PrivateUse1;

struct HalHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    if (d < 0 || d >= device_count()) return current_device();
    return exchangeDevice(d);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return at::Device(kHal, find_allocation(data).first->device);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return new_generator(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

struct Registration {
  Registration() {
    c10::SetAllocator(kHal, &the_allocator);
    static HalHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
} registration;

}  // namespace
}  // namespace torch_hal
