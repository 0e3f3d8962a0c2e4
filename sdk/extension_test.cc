// Extension chains (hal/extension.h): the shared walker
// (hal/common/extension.hpp), and the SDK's entry points refusing malformed
// chains in the structs the host hands them while skipping unknown types.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hal/common/extension.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/ops.hpp"
#include "hal/sdk/plugin.hpp"
#include "sdk_test_device.hpp"

namespace sdk = hal::sdk;
using hal::sdk::testing::contains;
using hal::sdk::testing::take;
using hal::sdk::testing::TestDevice;
using hal::common::extension_chain_error;
using hal::common::find_extension;

namespace {

// A chain of N elements of vendor types VENDOR_FIRST + i, linked in order.
struct Chain {
  explicit Chain(size_t n) : elements(n) {
    for (size_t i = 0; i < n; ++i)
      elements[i] = {sizeof(hal_extension_base_t), HAL_EXTENSION_TYPE_VENDOR_FIRST + static_cast<uint32_t>(i),
                     i + 1 < n ? &elements[i + 1] : nullptr};
  }
  Chain(const Chain&) = delete;
  hal_extension_base_t* first() { return elements.data(); }
  std::vector<hal_extension_base_t> elements;
};

}  // namespace

TEST_CASE("extension chain walker: well-formed chains, unknown types skipped") {
  CHECK_FALSE(extension_chain_error(nullptr, "t.next"));
  Chain chain(5);
  CHECK_FALSE(extension_chain_error(chain.first(), "t.next"));
  SUBCASE("find returns the first element of a type, nullptr for an absent type") {
    CHECK(find_extension(chain.first(), HAL_EXTENSION_TYPE_VENDOR_FIRST + 3) == &chain.elements[3]);
    CHECK(find_extension(chain.first(), HAL_EXTENSION_TYPE_VENDOR_FIRST + 9) == nullptr);
    CHECK(find_extension(nullptr, HAL_EXTENSION_TYPE_VENDOR_FIRST) == nullptr);
  }
  SUBCASE("an element larger than the base (a real extension struct) is fine") {
    struct Big {
      hal_extension_base_t base;
      double payload[4];
    } big{{sizeof(Big), HAL_EXTENSION_TYPE_VENDOR_LAST, nullptr}, {}};
    chain.elements[4].next = &big.base;
    CHECK_FALSE(extension_chain_error(chain.first(), "t.next"));
    CHECK(find_extension(chain.first(), HAL_EXTENSION_TYPE_VENDOR_LAST) == &big.base);
  }
}

TEST_CASE("extension chain walker: a struct_size smaller than the base is refused") {
  Chain chain(3);
  chain.elements[2].struct_size = 4;
  auto e = extension_chain_error(chain.first(), "hal_op_args_t.next");
  REQUIRE(e);
  CHECK(contains(*e, "hal_op_args_t.next: extension chain element 2 (at "));
  CHECK(contains(*e, ") has struct_size 4, smaller than hal_extension_base_t (" +
                         std::to_string(sizeof(hal_extension_base_t)) + ")"));
  // The element is not read past its struct_size: find stops before it.
  CHECK(find_extension(chain.first(), HAL_EXTENSION_TYPE_VENDOR_FIRST + 2) == nullptr);
  chain.elements[0].struct_size = 0;
  CHECK(contains(*extension_chain_error(chain.first(), "x"), "element 0 (at "));
}

TEST_CASE("extension chain walker: type 0 (never set) is refused") {
  Chain chain(2);
  chain.elements[1].type = HAL_EXTENSION_TYPE_INVALID;
  auto e = extension_chain_error(chain.first(), "t.next");
  REQUIRE(e);
  CHECK(contains(*e, "t.next: extension chain element 1 (at "));
  CHECK(contains(*e, "has type 0 (HAL_EXTENSION_TYPE_INVALID)"));
}

