// Shape and dtype inference from the catalog's rules: infer_node (concrete
// and symbolic dims), the inferring Graph::add_node/add_op, infer_shapes,
// and a symbolic graph built by inference running on the CPU plugin.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "hal/runtime/graph.hpp"
#include "testing/op_test_util.hpp"

namespace {
constexpr hal_dtype_e F32 = HAL_DTYPE_FLOAT32;
constexpr hal_dtype_e I64 = HAL_DTYPE_INT64;
using hal::Attr;
using hal::ValueSpec;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::vector<ValueSpec> infer(const std::string& op, const std::vector<ValueSpec>& in, const std::vector<Attr>& attrs = {},
                             size_t outputs = 0) {
  std::vector<const ValueSpec*> ptrs;
  for (const ValueSpec& v : in) ptrs.push_back(&v);
  return hal::infer_node(op, ptrs, attrs, outputs);
}

// The message of the hal::Error F throws, which must carry CODE.
template <class F>
std::string error_of(F f, hal_status_code_e code = HAL_STATUS_INVALID_ARGUMENT) {
  try {
    f();
  } catch (const hal::Error& e) {
    CHECK(e.code() == code);
    return e.what();
  }
  FAIL("no error");
  return "";
}
}  // namespace

TEST_CASE("infer_node: concrete dtypes and shapes follow the catalog's rules") {
  CHECK(infer("matmul", {{F32, {2, 3}}, {F32, {3, 4}}}) == std::vector<ValueSpec>{{F32, {2, 4}}});
  // Promotion, comparison, int64 and attribute-chosen output dtypes.
  CHECK(infer("add", {{HAL_DTYPE_INT32, {2, 1}}, {F32, {3}}}) == std::vector<ValueSpec>{{F32, {2, 3}}});
  CHECK(infer("eq", {{F32, {4}}, {F32, {4}}}) == std::vector<ValueSpec>{{HAL_DTYPE_BOOL, {4}}});
  CHECK(infer("argmax", {{F32, {4, 5}}}, {Attr::ints("dim", {1})}) == std::vector<ValueSpec>{{I64, {4}}});
  CHECK(infer("sum", {{F32, {4, 5}}}, {Attr::ints("dim", {0}), Attr::b("keepdim", true),
                                       Attr::dtype("dtype", HAL_DTYPE_FLOAT64)}) ==
        std::vector<ValueSpec>{{HAL_DTYPE_FLOAT64, {1, 5}}});
  // Several outputs, an absent optional input, defaults applied.
  std::vector<const ValueSpec*> ln_in;
  ValueSpec x{F32, {2, 8}}, w{F32, {8}};
  ln_in = {&x, &w, nullptr};
  CHECK(hal::infer_node("layer_norm", ln_in, {Attr::ints("normalized_shape", {8})}, 0) ==
        std::vector<ValueSpec>{{F32, {2, 8}}, {F32, {2, 1}}, {F32, {2, 1}}});
  // A variadic output takes its count from the caller.
  CHECK(infer("split", {{F32, {6, 2}}}, {Attr::ints("sizes", {2, 4})}, 2) ==
        std::vector<ValueSpec>{{F32, {2, 2}}, {F32, {4, 2}}});
}

TEST_CASE("infer_node: bad calls are refused naming the op, the argument and the sizes") {
  CHECK(error_of([] { infer("no_such_op", {{F32, {1}}}); }, HAL_STATUS_UNIMPLEMENTED)
            .rfind("no_such_op: op 'no_such_op' is not in the op catalog (version ", 0) == 0);
  CHECK(error_of([] { infer("matmul", {{F32, {2, 3}}, {F32, {4, 5}}}); }) ==
        "matmul: self [2, 3] and other [4, 5]: sizes 3 and 4 must match");
  CHECK(contains(error_of([] { infer("embedding", {{F32, {10, 4}}, {F32, {3}}}); }, HAL_STATUS_UNSUPPORTED_DTYPE),
                 "embedding: input 'indices' has dtype float32; the catalog allows"));
  CHECK(error_of([] { infer("add", {{F32, {2}}}); }) == "add: got 1 inputs but the op takes 2 (self, other)");
  CHECK(error_of([] { infer("softmax", {{F32, {2}}}); }) == "softmax: missing required attribute 'dim' (int)");
  CHECK(error_of([] { infer("relu", {{F32, {2}}}, {Attr::i("alpha", 1)}); }) ==
        "relu: unknown attribute 'alpha' (the op has: no attributes)");
  CHECK(error_of([] { infer("split", {{F32, {6}}}, {Attr::i("split_size", 2)}); }) ==
        "split: output 'outs' is variadic; give the number of outputs");
  CHECK(error_of([] { infer("add", {{F32, {-1, 2}}, {F32, {2}}}, {}, 3); }) ==
        "add: got 3 outputs but the op has 1");
  hal::InferContext ctx;
  ctx.label = "node 4 ('add')";
  ValueSpec a{F32, {2}}, b{F32, {3}};
  CHECK(error_of([&] { hal::infer_node("add", {&a, &b}, {}, 0, ctx); }) ==
        "node 4 ('add'): add: input 'other' of shape [3] does not broadcast with shape [2] (size 3 vs 2)");
}

