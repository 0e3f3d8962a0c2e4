// The graph-compile interface: the SDK's validation of C graphs and of
// execute's tensors (through the fixture_graph plugin's C table), and the
// runtime's Graph/compile/CompiledGraph against op-by-op results.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <deque>

#include "hal/runtime/graph.hpp"
#include "loader/loaded_plugin.hpp"
#include "testing/op_test_util.hpp"
#include "testing/test_util.hpp"

using hal::testing::DeviceTensor;
using hal::testing::fixture;
using hal::testing::OpTester;

namespace {
const std::string kCpu = HAL_TEST_CPU_PLUGIN;
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The message of STATUS (which must be an error with CODE), released.
std::string refused(hal_status_t* status, uint32_t code = HAL_STATUS_INVALID_ARGUMENT) {
  REQUIRE(status != nullptr);
  CHECK(status->code == code);
  std::string m = status->message;
  status->destroy(status);
  return m;
}

// A C graph built by hand, so that tests can make it wrong in every way.
struct RawGraph {
  std::deque<std::vector<int64_t>> shapes;
  std::deque<std::vector<uint32_t>> ids;
  std::vector<hal_graph_value_t> values;
  std::vector<hal_graph_node_t> nodes;
  std::vector<uint32_t> inputs, outputs;
  std::vector<const hal_graph_value_t*> value_ptrs;
  std::vector<const hal_graph_node_t*> node_ptrs;
  hal_graph_t graph{};

  uint32_t value(std::vector<int64_t> shape, hal_dtype_e dtype = F32) {
    shapes.push_back(std::move(shape));
    values.push_back({sizeof(hal_graph_value_t), dtype, static_cast<uint32_t>(shapes.back().size()),
                      shapes.back().data()});
    return static_cast<uint32_t>(values.size() - 1);
  }
  uint32_t input(std::vector<int64_t> shape) {
    inputs.push_back(value(std::move(shape)));
    return inputs.back();
  }
  void node(const char* op, std::vector<uint32_t> in, std::vector<uint32_t> out) {
    ids.push_back(std::move(in));
    const auto& i = ids.back();
    ids.push_back(std::move(out));
    const auto& o = ids.back();
    nodes.push_back({sizeof(hal_graph_node_t), op, i.data(), i.size(), o.data(), o.size(), nullptr, 0});
  }
  const hal_graph_t* get() {
    value_ptrs.clear();
    node_ptrs.clear();
    for (const auto& v : values) value_ptrs.push_back(&v);
    for (const auto& n : nodes) node_ptrs.push_back(&n);
    graph = {sizeof(hal_graph_t), nullptr,        value_ptrs.data(), value_ptrs.size(), node_ptrs.data(),
             node_ptrs.size(),    inputs.data(),  inputs.size(),     outputs.data(),    outputs.size()};
    return &graph;
  }
};

// out = (x + y) * y over DIM-shaped float32 values (add is node 0, mul node 1).
RawGraph add_mul(std::vector<int64_t> dim = {2, 3}) {
  RawGraph g;
  uint32_t x = g.input(dim), y = g.input(dim), s = g.value(dim), p = g.value(dim);
  g.node("add", {x, y}, {s});
  g.node("mul", {s, y}, {p});
  g.outputs = {p};
  return g;
}

struct GraphFixture {
  OpTester t{fixture("graph")};
  const hal_graph_api_t& api = t.device()->plugin().graph;
  hal_device_t* device = t.device()->handle();

  // compile's refusal of G.
  std::string compile_refusal(RawGraph& g, uint32_t code = HAL_STATUS_INVALID_ARGUMENT) {
    hal_executable_t* exe = nullptr;
    std::string m = refused(api.graph_compile(device, g.get(), &exe), code);
    CHECK(exe == nullptr);
    return m;
  }
};

// Owns an executable of the fixture plugin.
struct Exe {
  const hal_graph_api_t& api;
  hal_executable_t* handle = nullptr;
  ~Exe() {
    if (handle != nullptr) CHECK(api.executable_destroy(handle) == nullptr);
  }
};
}  // namespace

TEST_CASE("graph SDK: partition claims add-mul chains of the fixture plugin") {
  GraphFixture f;
  REQUIRE((f.api.graph_partition != nullptr));
  RawGraph g = add_mul();
  uint32_t w = g.input({3, 2}), o = g.value({2, 2});
  g.node("matmul", {g.outputs[0], w}, {o});
  g.outputs = {o};
  std::vector<uint32_t> groups(3, 77);
  REQUIRE(f.api.graph_partition(f.device, g.get(), groups.data()) == nullptr);
  CHECK(groups == std::vector<uint32_t>{1, 1, 0});
}

