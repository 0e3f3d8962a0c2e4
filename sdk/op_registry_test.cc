// Input modes and per-dtype kernels (hal/sdk/op_registry.hpp): registration
// rules, the uniform decline (HAL_STATUS_MIXED_DTYPES) through the C
// entries, and op_get_info (ABI 1.4).
#include <doctest/doctest.h>

#include <string>

#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/ops.hpp"
#include "hal/sdk/plugin.hpp"
#include "sdk_test_device.hpp"

namespace sdk = hal::sdk;
using hal::sdk::testing::contains;
using hal::sdk::testing::take;
using hal::sdk::testing::TestDevice;

namespace {

std::string last_kernel;
void add_f32(const std::shared_ptr<const sdk::OpCall>&, sdk::Stream*) { last_kernel = "add_f32"; }
void add_f16(const std::shared_ptr<const sdk::OpCall>&, sdk::Stream*) { last_kernel = "add_f16"; }
void mul_any(const std::shared_ptr<const sdk::OpCall>&, sdk::Stream*) { last_kernel = "mul_any"; }
void where_f32(const std::shared_ptr<const sdk::OpCall>&, sdk::Stream*) { last_kernel = "where_f32"; }

constexpr uint64_t kF32 = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32);
constexpr uint64_t kF16 = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT16);

// add: uniform, one kernel per dtype; mul: mixed; where: uniform float32.
class ModesPlugin : public sdk::Plugin {
 public:
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | HAL_CAPABILITY_OPERATOR;
  explicit ModesPlugin(const sdk::Options&) {
    ops().add<sdk::op::add>(&add_f32, kF32);
    ops().add<sdk::op::add>(&add_f16, kF16);
    ops().add<sdk::op::mul>(&mul_any, kF32 | kF16, sdk::InputMode::kMixed);
    ops().add<sdk::op::where>(&where_f32, kF32);
    add_device(std::make_unique<TestDevice>());
  }
};

struct Call {
  explicit Call(hal_plugin_t* plugin, hal_device_t* device, const char* op, std::vector<hal_dtype_e> in,
                hal_dtype_e out)
      : device(device) {
    REQUIRE(take(sdk::detail::op_resolve(plugin, op, &id)) == "");
    for (size_t i = 0; i <= in.size(); ++i) {
      hal_dtype_e dt = i < in.size() ? in[i] : out;
      hal_buffer_t* b = nullptr;
      REQUIRE(take(sdk::detail::buffer_allocate(device, 16, 8, &b)) == "");
      buffers.push_back(b);
      tensors.push_back({sizeof(hal_tensor_t), b, 0, dt, 1, shape, nullptr});
    }
    for (size_t i = 0; i < in.size(); ++i) inputs.push_back(&tensors[i]);
    outputs.push_back(&tensors.back());
    args = {sizeof(hal_op_args_t), nullptr, id, inputs.data(), inputs.size(), outputs.data(), 1, nullptr, 0};
  }
  ~Call() {
    for (auto* b : buffers) take(sdk::detail::buffer_free(b));
  }
  std::string check() { return take(sdk::detail::op_check(device, &args)); }
  std::string launch() { return take(sdk::detail::op_launch(device, &args, nullptr)); }

  hal_device_t* device;
  hal_op_id_t id = 0;
  int64_t shape[1] = {2};
  std::vector<hal_buffer_t*> buffers;
  std::vector<hal_tensor_t> tensors;
  std::vector<const hal_tensor_t*> inputs, outputs;
  hal_op_args_t args;
};

struct Fixture {
  Fixture() {
    hal_plugin_create_args_t args{sizeof(args), nullptr, nullptr, 0};
    REQUIRE(take(sdk::detail::plugin_create<ModesPlugin>(&args, &plugin)) == "");
    REQUIRE(take(sdk::detail::device_get(plugin, 0, &device)) == "");
  }
  ~Fixture() { sdk::detail::plugin_destroy(plugin); }
  std::string info(hal_op_id_t op, hal_op_info_t* out) {
    hal_op_get_info_args_t a{sizeof(a), nullptr, plugin, op, out};
    return take(sdk::detail::op_get_info(&a));
  }
  hal_plugin_t* plugin = nullptr;
  hal_device_t* device = nullptr;
};

}  // namespace