TEST_CASE("extension chain walker: every cycle is found, naming where it links back to") {
  // All cycle shapes up to 40 elements: element LAST links back to element
  // TO (TO == LAST: an element pointing at itself).
  for (size_t length = 1; length <= 40; ++length) {
    for (size_t to = 0; to < length; ++to) {
      Chain chain(length);
      chain.elements[length - 1].next = &chain.elements[to];
      auto e = extension_chain_error(chain.first(), "t.next");
      REQUIRE_MESSAGE(e, "length ", length, " back to ", to);
      CHECK(contains(*e, "the chain has a cycle"));
      // The reported pair is one real link of the cycle.
      size_t from = 0, back = 0;
      REQUIRE(std::sscanf(e->c_str(), "t.next: extension chain element %zu (at %*[^)]) links back to element %zu",
                          &from, &back) == 2);
      CHECK(from >= to);
      CHECK(from < length);
      CHECK(back >= to);
      CHECK(chain.elements[from].next == &chain.elements[back]);
      // find terminates on a cycle too.
      CHECK(find_extension(chain.first(), HAL_EXTENSION_TYPE_VENDOR_LAST) == nullptr);
    }
  }
}

// ---- the SDK's entry points ------------------------------------------------

namespace {

int add_launches = 0;
void count_add(const std::shared_ptr<const sdk::OpCall>&, sdk::Stream*) { ++add_launches; }

class TestPlugin : public sdk::Plugin {
 public:
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | HAL_CAPABILITY_OPERATOR;
  explicit TestPlugin(const sdk::Options&) {
    ops().add<sdk::op::add>(&count_add, HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32));
    add_device(std::make_unique<TestDevice>());
  }
};

// One plugin instance through the C entries, with an add call ready to go.
struct Fixture {
  Fixture() {
    hal_plugin_create_args_t args{sizeof(args), nullptr, nullptr, 0};
    REQUIRE(take(sdk::detail::plugin_create<TestPlugin>(&args, &plugin)) == "");
    REQUIRE(take(sdk::detail::device_get(plugin, 0, &device)) == "");
    REQUIRE(take(sdk::detail::op_resolve(plugin, "add", &add)) == "");
    for (auto*& b : buffers) REQUIRE(take(sdk::detail::buffer_allocate(device, 8, 8, &b)) == "");
    for (size_t i = 0; i < 3; ++i) tensors[i] = {sizeof(hal_tensor_t), buffers[i], 0, HAL_DTYPE_FLOAT32, 1, shape,
                                                 nullptr};
    op_args = {sizeof(hal_op_args_t), nullptr, add, inputs, 2, outputs, 1, nullptr, 0};
  }
  ~Fixture() {
    for (auto* b : buffers) take(sdk::detail::buffer_free(b));
    sdk::detail::plugin_destroy(plugin);
  }
  hal_plugin_t* plugin = nullptr;
  hal_device_t* device = nullptr;
  hal_op_id_t add = 0;
  hal_buffer_t* buffers[3] = {};
  int64_t shape[1] = {2};
  hal_tensor_t tensors[3];
  const hal_tensor_t* inputs[2] = {&tensors[0], &tensors[1]};
  const hal_tensor_t* outputs[1] = {&tensors[2]};
  hal_op_args_t op_args;
};

}  // namespace

