// The caching allocator: reuse without reaching the plugin, stream-aware
// safety, statistics, and OOM recovery. The plugin is the real CPU plugin,
// seen through a counting memory table.
#include "hal/runtime/caching_allocator.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "hal/sdk/status.hpp"
#include "testing/test_util.hpp"

using hal::CachingAllocator;

namespace {

// Forwards to the CPU plugin's table, counting calls; can inject OOM.
struct Counting {
  static inline const hal_memory_api_t* real = nullptr;
  static inline std::atomic<int> allocs{0}, frees{0}, fail_next{0};
  static hal_status_t* allocate(hal_device_t* d, uint64_t size, uint64_t align, hal_buffer_t** out) {
    if (fail_next > 0) {
      --fail_next;
      return hal::sdk::make_status(HAL_STATUS_OUT_OF_MEMORY, "injected: out of memory");
    }
    ++allocs;
    return real->buffer_allocate(d, size, align, out);
  }
  static hal_status_t* free(hal_buffer_t* b) {
    ++frees;
    return real->buffer_free(b);
  }
};

struct Fixture {
  std::shared_ptr<hal::Runtime> rt = hal::testing::load_only({HAL_TEST_CPU_PLUGIN});
  std::shared_ptr<hal::Device> dev = rt->default_device();
  hal_memory_api_t table{};
  hal::Stream a = dev->create_stream(), b = dev->create_stream();

