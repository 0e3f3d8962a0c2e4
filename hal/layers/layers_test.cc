// Layers (hal/layer.h) through the runtime on the CPU plugin: the built-in
// validation, trace and faults layers, a layer .so, and the bad inputs.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "hal/runtime/runtime.hpp"
#include "testing/test_util.hpp"

namespace {

using hal::testing::error_of;
using hal::testing::message_of;
using hal::testing::TempDir;

const std::string kCpu = HAL_TEST_CPU_PLUGIN;

// A runtime over the CPU plugin (DEVICES devices) with LAYERS and EXTRA
// config lines (e.g. [layer_options.trace]).
std::shared_ptr<hal::Runtime> with_layers(const TempDir& dir, const std::string& layers,
                                          const std::string& extra = "", int devices = 1) {
  return hal::testing::load_config(dir, "discover = false\nlayers = [" + layers + "]\n" + extra +
                                            "\n[[plugin]]\npath = \"" + kCpu + "\"\noptions = { device_count = " +
                                            std::to_string(devices) + " }\n");
}


std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// out = a + b over N floats on DEVICE (optionally on STREAM).
void add(const std::shared_ptr<hal::Device>& d, hal::Buffer& a, hal::Buffer& b, hal::Buffer& out, int64_t n,
         const hal::Stream* stream = nullptr) {
  hal::TensorView va(a, HAL_DTYPE_FLOAT32, {n}), vb(b, HAL_DTYPE_FLOAT32, {n}), vo(out, HAL_DTYPE_FLOAT32, {n});
  hal::OpRunner(d, "add").launch({&va, &vb}, {&vo}, {}, stream);
}

}  // namespace

TEST_CASE("layers: none configured leaves the plugin's tables alone - hal-info's list is empty") {
  auto rt = hal::testing::load_only({kCpu});
  CHECK(rt->layers().empty());
}

TEST_CASE("layers: many runtimes alive at once share the layers and their slots") {
  TempDir dir;
  std::vector<std::shared_ptr<hal::Runtime>> alive;
  for (int i = 0; i < 40; ++i) alive.push_back(with_layers(dir, "\"validation\""));
  for (const auto& rt : alive) {
    REQUIRE(rt->devices().size() == 1);
    hal::Buffer b = rt->default_device()->allocate(64);  // through the layer
    CHECK(b.size() == 64);
  }
  // A buffer of one runtime freed twice through another's table: one validation state.
  const auto& mem = alive[7]->plugins()[0]->memory_api();
  hal_buffer_t* raw = nullptr;
  REQUIRE(alive[3]->plugins()[0]->memory_api().buffer_allocate(alive[3]->default_device()->handle(), 8, 0, &raw) ==
          nullptr);
  CHECK(message_of(mem.buffer_free(raw)).empty());
  CHECK(message_of(mem.buffer_free(raw)).find("(rule live-handle)") != std::string::npos);
}

TEST_CASE("layers: trace writes every call with its status and duration as Chrome trace JSON") {
  TempDir dir;
  const std::string path = dir / "trace.json";
  {
    auto rt = with_layers(dir, "\"trace\"", "[layer_options.trace]\npath = \"" + path + "\"");
    REQUIRE(rt->layers().size() == 1);
    CHECK(rt->layers()[0].name == "trace");
    CHECK(rt->layers()[0].path == "built-in");
    auto d = rt->default_device();
    std::vector<float> x = {1, 2, 3, 4};
    hal::Buffer a = d->allocate(16), b = d->allocate(16), o = d->allocate(16);
    a.copy_from_host(x.data(), 16);
    b.copy_from_host(x.data(), 16);
    add(d, a, b, o, 4);
    std::vector<float> y(4);
    o.copy_to_host(y.data(), 16);
    CHECK(y == std::vector<float>{2, 4, 6, 8});
    // More calls than one batch of records (65,536): the writer thread writes
    // full batches while calls go on; the rest is written at the end.
    const auto& mem = rt->plugins()[0]->memory_api();
    for (int i = 0; i < 33000; ++i) {
      hal_buffer_t* buf = nullptr;
      REQUIRE(mem.buffer_allocate(d->handle(), 64 + i % 7, 0, &buf) == nullptr);
      REQUIRE(mem.buffer_free(buf) == nullptr);
    }
  }
  auto trace = nlohmann::json::parse(read(path));  // closed when the runtime went away
  REQUIRE(trace["traceEvents"].is_array());
  int launches = 0, allocations = 0, copies = 0, frees = 0, allocations_of_65 = 0;
  double last_ts = 0;
  for (const auto& e : trace["traceEvents"]) {
    CHECK(e["ph"] == "X");
    CHECK(e["cat"] == "hal");
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(e["ts"].get<double>() >= last_ts);  // one thread: records in call order
    last_ts = e["ts"].get<double>();
    CHECK(e["pid"].is_number_integer());
    CHECK(e["tid"].is_number_integer());
    CHECK(e["args"]["plugin"] == "cpu");
    CHECK(e["args"]["status"] == "OK");
    if (e["name"] == "op_launch add") {
      ++launches;
      CHECK(e["args"]["op"] == "add");
      CHECK(e["args"]["inputs"] == 2);
      CHECK(e["args"]["stream"].get<std::string>().rfind("0x", 0) == 0);
    }
    if (e["name"] == "copy_host_to_device" || e["name"] == "copy_device_to_host") {
      ++copies;
      CHECK(e["args"]["bytes"] == 16);
    }
    if (e["name"] == "buffer_allocate") {
      ++allocations;
      if (e["args"]["bytes"] == 65) ++allocations_of_65;
      CHECK(e["args"]["buffer"].get<std::string>() != "0x0");
    }
    if (e["name"] == "buffer_free") ++frees;
  }
  CHECK(launches == 1);
  CHECK(copies == 3);
  CHECK(allocations > 33000);
  CHECK(frees >= 33000);
  CHECK(allocations_of_65 == 4715);  // i % 7 == 1 for i < 33000
}

