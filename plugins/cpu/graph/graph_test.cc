// The CPU plugin's graph compile: host-graph executables over its kernels
// (hal/sdk/host_graph.hpp) with oneDNN conv fusions, checked against the
// same graphs run op by op; symbolic shapes planned per input shape from
// one compile; constant inputs (ABI 1.7) pre-packed; the graph_compile
// option; refusals of bad tensors and bad constant extensions.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <tuple>

#include "hal/runtime/compiled_graph.hpp"
#include "hal/runtime/graph.hpp"
#include "hal/loader/loaded_plugin.hpp"
#include "hal/testing/op_test_util.hpp"
#include "hal/testing/test_util.hpp"

namespace {
const std::string kCpu = HAL_TEST_CPU_PLUGIN;
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(float));
}

// A ResNet basic block with a downsample, batch symbolic, weights constant:
// conv+relu, conv+add+relu (residual = the downsample conv), then a mul so
// the block's result is an intermediate.
hal::Graph basic_block() {
  hal::Graph g;
  const int64_t n = g.symbol("batch");
  auto x = g.input(F32, {n, 3, 8, 8}, "x");
  auto w1 = g.constant(F32, {4, 3, 3, 3}, bytes_of(random_floats(108, 1)), "w1");
  auto b1 = g.constant(F32, {4}, bytes_of(random_floats(4, 2)), "b1");
  auto w2 = g.constant(F32, {4, 4, 3, 3}, bytes_of(random_floats(144, 3)), "w2");
  auto wd = g.constant(F32, {4, 3, 1, 1}, bytes_of(random_floats(12, 4)), "wd");
  auto pad = hal::Attr::ints("padding", {1, 1});
  auto c1 = g.add_op("conv2d", {x, w1, b1}, {pad});
  auto r1 = g.add_op("relu", {c1});
  auto c2 = g.add_op("conv2d", {r1, w2}, {pad});
  auto ds = g.add_op("conv2d", {x, wd});
  auto s = g.add_op("add", {c2, ds});
  auto o = g.add_op("relu", {s});
  g.mark_output(g.add_op("mul", {o, o}), "y");
  return g;
}

std::vector<float> run_block(hal::testing::OpTester& t, const hal::CompiledGraph& c, int64_t batch) {
  auto x = t.tensor({batch, 3, 8, 8}, random_floats(static_cast<size_t>(batch) * 192, 7));
  auto out = c.run_allocating({&x.view});
  REQUIRE(out.size() == 1);
  std::vector<float> y(static_cast<size_t>(batch) * 256);
  out[0].buffer.copy_to_host(y.data(), y.size() * 4);
  return y;
}

constexpr auto opts = hal::testing::uncached_compile_options;

void check_close(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-4f + 1e-4f * std::fabs(want[i])) ++bad;
  CHECK(bad == 0);
}

// Every output of FUSED and PLAIN run on X: equal (int64) or close (float32).
void check_same_outputs(const hal::CompiledGraph& fused, const hal::CompiledGraph& plain, const hal::TensorView& x) {
  auto got = fused.run_allocating({&x});
  auto want = plain.run_allocating({&x});
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    const size_t n = static_cast<size_t>(got[o].view.numel());
    if (got[o].view.dtype == HAL_DTYPE_INT64) {
      std::vector<int64_t> a(n), b(n);
      got[o].buffer.copy_to_host(a.data(), n * 8);
      want[o].buffer.copy_to_host(b.data(), n * 8);
      CHECK(a == b);
      continue;
    }
    std::vector<float> a(n), b(n);
    got[o].buffer.copy_to_host(a.data(), n * 4);
    want[o].buffer.copy_to_host(b.data(), n * 4);
    check_close(a, b);
  }
}
}  // namespace

