// The CPU graph compiler's fused elementwise loops (graph/elementwise_fusion.hpp):
// random chains of 2-30 float32 elementwise ops with broadcast, strided and
// scalar inputs and values read outside the chain give what the same graphs
// give op by op (a property test with a fixed seed); explain() names the
// nodes of each loop; the fused_loops option is the A/B switch; a second
// process's compile cache rebuilds the loops without compiling.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "hal/runtime/compiled_graph.hpp"
#include "hal/sdk/kernel/half.hpp"
#include "hal/runtime/graph.hpp"
#include "hal/runtime/names.hpp"
#include "hal/testing/op_test_util.hpp"
#include "hal/testing/test_util.hpp"

namespace {

const std::string kCpu = HAL_TEST_CPU_PLUGIN;
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;

std::vector<float> random_floats(size_t n, std::mt19937& gen) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

constexpr auto options = hal::testing::uncached_compile_options;

// A graph input and how it is fed: its values and, for a strided one, the
// permutation of a buffer holding it transposed.
struct Feed {
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major over SHAPE
  bool transposed = false;    // fed as a view of its last two dims swapped in memory
};

struct Chain {
  hal::Graph graph;
  hal_dtype_e dtype = F32;  // of the inputs (and so of every value but 0-d constants)
  std::vector<Feed> feeds;
  std::string ops;  // for messages
  hal::Graph::Value last;  // the chain's last value
};

// A random chain over SHAPE: a full-shape input (fed strided when
// TRANSPOSED), inputs broadcast to it (size-1 dims, fewer dims, a 0-d
// constant), LENGTH nodes each reading an earlier full-shape value, sums
// of chain values (read outside any loop) fed back as broadcast operands,
// and a few intermediates marked as outputs besides the last.
Chain random_chain(std::mt19937& gen, const std::vector<int64_t>& shape, int length, bool transposed,
                   hal_dtype_e dtype = F32, bool mark_last = true) {
  Chain c;
  c.dtype = dtype;
  auto pick = [&](size_t n) { return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(gen)); };
  auto add_input = [&](std::vector<int64_t> s, bool strided) {
    c.feeds.push_back(Feed{s, random_floats(static_cast<size_t>(numel(s)), gen), strided});
    return c.graph.input(dtype, s, "in" + std::to_string(c.feeds.size() - 1));
  };
  std::vector<hal::Graph::Value> full = {add_input(shape, transposed && shape.size() >= 2)};
  std::vector<hal::Graph::Value> other;  // broadcast operands
  for (int k = 0; k < 3; ++k) {
    std::vector<int64_t> s = shape;
    for (int64_t& d : s)
      if (pick(2) == 0) d = 1;
    if (k == 2 && s.size() > 1) s.erase(s.begin());  // fewer dims
    other.push_back(add_input(s, false));
  }
  const float scalar = std::uniform_real_distribution<float>(0.5f, 2.0f)(gen);
  other.push_back(c.graph.constant(F32, {}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&scalar),
                                                               reinterpret_cast<const uint8_t*>(&scalar) + 4)));
  const char* unary[] = {"relu", "neg", "abs", "sigmoid", "tanh", "silu", "gelu", "sin", "cos", "erf"};
  const char* binary[] = {"add", "sub", "mul", "maximum", "minimum", "div"};
  for (int i = 0; i < length; ++i) {
    const hal::Graph::Value x = full[full.size() - 1 - pick(std::min<size_t>(full.size(), 4))];
    if (!shape.empty() && pick(5) == 0) {
      // A reduction (no loop takes it) reading a chain value mid-chain, its result broadcast
      // back in later: the chain must split or end where an outside node reads it.
      other.push_back(c.graph.add_op("sum", {x}, {hal::Attr::ints("dim", {-1}), hal::Attr::b("keepdim", true)}));
      c.ops += "[sum] ";
    }
    hal::Graph::Value y;
    auto operand = [&]() { return pick(2) == 0 ? full[pick(full.size())] : other[pick(other.size())]; };
    // A denominator or exponent in [1/e, e]: no blow-up to amplify rounding.
    auto tame = [&](hal::Graph::Value v) {
      c.ops += "tanh exp ";
      return c.graph.add_op("exp", {c.graph.add_op("tanh", {v})});
    };
    if (pick(4) == 0) {
      const char* ternary[] = {"lerp", "addcmul", "addcdiv", "clamp", "clamp_min", "clamp_max", "pow", "where"};
      const std::string op = ternary[pick(std::size(ternary))];
      if (op == "lerp") {
        y = c.graph.add_op(op, {x, operand(), operand()});
      } else if (op == "where") {  // the condition a comparison (bool), in the loop when its operands are float32
        const char* comparisons[] = {"gt", "ge", "lt", "le", "eq", "ne"};
        const std::string compare = comparisons[pick(std::size(comparisons))];
        const hal::Graph::Value cond = c.graph.add_op(compare, {x, operand()});
        y = c.graph.add_op(op, {cond, operand(), x});
        c.ops += compare + " ";
      } else if (op == "addcmul" || op == "addcdiv") {
        const hal::Graph::Value b = operand(), d = op == "addcdiv" ? tame(operand()) : operand();
        y = c.graph.add_op(op, {x, b, d}, {hal::Attr::scalar("value", pick(2) == 0 ? 1.0 : -0.3)});
      } else if (op == "pow") {  // a positive base: no NaN from a fractional exponent
        // 0x40000000 = 2.0f (the exact square), 0x3f800000 = 1.0f (a copy): the loop's constant-exponent paths.
        const int kind = static_cast<int>(pick(4));
        const hal::Graph::Value e = kind == 0   ? c.graph.constant(F32, {}, std::vector<uint8_t>{0, 0, 0, 0x40})
                                    : kind == 1 ? c.graph.constant(F32, {}, std::vector<uint8_t>{0, 0, 0x80, 0x3f})
                                                : tame(operand());
        y = c.graph.add_op(op, {tame(x), e});
      } else {
        const hal::Graph::Value lo = op != "clamp_max" ? operand() : hal::Graph::Value{};
        const hal::Graph::Value hi = op != "clamp_min" ? operand() : hal::Graph::Value{};
        y = c.graph.add_op("clamp", {x, lo, hi});
      }
      c.ops += op + " ";
    } else if (pick(2) == 0) {
      std::string op = unary[pick(std::size(unary))];
      // 16-bit chains: no periodic functions (a value rounded to 8 bits, then multiplied by a sum,
      // makes sin and cos of it noise: the formats' limit, not the loops').
      if (dtype != F32 && (op == "sin" || op == "cos")) op = "tanh";
      y = op == "gelu" && pick(2) == 0 ? c.graph.add_op(op, {x}, {hal::Attr::s("approximate", "tanh")})
                                       : c.graph.add_op(op, {x});
      c.ops += op + " ";
    } else {
      const std::string op = binary[pick(std::size(binary))];
      hal::Graph::Value other_operand = operand();
      if (op == "div") other_operand = tame(other_operand);
      std::vector<hal::Attr> attrs;
      if ((op == "add" || op == "sub") && pick(2) == 0) attrs.push_back(hal::Attr::scalar("alpha", 0.5));
      y = pick(2) == 0 ? c.graph.add_op(op, {x, other_operand}, attrs) : c.graph.add_op(op, {other_operand, x}, attrs);
      c.ops += op + " ";
    }
    full.push_back(y);
  }
  for (size_t k = 1; k + 1 < full.size(); ++k)
    if (pick(4) == 0) c.graph.mark_output(full[k]);
  if (mark_last) c.graph.mark_output(full.back());
  c.last = full.back();
  return c;
}

