// How long the OpenCL plugin takes to get an MLP training step's kernels
// ready: loads the plugin and launches each op of a 2-layer MLP's forward,
// backward and SGD step once (synchronously), printing the wall time in ms
// and the plugin's build counters. Run by bench/opencl_compile_cache.sh with
// empty and with warm kernel caches (HAL_OPENCL_CACHE_DIR, POCL_CACHE_DIR).
#include <chrono>
#include <cstdio>
#include <vector>

#include "hal/runtime/op.hpp"
#include "hal/runtime/runtime.hpp"

int main() {
  auto start = std::chrono::steady_clock::now();
  hal::RuntimeOptions o;
  o.plugin_paths = {HAL_BENCH_OPENCL_PLUGIN};
  o.use_environment = false;
  o.use_install_dir = false;
  auto rt = hal::Runtime::create(o);
  if (rt->devices().empty()) {
    std::fprintf(stderr, "no OpenCL device\n");
    return 1;
  }
  auto dev = rt->devices().front();
  const int64_t N = 32, I = 64, H = 128, C = 10;
  auto f32 = [&](std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    hal::Buffer b = dev->allocate(static_cast<uint64_t>(n) * 4);
    std::vector<float> zeros(static_cast<size_t>(n), 0.01f);
    b.copy_from_host(zeros.data(), zeros.size() * 4);
    return b;
  };
  hal::Buffer x = f32({N, I}), w1 = f32({H, I}), b1 = f32({H}), w2 = f32({C, H}), b2 = f32({C}), z1 = f32({N, H}),
              a1 = f32({N, H}), z2 = f32({N, C}), loss = f32({1}), one = f32({1}), dz2 = f32({N, C}),
              da1 = f32({N, H}), dw2 = f32({C, H}), db2 = f32({C}), dz1 = f32({N, H}), dx = f32({N, I}),
              dw1 = f32({H, I}), db1 = f32({H});
  hal::Buffer t = dev->allocate(N * 8);
  std::vector<int64_t> target(N, 3);
  t.copy_from_host(target.data(), N * 8);
  using V = hal::TensorView;
  V X(x, HAL_DTYPE_FLOAT32, {N, I}), W1(w1, HAL_DTYPE_FLOAT32, {H, I}), B1(b1, HAL_DTYPE_FLOAT32, {H}),
      W2(w2, HAL_DTYPE_FLOAT32, {C, H}), B2(b2, HAL_DTYPE_FLOAT32, {C}), Z1(z1, HAL_DTYPE_FLOAT32, {N, H}),
      A1(a1, HAL_DTYPE_FLOAT32, {N, H}), Z2(z2, HAL_DTYPE_FLOAT32, {N, C}), L(loss, HAL_DTYPE_FLOAT32, {}),
      ONE(one, HAL_DTYPE_FLOAT32, {}), DZ2(dz2, HAL_DTYPE_FLOAT32, {N, C}), DA1(da1, HAL_DTYPE_FLOAT32, {N, H}),
      DW2(dw2, HAL_DTYPE_FLOAT32, {C, H}), DB2(db2, HAL_DTYPE_FLOAT32, {C}), DZ1(dz1, HAL_DTYPE_FLOAT32, {N, H}),
      DX(dx, HAL_DTYPE_FLOAT32, {N, I}), DW1(dw1, HAL_DTYPE_FLOAT32, {H, I}), DB1(db1, HAL_DTYPE_FLOAT32, {H}),
      T(t, HAL_DTYPE_INT64, {N});
  auto run = [&](const char* op, std::vector<const V*> in, std::vector<const V*> out,
                 std::vector<hal::Attr> attrs = {}) { hal::OpRunner(dev, op).launch(in, out, attrs); };
  run("linear", {&X, &W1, &B1}, {&Z1});
  run("relu", {&Z1}, {&A1});
  run("linear", {&A1, &W2, &B2}, {&Z2});
  run("cross_entropy", {&Z2, &T, nullptr}, {&L});
  run("cross_entropy_backward", {&ONE, &Z2, &T, nullptr}, {&DZ2});
  run("linear_backward", {&DZ2, &A1, &W2}, {&DA1, &DW2, &DB2});
  run("relu_backward", {&DA1, &Z1}, {&DZ1});
  run("linear_backward", {&DZ1, &X, &W1}, {&DX, &DW1, &DB1});
  run("sub", {&W1, &DW1}, {&W1}, {hal::Attr::scalar("alpha", 0.1)});
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("first MLP step (load + 9 op launches): %.1f ms\n", ms);
  return 0;
}