TEST_CASE("cpu graph: a basic block compiles to one group with fused convolutions and matches op by op") {
  hal::testing::OpTester t(kCpu);
  hal::CompiledGraph fused = hal::compile(basic_block(), opts(t.device(), true));
  hal::CompiledGraph plain = hal::compile(basic_block(), opts(t.device(), false));
  CHECK(fused.stats().groups == 1);
  CHECK(fused.stats().compiled == 1);
  CHECK(fused.stats().devices[0].op_nodes == 0);
  // conv+relu, conv+add+relu, the downsample conv, the mul: 7 nodes, 4 kernels.
  CHECK(fused.stats().kernel_count == 4);
  REQUIRE(fused.stats().descriptions.size() == 1);
  CHECK(fused.stats().descriptions[0].find("conv2d+add+relu") != std::string::npos);
  CHECK(plain.stats().groups == 0);
  CHECK(plain.stats().devices[0].op_nodes == 7);
  // Two batch sizes through the one executable (one plan each), twice each:
  // the second run reuses the plan, the arena and the packed weights.
  for (int64_t batch : {1, 3, 1, 3}) check_close(run_block(t, fused, batch), run_block(t, plain, batch));
}

// A ResNet stem: conv+relu, max_pool2d (indices unread), a basic block
// whose residual is the pool's output, global mean, linear. Channels 16,
// where oneDNN computes channels-last: the convolutions and the pool pass
// channels-last intermediates along, the mean and reshape read them.
hal::Graph stem(bool pool_indices_read) {
  hal::Graph g;
  const int64_t n = g.symbol("batch");
  auto x = g.input(F32, {n, 3, 16, 16}, "x");
  auto w1 = g.constant(F32, {16, 3, 3, 3}, bytes_of(random_floats(432, 11)), "w1");
  auto w2 = g.constant(F32, {16, 16, 3, 3}, bytes_of(random_floats(2304, 12)), "w2");
  auto w3 = g.constant(F32, {16, 16, 3, 3}, bytes_of(random_floats(2304, 13)), "w3");
  auto b3 = g.constant(F32, {16}, bytes_of(random_floats(16, 14)), "b3");
  auto wl = g.constant(F32, {10, 16}, bytes_of(random_floats(160, 15)), "wl");
  auto pad = hal::Attr::ints("padding", {1, 1});
  auto r1 = g.add_op("relu", {g.add_op("conv2d", {x, w1}, {pad})});
  auto pool = g.add_node("max_pool2d", {r1}, {hal::Attr::ints("kernel_size", {3, 3}), hal::Attr::ints("stride", {2, 2}),
                                             hal::Attr::ints("padding", {1, 1})}, 2);
  auto r2 = g.add_op("relu", {g.add_op("conv2d", {pool[0], w2}, {pad})});
  auto r3 = g.add_op("relu", {g.add_op("add", {g.add_op("conv2d", {r2, w3, b3}, {pad}), pool[0]})});
  auto m = g.add_op("mean", {r3}, {hal::Attr::ints("dim", {2, 3}), hal::Attr::b("keepdim", true)});
  auto flat = g.add_op("reshape", {m}, {hal::Attr::ints("shape", {-1, 16})});
  g.mark_output(g.add_op("linear", {flat, wl}), "y");
  if (pool_indices_read) g.mark_output(pool[1], "indices");
  return g;
}

TEST_CASE("cpu graph: a ResNet stem's convolutions and max_pool2d fuse and pass their layout along - equal to op by op") {
  hal::testing::OpTester t(kCpu);
  for (bool indices : {false, true}) {
    CAPTURE(indices);
    hal::CompiledGraph fused = hal::compile(stem(indices), opts(t.device(), true));
    hal::CompiledGraph plain = hal::compile(stem(indices), opts(t.device(), false));
    CHECK(fused.stats().groups == 1);
    REQUIRE(fused.stats().descriptions.size() == 1);
    const std::string& d = fused.stats().descriptions[0];
    // A pool whose indices are read is the op's kernel (it writes them).
    CHECK((d.find("max_pool2d") != std::string::npos) == !indices);
    CHECK(d.find("conv2d+add+relu") != std::string::npos);
    for (int64_t batch : {1, 3, 1}) {
      auto x = t.tensor({batch, 3, 16, 16}, random_floats(static_cast<size_t>(batch) * 768, 16));
      check_same_outputs(fused, plain, x.view);
    }
  }
}