TEST_CASE("layers: validation names the rule for misuse the plugin would not catch") {
  TempDir dir;
  auto rt = with_layers(dir, "\"validation\"", "", 2);
  auto d0 = rt->device("cpu:0"), d1 = rt->device("cpu:1");
  const auto& mem = rt->plugins()[0]->memory_api();
  const auto& streams = rt->plugins()[0]->stream_api();
  uint32_t code = 0;

  SUBCASE("double free") {
    hal_buffer_t* b = nullptr;
    REQUIRE(mem.buffer_allocate(d0->handle(), 64, 0, &b) == nullptr);
    CHECK(message_of(mem.buffer_free(b)).empty());
    const std::string m = message_of(mem.buffer_free(b), &code);
    CHECK(code == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(m.find("layer validation: cpu: buffer_free") == 0);
    CHECK(m.find("(rule live-handle)") != std::string::npos);
  }
  SUBCASE("a buffer freed while a stream still uses it (stream order)") {
    hal_buffer_t* b = nullptr;
    hal_stream_t* s = nullptr;
    REQUIRE(mem.buffer_allocate(d0->handle(), 1 << 20, 0, &b) == nullptr);
    REQUIRE(streams.stream_create(d0->handle(), 0, &s) == nullptr);
    std::vector<char> host(1 << 20, 1);
    REQUIRE(mem.copy_host_to_device(b, 0, host.data(), host.size(), s) == nullptr);
    const std::string m = message_of(mem.buffer_free(b), &code);
    CHECK(code == HAL_STATUS_FAILED_PRECONDITION);
    CHECK(m.find("is freed while stream") != std::string::npos);
    CHECK(m.find("(rule stream-order)") != std::string::npos);
    // The buffer was not freed: after the stream is synchronised it can be.
    REQUIRE(streams.stream_synchronize(s) == nullptr);
    CHECK(message_of(mem.buffer_free(b)).empty());
    CHECK(message_of(streams.stream_destroy(s)).empty());
  }
  SUBCASE("an event recorded after the work, then synchronised, also orders the free") {
    hal_buffer_t* b = nullptr;
    hal_stream_t* s = nullptr;
    hal_event_t* e = nullptr;
    REQUIRE(mem.buffer_allocate(d0->handle(), 256, 0, &b) == nullptr);
    REQUIRE(streams.stream_create(d0->handle(), 0, &s) == nullptr);
    REQUIRE(streams.event_create(d0->handle(), 0, &e) == nullptr);
    REQUIRE(mem.buffer_fill(b, 0, 256, 7, s) == nullptr);
    REQUIRE(streams.event_record(e, s) == nullptr);
    CHECK(message_of(mem.buffer_free(b)).find("(rule stream-order)") != std::string::npos);
    REQUIRE(streams.event_synchronize(e) == nullptr);
    CHECK(message_of(mem.buffer_free(b)).empty());
    CHECK(message_of(streams.event_destroy(e)).empty());
    CHECK(message_of(streams.stream_destroy(s)).empty());
  }
  SUBCASE("a launch with a buffer of another device, and a view past its buffer") {
    hal::Buffer a = d0->allocate(16), b = d1->allocate(16), o = d0->allocate(16);
    auto e = error_of([&] { add(d0, a, b, o, 4); });
    CHECK(std::string(e.what()).find("belongs to cpu:1, not cpu:0 (rule same-device)") != std::string::npos);
    CHECK(std::string(e.what()).find("add input 1") != std::string::npos);
    hal_buffer_t* small = nullptr;
    REQUIRE(mem.buffer_allocate(d0->handle(), 8, 0, &small) == nullptr);
    hal::TensorView v;
    v.buffer = small;  // buffer_bytes unknown: only the plugin (and validation) can tell
    v.shape = {4};
    hal::TensorView vo(o, HAL_DTYPE_FLOAT32, {4});
    e = error_of([&] { hal::OpRunner(d0, "neg").launch({&v}, {&vo}); });
    CHECK(std::string(e.what()).find("neg input 0: elements reach byte 16") != std::string::npos);
    CHECK(std::string(e.what()).find("(rule extent)") != std::string::npos);
    CHECK(message_of(mem.buffer_free(small)).empty());
  }
  SUBCASE("a destroyed stream and a tensor with a bad struct_size") {
    hal_stream_t* s = nullptr;
    REQUIRE(streams.stream_create(d0->handle(), 0, &s) == nullptr);
    REQUIRE(streams.stream_destroy(s) == nullptr);
    CHECK(message_of(streams.stream_synchronize(s)).find("is not a live stream") != std::string::npos);
    hal::Buffer a = d0->allocate(16), o = d0->allocate(16);
    hal::TensorView va(a, HAL_DTYPE_FLOAT32, {4}), vo(o, HAL_DTYPE_FLOAT32, {4});
    hal::OpRunner neg(d0, "neg");
    neg.launch({&va}, {&vo});  // fine
    const int64_t shape[1] = {4};
    hal_tensor_t tin{0, a.handle(), 0, HAL_DTYPE_FLOAT32, 1, shape, nullptr};  // struct_size 0
    hal_tensor_t tout{sizeof(hal_tensor_t), o.handle(), 0, HAL_DTYPE_FLOAT32, 1, shape, nullptr};
    const hal_tensor_t* ins[1] = {&tin};
    const hal_tensor_t* outs[1] = {&tout};
    hal_op_args_t args{sizeof(args), nullptr, neg.id(), ins, 1, outs, 1, nullptr, 0};
    const std::string m = message_of(rt->plugins()[0]->op_api().op_launch(d0->handle(), &args, nullptr), &code);
    CHECK(code == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(m.find("neg input 0: struct_size 0 is below hal_tensor_t's") != std::string::npos);
    tin.struct_size = sizeof(hal_tensor_t);
    CHECK(message_of(rt->plugins()[0]->op_api().op_launch(d0->handle(), &args, nullptr)).empty());
  }
  // Validation passes correct work through untouched.
  hal::Buffer a = d0->allocate(16), b = d0->allocate(16), o = d0->allocate(16);
  std::vector<float> x = {1, 2, 3, 4}, y(4);
  a.copy_from_host(x.data(), 16);
  b.copy_from_host(x.data(), 16);
  hal::Stream s = d0->create_stream();
  add(d0, a, b, o, 4, &s);
  s.synchronize();
  o.copy_to_host(y.data(), 16);
  CHECK(y == std::vector<float>{2, 4, 6, 8});
}

TEST_CASE("layers: faults fail the chosen calls once each, named, and the runtime goes on") {
  TempDir dir;
  const std::string log = dir / "faults.jsonl";
  auto rt = with_layers(dir, "\"faults\"",
                        "[layer_options.faults]\nspec = \"alloc:nth=2;launch:nth=3\"\nlog = \"" + log + "\"");
  auto d = rt->default_device();
  const auto& mem = rt->plugins()[0]->memory_api();
  hal_buffer_t* raw[3] = {};
  uint32_t code = 0;
  CHECK(message_of(mem.buffer_allocate(d->handle(), 64, 0, &raw[0])).empty());
  const std::string m = message_of(mem.buffer_allocate(d->handle(), 64, 0, &raw[1]), &code);
  CHECK(code == HAL_STATUS_OUT_OF_MEMORY);
  CHECK(raw[1] == nullptr);  // out-parameter untouched
  CHECK(m.find("layer faults: injected fault 'alloc:nth=2'") == 0);
  CHECK(m.find("cpu: buffer_allocate on cpu:0 failed with OUT_OF_MEMORY") != std::string::npos);
  CHECK(message_of(mem.buffer_allocate(d->handle(), 64, 0, &raw[2])).empty());
  CHECK(message_of(mem.buffer_free(raw[0])).empty());
  CHECK(message_of(mem.buffer_free(raw[2])).empty());

  hal::Buffer a = d->allocate(16), b = d->allocate(16), o = d->allocate(16);
  std::vector<float> x = {1, 2, 3, 4}, y(4);
  a.copy_from_host(x.data(), 16);
  b.copy_from_host(x.data(), 16);
  add(d, a, b, o, 4);
  add(d, a, b, o, 4);
  auto e = error_of([&] { add(d, a, b, o, 4); });  // the third launch
  CHECK(e.code() == HAL_STATUS_DEVICE_ERROR);
  CHECK(std::string(e.what()).find("op_launch of add on cpu:0 failed with DEVICE_ERROR") != std::string::npos);
  add(d, a, b, o, 4);  // and the next one works
  o.copy_to_host(y.data(), 16);
  CHECK(y == std::vector<float>{2, 4, 6, 8});
  std::istringstream lines(read(log));
  std::vector<nlohmann::json> injected;
  for (std::string line; std::getline(lines, line);) injected.push_back(nlohmann::json::parse(line));
  REQUIRE(injected.size() == 2);
  CHECK(injected[0]["kind"] == "alloc");
  CHECK(injected[1]["kind"] == "launch");
  CHECK(injected[1]["op"] == "add");
}

TEST_CASE("layers: a fault rate is seeded, so the same seed fails the same calls") {
  auto pattern = [](const std::string& spec) {
    TempDir dir;
    auto rt = with_layers(dir, "\"faults\"", "[layer_options.faults]\nspec = \"" + spec + "\"");
    const auto& mem = rt->plugins()[0]->memory_api();
    std::string failed;
    for (int i = 0; i < 64; ++i) {
      hal_buffer_t* b = nullptr;
      hal_status_t* s = mem.buffer_allocate(rt->default_device()->handle(), 64, 0, &b);
      failed += s != nullptr ? 'x' : '.';
      if (s != nullptr) s->destroy(s);
      if (b != nullptr) REQUIRE(mem.buffer_free(b) == nullptr);
    }
    return failed;
  };
  const std::string a = pattern("alloc:rate=0.3;seed=5");
  CHECK(a == pattern("alloc:rate=0.3;seed=5"));
  CHECK(a != pattern("alloc:rate=0.3;seed=6"));
  CHECK(a.find('x') != std::string::npos);
  CHECK(a.find('.') != std::string::npos);
}

TEST_CASE("layers: hang delays the chosen call, which then runs") {
  TempDir dir;
  auto rt = with_layers(dir, "\"faults\"", "[layer_options.faults]\nspec = \"hang:nth=2,ms=300\"");
  auto d = rt->default_device();
  hal::Buffer a = d->allocate(16), b = d->allocate(16), o = d->allocate(16);
  std::vector<float> x = {1, 2, 3, 4}, y(4);
  a.copy_from_host(x.data(), 16);
  b.copy_from_host(x.data(), 16);
  add(d, a, b, o, 4);
  const auto t0 = std::chrono::steady_clock::now();
  add(d, a, b, o, 4);  // the second launch waits 300 ms
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(300));
  o.copy_to_host(y.data(), 16);
  CHECK(y == std::vector<float>{2, 4, 6, 8});
}

TEST_CASE("layers: a lost device refuses new work - releasing still works") {
  TempDir dir;
  auto rt = with_layers(dir, "\"faults\"", "[layer_options.faults]\nspec = \"device_lost:nth=1\"");
  auto d = rt->default_device();
  hal::Buffer a = d->allocate(16), b = d->allocate(16), o = d->allocate(16);
  auto e = error_of([&] { add(d, a, b, o, 4); });
  CHECK(e.code() == HAL_STATUS_DEVICE_LOST);
  e = error_of([&] { d->allocate(1 << 20); });
  CHECK(e.code() == HAL_STATUS_DEVICE_LOST);
  CHECK(std::string(e.what()).find("device cpu:0 was lost (layer faults: injected fault") != std::string::npos);
  // Releasing still works (the buffers above free without error at scope end).
}

TEST_CASE("layers: a layer .so from the search path runs with its options - outermost first") {
  TempDir dir;
  const std::string counts = dir / "counts.txt";
  {
    auto rt = hal::testing::load_config(
        dir, "discover = false\nsearch_paths = [\"" + std::string(HAL_TEST_FIXTURE_DIR) +
                 "\"]\nlayers = [\"fixture_counting\", \"validation\"]\n[layer_options.fixture_counting]\n"
                 "count_file = \"" + counts + "\"\n[[plugin]]\npath = \"" + kCpu + "\"\n");
    REQUIRE(rt->layers().size() == 2);
    CHECK(rt->layers()[0].name == "fixture_counting");
    CHECK(rt->layers()[0].path.find("libhal_layer_fixture_counting.so") != std::string::npos);
    auto d = rt->default_device();
    hal::Buffer a = d->allocate(16), b = d->allocate(16), o = d->allocate(16);
    add(d, a, b, o, 4);
    add(d, a, b, o, 4);
  }
  const std::string text = read(counts);
  CHECK(text.find("op_launch 2\n") != std::string::npos);
}

TEST_CASE("layers: bad input is a clear error at start naming the layer or the spec") {
  TempDir dir;
  auto start = [&](const std::string& layers, const std::string& extra = "") {
    return error_of([&] {
      hal::testing::load_config(dir, "discover = false\nsearch_paths = [\"" + std::string(HAL_TEST_FIXTURE_DIR) +
                                         "\"]\nlayers = [" + layers + "]\n" + extra + "\n[[plugin]]\npath = \"" +
                                         kCpu + "\"\n");
    });
  };
  auto e = start("\"validaton\"");
  CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(e.what()).find("layer 'validaton' does not exist: not a built-in layer (validation, trace, "
                                   "faults) and no libhal_layer_validaton.so in [") != std::string::npos);
  CHECK(std::string(e.what()).find("hal.toml:3:") != std::string::npos);  // where the list is

  e = start("\"fixture_major2\"");
  CHECK(e.code() == HAL_STATUS_ABI_MISMATCH);
  CHECK(std::string(e.what()).find("is built for HAL ABI 2.") != std::string::npos);
  CHECK(std::string(e.what()).find("MAJOR must match") != std::string::npos);

  e = start("\"faults\"", "[layer_options.faults]\nspec = \"alloc:rate=2\"");
  CHECK(std::string(e.what()).find("option spec = 'alloc:rate=2' does not parse: alloc: rate '2' is not a number "
                                   "in [0, 1]") != std::string::npos);
  e = start("\"faults\"", "[layer_options.faults]\nspec = \"launch:nth=0;explode:rate=1\"");
  CHECK(std::string(e.what()).find("nth '0' is not a count >= 1") != std::string::npos);
  e = start("\"faults\"", "[layer_options.faults]\nspec = \"explode:rate=1\"");
  CHECK(std::string(e.what()).find("unknown fault kind 'explode'") != std::string::npos);
  e = start("\"trace\"", "[layer_options.trace]\npath = \"/nonexistent-dir/t.json\"");
  CHECK(std::string(e.what()).find("cannot write the trace file") != std::string::npos);
  e = start("\"trace\"", "[layer_options.trace]\nfile = \"" + (dir / "t.json") + "\"");
  CHECK(std::string(e.what()).find("unknown option 'file' of layer trace (known: path)") != std::string::npos);
  e = start("\"trace\", \"trace\"", "[layer_options.trace]\npath = \"" + (dir / "t.json") + "\"");
  CHECK(std::string(e.what()).find("layer 'trace' is listed twice") != std::string::npos);
  e = start("\"validation\"", "[layer_options.trace]\npath = \"" + (dir / "t.json") + "\"");
  CHECK(std::string(e.what()).find("[layer_options.trace] names a layer that is not enabled") != std::string::npos);
  e = start("42");
  CHECK(std::string(e.what()).find("'layers[]' must be a string") != std::string::npos);
}

TEST_CASE("layers: a layer that fails a call is named as the layer, not as the plugin") {
  TempDir dir;
  auto rt = hal::testing::load_config(dir, "discover = false\nsearch_paths = [\"" +
                                               std::string(HAL_TEST_FIXTURE_DIR) +
                                               "\"]\nlayers = [\"trace\", \"fixture_failing\"]\n"
                                               "[layer_options.trace]\npath = \"" + (dir / "t.json") +
                                               "\"\n[[plugin]]\npath = \"" + kCpu + "\"\n");
  auto d = rt->default_device();
  hal::Buffer a = d->allocate(16), b = d->allocate(16), o = d->allocate(16);
  auto e = error_of([&] { add(d, a, b, o, 4); });
  CHECK(e.code() == HAL_STATUS_INTERNAL);
  CHECK(std::string(e.what()).find("layer fixture_failing: the fixture layer refuses every launch") !=
        std::string::npos);
}
