// What the core (libhal's C++ runtime API) adds on top of calling a plugin's
// C function tables directly, and what the caching allocator saves over the
// plugin's own alloc/free. Uses the in-tree CPU plugin, loaded by path.
//
// Pairs (same work, same plugin, same stream; only the call path differs):
//   BM_Enqueue/{RuntimeApi,DirectTable}/{live,gated}  no-op host function on a stream
//   BM_CopyH2DAsync64/{RuntimeApi,DirectTable}/{live,gated}
//                                             64-byte host->device copy, stream-ordered
//   BM_AllocFree/{CachingAllocator,RawPlugin}/<bytes>  one allocation + free
// Supplementary pairs (cheap plugin entries, so the core's share is visible):
//   BM_StreamQuery/...    stream_query (one mutex in the CPU plugin)
//   BM_CopyH2DSync64/...  64-byte synchronous copy (a memcpy in the CPU plugin)
//
// Streamed work is drained every kSyncEvery iterations with the same C-table
// stream_synchronize call in both variants, so the queue stays bounded and
// the drain cost is identical on both sides of a pair. "live" lets the
// stream's worker run the work concurrently; "gated" holds the worker while a
// batch is queued, isolating the call path (see streamed_loop()).
//
// Run: hal_runtime_overhead_bench --benchmark_repetitions=10
//        --benchmark_report_aggregates_only=true
//        --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "hal/runtime/runtime.hpp"

#ifndef HAL_BENCH_CPU_PLUGIN
#error "HAL_BENCH_CPU_PLUGIN (path to libhal_plugin_cpu.so) must be defined by the build"
#endif

namespace {

constexpr uint64_t kSyncEvery = 1024;  // power of two

// The runtime with only the CPU plugin, loaded once for the whole process.
struct Env {
  std::shared_ptr<hal::Runtime> runtime;
  std::shared_ptr<hal::Plugin> plugin;
  std::shared_ptr<hal::Device> device;

  static Env& get() {
    static Env* env = [] {
      auto* e = new Env();  // leaked: outlives every benchmark
      hal::RuntimeOptions o;
      o.plugin_paths = {HAL_BENCH_CPU_PLUGIN};
      o.use_environment = false;
      e->runtime = hal::Runtime::create(o);
      if (e->runtime->plugins().empty() || e->runtime->plugins()[0]->devices().empty()) {
        std::fprintf(stderr, "cannot load the CPU plugin %s", HAL_BENCH_CPU_PLUGIN);
        for (const auto& s : e->runtime->skipped()) std::fprintf(stderr, ": %s", s.message.c_str());
        std::fprintf(stderr, "\n");
        std::exit(1);
      }
      e->plugin = e->runtime->plugins()[0];
      e->device = e->plugin->devices()[0];
      return e;
    }();
    return *env;
  }
};

void noop(void*) {}

// Checks a status from a direct table call; false (and the benchmark marked
// failed) when the plugin reported an error.
bool ok(benchmark::State& state, hal_status_t* status) {
  if (status == nullptr) return true;
  state.SkipWithError(status->message != nullptr ? status->message : "plugin call failed");
  status->destroy(status);
  return false;
}

// Drains STREAM through the C table; used identically by both variants.
void drain(benchmark::State& state, const hal_stream_api_t& api, hal_stream_t* stream) {
  ok(state, api.stream_synchronize(stream));
}

// Holds a stream's worker at a point in its queue (a host function that
// blocks until opened).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = true;
  static void wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    std::unique_lock<std::mutex> lock(g->mu);
    g->cv.wait(lock, [g] { return g->open; });
  }
  void set(bool value) {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = value;
    }
    cv.notify_all();
  }
};