TEST_CASE("cpu graph: the fused max_pool2d lets NaN win and clips windows at the borders, as the op's kernel") {
  hal::testing::OpTester t(kCpu);
  hal::Graph g;
  auto x = g.input(F32, {2, 16, 7, 7}, "x");
  auto w = g.constant(F32, {16, 16, 1, 1}, bytes_of(random_floats(256, 21)), "w");
  auto c = g.add_op("conv2d", {x, w});
  auto pool = g.add_node("max_pool2d", {c}, {hal::Attr::ints("kernel_size", {3, 3}), hal::Attr::ints("stride", {2, 2}),
                                            hal::Attr::ints("padding", {1, 1}), hal::Attr::ints("dilation", {1, 1})}, 2);
  g.mark_output(g.add_op("add", {pool[0], pool[0]}), "y");
  hal::CompiledGraph fused = hal::compile(g, opts(t.device(), true));
  hal::CompiledGraph plain = hal::compile(g, opts(t.device(), false));
  REQUIRE(fused.stats().descriptions.size() == 1);
  CHECK(fused.stats().descriptions[0].find("max_pool2d") != std::string::npos);
  std::vector<float> xs = random_floats(2 * 16 * 49, 22);
  xs[3 * 49 + 10] = std::nanf("");  // NaN through the 1x1 conv into every channel at that pixel
  xs[20 * 49 + 48] = -INFINITY;
  auto in = t.tensor({2, 16, 7, 7}, xs);
  std::vector<float> got(2 * 16 * 16), want(got.size());
  fused.run_allocating({&in.view})[0].buffer.copy_to_host(got.data(), got.size() * 4);
  plain.run_allocating({&in.view})[0].buffer.copy_to_host(want.data(), want.size() * 4);
  size_t nans = 0, bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ++nans;
      if (!std::isnan(got[i])) ++bad;
    } else if (!(got[i] == want[i] || std::fabs(got[i] - want[i]) <= 1e-4f + 1e-4f * std::fabs(want[i]))) {
      ++bad;
    }
  }
  CHECK(nans > 0);
  CHECK(bad == 0);
}

TEST_CASE("cpu graph: a transpose read only by matrix products is a strided view - a head split or another reader copies") {
  hal::testing::OpTester t(kCpu);
  for (int variant = 0; variant < 3; ++variant) {
    CAPTURE(variant);
    hal::Graph g;
    auto a = g.input(F32, {2, 4, 8, 6}, "a");
    auto b = g.add_op("exp", {a});
    // 0: K's transpose (the matrix dims); 1: a head split (batch dims move); 2: the transpose, also negated.
    const std::vector<int64_t> dims = variant == 1 ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{0, 1, 3, 2};
    auto p = g.add_op("permute", {b}, {hal::Attr::ints("dims", dims)});
    auto q = variant == 1 ? g.add_op("permute", {g.add_op("tanh", {a})}, {hal::Attr::ints("dims", {0, 2, 3, 1})})
                          : g.add_op("tanh", {a});
    auto m = variant == 1 ? g.add_op("matmul", {p, q}) : g.add_op("matmul", {q, p});  // [2,8,4,6] @ [2,8,6,4] / [2,4,8,6] @ [2,4,6,8]
    g.mark_output(m, "m");
    if (variant == 2) g.mark_output(g.add_op("neg", {p}), "n");
    hal::CompiledGraph fused = hal::compile(g, opts(t.device(), true));
    hal::CompiledGraph plain = hal::compile(g, opts(t.device(), false));
    // exp, tanh, matmul (+ the permute copies, + neg)
    CHECK(fused.stats().kernel_count == (variant == 0 ? 3u : variant == 1 ? 5u : 5u));
    auto x = t.tensor({2, 4, 8, 6}, random_floats(384, 31));
    check_same_outputs(fused, plain, x.view);
  }
}

