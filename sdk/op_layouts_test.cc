// op_get_layouts (ABI 1.8) through the SDK's C entry: a device's
// Device::op_layouts reaches the caller as hal_op_layout_t, the call is
// validated as op_check validates it, and bad arguments or a bad answer
// leave every layout untouched.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "hal/common/dim_order.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/ops.hpp"
#include "hal/sdk/plugin.hpp"
#include "sdk_test_device.hpp"

namespace sdk = hal::sdk;
using hal::sdk::testing::contains;
using hal::sdk::testing::take;
using hal::sdk::testing::TestDevice;

namespace {

void noop(const std::shared_ptr<const sdk::OpCall>&, sdk::Stream*) {}

// relu: channels-last in and out for 4-D inputs; add: the output follows
// input 0's dense order (what the device reads from the input strides);
// mul: a broken answer (a dim order of the wrong rank).
class LayoutDevice : public TestDevice {
 public:
  void op_layouts(const sdk::OpCall& call, sdk::OpLayouts& out) override {
    if (std::strcmp(call.name(), "relu") == 0 && call.input(0).rank == 4)
      out.inputs[0] = out.outputs[0] = {0, 2, 3, 1};
    if (std::strcmp(call.name(), "add") == 0) {
      const sdk::Tensor& a = call.input(0);
      if (auto order = hal::common::dense_order(a.shape, a.strides, a.rank)) out.outputs[0] = *order;
    }
    if (std::strcmp(call.name(), "mul") == 0) out.outputs[0] = {0};
  }
};

class LayoutPlugin : public sdk::Plugin {
 public:
  static constexpr uint32_t kInterfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | HAL_CAPABILITY_OPERATOR;
  explicit LayoutPlugin(const sdk::Options&) {
    ops().add<sdk::op::relu>(&noop, sdk::kFloatDtypes);
    ops().add<sdk::op::add>(&noop, sdk::kFloatDtypes);
    ops().add<sdk::op::mul>(&noop, sdk::kFloatDtypes);
    ops().add<sdk::op::sub>(&noop, sdk::kFloatDtypes);
    add_device(std::make_unique<LayoutDevice>());
  }
};

struct Fixture {
  Fixture() {
    hal_plugin_create_args_t args{sizeof(args), nullptr, nullptr, 0};
    REQUIRE(take(sdk::detail::plugin_create<LayoutPlugin>(&args, &plugin)) == "");
    REQUIRE(take(sdk::detail::device_get(plugin, 0, &device)) == "");
  }
  ~Fixture() { sdk::detail::plugin_destroy(plugin); }
  hal_op_id_t id(const char* op) {
    hal_op_id_t out = 0;
    REQUIRE(take(sdk::detail::op_resolve(plugin, op, &out)) == "");
    return out;
  }
  hal_plugin_t* plugin = nullptr;
  hal_device_t* device = nullptr;
};

// One call of OP on [2, 3, 4, 5] float32 tensors without buffers: INPUTS
// inputs (strides STRIDES, nullptr: row-major) and one output.
struct Query {
  Query(Fixture& f, const char* op, size_t inputs, const int64_t* strides = nullptr) {
    for (size_t i = 0; i <= inputs; ++i)
      tensors.push_back({sizeof(hal_tensor_t), nullptr, 0, HAL_DTYPE_FLOAT32, 4, shape, i < inputs ? strides : nullptr});
    for (size_t i = 0; i < inputs; ++i) in.push_back(&tensors[i]);
    out.push_back(&tensors.back());
    call = {sizeof(hal_op_args_t), nullptr, f.id(op), in.data(), in.size(), out.data(), 1, nullptr, 0};
    for (auto& l : layouts) {
      l.struct_size = sizeof(l);
      l.preference = 77;  // what "untouched" looks like
    }
    for (size_t i = 0; i < inputs; ++i) in_layouts.push_back(&layouts[i]);
    out_layouts.push_back(&layouts[2]);
    args = {sizeof(args), nullptr, f.device, &call, in_layouts.data(), out_layouts.data()};
  }
  std::string ask() { return take(sdk::detail::op_get_layouts(&args)); }
  std::vector<uint32_t> order(size_t k) const { return {layouts[k].dim_order, layouts[k].dim_order + 4}; }
  bool untouched() const {
    for (const auto& l : layouts)
      if (l.preference != 77) return false;
    return true;
  }

  int64_t shape[4] = {2, 3, 4, 5};
  std::vector<hal_tensor_t> tensors;
  std::vector<const hal_tensor_t*> in, out;
  hal_op_args_t call{};
  hal_op_layout_t layouts[3] = {};
  std::vector<hal_op_layout_t*> in_layouts, out_layouts;
  hal_op_get_layouts_args_t args{};
};

}  // namespace

