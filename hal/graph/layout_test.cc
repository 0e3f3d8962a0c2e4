// The layout adjustment (graph/layout.hpp): the planner's rules over a fake
// plugin, then the CPU plugin's channels-last convolutions run op by op
// with channels-last values between them, equal to row-major.
#include "graph/layout.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <map>

#include "hal/runtime/graph.hpp"
#include "testing/op_test_util.hpp"
#include "loader/loaded_plugin.hpp"
#include "testing/test_util.hpp"

namespace {
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;
const hal::common::DimOrder kChannelsLast = {0, 2, 3, 1};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::vector<std::vector<int64_t>> shapes_of(const hal::Graph& g) {
  std::vector<std::vector<int64_t>> s;
  for (const auto& v : g.values()) s.push_back(v.shape);
  return s;
}

std::vector<size_t> all_nodes(const hal::Graph& g) {
  std::vector<size_t> n(g.nodes().size());
  for (size_t i = 0; i < n.size(); ++i) n[i] = i;
  return n;
}

// Every value but the graph's inputs and outputs.
std::vector<bool> intermediates(const hal::Graph& g) {
  std::vector<bool> c(g.values().size(), true);
  for (uint32_t v : g.inputs()) c[v] = false;
  for (uint32_t v : g.outputs()) c[v] = false;
  return c;
}

// A fake plugin: conv2d prefers channels-last in and out, other ops say
// "any"; it records the input strides each node was asked with.
struct FakePlugin {
  const hal::Graph& g;
  std::map<size_t, std::vector<std::vector<int64_t>>> asked;
  std::optional<hal::OpLayouts> operator()(size_t n, const std::vector<std::vector<int64_t>>& strides) {
    asked[n] = strides;
    const auto& node = g.nodes()[n];
    hal::OpLayouts l;
    l.inputs.resize(node.inputs.size());
    l.outputs.resize(node.outputs.size());
    if (node.op == "conv2d") l.inputs[0] = l.outputs[0] = kChannelsLast;
    return l;
  }
};
}  // namespace

TEST_CASE("layout plan: a preferred output layout, elementwise ops following it, a reshaping op back to row-major") {
  hal::Graph g;
  auto x = g.input(F32, {2, 3, 4, 4}, "x"), w = g.input(F32, {8, 3, 1, 1}, "w");
  auto c = g.add_op("conv2d", {x, w}, {F32, {2, 8, 4, 4}});
  auto r = g.add_op("relu", {c}, {F32, {2, 8, 4, 4}});
  auto a = g.add_op("add", {r, c}, {F32, {2, 8, 4, 4}});
  auto p = g.add_op("avg_pool2d", {a}, {F32, {2, 8, 2, 2}});
  g.mark_output(g.add_op("relu", {p}, {F32, {2, 8, 2, 2}}), "y");
  FakePlugin plugin{g, {}};
  auto plan = hal::detail::plan_layouts(g, all_nodes(g), shapes_of(g), intermediates(g), std::ref(plugin));
  CHECK(plan.order[c.id] == kChannelsLast);
  CHECK(plan.order[r.id] == kChannelsLast);  // follows its input
  CHECK(plan.order[a.id] == kChannelsLast);
  CHECK(plan.order[p.id].empty());           // another shape: row-major
  CHECK(plan.relaid == 3);
  // Each node was asked with its inputs in the layouts chosen before it.
  const std::vector<int64_t> cl = {128, 1, 32, 8};
  CHECK(plugin.asked[1] == std::vector<std::vector<int64_t>>{cl});
  CHECK(plugin.asked[2] == std::vector<std::vector<int64_t>>{cl, cl});
  CHECK(plugin.asked[0] == std::vector<std::vector<int64_t>>{{}, {}});
}