// VALUES on the device as DTYPE (float32, float16 or bfloat16).
hal::testing::DeviceTensor typed(hal::testing::OpTester& t, const std::vector<int64_t>& shape,
                                 const std::vector<float>& values, hal_dtype_e dtype) {
  if (dtype == F32) return t.tensor(shape, values);
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = dtype == HAL_DTYPE_FLOAT16 ? hal::sdk::kernel::Half(values[i]).bits : hal::sdk::kernel::BFloat16(values[i]).bits;
  return t.tensor(shape, bits, dtype);
}

// A (row-major) output's values as float32.
std::vector<float> to_floats(const hal::OwnedTensor& o) {
  const size_t n = static_cast<size_t>(o.view.numel());
  std::vector<float> v(n);
  if (o.view.dtype == F32) {
    o.buffer.copy_to_host(v.data(), n * 4);
    return v;
  }
  std::vector<uint16_t> bits(n);
  o.buffer.copy_to_host(bits.data(), n * 2);
  for (size_t i = 0; i < n; ++i) {
    if (o.view.dtype == HAL_DTYPE_FLOAT16) {
      hal::sdk::kernel::Half h;
      h.bits = bits[i];
      v[i] = h;
    } else {
      hal::sdk::kernel::BFloat16 b;
      b.bits = bits[i];
      v[i] = b;
    }
  }
  return v;
}

// Runs C's graph compiled with or without graph compilers; every output's values.
std::vector<std::vector<float>> run(hal::testing::OpTester& t, const Chain& c, bool graph_compilers,
                                    std::string* explain = nullptr) {
  hal::CompiledGraph g = hal::compile(c.graph, options(t.device(), graph_compilers));
  if (explain != nullptr) *explain = g.explain();
  std::vector<hal::testing::DeviceTensor> ins;
  std::vector<const hal::TensorView*> views;
  for (const Feed& f : c.feeds) {
    if (!f.transposed || f.values.empty()) {
      ins.push_back(typed(t, f.shape, f.values, c.dtype));
      continue;
    }
    // The same values laid out with the last two dims swapped in memory.
    const size_t r = f.shape.size();
    const int64_t rows = f.shape[r - 2], cols = f.shape[r - 1], batch = numel(f.shape) / (rows * cols);
    std::vector<float> swapped(f.values.size());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) swapped[(b * cols + j) * rows + i] = f.values[(b * rows + i) * cols + j];
    hal::testing::DeviceTensor d = typed(t, {numel(f.shape)}, swapped, c.dtype);
    std::vector<int64_t> strides(r, 0);
    strides[r - 1] = rows;
    strides[r - 2] = 1;
    int64_t s = rows * cols;
    for (size_t k = r - 2; k-- > 0;) {
      strides[k] = s;
      s *= f.shape[k];
    }
    d.view = hal::TensorView(d.buffer, c.dtype, f.shape, strides);
    ins.push_back(std::move(d));
  }
  for (const auto& d : ins) views.push_back(&d.view);
  std::vector<hal::OwnedTensor> out = g.run_allocating(views);
  std::vector<std::vector<float>> values;
  for (const hal::OwnedTensor& o : out) values.push_back(to_floats(o));
  return values;
}

