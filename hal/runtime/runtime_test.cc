// The runtime API and the C ABI under misuse: every mistake is an error
// status or hal::Error with a message, never a crash, and loses nothing.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "hal/runtime/runtime.hpp"
#include "testing/test_util.hpp"

using hal::testing::error_of;
using hal::testing::load_only;
using hal::testing::message_of;

namespace {
const std::string kCpu = HAL_TEST_CPU_PLUGIN;

}  // namespace

TEST_CASE("devices are found by id - unknown ids list what exists") {
  auto rt = load_only({kCpu});
  CHECK(rt->device("cpu")->id() == "cpu:0");
  CHECK(rt->device("cpu:0") == rt->default_device());
  CHECK(rt->fallback_device() == rt->default_device());
  auto e = error_of([&] { rt->device("gpu:3"); });
  CHECK(e.code() == HAL_STATUS_NOT_FOUND);
  CHECK(std::string(e.what()) == "no device 'gpu:3' (devices: cpu:0)");
  CHECK(error_of([&] { rt->device("cpu:x"); }).code() == HAL_STATUS_INVALID_ARGUMENT);
  auto empty = load_only({});
  CHECK(error_of([&] { empty->default_device(); }).code() == HAL_STATUS_NOT_FOUND);
  CHECK(empty->fallback_device() == nullptr);
}

TEST_CASE("device properties are real") {
  auto d = load_only({kCpu})->default_device();
  const auto& p = d->properties();
  CHECK(std::strlen(p.name) > 0);
  CHECK(std::strlen(p.vendor) > 0);
  CHECK(std::string(p.driver_version).rfind("hal-cpu ", 0) == 0);
  CHECK(p.total_memory_bytes > (1ull << 28));
  CHECK(p.compute_units >= 1);
  CHECK((p.supported_dtypes & HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32)) != 0);
  CHECK(d->supports(HAL_CAPABILITY_STREAM));
  CHECK(d->supports(HAL_CAPABILITY_OPERATOR));
  CHECK(d->supports(HAL_CAPABILITY_COLLECTIVE));
  uint64_t free_bytes = 0, total = 0;
  d->memory_info(&free_bytes, &total);
  CHECK(total == p.total_memory_bytes);
  CHECK(free_bytes > 0);
  CHECK(free_bytes <= total);
}

TEST_CASE("buffers: round trips at odd sizes and offsets device copies fills") {
  auto d = load_only({kCpu})->default_device();
  for (uint64_t size : {1ull, 3ull, 511ull, 4097ull, (1ull << 20) + 13}) {
    hal::Buffer a = d->allocate(size);
    hal::Buffer b = d->allocate(size + 7);
    CHECK(a.size() == size);
    std::vector<unsigned char> in(size), out(size, 0);
    for (uint64_t i = 0; i < size; ++i) in[i] = static_cast<unsigned char>(i * 31 + 7);
    a.copy_from_host(in.data(), size);
    b.fill(0xEE, size + 7);
    b.copy_from(a, size, 7, 0);
    b.copy_to_host(out.data(), size, 7);
    CHECK(out == in);
    unsigned char head[7];
    b.copy_to_host(head, 7);
    for (unsigned char c : head) CHECK(c == 0xEE);
    CHECK(a.host_pointer() != nullptr);
  }
}