TEST_CASE("op registry: one kernel per dtype - a second mode or a dtype registered twice is refused") {
  sdk::OpRegistry ops;
  ops.add<sdk::op::add>(&add_f32, kF32);
  ops.add<sdk::op::add>(&add_f16, kF16);
  REQUIRE(ops.size() == 1);
  CHECK((ops.at(0).fn(HAL_DTYPE_FLOAT32) == &add_f32));
  CHECK((ops.at(0).fn(HAL_DTYPE_FLOAT16) == &add_f16));
  CHECK((ops.at(0).fn(HAL_DTYPE_INT32) == nullptr));
  CHECK(ops.at(0).dtypes == (kF32 | kF16));
  CHECK(ops.at(0).input_mode == sdk::InputMode::kUniform);
  try {
    ops.add<sdk::op::add>(&add_f32, HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64), sdk::InputMode::kMixed);
    FAIL("a second input mode must be refused");
  } catch (const sdk::Error& e) {
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(contains(e.what(), "op 'add' registered with uniform inputs for float32, float16 and with mixed inputs "
                             "for float64; an op takes its inputs one way"));
  }
  try {
    ops.add<sdk::op::add>(&add_f32, kF16 | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64));
    FAIL("a dtype registered twice must be refused");
  } catch (const sdk::Error& e) {
    CHECK(e.code() == HAL_STATUS_ALREADY_EXISTS);
    CHECK(contains(e.what(), "op 'add' registered twice for float16"));
  }
  CHECK(ops.at(0).dtypes == (kF32 | kF16));  // refused registrations change nothing
  CHECK_THROWS_AS(ops.add<sdk::op::mul>(&mul_any, 0), sdk::Error);
  ops.set_default_input_mode(sdk::InputMode::kMixed);
  ops.add<sdk::op::mul>(&mul_any, kF32);
  CHECK(ops.at(1).input_mode == sdk::InputMode::kMixed);
}

TEST_CASE("op registry: a dtype the catalog forbids is refused - kAllDtypes is the catalog's dtypes") {
  sdk::OpRegistry ops;
  try {
    ops.add<sdk::op::softmax>(&mul_any, HAL_DTYPE_BIT(HAL_DTYPE_INT32) | kF32);
    FAIL("softmax for int32 must be refused");
  } catch (const sdk::Error& e) {
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    CHECK(contains(e.what(), "kernel for 'softmax' is registered for int32, which the catalog does not allow: "
                             "'softmax' computes in float32, float16, bfloat16, float64 only"));
  }
  CHECK(ops.size() == 0);  // nothing registered, not even float32
  // The default (kAllDtypes) registers what the catalog allows.
  ops.add<sdk::op::softmax>(&mul_any);
  REQUIRE(ops.size() == 1);
  CHECK(ops.at(0).dtypes == sdk::kFloatDtypes);
  // where: the condition is outside promotion; self and other decide (all dtypes).
  ops.add<sdk::op::where>(&where_f32, HAL_DTYPE_BIT(HAL_DTYPE_INT64));
  // Promotion closes the set: add of any dtypes computes in any of them.
  CHECK(hal::common::catalog_compute_dtypes(sdk::op::add::schema()) == sdk::kAllDtypes);
  CHECK(hal::common::catalog_compute_dtypes(sdk::op::softmax::schema()) == sdk::kFloatDtypes);
  CHECK_THROWS_AS(ops.add<sdk::op::log_softmax>(&mul_any, sdk::kIntDtypes), sdk::Error);
  // A plugin of generic kernels asks for its broad masks to be narrowed.
  ops.narrow_to_catalog();
  ops.add<sdk::op::log_softmax>(&mul_any, sdk::kFloatDtypes | sdk::kIntDtypes);
  CHECK(ops.at(ops.find("log_softmax")).dtypes == sdk::kFloatDtypes);
  try {
    ops.add<sdk::op::softmax_backward>(&mul_any, sdk::kIntDtypes);
    FAIL("nothing left after narrowing must be refused");
  } catch (const sdk::Error& e) {
    CHECK(contains(e.what(), "kernel for 'softmax_backward' is registered for no dtype the catalog allows"));
  }
}