// Equal within float rounding (the loop and the kernels run the same
// element functions; a compiler may contract a + alpha*b differently),
// NaN equal to NaN, infinities exactly.
// TOL (float16/bfloat16 chains, computed in float32 when fused and rounded
// per op when not): relative to the output's largest magnitude.
size_t mismatches(const std::vector<float>& got, const std::vector<float>& want, float tol = 0.0f) {
  size_t bad = 0;
  float scale = 1.0f;
  for (float b : want)
    if (std::isfinite(b)) scale = std::max(scale, std::fabs(b));
  for (size_t i = 0; i < got.size(); ++i) {
    const float a = got[i], b = want[i];
    if (std::isnan(a) && std::isnan(b)) continue;
    const bool close = tol > 0.0f ? std::fabs(a - b) <= tol * scale : std::fabs(a - b) <= 1e-5f + 1e-4f * std::fabs(b);
    if (std::isinf(b) ? a != b : !close) {
      if (bad < 3) MESSAGE("element ", i, ": ", a, " vs ", b);
      ++bad;
    }
  }
  return bad;
}

}  // namespace

// Runs C fused and op by op and checks every output agrees (TOL: mismatches'); whether C became
// a loop.
bool check_chain(hal::testing::OpTester& t, const Chain& c, int trial, float tol = 0.0f) {
  std::string explain;
  const auto fused = run(t, c, true, &explain);
  const auto plain = run(t, c, false);
  REQUIRE(fused.size() == plain.size());
  for (size_t o = 0; o < fused.size(); ++o) {
    REQUIRE(fused[o].size() == plain[o].size());
    CHECK_MESSAGE(mismatches(fused[o], plain[o], tol) == 0, "trial ", trial, " output ", o, " ",
                  std::string(hal::dtype_name(c.dtype)), ": ", c.ops);
  }
  return explain.find("loop[") != std::string::npos;
}

TEST_CASE("cpu fused loops: random elementwise chains equal the same graphs op by op") {
  hal::testing::OpTester t(kCpu);
  std::mt19937 gen(2026);
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 5}, {4, 700},
                                                    {2, 3, 600}, {1}, {}, {0, 3}, {3, 1500},
                                                    // short rows: several per tile, the last block partial
                                                    {3, 130, 5}, {2, 70, 9}, {600, 3}, {4, 3, 2, 8}};
  int loops_seen = 0;
  for (int trial = 0; trial < 84; ++trial) {
    const std::vector<int64_t>& shape = shapes[static_cast<size_t>(trial) % shapes.size()];
    const int length = 2 + static_cast<int>(gen() % 29);  // 2..30
    loops_seen += check_chain(t, random_chain(gen, shape, length, trial % 3 == 0), trial);
  }
  CHECK(loops_seen >= 70);  // most chains become loops (a 0-element or 1-node remnant may not)
}

TEST_CASE("cpu fused loops: float16 and bfloat16 chains compute in float32 and agree with op by op") {
  // Op by op rounds every value to 16 bits; a loop rounds only what it writes: equal within the
  // 16-bit formats' precision (relative to each output's magnitude).
  hal::testing::OpTester t(kCpu);
  std::mt19937 gen(36);
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 5}, {2, 3, 40}, {4, 700}, {}, {3, 1500}};
  int loops_seen = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const hal_dtype_e dtype = trial % 2 == 0 ? HAL_DTYPE_FLOAT16 : HAL_DTYPE_BFLOAT16;
    const std::vector<int64_t>& shape = shapes[static_cast<size_t>(trial / 2) % shapes.size()];
    const int length = 2 + static_cast<int>(gen() % 7);  // 2..8
    loops_seen += check_chain(t, random_chain(gen, shape, length, trial % 3 == 0, dtype), trial,
                              dtype == HAL_DTYPE_FLOAT16 ? 1e-2f : 5e-2f);
  }
  CHECK(loops_seen >= 18);
}

TEST_CASE("cpu fused loops: a chain is one kernel, explain names its nodes - fused_loops = false is the baseline") {
  hal::Graph g;
  auto x = g.input(F32, {64, 4096}, "x");
  auto b = g.input(F32, {4096}, "bias");
  auto y = g.add_op("add", {x, b});
  auto z = g.add_op("mul", {y, y});
  auto r = g.add_op("relu", {z});
  g.mark_output(g.add_op("sub", {r, x}, {hal::Attr::scalar("alpha", 0.25)}));
  g.mark_output(y);  // read outside the loop: written too

  hal::testing::OpTester t(kCpu);
  hal::CompiledGraph fused = hal::compile(g, options(t.device(), true));
  CHECK(fused.stats().kernel_count == 1);
  const std::string explain = fused.explain();
  CHECK_MESSAGE(explain.find("loop[n0 add, n1 mul, n2 relu, n3 sub]") != std::string::npos, explain);

  hal::testing::TempDir dir;
  auto rt = hal::testing::load_config(dir, "discover = false\n[[plugin]]\npath = \"" + kCpu +
                                               "\"\n[plugin.options]\nfused_loops = \"false\"\n");
  hal::CompiledGraph baseline = hal::compile(g, options(rt->device("cpu:0"), true));
  CHECK(baseline.stats().kernel_count == 4);
  CHECK(baseline.explain().find("loop[") == std::string::npos);

  // Large enough for several threads' worth of tiles: the same answer as op by op.
  std::mt19937 gen(5);
  auto xv = random_floats(64 * 4096, gen), bv = random_floats(4096, gen);
  auto tx = t.tensor({64, 4096}, xv), tb = t.tensor({4096}, bv);
  auto got = fused.run_allocating({&tx.view, &tb.view});
  hal::CompiledGraph plain = hal::compile(g, options(t.device(), false));
  auto want = plain.run_allocating({&tx.view, &tb.view});
  for (size_t o = 0; o < 2; ++o) {
    std::vector<float> a(64 * 4096), w(64 * 4096);
    got[o].buffer.copy_to_host(a.data(), a.size() * 4);
    want[o].buffer.copy_to_host(w.data(), w.size() * 4);
    CHECK(mismatches(a, w) == 0);
  }
}

