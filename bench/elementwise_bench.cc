// Elementwise kernels of the CPU plugin through the runtime (hal::OpRunner,
// synchronous launch), against what the machine's memory can do:
//
//   BM_Op/{add,mul,gelu,gelu_tanh,sigmoid,exp}/16M  16M float32, contiguous;
//                                   bytes/s counts every input and output once
//   BM_HostLoop/{add,mul}/16M       the same loop in plain C++ on all cores
//                                   (std::thread): the bandwidth bound
//   BM_HostLoop/gelu_libm/16M       gelu with libm's erff (what GCC cannot
//                                   vectorise), all cores
//   BM_Chain10/{fused,op_by_op}/16M  10 elementwise ops over two inputs as a
//                                   compiled graph, one fused loop or 10 kernels
//   BM_SoftmaxInOps/{fused,op_by_op}/16M  exp(x - amax(x)) / sum(...) over
//                                   4096 rows as ops: sub+exp a loop ending in
//                                   the sum, or five kernels
//   BM_LaunchAdd1                   one 1-element add: the cost of a launch
//                                   (runtime + plugin validation + kernel)
//
// Run: hal_elementwise_bench --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hal/runtime/compiled_graph.hpp"
#include "hal/runtime/op.hpp"
#include "hal/runtime/runtime.hpp"

#ifndef HAL_BENCH_CPU_PLUGIN
#error "HAL_BENCH_CPU_PLUGIN (path to libhal_plugin_cpu.so) must be defined by the build"
#endif

namespace {

constexpr int64_t kLarge = int64_t{1} << 24;  // 16M elements

struct Env {
  std::shared_ptr<hal::Runtime> runtime;
  std::shared_ptr<hal::Device> device;

  static Env& get() {
    static Env* env = [] {
      auto* e = new Env();  // leaked: outlives every benchmark
      hal::RuntimeOptions o;
      o.plugin_paths = {HAL_BENCH_CPU_PLUGIN};
      o.use_environment = false;
      e->runtime = hal::Runtime::create(o);
      if (e->runtime->plugins().empty() || e->runtime->plugins()[0]->devices().empty()) {
        std::fprintf(stderr, "cannot load the CPU plugin %s\n", HAL_BENCH_CPU_PLUGIN);
        std::exit(1);
      }
      e->device = e->runtime->plugins()[0]->devices()[0];
      return e;
    }();
    return *env;
  }
};

// A float32 tensor of N elements on the CPU device, filled with values in
// [-4, 4) (the range where gelu/tanh do real work).
struct DeviceTensor {
  hal::Buffer buffer;
  hal::TensorView view;
  DeviceTensor(hal::Device& device, int64_t n) : buffer(device.allocate(static_cast<uint64_t>(n) * 4)) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 4093) * (8.0f / 4093.0f) - 4.0f;
    buffer.copy_from_host(v.data(), v.size() * 4);
    view = hal::TensorView(buffer, HAL_DTYPE_FLOAT32, {n});
  }
};

// OP on N float32 elements: INPUTS inputs, one output.
void BM_Op(benchmark::State& state, const char* op, int inputs, std::vector<hal::Attr> attrs) {
  Env& env = Env::get();
  const int64_t n = state.range(0);
  hal::OpRunner runner(env.device, op);
  std::vector<std::unique_ptr<DeviceTensor>> t;
  for (int k = 0; k <= inputs; ++k) t.push_back(std::make_unique<DeviceTensor>(*env.device, n));
  std::vector<const hal::TensorView*> in;
  for (int k = 0; k < inputs; ++k) in.push_back(&t[k]->view);
  std::vector<const hal::TensorView*> out = {&t[inputs]->view};
  runner.launch(in, out, attrs);  // warm: pages touched, threads started
  for (auto _ : state) runner.launch(in, out, attrs);
  state.SetBytesProcessed(state.iterations() * n * 4 * (inputs + 1));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_CAPTURE(BM_Op, add, "add", 2, {})->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, mul, "mul", 2, {})->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, gelu, "gelu", 1, {})->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, gelu_tanh, "gelu", 1, {hal::Attr::s("approximate", "tanh")})
    ->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, sigmoid, "sigmoid", 1, {})->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Op, exp, "exp", 1, {})->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();