TEST_CASE("cpu graph: intermediates share the arena without clobbering live values - reshapes alias") {
  hal::testing::OpTester t(kCpu);
  hal::Graph g;
  auto a = g.input(F32, {4, 6}, "a");
  auto v = a;
  std::vector<hal::Graph::Value> kept;
  for (int i = 0; i < 12; ++i) {
    v = g.add_op(i % 3 == 0 ? "exp" : i % 3 == 1 ? "tanh" : "neg", {v});
    if (i % 4 == 0) kept.push_back(v);  // read again at the end: must survive
    if (i % 5 == 0) v = g.add_op("reshape", {v}, {hal::Attr::ints("shape", i % 2 ? std::vector<int64_t>{4, 6} : std::vector<int64_t>{24})});
  }
  v = g.add_op("reshape", {v}, {hal::Attr::ints("shape", {4, 6})});
  for (auto k : kept) v = g.add_op("add", {v, g.add_op("reshape", {k}, {hal::Attr::ints("shape", {4, 6})})});
  g.mark_output(v, "out");
  // Node by node (fused_loops off), so every intermediate takes arena space.
  hal::testing::TempDir dir;
  auto rt = hal::testing::load_config(dir, "discover = false\n[[plugin]]\npath = \"" + kCpu +
                                               "\"\n[plugin.options]\nfused_loops = \"false\"\n");
  hal::CompiledGraph by_node = hal::compile(g, opts(rt->device("cpu:0"), true));
  hal::CompiledGraph fused = hal::compile(g, opts(t.device(), true));
  hal::CompiledGraph plain = hal::compile(g, opts(t.device(), false));
  CHECK(by_node.stats().groups == 1);
  CHECK(by_node.stats().kernel_count == 15);  // 12 unary ops + 3 adds: the 7 reshapes launch nothing
  CHECK(fused.stats().kernel_count < 15);     // with fused loops, the chains between reshapes are loops
  const std::vector<float> values = random_floats(24, 5);
  auto x = t.tensor({4, 6}, values);
  hal::Buffer xb = rt->device("cpu:0")->allocate(96);
  xb.copy_from_host(values.data(), 96);
  hal::TensorView xv(xb, F32, {4, 6});
  std::vector<float> got(24), want(24), looped(24);
  by_node.run_allocating({&xv})[0].buffer.copy_to_host(got.data(), 96);
  fused.run_allocating({&x.view})[0].buffer.copy_to_host(looped.data(), 96);
  plain.run_allocating({&x.view})[0].buffer.copy_to_host(want.data(), 96);
  check_close(got, want);
  check_close(looped, want);
}

// A Loop's scan output as the ONNX front end unrolls it: values of a chain
// stacked (or concatenated) into a graph output, among them one stacked
// twice, one reshaped, the chain's last one (a graph output too) and, with
// FROM_INPUT, the graph input itself.
hal::Graph stacked_chain(const char* op, int64_t dim, bool from_input) {
  hal::Graph g;
  auto x = g.input(F32, {4, 6}, "x");
  std::vector<hal::Graph::Value> h;
  auto v = x;
  for (int i = 0; i < 5; ++i) h.push_back(v = g.add_op(i % 2 ? "tanh" : "sin", {g.add_op("add", {v, x})}));
  auto r = g.add_op("reshape", {g.add_op("reshape", {h[2]}, {hal::Attr::ints("shape", {24})})},
                    {hal::Attr::ints("shape", {4, 6})});
  std::vector<hal::Graph::Value> parts{h[0], h[1], h[1], r, h[3], h[4]};
  if (from_input) parts.push_back(x);
  g.mark_output(g.add_op(op, parts, {hal::Attr::i("dim", dim)}), "trace");
  g.mark_output(h[4], "last");
  return g;
}