TEST_CASE("SDK: a uniform op declines a mixed call with MIXED_DTYPES before its kernel runs - a mixed op takes it") {
  Fixture f;
  last_kernel.clear();
  SUBCASE("uniform inputs run the dtype's kernel") {
    Call c(f.plugin, f.device, "add", {HAL_DTYPE_FLOAT16, HAL_DTYPE_FLOAT16}, HAL_DTYPE_FLOAT16);
    CHECK(c.launch() == "");
    CHECK(last_kernel == "add_f16");
  }
  SUBCASE("int32 + float32 computes in float32: declined, naming the input and the dtypes") {
    Call c(f.plugin, f.device, "add", {HAL_DTYPE_INT32, HAL_DTYPE_FLOAT32}, HAL_DTYPE_FLOAT32);
    std::string m = c.check();
    CHECK(contains(m, "MIXED_DTYPES: "));
    CHECK(contains(m, "add: input 'self' is int32 but the call computes in float32"));
    CHECK(contains(m, "uniform inputs"));
    std::string launched = c.launch();
    CHECK(launched.substr(launched.find("add: ")) == m.substr(m.find("add: ")));
    CHECK(last_kernel.empty());
  }
  SUBCASE("a compute dtype the op lacks is UNSUPPORTED_DTYPE, not MIXED_DTYPES (a cast would not help)") {
    Call c(f.plugin, f.device, "add", {HAL_DTYPE_INT32, HAL_DTYPE_FLOAT64}, HAL_DTYPE_FLOAT64);
    CHECK(contains(c.check(), "UNSUPPORTED_DTYPE: "));
  }
  SUBCASE("a mixed op takes the call") {
    Call c(f.plugin, f.device, "mul", {HAL_DTYPE_FLOAT16, HAL_DTYPE_FLOAT32}, HAL_DTYPE_FLOAT32);
    CHECK(c.launch() == "");
    CHECK(last_kernel == "mul_any");
  }
  SUBCASE("inputs outside promotion keep their dtype: where's bool condition") {
    Call c(f.plugin, f.device, "where", {HAL_DTYPE_BOOL, HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT32}, HAL_DTYPE_FLOAT32);
    CHECK(c.launch() == "");
    CHECK(last_kernel == "where_f32");
  }
}

TEST_CASE("SDK: op_get_info reports the input mode and compute dtypes - bad arguments change nothing") {
  Fixture f;
  hal_op_id_t add = 0, mul = 0;
  REQUIRE(take(sdk::detail::op_resolve(f.plugin, "add", &add)) == "");
  REQUIRE(take(sdk::detail::op_resolve(f.plugin, "mul", &mul)) == "");
  hal_op_info_t info{sizeof(info), nullptr, 99, 0};
  CHECK(f.info(add, &info) == "");
  CHECK(info.input_mode == HAL_OP_INPUTS_UNIFORM);
  CHECK(info.compute_dtypes == (kF32 | kF16));
  CHECK(f.info(mul, &info) == "");
  CHECK(info.input_mode == HAL_OP_INPUTS_MIXED);

  hal_op_info_t untouched{sizeof(untouched), nullptr, 77, 77};
  CHECK(contains(f.info(42, &untouched), "op_get_info: op id 42 was not returned by op_resolve"));
  CHECK(contains(f.info(add, nullptr), "out_info is NULL"));
  hal_op_info_t small{sizeof(size_t), nullptr, 77, 77};
  CHECK(contains(f.info(add, &small), "hal_op_info_t.struct_size 8 is too small"));
  CHECK(untouched.input_mode == 77);
  CHECK(small.input_mode == 77);
  CHECK(contains(take(sdk::detail::op_get_info(nullptr)), "args is NULL"));
}