TEST_CASE("layout plan: values not ours to choose, rank < 2, silent plugins and explicit row-major stay row-major") {
  hal::Graph g;
  auto x = g.input(F32, {2, 3, 4, 4}, "x"), w = g.input(F32, {8, 3, 1, 1}, "w");
  auto c = g.add_op("conv2d", {x, w}, {F32, {2, 8, 4, 4}});
  auto r = g.add_op("relu", {c}, {F32, {2, 8, 4, 4}});
  g.mark_output(r, "y");
  FakePlugin plugin{g, {}};
  std::vector<bool> choosable = intermediates(g);
  choosable[c.id] = false;  // say, read by an executable wanting contiguous inputs
  auto plan = hal::detail::plan_layouts(g, all_nodes(g), shapes_of(g), choosable, std::ref(plugin));
  CHECK(plan.relaid == 0);

  // A plugin that says nothing (nullptr answer): row-major.
  auto silent = [](size_t, const std::vector<std::vector<int64_t>>&) { return std::optional<hal::OpLayouts>(); };
  plan = hal::detail::plan_layouts(g, all_nodes(g), shapes_of(g), intermediates(g), silent);
  CHECK(plan.relaid == 0);

  // An explicit row-major preference is kept (not followed from inputs).
  hal::Graph h;
  auto hx = h.input(F32, {2, 3, 4, 4}), hw = h.input(F32, {8, 3, 1, 1});
  auto hc = h.add_op("conv2d", {hx, hw}, {F32, {2, 8, 4, 4}});
  auto hr = h.add_op("relu", {hc}, {F32, {2, 8, 4, 4}});
  auto hs = h.add_op("sum", {hr}, {F32, {2}});
  h.mark_output(h.add_op("neg", {hs}, {F32, {2}}));
  auto row_major_relu = [&](size_t n, const std::vector<std::vector<int64_t>>&) {
    hal::OpLayouts l;
    l.inputs.resize(h.nodes()[n].inputs.size());
    l.outputs.resize(h.nodes()[n].outputs.size());
    if (h.nodes()[n].op == "conv2d") l.outputs[0] = kChannelsLast;
    if (h.nodes()[n].op == "relu") l.outputs[0] = {0, 1, 2, 3};
    if (h.nodes()[n].op == "sum") l.outputs[0] = {0};  // rank 1: nothing to choose
    return std::optional<hal::OpLayouts>(l);
  };
  plan = hal::detail::plan_layouts(h, all_nodes(h), shapes_of(h), intermediates(h), row_major_relu);
  CHECK(plan.order[hc.id] == kChannelsLast);
  CHECK(plan.order[hr.id].empty());
  CHECK(plan.order[hs.id].empty());
  CHECK(plan.relaid == 1);
}

TEST_CASE("layout plan: a value its producer leaves open takes the layout its consumers agree on") {
  hal::Graph g;
  auto x = g.input(F32, {2, 3, 4, 4}, "x"), w = g.input(F32, {8, 3, 1, 1}, "w");
  auto t = g.add_op("relu", {x}, {F32, {2, 3, 4, 4}});  // follows x: row-major, left open
  auto c = g.add_op("conv2d", {t, w}, {F32, {2, 8, 4, 4}});
  g.mark_output(c, "y");
  FakePlugin plugin{g, {}};
  auto plan = hal::detail::plan_layouts(g, all_nodes(g), shapes_of(g), intermediates(g), std::ref(plugin));
  CHECK(plan.order[t.id] == kChannelsLast);

  // Consumers that disagree: row-major.
  g = hal::Graph();
  x = g.input(F32, {2, 3, 4, 4}, "x");
  w = g.input(F32, {8, 3, 1, 1}, "w");
  t = g.add_op("relu", {x}, {F32, {2, 3, 4, 4}});
  g.mark_output(g.add_op("conv2d", {t, w}, {F32, {2, 8, 4, 4}}), "y");
  g.mark_output(g.add_op("softmax", {t}, {F32, {2, 3, 4, 4}}, {hal::Attr::i("dim", 1)}), "z");
  auto disagree = [&](size_t n, const std::vector<std::vector<int64_t>>&) {
    hal::OpLayouts l;
    l.inputs.resize(g.nodes()[n].inputs.size());
    l.outputs.resize(g.nodes()[n].outputs.size());
    if (g.nodes()[n].op == "conv2d") l.inputs[0] = kChannelsLast;
    if (g.nodes()[n].op == "softmax") l.inputs[0] = {0, 1, 2, 3};
    return std::optional<hal::OpLayouts>(l);
  };
  plan = hal::detail::plan_layouts(g, all_nodes(g), shapes_of(g), intermediates(g), disagree);
  CHECK(plan.order[t.id].empty());
}