TEST_CASE("cpu fused loops: the fused_loops option takes only true or false - the plugin is skipped, named") {
  hal::testing::TempDir dir;
  auto rt = hal::testing::load_config(dir, "discover = false\n[[plugin]]\npath = \"" + kCpu +
                                               "\"\n[plugin.options]\nfused_loops = \"maybe\"\n");
  CHECK(rt->devices().empty());
  REQUIRE(rt->skipped().size() == 1);
  CHECK(rt->skipped()[0].message.find("option fused_loops = 'maybe' must be true or false") != std::string::npos);
}

TEST_CASE("cpu fused loops: the disk compile cache rebuilds them without compiling") {
  hal::testing::TempDir dir;
  hal::Graph g;
  auto x = g.input(F32, {8, 8}, "x");
  g.mark_output(g.add_op("sigmoid", {g.add_op("mul", {x, x})}));
  hal::testing::OpTester t(kCpu);
  hal::CompileOptions o = options(t.device(), true);
  o.disk_cache = true;
  o.cache_dir = dir / "cache";
  hal::CompiledGraph first = hal::compile(g, o);
  CHECK(first.stats().compiled == 1);
  hal::clear_compile_cache();
  hal::CompiledGraph second = hal::compile(g, o);
  CHECK(second.stats().cache == hal::CacheSource::kDisk);
  CHECK(second.stats().compiled == 0);
  CHECK(second.stats().deserialized == 1);
  CHECK(second.explain().find("loop[n0 mul, n1 sigmoid]") != std::string::npos);
  std::mt19937 gen(1);
  auto xv = random_floats(64, gen);
  auto tx = t.tensor({8, 8}, xv);
  std::vector<float> y(64);
  second.run_allocating({&tx.view})[0].buffer.copy_to_host(y.data(), 256);
  for (size_t i = 0; i < 64; ++i) CHECK(y[i] == doctest::Approx(1.0 / (1.0 + std::exp(-double(xv[i]) * xv[i]))));
}

namespace {

// Every output of GRAPH run fused and op by op on the same random inputs;
// returns the fused executable's kernel count and explain(), and checks
// the two runs agree.
std::pair<uint32_t, std::string> check_against_op_by_op(const hal::Graph& graph,
                                                        const std::vector<std::vector<int64_t>>& input_shapes,
                                                        uint32_t seed) {
  hal::testing::OpTester t(kCpu);
  std::mt19937 gen(seed);
  std::vector<hal::testing::DeviceTensor> ins;
  std::vector<const hal::TensorView*> views;
  for (const auto& s : input_shapes) ins.push_back(t.tensor(s, random_floats(static_cast<size_t>(numel(s)), gen)));
  for (const auto& d : ins) views.push_back(&d.view);
  hal::CompiledGraph fused = hal::compile(graph, options(t.device(), true));
  hal::CompiledGraph plain = hal::compile(graph, options(t.device(), false));
  auto got = fused.run_allocating(views);
  auto want = plain.run_allocating(views);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    std::vector<float> a(static_cast<size_t>(got[o].view.numel())), w(a.size());
    got[o].buffer.copy_to_host(a.data(), a.size() * 4);
    want[o].buffer.copy_to_host(w.data(), w.size() * 4);
    CHECK_MESSAGE(mismatches(a, w) == 0, "output ", o);
  }
  return {fused.stats().kernel_count, fused.explain()};
}

hal::Graph::Value scalar_constant(hal::Graph& g, float v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  return g.constant(F32, {}, std::vector<uint8_t>(b, b + 4));
}

}  // namespace