TEST_CASE("graph SDK: malformed graphs are INVALID_ARGUMENT naming the node or value") {
  GraphFixture f;
  RawGraph g = add_mul();
  const std::string prefix = "fixture_graph: graph_compile: ";
  SUBCASE("value id out of range") {
    g.ids[2][1] = 9;  // mul's second input
    CHECK(f.compile_refusal(g) ==
          prefix + "node 1 ('mul'): input 'other' is value 9, out of range (the graph has 4 values)");
  }
  SUBCASE("unknown op") {
    g.nodes[1].op = "frobnicate";
    CHECK(contains(f.compile_refusal(g), prefix + "node 1: op 'frobnicate' is not in the op catalog (version "));
  }
  SUBCASE("wrong input count") {
    g.nodes[0].input_count = 1;
    CHECK(f.compile_refusal(g) == prefix + "node 0 ('add'): got 1 inputs but the op takes 2 (self, other)");
  }
  SUBCASE("wrong output count") {
    g.nodes[0].output_count = 0;
    CHECK(f.compile_refusal(g) == prefix + "node 0 ('add'): got 0 outputs but the op has 1");
  }
  SUBCASE("nodes not in topological order") {
    std::swap(g.nodes[0], g.nodes[1]);
    CHECK(f.compile_refusal(g) == prefix +
                                      "node 0 ('mul'): input 'self' is value 2, which is neither a graph input nor "
                                      "produced by an earlier node (nodes must be in topological order)");
  }
  SUBCASE("a value produced twice") {
    g.ids[2][0] = 0;  // mul reads x ...
    g.ids[3][0] = 2;  // ... and writes add's output
    CHECK(f.compile_refusal(g) ==
          prefix + "node 1 ('mul'): output 'out' is value 2, already produced by node 0 (a value is produced once)");
  }
  SUBCASE("a node writing a graph input") {
    g.ids[1][0] = 1;
    CHECK(f.compile_refusal(g) == prefix + "node 0 ('add'): output 'out' is value 1, which is a graph input");
  }
  SUBCASE("rank above HAL_TENSOR_MAX_RANK") {
    g.values[2].rank = 9;
    CHECK(f.compile_refusal(g) == prefix + "value 2 has rank 9 > HAL_TENSOR_MAX_RANK (8)");
  }
  SUBCASE("an output shape the catalog's rules do not give") {
    g.shapes[2] = {2, 4};
    CHECK(f.compile_refusal(g) ==
          prefix + "node 0 ('add'): add: output 'out' has shape [2, 4] but must be [2, 3]");
  }
  SUBCASE("a dtype the catalog does not allow") {
    g.values[0].dtype = HAL_DTYPE_BOOL;
    g.values[1].dtype = HAL_DTYPE_BOOL;
    g.nodes[0].op = "matmul";
    CHECK(f.compile_refusal(g, HAL_STATUS_UNSUPPORTED_DTYPE) ==
          prefix + "node 0 ('matmul'): input 'self' (value 0) has dtype bool; the catalog allows float32, float16, "
                   "bfloat16, float64");
  }
  SUBCASE("an unknown attribute") {
    hal_attr_t beta{sizeof(hal_attr_t), "beta", HAL_ATTR_TYPE_FLOAT, {}, 0};
    g.nodes[0].attrs = &beta;
    g.nodes[0].attr_count = 1;
    CHECK(f.compile_refusal(g) == prefix + "node 0 ('add'): unknown attribute 'beta' (the op has: alpha)");
  }
  SUBCASE("a graph output nothing produces") {
    g.nodes.pop_back();
    CHECK(f.compile_refusal(g) ==
          prefix + "graph output 0 is value 3, which is neither a graph input nor produced by a node");
  }
  SUBCASE("partition refuses the same way and leaves its output untouched") {
    g.ids[2][1] = 9;
    std::vector<uint32_t> groups(2, 77);
    CHECK(contains(refused(f.api.graph_partition(f.device, g.get(), groups.data())),
                   "fixture_graph: graph_partition: node 1 ('mul'): input 'other' is value 9, out of range"));
    CHECK(groups == std::vector<uint32_t>{77, 77});
  }
  SUBCASE("a node the device does not compile") {
    g.nodes[1].op = "sub";
    CHECK(f.compile_refusal(g, HAL_STATUS_UNIMPLEMENTED) ==
          prefix + "node 1 ('sub'): this device compiles only float32 add and mul");
  }
}

