// Partition across plugins (fixture_graph: compiles add/mul chains; the CPU
// plugin: ops only) with hal.toml's disabled_ops, copies between devices,
// the fallback device, refusals naming every device's reason, and the
// compile cache with a plugin whose executables do not serialise.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hal/runtime/graph.hpp"
#include "hal/runtime/op_stats.hpp"
#include "loader/loaded_plugin.hpp"
#include "testing/op_test_util.hpp"
#include "testing/test_util.hpp"

using hal::testing::fixture;
using hal::testing::TempDir;

namespace {
const std::string kCpu = HAL_TEST_CPU_PLUGIN;
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Fixture_graph (with DISABLED ops) then the CPU plugin (with CPU_DISABLED).
std::shared_ptr<hal::Runtime> mixed(const TempDir& dir, const std::string& disabled,
                                    const std::string& cpu_disabled = "") {
  return hal::testing::load_config(dir, "[[plugin]]\npath = \"" + fixture("graph") + "\"\ndisabled_ops = [" +
                                            disabled + "]\n[[plugin]]\npath = \"" + kCpu + "\"\ndisabled_ops = [" +
                                            cpu_disabled + "]\n");
}

// p = (x + 2 y) * y; o = p @ w: add is node 0, mul node 1, matmul node 2.
hal::Graph add_mul_matmul() {
  hal::Graph g;
  auto x = g.input(F32, {3, 4}, "x"), y = g.input(F32, {3, 4}, "y"), w = g.input(F32, {4, 2}, "w");
  auto s = g.add_op("add", {x, y}, {F32, {3, 4}}, {hal::Attr::scalar("alpha", 2.0)});
  auto p = g.add_op("mul", {s, y}, {F32, {3, 4}});
  g.mark_output(p, "p");
  g.mark_output(g.add_op("matmul", {p, w}, {F32, {3, 2}}), "o");
  return g;
}

const std::vector<float> kX = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
const std::vector<float> kY = {0.5f, -1, 2, 0, 1, 3, -2, 0.25f, 4, 1, -1, 2};
const std::vector<float> kW = {1, 0, 0, 1, 1, 1, 2, -1};

// Runs C on its home device with kX, kY, kW; returns p and o.
std::pair<std::vector<float>, std::vector<float>> run(const hal::CompiledGraph& c) {
  hal::Device& d = c.device();
  auto upload = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
    hal::testing::DeviceTensor t{d.allocate(v.size() * 4), {}};
    t.buffer.copy_from_host(v.data(), v.size() * 4);
    t.view = hal::TensorView(t.buffer, F32, std::move(shape));
    return t;
  };
  auto x = upload(kX, {3, 4}), y = upload(kY, {3, 4}), w = upload(kW, {4, 2});
  std::vector<hal::OwnedTensor> out = c.run_allocating({&x.view, &y.view, &w.view});
  REQUIRE(out.size() == 2);
  std::vector<float> p(12), o(6);
  out[0].buffer.copy_to_host(p.data(), 48);
  out[1].buffer.copy_to_host(o.data(), 24);
  return {p, o};
}

// What the CPU plugin alone gives.
std::pair<std::vector<float>, std::vector<float>> on_cpu() {
  hal::testing::OpTester cpu(kCpu);
  return run(hal::compile(*cpu.device(), add_mul_matmul()));
}

hal::CompileOptions options(const std::shared_ptr<hal::Device>& d, const TempDir& cache) {
  hal::CompileOptions o;
  o.devices = {d};
  o.cache_dir = cache / "cache";
  return o;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Compiles add_mul_matmul() with O into an empty cache; returns the one
// entry file it wrote (no temporary left behind).
std::string first_entry(const hal::CompileOptions& o) {
  hal::clear_compile_cache();
  hal::compile(add_mul_matmul(), o);
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(o.cache_dir)) files.push_back(e.path());
  REQUIRE(files.size() == 1);
  CHECK(files[0].extension() == ".halcc");
  return files[0].string();
}