TEST_CASE("cpu fused loops: an AdamW step's independent per-parameter chains run as one horizontal step") {
  // As a compiled optimizer step lowers AdamW: per parameter, exp_avg.lerp(grad, 1 - beta1),
  // exp_avg_sq * beta2 + (1 - beta2) grad^2, the decayed parameter minus step * exp_avg / denom.
  hal::Graph g;
  const std::vector<std::vector<int64_t>> params = {{64, 32}, {32}, {10, 64}, {10}, {3, 5, 700}};
  std::vector<std::vector<int64_t>> input_shapes;
  const auto beta1 = scalar_constant(g, 0.1f), beta2 = scalar_constant(g, 0.999f);
  const auto bias2 = scalar_constant(g, 0.03f), eps = scalar_constant(g, 1e-8f), decay = scalar_constant(g, 0.99f);
  for (size_t k = 0; k < params.size(); ++k) {
    std::vector<hal::Graph::Value> in;
    for (const char* name : {"param", "grad", "exp_avg", "exp_avg_sq"}) {
      in.push_back(g.input(F32, params[k], name + std::to_string(k)));
      input_shapes.push_back(params[k]);
    }
    auto m = g.add_op("lerp", {in[2], in[1], beta1});
    auto v = g.add_op("addcmul", {g.add_op("mul", {in[3], beta2}), in[1], in[1]},
                      {hal::Attr::scalar("value", 0.001)});
    auto v_abs = g.add_op("abs", {v});  // random inputs: keep sqrt's argument non-negative
    auto denom = g.add_op("add", {g.add_op("div", {g.add_op("sqrt", {v_abs}), bias2}), eps});
    auto p = g.add_op("addcdiv", {g.add_op("mul", {in[0], decay}), m, denom}, {hal::Attr::scalar("value", -0.01)});
    g.mark_output(p);
    g.mark_output(m);
    g.mark_output(v);
  }
  const auto [kernels, explain] = check_against_op_by_op(g, input_shapes, 7);
  CHECK(kernels == 1);
  CHECK_MESSAGE(explain.find("horizontal[loop[") != std::string::npos, explain);
  CHECK_MESSAGE(explain.find("n0 lerp") != std::string::npos, explain);
  // The plan (ABI 1.10) lists each parameter's loop on its own line, every node named, however
  // long the description's 255 bytes cut it.
  CHECK_MESSAGE(explain.find("fused step, 1 kernel: horizontal, 5 loops in one pass:") != std::string::npos, explain);
  size_t loops = 0;
  for (size_t at = explain.find("\n        loop["); at != std::string::npos; at = explain.find("\n        loop[", at + 1))
    ++loops;
  CHECK_MESSAGE(loops == 5, explain);
  for (size_t n = 0; n < g.nodes().size(); ++n)
    CHECK_MESSAGE(explain.find("n" + std::to_string(n) + " " + g.nodes()[n].op) != std::string::npos, n, explain);
}

TEST_CASE("cpu fused loops: a chain whose value is read before another chain ends is not merged with it") {
  // Chain A; a sum reading A's value (over dim 0: not a trailing reduction a loop ends in); chain
  // B independent of both. Merged, A would run where B ends, after the sum read A's (then
  // unwritten) value.
  hal::Graph g;
  auto x = g.input(F32, {4, 300}, "x"), y = g.input(F32, {4, 300}, "y");
  auto a = g.add_op("relu", {g.add_op("mul", {x, x})});
  g.mark_output(g.add_op("sum", {a}, {hal::Attr::ints("dim", {0}), hal::Attr::b("keepdim", true)}));
  auto b = g.add_op("tanh", {g.add_op("add", {y, y})});
  g.mark_output(b);
  const auto [kernels, explain] = check_against_op_by_op(g, {{4, 300}, {4, 300}}, 3);
  CHECK(kernels == 3);
  CHECK_MESSAGE(explain.find("horizontal[") == std::string::npos, explain);

  // Chain B reading chain A's output: dependent, two steps.
  hal::Graph h;
  auto x2 = h.input(F32, {4, 300}, "x"), y2 = h.input(F32, {300}, "y");
  auto a2 = h.add_op("relu", {h.add_op("mul", {x2, x2})});
  h.mark_output(a2);
  auto s = h.add_op("sum", {a2}, {hal::Attr::ints("dim", {0}), hal::Attr::b("keepdim", false)});
  h.mark_output(h.add_op("tanh", {h.add_op("add", {y2, s})}));
  const auto [kernels2, explain2] = check_against_op_by_op(h, {{4, 300}, {300}}, 4);
  CHECK(kernels2 == 3);
  CHECK_MESSAGE(explain2.find("horizontal[") == std::string::npos, explain2);
}

TEST_CASE("cpu fused loops: inputs of other dtypes are converted as the kernels cast them") {
  // A float32 chain reading int64/float64 0-d constants (an optimizer's step count and betas), and
  // int32, bool, float16 and bfloat16 tensors: each loaded as float32, as the kernels cast.
  hal::Graph g;
  auto x = g.input(F32, {3, 257}, "x");
  auto i32 = g.input(HAL_DTYPE_INT32, {257}, "i32");
  auto flags = g.input(HAL_DTYPE_BOOL, {3, 1}, "flags");
  auto h = g.input(HAL_DTYPE_FLOAT16, {3, 257}, "h");
  auto bf = g.input(HAL_DTYPE_BFLOAT16, {257}, "bf");
  const int64_t seven = 7;
  const double third = 1.0 / 3.0;
  auto c64 = g.constant(HAL_DTYPE_INT64, {}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&seven),
                                                                   reinterpret_cast<const uint8_t*>(&seven) + 8));
  auto f64 = g.constant(HAL_DTYPE_FLOAT64, {}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&third),
                                                                     reinterpret_cast<const uint8_t*>(&third) + 8));
  auto y = g.add_op("add", {x, c64});
  y = g.add_op("mul", {y, f64});
  y = g.add_op("sub", {y, i32}, {hal::Attr::scalar("alpha", 0.5)});
  y = g.add_op("maximum", {y, flags});
  y = g.add_op("add", {y, h});
  y = g.add_op("lerp", {y, bf, g.add_op("sigmoid", {x})});
  auto mask = g.add_op("gt", {y, x});  // a bool value, read inside (where) and outside (an output)
  y = g.add_op("where", {mask, y, g.add_op("neg", {x})});
  g.mark_output(y);
  g.mark_output(mask);
  hal::testing::OpTester t(kCpu);
  std::mt19937 gen(11);
  std::vector<int32_t> iv(257);
  for (int32_t& v : iv) v = static_cast<int32_t>(gen() % 2001) - 1000;
  const std::vector<uint8_t> fv = {1, 0, 1};
  std::vector<uint16_t> hv(3 * 257), bv(257);
  for (uint16_t& v : hv) v = hal::sdk::kernel::Half(std::normal_distribution<float>()(gen)).bits;
  for (uint16_t& v : bv) v = hal::sdk::kernel::BFloat16(std::normal_distribution<float>()(gen)).bits;
  auto tx = t.tensor({3, 257}, random_floats(3 * 257, gen));
  auto ti = t.tensor({257}, iv, HAL_DTYPE_INT32);
  auto tf = t.tensor({3, 1}, fv, HAL_DTYPE_BOOL);
  auto th = t.tensor({3, 257}, hv, HAL_DTYPE_FLOAT16);
  auto tb = t.tensor({257}, bv, HAL_DTYPE_BFLOAT16);
  std::vector<const hal::TensorView*> views = {&tx.view, &ti.view, &tf.view, &th.view, &tb.view};
  hal::CompiledGraph fused = hal::compile(g, options(t.device(), true));
  CHECK(fused.stats().kernel_count == 1);
  CHECK_MESSAGE(fused.explain().find("loop[n0 add, n1 mul, n2 sub, n3 maximum, n4 add, n5 sigmoid, n6 lerp, n7 gt, "
                                     "n8 neg, n9 where]") != std::string::npos,
                fused.explain());
  auto got = fused.run_allocating(views);
  auto want = hal::compile(g, options(t.device(), false)).run_allocating(views);
  std::vector<float> a(3 * 257), w(3 * 257);
  got[0].buffer.copy_to_host(a.data(), a.size() * 4);
  want[0].buffer.copy_to_host(w.data(), w.size() * 4);
  CHECK(mismatches(a, w) == 0);
  std::vector<uint8_t> ma(3 * 257), mw(3 * 257);
  got[1].buffer.copy_to_host(ma.data(), ma.size());
  want[1].buffer.copy_to_host(mw.data(), mw.size());
  CHECK(ma == mw);
  size_t set = 0;
  for (uint8_t m : ma) set += m;
  CHECK(set > 0);
  CHECK(set < ma.size());  // both branches taken
}