TEST_CASE("graph SDK: execute checks tensors against the values and leaves outputs untouched") {
  GraphFixture f;
  RawGraph g = add_mul({-1, 3});  // dim 0 symbolic
  Exe exe{f.api};
  REQUIRE(f.api.graph_compile(f.device, g.get(), &exe.handle) == nullptr);
  hal_executable_info_t info{};
  info.struct_size = sizeof(info);
  REQUIRE(f.api.executable_get_info(exe.handle, &info) == nullptr);
  CHECK(info.kernel_count == 2);
  CHECK(std::string(info.description) == "add+mul, run node by node");
  CHECK(info.plan == nullptr);  // this executable says nothing beyond its description
  {  // a caller of ABI 1.9 (no plan field): nothing is written at or past its struct_size
    hal_executable_info_t older{};
    older.struct_size = offsetof(hal_executable_info_t, plan);
    const char* sentinel = "untouched";
    older.plan = sentinel;
    REQUIRE(f.api.executable_get_info(exe.handle, &older) == nullptr);
    CHECK(older.kernel_count == 2);
    CHECK(older.plan == sentinel);
  }

  DeviceTensor x = f.t.tensor({2, 3}, {1, 2, 3, 4, 5, 6}), y = f.t.tensor({2, 3}, {1, 1, 2, 2, 3, 3});
  DeviceTensor out = f.t.tensor({2, 3}, {-7, -7, -7, -7, -7, -7});
  auto run = [&](const hal::TensorView& a, const hal::TensorView& b, const hal::TensorView& o) {
    hal_tensor_t ta = hal::detail::c_tensor("t", a, "input", 0), tb = hal::detail::c_tensor("t", b, "input", 1),
                 to = hal::detail::c_tensor("t", o, "output", 0);
    const hal_tensor_t* in[] = {&ta, &tb};
    const hal_tensor_t* outs[] = {&to};
    return f.api.executable_execute(exe.handle, in, 2, outs, 1, nullptr);
  };
  const std::string prefix = "fixture_graph: executable_execute: ";
  SUBCASE("a dtype other than the value's") {
    DeviceTensor bad = f.t.empty(HAL_DTYPE_INT32, {2, 3});
    CHECK(refused(run(x.view, bad.view, out.view)) ==
          prefix + "input 1 (value 1) has dtype int32 but the value's is float32");
  }
  SUBCASE("a concrete dim that differs") {
    DeviceTensor bad = f.t.empty(F32, {2, 4});
    CHECK(refused(run(x.view, y.view, bad.view)) ==
          prefix + "output 0 (value 3) has shape [2, 4] but the value's is [-1, 3] (dim 1)");
  }
  SUBCASE("a symbol bound to two sizes") {
    DeviceTensor bad = f.t.empty(F32, {4, 3});
    CHECK(refused(run(x.view, bad.view, out.view)) ==
          prefix + "input 1 (value 1): dim 0 is 4 but symbol -1 is 2 (bound by input 0 (value 0))");
  }
  SUBCASE("an output overlapping an input") {
    CHECK(refused(run(x.view, y.view, x.view)) == prefix + "output 0 (value 3) overlaps input 0 (value 0) in the same buffer");
  }
  // Views of rows of one [6, 3] buffer (12 bytes a row).
  DeviceTensor whole = f.t.tensor({6, 3}, {1, 2, 3, 4, 5, 6, 1, 1, 2, 2, 3, 3, -7, -7, -7, -7, -7, -7});
  auto rows = [&](uint64_t first_row) {
    hal::TensorView v = whole.view;
    v.shape = {2, 3};
    v.byte_offset = first_row * 12;
    return v;
  };
  SUBCASE("inputs and an output side by side in one buffer run") {
    REQUIRE(run(rows(0), rows(2), rows(4)) == nullptr);
    CHECK(f.t.read<float>(whole) ==
          std::vector<float>{1, 2, 3, 4, 5, 6, 1, 1, 2, 2, 3, 3, 2, 3, 10, 12, 24, 27});
  }
  SUBCASE("an output starting inside an input") {
    CHECK(refused(run(x.view, rows(2), rows(3))) ==
          prefix + "output 0 (value 3) overlaps input 1 (value 1) in the same buffer");
  }
  SUBCASE("an input starting inside an output") {
    CHECK(refused(run(x.view, rows(3), rows(2))) ==
          prefix + "output 0 (value 3) overlaps input 1 (value 1) in the same buffer");
    CHECK(f.t.read<float>(whole)[12] == -7);  // untouched
  }
  SUBCASE("a run repeating checked tensors skips nothing a changed run needs") {
    // The SDK remembers the last checked tensors (a repeat skips the
    // overlap checks): runs that differ from it in one offset, or only in
    // a stride, are checked again.
    REQUIRE(run(rows(0), rows(2), rows(4)) == nullptr);
    REQUIRE(run(rows(0), rows(2), rows(4)) == nullptr);
    CHECK(refused(run(rows(0), rows(2), rows(3))) ==
          prefix + "output 0 (value 3) overlaps input 1 (value 1) in the same buffer");
    hal::TensorView broadcast = rows(4);
    broadcast.strides = {0, 1};  // both rows one: a view that cannot be written
    CHECK(refused(run(rows(0), rows(2), broadcast)) ==
          prefix + "output 0 (value 3) with shape [2, 3] and strides [0, 1] has overlapping elements (a broadcast view cannot be written)");
    REQUIRE(run(rows(0), rows(2), rows(4)) == nullptr);
    CHECK(refused(run(rows(0), rows(2), rows(2))) ==
          prefix + "output 0 (value 3) overlaps input 1 (value 1) in the same buffer");
    CHECK(f.t.read<float>(whole) == std::vector<float>{1, 2, 3, 4, 5, 6, 1, 1, 2, 2, 3, 3, 2, 3, 10, 12, 24, 27});
  }
  SUBCASE("the wrong number of tensors") {
    hal_tensor_t ta = hal::detail::c_tensor("t", x.view, "input", 0);
    const hal_tensor_t* in[] = {&ta};
    CHECK(refused(f.api.executable_execute(exe.handle, in, 1, nullptr, 0, nullptr)) ==
          prefix + "got 1 inputs and 0 outputs but the graph has 2 and 1");
  }
  CHECK(f.t.read<float>(out) == std::vector<float>(6, -7));  // untouched by every refusal
  SUBCASE("valid tensors run") {
    REQUIRE(run(x.view, y.view, out.view) == nullptr);
    CHECK(f.t.read<float>(out) == std::vector<float>{2, 3, 10, 12, 24, 27});
  }
  SUBCASE("a destroyed executable is refused, not a crash") {
    REQUIRE(f.api.executable_destroy(exe.handle) == nullptr);
    CHECK(contains(refused(f.api.executable_destroy(exe.handle)), "is not a live executable of this plugin"));
    exe.handle = nullptr;
  }
}