TEST_CASE("infer_node: symbolic dims propagate, derived sizes become fresh symbols") {
  const int64_t s = -1, t = -2, b = -3;
  // Tracked through broadcasting, matmul, embedding, reductions.
  CHECK(infer("add", {{F32, {s, 4}}, {F32, {1, 4}}}) == std::vector<ValueSpec>{{F32, {s, 4}}});
  CHECK(infer("add", {{F32, {b, 1, s}}, {F32, {s}}}) == std::vector<ValueSpec>{{F32, {b, 1, s}}});
  CHECK(infer("matmul", {{F32, {b, s, 8}}, {F32, {8, 16}}}) == std::vector<ValueSpec>{{F32, {b, s, 16}}});
  CHECK(infer("embedding", {{F32, {100, 8}}, {I64, {b, s}}}) == std::vector<ValueSpec>{{F32, {b, s, 8}}});
  CHECK(infer("sum", {{F32, {b, s, 8}}}, {Attr::ints("dim", {1})}) == std::vector<ValueSpec>{{F32, {b, 8}}});
  CHECK(infer("softmax", {{F32, {b, s, s}}}, {Attr::i("dim", -1)}) == std::vector<ValueSpec>{{F32, {b, s, s}}});
  // A concrete size that does not depend on the symbol stays concrete.
  CHECK(infer("topk", {{F32, {b, s}}}, {Attr::i("k", 3), Attr::i("dim", 1)}) ==
        std::vector<ValueSpec>{{F32, {b, 3}}, {I64, {b, 3}}});
  CHECK(infer("split", {{F32, {s, 6}}}, {Attr::ints("sizes", {2, 4}), Attr::i("dim", 1)}, 2) ==
        std::vector<ValueSpec>{{F32, {s, 2}}, {F32, {s, 4}}});
  // Concat along a symbolic dim: s + t, s + 3 and 2s are new symbols (below
  // every input symbol without a context); along a concrete dim the symbol is
  // carried.
  CHECK(infer("cat", {{F32, {s, 4}}, {F32, {t, 4}}}) == std::vector<ValueSpec>{{F32, {-3, 4}}});
  CHECK(infer("cat", {{F32, {s, 4}}, {F32, {3, 4}}}) == std::vector<ValueSpec>{{F32, {-2, 4}}});
  CHECK(infer("cat", {{F32, {s, 4}}, {F32, {s, 4}}}) == std::vector<ValueSpec>{{F32, {-2, 4}}});
  CHECK(infer("cat", {{F32, {s, 4}}, {F32, {s, 2}}}, {Attr::i("dim", 1)}) == std::vector<ValueSpec>{{F32, {s, 6}}});
  // Arithmetic on a symbol (padding to the end, a conv's output size).
  CHECK(infer("pad", {{F32, {s, 4}}}, {Attr::ints("pad", {0, 0, 1, 2})}) == std::vector<ValueSpec>{{F32, {-2, 4}}});
  auto conv = infer("conv2d", {{F32, {b, 3, s, t}}, {F32, {8, 3, 3, 3}}}, {Attr::ints("padding", {0, 0})});
  REQUIRE(conv.size() == 1);
  CHECK(conv[0].shape[0] == b);
  CHECK(conv[0].shape[1] == 8);
  CHECK(conv[0].shape[2] < -3);  // fresh, distinct
  CHECK(conv[0].shape[3] < -3);
  CHECK(conv[0].shape[2] != conv[0].shape[3]);
  // Fresh symbols come from the context when it has a maker.
  hal::InferContext ctx;
  std::vector<std::pair<size_t, size_t>> asked;
  ctx.fresh_symbol = [&](size_t o, size_t d) {
    asked.emplace_back(o, d);
    return int64_t{-100};
  };
  ValueSpec x{F32, {s, 4}};
  CHECK(hal::infer_node("cat", {&x, &x}, {}, 0, ctx) == std::vector<ValueSpec>{{F32, {-100, 4}}});
  CHECK(asked == std::vector<std::pair<size_t, size_t>>{{0, 0}});
}

