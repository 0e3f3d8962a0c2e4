// matmul 1024^3 float32 on the OpenCL plugin (PoCL in CI) against the CPU
// plugin in the same run, through the runtime API (synchronous launches).
//
//   BM_Mm/cpu/1024      the CPU plugin (oneDNN)
//   BM_Mm/opencl/1024   the OpenCL plugin's tiled GEMM kernel
//
// Run: hal_opencl_matmul_bench --benchmark_repetitions=3
//        --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hal/runtime/op.hpp"
#include "hal/runtime/runtime.hpp"

namespace {

std::shared_ptr<hal::Device> device(const std::string& which) {
  static std::map<std::string, std::shared_ptr<hal::Device>> devices;
  auto it = devices.find(which);
  if (it != devices.end()) return it->second;
  hal::RuntimeOptions o;
  o.plugin_paths = {which == "cpu" ? HAL_BENCH_CPU_PLUGIN : HAL_BENCH_OPENCL_PLUGIN};
  o.use_environment = false;
  o.use_install_dir = false;
  static std::vector<std::shared_ptr<hal::Runtime>> keep;
  keep.push_back(hal::Runtime::create(o));
  if (keep.back()->devices().empty()) {
    std::fprintf(stderr, "no %s device\n", which.c_str());
    std::exit(1);
  }
  return devices[which] = keep.back()->devices().front();
}

void BM_Mm(benchmark::State& state, const std::string& which) {
  const int64_t n = state.range(0);
  auto dev = device(which);
  std::vector<float> host(static_cast<size_t>(n * n));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 37) % 101) / 101.f - 0.5f;
  const uint64_t bytes = host.size() * sizeof(float);
  hal::Buffer a = dev->allocate(bytes), b = dev->allocate(bytes), c = dev->allocate(bytes);
  a.copy_from_host(host.data(), bytes);
  b.copy_from_host(host.data(), bytes);
  hal::TensorView va(a, HAL_DTYPE_FLOAT32, {n, n}), vb(b, HAL_DTYPE_FLOAT32, {n, n}), vc(c, HAL_DTYPE_FLOAT32, {n, n});
  hal::OpRunner mm(dev, "mm");
  mm.launch({&va, &vb}, {&vc});  // compile / warm up
  for (auto _ : state) mm.launch({&va, &vb}, {&vc});
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_Mm, cpu, std::string("cpu"))->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Mm, opencl, std::string("opencl"))->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