namespace {
// x, y: [-1, 4]; w: [4, 2]. s = x + 2y; p = s * y; o = p @ w. Outputs p, o.
hal::Graph add_mul_matmul() {
  hal::Graph g;
  auto x = g.input(F32, {-1, 4}), y = g.input(F32, {-1, 4}), w = g.input(F32, {4, 2});
  auto s = g.add_op("add", {x, y}, {F32, {-1, 4}}, {hal::Attr::scalar("alpha", 2.0)});
  auto p = g.add_op("mul", {s, y}, {F32, {-1, 4}});
  auto o = g.add_op("matmul", {p, w}, {F32, {-1, 2}});
  g.mark_output(p);
  g.mark_output(o);
  return g;
}

const std::vector<float> kX = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, kY = {1, -1, 2, -2, 0.5, 3, -3, 1, 2, 2, 2, 2},
                         kW = {1, 2, 3, 4, 5, 6, 7, 8};

// p and o of add_mul_matmul on T's device: through the graph (GRAPH set) or op by op.
std::pair<std::vector<float>, std::vector<float>> evaluate(OpTester& t, const hal::CompiledGraph* graph) {
  DeviceTensor x = t.tensor({3, 4}, kX), y = t.tensor({3, 4}, kY), w = t.tensor({4, 2}, kW);
  DeviceTensor s = t.empty(F32, {3, 4}), p = t.empty(F32, {3, 4}), o = t.empty(F32, {3, 2});
  if (graph != nullptr) {
    hal::Stream stream = t.device()->create_stream();
    graph->run({&x.view, &y.view, &w.view}, {&p.view, &o.view}, &stream);
    stream.synchronize();
  } else {
    t.run("add", {&x.view, &y.view}, {&s.view}, {hal::Attr::scalar("alpha", 2.0)});
    t.run("mul", {&s.view, &y.view}, {&p.view});
    t.run("matmul", {&p.view, &w.view}, {&o.view});
  }
  return {t.read<float>(p), t.read<float>(o)};
}

void check_close(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-6));
}
}  // namespace