TEST_CASE("SDK: op_check and op_launch skip unknown extension types and refuse malformed chains") {
  Fixture f;
  Chain chain(3);
  f.op_args.next = chain.first();
  SUBCASE("unknown types are accepted") {
    CHECK(take(sdk::detail::op_check(f.device, &f.op_args)) == "");
    const int before = add_launches;
    CHECK(take(sdk::detail::op_launch(f.device, &f.op_args, nullptr)) == "");
    CHECK(add_launches == before + 1);
  }
  SUBCASE("a cycle is INVALID_ARGUMENT naming the field and the elements; nothing runs") {
    chain.elements[2].next = &chain.elements[1];
    const int before = add_launches;
    for (std::string m : {take(sdk::detail::op_check(f.device, &f.op_args)),
                          take(sdk::detail::op_launch(f.device, &f.op_args, nullptr))}) {
      CHECK(contains(m, "INVALID_ARGUMENT: plugin: op_"));
      CHECK(contains(m, "hal_op_args_t.next: extension chain element 2 (at "));
      CHECK(contains(m, "links back to element 1: the chain has a cycle"));
    }
    CHECK(add_launches == before);
  }
  SUBCASE("a struct_size smaller than the base is INVALID_ARGUMENT with the value") {
    chain.elements[0].struct_size = 1;
    std::string m = take(sdk::detail::op_launch(f.device, &f.op_args, nullptr));
    CHECK(contains(m, "INVALID_ARGUMENT: plugin: op_launch: hal_op_args_t.next: extension chain element 0 (at "));
    CHECK(contains(m, "has struct_size 1, smaller than hal_extension_base_t"));
  }
}

TEST_CASE("SDK: the host's structs' chains are checked at entry and create") {
  Chain chain(2);
  chain.elements[1].next = &chain.elements[1];  // element 1 points at itself
  SUBCASE("hal_plugin_entry reads hal_host_api_t.next from a 1.3 host only") {
    // entry() records the plugin's name and host for logging; put them back.
    struct RestoreInfo {
      sdk::detail::Info saved = sdk::detail::info();
      ~RestoreInfo() { sdk::detail::info() = saved; }
    } restore;
    hal_host_api_t host{};
    host.struct_size = sizeof(host);
    host.abi_version_major = HAL_ABI_VERSION_MAJOR;
    host.abi_version_minor = 3;
    host.next = chain.first();
    const hal_plugin_api_t* api = nullptr;
    std::string m = take(sdk::detail::entry<TestPlugin>(&host, &api, "test", "HAL tests", "0"));
    CHECK(contains(m, "INVALID_ARGUMENT: test: hal_plugin_entry: hal_host_api_t.next: extension chain element 1"));
    CHECK(contains(m, "links back to element 1: the chain has a cycle"));
    CHECK(api == nullptr);
    host.abi_version_minor = 2;  // a 1.2 host has no `next`: whatever lies there is not read
    CHECK(take(sdk::detail::entry<TestPlugin>(&host, &api, "test", "HAL tests", "0")) == "");
    REQUIRE(api != nullptr);
    CHECK(api->next == nullptr);
    CHECK(api->abi_version_minor == HAL_ABI_VERSION_MINOR);
  }
  SUBCASE("create refuses a malformed hal_plugin_create_args_t.next") {
    hal_plugin_create_args_t args{sizeof(args), chain.first(), nullptr, 0};
    hal_plugin_t* plugin = nullptr;
    std::string m = take(sdk::detail::plugin_create<TestPlugin>(&args, &plugin));
    CHECK(contains(m, "INVALID_ARGUMENT: plugin: create: hal_plugin_create_args_t.next: extension chain element 1"));
    CHECK(plugin == nullptr);
  }
}

TEST_CASE("SDK: graph_partition and graph_compile refuse a malformed hal_graph_t.next") {
  Fixture f;
  Chain chain(2);
  hal_graph_t graph{};
  graph.struct_size = sizeof(graph);
  graph.next = chain.first();
  uint32_t groups[1] = {};
  CHECK(take(sdk::detail::graph_partition(f.device, &graph, groups)) == "");  // unknown types: fine
  chain.elements[1].struct_size = sizeof(size_t);
  CHECK(contains(take(sdk::detail::graph_partition(f.device, &graph, groups)),
                 "INVALID_ARGUMENT: plugin: graph_partition: hal_graph_t.next: extension chain element 1 (at "));
  hal_executable_t* exe = nullptr;
  CHECK(contains(take(sdk::detail::graph_compile(f.device, &graph, &exe)),
                 "graph_compile: hal_graph_t.next: extension chain element 1"));
  CHECK(exe == nullptr);
}
