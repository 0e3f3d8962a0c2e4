// torch_hal backend: runtime, allocator, device guard, PrivateUse1 hooks.
#include "backend.hpp"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
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
  TORCH_CHECK(index >= 0 && static_cast<size_t>(index) < devices.size(), "torch_hal: device hal:", int(index),
              " does not exist; there ", devices.size() == 1 ? "is 1 device" : "are " + std::to_string(devices.size()) + " devices",
              " (hal:0..hal:", devices.size() - 1, ")");
  return devices[index];
}

c10::DeviceIndex current_device() noexcept { return tls_current_device; }

void set_current_device(c10::DeviceIndex index) {
  if (index == tls_current_device) return;
  device(index);  // checks the index
  tls_current_device = index;
}

// ---- memory ----

namespace {

// Tokens are never reused, so address-range checks in PyTorch (overlap,
// aliasing) see disjoint ranges for distinct allocations.
std::atomic<uintptr_t> next_token{uintptr_t{1} << 44};

std::mutex registry_mu;
std::map<uintptr_t, Allocation*>& registry() {  // token -> live allocation
  static auto* r = new std::map<uintptr_t, Allocation*>();
  return *r;
}

void delete_allocation(void* ctx) {
  auto* a = static_cast<Allocation*>(ctx);
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    registry().erase(a->token);
  }
  delete a;
}

// The allocation holding address P and P's byte offset in it.
std::pair<Allocation*, uint64_t> find_allocation(const void* p) {
  auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(registry_mu);
  auto it = registry().upper_bound(addr);
  TORCH_CHECK(it != registry().begin(), "torch_hal: ", p, " is not hal device memory");
  --it;
  TORCH_CHECK(addr < it->first + it->second->nbytes || (addr == it->first), "torch_hal: ", p,
              " is not hal device memory");
  return {it->second, addr - it->first};
}

class HalAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(current_device(), nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }  // ctx != data
  void copy_data(void* dest, const void* src, size_t count) const override {
    if (count == 0) return;
    auto [d, doff] = find_allocation(dest);
    auto [s, soff] = find_allocation(src);
    TORCH_CHECK(d->device == s->device, "torch_hal: copy_data across devices");
    d->buffer.copy_from(s->buffer, count, doff, soff);
  }
};

HalAllocator the_allocator;

}  // namespace

c10::Allocator* allocator() { return &the_allocator; }

c10::DataPtr allocate_on(c10::DeviceIndex index, size_t nbytes) {
  c10::Device where(c10::DeviceType::PrivateUse1, index);
  if (nbytes == 0) return c10::DataPtr(nullptr, where);
  const auto& dev = device(index);
  auto a = std::make_unique<Allocation>();
  try {
    a->buffer = dev->allocate(nbytes);
  } catch (const hal::Error& e) {
    if (e.code() == HAL_STATUS_OUT_OF_MEMORY) {
      uint64_t free_bytes = 0, total = 0;
      try {
        dev->memory_info(&free_bytes, &total);
      } catch (const hal::Error&) {
      }
      TORCH_CHECK_WITH(OutOfMemoryError, false, "torch_hal: out of memory on hal:", int(index), " (", dev->id(),
                       "): tried to allocate ", nbytes, " bytes; the device reports ", free_bytes, " of ", total,
                       " bytes free: ", e.what());
    }
    TORCH_CHECK(false, "torch_hal: allocating ", nbytes, " bytes on hal:", int(index), " failed: ", e.what());
  }
  a->nbytes = nbytes;
  a->device = index;
  // Round so the next token starts past this range; +1 page keeps neighbours apart.
  a->token = next_token.fetch_add(((nbytes + 4095) & ~uintptr_t{4095}) + 4096);
  Allocation* raw = a.release();
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    registry()[raw->token] = raw;
  }
  return c10::DataPtr(reinterpret_cast<void*>(raw->token), raw, &delete_allocation, where);
}

Allocation* allocation_of(const c10::Storage& storage) {
  const c10::DataPtr& p = storage.data_ptr();
  if (p.get() == nullptr) return nullptr;
  TORCH_CHECK(p.get_deleter() == &delete_allocation, "torch_hal: a hal tensor whose storage was not allocated by torch_hal");
  return static_cast<Allocation*>(p.get_context());
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "torch_hal: trying to resize a storage that is not resizable");
  const c10::DeviceIndex index = storage.device().index();
  c10::DataPtr fresh = allocate_on(index, nbytes);
  if (Allocation* old = allocation_of(storage)) {
    const size_t keep = std::min(nbytes, storage.nbytes());
    if (keep > 0) static_cast<Allocation*>(fresh.get_context())->buffer.copy_from(old->buffer, keep);
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(nbytes);
}

// ---- tensors ----

hal_dtype_e to_hal_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return HAL_DTYPE_FLOAT32;
    case c10::ScalarType::Half: return HAL_DTYPE_FLOAT16;
    case c10::ScalarType::BFloat16: return HAL_DTYPE_BFLOAT16;
    case c10::ScalarType::Double: return HAL_DTYPE_FLOAT64;
    case c10::ScalarType::Char: return HAL_DTYPE_INT8;
    case c10::ScalarType::Byte: return HAL_DTYPE_UINT8;
    case c10::ScalarType::Short: return HAL_DTYPE_INT16;
    case c10::ScalarType::Int: return HAL_DTYPE_INT32;
    case c10::ScalarType::Long: return HAL_DTYPE_INT64;
    case c10::ScalarType::Bool: return HAL_DTYPE_BOOL;
    case c10::ScalarType::UInt16: return HAL_DTYPE_UINT16;
    case c10::ScalarType::UInt32: return HAL_DTYPE_UINT32;
    case c10::ScalarType::UInt64: return HAL_DTYPE_UINT64;
    case c10::ScalarType::ComplexFloat: return HAL_DTYPE_COMPLEX64;
    case c10::ScalarType::ComplexDouble: return HAL_DTYPE_COMPLEX128;
    default: TORCH_CHECK(false, "torch_hal: dtype ", type, " has no HAL dtype");
  }
}

hal::TensorView view_of(const at::Tensor& t) {
  hal::TensorView v;
  v.dtype = to_hal_dtype(t.scalar_type());
  v.shape = t.sizes().vec();
  v.strides = t.strides().vec();
  v.byte_offset = static_cast<uint64_t>(t.storage_offset()) * t.element_size();
  if (Allocation* a = allocation_of(t.storage())) {
    v.buffer = a->buffer.handle();
    v.buffer_bytes = a->buffer.size();
  }
  return v;
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

// ---- device guard and hooks ----

namespace {

constexpr auto kHal = c10::DeviceType::PrivateUse1;

// Launches are synchronous (stream nullptr) for now, so every device has
// one default stream and no events.
struct HalGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kHal; }
  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kHal);
    c10::Device old(kHal, current_device());
    set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kHal, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kHal);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { tls_current_device = d.index(); }
  c10::Stream getStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const override { return c10::Stream(c10::Stream::DEFAULT, s.device()); }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  // Nothing is ever queued: every launch and copy has completed on return.
  void synchronizeDevice(const c10::DeviceIndex index) const override { device(index); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, HalGuardImpl);

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
  bool isPinnedPtr(const void*) const override { return false; }
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
