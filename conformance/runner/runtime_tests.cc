// hal-conformance runtime tests: what every plugin must get right before
// any op runs: properties, memory, streams and events, error messages,
// thread safety. Written once against the runtime API (and through it the
// C ABI); doctest CHECKs report the failures.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "runner/session.hpp"

namespace hal::conformance {
namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return v;
}

bool has_streams(const Device& d) { return d.supports(HAL_CAPABILITY_STREAM); }

std::string fixed(const char* s, size_t n) { return std::string(s, strnlen(s, n)); }

}  // namespace

HAL_CONFORMANCE_RUNTIME_TEST(device_properties) {
  const hal_device_properties_t& p = ctx.device->properties();
  CHECK_MESSAGE(!fixed(p.name, sizeof(p.name)).empty(), "the device reports an empty name: fill DeviceProperties::name");
  CHECK_MESSAGE(!fixed(p.vendor, sizeof(p.vendor)).empty(), "the device reports an empty vendor: fill DeviceProperties::vendor");
  CHECK_MESSAGE(strnlen(p.name, sizeof(p.name)) < sizeof(p.name), "the device name is not NUL-terminated within hal_device_properties_t.name");
  CHECK_MESSAGE((p.capabilities & HAL_CAPABILITY_DEVICE) != 0, "the device does not report HAL_CAPABILITY_DEVICE: every device must");
  CHECK_MESSAGE((p.capabilities & HAL_CAPABILITY_MEMORY) != 0, "the device does not report HAL_CAPABILITY_MEMORY: every device must");
  CHECK_MESSAGE(p.total_memory_bytes > 0, "the device reports 0 bytes of memory: set DeviceProperties::total_memory_bytes from the driver");
  CHECK_MESSAGE(p.compute_units >= 1, "the device reports 0 compute units: report at least 1");
  CHECK_MESSAGE(p.min_buffer_alignment >= 1, "min_buffer_alignment is 0: report the alignment your allocations guarantee (a power of two)");
  CHECK_MESSAGE((p.min_buffer_alignment & (p.min_buffer_alignment - 1)) == 0, "min_buffer_alignment is not a power of two");
  uint64_t free_bytes = 0, total = 0;
  ctx.device->memory_info(&free_bytes, &total);
  CHECK_MESSAGE(total > 0, "memory_info reports 0 total bytes: report the device's memory");
  CHECK_MESSAGE(free_bytes <= total, "memory_info reports more free bytes than total");
  // Advertising the operator interface means implementing some ops.
  if (p.capabilities & HAL_CAPABILITY_OPERATOR)
    CHECK_MESSAGE(!ctx.claimed_ops.empty(), "the plugin declares the operator interface (HAL_CAPABILITY_OPERATOR in kInterfaces) but implements no op: register at least one kernel, or drop the capability until you do");
  if (!ctx.claimed_ops.empty())
    CHECK_MESSAGE((p.capabilities & HAL_CAPABILITY_OPERATOR) != 0, "the plugin implements ops but the device does not report HAL_CAPABILITY_OPERATOR: add it to the plugin's kInterfaces");
}

HAL_CONFORMANCE_RUNTIME_TEST(memory_round_trip) {
  for (uint64_t size : {1ull, 3ull, 7ull, 64ull, 1000ull, 4097ull, 65537ull}) {
    for (uint64_t offset : {0ull, 1ull, 3ull, 61ull}) {
      CAPTURE(size);
      CAPTURE(offset);
      Buffer b = ctx.device->allocate(size + offset + 5);
      CHECK_MESSAGE(b.size() == size + offset + 5, "a buffer does not report the size it was allocated with (buffer_get_info)");
      std::vector<uint8_t> in = pattern(size, static_cast<uint8_t>(size + offset));
      b.fill(0xEE, b.size());
      b.copy_from_host(in.data(), size, offset);
      std::vector<uint8_t> all(b.size());
      b.copy_to_host(all.data(), all.size());
      CHECK_MESSAGE(std::memcmp(all.data() + offset, in.data(), size) == 0, "bytes copied host -> device at an offset did not come back unchanged");
      bool guard_ok = true;
      for (uint64_t i = 0; i < offset; ++i) guard_ok &= all[i] == 0xEE;
      for (uint64_t i = offset + size; i < all.size(); ++i) guard_ok &= all[i] == 0xEE;
      CHECK_MESSAGE(guard_ok, "bytes outside [offset, offset+size) changed");
      // Device-to-device at odd offsets, then a partial fill.
      Buffer c = ctx.device->allocate(size + 7);
      c.fill(0x11, c.size());
      c.copy_from(b, size, 7, offset);
      std::vector<uint8_t> out(size);
      c.copy_to_host(out.data(), size, 7);
      CHECK_MESSAGE(out == in, "a device -> host copy at an offset returned other bytes than were written");
      c.fill(0x42, size / 2 + 1, 3);
      std::vector<uint8_t> after(c.size());
      c.copy_to_host(after.data(), after.size());
      bool fill_ok = true;
      for (uint64_t i = 0; i < after.size(); ++i) {
        uint8_t want = i < 3 ? 0x11 : i < 3 + size / 2 + 1 ? 0x42 : i < 7 ? 0x11 : in[i - 7];
        fill_ok &= after[i] == want;
      }
      CHECK_MESSAGE(fill_ok, "fill wrote outside its range or not at all");
    }
  }
}

