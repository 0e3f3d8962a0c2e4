// torch_hal streams, events and the device guard (c10's
// DeviceGuardImplInterface, which torch.Stream, torch.Event,
// torch.accelerator and the autograd engine drive).
#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "backend.hpp"

namespace torch_hal {
namespace {

constexpr auto kHal = c10::DeviceType::PrivateUse1;

// Slot 0: the idle "marker" stream that events recorded on the default
// stream are recorded on (the default stream has no HAL handle; its work has
// completed by the time of the record, so an idle stream marks the right
// point and gives elapsed_time a timestamp). Slots 1..kStreamPoolSize: the pool.
struct DeviceStreams {
  std::mutex mu;  // creation only
  std::array<std::atomic<hal::Stream*>, kStreamPoolSize + 1> slots{};
  std::atomic<uint32_t> next{0};
};

DeviceStreams& streams_of(c10::DeviceIndex index) {
  device(index);  // checks the index (and starts the runtime before the count is read)
  static auto* all = new std::vector<DeviceStreams>(static_cast<size_t>(device_count()));  // leaked, as the runtime
  return (*all)[index];
}

// Converts a hal::Error from a stream or event call into c10::Error naming WHAT.
template <class F>
auto checked(const char* what, c10::DeviceIndex index, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const hal::Error& e) {
    TORCH_CHECK(false, "torch_hal: ", what, " on hal:", int(index), " failed: ", e.what());
  }
}

hal::Stream& slot_stream(c10::DeviceIndex index, size_t slot) {
  DeviceStreams& ds = streams_of(index);
  if (hal::Stream* s = ds.slots[slot].load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lock(ds.mu);
  if (hal::Stream* s = ds.slots[slot].load(std::memory_order_relaxed)) return *s;
  auto* s = new hal::Stream(checked("creating a stream", index, [&] { return device(index)->create_stream(); }));
  ds.slots[slot].store(s, std::memory_order_release);
  return *s;
}

c10::Stream make_stream(c10::DeviceIndex index, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kHal, index), id);
}

// Per thread: the current stream id of each device (absent = default).
thread_local std::vector<c10::StreamId> tls_streams;

// The object behind a c10 event's void*: the HAL event and the device it
// was made on (hal::Event does not say), so a wait knows when it crosses
// devices or plugins.
struct HalEvent {
  hal::Event event;
  c10::DeviceIndex device;
};
HalEvent* as_event(void* e) { return static_cast<HalEvent*>(e); }

// torch.Stream(device="hal") asks for index -1: the current device.
c10::DeviceIndex resolve(c10::Device d) { return d.has_index() ? d.index() : current_device(); }

}  // namespace

c10::Stream default_stream(c10::DeviceIndex index) {
  device(index);
  return make_stream(index, 0);
}

c10::Stream new_stream(c10::DeviceIndex index) {
  DeviceStreams& ds = streams_of(index);
  const auto slot = 1 + ds.next.fetch_add(1, std::memory_order_relaxed) % kStreamPoolSize;
  slot_stream(index, slot);
  return make_stream(index, static_cast<c10::StreamId>(slot));
}

c10::Stream current_stream(c10::DeviceIndex index) {
  device(index);
  const auto i = static_cast<size_t>(index);
  return make_stream(index, i < tls_streams.size() ? tls_streams[i] : 0);
}

c10::Stream exchange_stream(c10::Stream s) {
  TORCH_CHECK(s.device_type() == kHal, "torch_hal: ", s, " is not a hal stream");
  TORCH_CHECK(s.id() >= 0 && s.id() <= kStreamPoolSize, "torch_hal: ", s, " is not a stream torch_hal made");
  const c10::Stream old = current_stream(s.device_index());
  hal_stream(s);  // makes the slot of a stream rebuilt from its id (torch.Stream(stream_id=...))
  const auto i = static_cast<size_t>(s.device_index());
  if (tls_streams.size() <= i) tls_streams.resize(i + 1, 0);
  tls_streams[i] = s.id();
  return old;
}

const hal::Stream* hal_stream(c10::Stream s) {
  TORCH_CHECK(s.device_type() == kHal && s.id() >= 0 && s.id() <= kStreamPoolSize, "torch_hal: ", s,
              " is not a stream torch_hal made");
  if (s.id() == 0) return nullptr;
  return &slot_stream(s.device_index(), static_cast<size_t>(s.id()));
}

const hal::Stream* current_hal_stream(c10::DeviceIndex index) noexcept {
  const auto i = static_cast<size_t>(index);
  if (i >= tls_streams.size() || tls_streams[i] == 0) return nullptr;
  // Made current through exchange_stream, so the slot exists.
  return streams_of(index).slots[tls_streams[i]].load(std::memory_order_acquire);
}

void synchronize_stream(c10::Stream s) {
  if (const hal::Stream* hs = hal_stream(s))
    checked("synchronizing a stream", s.device_index(), [&] { hs->synchronize(); });
}

void synchronize_device(c10::DeviceIndex index) {
  DeviceStreams& ds = streams_of(index);
  for (size_t slot = 0; slot < ds.slots.size(); ++slot)
    if (hal::Stream* s = ds.slots[slot].load(std::memory_order_acquire))
      checked("synchronizing the device", index, [&] { s->synchronize(); });
}

