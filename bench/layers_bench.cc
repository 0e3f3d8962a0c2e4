// What a layer costs per call (docs/layers.md): the same calls through a
// runtime with no layer, with the validation layer, with the trace layer and
// with the faults layer armed but not firing. Targets: no layer = today's
// cost (nothing interposed); trace < 1.5x and validation < 2x per call.
//
//   BM_LaunchAdd1/<layers>     one synchronous 1-element add (runtime -> layers -> plugin -> kernel)
//   BM_AllocFree4K/<layers>    the plugin's buffer_allocate + buffer_free through the layered tables
//   BM_CopyH2D64/<layers>      a synchronous 64-byte host-to-device copy
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>

#include "hal/runtime/runtime.hpp"

namespace {

std::map<std::string, std::shared_ptr<hal::Runtime>> made;
const std::string dir = "/tmp/hal-layers-bench-" + std::to_string(::getpid());  // removed at the end (traces are GBs)

// One runtime per layer list, made on first use and kept for the run.
std::shared_ptr<hal::Runtime> runtime(const std::string& layers) {
  auto it = made.find(layers);
  if (it != made.end()) return it->second;
  std::filesystem::create_directories(dir);
  const std::string config = dir + "/" + std::to_string(made.size()) + ".toml";
  std::ofstream out(config);
  out << "discover = false\ncaching_allocator = false\nlayers = [" << layers << "]\n";
  if (layers.find("trace") != std::string::npos)
    out << "[layer_options.trace]\npath = \"" << dir << "/trace.json\"\n";
  if (layers.find("faults") != std::string::npos)  // armed, never firing
    out << "[layer_options.faults]\nspec = \"launch:nth=999999999999;alloc:nth=999999999999\"\n";
  out << "[[plugin]]\npath = \"" << HAL_BENCH_CPU_PLUGIN << "\"\n";
  out.close();
  hal::RuntimeOptions o;
  o.config_path = config;
  o.use_environment = false;
  o.use_install_dir = false;
  return made[layers] = hal::Runtime::create(o);
}

const char* const kLayers[] = {"", "\"validation\"", "\"trace\"", "\"faults\"", "\"validation\", \"trace\""};

void BM_LaunchAdd1(benchmark::State& state) {
  auto rt = runtime(kLayers[state.range(0)]);
  auto d = rt->default_device();
  hal::Buffer a = d->allocate(4), b = d->allocate(4), out = d->allocate(4);
  hal::TensorView va(a, HAL_DTYPE_FLOAT32, {1}), vb(b, HAL_DTYPE_FLOAT32, {1}), vo(out, HAL_DTYPE_FLOAT32, {1});
  hal::OpRunner add(d, "add");
  std::vector<const hal::TensorView*> in = {&va, &vb}, o = {&vo};
  add.launch(in, o);
  for (auto _ : state) add.launch(in, o);
}

void BM_AllocFree4K(benchmark::State& state) {
  auto rt = runtime(kLayers[state.range(0)]);
  auto d = rt->default_device();
  const hal_memory_api_t& mem = rt->plugins()[0]->memory_api();
  for (auto _ : state) {
    hal_buffer_t* b = nullptr;
    if (mem.buffer_allocate(d->handle(), 4096, 0, &b) != nullptr || mem.buffer_free(b) != nullptr)
      state.SkipWithError("alloc/free failed");
  }
}

void BM_CopyH2D64(benchmark::State& state) {
  auto rt = runtime(kLayers[state.range(0)]);
  auto d = rt->default_device();
  hal::Buffer b = d->allocate(64);
  char host[64] = {};
  for (auto _ : state) b.copy_from_host(host, 64);
}

void names(benchmark::internal::Benchmark* b) {
  b->ArgName("layers");
  for (int i = 0; i < 5; ++i) b->Arg(i);
}

}  // namespace

// Arg: 0 none, 1 validation, 2 trace, 3 faults (armed, not firing), 4 validation + trace.
BENCHMARK(BM_LaunchAdd1)->Apply(names);
BENCHMARK(BM_AllocFree4K)->Apply(names);
BENCHMARK(BM_CopyH2D64)->Apply(names);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  made.clear();  // the trace layer finishes its file
  std::filesystem::remove_all(dir);
  return 0;
}
