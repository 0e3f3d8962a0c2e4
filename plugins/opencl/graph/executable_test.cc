// The OpenCL executable across plugins and processes: a graph whose gelu
// hal.toml disables on OpenCL runs its fused groups there and gelu on the
// CPU (copies counted, results as on the CPU alone); the fused executables
// serialise (ABI 1.5), so a second process (and a compile after the memory
// cache is cleared) compiles nothing; the bytes are checked when read back.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "hal/graph/c_graph.hpp"
#include "hal/runtime/graph.hpp"
#include "hal/runtime/runtime.hpp"
#include "hal/testing/test_util.hpp"
#include "hal/loader/loaded_plugin.hpp"

namespace {

using hal::Graph;
using hal::TensorView;
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;

// N values in [-2, 2], different per SEED.
std::vector<float> data(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 2.0f * std::sin(0.7f * static_cast<float>(i) + static_cast<float>(seed));
  return v;
}

// OpenCL with DISABLED ops, then the CPU plugin (the fallback device).
std::shared_ptr<hal::Runtime> opencl_and_cpu(const hal::testing::TempDir& dir, const std::string& disabled) {
  return hal::testing::load_config(dir, "[[plugin]]\npath = \"" + std::string(HAL_TEST_OPENCL_PLUGIN) +
                                            "\"\ndisabled_ops = [" + disabled + "]\n[[plugin]]\npath = \"" +
                                            HAL_TEST_CPU_PLUGIN + "\"\n");
}

// y = gelu(x * w + b) * 0.75 and sum(y); x is [-1 (rows), 256].
struct Mlp {
  Graph g;
  std::vector<float> xd = data(64 * 256, 1), wd = data(256, 2), bd = data(256, 3);
  Mlp() {
    int64_t rows = g.symbol("rows");
    auto x = g.input(F32, {rows, 256}, "x"), w = g.input(F32, {256}, "w"), b = g.input(F32, {256}, "b");
    std::vector<float> scale = {0.75f};
    auto s = g.constant(F32, {}, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(scale.data()),
                                                      reinterpret_cast<uint8_t*>(scale.data()) + 4), "scale");
    auto t1 = g.add_op("mul", {x, w}, {F32, {rows, 256}});
    auto t2 = g.add_op("add", {t1, b}, {F32, {rows, 256}});
    auto t3 = g.add_op("gelu", {t2}, {F32, {rows, 256}});
    auto y = g.add_op("mul", {t3, s}, {F32, {rows, 256}});
    g.mark_output(y, "y");
    g.mark_output(g.add_op("sum", {y}, {F32, {}}), "total");
  }
  // Runs C with ROWS rows of x; returns y then total.
  std::vector<std::vector<float>> run(const hal::CompiledGraph& c, int64_t rows = 64) const {
    hal::Device& d = c.device();
    std::vector<hal::Buffer> keep;
    std::vector<TensorView> views;
    auto upload = [&](const float* p, std::vector<int64_t> shape) {
      uint64_t n = 4;
      for (int64_t s : shape) n *= static_cast<uint64_t>(s);
      keep.push_back(d.allocate(n));
      keep.back().copy_from_host(p, n);
      views.emplace_back(keep.back(), F32, std::move(shape));
    };
    views.reserve(3);
    upload(xd.data(), {rows, 256});
    upload(wd.data(), {256});
    upload(bd.data(), {256});
    std::vector<hal::OwnedTensor> out = c.run_allocating({&views[0], &views[1], &views[2]});
    std::vector<std::vector<float>> result;
    for (hal::OwnedTensor& o : out) {
      result.emplace_back(static_cast<size_t>(o.view.numel()));
      o.buffer.copy_to_host(result.back().data(), result.back().size() * 4);
    }
    return result;
  }
};

void check_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i])) && bad++ < 5)
      CHECK(got[i] == doctest::Approx(want[i]).epsilon(rtol));
  CHECK(bad == 0);
}

hal::CompileOptions options(const std::shared_ptr<hal::Device>& d, const hal::testing::TempDir& dir) {
  hal::CompileOptions o;
  o.devices = {d};
  o.cache_dir = dir / "cache";
  return o;
}

}  // namespace

