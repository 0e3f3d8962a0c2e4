// libhal's promotion for uniform kernels (hal/runtime/op.hpp): a mixed call
// to an op that takes one dtype is cast by the core, on the device through
// its copy op or through the fallback device, gives what a promoting kernel
// gives, is counted in op_stats(), and fails cleanly when it cannot cast.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "hal/runtime/op_stats.hpp"
#include "hal/runtime/runtime.hpp"
#include "testing/test_util.hpp"

using hal::testing::load_only;
using hal::testing::TempDir;
using hal::testing::write_file;

namespace {

const std::string kCpu = HAL_TEST_CPU_PLUGIN;
const std::string kAcme = HAL_TEST_ACME_PLUGIN;  // the vendor guide's worked example: uniform float32 add/mul/relu/mm

// The CPU plugin with every op uniform (option input_mode), alone.
std::shared_ptr<hal::Runtime> uniform_cpu(const TempDir& dir, uint32_t host_abi_minor = HAL_ABI_VERSION_MINOR) {
  write_file(dir / "hal.toml", "discover = false\n[[plugin]]\npath = \"" + kCpu +
                                   "\"\noptions = { input_mode = \"uniform\" }\n");
  hal::RuntimeOptions o;
  o.config_path = dir / "hal.toml";
  o.use_environment = false;
  o.use_install_dir = false;
  o.host_abi_minor = host_abi_minor;
  return hal::Runtime::create(o);
}

struct Tensor {
  hal::Buffer buffer;
  hal::TensorView view;
};

template <class T>
Tensor upload(const std::shared_ptr<hal::Device>& d, hal_dtype_e dt, std::vector<int64_t> shape,
              const std::vector<T>& values) {
  size_t bytes = std::max<size_t>(values.size() * sizeof(T), 1);
  Tensor t{d->allocate(bytes), {}};
  if (!values.empty()) t.buffer.copy_from_host(values.data(), values.size() * sizeof(T));
  t.view = hal::TensorView(t.buffer, dt, std::move(shape));
  return t;
}

Tensor empty_f32(const std::shared_ptr<hal::Device>& d, std::vector<int64_t> shape, float fill = -7.f) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return upload<float>(d, HAL_DTYPE_FLOAT32, std::move(shape), std::vector<float>(static_cast<size_t>(n), fill));
}

std::vector<float> read_f32(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.view.numel()));
  t.buffer.copy_to_host(v.data(), v.size() * sizeof(float));
  return v;
}

uint16_t f16(float f) {  // exact for the small integers used here
  uint32_t b;
  std::memcpy(&b, &f, 4);
  uint32_t e = ((b >> 23) & 0xff) - 127 + 15, m = (b >> 13) & 0x3ff;
  return static_cast<uint16_t>(((b >> 16) & 0x8000) | (f == 0 ? 0 : (e << 10) | m));
}
uint16_t bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);
}

hal::OpStat stat_of(const std::string& device, const std::string& op) {
  for (const hal::OpStat& s : hal::op_stats())
    if (s.device == device && s.op == op) return s;
  return {};
}

// The three mixed calls of the issue on DEVICE: add(int32, float32),
// add(float32, 0-d float64) and mul(float16, bfloat16) -> float32.
std::vector<std::vector<float>> mixed_calls(const std::shared_ptr<hal::Device>& d, const hal::Stream* stream) {
  std::vector<std::vector<float>> out;
  hal::OpRunner add(d, "add"), mul(d, "mul");
  {
    auto a = upload<int32_t>(d, HAL_DTYPE_INT32, {2, 3}, {1, -2, 3, 4, 5, -6});
    auto b = upload<float>(d, HAL_DTYPE_FLOAT32, {3}, {0.5f, 0.25f, -1.5f});  // broadcast
    auto o = empty_f32(d, {2, 3});
    add.launch({&a.view, &b.view}, {&o.view}, {hal::Attr::f("alpha", 2.0)}, stream);
    if (stream) stream->synchronize();
    out.push_back(read_f32(o));
  }
  {
    auto a = upload<float>(d, HAL_DTYPE_FLOAT32, {4}, {1.f, 2.f, 3.f, 4.f});
    auto s = upload<double>(d, HAL_DTYPE_FLOAT64, {}, {0.125});
    auto o = empty_f32(d, {4});
    add.launch({&a.view, &s.view}, {&o.view}, {}, stream);
    if (stream) stream->synchronize();
    out.push_back(read_f32(o));
  }
  {
    auto a = upload<uint16_t>(d, HAL_DTYPE_FLOAT16, {2, 2}, {f16(1.5f), f16(-2.f), f16(3.f), f16(0.5f)});
    auto b = upload<uint16_t>(d, HAL_DTYPE_BFLOAT16, {2, 2}, {bf16(2.f), bf16(4.f), bf16(-1.f), bf16(8.f)});
    auto o = empty_f32(d, {2, 2});  // float16 x bfloat16 computes in float32
    mul.launch({&a.view, &b.view}, {&o.view}, {}, stream);
    if (stream) stream->synchronize();
    out.push_back(read_f32(o));
  }
  return out;
}