// The loop shared by both variants of a streamed pair; only CALL differs.
// Every kSyncEvery calls the stream is drained (C table, both variants).
//   live:  the worker runs the queued work while the caller keeps enqueueing,
//          so caller and worker contend for the queue (and, on a 2-core VM,
//          for the cores): realistic, noisy.
//   gated: each batch of kSyncEvery calls is queued behind a Gate that holds
//          the worker; after the batch the gate opens and the stream drains
//          with the timer paused (one PauseTiming/ResumeTiming per batch).
//          The caller never meets a running worker: the call path alone.
template <class Call>
void streamed_loop(benchmark::State& state, const hal_stream_api_t& api, hal_stream_t* h, bool gated,
                   Call call) {
  Gate gate;
  uint64_t i = 0;
  for (auto _ : state) {
    if ((i & (kSyncEvery - 1)) == 0 && gated) {
      state.PauseTiming();  // once per kSyncEvery calls: ~1 ns per call
      if (i != 0) {
        gate.set(true);
        drain(state, api, h);
      }
      gate.set(false);
      const bool queued = ok(state, api.stream_enqueue_host_func(h, &Gate::wait, &gate));
      state.ResumeTiming();
      if (!queued) break;
    }
    try {  // zero-cost unless thrown
      if (!call()) break;
    } catch (const hal::Error& e) {
      state.SkipWithError(e.what());
      break;
    }
    if ((++i & (kSyncEvery - 1)) == 0 && !gated) drain(state, api, h);
  }
  gate.set(true);
  drain(state, api, h);
}

// ---- (a) no-op enqueue -------------------------------------------------------

void BM_Enqueue_RuntimeApi(benchmark::State& state, bool gated) {
  Env& env = Env::get();
  hal::Stream stream = env.device->create_stream();
  streamed_loop(state, env.plugin->stream_api(), stream.handle(), gated, [&] {
    stream.enqueue_host_func(noop, nullptr);
    return true;
  });
}

void BM_Enqueue_DirectTable(benchmark::State& state, bool gated) {
  Env& env = Env::get();
  const hal_stream_api_t& api = env.plugin->stream_api();
  hal::Stream stream = env.device->create_stream();
  hal_stream_t* h = stream.handle();
  streamed_loop(state, api, h, gated, [&] { return ok(state, api.stream_enqueue_host_func(h, noop, nullptr)); });
}

// ---- (b) 64-byte stream-ordered host->device copy -------------------------------

alignas(64) unsigned char g_src[64];  // stays valid until the stream has run the copies

void BM_CopyH2DAsync64_RuntimeApi(benchmark::State& state, bool gated) {
  Env& env = Env::get();
  hal::Stream stream = env.device->create_stream();
  hal::Buffer buffer = env.device->allocate(64);
  streamed_loop(state, env.plugin->stream_api(), stream.handle(), gated, [&] {
    buffer.copy_from_host(g_src, 64, 0, &stream);
    return true;
  });
}

void BM_CopyH2DAsync64_DirectTable(benchmark::State& state, bool gated) {
  Env& env = Env::get();
  const hal_memory_api_t& mem = env.plugin->memory_api();
  hal::Stream stream = env.device->create_stream();
  hal::Buffer buffer = env.device->allocate(64);
  hal_stream_t* h = stream.handle();
  hal_buffer_t* b = buffer.handle();
  streamed_loop(state, env.plugin->stream_api(), h, gated,
                [&] { return ok(state, mem.copy_host_to_device(b, 0, g_src, 64, h)); });
}

// ---- (c) allocation + free -------------------------------------------------------

void BM_AllocFree_CachingAllocator(benchmark::State& state) {
  Env& env = Env::get();
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  hal::Device& device = *env.device;
  { hal::Buffer warm = device.allocate(size); }  // the first one reaches the plugin
  const hal::AllocatorStats before = device.allocator().stats();
  for (auto _ : state) {
    hal::Buffer b = device.allocate(size);
    benchmark::DoNotOptimize(b);
  }  // ~Buffer returns the block to the cache
  const hal::AllocatorStats after = device.allocator().stats();
  const double n = static_cast<double>(after.allocations - before.allocations);
  state.counters["cache_hit_rate"] = n > 0 ? static_cast<double>(after.cache_hits - before.cache_hits) / n : 0.0;
}