TEST_CASE("opencl partition: gelu disabled by hal.toml runs on the CPU between two fused groups") {
  hal::testing::TempDir dir;
  auto rt = opencl_and_cpu(dir, "\"gelu\"");
  auto cl = rt->device("opencl:0");
  auto cpu = rt->device("cpu:0");
  REQUIRE(cl != nullptr);
  Mlp m;
  hal::CompileOptions o = options(cl, dir);
  o.disk_cache = false;
  hal::CompiledGraph c = hal::compile(m.g, o);
  const hal::CompiledGraphStats& s = c.stats();
  CHECK(s.groups == 2);  // mul+add, and mul -> sum
  CHECK(s.kernel_count == 2);
  CHECK(s.op_nodes == 1);
  CHECK(s.fallback_nodes == 1);
  REQUIRE(s.devices.size() == 2);
  CHECK(s.devices[0].groups == 2);
  CHECK(s.devices[0].constants == 1);
  CHECK(s.devices[1].device == "cpu:0");
  CHECK(s.devices[1].fallback_nodes == 1);
  CHECK(s.copies == 2);       // add's output to the CPU, gelu's back
  CHECK(s.copy_bytes == 0);   // symbolic rows: known per run
  const std::string e = c.explain();
  CHECK(e.find("node 2 ('gelu') op by op [fallback] (declined by opencl:0: disabled by hal.toml)") != std::string::npos);
  CHECK(e.find("copies between devices per run: 2") != std::string::npos);

  auto got = m.run(c, 64);
  CHECK(c.last_copy_bytes() == 2 * 64 * 256 * 4);
  hal::CompiledGraph alone = hal::compile(*cpu, m.g);  // the CPU plugin op by op
  auto want = m.run(alone, 64);
  check_close(got[0], want[0], 1e-5, 1e-5);
  check_close(got[1], want[1], 1e-4, 1e-2);
  // Another row count through the same compiled graph.
  auto got5 = m.run(c, 5), want5 = m.run(alone, 5);
  check_close(got5[0], want5[0], 1e-5, 1e-5);
  CHECK(c.last_copy_bytes() == 2 * 5 * 256 * 4);
}

TEST_CASE("opencl compile cache: a second process deserialises, a changed option recompiles") {
  hal::testing::TempDir dir;
  auto rt = opencl_and_cpu(dir, "\"gelu\"");
  auto cl = rt->device("opencl:0");
  const bool serialises = cl->plugin().graph.executable_serialize != nullptr;
  REQUIRE(serialises);
  Mlp m;
  hal::CompileOptions o = options(cl, dir);
  hal::clear_compile_cache();
  const hal::CompileCacheCounters c0 = hal::compile_cache_counters();
  hal::CompiledGraph first = hal::compile(m.g, o);
  CHECK(first.stats().compiled == 2);
  const hal::CompileCacheCounters c1 = hal::compile_cache_counters();
  CHECK(c1.graph_compiles == c0.graph_compiles + 2);
  auto want = m.run(first);

  hal::clear_compile_cache();  // as a new process starts
  hal::CompiledGraph second = hal::compile(m.g, o);
  CHECK(second.stats().cache == hal::CacheSource::kDisk);
  CHECK(second.stats().compiled == 0);
  CHECK(second.stats().deserialized == 2);
  CHECK(second.stats().descriptions == first.stats().descriptions);
  const hal::CompileCacheCounters c2 = hal::compile_cache_counters();
  CHECK(c2.graph_compiles == c1.graph_compiles);
  CHECK(c2.deserializations == c1.deserializations + 2);
  auto got = m.run(second);
  CHECK(got == want);

  hal::clear_compile_cache();
  o.options["fusion"] = "off-by-name-only";
  hal::CompiledGraph third = hal::compile(m.g, o);
  CHECK(third.stats().cache == hal::CacheSource::kCompiled);
  CHECK(hal::compile_cache_counters().graph_compiles == c2.graph_compiles + 2);
}