// Runs F with stderr sent to a file; returns what was written.
template <class F>
std::string capture_stderr(const TempDir& dir, F&& f) {
  const std::string path = dir / "stderr.txt";
  fflush(stderr);
  int saved = dup(2);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  close(fd);
  try {
    f();
  } catch (...) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    throw;
  }
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  return read_bytes(path);
}
}  // namespace

TEST_CASE("partition: disabled_ops moves a node to the fallback device, copies counted, results as on the CPU") {
  TempDir dir;
  auto rt = mixed(dir, "\"mul\"");
  auto fx = rt->device("fixture_graph:0");
  REQUIRE(rt->fallback_device() == rt->device("cpu:0"));
  CHECK_THROWS_WITH_AS(hal::OpRunner(fx, "mul"),
                       "fixture_graph: op 'mul' is disabled by hal.toml (the plugin's disabled_ops)", hal::Error);
  const std::vector<std::string> names = hal::op_names(*fx);
  CHECK(std::find(names.begin(), names.end(), "add") != names.end());
  CHECK(std::find(names.begin(), names.end(), "mul") == names.end());

  hal::reset_op_stats();
  hal::CompileOptions o;
  o.devices = {fx};
  o.disk_cache = false;
  hal::CompiledGraph c = hal::compile(add_mul_matmul(), o);
  const hal::CompiledGraphStats& s = c.stats();
  CHECK(s.groups == 1);         // add, alone: mul (on the CPU) splits the chain
  CHECK(s.op_nodes == 2);       // mul on the CPU, matmul on the fixture
  CHECK(s.fallback_nodes == 1);
  REQUIRE(s.devices.size() == 2);
  CHECK(s.devices[0].device == "fixture_graph:0");
  CHECK(s.devices[0].groups == 1);
  CHECK(s.devices[0].op_nodes == 1);
  CHECK(s.devices[1].device == "cpu:0");
  CHECK(s.devices[1].fallback_nodes == 1);
  // add's output and y to the CPU, p back (read by matmul, and an output).
  CHECK(s.copies == 3);
  CHECK(s.copy_bytes == 3 * 48);
  auto want = on_cpu();
  auto got = run(c);
  CHECK(got == want);
  CHECK(c.last_copy_bytes() == 3 * 48);
  std::vector<hal::OpStat> stats = hal::op_stats();
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].device == "fixture_graph:0");
  CHECK(stats[0].op == "mul");
  CHECK(stats[0].fallbacks == 1);
  CHECK(stats[0].fallback_bytes == 3 * 48);
  const std::string e = c.explain();
  CHECK(contains(e, "fixture_graph:0 (home):\n  fixture_graph:0 group 1 (nodes 0 add): 1 kernel(s), "));
  CHECK(contains(e, "\n  node 2 ('matmul') op by op\n"));
  CHECK(contains(e, "cpu:0 (fallback):\n  node 1 ('mul') op by op [fallback] (declined by fixture_graph:0: disabled by "
                    "hal.toml)\n"));
  CHECK(contains(e, "copies between devices per run: 3 (144 bytes)\n"));
  CHECK(contains(e, "copy of value 3 fixture_graph:0 -> cpu:0"));

  SUBCASE("a listed CPU runs it as a device of its own, not as fallback") {
    o.devices = {fx, rt->device("cpu:0")};
    hal::CompiledGraph listed = hal::compile(add_mul_matmul(), o);
    CHECK(listed.stats().fallback_nodes == 0);
    CHECK(listed.stats().devices[1].groups == 1);  // the CPU plugin compiles the mul it claims
    CHECK(run(listed) == want);
  }
  SUBCASE("without a fallback the node fails compile") {
    o.use_fallback = false;
    CHECK_THROWS_WITH_AS(hal::compile(add_mul_matmul(), o),
                         "node 1 ('mul'): no device runs op 'mul': fixture_graph:0: disabled by hal.toml", hal::Error);
  }
}