const std::vector<std::vector<float>> kExpected = {
    {2.f, -1.5f, 0.f, 5.f, 5.5f, -9.f}, {1.125f, 2.125f, 3.125f, 4.125f}, {3.f, -8.f, -3.f, 4.f}};

}  // namespace

TEST_CASE("promotion: the CPU plugin's own mixed kernels run mixed calls without casts") {
  auto rt = load_only({kCpu});
  auto d = rt->device("cpu");
  hal::OpRunner add(d, "add");
  CHECK(add.input_mode() == hal::InputMode::kMixed);
  hal::reset_op_stats();
  CHECK(mixed_calls(d, nullptr) == kExpected);
  CHECK(hal::op_stats().empty());
}

TEST_CASE("promotion: a uniform plugin's copy op casts on the device, stream-ordered, counted") {
  TempDir dir;
  auto rt = uniform_cpu(dir);
  auto d = rt->device("cpu");
  CHECK(hal::OpRunner(d, "add").input_mode() == hal::InputMode::kUniform);
  CHECK(d->fallback_device() == nullptr);  // it is the fallback itself: casts must use its copy op
  hal::Stream stream = d->create_stream();
  hal::reset_op_stats();
  CHECK(mixed_calls(d, &stream) == kExpected);
  CHECK(mixed_calls(d, nullptr) == kExpected);
  hal::OpStat add = stat_of("cpu:0", "add"), mul = stat_of("cpu:0", "mul");
  CHECK(add.casts == 4);  // int32 -> float32 and float64 -> float32, twice
  CHECK(mul.casts == 4);  // float16 and bfloat16 -> float32, twice
  CHECK(add.fallback_casts == 0);
  CHECK(add.cast_bytes == 2 * (6 * 4 + 1 * 4));
}

TEST_CASE("promotion: a direct launch (Promotion::kNone) gets the plugin's MIXED_DTYPES decline") {
  TempDir dir;
  auto rt = uniform_cpu(dir);
  auto d = rt->device("cpu");
  hal::OpRunner add(d, "add", hal::Promotion::kNone);
  auto a = upload<int32_t>(d, HAL_DTYPE_INT32, {2}, {1, 2});
  auto b = upload<float>(d, HAL_DTYPE_FLOAT32, {2}, {1.f, 2.f});
  auto o = empty_f32(d, {2});
  CHECK_FALSE(add.would_cast({&a.view, &b.view}));
  CHECK(hal::OpRunner(d, "add").would_cast({&a.view, &b.view}));
  try {
    add.launch({&a.view, &b.view}, {&o.view});
    FAIL("a mixed call to a uniform op launched as given must be declined");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_MIXED_DTYPES);
    CHECK(std::string(e.what()).find("input 'self' is int32 but the call computes in float32") != std::string::npos);
  }
  CHECK(read_f32(o) == std::vector<float>{-7.f, -7.f});
  auto why = add.check({&a.view, &b.view}, {&o.view});
  REQUIRE(why != nullptr);
  CHECK(why->code() == HAL_STATUS_MIXED_DTYPES);
}

TEST_CASE("promotion: the guide's uniform plugin casts through the fallback device, same values as the CPU plugin") {
  auto rt = load_only({kAcme, kCpu});
  auto d = rt->device("acme");
  REQUIRE(d->fallback_device() == rt->device("cpu"));
  hal::OpRunner add(d, "add");
  CHECK(add.input_mode() == hal::InputMode::kUniform);
  hal::reset_op_stats();
  auto on_acme = mixed_calls(d, nullptr);
  auto on_cpu = mixed_calls(rt->device("cpu"), nullptr);
  CHECK(on_acme == on_cpu);
  CHECK(on_acme == kExpected);
  hal::OpStat s = stat_of("acme:0", "add");
  CHECK(s.fallback_casts == 2);
  CHECK(s.casts == 0);
  CHECK(stat_of("acme:0", "mul").fallback_casts == 2);
  CHECK(stat_of("cpu:0", "add").fallback_casts + stat_of("cpu:0", "add").casts == 0);  // mixed kernels: no casts

  // A strided, offset input is cast as what it views.
  auto base = upload<int32_t>(d, HAL_DTYPE_INT32, {8}, {9, 1, 9, 2, 9, 3, 9, 4});
  hal::TensorView strided(base.buffer, HAL_DTYPE_INT32, {2, 2}, {4, 2}, 4);  // 1, 2, 3, 4
  auto b = upload<float>(d, HAL_DTYPE_FLOAT32, {2, 2}, {10.f, 20.f, 30.f, 40.f});
  auto o = empty_f32(d, {2, 2});
  add.launch({&strided, &b.view}, {&o.view});
  CHECK(read_f32(o) == std::vector<float>{11.f, 22.f, 33.f, 44.f});
}