// A chain of 10 elementwise ops over two 16M inputs as one compiled graph:
// fused (the CPU graph compiler's loop over tiles: x and y read once, the
// result written once) or op by op (graph_compilers off: 10 kernels, each a
// pass over memory). Bytes count the fused loop's traffic (two reads, one
// write per element) for both, so bytes/s compare with BM_HostLoop/add.
void BM_Chain10(benchmark::State& state, bool fused) {
  Env& env = Env::get();
  const int64_t n = state.range(0);
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {n}, "x");
  auto y = g.input(HAL_DTYPE_FLOAT32, {n}, "y");
  auto t = g.add_op("add", {x, y});
  t = g.add_op("mul", {t, x});
  t = g.add_op("sub", {t, y});
  t = g.add_op("relu", {t});
  t = g.add_op("mul", {t, y});
  t = g.add_op("add", {t, x});
  t = g.add_op("abs", {t});
  t = g.add_op("sub", {t, x});
  t = g.add_op("mul", {t, t});
  g.mark_output(g.add_op("neg", {t}));
  hal::CompileOptions o;
  o.devices = {env.device};
  o.disk_cache = false;
  o.graph_compilers = fused;
  hal::CompiledGraph c = hal::compile(g, o);
  DeviceTensor a(*env.device, n), b(*env.device, n), out(*env.device, n);
  c.run({&a.view, &b.view}, {&out.view});  // warm
  for (auto _ : state) c.run({&a.view, &b.view}, {&out.view});
  state.SetBytesProcessed(state.iterations() * n * 4 * 3);
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_CAPTURE(BM_Chain10, fused, true)->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Chain10, op_by_op, false)->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();

// Softmax written out in ops over 4096 rows of 4096 (16M float32), as an
// ONNX export before opset 13's Softmax or a decomposition gives it:
// exp(x - amax(x)) / sum(...). Fused, sub + exp run as one loop ending in
// the sum (the row's values reduced as they are made); op by op, five
// kernels. Bytes count one read of x and one write of the result, so
// bytes/s compare with the softmax kernel's (ops_vs_torch.py).
void BM_SoftmaxInOps(benchmark::State& state, bool fused) {
  Env& env = Env::get();
  const int64_t rows = 4096, cols = state.range(0) / rows;
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {rows, cols}, "x");
  const std::vector<hal::Attr> last = {hal::Attr::ints("dim", {-1}), hal::Attr::b("keepdim", true)};
  auto e = g.add_op("exp", {g.add_op("sub", {x, g.add_op("amax", {x}, last)})});
  g.mark_output(g.add_op("div", {e, g.add_op("sum", {e}, last)}));
  hal::CompileOptions o;
  o.devices = {env.device};
  o.disk_cache = false;
  o.graph_compilers = fused;
  hal::CompiledGraph c = hal::compile(g, o);
  DeviceTensor a(*env.device, rows * cols), out(*env.device, rows * cols);
  a.view = hal::TensorView(a.buffer, HAL_DTYPE_FLOAT32, {rows, cols});
  out.view = hal::TensorView(out.buffer, HAL_DTYPE_FLOAT32, {rows, cols});
  c.run({&a.view}, {&out.view});  // warm
  for (auto _ : state) c.run({&a.view}, {&out.view});
  state.SetBytesProcessed(state.iterations() * rows * cols * 4 * 2);
  state.SetItemsProcessed(state.iterations() * rows * cols);
}
BENCHMARK_CAPTURE(BM_SoftmaxInOps, fused, true)->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SoftmaxInOps, op_by_op, false)->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same work as plain loops split over every hardware thread: the bound
// a kernel can reach on this machine.
template <class Body>
void on_all_cores(int64_t n, Body body) {
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
  body(0, n / threads);
  for (auto& th : pool) th.join();
}

void BM_HostLoop(benchmark::State& state, int kind) {
  const int64_t n = state.range(0);
  std::vector<float> a(static_cast<size_t>(n), 1.5f), b(static_cast<size_t>(n), 0.25f), c(static_cast<size_t>(n));
  float* pa = a.data();
  float* pb = b.data();
  float* pc = c.data();
  auto run = [&] {
    on_all_cores(n, [&](int64_t lo, int64_t hi) {
      if (kind == 0)
        for (int64_t i = lo; i < hi; ++i) pc[i] = pa[i] + pb[i];
      else if (kind == 1)
        for (int64_t i = lo; i < hi; ++i) pc[i] = pa[i] * pb[i];
      else
        for (int64_t i = lo; i < hi; ++i) pc[i] = 0.5f * pa[i] * (1.0f + std::erf(pa[i] * 0.70710678f));
    });
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(pc);
  }
  state.SetBytesProcessed(state.iterations() * n * 4 * (kind == 2 ? 2 : 3));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_CAPTURE(BM_HostLoop, add, 0)->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_HostLoop, mul, 1)->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_HostLoop, gelu_libm, 2)->Arg(kLarge)->Unit(benchmark::kMillisecond)->UseRealTime();

// One launch of a 1-element add, synchronous: runtime -> C ABI -> SDK
// validation -> kernel. The target is < 1 us.
void BM_LaunchAdd1(benchmark::State& state) {
  Env& env = Env::get();
  hal::OpRunner add(env.device, "add");
  DeviceTensor a(*env.device, 1), b(*env.device, 1), out(*env.device, 1);
  std::vector<const hal::TensorView*> in = {&a.view, &b.view}, o = {&out.view};
  add.launch(in, o);
  for (auto _ : state) add.launch(in, o);
}
BENCHMARK(BM_LaunchAdd1);

}  // namespace

BENCHMARK_MAIN();
