// Threads: eight threads share each device (the CPU plugin's, and PoCL's
// OpenCL device when built) and at once allocate, copy, launch, record and
// wait events across streams, and free, checking every result. The CI runs
// this suite under ThreadSanitizer too (.ci/test.sh, the tsan tree).
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "hal/runtime/runtime.hpp"
#include "testing/test_util.hpp"

namespace {

constexpr int kThreads = 8;

// Per thread, ITERATIONS rounds on DEVICE: a, b uploaded on the thread's
// stream; out = a + b there; an event recorded after it; a second stream
// (every third round the device's shared stream) waits for it, computes
// out2 = out * b and downloads it; the buffers go back to the cache while
// the streams may still use them (record_stream). Returns the wrong
// results and the errors, as text ("" when all is well).
std::string hammer(const std::shared_ptr<hal::Device>& device, int iterations) {
  std::vector<std::string> problems(kThreads);
  hal::Stream shared = device->create_stream();
  const hal::OpRunner add(device, "add"), mul(device, "mul");  // shared: OpRunner is thread-safe
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        hal::Stream mine = device->create_stream(), other = device->create_stream();
        hal::Event done = device->create_event();
        ++started;
        while (started.load() < kThreads) std::this_thread::yield();  // all at once
        for (int i = 0; i < iterations; ++i) {
          const int64_t n = 1 + (t * 97 + i * 31) % 2048;
          const uint64_t bytes = static_cast<uint64_t>(n) * sizeof(float);
          std::vector<float> a(n), b(n), got(n, -1.0f);
          for (int64_t k = 0; k < n; ++k) {
            a[k] = static_cast<float>(t * 1000 + k);
            b[k] = static_cast<float>(i % 7 + 1);
          }
          const hal::Stream& second = i % 3 == 0 ? shared : other;
          hal::Buffer ba = device->allocate(bytes, &mine), bb = device->allocate(bytes, &mine);
          hal::Buffer bo = device->allocate(bytes, &mine), bo2 = device->allocate(bytes, &second);
          ba.copy_from_host(a.data(), bytes, 0, &mine);
          bb.copy_from_host(b.data(), bytes, 0, &mine);
          hal::TensorView va(ba, HAL_DTYPE_FLOAT32, {n}), vb(bb, HAL_DTYPE_FLOAT32, {n});
          hal::TensorView vo(bo, HAL_DTYPE_FLOAT32, {n}), vo2(bo2, HAL_DTYPE_FLOAT32, {n});
          add.launch({&va, &vb}, {&vo}, {}, &mine);
          done.record(mine);
          second.wait(done);
          mul.launch({&vo, &vb}, {&vo2}, {}, &second);
          bo2.copy_to_host(got.data(), bytes, 0, &second);
          // Freed while SECOND may still read them: the cache must not hand them out before.
          bo.record_stream(second);
          bb.record_stream(second);
          ba.free();
          bb.free();
          bo.free();
          second.synchronize();
          for (int64_t k = 0; k < n; ++k)
            if (got[k] != (a[k] + b[k]) * b[k]) {
              problems[t] = "thread " + std::to_string(t) + " round " + std::to_string(i) + " element " +
                            std::to_string(k) + ": got " + std::to_string(got[k]) + ", want " +
                            std::to_string((a[k] + b[k]) * b[k]);
              return;
            }
        }
      } catch (const std::exception& e) {
        problems[t] = "thread " + std::to_string(t) + ": " + e.what();
      }
    });
  for (std::thread& th : threads) th.join();
  std::string all;
  for (const std::string& p : problems)
    if (!p.empty()) all += p + "\n";
  return all;
}

#if defined(__SANITIZE_THREAD__)
constexpr int kIterations = 40;  // ThreadSanitizer runs ~10x slower
#else
constexpr int kIterations = 200;
#endif

}  // namespace

TEST_CASE("threads: 8 threads allocate, copy, launch and sync events on a shared CPU device - every result right") {
  auto rt = hal::testing::load_only({HAL_TEST_CPU_PLUGIN});
  auto device = rt->default_device();
  CHECK(hammer(device, kIterations) == "");
  const hal::AllocatorStats st = device->allocator().stats();
  CHECK(st.allocated_bytes == 0);  // every buffer came back
  CHECK(st.allocations == static_cast<uint64_t>(kThreads) * kIterations * 4);
}

#if !defined(__SANITIZE_THREAD__)
// Not under TSan: PoCL's own threads are not instrumented (every report
// would be about its internals).
TEST_CASE("threads: 8 threads on a shared OpenCL (PoCL) device - every result right") {
  auto rt = hal::testing::load_only({HAL_TEST_OPENCL_PLUGIN});
  if (rt->devices().empty()) {
    MESSAGE("no OpenCL device: " << (rt->skipped().empty() ? "" : rt->skipped()[0].message));
    REQUIRE(false);  // PoCL is a CI dependency: its absence is a failure, not a skip
  }
  auto device = rt->default_device();
  CHECK(hammer(device, 60) == "");
  CHECK(device->allocator().stats().allocated_bytes == 0);
}
#endif