HAL_CONFORMANCE_RUNTIME_TEST(async_copy_ordering) {
  if (!has_streams(*ctx.device)) {
    MESSAGE("no stream interface: nothing to order");
    return;
  }
  Stream s = ctx.device->create_stream();
  const size_t n = 1 << 16;
  Buffer a = ctx.device->allocate(n, &s), b = ctx.device->allocate(n, &s);
  std::vector<uint8_t> p1 = pattern(n, 1), p2 = pattern(n, 2), out(n, 0), mid(n, 0);
  // Each step depends on the previous one: only in-order execution gives p2.
  a.copy_from_host(p1.data(), n, 0, &s);
  b.copy_from(a, n, 0, 0, &s);
  b.copy_to_host(mid.data(), n, 0, &s);
  a.copy_from_host(p2.data(), n, 0, &s);
  b.copy_from(a, n / 2, 0, 0, &s);
  b.copy_to_host(out.data(), n, 0, &s);
  std::vector<int> order;
  std::mutex m;
  struct Ctx {
    std::vector<int>* order;
    std::mutex* m;
    int id;
  } c1{&order, &m, 1}, c2{&order, &m, 2};
  auto fn = [](void* u) {
    Ctx* c = static_cast<Ctx*>(u);
    std::lock_guard<std::mutex> l(*c->m);
    c->order->push_back(c->id);
  };
  s.enqueue_host_func(fn, &c1);
  s.enqueue_host_func(fn, &c2);
  s.synchronize();
  CHECK_MESSAGE(s.query(), "a stream is not idle after synchronize(): query() must report idle");
  CHECK_MESSAGE(mid == p1, "a copy queued on a stream ran out of order: the stream must run its work in order");
  std::vector<uint8_t> want(p2.begin(), p2.begin() + n / 2);
  want.insert(want.end(), p1.begin() + n / 2, p1.end());
  CHECK_MESSAGE(out == want, "copies queued on one stream did not run in order: the stream must run its work in order");
  CHECK_MESSAGE((order == std::vector<int>{1, 2}), "host functions queued on one stream ran out of order");
}

HAL_CONFORMANCE_RUNTIME_TEST(stream_event) {
  if (!has_streams(*ctx.device)) {
    MESSAGE("no stream interface");
    return;
  }
  Stream s1 = ctx.device->create_stream(), s2 = ctx.device->create_stream();
  Event never = ctx.device->create_event();
  CHECK_MESSAGE(never.query(), "an event that was never recorded must query as complete");
  Event start = ctx.device->create_event(), end = ctx.device->create_event();
  start.record(s1);
  // s1 is held up by a host function; s2 waits for an event recorded after it.
  std::atomic<bool> done{false};
  auto slow = [](void* u) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    static_cast<std::atomic<bool>*>(u)->store(true);
  };
  s1.enqueue_host_func(slow, &done);
  end.record(s1);
  s2.wait(end);
  struct Seen {
    std::atomic<bool>* done;
    bool saw = false;
  } seen{&done};
  s2.enqueue_host_func([](void* u) { auto* x = static_cast<Seen*>(u); x->saw = x->done->load(); }, &seen);
  s2.synchronize();
  CHECK_MESSAGE(seen.saw, "work queued on s2 after wait(event) ran before the event's work on s1");
  end.synchronize();
  CHECK_MESSAGE(end.query(), "an event does not query complete after its synchronize()");
  CHECK_MESSAGE(start.query(), "an event recorded before completed work does not query complete");
  CHECK_MESSAGE(s1.query(), "a stream whose last event completed does not query idle");
  uint64_t ns = Event::elapsed_ns(start, end);
  CHECK_MESSAGE(ns >= 40'000'000ull, "elapsed time between two events around a 50 ms host function is under 40 ms: events must time the work between them");
  CHECK_MESSAGE(ns < 60'000'000'000ull, "elapsed time between two events is over 60 s: report nanoseconds");
  // Recording again moves the event forward.
  end.record(s2);
  end.synchronize();
  CHECK_MESSAGE(end.query(), "an event recorded again does not query complete after its synchronize()");
}