TEST_CASE("graph runtime: claimed add-mul group plus op-by-op matmul equals op by op on the CPU plugin") {
  OpTester cpu(kCpu);
  auto expected = evaluate(cpu, nullptr);

  OpTester fx(fixture("graph"));
  hal::Graph g = add_mul_matmul();
  hal::CompiledGraph compiled = hal::compile(*fx.device(), g);
  CHECK(compiled.stats().groups == 1);
  CHECK(compiled.stats().kernel_count == 2);  // the fixture runs add and mul one by one
  CHECK(compiled.stats().op_nodes == 1);      // matmul
  CHECK(compiled.stats().descriptions == std::vector<std::string>{"add+mul, run node by node"});
  auto got = evaluate(fx, &compiled);
  check_close(got.first, expected.first);
  check_close(got.second, expected.second);
  // Inputs the group reads must be contiguous; only the matmul reads w.
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    bool group_reads = false;
    for (const auto& n : g.nodes())
      for (uint32_t v : n.inputs) group_reads = group_reads || (v == g.inputs()[i] && n.op != "matmul");
    CHECK(compiled.accepts_strided_input(i) == !group_reads);
  }
  CHECK_THROWS_WITH_AS(compiled.accepts_strided_input(g.inputs().size()),
                       doctest::Contains("accepts_strided_input: input"), hal::Error);

  // The add's result is made and read inside the group only: a run allocates no buffer for it
  // (nor for anything else: the outputs are the caller's).
  {
    DeviceTensor x = fx.tensor({3, 4}, kX), y = fx.tensor({3, 4}, kY), w = fx.tensor({4, 2}, kW);
    DeviceTensor p = fx.empty(F32, {3, 4}), o = fx.empty(F32, {3, 2});
    hal::Stream stream = fx.device()->create_stream();
    const uint64_t before = fx.device()->allocator().stats().allocations;
    compiled.run({&x.view, &y.view, &w.view}, {&p.view, &o.view}, &stream);
    stream.synchronize();
    CHECK(fx.device()->allocator().stats().allocations == before);
    check_close(fx.read<float>(p), expected.first);
  }

  // The same graph with graph compilers off runs op by op.
  hal::CompileOptions op_by_op;
  op_by_op.devices = {cpu.device()};
  op_by_op.graph_compilers = false;
  hal::CompiledGraph on_cpu = hal::compile(g, op_by_op);
  for (size_t i = 0; i < g.inputs().size(); ++i) CHECK(on_cpu.accepts_strided_input(i));
  CHECK(on_cpu.stats().groups == 0);
  CHECK(on_cpu.stats().kernel_count == 0);
  CHECK(on_cpu.stats().op_nodes == 3);
  auto cpu_graph = evaluate(cpu, &on_cpu);
  check_close(cpu_graph.first, expected.first);
  check_close(cpu_graph.second, expected.second);
}

TEST_CASE("graph runtime: a path through an unclaimed node splits the claimed nodes into convex groups") {
  // a = x + x; m = a @ w; b = m + a: a and b cannot be one group (m sits
  // between them), so the fixture makes two.
  hal::Graph g;
  auto x = g.input(F32, {2, 2}), w = g.input(F32, {2, 2});
  auto a = g.add_op("add", {x, x}, {F32, {2, 2}});
  auto m = g.add_op("matmul", {a, w}, {F32, {2, 2}});
  auto b = g.add_op("add", {m, a}, {F32, {2, 2}});
  g.mark_output(b);
  OpTester fx(fixture("graph"));
  hal::CompiledGraph c = hal::compile(*fx.device(), g);
  CHECK(c.stats().groups == 2);
  CHECK(c.stats().op_nodes == 1);
  DeviceTensor tx = fx.tensor({2, 2}, {1, 2, 3, 4}), tw = fx.tensor({2, 2}, {1, 0, 0, 1}), out = fx.empty(F32, {2, 2});
  c.run({&tx.view, &tw.view}, {&out.view});
  CHECK(fx.read<float>(out) == std::vector<float>{4, 8, 12, 16});
}