TEST_CASE("partition: a node no device runs is UNIMPLEMENTED naming the node, the op and every device's reason") {
  TempDir dir;
  auto rt = mixed(dir, "\"matmul\"", "\"matmul\", \"exp\"");
  hal::CompileOptions o;
  o.devices = {rt->device("fixture_graph:0")};
  o.disk_cache = false;
  try {
    hal::compile(add_mul_matmul(), o);
    FAIL("compiled");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_UNIMPLEMENTED);
    CHECK(std::string(e.what()) == "node 2 ('matmul'): no device runs op 'matmul': fixture_graph:0: disabled by "
                                   "hal.toml; cpu:0 (fallback): disabled by hal.toml");
  }
  hal::Graph g;
  auto x = g.input(F32, {2});
  g.mark_output(g.add_op("exp", {x}, {F32, {2}}));
  try {
    hal::compile(g, o);
    FAIL("compiled");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_UNIMPLEMENTED);
    CHECK(contains(e.what(), "node 0 ('exp'): no device runs op 'exp': fixture_graph:0: no kernel (fixture_graph: "
                             "op_resolve: op 'exp' is in the catalog but not implemented"));
    CHECK(contains(e.what(), "; cpu:0 (fallback): disabled by hal.toml"));
  }
  // The plugin's op_check: a dtype the fixture's kernels do not take.
  hal::Graph h;
  auto i = h.input(HAL_DTYPE_INT32, {2});
  h.mark_output(h.add_op("add", {i, i}, {HAL_DTYPE_INT32, {2}}));
  o.use_fallback = false;
  try {
    hal::compile(h, o);
    FAIL("compiled");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_UNIMPLEMENTED);
    CHECK(contains(e.what(), "node 0 ('add'): no device runs op 'add': fixture_graph:0: "));
    CHECK(contains(e.what(), "int32"));
  }
}

TEST_CASE("partition: disabled_ops errors name file:line, the op and the catalog") {
  CHECK_THROWS_WITH_AS(hal::Config::parse("[[plugin]]\nname = \"cpu\"\ndisabled_ops = [\"erf\", \"nope\"]\n", "h.toml"),
                       "h.toml:3:24: disabled_ops: 'nope' is not an op of the catalog (docs/ops.md)", hal::ConfigError);
  CHECK_THROWS_WITH_AS(hal::Config::parse("[[plugin]]\nname = \"cpu\"\ndisabled_ops = \"erf\"\n", "h.toml"),
                       "h.toml:3:16: 'disabled_ops' must be an array of catalog op names, not string",
                       hal::ConfigError);
  hal::Config c = hal::Config::parse("[[plugin]]\nname = \"cpu\"\ndisabled_ops = [\"erf\", \"gelu\"]\n", "h.toml");
  CHECK(c.plugins.at(0).disabled_ops == std::vector<std::string>{"erf", "gelu"});
}

TEST_CASE("compile cache: memory hits share executables - a plugin of ABI 1.2 caches the partition, not executables") {
  TempDir dir;
  auto rt = mixed(dir, "\"mul\"");
  auto fx = rt->device("fixture_graph:0");
  REQUIRE(fx->plugin().negotiated_minor == 2);
  CHECK(!fx->plugin().graph.executable_serialize);  // 1.2: no serialisation entries
  const auto want = on_cpu();  // before counting: it compiles too
  hal::clear_compile_cache();
  hal::CompileOptions o = options(fx, dir);
  const hal::CompileCacheCounters c0 = hal::compile_cache_counters();
  hal::CompiledGraph first = hal::compile(add_mul_matmul(), o);
  CHECK(first.stats().cache == hal::CacheSource::kCompiled);
  CHECK(first.stats().compiled == 1);
  const hal::CompileCacheCounters c1 = hal::compile_cache_counters();
  CHECK(c1.graph_compiles == c0.graph_compiles + 1);

  hal::CompiledGraph again = hal::compile(add_mul_matmul(), o);
  CHECK(again.stats().cache == hal::CacheSource::kMemory);
  CHECK(again.stats().compiled == 0);
  const hal::CompileCacheCounters c2 = hal::compile_cache_counters();
  CHECK(c2.graph_compiles == c1.graph_compiles);
  CHECK(c2.memory_hits == c1.memory_hits + 1);
  CHECK(run(again) == want);

  // A new "process": the partition comes from disk, the group is compiled
  // again (the plugin cannot serialise it).
  hal::clear_compile_cache();
  hal::CompiledGraph third = hal::compile(add_mul_matmul(), o);
  CHECK(third.stats().cache == hal::CacheSource::kDisk);
  CHECK(third.stats().compiled == 1);
  CHECK(third.stats().deserialized == 0);
  const hal::CompileCacheCounters c3 = hal::compile_cache_counters();
  CHECK(c3.disk_hits == c2.disk_hits + 1);
  CHECK(c3.graph_compiles == c2.graph_compiles + 1);
  CHECK(c3.deserializations == c2.deserializations);
  CHECK(run(third) == want);

  // Another option is another key.
  hal::clear_compile_cache();
  o.options["level"] = "2";
  CHECK(hal::compile(add_mul_matmul(), o).stats().cache == hal::CacheSource::kCompiled);
}

