// The core's promotion for uniform kernels (hal/runtime/op.hpp) against the
// CPU plugin's own mixed kernels, in the same run. Two CPU plugin instances:
// "mixed" (default: kernels promote int32 + float32 themselves) and
// "uniform" (option input_mode = "uniform": every op declines mixed calls,
// so libhal casts the int32 input with the plugin's copy op first, into
// cached scratch, then launches a float32 add).
//
//   BM_Add1/{same,mixed}/{uniform,mixed_kernel}   1-element add: float32 +
//       float32, or int32 + float32; the cast's fixed cost is mixed/uniform
//       minus same/uniform
//   BM_Add16M/{same,mixed}/{uniform,mixed_kernel}   16M elements, contiguous;
//       the ratio is mixed/mixed_kernel time over mixed/uniform time
//
// Run: hal_promotion_bench --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "hal/runtime/op.hpp"
#include "hal/runtime/runtime.hpp"

#ifndef HAL_BENCH_CPU_PLUGIN
#error "HAL_BENCH_CPU_PLUGIN (path to libhal_plugin_cpu.so) must be defined by the build"
#endif

namespace {

// A CPU device loaded through a config with the given input_mode option.
std::shared_ptr<hal::Device> cpu_device(const std::string& mode) {
  static std::vector<std::shared_ptr<hal::Runtime>> keep;  // leaked: outlive every benchmark
  std::string path = "/tmp/hal_promotion_bench_" + mode + ".toml";
  std::ofstream(path) << "discover = false\n[[plugin]]\npath = \"" << HAL_BENCH_CPU_PLUGIN
                      << "\"\noptions = { input_mode = \"" << mode << "\" }\n";
  hal::RuntimeOptions o;
  o.config_path = path;
  o.use_environment = false;
  o.use_install_dir = false;
  auto rt = hal::Runtime::create(o);
  if (rt->devices().empty()) {
    std::fprintf(stderr, "cannot load the CPU plugin %s\n", HAL_BENCH_CPU_PLUGIN);
    std::exit(1);
  }
  keep.push_back(rt);
  return rt->devices()[0];
}

struct Case {
  std::shared_ptr<hal::Device> device;
  hal::OpRunner add;
  hal::Buffer a, b, out;
  hal::TensorView va, vb, vout;

  Case(const std::string& mode, hal_dtype_e a_dtype, int64_t n)
      : device(cpu_device(mode)),
        add(device, "add"),
        a(device->allocate(n * 4)),
        b(device->allocate(n * 4)),
        out(device->allocate(n * 4)) {
    a.fill(0, n * 4);
    b.fill(0, n * 4);
    va = hal::TensorView(a, a_dtype, {n});
    vb = hal::TensorView(b, HAL_DTYPE_FLOAT32, {n});
    vout = hal::TensorView(out, HAL_DTYPE_FLOAT32, {n});
  }
};

void run(benchmark::State& state, const char* mode, hal_dtype_e a_dtype, int64_t n) {
  Case c(mode, a_dtype, n);
  c.add.launch({&c.va, &c.vb}, {&c.vout});  // warm: resolves the cast path, fills the allocator's cache
  for (auto _ : state) c.add.launch({&c.va, &c.vb}, {&c.vout});
  state.SetBytesProcessed(state.iterations() * n * 12);
}

constexpr int64_t kLarge = int64_t{1} << 24;

}  // namespace

BENCHMARK_CAPTURE(run, Add1/same/uniform, "uniform", HAL_DTYPE_FLOAT32, 1);
BENCHMARK_CAPTURE(run, Add1/mixed/uniform, "uniform", HAL_DTYPE_INT32, 1);
BENCHMARK_CAPTURE(run, Add1/same/mixed_kernel, "mixed", HAL_DTYPE_FLOAT32, 1);
BENCHMARK_CAPTURE(run, Add1/mixed/mixed_kernel, "mixed", HAL_DTYPE_INT32, 1);
BENCHMARK_CAPTURE(run, Add16M/same/uniform, "uniform", HAL_DTYPE_FLOAT32, kLarge)->UseRealTime();
BENCHMARK_CAPTURE(run, Add16M/mixed/uniform, "uniform", HAL_DTYPE_INT32, kLarge)->UseRealTime();
BENCHMARK_CAPTURE(run, Add16M/same/mixed_kernel, "mixed", HAL_DTYPE_FLOAT32, kLarge)->UseRealTime();
BENCHMARK_CAPTURE(run, Add16M/mixed/mixed_kernel, "mixed", HAL_DTYPE_INT32, kLarge)->UseRealTime();

BENCHMARK_MAIN();