TEST_CASE("graph runtime: a partition whose groups cannot be ordered is refused") {
  hal::testing::TempDir dir;
  auto rt = hal::testing::load_config(
      dir, "[[plugin]]\npath = \"" + fixture("graph") + "\"\noptions = { partition = \"one_group\" }\n");
  REQUIRE(rt->devices().size() == 1);
  hal::Graph g;  // a = x + x; m = a @ w; b = m + a: {a, b} as one group needs m both before and after it
  auto x = g.input(F32, {2, 2}), w = g.input(F32, {2, 2});
  auto a = g.add_op("add", {x, x}, {F32, {2, 2}});
  auto m = g.add_op("matmul", {a, w}, {F32, {2, 2}});
  g.mark_output(g.add_op("add", {m, a}, {F32, {2, 2}}));
  try {
    hal::compile(*rt->devices()[0], g);
    FAIL("compiled");
  } catch (const hal::Error& e) {
    CHECK(e.code() == HAL_STATUS_FAILED_PRECONDITION);
    CHECK(std::string(e.what()) == "fixture_graph: graph_partition: the groups cannot be ordered (group(s) 1 are not "
                                   "convex: a path leaves and re-enters them)");
  }
}

TEST_CASE("graph runtime: run checks the views first, naming the value, and writes nothing on error") {
  OpTester fx(fixture("graph"));
  hal::CompiledGraph c = hal::compile(*fx.device(), add_mul_matmul());
  DeviceTensor x = fx.tensor({3, 4}, kX), y = fx.tensor({3, 4}, kY), w = fx.tensor({4, 2}, kW);
  DeviceTensor p = fx.tensor({3, 4}, std::vector<float>(12, -1)), o = fx.tensor({3, 2}, std::vector<float>(6, -1));
  DeviceTensor y5 = fx.empty(F32, {5, 4}), wi = fx.empty(HAL_DTYPE_INT32, {4, 2});
  auto refusal = [&](const hal::TensorView& yv, const hal::TensorView& wv) {
    try {
      c.run({&x.view, &yv, &wv}, {&p.view, &o.view});
    } catch (const hal::Error& e) {
      CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    FAIL("run accepted bad views");
    return std::string();
  };
  CHECK(refusal(y5.view, w.view) ==
        "CompiledGraph::run: input 1 (value 1): dim 0 is 5 but symbol -1 is 3 (bound by input 0 (value 0))");
  CHECK(refusal(y.view, wi.view) == "CompiledGraph::run: input 2 (value 2) has dtype int32 but the value's is float32");
  CHECK_THROWS_WITH_AS(c.run({&x.view}, {}), "CompiledGraph::run: got 1 inputs and 0 outputs but the graph has 3 and 2",
                       hal::Error);
  CHECK(fx.read<float>(p) == std::vector<float>(12, -1));
  CHECK(fx.read<float>(o) == std::vector<float>(6, -1));
}

TEST_CASE("graph runtime: compile errors name the node") {
  OpTester fx(fixture("graph"));
  SUBCASE("an op the plugin has no kernel for") {
    hal::Graph g;
    auto x = g.input(F32, {2});
    g.mark_output(g.add_op("exp", {x}, {F32, {2}}));
    try {
      hal::compile(*fx.device(), g);
      FAIL("compiled");
    } catch (const hal::Error& e) {
      CHECK(e.code() == HAL_STATUS_UNIMPLEMENTED);
      CHECK(contains(e.what(), "node 0 ('exp'): no device runs op 'exp': fixture_graph:0: no kernel (fixture_graph: "
                               "op_resolve: op 'exp' is in the catalog but not implemented"));
    }
  }
  SUBCASE("a node the plugin's graph validation refuses") {
    hal::Graph g;
    auto x = g.input(F32, {2});
    g.mark_output(g.add_op("add", {x, x}, {F32, {3}}));
    CHECK_THROWS_WITH_AS(hal::compile(*fx.device(), g),
                         "fixture_graph: graph_partition: node 0 ('add'): add: output 'out' has shape [3] but must be [2]",
                         hal::Error);
  }
  SUBCASE("the builder refuses what it can see") {
    hal::Graph g;
    auto x = g.input(F32, {2});
    CHECK_THROWS_WITH_AS(g.mark_output(x),
                         "mark_output: value 0 is a graph input; an output must be produced by a node", hal::Error);
    CHECK_THROWS_WITH_AS(g.input(F32, std::vector<int64_t>(9, 1)), "graph input 1 has rank 9 > HAL_TENSOR_MAX_RANK (8)",
                         hal::Error);
    CHECK_THROWS_WITH_AS(g.add_op("add", {x, hal::Graph::Value{7}}, {F32, {2}}),
                         "node 0 ('add'): input 1 is value 7, not a value of this graph", hal::Error);
    CHECK(g.values().size() == 1);
  }
}

TEST_CASE("graph IR: constants are owned by the graph, uploaded once and read like inputs") {
  hal::Graph g;
  auto x = g.input(F32, {-1, 4}, "x");
  std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(w.data()),
                             reinterpret_cast<const uint8_t*>(w.data()) + w.size() * sizeof(float));
  auto c = g.constant(F32, {4, 2}, bytes, "w");
  auto o = g.add_op("matmul", {x, c}, {F32, {-1, 2}});
  g.mark_output(o, "y");
  CHECK(g.is_constant(c.id));
  CHECK_FALSE(g.is_constant(x.id));
  CHECK(g.constants() == std::vector<uint32_t>{c.id});
  CHECK(*g.constant_data(c.id) == bytes);
  CHECK(g.value_name(x.id) == "x");
  CHECK(g.value_name(o.id) == "y");
  CHECK(g.inputs() == std::vector<uint32_t>{x.id});  // a constant is not fed

  OpTester cpu(kCpu);
  hal::CompiledGraph compiled = hal::compile(*cpu.device(), g);
  DeviceTensor xt = cpu.tensor({3, 4}, kX), out = cpu.empty(F32, {3, 2});
  compiled.run({&xt.view}, {&out.view});
  std::vector<float> got = cpu.read<float>(out);
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 2; ++k) {
      float want = 0;
      for (int i = 0; i < 4; ++i) want += kX[r * 4 + i] * w[i * 2 + k];
      CHECK(got[r * 2 + k] == doctest::Approx(want));
    }
}