TEST_CASE("cpu fused loops: a chain longer than kMaxLoopNodes is split into loops of at most that many") {
  // N dependent nodes: loops of 64 nodes and a remainder, each its own step (each reads the last);
  // explain() shows every loop with all its nodes (the plan, ABI 1.10; the description holds 255
  // bytes).
  for (const auto& [length, loops] : std::vector<std::pair<int, uint32_t>>{{64, 1}, {65, 2}, {150, 3}}) {
    hal::Graph g;
    auto x = g.input(F32, {4, 300}, "x");
    hal::Graph::Value v = x;
    for (int i = 0; i < length; ++i)
      v = i % 3 == 0 ? g.add_op("tanh", {v}) : g.add_op(i % 3 == 1 ? "add" : "mul", {v, x});
    g.mark_output(v);
    const auto [kernels, explain] = check_against_op_by_op(g, {{4, 300}}, 9);
    CHECK_MESSAGE(kernels == loops, length, " nodes");
    // One plan line per kernel: a loop, or a node left alone running its own kernel.
    size_t lines = 0;
    for (const char* line : {"      fused step, 1 kernel: loop[n", "      node "})
      for (size_t at = explain.find(line); at != std::string::npos; at = explain.find(line, at + 1)) ++lines;
    CHECK_MESSAGE(lines == loops, explain);
    for (int n = 0; n < length; ++n) {
      const std::string op = g.nodes()[static_cast<size_t>(n)].op;
      CHECK_MESSAGE((explain.find("n" + std::to_string(n) + " " + op) != std::string::npos ||
                     explain.find("node " + std::to_string(n) + " " + op + ": its kernel") != std::string::npos),
                    n, explain);
    }
  }
}

TEST_CASE("cpu fused loops: reductions with elementwise prologues equal the same graphs op by op") {
  // A random chain ending in sum, mean, amax or amin over its trailing dims (keepdim or not), its
  // last value sometimes read again after the reduction (softmax's exp): the loop reduces as it
  // goes. Strided and broadcast inputs, empty rows, 0-d results.
  hal::testing::OpTester t(kCpu);
  std::mt19937 gen(36);
  const std::vector<std::vector<int64_t>> shapes = {{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 5}, {4, 700},
                                                    {2, 3, 600}, {1}, {0, 3}, {3, 1500}, {5, 1, 1},
                                                    // short rows: several per tile, the last block partial
                                                    {3, 130, 5}, {2, 70, 9}, {600, 3}, {4, 3, 2, 8}};
  const char* reductions[] = {"sum", "mean", "amax", "amin"};
  int reduced = 0;
  for (int trial = 0; trial < 70; ++trial) {
    const std::vector<int64_t>& shape = shapes[static_cast<size_t>(trial) % shapes.size()];
    const int length = 1 + static_cast<int>(gen() % 12);
    Chain c = random_chain(gen, shape, length, trial % 3 == 0, F32, /*mark_last=*/false);
    std::string op = reductions[gen() % 4];
    if (numel(shape) == 0 && (op == "amax" || op == "amin")) op = "sum";  // no identity: refused (below)
    const int rank = static_cast<int>(shape.size());
    const int k = 1 + static_cast<int>(gen() % static_cast<unsigned>(rank));  // the trailing dims reduced
    std::vector<int64_t> dims;
    for (int d = rank - k; d < rank; ++d) dims.push_back(gen() % 2 == 0 ? d : d - rank);
    std::shuffle(dims.begin(), dims.end(), gen);
    const bool keepdim = gen() % 2 == 0;
    std::vector<hal::Attr> attrs = {hal::Attr::ints("dim", k == rank && gen() % 3 == 0 ? std::vector<int64_t>{} : dims),
                                    hal::Attr::b("keepdim", keepdim)};
    c.graph.mark_output(c.graph.add_op(op, {c.last}, attrs));
    if (gen() % 3 == 0) c.graph.mark_output(c.graph.add_op("mul", {c.last, c.last}));  // read again, after
    c.ops += "-> " + op + " over " + std::to_string(k) + (keepdim ? " keepdim" : "");
    std::string explain;
    run(t, c, true, &explain);
    reduced += explain.find(" -> n") != std::string::npos;
    check_chain(t, c, trial);
  }
  CHECK(reduced >= 44);  // most end in their loop (a 1-node remnant or a 0-element shape may not)
}