  Fixture() {
    table = rt->plugins()[0]->memory_api();
    Counting::real = &rt->plugins()[0]->memory_api();
    Counting::allocs = Counting::frees = Counting::fail_next = 0;
    table.buffer_allocate = &Counting::allocate;
    table.buffer_free = &Counting::free;
  }
  std::unique_ptr<CachingAllocator> make(bool enabled = true) {
    return std::make_unique<CachingAllocator>(dev->handle(), &table, &rt->plugins()[0]->stream_api(), 64, enabled);
  }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "a second allocation of the same size does not reach the plugin") {
  auto alloc = make();
  CachingAllocator::Block* first = alloc->allocate(1000, nullptr);
  hal_buffer_t* buffer = first->buffer;
  alloc->release(first);
  CachingAllocator::Block* second = alloc->allocate(1000, nullptr);
  CHECK(second->buffer == buffer);
  CHECK(Counting::allocs == 1);
  CHECK(alloc->stats().cache_hits == 1);
  // A slightly smaller request fits the cached 1024-byte block too.
  alloc->release(second);
  CachingAllocator::Block* third = alloc->allocate(900, nullptr);
  CHECK(third->buffer == buffer);
  CHECK(Counting::allocs == 1);
  // A much larger one does not.
  CachingAllocator::Block* big = alloc->allocate(4096, nullptr);
  CHECK(Counting::allocs == 2);
  alloc->release(third);
  alloc->release(big);
}

TEST_CASE_FIXTURE(Fixture, "blocks are reused only on the stream they were allocated for") {
  auto alloc = make();
  CachingAllocator::Block* on_a = alloc->allocate(512, a.handle());
  hal_buffer_t* buffer = on_a->buffer;
  alloc->release(on_a);
  CachingAllocator::Block* on_b = alloc->allocate(512, b.handle());
  CHECK(on_b->buffer != buffer);
  CHECK(Counting::allocs == 2);
  CachingAllocator::Block* again_a = alloc->allocate(512, a.handle());
  CHECK(again_a->buffer == buffer);
  CHECK(Counting::allocs == 2);
  alloc->release(on_b);
  alloc->release(again_a);
}

TEST_CASE_FIXTURE(Fixture, "a block used on another stream is not reused until that stream's work is done") {
  auto alloc = make();
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  // Stream b is busy until the test opens the gate.
  auto* wait_ctx = new std::shared_future<void>(open);
  b.enqueue_host_func([](void* p) {
    auto* f = static_cast<std::shared_future<void>*>(p);
    f->wait_for(std::chrono::seconds(30));
    delete f;
  }, wait_ctx);

  CachingAllocator::Block* blk = alloc->allocate(2048, a.handle());
  hal_buffer_t* buffer = blk->buffer;
  alloc->record_stream(blk, b.handle());
  alloc->release(blk);
  CachingAllocator::Block* meanwhile = alloc->allocate(2048, a.handle());
  CHECK(meanwhile->buffer != buffer);  // b may still be using it
  CHECK(Counting::allocs == 2);

  gate.set_value();
  b.synchronize();
  CachingAllocator::Block* after = alloc->allocate(2048, a.handle());
  CHECK(after->buffer == buffer);  // b is done with it: safe to reuse
  CHECK(Counting::allocs == 2);
  alloc->release(meanwhile);
  alloc->release(after);
}

TEST_CASE_FIXTURE(Fixture, "statistics are exact - empty_cache returns everything to the plugin") {
  auto alloc = make();
  auto* x = alloc->allocate(100, nullptr);         // rounds to 512
  auto* y = alloc->allocate(3u << 20, nullptr);    // 3 MiB rounds to 4 MiB
  auto s = alloc->stats();
  CHECK(s.allocated_bytes == 512 + (4u << 20));
  CHECK(s.requested_bytes == 100 + (3u << 20));
  CHECK(s.reserved_bytes == s.allocated_bytes);
  CHECK(s.peak_allocated_bytes == s.allocated_bytes);
  CHECK(s.allocations == 2);
  CHECK(s.plugin_allocations == 2);
  alloc->release(y);
  s = alloc->stats();
  CHECK(s.allocated_bytes == 512);
  CHECK(s.reserved_bytes == 512 + (4u << 20));
  CHECK(s.peak_allocated_bytes == 512 + (4u << 20));
  alloc->reset_peak_stats();
  CHECK(alloc->stats().peak_allocated_bytes == 512);
  alloc->release(x);
  alloc->empty_cache();
  s = alloc->stats();
  CHECK(s.allocated_bytes == 0);
  CHECK(s.reserved_bytes == 0);
  CHECK(s.plugin_frees == 2);
  CHECK(Counting::frees == 2);
}

TEST_CASE_FIXTURE(Fixture, "out of memory: the cache is emptied and the allocation retried") {
  auto alloc = make();
  alloc->release(alloc->allocate(8192, nullptr));
  Counting::fail_next = 1;
  auto* blk = alloc->allocate(1 << 20, nullptr);
  CHECK(blk != nullptr);
  CHECK(Counting::frees == 1);  // the cached 8 KiB block went back first
  alloc->release(blk);
  Counting::fail_next = 2;  // still failing after the retry: a clean error
  try {
    alloc->allocate(5 << 20, nullptr);
    FAIL("expected OUT_OF_MEMORY");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_OUT_OF_MEMORY);
    CHECK(std::string(e.what()) == "injected: out of memory");
  }
}

TEST_CASE_FIXTURE(Fixture, "disabled: every call reaches the plugin") {
  auto alloc = make(false);
  alloc->release(alloc->allocate(1000, nullptr));
  alloc->release(alloc->allocate(1000, nullptr));
  CHECK(Counting::allocs == 2);
  CHECK(Counting::frees == 2);
  CHECK(alloc->stats().cache_hits == 0);
}

TEST_CASE("devices allocate through their caching allocator") {
  auto rt = hal::testing::load_only({HAL_TEST_CPU_PLUGIN});
  auto dev = rt->default_device();
  { hal::Buffer b = dev->allocate(777); }
  { hal::Buffer b = dev->allocate(777); }
  auto s = dev->allocator().stats();
  CHECK(s.plugin_allocations == 1);
  CHECK(s.cache_hits == 1);
  CHECK(s.allocated_bytes == 0);
  CHECK(s.reserved_bytes == 1024);
}

