// The CPU plugin's streams and events, through the runtime API: work really
// runs off the caller's thread, in order; events time real work.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "hal/runtime/runtime.hpp"

namespace {

std::shared_ptr<hal::Device> cpu_device() {
  hal::RuntimeOptions o;
  o.plugin_paths = {HAL_TEST_CPU_PLUGIN};
  o.use_environment = false;
  static auto rt = hal::Runtime::create(o);
  return rt->default_device();
}

// A host task that blocks its stream until the test opens the gate (or 30 s
// pass, so a broken implementation fails instead of hanging).
struct Gate {
  std::promise<void> open_promise;
  std::shared_future<void> opened = open_promise.get_future().share();
  std::atomic<bool> entered{false}, finished{false};
  bool timed_out = false;
  void open() { open_promise.set_value(); }
  static void task(void* p) {
    auto* g = static_cast<Gate*>(p);
    g->entered = true;
    g->timed_out = g->opened.wait_for(std::chrono::seconds(30)) != std::future_status::ready;
    g->finished = true;
  }
};

struct Sleep {
  std::chrono::milliseconds ms;
  static void task(void* p) { std::this_thread::sleep_for(static_cast<Sleep*>(p)->ms); }
};

}  // namespace

TEST_CASE("enqueue returns before the work runs - the work runs on another thread") {
  auto d = cpu_device();
  hal::Stream s = d->create_stream();
  Gate gate;
  s.enqueue_host_func(&Gate::task, &gate);
  // Had the call run the task inline, it would have blocked until the 30 s
  // timeout and we would see finished == true and timed_out == true.
  CHECK_FALSE(gate.finished.load());
  CHECK_FALSE(s.query());
  gate.open();
  s.synchronize();
  CHECK(gate.finished.load());
  CHECK_FALSE(gate.timed_out);
  CHECK(s.query());
}

TEST_CASE("work on a stream runs in the order it was queued") {
  auto d = cpu_device();
  hal::Stream s = d->create_stream();
  struct Log {
    std::mutex mu;
    std::vector<int> order;
  } log;
  struct Item {
    Log* log;
    int index;
  };
  std::vector<Item> items;
  for (int i = 0; i < 1000; ++i) items.push_back({&log, i});
  for (auto& it : items)
    s.enqueue_host_func([](void* p) {
      auto* item = static_cast<Item*>(p);
      std::lock_guard<std::mutex> lock(item->log->mu);
      item->log->order.push_back(item->index);
    }, &it);
  s.synchronize();
  REQUIRE(log.order.size() == 1000);
  for (int i = 0; i < 1000; ++i) REQUIRE(log.order[i] == i);
}

TEST_CASE("async copies are ordered with other work on the stream") {
  auto d = cpu_device();
  hal::Stream s = d->create_stream();
  const uint64_t n = 32u << 20;  // 32 MiB
  std::vector<unsigned char> src(n, 0x5A), dst(n, 0);
  hal::Buffer a = d->allocate(n, &s), b = d->allocate(n, &s);
  Gate gate;
  s.enqueue_host_func(&Gate::task, &gate);
  a.fill(0x11, n, 0, &s);
  a.copy_from_host(src.data(), n / 2, 0, &s);   // first half 0x5A, second half 0x11
  b.copy_from(a, n, 0, 0, &s);
  b.copy_to_host(dst.data(), n, 0, &s);
  // Everything is queued behind the gate: nothing has happened yet.
  CHECK(dst[0] == 0);
  CHECK(dst[n - 1] == 0);
  gate.open();
  s.synchronize();
  CHECK(dst[0] == 0x5A);
  CHECK(dst[n / 2 - 1] == 0x5A);
  CHECK(dst[n / 2] == 0x11);
  CHECK(dst[n - 1] == 0x11);
}