TEST_CASE("infer_node: two symbols a rule needs equal are unified - a symbol tied to a size is refused") {
  const int64_t s = -1, t = -2;
  // Exported with two names for one size: the node's first symbol.
  CHECK(infer("add", {{F32, {s, 4}}, {F32, {t, 4}}}) == std::vector<ValueSpec>{{F32, {s, 4}}});
  CHECK(infer("matmul", {{F32, {2, t}}, {F32, {s, 3}}}) == std::vector<ValueSpec>{{F32, {2, 3}}});
  // sizes must sum to the symbolic dim: no size stands for it.
  std::string m = error_of([&] { infer("split", {{F32, {s}}}, {Attr::ints("sizes", {2, 3})}, 2); });
  CHECK(contains(m, "split: attribute 'sizes'"));
  CHECK(contains(m, "(inferring with symbolic dims taken as 's1' = 24240)"));
  // A concrete mismatch is still an error with symbols about.
  m = error_of([&] { infer("matmul", {{F32, {s, 3}}, {F32, {4, t}}}); });
  CHECK(contains(m, "sizes 3 and 4 must match"));
}

TEST_CASE("Graph::add_node infers outputs, names derived symbols after the node, and refuses naming values") {
  hal::Graph g;
  int64_t seq = g.symbol("seq"), batch = g.symbol("batch");
  auto ids = g.input(I64, {batch, seq}, "ids");
  auto table = g.constant(F32, {10, 4}, std::vector<uint8_t>(160, 0), "table");
  auto e = g.add_op("embedding", {table, ids});
  CHECK(g.values()[e.id] == ValueSpec{F32, {batch, seq, 4}});
  auto both = g.add_op("cat", {e, e}, {Attr::i("dim", 1)});
  const std::vector<int64_t> shape = g.values()[both.id].shape;  // a copy: add_node below grows values()
  REQUIRE(shape.size() == 3);
  CHECK(shape[0] == batch);
  CHECK(g.symbol_name(shape[1]) == "node1_d1");
  CHECK(g.shape_string(shape) == "[batch, node1_d1, 4]");
  auto parts = g.add_node("split", {both}, {Attr::ints("sizes", {1, 3}), Attr::i("dim", 2)}, 2);
  REQUIRE(parts.size() == 2);
  CHECK(g.values()[parts[1].id] == ValueSpec{F32, {batch, shape[1], 3}});
  auto ln = g.add_node("layer_norm", {both, hal::Graph::Value{}, hal::Graph::Value{}},
                       {Attr::ints("normalized_shape", {4})});
  CHECK(ln.size() == 3);
  g.mark_output(ln[0]);

  size_t nodes = g.nodes().size(), values = g.values().size();
  std::string m = error_of([&] { g.add_op("matmul", {e, table}); });
  CHECK(m == "node 4 ('matmul'): matmul: self [24240, 25680, 4] and other [10, 4]: sizes 4 and 10 must match "
             "(inferring with symbolic dims taken as 'batch' = 24240, 'seq' = 25680) "
             "[inputs: value 2 float32 [batch, seq, 4], value 1 'table' float32 [10, 4]]");
  CHECK(error_of([&] { g.add_op("sigmoid", {hal::Graph::Value{99}}); }) ==
        "node 4 ('sigmoid'): input 0 is value 99, not a value of this graph");
  CHECK(error_of([&] { g.add_op("nope", {e}); }, HAL_STATUS_UNIMPLEMENTED).rfind("node 4 ('nope'): op 'nope'", 0) == 0);
  CHECK(g.nodes().size() == nodes);
  CHECK(g.values().size() == values);
}

