// Output aliases (ABI 1.14) on the CPU plugin: an output passed as its
// input's very tensor is updated in place (an optimizer's parameters and
// moments) and gives what separate memory gives, whether the fused loop
// writes it in place or the executable stages it (another step reads the
// input later); refusals of bad alias lists, of aliased views compile()
// does not honour, and of partial overlaps.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "hal/loader/loaded_plugin.hpp"
#include "hal/runtime/compiled_graph.hpp"
#include "hal/runtime/graph.hpp"
#include "hal/testing/op_test_util.hpp"
#include "hal/testing/test_util.hpp"

namespace {
const std::string kCpu = HAL_TEST_CPU_PLUGIN;
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;
constexpr int64_t kN = 3000;  // several tiles

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// A momentum step over two parameters: m' = m * beta + g, p' = p - lr * m'
// for (p0, m0, g0) and (p1, m1, g1); outputs p0', m0', p1', m1'. The
// updates are independent elementwise chains: one horizontal fused loop.
// With EXTRA, a reduction of p0 (its old value) is a fifth output: p0's
// last reader is then a step after the loop making p0'.
hal::Graph momentum(bool extra) {
  hal::Graph g;
  auto beta = g.input(F32, {}, "beta");
  auto lr = g.input(F32, {}, "lr");
  hal::Graph::Value p0;
  for (int k = 0; k < 2; ++k) {
    auto p = g.input(F32, {kN}, "p" + std::to_string(k));
    if (k == 0) p0 = p;
    auto m = g.input(F32, {kN}, "m" + std::to_string(k));
    auto grad = g.input(F32, {kN}, "g" + std::to_string(k));
    auto m2 = g.add_op("add", {g.add_op("mul", {m, beta}), grad});
    auto p2 = g.add_op("sub", {p, g.add_op("mul", {m2, lr})});
    g.mark_output(p2);
    g.mark_output(m2);
  }
  if (extra) g.mark_output(g.add_op("sum", {p0}));
  return g;
}

// Inputs: beta, lr, p0, m0, g0, p1, m1, g1. Outputs p0', m0', p1', m1' alias
// inputs p0, m0, p1, m1.
const std::vector<std::pair<size_t, size_t>> kAliases = {{0, 2}, {1, 3}, {2, 5}, {3, 6}};

struct Run {
  std::vector<std::vector<float>> outputs;  // in output order
};

// Runs C on fresh inputs (seeded): with IN_PLACE, the aliased outputs are
// their inputs' tensors, read back after the run.
Run run(hal::testing::OpTester& t, const hal::CompiledGraph& c, const hal::Graph& g, bool in_place) {
  std::vector<hal::testing::DeviceTensor> in;
  in.push_back(t.tensor({}, {0.9f}));
  in.push_back(t.tensor({}, {0.01f}));
  for (size_t i = 2; i < g.inputs().size(); ++i) in.push_back(t.tensor({kN}, random_floats(kN, static_cast<unsigned>(i))));
  std::vector<hal::testing::DeviceTensor> out;
  out.reserve(g.outputs().size());  // OUT_VIEWS point into it
  std::vector<const hal::TensorView*> in_views, out_views;
  for (auto& x : in) in_views.push_back(&x.view);
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    const auto& shape = g.values()[g.outputs()[j]].shape;
    out.push_back(t.empty(F32, shape));
    out_views.push_back(&out.back().view);
  }
  if (in_place)
    for (const auto& [o, i] : kAliases) out_views[o] = &in[i].view;
  c.run(in_views, out_views);
  Run r;
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    const bool aliased = in_place && j < kAliases.size();
    r.outputs.push_back(t.read<float>(aliased ? in[kAliases[j].second] : out[j]));
  }
  return r;
}