TEST_CASE("events complete when the stream reaches them and time the work between") {
  auto d = cpu_device();
  hal::Stream s = d->create_stream();
  hal::Event start = d->create_event(), end = d->create_event();
  CHECK(start.query());  // never recorded counts as complete
  Gate gate;
  Sleep sleep{std::chrono::milliseconds(60)};
  s.enqueue_host_func(&Gate::task, &gate);
  start.record(s);
  s.enqueue_host_func(&Sleep::task, &sleep);
  end.record(s);
  CHECK_FALSE(start.query());
  CHECK_FALSE(end.query());
  try {
    hal::Event::elapsed_ns(start, end);
    FAIL("elapsed time of incomplete events must fail");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_FAILED_PRECONDITION);
  }
  gate.open();
  end.synchronize();
  CHECK(end.query());
  CHECK(start.query());
  const uint64_t ns = hal::Event::elapsed_ns(start, end);
  // The sleep ran between the two events: the interval contains it.
  CHECK(ns >= 60'000'000u);
  try {
    hal::Event::elapsed_ns(end, start);
    FAIL("reversed events must fail");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
  }
  hal::Event never = d->create_event();
  try {
    hal::Event::elapsed_ns(never, end);
    FAIL("never-recorded events must fail");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_FAILED_PRECONDITION);
    CHECK(std::string(e.what()) == "cpu: event_elapsed_time: start event was never recorded");
  }
}

TEST_CASE("an event recorded on an idle stream completes at the record - its time is the record's") {
  // The work before it has all run: no wait for the worker (whose wake-up on a VM can come after
  // the caller's next work, timing the caller's work as 0).
  auto d = cpu_device();
  hal::Stream s = d->create_stream();
  hal::Event start = d->create_event(), end = d->create_event();
  start.record(s);
  CHECK(start.query());  // complete at once, with no synchronize
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20)) {
  }  // the caller's own work between the records
  end.record(s);
  CHECK(end.query());
  CHECK(hal::Event::elapsed_ns(start, end) >= 20'000'000u);
  // Behind queued work, an event still waits for it.
  Gate gate;
  s.enqueue_host_func(&Gate::task, &gate);
  end.record(s);
  CHECK_FALSE(end.query());
  gate.open();
  end.synchronize();
  CHECK(end.query());
}

TEST_CASE("a stream can wait for an event recorded on another stream") {
  auto d = cpu_device();
  hal::Stream producer = d->create_stream(), consumer = d->create_stream();
  hal::Event ready = d->create_event();
  Gate gate;
  std::atomic<int> step{0};
  struct Ctx {
    std::atomic<int>* step;
    int seen = -1;
  } ctx{&step};
  producer.enqueue_host_func(&Gate::task, &gate);
  producer.enqueue_host_func([](void* p) { static_cast<std::atomic<int>*>(p)->store(1); }, &step);
  ready.record(producer);
  consumer.wait(ready);
  consumer.enqueue_host_func([](void* p) {
    auto* c = static_cast<Ctx*>(p);
    c->seen = c->step->load();
  }, &ctx);
  CHECK_FALSE(consumer.query());  // blocked behind the producer's gate
  gate.open();
  consumer.synchronize();
  CHECK(ctx.seen == 1);
}

TEST_CASE("destroying a stream finishes its queued work first") {
  auto d = cpu_device();
  std::atomic<int> ran{0};
  {
    hal::Stream s = d->create_stream();
    Sleep sleep{std::chrono::milliseconds(20)};
    s.enqueue_host_func(&Sleep::task, &sleep);
    s.enqueue_host_func([](void* p) { ++*static_cast<std::atomic<int>*>(p); }, &ran);
  }
  CHECK(ran.load() == 1);
}

TEST_CASE("allocation copies and streams from several threads at once") {
  auto d = cpu_device();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      hal::Stream s = d->create_stream();
      for (int i = 0; i < 200; ++i) {
        const uint64_t n = 64 + 37 * static_cast<uint64_t>(i % 13);
        hal::Buffer b = d->allocate(n, &s);
        std::vector<unsigned char> in(n, static_cast<unsigned char>(t * 50 + i)), out(n);
        b.copy_from_host(in.data(), n, 0, &s);
        b.copy_to_host(out.data(), n, 0, &s);
        s.synchronize();
        if (in != out) ++failures;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
}
