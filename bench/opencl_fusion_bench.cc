// The OpenCL plugin's graph compiler against launching the same ops one by
// one: y = gelu(x * w + b) * scale, then sum(y), on x [4096, 1024] float32
// (4M elements; w and b [1024] broadcast over the rows, scale 0-d).
//
//   BM_Fused      hal::compile'd graph: one generated kernel per run (the
//                 chain's values never touch memory)
//   BM_OpByOp     mul, add, gelu, mul, sum through hal::OpRunner, with
//                 intermediates in device buffers
//
// Also with gelu(approximate = tanh) and relu in place of gelu (/gelu_tanh,
// /relu), and each op of the gelu chain alone (BM_OneOp): on PoCL the
// erf-based gelu dominates the chain's time (compute-bound), so fusing
// saves the memory traffic of the other ops only; with relu the chain is
// bound by memory and fusing saves most of it.
// Both queue on one stream and synchronize at the end of every iteration.
// At exit the ratio op-by-op / fused is printed. When the OpenCL plugin has
// no sum kernel (yet), BM_OpByOp runs the four elementwise ops only, says
// so in its label, and the ratio understates the gain.
//
// Run: hal_opencl_fusion_bench --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/runtime/graph.hpp"
#include "hal/runtime/op.hpp"
#include "hal/runtime/runtime.hpp"

#ifndef HAL_BENCH_OPENCL_PLUGIN
#error "HAL_BENCH_OPENCL_PLUGIN (path to libhal_plugin_opencl.so) must be defined by the build"
#endif