TEST_CASE("compile cache: corrupt, truncated and foreign entries are warned about, naming the file, and rebuilt") {
  TempDir dir;
  auto rt = mixed(dir, "\"mul\"");
  hal::CompileOptions o = options(rt->device("fixture_graph:0"), dir);
  const std::string file = first_entry(o);
  const std::string good = read_bytes(file);
  auto damaged = [&](const std::string& bytes) {
    hal::testing::write_file(file, bytes);
    hal::clear_compile_cache();
    const uint64_t rebuilt = hal::compile_cache_counters().rebuilt_entries;
    std::string err = capture_stderr(dir, [&] {
      hal::CompiledGraph c = hal::compile(add_mul_matmul(), o);
      CHECK(c.stats().cache == hal::CacheSource::kCompiled);
      CHECK(run(c) == on_cpu());
    });
    CHECK(hal::compile_cache_counters().rebuilt_entries == rebuilt + 1);
    CHECK(read_bytes(file) == good);  // rewritten
    return err;
  };
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x40;
  CHECK(damaged(flipped) == "hal: compile cache: " + file + ": checksum mismatch (corrupt or truncated: " +
                                std::to_string(good.size() - 73) + " payload bytes); rebuilding it\n");
  CHECK(damaged(good.substr(0, 40)) == "hal: compile cache: " + file +
                                            ": not a compile cache file of this version (bad header, or truncated to "
                                            "40 bytes); rebuilding it\n");
  CHECK(contains(damaged(good.substr(0, good.size() / 2)), file + ": checksum mismatch"));
  CHECK(contains(damaged("HALCC 1\n" + std::string(64, '0') + "\nxyz"), ": checksum mismatch"));
}

TEST_CASE("compile cache: an entry naming another plugin version is stale: warned about and rebuilt") {
  TempDir dir;
  auto rt = mixed(dir, "\"mul\"");
  hal::CompileOptions o = options(rt->device("fixture_graph:0"), dir);
  const std::string file = first_entry(o);
  const std::string bytes = read_bytes(file);
  // Re-encode the payload with another version and a checksum that matches.
  nlohmann::json j = nlohmann::json::from_cbor(bytes.substr(73));
  REQUIRE(j.at("devices").at(0).at("plugin") == "fixture_graph");
  j["devices"][0]["version"] = "0.0.1-old";
  std::vector<uint8_t> cbor = nlohmann::json::to_cbor(j);
  hal::testing::write_file(dir / "payload", std::string(cbor.begin(), cbor.end()));
  hal::testing::CommandResult sum = hal::testing::run_command("sha256sum '" + (dir / "payload") + "'");
  REQUIRE(sum.exit_code == 0);
  hal::testing::write_file(file, "HALCC 1\n" + sum.output.substr(0, 64) + "\n" + std::string(cbor.begin(), cbor.end()));
  hal::clear_compile_cache();
  std::string err = capture_stderr(dir, [&] {
    CHECK(hal::compile(add_mul_matmul(), o).stats().cache == hal::CacheSource::kCompiled);
  });
  CHECK(contains(err, "hal: compile cache: " + file + ": stale: written for "));
  CHECK(contains(err, "\"version\":\"0.0.1-old\""));
  CHECK(contains(err, "; rebuilding it\n"));
  hal::clear_compile_cache();
  CHECK(hal::compile(add_mul_matmul(), o).stats().cache == hal::CacheSource::kDisk);  // rewritten
}