// Run by the test below in a child process (HAL_TEST_CACHE_CHILD names the
// cache folder the parent filled); without it, the parent side.
TEST_CASE("opencl compile cache: a second process compiles nothing") {
  const char* child = std::getenv("HAL_TEST_CACHE_CHILD");
  hal::testing::TempDir dir;
  auto rt = opencl_and_cpu(dir, "\"gelu\"");
  Mlp m;
  hal::CompileOptions o = options(rt->device("opencl:0"), dir);
  if (child != nullptr) {
    o.cache_dir = child;
    hal::CompiledGraph c = hal::compile(m.g, o);
    CHECK(c.stats().cache == hal::CacheSource::kDisk);
    CHECK(c.stats().deserialized == 2);
    CHECK(hal::compile_cache_counters().graph_compiles == 0);  // in this whole process
    CHECK(hal::compile_cache_counters().deserializations == 2);
    CHECK(m.run(c)[1].size() == 1);
    return;
  }
  hal::compile(m.g, o);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  hal::testing::CommandResult r = hal::testing::run_command(
      "HAL_TEST_CACHE_CHILD='" + o.cache_dir + "' '" + self +
      "' -tc='opencl compile cache: a second process compiles nothing' -nv 2>&1");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("1 passed") != std::string::npos);
}

TEST_CASE("opencl executable_deserialize refuses bytes that are corrupt, truncated, of another plugin or graph") {
  hal::testing::TempDir dir;
  auto rt = opencl_and_cpu(dir, "");
  auto cl = rt->device("opencl:0");
  const hal_graph_api_t& api = cl->plugin().graph;
  Graph g;
  auto x = g.input(F32, {4});
  auto t = g.add_op("exp", {x}, {F32, {4}});
  g.mark_output(g.add_op("mul", {t, x}, {F32, {4}}));
  std::vector<size_t> nodes = {0, 1};
  hal::detail::CGraph c(g, nodes, g.inputs(), g.outputs());
  hal_executable_t* exe = nullptr;
  REQUIRE(api.graph_compile(cl->handle(), c.get(), &exe) == nullptr);
  size_t size = 0;
  hal_executable_serialize_args_t sa{sizeof(sa), nullptr, exe, nullptr, 0, &size};
  REQUIRE(api.executable_serialize(&sa) == nullptr);
  std::vector<uint8_t> bytes(size);
  sa.out_data = bytes.data();
  sa.capacity = size - 1;
  hal_status_t* st = api.executable_serialize(&sa);  // too small: refused, nothing written
  REQUIRE(st != nullptr);
  CHECK(st->code == HAL_STATUS_OUT_OF_RANGE);
  st->destroy(st);
  sa.capacity = size;
  REQUIRE(api.executable_serialize(&sa) == nullptr);
  REQUIRE(api.executable_destroy(exe) == nullptr);

  auto refusal = [&](const std::vector<uint8_t>& b, const hal_graph_t* graph) {
    hal_executable_t* out = nullptr;
    hal_executable_deserialize_args_t da{sizeof(da), nullptr, cl->handle(), graph, b.data(), b.size(), &out};
    hal_status_t* s = api.executable_deserialize(&da);
    if (s == nullptr) {
      api.executable_destroy(out);
      return std::string("accepted");
    }
    CHECK(s->code == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(out == nullptr);
    std::string m = s->message;
    s->destroy(s);
    return m;
  };
  CHECK(refusal(bytes, c.get()) == "accepted");
  std::vector<uint8_t> flipped = bytes;
  flipped[flipped.size() - 10] ^= 1;
  CHECK(refusal(flipped, c.get()).find("checksum mismatch") != std::string::npos);
  CHECK(refusal(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 20), c.get()).find("truncated") !=
        std::string::npos);
  CHECK(refusal(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1), c.get()).find("payload bytes, its header says") !=
        std::string::npos);
  std::vector<uint8_t> foreign = bytes;
  foreign[12] = 'X';  // first byte of the plugin's name ("opencl")
  CHECK(refusal(foreign, c.get()).find("serialised executable written by 'Xpencl'") != std::string::npos);
  // Bytes compiled from another graph (same operand counts, other ops).
  Graph h;
  auto hx = h.input(F32, {4});
  auto ht = h.add_op("exp", {hx}, {F32, {4}});
  h.mark_output(ht);
  std::vector<size_t> one = {0};
  hal::detail::CGraph hc(h, one, h.inputs(), h.outputs());
  CHECK(refusal(bytes, hc.get()).find("serialised executable was compiled from another graph") != std::string::npos);
}