TEST_CASE("graph runtime: a graph that is one executable gets the caller's views in the graph's output order") {
  // Outputs listed against the order the nodes make them (the executable's
  // own order), plus a constant: the run maps each boundary tensor home.
  hal::Graph g;
  auto x = g.input(F32, {-1, 4}), y = g.input(F32, {-1, 4});
  std::vector<float> w = kW;
  std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(w.data()),
                             reinterpret_cast<const uint8_t*>(w.data()) + w.size() * sizeof(float));
  auto c = g.constant(F32, {4, 2}, bytes, "w");
  auto s = g.add_op("add", {x, y}, {F32, {-1, 4}}, {hal::Attr::scalar("alpha", 2.0)});
  auto p = g.add_op("mul", {s, y}, {F32, {-1, 4}});
  auto o = g.add_op("matmul", {p, c}, {F32, {-1, 2}});
  g.mark_output(o);
  g.mark_output(p);
  OpTester cpu(kCpu);
  hal::CompiledGraph compiled = hal::compile(*cpu.device(), g);
  REQUIRE(compiled.stats().devices.size() == 1);
  CHECK(compiled.stats().devices[0].groups == 1);
  CHECK(compiled.stats().devices[0].op_nodes == 0);
  const auto [want_p, want_o] = evaluate(cpu, nullptr);
  for (int run = 0; run < 2; ++run) {  // the second with every view as the first
    DeviceTensor xt = cpu.tensor({3, 4}, kX), yt = cpu.tensor({3, 4}, kY);
    DeviceTensor ot = cpu.empty(F32, {3, 2}), pt = cpu.empty(F32, {3, 4});
    compiled.run({&xt.view, &yt.view}, {&ot.view, &pt.view});
    CHECK(cpu.read<float>(pt) == want_p);
    CHECK(cpu.read<float>(ot) == want_o);
  }
  // Checked first: a view of the wrong shape names its output, writes nothing.
  DeviceTensor xt = cpu.tensor({3, 4}, kX), yt = cpu.tensor({3, 4}, kY);
  DeviceTensor ot = cpu.tensor({3, 2}, std::vector<float>(6, -7)), bad = cpu.empty(F32, {3, 5});
  CHECK_THROWS_WITH_AS(compiled.run({&xt.view, &yt.view}, {&ot.view, &bad.view}),
                       doctest::Contains("output 1 (value"), hal::Error);
  CHECK(cpu.read<float>(ot) == std::vector<float>(6, -7));
}