TEST_CASE("misuse through the runtime API is an error never a crash") {
  auto d = load_only({kCpu})->default_device();
  SUBCASE("freeing a buffer twice") {
    hal::Buffer b = d->allocate(64);
    b.free();
    auto e = error_of([&] { b.free(); });
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(e.what()) == "Buffer::free: the buffer was freed (or moved from, or never allocated)");
    CHECK(error_of([&] { b.fill(0, 1); }).code() == HAL_STATUS_INVALID_ARGUMENT);
  }
  SUBCASE("copying past a buffer's end copies nothing") {
    hal::Buffer b = d->allocate(16);
    std::vector<unsigned char> src(32, 1), dst(32, 9);
    b.fill(0, 16);
    auto e = error_of([&] { b.copy_from_host(src.data(), 10, 8); });
    CHECK(e.code() == HAL_STATUS_OUT_OF_RANGE);
    CHECK(std::string(e.what()) == "cpu:0: Buffer::copy_from_host: range [offset 8, +10) exceeds the buffer's size 16");
    CHECK(error_of([&] { b.copy_to_host(dst.data(), 17); }).code() == HAL_STATUS_OUT_OF_RANGE);
    CHECK(dst == std::vector<unsigned char>(32, 9));
    CHECK(error_of([&] { b.copy_to_host(dst.data(), 1, std::numeric_limits<uint64_t>::max()); }).code() ==
          HAL_STATUS_OUT_OF_RANGE);
    hal::Buffer c = d->allocate(8);
    CHECK(error_of([&] { c.copy_from(b, 9); }).code() == HAL_STATUS_OUT_OF_RANGE);
    b.copy_to_host(dst.data(), 16);
    CHECK(std::vector<unsigned char>(dst.begin(), dst.begin() + 16) == std::vector<unsigned char>(16, 0));
  }
  SUBCASE("a destroyed stream cannot be used") {
    hal::Stream s = d->create_stream();
    s.destroy();
    auto e = error_of([&] { s.synchronize(); });
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(e.what()) == "the stream was destroyed (or moved from, or never created)");
    CHECK(error_of([&] { s.destroy(); }).code() == HAL_STATUS_INVALID_ARGUMENT);
    hal::Buffer b = d->allocate(8);
    CHECK(error_of([&] { b.fill(1, 8, 0, &s); }).code() == HAL_STATUS_INVALID_ARGUMENT);
  }
  SUBCASE("zero-byte, huge and larger-than-device allocations") {
    auto zero = error_of([&] { d->allocate(0); });
    CHECK(zero.code() == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(std::string(zero.what()) == "allocate: size 0 is not allowed");
    auto huge = error_of([&] { d->allocate(std::numeric_limits<uint64_t>::max()); });
    CHECK(huge.code() == HAL_STATUS_OUT_OF_MEMORY);
    CHECK(std::string(huge.what()).find("cpu: buffer_allocate: size 18446744073709551615 bytes exceeds the device's memory") == 0);
    const uint64_t beyond = d->properties().total_memory_bytes + 1;
    CHECK(error_of([&] { d->allocate(beyond); }).code() == HAL_STATUS_OUT_OF_MEMORY);
    hal::Buffer ok = d->allocate(1);  // the device still works
    CHECK(ok.size() == 1);
  }
}