void check_close(const Run& got, const Run& want) {
  REQUIRE(got.outputs.size() == want.outputs.size());
  for (size_t j = 0; j < got.outputs.size(); ++j) {
    REQUIRE(got.outputs[j].size() == want.outputs[j].size());
    size_t bad = 0;
    for (size_t i = 0; i < got.outputs[j].size(); ++i)
      if (std::fabs(got.outputs[j][i] - want.outputs[j][i]) > 1e-5f + 1e-5f * std::fabs(want.outputs[j][i])) ++bad;
    CAPTURE(j);
    CHECK(bad == 0);
  }
}

void check_equal(const Run& got, const Run& want) {
  REQUIRE(got.outputs.size() == want.outputs.size());
  for (size_t j = 0; j < got.outputs.size(); ++j) {
    CAPTURE(j);
    CHECK(got.outputs[j] == want.outputs[j]);  // the same loop either way: bit for bit
  }
}

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const hal::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("cpu.output aliases: an optimizer step updates its parameters in place") {
  hal::testing::OpTester t(kCpu);
  const hal::Graph g = momentum(false);
  auto o = hal::testing::uncached_compile_options(t.device(), true);
  o.output_aliases = kAliases;
  const hal::CompiledGraph c = hal::compile(g, o);
  CHECK(c.output_aliases() == kAliases);
  CHECK(c.stats().groups == 1);
  const Run separate = run(t, c, g, false);
  const Run in_place = run(t, c, g, true);
  check_equal(in_place, separate);
  // The reference: op by op, no aliases.
  const hal::CompiledGraph plain = hal::compile(g, hal::testing::uncached_compile_options(t.device(), false));
  check_close(run(t, plain, g, false), separate);
  // p0' = p0 - 0.01 * (0.9 m0 + g0), from the old p0 and m0 (element 5).
  const std::vector<float> p0 = random_floats(kN, 2), m0 = random_floats(kN, 3), g0 = random_floats(kN, 4);
  const float m = m0[5] * 0.9f + g0[5];
  CHECK(in_place.outputs[1][5] == doctest::Approx(m));
  CHECK(in_place.outputs[0][5] == doctest::Approx(p0[5] - 0.01f * m));
}

TEST_CASE("cpu.output aliases: an input read after its update is staged, not overwritten early") {
  hal::testing::OpTester t(kCpu);
  hal::Graph g;
  auto p = g.input(F32, {kN}, "p");
  auto grad = g.input(F32, {kN}, "g");
  auto p2 = g.add_op("sub", {p, g.add_op("mul", {grad, grad})});
  g.mark_output(p2);
  // Read after p2 is made, by a kernel of its own (not the loop making p2).
  auto s = g.add_op("matmul", {g.add_op("reshape", {p}, {hal::Attr::ints("shape", {1, kN})}),
                               g.add_op("reshape", {p2}, {hal::Attr::ints("shape", {kN, 1})})});
  g.mark_output(s);
  auto o = hal::testing::uncached_compile_options(t.device(), true);
  o.output_aliases = {{0, 0}};
  const hal::CompiledGraph c = hal::compile(g, o);
  REQUIRE(c.output_aliases().size() == 1);
  const std::vector<float> pv = random_floats(kN, 11), gv = random_floats(kN, 12);
  auto pt = t.tensor({kN}, pv);
  auto gt = t.tensor({kN}, gv);
  auto st = t.empty(F32, {1, 1});
  c.run({&pt.view, &gt.view}, {&pt.view, &st.view});
  double want = 0;
  std::vector<float> p2v(kN);
  for (int64_t i = 0; i < kN; ++i) {
    p2v[i] = pv[i] - gv[i] * gv[i];
    want += static_cast<double>(pv[i]) * p2v[i];
  }
  CHECK(t.read<float>(pt) == p2v);  // updated
  CHECK(t.read<float>(st)[0] == doctest::Approx(want).epsilon(1e-4));  // from the old p
}