TEST_CASE("size rounding") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size((1 << 20) + 1) == (2 << 20));
  CHECK(CachingAllocator::round_size(UINT64_MAX) == UINT64_MAX);
}

TEST_CASE_FIXTURE(Fixture, "a miss returns the oldest cached blocks while the reserve exceeds the limit") {
  auto alloc = make();
  // Ten 4 KiB blocks cached, then requests of another size class: without
  // collection the reserve would be 40 KiB over what is in use.
  std::vector<CachingAllocator::Block*> small;
  for (int i = 0; i < 10; ++i) small.push_back(alloc->allocate(4096, nullptr));
  for (auto* b : small) alloc->release(b);
  CHECK(alloc->stats().reserved_bytes == 10 * 4096);
  std::vector<CachingAllocator::Block*> big;
  for (int i = 0; i < 4; ++i) {
    big.push_back(alloc->allocate(16384, nullptr));
    const hal::AllocatorStats s = alloc->stats();
    CHECK(static_cast<double>(s.reserved_bytes) <= CachingAllocator::kReserveLimit * s.allocated_bytes);
  }
  CHECK(Counting::frees == 10);  // every cached 4 KiB block went back
  // Still a cache: the same size again is a hit, with nothing freed.
  alloc->release(big.back());
  big.back() = alloc->allocate(16384, nullptr);
  CHECK(Counting::frees == 10);
  CHECK(alloc->stats().cache_hits == 1);
  for (auto* b : big) alloc->release(b);
}

TEST_CASE_FIXTURE(Fixture, "collection does not wait for the stream: collected blocks go back once its work passes") {
  auto alloc = make();
  std::vector<CachingAllocator::Block*> small;
  for (int i = 0; i < 10; ++i) small.push_back(alloc->allocate(4096, a.handle()));
  for (auto* blk : small) alloc->release(blk);
  // Stream a is busy until the test opens the gate; its cached blocks may
  // still be read by the queued work, so they cannot go back yet.
  std::promise<void> gate;
  static std::atomic<bool> passed{false};
  passed = false;
  auto* wait_ctx = new std::shared_future<void>(gate.get_future().share());
  a.enqueue_host_func([](void* p) {
    auto* f = static_cast<std::shared_future<void>*>(p);
    f->wait_for(std::chrono::seconds(30));
    passed = true;
    delete f;
  }, wait_ctx);

  CachingAllocator::Block* big = alloc->allocate(16384, a.handle());  // a miss that collects
  CHECK_FALSE(passed.load());  // returned while a was still blocked
  CHECK(Counting::frees == 0);
  CHECK(alloc->stats().reserved_bytes == 10 * 4096 + 16384);  // still held, on their way back
  // A further miss does not collect the same bytes twice.
  CachingAllocator::Block* big2 = alloc->allocate(16384, a.handle());
  CHECK(Counting::frees == 0);

  gate.set_value();
  a.synchronize();
  alloc->release(alloc->allocate(512, nullptr));  // any allocation sees the event completed
  CHECK(Counting::frees == 10);
  CHECK(alloc->stats().reserved_bytes == 2 * 16384 + 512);
  alloc->release(big);
  alloc->release(big2);
}

TEST_CASE_FIXTURE(Fixture, "empty_cache waits for collected blocks still on their way back") {
  auto alloc = make();
  std::vector<CachingAllocator::Block*> small;
  for (int i = 0; i < 10; ++i) small.push_back(alloc->allocate(4096, a.handle()));
  for (auto* blk : small) alloc->release(blk);
  a.enqueue_host_func([](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }, nullptr);
  CachingAllocator::Block* big = alloc->allocate(16384, a.handle());
  alloc->release(big);
  alloc->empty_cache();
  CHECK(Counting::frees == 11);
  CHECK(alloc->stats().reserved_bytes == 0);
}