TEST_CASE("cpu graph: a stack or cat into a graph output writes its inputs in place - equal to op by op, any output layout") {
  hal::testing::OpTester t(kCpu);
  hal::testing::TempDir dir;
  auto rt = hal::testing::load_config(dir, "discover = false\n[[plugin]]\npath = \"" + kCpu +
                                               "\"\n[plugin.options]\nfused_loops = \"false\"\n");
  const std::vector<float> values = random_floats(24, 9);
  auto x = t.tensor({4, 6}, values);
  for (auto [op, dim, from_input] : {std::tuple{"stack", 0, false}, std::tuple{"stack", -3, false}, std::tuple{"cat", 0, false},
                                     std::tuple{"stack", 0, true}, std::tuple{"stack", 1, false}, std::tuple{"cat", -1, false}}) {
    CAPTURE(op);
    CAPTURE(dim);
    CAPTURE(from_input);
    const hal::Graph g = stacked_chain(op, dim, from_input);
    hal::CompiledGraph plain = hal::compile(g, opts(t.device(), false));
    hal::CompiledGraph fused = hal::compile(g, opts(t.device(), true));
    hal::CompiledGraph by_node = hal::compile(g, opts(rt->device("cpu:0"), true));
    REQUIRE(fused.stats().groups == 1);
    check_same_outputs(fused, plain, x.view);
    hal::Buffer xb = rt->device("cpu:0")->allocate(96);
    xb.copy_from_host(values.data(), 96);
    auto want = plain.run_allocating({&x.view});
    const hal::TensorView xv(xb, F32, {4, 6});
    auto got = by_node.run_allocating({&xv});
    for (size_t o = 0; o < got.size(); ++o) {
      std::vector<float> a(static_cast<size_t>(got[o].view.numel())), b(a.size());
      got[o].buffer.copy_to_host(a.data(), a.size() * 4);
      want[o].buffer.copy_to_host(b.data(), b.size() * 4);
      check_close(a, b);
    }
    // Into a trace output whose dims are laid out in another order (not
    // contiguous): the kernel writes it; then contiguous again, in place.
    const std::vector<int64_t> shape = want[0].view.shape;
    const int64_t n = want[0].view.numel();
    std::vector<float> expect(static_cast<size_t>(n));
    want[0].buffer.copy_to_host(expect.data(), expect.size() * 4);
    for (bool dense : {false, true, false}) {
      CAPTURE(dense);
      auto trace = t.tensor(shape, std::vector<float>(static_cast<size_t>(n), 7.0f));
      if (!dense) {  // the last two dims swapped in memory
        const size_t r = shape.size();
        std::vector<int64_t> physical = shape, strides(r, 1), ps(r, 1);
        std::swap(physical[r - 1], physical[r - 2]);
        for (size_t d = r - 1; d-- > 0;) ps[d] = ps[d + 1] * physical[d + 1];
        strides = ps;
        std::swap(strides[r - 1], strides[r - 2]);
        trace.view.strides = strides;
      }
      auto last = t.tensor({4, 6}, std::vector<float>(24, 7.0f));
      fused.run({&x.view}, {&trace.view, &last.view});
      std::vector<float> raw(static_cast<size_t>(n));
      trace.buffer.copy_to_host(raw.data(), raw.size() * 4);
      std::vector<float> logical(raw.size());
      const std::vector<int64_t> st = trace.view.strides;
      for (int64_t i = 0; i < n; ++i) {  // element i in row-major order, read through the strides
        int64_t rest = i, at = 0;
        for (size_t d = shape.size(); d-- > 0;) {
          const int64_t k = rest % shape[d];
          rest /= shape[d];
          int64_t stride = 1;
          if (!st.empty()) stride = st[d];
          else
            for (size_t e = d + 1; e < shape.size(); ++e) stride *= shape[e];
          at += k * stride;
        }
        logical[static_cast<size_t>(i)] = raw[static_cast<size_t>(at)];
      }
      check_close(logical, expect);
    }
  }
}

TEST_CASE("cpu graph: the graph_compile option off claims nothing") {
  hal::testing::TempDir dir;
  auto rt = hal::testing::load_config(dir, "[[plugin]]\npath = \"" + kCpu +
                                               "\"\n[plugin.options]\ngraph_compile = \"false\"\n");
  hal::CompiledGraph c = hal::compile(basic_block(), opts(rt->device("cpu:0"), true));
  CHECK(c.stats().groups == 0);
  CHECK(c.stats().devices[0].op_nodes == 7);
}