TEST_CASE("cpu.output aliases: a reduction of the old value after the update") {
  hal::testing::OpTester t(kCpu);
  const hal::Graph g = momentum(true);  // output 4: sum(p0), p0's last reader
  auto o = hal::testing::uncached_compile_options(t.device(), true);
  o.output_aliases = kAliases;
  const hal::CompiledGraph c = hal::compile(g, o);
  CHECK(c.output_aliases() == kAliases);
  check_equal(run(t, c, g, true), run(t, c, g, false));
}

TEST_CASE("cpu.output aliases: bad alias lists and views compile() does not honour") {
  hal::testing::OpTester t(kCpu);
  const hal::Graph g = momentum(false);
  auto o = hal::testing::uncached_compile_options(t.device(), true);
  auto compile_with = [&](std::vector<std::pair<size_t, size_t>> aliases) {
    return refusal([&] {
      o.output_aliases = std::move(aliases);
      hal::compile(g, o);
    });
  };
  CHECK(compile_with({{4, 2}}) == "compile: output alias 0 (output 4, input 2): the graph has 4 outputs and 8 inputs");
  CHECK(compile_with({{0, 8}}) == "compile: output alias 0 (output 0, input 8): the graph has 4 outputs and 8 inputs");
  CHECK(compile_with({{0, 2}, {0, 3}}) == "compile: output alias 1 (output 0, input 3): its output is already in alias 0");
  CHECK(compile_with({{0, 2}, {1, 2}}) == "compile: output alias 1 (output 1, input 2): its input is already in alias 0");
  CHECK(compile_with({{0, 0}}) ==
        "compile: output alias 0 (output 0, input 0): the output is float32 [3000] but the input is float32 []");

  // Op by op (no executable makes the output): not honoured, and an aliased view is refused.
  auto plain = hal::testing::uncached_compile_options(t.device(), false);
  plain.output_aliases = kAliases;
  const hal::CompiledGraph c = hal::compile(g, plain);
  CHECK(c.output_aliases().empty());
  std::string msg = refusal([&] { run(t, c, g, true); });
  CHECK(msg.find("output 0 (value") != std::string::npos);
  CHECK(msg.find("cannot update that input in place") != std::string::npos);
  CHECK(run(t, c, g, false).outputs.size() == 4);  // separate memory still runs

  // Honoured, but the output overlaps its input without being its tensor: the plugin refuses.
  o.output_aliases = kAliases;
  const hal::CompiledGraph fused = hal::compile(g, o);
  auto beta = t.tensor({}, {0.9f});
  auto lr = t.tensor({}, {0.01f});
  auto big = t.empty(F32, {2 * kN});
  std::vector<hal::testing::DeviceTensor> rest;
  for (int i = 0; i < 5; ++i) rest.push_back(t.tensor({kN}, random_floats(kN, 30 + i)));
  hal::TensorView p0(big.buffer, F32, {kN});
  hal::TensorView shifted = p0;
  shifted.byte_offset = 4;
  std::vector<hal::testing::DeviceTensor> outs;
  for (int j = 0; j < 3; ++j) outs.push_back(t.empty(F32, {kN}));
  msg = refusal([&] {
    fused.run({&beta.view, &lr.view, &p0, &rest[0].view, &rest[1].view, &rest[2].view, &rest[3].view, &rest[4].view},
              {&shifted, &outs[0].view, &outs[1].view, &outs[2].view});
  });
  CHECK(msg.find("cpu:0 group 1") != std::string::npos);  // (the group's own input and output numbers)
  CHECK(msg.find("executable_execute: output 1 (value 11) overlaps input 4 (value 4) in the same buffer") !=
        std::string::npos);
}