TEST_CASE("op_get_layouts: the device's preferences arrive as dim orders - no preference is ANY") {
  Fixture f;
  Query relu(f, "relu", 1);
  REQUIRE(relu.ask() == "");
  CHECK(relu.layouts[0].preference == HAL_OP_LAYOUT_PREFERRED);
  CHECK(relu.order(0) == std::vector<uint32_t>{0, 2, 3, 1});
  CHECK(relu.layouts[2].preference == HAL_OP_LAYOUT_PREFERRED);
  CHECK(relu.order(2) == std::vector<uint32_t>{0, 2, 3, 1});

  // The device sees the input strides the host chose: channels-last in,
  // channels-last out.
  const int64_t channels_last[4] = {60, 1, 15, 3};
  Query add(f, "add", 2, channels_last);
  REQUIRE(add.ask() == "");
  CHECK(add.layouts[0].preference == HAL_OP_LAYOUT_ANY);
  CHECK(add.layouts[1].preference == HAL_OP_LAYOUT_ANY);
  CHECK(add.layouts[2].preference == HAL_OP_LAYOUT_PREFERRED);
  CHECK(add.order(2) == std::vector<uint32_t>{0, 2, 3, 1});

  Query sub(f, "sub", 2);  // the device says nothing about sub
  REQUIRE(sub.ask() == "");
  CHECK(sub.layouts[0].preference == HAL_OP_LAYOUT_ANY);
  CHECK(sub.layouts[2].preference == HAL_OP_LAYOUT_ANY);

  // A NULL entry is not asked; the others still are.
  Query partial(f, "relu", 1);
  partial.in_layouts[0] = nullptr;
  REQUIRE(partial.ask() == "");
  CHECK(partial.layouts[0].preference == 77);
  CHECK(partial.layouts[2].preference == HAL_OP_LAYOUT_PREFERRED);
}

TEST_CASE("op_get_layouts: bad arguments and a bad answer are refused, naming what, and write nothing") {
  Fixture f;
  CHECK(contains(take(sdk::detail::op_get_layouts(nullptr)), "args is NULL"));
  {
    Query q(f, "relu", 1);
    q.args.struct_size = sizeof(size_t);
    CHECK(contains(q.ask(), "hal_op_get_layouts_args_t.struct_size"));
    CHECK(q.untouched());
  }
  {
    Query q(f, "relu", 1);
    q.args.call = nullptr;
    CHECK(contains(q.ask(), "call is NULL"));
    CHECK(q.untouched());
  }
  {
    Query q(f, "relu", 1);
    q.args.out_outputs = nullptr;
    CHECK(contains(q.ask(), "out_inputs or out_outputs is NULL"));
    CHECK(q.untouched());
  }
  {
    Query q(f, "relu", 1);
    q.layouts[2].struct_size = sizeof(size_t);
    CHECK(contains(q.ask(), "out_outputs[0].struct_size"));
    CHECK(q.layouts[0].preference == 77);
  }
  {
    Query q(f, "relu", 1);  // what op_check refuses: a call with two inputs
    q.call.input_count = 0;
    q.args.out_inputs = nullptr;
    const std::string e = q.ask();
    CHECK(contains(e, "op_get_layouts"));
    CHECK(contains(e, "relu"));
    CHECK(q.untouched());
  }
  {
    Query q(f, "relu", 1);
    q.args.device = nullptr;
    CHECK(!q.ask().empty());
    CHECK(q.untouched());
  }
  {
    Query q(f, "mul", 2);  // the device answers a dim order of rank 1 for a 4-D output
    const std::string e = q.ask();
    CHECK(contains(e, "mul: the plugin's layout for output 0 is not a dim order of its rank 4"));
    CHECK(q.untouched());
  }
}

TEST_CASE("dim orders: dense strides and the order a strided tensor is dense in") {
  using hal::common::dense_order;
  using hal::common::dense_strides;
  using hal::common::DimOrder;
  CHECK(dense_strides({2, 3, 4, 5}, {}) == std::vector<int64_t>{60, 20, 5, 1});
  CHECK(dense_strides({2, 3, 4, 5}, {0, 2, 3, 1}) == std::vector<int64_t>{60, 1, 15, 3});
  const int64_t shape[4] = {2, 3, 4, 5};
  const int64_t row_major[4] = {60, 20, 5, 1}, channels_last[4] = {60, 1, 15, 3}, gap[4] = {120, 40, 10, 2};
  CHECK(dense_order(shape, row_major, 4) == DimOrder{0, 1, 2, 3});
  CHECK(dense_order(shape, channels_last, 4) == DimOrder{0, 2, 3, 1});
  CHECK(!dense_order(shape, gap, 4).has_value());
  // Size-1 dims go before the next larger dim of higher index.
  const int64_t one_batch[4] = {1, 3, 4, 5}, one_batch_cl[4] = {999, 1, 15, 3};
  CHECK(dense_order(one_batch, one_batch_cl, 4) == DimOrder{0, 2, 3, 1});
  const int64_t pooled[4] = {2, 3, 1, 1}, pooled_cl[4] = {3, 1, 3, 3};
  CHECK(dense_order(pooled, pooled_cl, 4) == DimOrder{0, 1, 2, 3});
  const int64_t empty[2] = {0, 3}, any[2] = {7, 9};
  CHECK(dense_order(empty, any, 2) == DimOrder{0, 1});
  CHECK(hal::common::is_dim_order({1, 0}, 2));
  CHECK(!hal::common::is_dim_order({1, 1}, 2));
  CHECK(!hal::common::is_dim_order({0, 2}, 2));
  CHECK(!hal::common::is_dim_order({0}, 2));
}