TEST_CASE("cpu graph: a tensor of the wrong shape is refused naming the value, and nothing is written") {
  hal::testing::OpTester t(kCpu);
  hal::CompiledGraph c = hal::compile(basic_block(), opts(t.device(), true));
  auto x = t.tensor({2, 3, 9, 8}, random_floats(432, 1));
  auto y = t.tensor({2, 4, 8, 8}, std::vector<float>(512, 42.0f));
  CHECK_THROWS_WITH_AS(c.run({&x.view}, {&y.view}), doctest::Contains("dim 2"), hal::Error);
  std::vector<float> after(512);
  y.buffer.copy_to_host(after.data(), after.size() * 4);
  CHECK(after == std::vector<float>(512, 42.0f));
}

TEST_CASE("cpu graph: a malformed constant-inputs extension (ABI 1.7) or a twice-listed output is refused, named") {
  hal::testing::OpTester t(kCpu);
  const hal::detail::LoadedPlugin& plugin = t.device()->plugin();
  REQUIRE(static_cast<bool>(plugin.graph.graph_compile));
  const int64_t shape[] = {4};
  hal_graph_value_t value{sizeof(hal_graph_value_t), F32, 1, shape};
  hal_graph_value_t out_value = value;
  const hal_graph_value_t* values[] = {&value, &out_value};
  const uint32_t in_ids[] = {0}, out_ids[] = {1};
  hal_graph_node_t node{};
  node.struct_size = sizeof(node);
  node.op = "relu";
  node.inputs = in_ids;
  node.input_count = 1;
  node.outputs = out_ids;
  node.output_count = 1;
  const hal_graph_node_t* nodes[] = {&node};
  const float data[4] = {1, -2, 3, -4};
  const void* ptrs[] = {data};
  size_t index = 0;
  uint64_t size = 16;
  hal_graph_constants_t ext{};
  ext.base = {sizeof(ext), HAL_EXTENSION_TYPE_GRAPH_CONSTANTS, nullptr};
  ext.count = 1;
  ext.input_indices = &index;
  ext.data = ptrs;
  ext.sizes = &size;
  hal_graph_t g{};
  g.struct_size = sizeof(g);
  g.next = &ext;
  g.values = values;
  g.value_count = 2;
  g.nodes = nodes;
  g.node_count = 1;
  g.inputs = in_ids;
  g.input_count = 1;
  g.outputs = out_ids;
  g.output_count = 1;
  auto compile = [&]() -> std::string {
    hal_executable_t* exe = nullptr;
    hal_status_t* st = plugin.graph.graph_compile(t.device()->handle(), &g, &exe);
    if (st == nullptr) {
      REQUIRE(plugin.graph.executable_destroy(exe) == nullptr);
      return "";
    }
    std::string msg = st->message;
    st->destroy(st);
    return msg;
  };
  CHECK(compile().empty());  // well-formed
  index = 1;
  CHECK(compile().find("constant 0: input index 1 is out of range") != std::string::npos);
  index = 0;
  size = 12;
  CHECK(compile().find("has 12 bytes but its dtype and shape make 16") != std::string::npos);
  size = 16;
  ptrs[0] = nullptr;
  CHECK(compile().find("NULL data") != std::string::npos);
  // Without the extension: one value listed as two graph outputs is refused
  // (one of the caller's outputs would never be written).
  g.next = nullptr;
  const uint32_t twice[] = {1, 1};
  g.outputs = twice;
  g.output_count = 2;
  CHECK(compile().find("graph output value 1 is listed twice") != std::string::npos);
}