TEST_CASE("promotion: no way to cast is an error naming op, dtypes and plugin - the output is untouched") {
  auto rt = load_only({kAcme});  // no cpu plugin: no fallback device, and acme has no copy op
  auto d = rt->device("acme");
  REQUIRE(d->fallback_device() == nullptr);
  hal::OpRunner add(d, "add");
  auto a = upload<int32_t>(d, HAL_DTYPE_INT32, {2}, {1, 2});
  auto b = upload<float>(d, HAL_DTYPE_FLOAT32, {2}, {1.f, 2.f});
  auto o = empty_f32(d, {2});
  try {
    add.launch({&a.view, &b.view}, {&o.view});
    FAIL("expected an error");
  } catch (const hal::Error& e) {
    std::string m = e.what();
    CHECK(e.code() == HAL_STATUS_UNSUPPORTED_DTYPE);
    CHECK(m.find("acme: add") != std::string::npos);
    CHECK(m.find("input 'self' (int32") != std::string::npos);
    CHECK(m.find("float32") != std::string::npos);
    CHECK(m.find("no fallback device") != std::string::npos);
  }
  CHECK(read_f32(o) == std::vector<float>{-7.f, -7.f});
  // Same-dtype calls still run.
  auto c = upload<float>(d, HAL_DTYPE_FLOAT32, {2}, {3.f, 4.f});
  add.launch({&c.view, &b.view}, {&o.view});
  CHECK(read_f32(o) == std::vector<float>{4.f, 6.f});
}

TEST_CASE("promotion: a wrong call reports its own error before anything is cast") {
  auto rt = load_only({kAcme, kCpu});
  auto d = rt->device("acme");
  hal::OpRunner add(d, "add");
  auto a = upload<int32_t>(d, HAL_DTYPE_INT32, {3}, {1, 2, 3});
  auto b = upload<float>(d, HAL_DTYPE_FLOAT32, {3}, {1.f, 2.f, 3.f});
  auto o = empty_f32(d, {4});  // wrong output shape
  hal::reset_op_stats();
  try {
    add.launch({&a.view, &b.view}, {&o.view});
    FAIL("expected an error");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("output 'out' has shape [4] but must be [3]") != std::string::npos);
  }
  CHECK(hal::op_stats().empty());
  CHECK(read_f32(o) == std::vector<float>(4, -7.f));

  // The cast reads the input view itself: malformed strides are refused, not read past.
  hal::TensorView bad(a.buffer, HAL_DTYPE_INT32, {3}, {-1});
  auto o3 = empty_f32(d, {3});
  try {
    add.launch({&bad, &b.view}, {&o3.view});
    FAIL("expected an error");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(e.what()).find("acme: add: input 'self' has strides [-1] for shape [3]") != std::string::npos);
  }
  CHECK(hal::op_stats().empty());
  CHECK(read_f32(o3) == std::vector<float>(3, -7.f));
}

TEST_CASE("promotion: a cast that does not fit in device memory is OUT_OF_MEMORY naming sizes - output untouched") {
  auto rt = load_only({kAcme, kCpu});
  auto d = rt->device("acme");  // 1 GiB of device memory
  hal::OpRunner add(d, "add");
  const int64_t n = int64_t{16} << 20;  // 64 MiB per int32/float32 tensor
  hal::Buffer filler = d->allocate(uint64_t{880} << 20);
  Tensor a{d->allocate(n * 4), {}};
  a.buffer.fill(0, n * 4);
  a.view = hal::TensorView(a.buffer, HAL_DTYPE_INT32, {n});
  auto b = upload<float>(d, HAL_DTYPE_FLOAT32, {1}, {1.f});
  Tensor o{d->allocate(n * 4), {}};
  o.buffer.fill(0xA7, n * 4);
  o.view = hal::TensorView(o.buffer, HAL_DTYPE_FLOAT32, {n});
  try {
    add.launch({&a.view, &b.view}, {&o.view});
    FAIL("expected OUT_OF_MEMORY");
  } catch (const hal::Error& e) {
    std::string m = e.what();
    CHECK(e.code() == HAL_STATUS_OUT_OF_MEMORY);
    CHECK(m.find("input 'self' (int32, shape [16777216]) cast to float32 needs 67108864 bytes of scratch on acme:0") !=
          std::string::npos);
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * 4);
  o.buffer.copy_to_host(bytes.data(), bytes.size());
  CHECK(std::all_of(bytes.begin(), bytes.end(), [](uint8_t x) { return x == 0xA7; }));
  filler.free();
  add.launch({&a.view, &b.view}, {&o.view});  // fits now
  std::vector<float> first(4);
  o.buffer.copy_to_host(first.data(), 16);
  CHECK(first == std::vector<float>(4, 1.f));
}

TEST_CASE("promotion: a host that negotiates ABI 1.3 reads no op_get_info, yet casts when the plugin declines") {
  TempDir dir;
  auto rt = uniform_cpu(dir, 3);
  auto d = rt->device("cpu");
  hal::OpRunner add(d, "add");
  CHECK(add.input_mode() == hal::InputMode::kMixed);  // what a 1.3 plugin means
  CHECK(add.compute_dtypes() == ~uint64_t{0});
  hal::reset_op_stats();
  CHECK(mixed_calls(d, nullptr) == kExpected);  // each launch declined with MIXED_DTYPES, then cast
  CHECK(stat_of("cpu:0", "add").casts == 2);
}
