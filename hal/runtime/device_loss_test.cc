// Device loss and host-wait timeouts. Device loss: a plugin's DEVICE_LOST marks the device lost (Device::state,
// hal-info), the core refuses new work on it naming the failover device, and
// the other devices go on. Devices are lost through the faults layer scoped
// to one plugin, or by the fixture whose devices are lost from the start.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "hal/runtime/compiled_graph.hpp"
#include "hal/runtime/runtime.hpp"
#include "testing/test_util.hpp"

namespace {

using hal::testing::error_of;
using hal::testing::fixture;
using hal::testing::TempDir;

const std::string kCpu = HAL_TEST_CPU_PLUGIN;

// The CPU plugin and its twin (another plugin, the same kernels); the
// twin's devices are lost at its NTH launch.
std::shared_ptr<hal::Runtime> cpu_and_twin(const TempDir& dir, int nth, const std::string& failover = "cpu") {
  return hal::testing::load_config(
      dir, "discover = false\n" + (failover.empty() ? "" : "failover = \"" + failover + "\"\n") +
               "default_device = \"fixture_cpu_twin\"\nlayers = [\"faults\"]\n"
               "[layer_options.faults]\nspec = \"device_lost:nth=" + std::to_string(nth) +
               ";plugin=fixture_cpu_twin\"\n"
               "[[plugin]]\npath = \"" + fixture("cpu_twin") + "\"\n[[plugin]]\npath = \"" + kCpu + "\"\n");
}

void add(const std::shared_ptr<hal::Device>& d, hal::Buffer& a, hal::Buffer& b, hal::Buffer& out, int64_t n) {
  hal::TensorView va(a, HAL_DTYPE_FLOAT32, {n}), vb(b, HAL_DTYPE_FLOAT32, {n}), vo(out, HAL_DTYPE_FLOAT32, {n});
  hal::OpRunner(d, "add").launch({&va, &vb}, {&vo}, {});
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("device loss: a lost device is marked, refuses new work naming the failover device - the others go on") {
  TempDir dir;
  auto rt = cpu_and_twin(dir, 2);
  auto twin = rt->device("fixture_cpu_twin");
  auto cpu = rt->device("cpu");
  CHECK(twin->state() == hal::DeviceState::kOk);
  CHECK(twin->failover_device() == cpu);
  CHECK(cpu->failover_device() == nullptr);  // the failover device has none of its own
  std::vector<float> x = {1, 2, 3, 4}, y(4, -1.0f);
  hal::Buffer a = twin->allocate(16), b = twin->allocate(16), o = twin->allocate(16);
  a.copy_from_host(x.data(), 16);
  b.copy_from_host(x.data(), 16);
  add(twin, a, b, o, 4);
  auto e = error_of([&] { add(twin, a, b, o, 4); });  // the second launch loses the device
  CHECK(e.code() == HAL_STATUS_DEVICE_LOST);
  CHECK(twin->state() == hal::DeviceState::kLost);
  CHECK(contains(twin->lost_reason(), "device_lost:nth=2"));
  // New work is refused by the core (no plugin call), naming the device and where to go.
  for (auto refused : {error_of([&] { twin->allocate(64); }), error_of([&] { add(twin, a, b, o, 4); }),
                       error_of([&] { o.copy_to_host(y.data(), 16); }), error_of([&] { twin->create_stream(); })}) {
    CHECK(refused.code() == HAL_STATUS_DEVICE_LOST);
    CHECK(contains(refused.what(), "device fixture_cpu_twin:0 was lost ("));
    CHECK(contains(refused.what(), "move work to the failover device cpu:0"));
  }
  CHECK(y == std::vector<float>(4, -1.0f));  // the refused copy wrote nothing
  // The failover device works; what the lost one held is released without error.
  hal::Buffer ca = cpu->allocate(16), cb = cpu->allocate(16), co = cpu->allocate(16);
  ca.copy_from_host(x.data(), 16);
  cb.copy_from_host(x.data(), 16);
  add(cpu, ca, cb, co, 4);
  co.copy_to_host(y.data(), 16);
  CHECK(y == std::vector<float>{2, 4, 6, 8});
  a.free();
  b.free();
  o.free();
  CHECK(twin->allocator().stats().allocated_bytes == 0);
}

TEST_CASE("device loss: without failover the error says none is configured - compile refuses a lost device") {
  TempDir dir;
  auto rt = cpu_and_twin(dir, 1, "");
  auto twin = rt->device("fixture_cpu_twin");
  CHECK(twin->failover_device() == nullptr);
  hal::Buffer a = twin->allocate(16), b = twin->allocate(16), o = twin->allocate(16);
  CHECK(error_of([&] { add(twin, a, b, o, 4); }).code() == HAL_STATUS_DEVICE_LOST);
  auto e = error_of([&] { twin->allocate(16); });
  CHECK(contains(e.what(), "no failover device is configured (hal.toml: failover = \"cpu\")"));
  hal::Graph g;
  g.mark_output(g.add_op("relu", {g.input(HAL_DTYPE_FLOAT32, {4})}));
  e = error_of([&] { hal::compile(*twin, g); });
  CHECK(e.code() == HAL_STATUS_DEVICE_LOST);
  CHECK(contains(e.what(), "compile refused"));
}

TEST_CASE("device loss: compile leaves a lost device other than the home one out - lost_devices names it") {
  TempDir dir;
  auto rt = cpu_and_twin(dir, 1);
  auto twin = rt->device("fixture_cpu_twin");
  auto cpu = rt->device("cpu");
  hal::Graph g;
  g.mark_output(g.add_op("relu", {g.input(HAL_DTYPE_FLOAT32, {4})}));
  hal::CompileOptions o;
  o.devices = {twin, cpu};
  o.disk_cache = false;
  o.memory_cache = false;
  // The twin is home here: lost, nothing compiles.
  hal::CompiledGraph on_twin = hal::compile(g, o);
  CHECK(on_twin.lost_devices().empty());
  std::vector<float> x = {-1, 2, -3, 4}, y(4, 0.0f);
  hal::Buffer in = twin->allocate(16), out = twin->allocate(16);
  in.copy_from_host(x.data(), 16);
  hal::TensorView vi(in, HAL_DTYPE_FLOAT32, {4}), vo(out, HAL_DTYPE_FLOAT32, {4});
  CHECK(error_of([&] { on_twin.run({&vi}, {&vo}); }).code() == HAL_STATUS_DEVICE_LOST);
  REQUIRE(on_twin.lost_devices().size() == 1);
  CHECK(on_twin.lost_devices()[0] == twin);
  CHECK(error_of([&] { hal::compile(g, o); }).code() == HAL_STATUS_DEVICE_LOST);
  // CPU home, the lost twin listed (and as fallback): left out, the CPU claims the relu.
  o.devices = {cpu, twin};
  o.fallback = twin;
  hal::CompiledGraph on_cpu = hal::compile(g, o);
  REQUIRE(on_cpu.stats().devices.size() == 1);
  CHECK(on_cpu.stats().devices[0].device == "cpu:0");
  CHECK(on_cpu.lost_devices().empty());
  hal::Buffer ci = cpu->allocate(16), co = cpu->allocate(16);
  ci.copy_from_host(x.data(), 16);
  hal::TensorView cvi(ci, HAL_DTYPE_FLOAT32, {4}), cvo(co, HAL_DTYPE_FLOAT32, {4});
  on_cpu.run({&cvi}, {&cvo});
  co.copy_to_host(y.data(), 16);
  CHECK(y == std::vector<float>{0, 2, 0, 4});
}

TEST_CASE("device loss: a device lost before start is listed lost - hal-info shows it, work is refused") {
  TempDir dir;
  auto rt = hal::testing::load_config(dir, "discover = false\nfailover = \"cpu\"\n[[plugin]]\npath = \"" +
                                               fixture("lost_device") + "\"\n[[plugin]]\npath = \"" + kCpu + "\"\n");
  REQUIRE(rt->skipped().empty());
  auto lost = rt->device("fixture_lost_device");
  CHECK(lost->state() == hal::DeviceState::kLost);
  CHECK(contains(lost->lost_reason(), "the device fell off the bus"));
  auto e = error_of([&] { lost->allocate(64); });
  CHECK(e.code() == HAL_STATUS_DEVICE_LOST);
  CHECK(contains(e.what(), "move work to the failover device cpu:0"));

  const std::string info = std::string(HAL_TEST_HAL_INFO) + " --config " + (dir / "hal.toml") + " 2>/dev/null";
  auto text = hal::testing::run_command(info);
  CHECK(contains(text.output, "fixture_lost_device:0"));
  CHECK(contains(text.output, "state: LOST ("));
  CHECK(contains(text.output, "failover: cpu:0"));
  auto json = hal::testing::run_command(info + " --json");
  REQUIRE(json.exit_code == 0);
  const auto j = nlohmann::json::parse(json.output);
  std::map<std::string, std::string> state;
  for (const auto& d : j["devices"]) state[d["id"]] = d["state"];
  CHECK(state["fixture_lost_device:0"] == "lost");
  CHECK(state["cpu:0"] == "ok");
}

TEST_CASE("device loss: bad failover value is a clear error naming it, and the runtime still starts") {
  TempDir dir;
  auto rt = hal::testing::load_config(dir, "discover = false\nfailover = \"npu:3\"\n[[plugin]]\npath = \"" + kCpu + "\"\n");
  auto e = error_of([&] { rt->failover_device(); });
  CHECK(e.code() == HAL_STATUS_NOT_FOUND);
  CHECK(contains(e.what(), "no device 'npu:3' (devices: cpu:0)"));
  CHECK(rt->default_device()->failover_device() == nullptr);
  auto bad = error_of([&] { hal::Config::parse("failover = 3\n", "t.toml"); });
  CHECK(contains(bad.what(), "t.toml:1:"));
  bad = error_of([&] { hal::Config::parse("wait_timeout_ms = -5\n", "t.toml"); });
  CHECK(contains(bad.what(), "'wait_timeout_ms' is -5"));
}

TEST_CASE("host waits: a stream or event wait past hal.toml wait_timeout_ms fails with TIMEOUT - later waits work") {
  TempDir dir;
  auto rt = hal::testing::load_config(dir, "discover = false\nwait_timeout_ms = 200\n[[plugin]]\npath = \"" + kCpu + "\"\n");
  auto d = rt->default_device();
  CHECK(d->wait_timeout_ms() == 200);
  hal::Stream s = d->create_stream();
  hal::Event e = d->create_event();
  // A host function that holds the stream for 1.5 s, as a hung kernel would.
  s.enqueue_host_func([](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(1500)); }, nullptr);
  e.record(s);
  const auto t0 = std::chrono::steady_clock::now();
  auto err = error_of([&] { s.synchronize(); });
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(err.code() == HAL_STATUS_TIMEOUT);
  CHECK(contains(err.what(), "cpu:0: stream_synchronize did not finish within 200 ms (hal.toml wait_timeout_ms"));
  CHECK(took >= std::chrono::milliseconds(200));
  CHECK(took < std::chrono::milliseconds(1400));
  err = error_of([&] { e.synchronize(); });
  CHECK(err.code() == HAL_STATUS_TIMEOUT);
  CHECK(contains(err.what(), "event_synchronize did not finish within 200 ms"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  s.synchronize();  // the work ended: the wait returns
  e.synchronize();
  CHECK(hal::Config::parse("", "t.toml").wait_timeout_ms == 600000);  // the default: 10 minutes
}