HAL_CONFORMANCE_RUNTIME_TEST(error_messages) {
  const std::string plugin = ctx.device->plugin_name();
  // A plugin-side refusal: more memory than the device has.
  uint64_t total = ctx.device->properties().total_memory_bytes;
  bool threw = false;
  try {
    Buffer b = ctx.device->allocate(total + (total >> 1) + 1);
  } catch (const Error& e) {
    threw = true;
    std::string msg = e.what();
    CAPTURE(msg);
    CHECK_MESSAGE(e.code() != HAL_STATUS_OK, "a refused allocation returned a status with code OK");
    CHECK_MESSAGE(msg.find(plugin) != std::string::npos, "the error message does not name the plugin (the SDK prefixes it; a plugin without the SDK must)");
    CHECK_MESSAGE(msg.find("alloc") != std::string::npos, "the error message does not name the call (allocate)");
  }
  CHECK_MESSAGE(threw, "allocating more than total_memory_bytes succeeded");
  // An op that does not exist.
  if (ctx.device->supports(HAL_CAPABILITY_OPERATOR)) {
    threw = false;
    try {
      OpRunner r(ctx.device, "no_such_op_hal_conformance");
    } catch (const Error& e) {
      threw = true;
      std::string msg = e.what();
      CAPTURE(msg);
      CHECK_MESSAGE(e.code() == HAL_STATUS_UNIMPLEMENTED, "resolving an unknown op must fail with UNIMPLEMENTED");
      CHECK_MESSAGE(msg.find(plugin) != std::string::npos, "the error message does not name the plugin");
      CHECK_MESSAGE(msg.find("no_such_op_hal_conformance") != std::string::npos, "the error message does not name the unknown op");
    }
    CHECK_MESSAGE(threw, "resolving an unknown op succeeded");
  }
  // Out-of-range copies are refused before anything is copied.
  Buffer b = ctx.device->allocate(16);
  b.fill(0x33, 16);
  std::vector<uint8_t> big(32, 0);
  CHECK_THROWS_AS_MESSAGE(b.copy_from_host(big.data(), 32), Error, "a copy past the end of a buffer was accepted: refuse it with OUT_OF_RANGE");
  std::vector<uint8_t> back(16);
  b.copy_to_host(back.data(), 16);
  CHECK_MESSAGE((back == std::vector<uint8_t>(16, 0x33)), "a refused copy changed the buffer: check the range before copying anything");
}

HAL_CONFORMANCE_RUNTIME_TEST(thread_safety) {
  const int kThreads = 4;
  std::vector<std::string> problems(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 100; ++i) {
          size_t n = 1 + static_cast<size_t>((t * 977 + i * 131) % 5000);
          Buffer b = ctx.device->allocate(n);
          std::vector<uint8_t> in = pattern(n, static_cast<uint8_t>(t * 7 + i)), out(n);
          b.copy_from_host(in.data(), n);
          b.copy_to_host(out.data(), n);
          if (in != out) {
            problems[t] = "round trip of " + std::to_string(n) + " bytes differed";
            return;
          }
        }
      } catch (const std::exception& e) {
        problems[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK_MESSAGE(problems[t].empty(), "allocation thread ", t, ": ", problems[t]);

  // Op launches from several threads at once: the first claimed op with a
  // suite ("add" when there is one), its first float32 (or first) case.
  const OpSuite* suite = nullptr;
  for (const OpSuite& s : *ctx.suites)
    if (ctx.claimed_ops.count(s.op) && (suite == nullptr || s.op == "add")) suite = &s;
  if (suite == nullptr) {
    MESSAGE("no op with a suite is implemented: launches not tested");
    return;
  }
  std::vector<OpCase> cases = suite->cases(HAL_DTYPE_FLOAT32);
  const OpCase* c = nullptr;
  for (const OpCase& x : cases)
    if (!x.expect_error) {
      c = &x;
      break;
    }
  if (c == nullptr) {
    MESSAGE("op ", suite->op, " has no float32 case: launches not tested");
    return;
  }
  // A case that is wrong single-threaded is the op test's business; then
  // only launch errors count here.
  std::vector<Failure> baseline;
  CaseRunner(ctx.device, suite->op).run_layout(*suite, HAL_DTYPE_FLOAT32, *c, Layout::kContiguous, baseline);
  const bool values_count = baseline.empty();
  std::vector<std::vector<Failure>> failures(kThreads);
  std::vector<std::string> errors(kThreads);
  threads.clear();
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        CaseRunner r(ctx.device, suite->op);
        for (int i = 0; i < 20 && failures[t].empty(); ++i)
          r.run_layout(*suite, HAL_DTYPE_FLOAT32, *c, i % 2 ? Layout::kStrided : Layout::kContiguous, failures[t]);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK_MESSAGE(errors[t].empty(), "launch thread ", t, ": ", errors[t]);
    for (const Failure& f : failures[t])
      if (values_count || f.message.rfind("launch failed", 0) == 0)
        FAIL_CHECK("launch thread " << t << ": " << suite->op << " case '" << f.case_name << "' (" << f.layout
                                  << "): " << f.message);
  }
}

}  // namespace hal::conformance
