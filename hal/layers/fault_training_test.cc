// Training under injected faults (issue 34): 200 SGD steps of a small MLP
// built from catalog ops through the runtime API, with 1 % of allocations and
// launches failing (the faults layer, seeded). Each failure surfaces once as a
// hal::Error naming the fault, the call and the device; the step is retried
// from the parameters it started with (a step makes its new parameters out of
// place and they replace the old ones only when the whole step succeeded);
// device memory is back to the parameters' after every step and to zero at
// the end; the final parameters equal a run without faults, bit for bit. CI
// runs this under ASan+UBSan with LeakSanitizer (the core's tests).
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "hal/runtime/runtime.hpp"
#include "testing/test_util.hpp"

namespace {

using hal::testing::TempDir;

constexpr int64_t kN = 16, kIn = 8, kHidden = 16, kClasses = 4;
constexpr int kSteps = 200;

// caching_allocator = false: every allocation reaches the plugin (and the
// faults layer), so 1 % of them fail.
std::shared_ptr<hal::Runtime> runtime(const TempDir& dir, const std::string& faults, const std::string& log) {
  std::string layers = faults.empty() ? "" : "layers = [\"faults\"]\n[layer_options.faults]\nspec = \"" + faults +
                                                 "\"\nlog = \"" + log + "\"\n";
  return hal::testing::load_config(dir, "discover = false\ncaching_allocator = false\n" + layers +
                                            "[[plugin]]\npath = \"" HAL_TEST_CPU_PLUGIN "\"\n");
}

struct Tensor {
  hal::Buffer buffer;
  std::vector<int64_t> shape;
  hal_dtype_e dtype = HAL_DTYPE_FLOAT32;
  hal::TensorView view() const { return hal::TensorView(buffer, dtype, shape); }
};

Tensor empty(const std::shared_ptr<hal::Device>& d, std::vector<int64_t> shape, hal_dtype_e dt = HAL_DTYPE_FLOAT32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return Tensor{d->allocate(static_cast<uint64_t>(n) * (dt == HAL_DTYPE_INT64 ? 8 : 4)), std::move(shape), dt};
}

template <class T>
Tensor upload(const std::shared_ptr<hal::Device>& d, std::vector<int64_t> shape, const std::vector<T>& v,
              hal_dtype_e dt = HAL_DTYPE_FLOAT32) {
  Tensor t = empty(d, std::move(shape), dt);
  t.buffer.copy_from_host(v.data(), v.size() * sizeof(T));
  return t;
}

std::vector<float> download(const Tensor& t) {
  std::vector<float> v(t.buffer.size() / 4);
  t.buffer.copy_to_host(v.data(), t.buffer.size());
  return v;
}

void run(const std::shared_ptr<hal::Device>& d, const char* op, const std::vector<const Tensor*>& in,
         const std::vector<const Tensor*>& out, const std::vector<hal::Attr>& attrs = {}) {
  std::vector<hal::TensorView> views;
  views.reserve(in.size() + out.size());
  std::vector<const hal::TensorView*> ins, outs;
  for (const Tensor* t : in) ins.push_back(t != nullptr ? &views.emplace_back(t->view()) : nullptr);
  for (const Tensor* t : out) outs.push_back(&views.emplace_back(t->view()));
  hal::OpRunner(d, op).launch(ins, outs, attrs);
}

struct Params {
  Tensor w1, b1, w2, b2;
};

// One step: x -> linear(w1, b1) -> relu -> linear(w2, b2) -> cross_entropy;
// the backward pass; SGD (lr 0.1) into new tensors. Throws on any failure,
// leaving P as it was.
Params step(const std::shared_ptr<hal::Device>& d, const Tensor& x, const Tensor& target, const Params& p,
            float* loss) {
  Tensor z1 = empty(d, {kN, kHidden}), a1 = empty(d, {kN, kHidden}), z2 = empty(d, {kN, kClasses}),
         l = empty(d, {});
  run(d, "linear", {&x, &p.w1, &p.b1}, {&z1});
  run(d, "relu", {&z1}, {&a1});
  run(d, "linear", {&a1, &p.w2, &p.b2}, {&z2});
  run(d, "cross_entropy", {&z2, &target, nullptr}, {&l});
  Tensor one = upload(d, {}, std::vector<float>{1.0f});
  Tensor dz2 = empty(d, {kN, kClasses}), da1 = empty(d, {kN, kHidden}), dw2 = empty(d, {kClasses, kHidden}),
         db2 = empty(d, {kClasses}), dz1 = empty(d, {kN, kHidden}), dx = empty(d, {kN, kIn}),
         dw1 = empty(d, {kHidden, kIn}), db1 = empty(d, {kHidden});
  run(d, "cross_entropy_backward", {&one, &z2, &target, nullptr}, {&dz2});
  run(d, "linear_backward", {&dz2, &a1, &p.w2}, {&da1, &dw2, &db2});
  run(d, "relu_backward", {&da1, &z1}, {&dz1});
  run(d, "linear_backward", {&dz1, &x, &p.w1}, {&dx, &dw1, &db1});
  Params next{empty(d, p.w1.shape), empty(d, p.b1.shape), empty(d, p.w2.shape), empty(d, p.b2.shape)};
  const std::vector<hal::Attr> lr = {hal::Attr::scalar("alpha", 0.1)};
  run(d, "sub", {&p.w1, &dw1}, {&next.w1}, lr);
  run(d, "sub", {&p.b1, &db1}, {&next.b1}, lr);
  run(d, "sub", {&p.w2, &dw2}, {&next.w2}, lr);
  run(d, "sub", {&p.b2, &db2}, {&next.b2}, lr);
  *loss = download(l)[0];
  return next;
}

struct Outcome {
  std::vector<float> w1, b1, w2, b2, losses;
  std::vector<std::string> errors;  // every hal::Error caught, in order
};

Outcome train(const std::shared_ptr<hal::Runtime>& rt) {
  auto d = rt->default_device();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto randn = [&](size_t n, float scale) {
    std::vector<float> v(n);
    for (float& e : v) e = normal(rng) * scale;
    return v;
  };
  const std::vector<float> x = randn(kN * kIn, 1.0f), w1 = randn(kHidden * kIn, 0.3f), b1 = randn(kHidden, 0.1f),
                           w2 = randn(kClasses * kHidden, 0.3f), b2 = randn(kClasses, 0.1f);
  std::vector<int64_t> target(kN);
  for (int64_t i = 0; i < kN; ++i) target[i] = (i * 3) % kClasses;

  Outcome o;
  // Runs F until it succeeds; each failure is recorded (at most 50 in a row).
  auto retried = [&](const std::function<void()>& f) {
    for (int attempt = 0;; ++attempt) {
      try {
        f();
        return;
      } catch (const hal::Error& e) {
        o.errors.push_back(e.what());
        REQUIRE(attempt < 50);
      }
    }
  };
  Tensor tx, tt;
  Params p;
  retried([&] {
    tx = upload(d, {kN, kIn}, x);
    tt = upload(d, {kN}, target, HAL_DTYPE_INT64);
    p = Params{upload(d, {kHidden, kIn}, w1), upload(d, {kHidden}, b1), upload(d, {kClasses, kHidden}, w2),
               upload(d, {kClasses}, b2)};
  });
  const uint64_t baseline = d->allocator().stats().allocated_bytes;  // inputs and parameters
  for (int s = 0; s < kSteps; ++s) {
    float loss = 0;
    retried([&] { p = step(d, tx, tt, p, &loss); });
    o.losses.push_back(loss);
    CHECK_MESSAGE(d->allocator().stats().allocated_bytes == baseline, "step ", s);
  }
  o.w1 = download(p.w1), o.b1 = download(p.b1), o.w2 = download(p.w2), o.b2 = download(p.b2);
  tx = {}, tt = {}, p = {};
  CHECK(d->allocator().stats().allocated_bytes == 0);
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("faults: 200 training steps with 1 % of allocations and launches failing - each reported once, retried") {
  TempDir dir;
  const std::string log = dir / "faults.jsonl";
  const Outcome clean = train(runtime(dir, "", ""));
  CHECK(clean.errors.empty());
  REQUIRE(clean.losses.size() == kSteps);
  CHECK(clean.losses.back() < 0.5f * clean.losses.front());  // it learns

  const Outcome faulted = train(runtime(dir, "alloc:rate=0.01;launch:rate=0.01;seed=11", log));
  // Every injection surfaced as exactly one error, in order, naming what failed.
  std::ifstream lines(log);
  std::vector<nlohmann::json> injected;
  for (std::string line; std::getline(lines, line);) injected.push_back(nlohmann::json::parse(line));
  CHECK(injected.size() >= 20);  // ~30 allocations and 14 launches per step
  REQUIRE(faulted.errors.size() == injected.size());
  size_t allocs = 0, launches = 0;
  for (size_t i = 0; i < injected.size(); ++i) {
    const std::string& e = faulted.errors[i];
    CHECK_MESSAGE(e.find("layer faults: injected fault '") != std::string::npos, e);
    CHECK_MESSAGE(e.find("on cpu:0") != std::string::npos, e);
    if (injected[i]["kind"] == "alloc") {
      ++allocs;
      CHECK_MESSAGE(e.find("buffer_allocate") != std::string::npos, e);
      CHECK_MESSAGE(e.find("OUT_OF_MEMORY") != std::string::npos, e);
    } else {
      ++launches;
      CHECK(injected[i]["kind"] == "launch");
      const std::string op = injected[i]["op"].get<std::string>();
      CHECK_MESSAGE(e.find("op_launch of " + op + " on cpu:0 failed with DEVICE_ERROR") != std::string::npos, e);
    }
  }
  CHECK(allocs > 0);
  CHECK(launches > 0);
  MESSAGE(injected.size() << " faults injected (" << allocs << " allocations, " << launches << " launches)");
  // Retried steps give the fault-free run's answer exactly.
  CHECK(same_bits(faulted.losses, clean.losses));
  CHECK(same_bits(faulted.w1, clean.w1));
  CHECK(same_bits(faulted.b1, clean.b1));
  CHECK(same_bits(faulted.w2, clean.w2));
  CHECK(same_bits(faulted.b2, clean.b2));
}
