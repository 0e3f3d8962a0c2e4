// libFuzzer target: the disk compile cache reading a corrupted or hostile
// entry. Each input becomes the entry file of a fixed graph (compiled for
// cpu:0 and cpu:1 of the CPU plugin, the validation layer on); compile()
// must then either use it or warn and rebuild, and the compiled graph must
// compute what a fresh compile computes. An exception, a wrong result, a
// crash, hang, leak or sanitizer report is a bug.
//
// Input: byte 0's low bit picks what the rest is. Clear: the whole file, as
// on disk. Set: the payload only; the fuzzer writes the header the cache
// expects (magic and the payload's SHA-256), so mutations get past the
// checksum to the CBOR and the placement it describes.
//
// HAL_FUZZ_WRITE_SEEDS=DIR makes the binary write its seed corpus (real
// entries of the graph, both ways, and truncations) to DIR and exit.
// Built only with -DHAL_BUILD_FUZZ=ON and clang; the kept corpus is fuzz/corpus/.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "hal/runtime/compiled_graph.hpp"
#include "hal/runtime/graph.hpp"
#include "runtime/sha256.hpp"
#include "testing/fuzz_util.hpp"

namespace {

namespace fs = std::filesystem;
using hal::testing::fuzz_fail;

constexpr char kMagic[] = "HALCC 1\n";  // compile_cache.hpp's file format
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;

// x, y: [3, 4], w: [4, 2]. p = relu(x + 2 y) * y; o = reshape(p @ w, [6]).
// Several nodes, so a hostile placement can split, merge and move groups.
hal::Graph graph() {
  hal::Graph g;
  auto x = g.input(F32, {3, 4}, "x"), y = g.input(F32, {3, 4}, "y"), w = g.input(F32, {4, 2}, "w");
  auto s = g.add_op("add", {x, y}, {hal::Attr::scalar("alpha", 2.0)});
  auto p = g.add_op("mul", {g.add_op("relu", {s}), y});
  g.mark_output(p, "p");
  g.mark_output(g.add_op("reshape", {g.add_op("matmul", {p, w})}, {hal::Attr::ints("shape", {6})}), "o");
  return g;
}

struct State {
  std::shared_ptr<hal::Runtime> rt;
  hal::Graph g = graph();
  hal::testing::TempDir dir;
  std::string entry;                       // the graph's entry file in dir
  std::vector<std::vector<float>> expect;  // a fresh compile's outputs
};

hal::CompileOptions options(State& s) {
  hal::CompileOptions o;
  o.devices = {s.rt->device("cpu:0"), s.rt->device("cpu:1")};
  o.use_fallback = false;
  o.cache_dir = s.dir.path();
  o.memory_cache = false;  // every input is read from disk
  return o;
}

std::vector<std::vector<float>> run(const hal::CompiledGraph& c) {
  hal::Device& d = c.device();
  std::vector<float> x(12), y(12), w(8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 5, y[i] = 0.5f * static_cast<float>(i % 5) - 1;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 3) - 1;
  std::vector<hal::Buffer> buffers;
  std::vector<hal::TensorView> views;
  views.reserve(3);
  for (auto [v, shape] : {std::pair{&x, std::vector<int64_t>{3, 4}}, {&y, {3, 4}}, {&w, {4, 2}}}) {
    buffers.push_back(d.allocate(v->size() * 4));
    buffers.back().copy_from_host(v->data(), v->size() * 4);
    views.emplace_back(buffers.back(), F32, shape);
  }
  std::vector<hal::OwnedTensor> out = c.run_allocating({&views[0], &views[1], &views[2]});
  std::vector<std::vector<float>> got;
  for (const hal::OwnedTensor& t : out) {
    got.emplace_back(t.buffer.size() / 4);
    t.buffer.copy_to_host(got.back().data(), t.buffer.size());
  }
  return got;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

State& state() {
  static State* s = [] {
    auto* st = new State;  // never destroyed: the plugin may be gone by exit
    st->rt = hal::testing::fuzz_cpu_runtime("\"validation\"", 2);
    st->expect = run(hal::compile(st->g, options(*st)));  // writes the entry
    for (const auto& e : fs::directory_iterator(st->dir.path())) st->entry = e.path().string();
    if (st->entry.empty()) fuzz_fail("compile wrote no cache entry");
    return st;
  }();
  return *s;
}

// The seed corpus: the real entry as a file and as a payload, each whole
// and truncated, and payloads whose placement is hostile but well formed.
void write_seeds(const std::string& to) {
  const std::string file = read(state().entry);
  const std::string payload = file.substr(std::strlen(kMagic) + 65);
  fs::create_directories(to);
  write(to + "/entry", '\0' + file);
  write(to + "/entry_truncated", '\0' + file.substr(0, file.size() / 2));
  write(to + "/payload", '\1' + payload);
  write(to + "/payload_truncated", '\1' + payload.substr(0, payload.size() * 2 / 3));
  // Nodes: 0 add, 1 relu, 2 mul, 3 matmul, 4 reshape; devices 0 and 1.
  auto hostile = [&](const std::string& name, auto&& change) {
    nlohmann::json j = nlohmann::json::from_cbor(payload);
    change(j["placement"]);
    const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(j);
    write(to + "/" + name, '\1' + std::string(cbor.begin(), cbor.end()));
  };
  hostile("group_across_devices", [](nlohmann::json& p) { p["device"] = {0, 1, 0, 1, 0}, p["group"] = {1, 1, 1, 1, 1}; });
  hostile("group_not_convex", [](nlohmann::json& p) { p["group"] = {1, 0, 1, 0, 0}; });
  hostile("groups_in_a_cycle", [](nlohmann::json& p) { p["group"] = {1, 2, 1, 2, 0}; });
  hostile("fallback_without_fallback_device", [](nlohmann::json& p) { p["fallback"] = {true, false, true, false, true}; });
  hostile("op_by_op_on_device_1", [](nlohmann::json& p) { p["device"] = {1, 1, 0, 1, 1}, p["group"] = {0, 0, 0, 0, 0}; });
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::cerr.rdbuf(nullptr);  // the cache's warning per input (sanitizers write to fd 2 directly)
  if (const char* to = std::getenv("HAL_FUZZ_WRITE_SEEDS")) {
    write_seeds(to);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  State& s = state();
  std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) rest = kMagic + hal::detail::sha256_hex(rest.data(), rest.size()) + "\n" + rest;
  write(s.entry, rest);
  try {
    hal::CompiledGraph c = hal::compile(s.g, options(s));
    if (run(c) != s.expect) fuzz_fail("the graph compiled from the cache entry computes other results");
  } catch (const hal::Error& e) {
    fuzz_fail(std::string("compile or run threw for a cache entry instead of rebuilding it: ") + e.what());
  }
  fs::remove(s.entry);
  return 0;
}