TEST_CASE("graph IR: bad constants, symbols and names are refused naming what is wrong") {
  hal::Graph g;
  CHECK_THROWS_WITH(g.constant(F32, {2, 2}, std::vector<uint8_t>(15), "w"),
                    doctest::Contains("constant 0 ('w') of shape [2, 2] and dtype float32 needs 16 bytes but got 15"));
  CHECK_THROWS_WITH(g.constant(F32, {-1}, {}, "v"), doctest::Contains("a constant's shape must be concrete"));
  CHECK(g.values().empty());  // nothing was added
  int64_t seq = g.symbol("seq"), batch = g.symbol("batch");
  CHECK(seq == -1);
  CHECK(batch == -2);
  CHECK(g.symbol("seq") == seq);
  CHECK(g.symbol_name(seq) == "seq");
  CHECK(g.symbol_name(-7) == "s7");
  CHECK_THROWS_WITH(g.symbol(""), doctest::Contains("the name is empty"));
  auto c = g.constant(F32, {1}, std::vector<uint8_t>(4));
  CHECK_THROWS_WITH(g.mark_output(c), doctest::Contains("is a constant"));
  CHECK_THROWS_WITH(g.value_name(99), doctest::Contains("value 99 is not a value of this graph"));
}

TEST_CASE("graph runtime: reshapes cost no launch unless they read a strided view or write a strided output") {
  // t = x + x; r = reshape(t) to [3, 2]; o = r * r (r is not an output: it aliases t).
  hal::Graph g;
  auto x = g.input(F32, {2, 3});
  auto t = g.add_op("add", {x, x});
  auto r = g.add_op("reshape", {t}, {hal::Attr::ints("shape", {3, 2})});
  auto o = g.add_op("mul", {r, r});
  auto r2 = g.add_op("reshape", {o}, {hal::Attr::ints("shape", {6})});  // an output: mul writes it
  auto r3 = g.add_op("reshape", {x}, {hal::Attr::ints("shape", {6})});  // reads the caller's view
  auto o3 = g.add_op("neg", {r3});
  auto r4 = g.add_op("reshape", {x}, {hal::Attr::ints("shape", {3, 2})});  // an output of an input: launched
  g.mark_output(r2);
  g.mark_output(o3);
  g.mark_output(r4);
  OpTester cpu(kCpu);
  hal::CompileOptions op_by_op;  // the core's own reshape handling: no plugin group
  op_by_op.devices = {cpu.device()};
  op_by_op.graph_compilers = false;
  hal::CompiledGraph c = hal::compile(g, op_by_op);
  CHECK(c.stats().alias_nodes == 3);
  CHECK(c.stats().op_nodes == 4);  // add, mul, neg, r4
  CHECK(contains(c.explain(), "node 1 ('reshape') aliases its input (no launch)"));
  CHECK(contains(c.explain(), "node 3 ('reshape') is its input, made in the output's buffer (no launch)"));
  CHECK(contains(c.explain(), "node 6 ('reshape') op by op"));
  DeviceTensor out4 = cpu.empty(F32, {3, 2});
  DeviceTensor tx = cpu.tensor({2, 3}, {1, 2, 3, 4, 5, 6}), out = cpu.empty(F32, {6}), out3 = cpu.empty(F32, {6});
  c.run({&tx.view}, {&out.view, &out3.view, &out4.view});
  CHECK(cpu.read<float>(out) == std::vector<float>{4, 16, 36, 64, 100, 144});
  CHECK(cpu.read<float>(out3) == std::vector<float>{-1, -2, -3, -4, -5, -6});
  CHECK(cpu.read<float>(out4) == std::vector<float>{1, 2, 3, 4, 5, 6});

  // Output 0 as a strided view (every other float of 12): the reshape writes it.
  DeviceTensor wide = cpu.tensor({12}, std::vector<float>(12, 0.f));
  hal::TensorView every_other = wide.view;
  every_other.shape = {6};
  every_other.strides = {2};
  c.run({&tx.view}, {&every_other, &out3.view, &out4.view});
  CHECK(cpu.read<float>(wide) == std::vector<float>{4, 0, 16, 0, 36, 0, 64, 0, 100, 0, 144, 0});

  // x as the caller's transposed view of a [3, 2] buffer: reshape must read it in x's order.
  DeviceTensor tt = cpu.tensor({3, 2}, {1, 4, 2, 5, 3, 6});
  hal::TensorView xt = tt.view;
  xt.shape = {2, 3};
  xt.strides = {1, 2};
  c.run({&xt}, {&out.view, &out3.view, &out4.view});
  CHECK(cpu.read<float>(out) == std::vector<float>{4, 16, 36, 64, 100, 144});
  CHECK(cpu.read<float>(out3) == std::vector<float>{-1, -2, -3, -4, -5, -6});
}