TEST_CASE("infer_shapes: binds symbols from the inputs and re-runs every rule") {
  hal::Graph g;
  int64_t seq = g.symbol("seq");
  auto x = g.input(F32, {seq, 4}, "x");
  auto y = g.input(F32, {-7, 4}, "y");  // a symbol used directly
  auto w = g.constant(F32, {4, 2}, std::vector<uint8_t>(32, 0), "w");
  auto c = g.add_op("cat", {x, y});              // [node0_d0, 4]
  auto m = g.add_op("matmul", {c, w});           // [node0_d0, 2]
  auto s = g.add_op("add", {x, x});              // [seq, 4]
  g.mark_output(m);
  g.mark_output(s);
  auto shapes = hal::infer_shapes(g, {{5, 4}, {2, 4}});
  REQUIRE(shapes.size() == g.values().size());
  CHECK(shapes[x.id] == std::vector<int64_t>{5, 4});
  CHECK(shapes[w.id] == std::vector<int64_t>{4, 2});
  CHECK(shapes[c.id] == std::vector<int64_t>{7, 4});
  CHECK(shapes[m.id] == std::vector<int64_t>{7, 2});
  CHECK(shapes[s.id] == std::vector<int64_t>{5, 4});
  CHECK(hal::infer_shapes(g, {{1, 4}, {0, 4}})[m.id] == std::vector<int64_t>{1, 2});

  CHECK(error_of([&] { hal::infer_shapes(g, {{5, 4}}); }) ==
        "infer_shapes: got 1 input shapes but the graph has 2 inputs");
  CHECK(error_of([&] { hal::infer_shapes(g, {{5, 4}, {2, 3}}); }) ==
        "graph input 1 ('y') has shape [2, 3] but the value's is [s7, 4] (dim 1)");
  CHECK(error_of([&] { hal::infer_shapes(g, {{5, 4, 1}, {2, 4}}); }) ==
        "graph input 0 ('x') has shape [5, 4, 1] (rank 3) but the value's is [seq, 4] (rank 2)");
  CHECK(error_of([&] { hal::infer_shapes(g, {{-5, 4}, {2, 4}}); }) ==
        "graph input 0 ('x') has negative size -5 in dim 0");
}

TEST_CASE("infer_shapes: a symbol bound to two sizes, and a rule refusing the bound sizes, name where") {
  hal::Graph g;
  int64_t seq = g.symbol("seq"), other = g.symbol("other");
  auto a = g.input(F32, {seq, 4}, "a");
  auto b = g.input(F32, {seq, 4}, "b");
  auto c = g.input(F32, {other, 4}, "c");
  auto ab = g.add_op("add", {a, b});
  g.mark_output(g.add_op("add", {ab, c}));  // seq and other unified at build time
  CHECK(error_of([&] { hal::infer_shapes(g, {{3, 4}, {5, 4}, {3, 4}}); }) ==
        "symbol 'seq' is 3 (graph input 0 ('a') dim 0) but graph input 1 ('b') dim 0 is 5");
  CHECK(hal::infer_shapes(g, {{3, 4}, {3, 4}, {3, 4}}).back() == std::vector<int64_t>{3, 4});
  CHECK(error_of([&] { hal::infer_shapes(g, {{3, 4}, {3, 4}, {2, 4}}); }) ==
        "node 1 ('add'): add: input 'other' of shape [2, 4] does not broadcast with shape [3, 4] (size 2 vs 3)");
}

TEST_CASE("infer_shapes: declared outputs are checked against the rules, and order is enforced") {
  hal::Graph g;
  auto x = g.input(F32, {-1, 4}, "x");
  auto bad = g.add_op("relu", {x}, ValueSpec{F32, {-1, 5}});  // declared by hand, wrong
  g.mark_output(bad, "r");
  CHECK(error_of([&] { hal::infer_shapes(g, {{2, 4}}); }) ==
        "node 0 ('relu'): output 0 (value 1 ('r')) has shape [2, 4] but the value's is [s1, 5] (dim 1)");
  hal::Graph h;
  auto y = h.input(F32, {2});
  h.mark_output(h.add_op("relu", {y}, ValueSpec{HAL_DTYPE_FLOAT64, {2}}));
  CHECK(error_of([&] { hal::infer_shapes(h, {{2}}); }) ==
        "node 0 ('relu'): output 0 (value 1) has dtype float32 by the catalog's rules but the value's is float64");
}