void BM_AllocFree_RawPlugin(benchmark::State& state) {
  Env& env = Env::get();
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  const hal_memory_api_t& mem = env.plugin->memory_api();
  hal_device_t* dev = env.device->handle();
  for (auto _ : state) {
    hal_buffer_t* buf = nullptr;
    if (!ok(state, mem.buffer_allocate(dev, size, 0, &buf))) break;
    benchmark::DoNotOptimize(buf);
    if (!ok(state, mem.buffer_free(buf))) break;
  }
}

// ---- supplementary: cheap entries -----------------------------------------------

void BM_StreamQuery_RuntimeApi(benchmark::State& state) {
  Env& env = Env::get();
  hal::Stream stream = env.device->create_stream();
  for (auto _ : state) benchmark::DoNotOptimize(stream.query());
}

void BM_StreamQuery_DirectTable(benchmark::State& state) {
  Env& env = Env::get();
  const hal_stream_api_t& api = env.plugin->stream_api();
  hal::Stream stream = env.device->create_stream();
  hal_stream_t* h = stream.handle();
  for (auto _ : state) {
    bool idle = false;
    if (!ok(state, api.stream_query(h, &idle))) break;
    benchmark::DoNotOptimize(idle);
  }
}

void BM_CopyH2DSync64_RuntimeApi(benchmark::State& state) {
  Env& env = Env::get();
  hal::Buffer buffer = env.device->allocate(64);
  for (auto _ : state) {
    buffer.copy_from_host(g_src, 64);
    benchmark::ClobberMemory();
  }
}

void BM_CopyH2DSync64_DirectTable(benchmark::State& state) {
  Env& env = Env::get();
  const hal_memory_api_t& mem = env.plugin->memory_api();
  hal::Buffer buffer = env.device->allocate(64);
  hal_buffer_t* b = buffer.handle();
  for (auto _ : state) {
    if (!ok(state, mem.copy_host_to_device(b, 0, g_src, 64, nullptr))) break;
    benchmark::ClobberMemory();
  }
}

}  // namespace

BENCHMARK_CAPTURE(BM_Enqueue_RuntimeApi, live, false)->Name("BM_Enqueue/RuntimeApi/live");
BENCHMARK_CAPTURE(BM_Enqueue_DirectTable, live, false)->Name("BM_Enqueue/DirectTable/live");
BENCHMARK_CAPTURE(BM_Enqueue_RuntimeApi, gated, true)->Name("BM_Enqueue/RuntimeApi/gated");
BENCHMARK_CAPTURE(BM_Enqueue_DirectTable, gated, true)->Name("BM_Enqueue/DirectTable/gated");
BENCHMARK_CAPTURE(BM_CopyH2DAsync64_RuntimeApi, live, false)->Name("BM_CopyH2DAsync64/RuntimeApi/live");
BENCHMARK_CAPTURE(BM_CopyH2DAsync64_DirectTable, live, false)->Name("BM_CopyH2DAsync64/DirectTable/live");
BENCHMARK_CAPTURE(BM_CopyH2DAsync64_RuntimeApi, gated, true)->Name("BM_CopyH2DAsync64/RuntimeApi/gated");
BENCHMARK_CAPTURE(BM_CopyH2DAsync64_DirectTable, gated, true)->Name("BM_CopyH2DAsync64/DirectTable/gated");
BENCHMARK(BM_AllocFree_CachingAllocator)->Name("BM_AllocFree/CachingAllocator")->Arg(4 << 10)->Arg(1 << 20);
BENCHMARK(BM_AllocFree_RawPlugin)->Name("BM_AllocFree/RawPlugin")->Arg(4 << 10)->Arg(1 << 20);
BENCHMARK(BM_StreamQuery_RuntimeApi)->Name("BM_StreamQuery/RuntimeApi");
BENCHMARK(BM_StreamQuery_DirectTable)->Name("BM_StreamQuery/DirectTable");
BENCHMARK(BM_CopyH2DSync64_RuntimeApi)->Name("BM_CopyH2DSync64/RuntimeApi");
BENCHMARK(BM_CopyH2DSync64_DirectTable)->Name("BM_CopyH2DSync64/DirectTable");

BENCHMARK_MAIN();