namespace {

// The HAL stream an event on S is recorded on: S's, or for the synchronous
// default stream (id 0, no HAL stream) the device's slot-0 stream.
const hal::Stream& recording_stream(c10::Stream s) {
  const hal::Stream* hs = hal_stream(s);
  return hs != nullptr ? *hs : slot_stream(s.device_index(), 0);
}

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
  void uncheckedSetDevice(c10::Device d) const noexcept override { set_current_device_unchecked(d.index()); }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  c10::Stream getStream(c10::Device d) const override { return current_stream(resolve(d)); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(resolve(d)); }
  c10::Stream getNewStream(c10::Device d, int /*priority: HAL streams have none*/) const override {
    return new_stream(resolve(d));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high priority*/) const override {
    return new_stream(resolve(d));
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return exchange_stream(s); }
  bool queryStream(const c10::Stream& s) const override {
    const hal::Stream* hs = hal_stream(s);
    return hs == nullptr || checked("querying a stream", s.device_index(), [&] { return hs->query(); });
  }
  void synchronizeStream(const c10::Stream& s) const override { synchronize_stream(s); }
  void synchronizeDevice(c10::DeviceIndex index) const override { synchronize_device(index); }
  // torch.accelerator.get_device_capability: the dtypes a hal tensor holds
  // and converts between on the device (those with a HAL dtype; the others
  // are stored, but converted on the CPU).
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    const c10::DeviceIndex index = resolve(d);
    TORCH_CHECK(index >= 0 && index < device_count(), "torch_hal: invalid device index ", int(index), " (",
                int(device_count()), " hal devices)");
    c10::DeviceCapability cap;
    cap.capability_data.capability_bits = 0;
#define HAL_CAPABILITY_BIT(_, name) \
  if (hal_dtype_of(c10::ScalarType::name)) cap.capability_data.capability_bits |= uint64_t{1} << c10::kIndex_##name;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(HAL_CAPABILITY_BIT)
#undef HAL_CAPABILITY_BIT
    return cap;
  }
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& s) const override {
    allocator()->recordStream(ptr, s);
  }

  void record(void** event, const c10::Stream& s, c10::DeviceIndex index, c10::EventFlag) const override {
    TORCH_CHECK(index == -1 || index == s.device_index(), "torch_hal: event of hal:", int(index),
                " recorded on a stream of hal:", int(s.device_index()));
    const hal::Stream& on = recording_stream(s);
    if (*event != nullptr)
      TORCH_CHECK(as_event(*event)->device == s.device_index(), "torch_hal: an event of hal:",
                  int(as_event(*event)->device), " recorded on a stream of hal:", int(s.device_index()));
    checked("recording an event", s.device_index(), [&] {
      if (*event == nullptr) *event = new HalEvent{device(s.device_index())->create_event(), s.device_index()};
      as_event(*event)->event.record(on);
    });
  }
  // A pool stream waits on the device for an event of its own device (HAL
  // streams wait only on events of their device: hal/stream.h). An event of
  // another device (of this plugin or another) and the synchronous default
  // stream wait on the host: the event has completed when block returns, so
  // everything queued on S afterwards runs after it.
  void block(void* event, const c10::Stream& s) const override {
    if (event == nullptr) return;
    HalEvent* e = as_event(event);
    const hal::Stream* hs = hal_stream(s);
    if (hs != nullptr && e->device == s.device_index()) {
      checked("waiting for an event", s.device_index(), [&] { hs->wait(e->event); });
      return;
    }
    const auto& from = device(e->device);
    const auto& to = device(s.device_index());
    checked(e->device == s.device_index() ? "waiting for an event"
            : &from->plugin() == &to->plugin() ? "waiting for an event of another device"
                                               : "waiting for an event of another plugin's device",
            e->device, [&] { e->event.synchronize(); });
  }
  bool queryEvent(void* event) const override {
    return event == nullptr ||
           checked("querying an event", as_event(event)->device, [&] { return as_event(event)->event.query(); });
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr)
      checked("synchronizing an event", as_event(event)->device, [&] { as_event(event)->event.synchronize(); });
  }
  void destroyEvent(void* event, c10::DeviceIndex) const noexcept override { delete as_event(event); }
  double elapsedTime(void* start, void* end, c10::DeviceIndex index) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "torch_hal: elapsed_time needs both events recorded (record() them on a stream first)");
    TORCH_CHECK(as_event(start)->device == as_event(end)->device, "torch_hal: elapsed_time between an event of hal:",
                int(as_event(start)->device), " and one of hal:", int(as_event(end)->device));
    return checked("elapsed_time", index, [&] {
      return static_cast<double>(hal::Event::elapsed_ns(as_event(start)->event, as_event(end)->event)) / 1e6;
    });
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, HalGuardImpl);

// The profiler's device events (torch.autograd.profiler.profile(use_device="hal")
// records one at each op's start and end): HAL events on the current stream,
// their difference in microseconds as CUDA's stubs give it. Without these
// PyTorch's default stubs report garbage times.
struct HalProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) *device = index;
    const hal::Stream& on = recording_stream(current_stream(index));
    auto* e = checked("recording a profiler event", index,
                      [&] { return new HalEvent{torch_hal::device(index)->create_event(), index}; });
    *event = std::shared_ptr<void>(e, [](void* p) { delete as_event(p); });
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    checked("recording a profiler event", index, [&] { e->event.record(on); });
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    hal::Event* a = &as_event(start->get())->event;
    hal::Event* b = &as_event(end->get())->event;
    return checked("profiler elapsed time", as_event(end->get())->device, [&] {
      a->synchronize();
      b->synchronize();
      return static_cast<float>(static_cast<double>(hal::Event::elapsed_ns(*a, *b)) / 1e3);
    });
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex previous = current_device();
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      set_current_device(i);
      op(i);
    }
    set_current_device(previous);
  }
  void synchronize() const override {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) synchronize_device(i);
  }
};

struct RegisterProfilerStubs {
  RegisterProfilerStubs() {
    static HalProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} register_profiler_stubs;

}  // namespace
}  // namespace torch_hal