TEST_CASE("cpu fused loops: a softmax and a layer norm written out in ops reduce in their loops") {
  hal::testing::OpTester t(kCpu);
  // softmax: e = exp(x - amax(x)); e / sum(e): sub+exp ends in the sum, e read again by the div.
  hal::Graph g;
  auto x = g.input(F32, {6, 1000}, "x");
  const std::vector<hal::Attr> last = {hal::Attr::ints("dim", {-1}), hal::Attr::b("keepdim", true)};
  auto e = g.add_op("exp", {g.add_op("sub", {x, g.add_op("amax", {x}, last)})});
  g.mark_output(g.add_op("div", {e, g.add_op("sum", {e}, last)}));
  auto [kernels, explain] = check_against_op_by_op(g, {{6, 1000}}, 1);
  CHECK_MESSAGE(explain.find("loop[n1 sub, n2 exp] -> n3 sum over the last 1 dim") != std::string::npos, explain);
  // layer norm without its affine: x - mean; its square's mean; (x - mean) * rsqrt(var + eps).
  hal::Graph h;
  auto y = h.input(F32, {4, 3, 500}, "y");
  auto centered = h.add_op("sub", {y, h.add_op("mean", {y}, last)});
  auto var = h.add_op("mean", {h.add_op("mul", {centered, centered})}, last);
  const float eps = 1e-5f;
  auto eps_v = h.constant(F32, {}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&eps),
                                                         reinterpret_cast<const uint8_t*>(&eps) + 4));
  h.mark_output(h.add_op("mul", {centered, h.add_op("rsqrt", {h.add_op("add", {var, eps_v})})}));
  std::tie(kernels, explain) = check_against_op_by_op(h, {{4, 3, 500}}, 2);
  CHECK_MESSAGE(explain.find("loop[n1 sub, n2 mul] -> n3 mean over the last 1 dim") != std::string::npos, explain);
}

TEST_CASE("cpu fused loops: a reduction over an empty dim is 0, NaN, or refused as op by op") {
  hal::testing::OpTester t(kCpu);
  for (const char* op : {"sum", "mean", "amax"}) {
    hal::Graph g;  // the reduced dim symbolic: an empty one is met at run time
    auto x = g.input(F32, {3, -1}, "x");
    g.mark_output(g.add_op(op, {g.add_op("exp", {g.add_op("neg", {x})})},
                           {hal::Attr::ints("dim", {-1}), hal::Attr::b("keepdim", false)}));
    auto in = t.tensor({3, 0}, std::vector<float>{});
    hal::CompiledGraph fused = hal::compile(g, options(t.device(), true));
    hal::CompiledGraph plain = hal::compile(g, options(t.device(), false));
    CHECK_MESSAGE(fused.explain().find(std::string(" -> n2 ") + op) != std::string::npos, fused.explain());
    if (std::string(op) == "amax") {  // no identity: refused, as the op refuses it
      CHECK_THROWS_WITH_AS(fused.run_allocating({&in.view}), doctest::Contains("size 0"), hal::Error);
      CHECK_THROWS_WITH_AS(plain.run_allocating({&in.view}), doctest::Contains("size 0"), hal::Error);
      continue;
    }
    std::vector<float> a(3, -1.0f), b(3, -2.0f);
    fused.run_allocating({&in.view})[0].buffer.copy_to_host(a.data(), 12);
    plain.run_allocating({&in.view})[0].buffer.copy_to_host(b.data(), 12);
    for (size_t i = 0; i < 3; ++i) {
      CHECK(((std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i]));
      CHECK((std::string(op) == "sum" ? a[i] == 0.0f : std::isnan(a[i])));
    }
  }
}