namespace {

constexpr int64_t kRows = 4096, kCols = 1024;
constexpr hal_dtype_e kF = HAL_DTYPE_FLOAT32;

struct Tensor {
  hal::Buffer buffer;
  hal::TensorView view;
  Tensor(hal::Device& d, std::vector<int64_t> shape) : buffer(d.allocate(bytes(shape))) {
    std::vector<float> v(bytes(shape) / 4);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 4093) * (4.0f / 4093.0f) - 2.0f;
    buffer.copy_from_host(v.data(), v.size() * 4);
    view = hal::TensorView(buffer, kF, std::move(shape));
  }
  static uint64_t bytes(const std::vector<int64_t>& shape) {
    uint64_t n = 4;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

struct Env {
  std::shared_ptr<hal::Runtime> runtime;
  std::shared_ptr<hal::Device> device;
  std::optional<Tensor> x, w, b, scale, t1, t2, t3, y, sum;

  static Env& get() {
    static Env* env = [] {
      auto* e = new Env();  // leaked: outlives every benchmark
      hal::RuntimeOptions o;
      o.plugin_paths = {HAL_BENCH_OPENCL_PLUGIN};
      o.use_environment = false;
      e->runtime = hal::Runtime::create(o);
      if (e->runtime->devices().empty()) {
        std::fprintf(stderr, "no OpenCL device from %s\n", HAL_BENCH_OPENCL_PLUGIN);
        std::exit(1);
      }
      e->device = e->runtime->devices().front();
      hal::Device& d = *e->device;
      e->x.emplace(d, std::vector<int64_t>{kRows, kCols});
      e->w.emplace(d, std::vector<int64_t>{kCols});
      e->b.emplace(d, std::vector<int64_t>{kCols});
      e->scale.emplace(d, std::vector<int64_t>{});
      for (auto* t : {&e->t1, &e->t2, &e->t3, &e->y}) t->emplace(d, std::vector<int64_t>{kRows, kCols});
      e->sum.emplace(d, std::vector<int64_t>{});
      return e;
    }();
    return *env;
  }
};

// The activation of the chain: gelu (erf, the benchmark proper), gelu with
// approximate = tanh, or relu (a chain bound by memory, not by erf).
struct Activation {
  std::string op;
  std::vector<hal::Attr> attrs;
};
Activation activation(const std::string& name) {
  if (name == "gelu_tanh") return {"gelu", {hal::Attr::s("approximate", "tanh")}};
  return {name, {}};
}

hal::CompiledGraph compile_chain(hal::Device& d, const Activation& act) {
  hal::Graph g;
  auto x = g.input(kF, {kRows, kCols});
  auto w = g.input(kF, {kCols});
  auto b = g.input(kF, {kCols});
  auto s = g.input(kF, {});
  auto t1 = g.add_op("mul", {x, w}, {kF, {kRows, kCols}});
  auto t2 = g.add_op("add", {t1, b}, {kF, {kRows, kCols}});
  auto t3 = g.add_op(act.op, {t2}, {kF, {kRows, kCols}}, act.attrs);
  auto y = g.add_op("mul", {t3, s}, {kF, {kRows, kCols}});
  g.mark_output(g.add_op("sum", {y}, {kF, {}}));
  return hal::compile(d, g);
}

std::map<std::string, std::pair<double, double>> times;  // activation -> fused ms, op-by-op ms

template <class Body>
double timed_loop(benchmark::State& state, const hal::Stream& stream, Body body) {
  body();  // warm: kernels built, pages touched
  stream.synchronize();
  double total = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    stream.synchronize();
    total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
  return state.iterations() ? total / static_cast<double>(state.iterations()) : 0;
}

void BM_Fused(benchmark::State& state, const char* act) {
  Env& e = Env::get();
  hal::Stream stream = e.device->create_stream();
  hal::CompiledGraph c = compile_chain(*e.device, activation(act));
  const auto& st = c.stats();
  state.SetLabel(st.descriptions.empty() ? "" : st.descriptions[0]);
  times[act].first = timed_loop(state, stream, [&] {
    c.run({&e.x->view, &e.w->view, &e.b->view, &e.scale->view}, {&e.sum->view}, &stream);
  });
}

void BM_OpByOp(benchmark::State& state, const char* act_name) {
  Env& e = Env::get();
  Activation act = activation(act_name);
  hal::Stream stream = e.device->create_stream();
  hal::OpRunner mul(e.device, "mul"), add(e.device, "add"), f(e.device, act.op);
  std::optional<hal::OpRunner> sum;
  try {
    sum.emplace(e.device, "sum");
    state.SetLabel("5 kernels");
  } catch (const hal::Error&) {
    state.SetLabel("4 kernels (the OpenCL plugin has no sum yet)");
  }
  times[act_name].second = timed_loop(state, stream, [&] {
    mul.launch({&e.x->view, &e.w->view}, {&e.t1->view}, {}, &stream);
    add.launch({&e.t1->view, &e.b->view}, {&e.t2->view}, {}, &stream);
    f.launch({&e.t2->view}, {&e.t3->view}, act.attrs, &stream);
    mul.launch({&e.t3->view, &e.scale->view}, {&e.y->view}, {}, &stream);
    if (sum) sum->launch({&e.y->view}, {&e.sum->view}, {}, &stream);
  });
}

#define HAL_CHAIN_BENCH(act)                                                                  \
  BENCHMARK_CAPTURE(BM_Fused, act, #act)->Unit(benchmark::kMillisecond)->UseRealTime(); \
  BENCHMARK_CAPTURE(BM_OpByOp, act, #act)->Unit(benchmark::kMillisecond)->UseRealTime()
HAL_CHAIN_BENCH(gelu);
HAL_CHAIN_BENCH(gelu_tanh);
HAL_CHAIN_BENCH(relu);

// Each op of the gelu chain alone (where the op-by-op time goes).
void BM_OneOp(benchmark::State& state, const char* which) {
  Env& e = Env::get();
  hal::Stream stream = e.device->create_stream();
  std::string w = which;
  hal::OpRunner op(e.device, w == "mul_w" || w == "mul_scale" ? "mul" : w);
  timed_loop(state, stream, [&] {
    if (w == "mul_w") op.launch({&e.x->view, &e.w->view}, {&e.t1->view}, {}, &stream);
    if (w == "add") op.launch({&e.t1->view, &e.b->view}, {&e.t2->view}, {}, &stream);
    if (w == "gelu") op.launch({&e.t2->view}, {&e.t3->view}, {}, &stream);
    if (w == "mul_scale") op.launch({&e.t3->view, &e.scale->view}, {&e.y->view}, {}, &stream);
  });
}
BENCHMARK_CAPTURE(BM_OneOp, mul_w, "mul_w")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_OneOp, add, "add")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_OneOp, gelu, "gelu")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_OneOp, mul_scale, "mul_scale")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (const auto& [act, t] : times)
    if (t.first > 0 && t.second > 0)
      std::printf("%-10s op by op %7.2f ms / fused %7.2f ms = %.2fx\n", act.c_str(), t.second, t.first,
                  t.second / t.first);
  return 0;
}