TEST_CASE("cpu graph: executables read strided inputs (HAL_EXECUTABLE_FLAG_STRIDED_INPUTS), fused steps too") {
  hal::testing::OpTester t(kCpu);
  hal::CompiledGraph block = hal::compile(basic_block(), opts(t.device(), true));
  CHECK(block.accepts_strided_input(0));
  // x read through a view with its H and W swapped: the fused conv copies it
  // dense first, the plain path reads the strides.
  const std::vector<float> xs = random_floats(2 * 3 * 64, 9);
  auto base = t.tensor({2, 3, 8, 8}, xs);
  hal::TensorView swapped(base.buffer, F32, {2, 3, 8, 8}, {192, 64, 1, 8});
  std::vector<float> dense(xs.size());
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 8; ++h)
        for (int w = 0; w < 8; ++w) dense[((n * 3 + c) * 8 + h) * 8 + w] = xs[((n * 3 + c) * 8 + w) * 8 + h];
  auto copy = t.tensor({2, 3, 8, 8}, dense);
  hal::CompiledGraph plain = hal::compile(basic_block(), opts(t.device(), false));
  std::vector<float> got(512), want(512);
  block.run_allocating({&swapped})[0].buffer.copy_to_host(got.data(), 2048);
  plain.run_allocating({&copy.view})[0].buffer.copy_to_host(want.data(), 2048);
  check_close(got, want);
}

TEST_CASE("cpu graph: linear and addmm with an activation run as one oneDNN matmul and match op by op") {
  // Each activation after linear (bias or none), mm, and addmm (a row bias: the matmul's own; a
  // full bias: added, then activated), at a size oneDNN's matmul takes and one small enough for
  // sgemm.
  hal::testing::OpTester t(kCpu);
  struct Act {
    const char* op;
    std::vector<hal::Attr> attrs;
  };
  const std::vector<Act> acts = {{"relu", {}}, {"gelu", {hal::Attr::s("approximate", "none")}},
                                 {"gelu", {hal::Attr::s("approximate", "tanh")}}, {"tanh", {}},
                                 {"sigmoid", {}}, {"silu", {}}};
  unsigned seed = 1;
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{256, 96, 80}, {3, 8, 5}}) {
    for (const Act& act : acts) {
      for (int variant = 0; variant < 5; ++variant) {
        CAPTURE(act.op);
        CAPTURE(variant);
        CAPTURE(m);
        hal::Graph g;
        auto x = g.input(F32, {m, k}, "x");
        hal::Graph::Value y;
        std::vector<hal::testing::DeviceTensor> feeds;
        feeds.push_back(t.tensor({m, k}, random_floats(static_cast<size_t>(m * k), seed++)));
        if (variant < 2) {  // linear(x, w[n, k], b[n]?)
          auto w = g.input(F32, {n, k}, "w");
          feeds.push_back(t.tensor({n, k}, random_floats(static_cast<size_t>(n * k), seed++)));
          std::vector<hal::Graph::Value> in = {x, w};
          if (variant == 0) {
            in.push_back(g.input(F32, {n}, "b"));
            feeds.push_back(t.tensor({n}, random_floats(static_cast<size_t>(n), seed++)));
          }
          y = g.add_op("linear", in);
        } else if (variant == 4) {  // mm(x, wt[k, n]): a bias-free linear as AOTAutograd lowers it
          auto wt = g.input(F32, {k, n}, "wt");
          feeds.push_back(t.tensor({k, n}, random_floats(static_cast<size_t>(k * n), seed++)));
          y = g.add_op("mm", {x, wt});
        } else {  // addmm(bias, x, wt[k, n]): a row bias [n], or a full one [m, n]
          const std::vector<int64_t> bias_shape = variant == 2 ? std::vector<int64_t>{n} : std::vector<int64_t>{m, n};
          auto b = g.input(F32, bias_shape, "b");
          auto wt = g.input(F32, {k, n}, "wt");
          feeds.push_back(t.tensor(bias_shape, random_floats(static_cast<size_t>(variant == 2 ? n : m * n), seed++)));
          feeds.push_back(t.tensor({k, n}, random_floats(static_cast<size_t>(k * n), seed++)));
          y = g.add_op("addmm", {b, x, wt});
        }
        g.mark_output(g.add_op(act.op, {y}, act.attrs));
        hal::CompiledGraph fused = hal::compile(g, opts(t.device(), true));
        hal::CompiledGraph plain = hal::compile(g, opts(t.device(), false));
        const std::string gemm = variant < 2 ? "linear+" : variant == 4 ? "mm+" : "addmm+";
        CHECK_MESSAGE(fused.explain().find(gemm + act.op) != std::string::npos, fused.explain());
        CHECK(fused.stats().kernel_count == 1);
        std::vector<const hal::TensorView*> views;
        for (const auto& f : feeds) views.push_back(&f.view);
        auto got = fused.run_allocating(views);
        auto want = plain.run_allocating(views);
        std::vector<float> a(static_cast<size_t>(m * n)), b(a.size());
        got[0].buffer.copy_to_host(a.data(), a.size() * 4);
        want[0].buffer.copy_to_host(b.data(), b.size() * 4);
        check_close(a, b);
      }
    }
  }
}