TEST_CASE("misuse through the C ABI is a status naming the plugin and call") {
  auto rt = load_only({kCpu});
  const hal::Plugin& p = *rt->plugins()[0];
  const hal_memory_api_t& mem = p.memory_api();
  const hal_stream_api_t& str = p.stream_api();
  hal_device_t* dev = rt->default_device()->handle();
  uint32_t code = 0;

  SUBCASE("double free") {
    hal_buffer_t* b = nullptr;
    REQUIRE(mem.buffer_allocate(dev, 128, 0, &b) == nullptr);
    CHECK(message_of(mem.buffer_free(b)).empty());
    std::string m = message_of(mem.buffer_free(b), &code);
    CHECK(code == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(m.rfind("cpu: buffer_free: buffer 0x", 0) == 0);
    CHECK(m.find("is not a live buffer of this plugin (destroyed, freed twice, or never created)") != std::string::npos);
  }
  SUBCASE("copy past the end copies nothing") {
    hal_buffer_t* b = nullptr;
    REQUIRE(mem.buffer_allocate(dev, 16, 0, &b) == nullptr);
    REQUIRE(mem.buffer_fill(b, 0, 16, 0, nullptr) == nullptr);
    unsigned char src[32];
    std::memset(src, 7, sizeof(src));
    CHECK(message_of(mem.copy_host_to_device(b, 4, src, 13, nullptr), &code) ==
          "cpu: copy_host_to_device: dst range [offset 4, +13) exceeds the buffer's size 16");
    CHECK(code == HAL_STATUS_OUT_OF_RANGE);
    unsigned char out[16];
    REQUIRE(mem.copy_device_to_host(out, b, 0, 16, nullptr) == nullptr);
    for (unsigned char c : out) CHECK(c == 0);
    CHECK(message_of(mem.copy_device_to_device(b, 0, b, 10, 7, nullptr), &code).find("src range [offset 10, +7)") !=
          std::string::npos);
    CHECK(message_of(mem.copy_host_to_device(b, 0, nullptr, 1, nullptr)) == "cpu: copy_host_to_device: src is NULL");
    CHECK(message_of(mem.buffer_free(b)).empty());
  }
  SUBCASE("destroyed streams and events") {
    hal_stream_t* s = nullptr;
    REQUIRE(str.stream_create(dev, 0, &s) == nullptr);
    REQUIRE(str.stream_destroy(s) == nullptr);
    CHECK(message_of(str.stream_synchronize(s), &code).find("cpu: stream_synchronize: stream 0x") == 0);
    CHECK(code == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(!message_of(str.stream_destroy(s)).empty());
    hal_event_t* e = nullptr;
    REQUIRE(str.event_create(dev, 0, &e) == nullptr);
    REQUIRE(str.event_destroy(e) == nullptr);
    bool done = false;
    CHECK(message_of(str.event_query(e, &done)).find("is not a live event") != std::string::npos);
    CHECK(message_of(str.stream_create(dev, 7, &s)) == "cpu: stream_create: flags 7 are not supported");
  }
  SUBCASE("NULL and bad arguments") {
    hal_buffer_t* b = nullptr;
    CHECK(message_of(mem.buffer_allocate(dev, 0, 0, &b)) == "cpu: buffer_allocate: size 0 is not allowed");
    CHECK(message_of(mem.buffer_allocate(dev, 8, 3, &b)) == "cpu: buffer_allocate: alignment 3 is not a power of two");
    CHECK(message_of(mem.buffer_allocate(nullptr, 8, 0, &b)) == "cpu: buffer_allocate: device is NULL");
    CHECK(message_of(mem.buffer_allocate(dev, 8, 0, nullptr)) == "cpu: buffer_allocate: out_buffer is NULL");
    CHECK(b == nullptr);  // outputs untouched on error
    CHECK(message_of(mem.buffer_free(nullptr)) == "cpu: buffer_free: buffer is NULL");
    void* host = nullptr;
    REQUIRE(mem.host_allocate(dev, 100, &host) == nullptr);
    CHECK(message_of(mem.host_free(dev, host)).empty());
    CHECK(message_of(mem.host_free(dev, host)).find("is not a live host allocation") != std::string::npos);
    uint32_t count = 0;
    hal_device_t* other = nullptr;
    REQUIRE(p.device_api().device_count(p.handle(), &count) == nullptr);
    CHECK(message_of(p.device_api().device_get(p.handle(), count, &other)) ==
          "cpu: device_get: device index 1 >= device count 1");
  }
  SUBCASE("a smaller (older) properties struct is filled only up to its struct_size") {
    hal_device_properties_t props;
    std::memset(&props, 0xAB, sizeof(props));
    props.struct_size = HAL_STRUCT_SIZE_TO(hal_device_properties_t, name);
    REQUIRE(p.device_api().device_get_properties(dev, &props) == nullptr);
    CHECK(std::strlen(props.name) > 0);
    const auto* tail = reinterpret_cast<const unsigned char*>(&props) + props.struct_size;
    for (size_t i = 0; i < sizeof(props) - props.struct_size; ++i) REQUIRE(tail[i] == 0xAB);
    props.struct_size = 4;
    CHECK(message_of(p.device_api().device_get_properties(dev, &props)) ==
          "cpu: device_get_properties: properties struct_size 4 is too small");
  }
}