TEST_CASE("compiled graph: run_allocating sizes outputs whose dims derive from symbols (shape inference)") {
  hal::testing::OpTester cpu(kCpu);
  hal::Graph g;
  auto x = g.input(F32, {g.symbol("n"), 2}, "x");
  auto both = g.add_op("cat", {x, x}, {hal::Attr::i("dim", 0)});  // [node0_d0, 2]: 2n, derived
  g.mark_output(g.add_op("relu", {both}), "y");
  REQUIRE(g.values()[both.id].shape[0] < 0);
  hal::CompiledGraph c = hal::compile(*cpu.device(), g);
  hal::testing::DeviceTensor t = cpu.tensor({3, 2}, {1, -2, 3, -4, 5, -6});
  std::vector<hal::OwnedTensor> out = c.run_allocating({&t.view});
  REQUIRE(out.size() == 1);
  CHECK(out[0].view.shape == std::vector<int64_t>{6, 2});
  std::vector<float> y(12);
  out[0].buffer.copy_to_host(y.data(), 48);
  CHECK(y == std::vector<float>{1, 0, 3, 0, 5, 0, 1, 0, 3, 0, 5, 0});
}

TEST_CASE("partition: a group convex in what the plugin saw but not across another device is split") {
  // a = x + x; m = a * a (mul disabled: on the CPU); b = m + a. The fixture
  // (partition = "one_group") claims {a, b} as one group, which is convex
  // without m but needs m between a and b: two groups.
  TempDir dir;
  auto rt = hal::testing::load_config(dir, "[[plugin]]\npath = \"" + fixture("graph") +
                                               "\"\noptions = { partition = \"one_group\" }\ndisabled_ops = [\"mul\"]\n"
                                               "[[plugin]]\npath = \"" + kCpu + "\"\n");
  hal::Graph g;
  auto x = g.input(F32, {4});
  auto a = g.add_op("add", {x, x}, {F32, {4}});
  auto m = g.add_op("mul", {a, a}, {F32, {4}});
  g.mark_output(g.add_op("add", {m, a}, {F32, {4}}));
  hal::CompileOptions o;
  o.devices = {rt->device("fixture_graph:0")};
  o.disk_cache = false;
  hal::CompiledGraph c = hal::compile(g, o);
  CHECK(c.stats().groups == 2);
  CHECK(c.stats().fallback_nodes == 1);
  hal::Buffer in = c.device().allocate(16);
  std::vector<float> xs = {1, 2, 3, 4};
  in.copy_from_host(xs.data(), 16);
  hal::TensorView view(in, F32, {4});
  std::vector<hal::OwnedTensor> out = c.run_allocating({&view});
  std::vector<float> b(4);
  out.at(0).buffer.copy_to_host(b.data(), 16);
  CHECK(b == std::vector<float>{6, 20, 42, 72});
}

TEST_CASE("partition: graph_compilers false runs every node op by op (no group), same results, its own cache key") {
  TempDir dir;
  auto rt = mixed(dir, "");
  auto fx = rt->device("fixture_graph:0");
  hal::CompileOptions o = options(fx, dir);
  hal::CompiledGraph fused = hal::compile(add_mul_matmul(), o);
  CHECK(fused.stats().groups == 1);  // add and mul as one group
  o.graph_compilers = false;
  hal::CompiledGraph plain = hal::compile(add_mul_matmul(), o);
  const hal::CompiledGraphStats& s = plain.stats();
  CHECK(s.cache == hal::CacheSource::kCompiled);  // not the fused entry from memory or disk
  CHECK(s.groups == 0);
  CHECK(s.kernel_count == 0);
  CHECK(s.op_nodes == 3);
  CHECK(s.fallback_nodes == 0);
  CHECK(contains(plain.explain(), "node 0 ('add') op by op"));
  CHECK(run(plain) == on_cpu());
  CHECK(run(fused) == on_cpu());
  // Compiled again with the flag on: the fused entry, from memory.
  o.graph_compilers = true;
  CHECK(hal::compile(add_mul_matmul(), o).stats().cache == hal::CacheSource::kMemory);
}