TEST_CASE("a symbolic graph built by inference runs on the CPU plugin at two lengths") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  hal::Graph g;
  int64_t n = g.symbol("n");
  auto x = g.input(F32, {n, 2}, "x");
  std::vector<float> wv = {1, 2, 3, 4};
  std::vector<uint8_t> wb(16);
  std::memcpy(wb.data(), wv.data(), 16);
  auto w = g.constant(F32, {2, 2}, wb, "w");
  auto h = g.add_op("matmul", {x, w});
  auto both = g.add_op("cat", {h, x});  // [node1_d0, 2]
  g.mark_output(g.add_op("relu", {both}), "out");
  hal::CompiledGraph compiled = hal::compile(*cpu.device(), g);
  for (int64_t len : {1, 3}) {
    auto shapes = hal::infer_shapes(g, {{len, 2}});
    const std::vector<int64_t>& out_shape = shapes[g.outputs()[0]];
    CHECK(out_shape == std::vector<int64_t>{2 * len, 2});
    std::vector<float> xv;
    for (int64_t i = 0; i < 2 * len; ++i) xv.push_back(static_cast<float>(i % 3) - 1.0f);
    auto tx = cpu.tensor({len, 2}, xv);
    auto out = cpu.empty(F32, out_shape);
    compiled.run({&tx.view}, {&out.view});
    std::vector<float> want;
    for (int64_t i = 0; i < len; ++i)
      for (int j = 0; j < 2; ++j) want.push_back(std::max(0.0f, xv[2 * i] * wv[j] + xv[2 * i + 1] * wv[2 + j]));
    for (float v : xv) want.push_back(std::max(0.0f, v));
    CHECK(cpu.read<float>(out) == want);
  }
}

TEST_CASE("infer_node: ops whose outputs are the caller's choice (copy, fill) read the declared outputs") {
  const int64_t s = -1;
  ValueSpec x{F32, {1, 4}}, to{HAL_DTYPE_FLOAT64, {s, 4}}, full{I64, {2, s}};
  CHECK(hal::infer_node("copy", {&x}, {}, 0, {}, {&to}) == std::vector<ValueSpec>{to});  // broadcast and cast
  CHECK(hal::infer_node("fill", {}, {Attr::i("value", 7)}, 0, {}, {&full}) == std::vector<ValueSpec>{full});
  ValueSpec bad{F32, {3, 5}};
  CHECK(contains(error_of([&] { hal::infer_node("copy", {&x}, {}, 0, {}, {&bad}); }), "copy:"));
  // Without them the rule cannot say: a clear refusal, not a crash.
  CHECK(error_of([&] { hal::infer_node("copy", {&x}, {}, 0); }) ==
        "copy: the op's output shapes or dtypes are the caller's choice (its rule reads the outputs); declare them");
  hal::Graph g;
  auto in = g.input(F32, {1, 4}, "x");
  CHECK(contains(error_of([&] { g.add_op("copy", {in}); }), "node 0 ('copy'): the op's output shapes"));
  auto y = g.add_op("copy", {in}, ValueSpec{F32, {g.symbol("n"), 4}});  // declared: checked by verify and infer_shapes
  g.mark_output(y);
  CHECK_NOTHROW(g.verify());
  CHECK(contains(error_of([&] { hal::infer_shapes(g, {{1, 4}}); }),
                 "; output 0 is declared [n, 4] with a symbol nothing bound before this node"));
  hal::Graph h;  // bound by an input: the copy broadcasts to it
  int64_t n = h.symbol("n");
  auto a = h.input(F32, {1, 4}, "a");
  auto like = h.input(F32, {n, 4}, "like");
  auto z = h.add_op("copy", {a}, ValueSpec{F32, {n, 4}});
  h.mark_output(h.add_op("add", {z, like}));
  CHECK(hal::infer_shapes(h, {{1, 4}, {3, 4}})[z.id] == std::vector<int64_t>{3, 4});
}