TEST_CASE("cpu.output aliases: the C ABI refuses a malformed alias extension") {
  hal::testing::OpTester t(kCpu);
  const hal::detail::LoadedPlugin& plugin = t.device()->plugin();
  const int64_t shape[] = {4};
  hal_graph_value_t value{sizeof(hal_graph_value_t), F32, 1, shape};
  hal_graph_value_t other{sizeof(hal_graph_value_t), HAL_DTYPE_INT64, 1, shape};
  hal_graph_value_t out_value = value;
  const hal_graph_value_t* values[] = {&value, &other, &out_value};
  const uint32_t in_ids[] = {0, 1}, out_ids[] = {2};
  hal_graph_node_t node{};
  node.struct_size = sizeof(node);
  node.op = "relu";
  node.inputs = in_ids;
  node.input_count = 1;
  node.outputs = out_ids;
  node.output_count = 1;
  const hal_graph_node_t* nodes[] = {&node};
  size_t out_index = 0, in_index = 0;
  hal_graph_output_aliases_t ext{};
  ext.base = {sizeof(ext), HAL_EXTENSION_TYPE_GRAPH_OUTPUT_ALIASES, nullptr};
  ext.count = 1;
  ext.output_indices = &out_index;
  ext.input_indices = &in_index;
  hal_graph_t g{};
  g.struct_size = sizeof(g);
  g.next = &ext;
  g.values = values;
  g.value_count = 3;
  g.nodes = nodes;
  g.node_count = 1;
  g.inputs = in_ids;
  g.input_count = 2;
  g.outputs = out_ids;
  g.output_count = 1;
  auto compile = [&]() -> std::string {
    hal_executable_t* exe = nullptr;
    hal_status_t* st = plugin.graph.graph_compile(t.device()->handle(), &g, &exe);
    if (st == nullptr) {
      hal_executable_info_t info{};
      info.struct_size = sizeof(info);
      REQUIRE(plugin.graph.executable_get_info(exe, &info) == nullptr);
      CHECK((info.flags & HAL_EXECUTABLE_FLAG_OUTPUT_ALIASES) != 0);
      REQUIRE(plugin.graph.executable_destroy(exe) == nullptr);
      return "";
    }
    std::string msg = st->message;
    st->destroy(st);
    return msg;
  };
  CHECK(compile().empty());  // well-formed
  out_index = 1;
  CHECK(compile().find("output alias 0: output index 1 is out of range (the graph has 1 outputs)") != std::string::npos);
  out_index = 0;
  in_index = 1;
  CHECK(compile().find("output alias 0: output 0 (value 2) is float32 [4] but input 1 (value 1) is int64 [4]") !=
        std::string::npos);
  in_index = 0;
  ext.output_indices = nullptr;
  CHECK(compile().find("hal_graph_output_aliases_t.output_indices is NULL") != std::string::npos);
  ext.output_indices = &out_index;
  ext.base.struct_size = sizeof(hal_extension_base_t);
  CHECK(compile().find("hal_graph_output_aliases_t.base.struct_size") != std::string::npos);
}

TEST_CASE("cpu.output aliases: a loop reading the input after writing the output stages it") {
  hal::testing::OpTester t(kCpu);
  hal::Graph g;
  auto p = g.input(F32, {kN}, "p");
  auto c = g.input(F32, {}, "c");
  auto p2 = g.add_op("mul", {p, c});
  g.mark_output(p2);                          // output 0, aliased to p
  g.mark_output(g.add_op("add", {p2, p}));    // read after p2 in the same loop: the old p
  auto o = hal::testing::uncached_compile_options(t.device(), true);
  o.output_aliases = {{0, 0}};
  const hal::CompiledGraph compiled = hal::compile(g, o);
  REQUIRE(compiled.output_aliases().size() == 1);
  CHECK(compiled.stats().kernel_count == 1);  // one loop
  const std::vector<float> pv = random_floats(kN, 21);
  auto pt = t.tensor({kN}, pv);
  auto ct = t.tensor({}, {3.0f});
  auto qt = t.empty(F32, {kN});
  compiled.run({&pt.view, &ct.view}, {&pt.view, &qt.view});
  const std::vector<float> p_now = t.read<float>(pt), q = t.read<float>(qt);
  size_t bad = 0;
  for (int64_t i = 0; i < kN; ++i)
    if (p_now[i] != pv[i] * 3.0f || q[i] != pv[i] * 3.0f + pv[i]) ++bad;
  CHECK(bad == 0);
}