namespace {
// y = relu(conv(relu(conv(x, w1)), w2) + relu(conv(x, w1))): two 3x3
// convolutions with a residual, every value between them ours to lay out.
hal::Graph conv_block(int64_t n, int64_t c, int64_t hw) {
  hal::Graph g;
  auto weights = [&](uint32_t seed) {
    std::vector<float> w(static_cast<size_t>(c * c * 9));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 7 + seed) % 13) / 13.0f - 0.45f;
    std::vector<uint8_t> bytes(w.size() * 4);
    std::memcpy(bytes.data(), w.data(), bytes.size());
    return g.constant(F32, {c, c, 3, 3}, std::move(bytes));
  };
  auto x = g.input(F32, {n, c, hw, hw}, "x");
  const hal::Attr pad = hal::Attr::ints("padding", {1, 1});
  auto a = g.add_op("relu", {g.add_op("conv2d", {x, weights(1)}, {pad})});
  auto b = g.add_op("conv2d", {a, weights(5)}, {pad});
  g.mark_output(g.add_op("relu", {g.add_op("add", {b, a})}), "y");
  return g;
}
}  // namespace

TEST_CASE("layouts on the CPU plugin: op-by-op convolutions keep channels-last values between them, same results") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  hal::Graph g = conv_block(4, 32, 14);
  hal::CompileOptions o;
  o.devices = {cpu.device()};
  o.graph_compilers = false;
  o.disk_cache = false;
  hal::CompiledGraph laid_out = hal::compile(g, o);
  o.layouts = false;
  hal::CompiledGraph row_major = hal::compile(g, o);
  CHECK(row_major.stats().relaid_values == 0);
  CHECK(!contains(row_major.explain(), "layouts between op-by-op launches"));

  std::vector<float> xs(4 * 32 * 14 * 14);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i * 31) % 17) / 17.0f - 0.5f;
  auto x = cpu.tensor({4, 32, 14, 14}, xs);
  auto y1 = cpu.empty(F32, {4, 32, 14, 14}), y2 = cpu.empty(F32, {4, 32, 14, 14});
  laid_out.run({&x.view}, {&y1.view});
  row_major.run({&x.view}, {&y2.view});
  const std::vector<float> a = cpu.read<float>(y1), b = cpu.read<float>(y2);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == doctest::Approx(b[i]).epsilon(1e-5));

  // Whether oneDNN computes these convolutions channels-last depends on the
  // CPU's ISA: ask the plugin as the planner does. When it does, the two
  // convolutions' outputs and the relu and add following them (not the
  // graph output) are channels-last.
  hal::OpRunner conv(cpu.device(), "conv2d");
  hal::TensorView in, weight, out;
  in.shape = {4, 32, 14, 14};
  weight.shape = {32, 32, 3, 3};
  out.shape = {4, 32, 14, 14};
  auto said = conv.layouts({&in, &weight, nullptr}, {&out}, {hal::Attr::ints("padding", {1, 1})});
  REQUIRE(said.has_value());
  REQUIRE(said->outputs.size() == 1);
  if (said->outputs[0] == kChannelsLast) {
    CHECK(said->inputs[0] == kChannelsLast);
    CHECK(laid_out.stats().relaid_values == 4);
    const std::string e = laid_out.explain();
    CHECK(contains(e, "layouts between op-by-op launches, as the plugins prefer them:"));
    CHECK(contains(e, "('conv2d'): dims in order (0, 2, 3, 1)"));
    CHECK(contains(e, "('add'): dims in order (0, 2, 3, 1)"));
  } else {
    MESSAGE("oneDNN computes this convolution in another layout here: nothing to lay out");
    CHECK(said->outputs[0].empty());
    CHECK(laid_out.stats().relaid_values == 0);
  }
  // A call the plugin refuses has no layout (the launch says why).
  hal::TensorView bad = in;
  bad.shape = {4, 7, 14, 14};
  CHECK(!conv.layouts({&bad, &weight, nullptr}, {&out}, {}).has_value());
}

TEST_CASE("layouts: a plugin of ABI 1.7 is never asked (op_get_layouts is zeroed below MINOR 8)") {
  hal::testing::TempDir dir;
  hal::testing::write_file(dir / "hal.toml",
                           "discover = false\n[[plugin]]\npath = \"" + std::string(HAL_TEST_CPU_PLUGIN) + "\"\n");
  hal::RuntimeOptions o;
  o.config_path = dir / "hal.toml";
  o.use_environment = false;
  o.use_install_dir = false;
  o.host_abi_minor = 7;
  auto rt = hal::Runtime::create(o);
  auto device = rt->devices().at(0);
  CHECK(device->plugin().negotiated_minor == 7);
  CHECK((device->plugin().op.op_get_layouts == nullptr));
  hal::TensorView a;
  a.shape = {2, 3};
  CHECK(!hal::OpRunner(device, "relu").layouts({&a}, {&a}).has_value());
}