TEST_CASE("cpu graph: a linear with a constant weight keeps it transposed and matches op by op, run after run") {
  // The weight a graph constant [n, k] (n != k, so a transposition mistake shows): a lone linear is a
  // step of its own, with or without a bias; with an activation it is the fused step. Two runs with
  // other inputs: the second reads the transposed copy the first made. A weight above 1 MiB is not
  // held twice (a lone linear then runs as its kernel).
  hal::testing::OpTester t(kCpu);
  unsigned seed = 40;
  for (const auto& [m, k, n] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{32, 64, 10}, {300, 96, 80}, {8, 512, 600}}) {
    for (int variant = 0; variant < 3; ++variant) {  // 0: bias, no activation; 1: no bias; 2: bias + relu
      CAPTURE(m);
      CAPTURE(variant);
      hal::Graph g;
      auto x = g.input(F32, {m, k}, "x");
      auto w = g.constant(F32, {n, k}, bytes_of(random_floats(static_cast<size_t>(n * k), seed++)), "w");
      std::vector<hal::Graph::Value> in = {x, w};
      if (variant != 1) in.push_back(g.constant(F32, {n}, bytes_of(random_floats(static_cast<size_t>(n), seed++)), "b"));
      auto y = g.add_op("linear", in);
      g.mark_output(variant == 2 ? g.add_op("relu", {y}) : y);
      hal::CompiledGraph fused = hal::compile(g, opts(t.device(), true));
      hal::CompiledGraph plain = hal::compile(g, opts(t.device(), false));
      const bool small = n * k * 4 <= (1 << 20);
      const std::string label = variant == 2 ? "linear+relu" : "linear (weight kept transposed)";
      CHECK_MESSAGE((fused.explain().find(label) != std::string::npos) == (small || variant == 2), fused.explain());
      for (int run = 0; run < 2; ++run) {
        auto xs = t.tensor({m, k}, random_floats(static_cast<size_t>(m * k), seed++));
        auto got = fused.run_allocating({&xs.view});
        auto want = plain.run_allocating({&xs.view});
        std::vector<float> a(static_cast<size_t>(m * n)), b(a.size());
        got[0].buffer.copy_to_host(a.data(), a.size() * 4);
        want[0].buffer.copy_to_host(b.data(), b.size() * 4);
        check_close(a, b);
      }
    }
  }
}

TEST_CASE("cpu graph: a product read by more than its activation is not fused with it") {
  hal::testing::OpTester t(kCpu);
  hal::Graph g;
  auto x = g.input(F32, {4, 8}, "x");
  auto w = g.input(F32, {6, 8}, "w");
  auto y = g.add_op("linear", {x, w});
  g.mark_output(g.add_op("relu", {y}));
  g.mark_output(y);  // the product itself is an output too
  hal::CompiledGraph fused = hal::compile(g, opts(t.device(), true));
  CHECK_MESSAGE(fused.explain().find("linear+relu") == std::string::npos, fused.explain());
  hal::CompiledGraph plain = hal::compile(g, opts(t.device(), false));
  auto xs = t.tensor({4, 8}, random_floats(32, 3)), ws = t.tensor({6, 8}, random_floats(48, 4));
  auto got = fused.run_allocating({&xs.view, &ws.view});
  auto want = plain.run_allocating({&xs.view, &ws.view});
  for (size_t o = 0; o < 2; ++o) {
    std::vector<float> a(24), b(24);
    got[o].buffer.copy_to_host(a.data(), 96);
    want[o].buffer.copy_to_host(b.data(), 96);
    check_close(a, b);
  }
}