TEST_CASE("cpu fused loops: a copy joins the loop (broadcast, cast to float32) - one that rounds to 16 bits does not") {
  // A mean's backward expands its per-row value with a copy; a cast to float32 is a copy too. A copy
  // into float16 from float32 rounds on purpose (x.half().float()) and stays its kernel.
  hal::Graph g;
  const hal_dtype_e F16 = HAL_DTYPE_FLOAT16;
  auto row = g.input(F32, {5, 1}, "row");
  auto ints = g.input(HAL_DTYPE_INT32, {5, 37}, "ints");
  auto x = g.input(F32, {5, 37}, "x");
  auto y = g.add_op("div", {g.add_op("copy", {row}, hal::ValueSpec{F32, {5, 37}}), x});  // n0 copy, n1 div
  y = g.add_op("add", {y, g.add_op("copy", {ints}, hal::ValueSpec{F32, {5, 37}})});      // n2 copy, n3 add
  auto rounded = g.add_op("copy", {y}, hal::ValueSpec{F16, {5, 37}});                     // n4: rounds
  g.mark_output(g.add_op("mul", {g.add_op("copy", {rounded}, hal::ValueSpec{F32, {5, 37}}), x}));  // n5, n6
  hal::testing::OpTester t(kCpu);
  std::mt19937 gen(5);
  std::vector<int32_t> iv(5 * 37);
  for (int32_t& v : iv) v = static_cast<int32_t>(gen() % 2001) - 1000;
  auto trow = t.tensor({5, 1}, random_floats(5, gen));
  auto tints = t.tensor({5, 37}, iv, HAL_DTYPE_INT32);
  auto tx = t.tensor({5, 37}, random_floats(5 * 37, gen));
  std::vector<const hal::TensorView*> views = {&trow.view, &tints.view, &tx.view};
  hal::CompiledGraph fused = hal::compile(g, options(t.device(), true));
  const std::string explain = fused.explain();
  CHECK_MESSAGE(explain.find("loop[n0 copy, n1 div, n2 copy, n3 add]") != std::string::npos, explain);
  CHECK_MESSAGE(explain.find("node 4 copy: its kernel") != std::string::npos, explain);
  CHECK_MESSAGE(explain.find("loop[n5 copy, n6 mul]") != std::string::npos, explain);
  auto got = fused.run_allocating(views);
  auto want = hal::compile(g, options(t.device(), false)).run_allocating(views);
  std::vector<float> a(5 * 37), w(5 * 37);
  got[0].buffer.copy_to_host(a.data(), a.size() * 4);
  want[0].buffer.copy_to_host(w.data(), w.size() * 4);
  CHECK(mismatches(a, w) == 0);
  CHECK(a == w);  // the same products of the same (rounded) values
}

namespace {

// An int64 (or int32) constant index of the given values.
hal::Graph::Value index_constant(hal::Graph& g, const std::vector<int64_t>& values, bool int32 = false) {
  std::vector<uint8_t> bytes;
  for (int64_t v : values) {
    const int32_t n32 = static_cast<int32_t>(v);
    const auto* b = int32 ? reinterpret_cast<const uint8_t*>(&n32) : reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), b, b + (int32 ? 4 : 8));
  }
  return g.constant(int32 ? HAL_DTYPE_INT32 : HAL_DTYPE_INT64, {static_cast<int64_t>(values.size())}, bytes);
}

}  // namespace

TEST_CASE("cpu fused loops: slices (index_select by a constant arange) are read in place - other indexes are not") {
  // rotate_half's halves, a strided slice (step 2) along a middle dim, an int32 index, a slice of a
  // value a loop makes (the loop writes it, a later loop reads the slice), and a slice also read by
  // a kernel (made as well). Each against op by op.
  hal::Graph g;
  auto x = g.input(F32, {3, 5, 8}, "x");
  auto y = g.input(F32, {3, 5, 8}, "y");
  auto lo = g.add_op("index_select", {x, index_constant(g, {0, 1, 2, 3})}, {hal::Attr::i("dim", -1)});       // n0
  auto hi = g.add_op("index_select", {x, index_constant(g, {4, 5, 6, 7}, true)}, {hal::Attr::i("dim", 2)});  // n1
  auto rot = g.add_op("sub", {g.add_op("mul", {lo, lo}), g.add_op("neg", {hi})});                           // n2 n3 n4
  g.mark_output(rot);
  auto made = g.add_op("exp", {g.add_op("add", {x, y})});                                                    // n5 n6
  auto odd = g.add_op("index_select", {made, index_constant(g, {1, 3})}, {hal::Attr::i("dim", 1)});          // n7
  g.mark_output(g.add_op("relu", {g.add_op("mul", {odd, odd})}));                                            // n8 n9
  auto shuffled = g.add_op("index_select", {y, index_constant(g, {2, 0, 1})}, {hal::Attr::i("dim", 0)});      // n10
  g.mark_output(g.add_op("tanh", {g.add_op("add", {shuffled, shuffled})}));                                  // n11 n12
  auto shared = g.add_op("index_select", {y, index_constant(g, {1, 2, 3})}, {hal::Attr::i("dim", 1)});        // n13
  g.mark_output(g.add_op("sigmoid", {g.add_op("abs", {shared})}));                                           // n14 n15
  g.mark_output(g.add_op("sum", {shared}, {hal::Attr::ints("dim", {-1}), hal::Attr::b("keepdim", false)}));  // n16
  auto [kernels, explain] = check_against_op_by_op(g, {{3, 5, 8}, {3, 5, 8}}, 3);
  const std::string halves = "loop[n2 mul, n3 neg, n4 sub] reading slices in place: n0 index_select, n1 index_select";
  CHECK_MESSAGE(explain.find(halves) != std::string::npos, explain);
  CHECK_MESSAGE(explain.find("loop[n8 mul, n9 relu] reading slices in place: n7 index_select") != std::string::npos,
                explain);
  CHECK_MESSAGE(explain.find("loop[n5 add, n6 exp]") != std::string::npos, explain);  // written: n7 reads it
  CHECK_MESSAGE(explain.find("node 10 index_select: its kernel") != std::string::npos, explain);  // not an arange
  CHECK_MESSAGE(explain.find("n13 index_select (also made)") != std::string::npos, explain);
  CHECK_MESSAGE(explain.find("node 13 index_select: its kernel") != std::string::npos, explain);
  CHECK_MESSAGE(explain.find("node 0 index_select: its kernel") == std::string::npos, explain);
}
