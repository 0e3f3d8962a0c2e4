// The ONNX -> catalog table: its rows, and translation of shape arithmetic
// with symbolic dims (checked on the translated graph).
#include <algorithm>
#include "op_table.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <variant>

#include "hal/common/op_catalog.hpp"
#include "hal/onnx/model.hpp"
#include "hal/onnx/operators.hpp"
#include "hal/runtime/error.hpp"
#include "hal/runtime/shape_inference.hpp"
#include "test_models.hpp"
#include "translator.hpp"

namespace hal::onnx {
namespace {

using detail::find_rule;
using detail::op_table;
using testing::attr_i;
using testing::ModelMaker;
using TP = ::onnx::TensorProto;

bool in_catalog(const std::string& op) { return common::catalog::find_schema(op.c_str()) != nullptr; }

TEST_CASE("every row takes versions of its operator, once per op_type and version") {
  std::set<std::pair<std::string, int>> seen;
  for (const auto& r : op_table()) {
    CAPTURE(r.op_type);
    CHECK(r.min_version <= r.max_version);
    // Both ends are versions of the operator (opsets at which its schema changed).
    CHECK(detail::operator_version(r.op_type, r.min_version) == r.min_version);
    CHECK(detail::operator_version(r.op_type, r.max_version) == r.max_version);
    for (int v = r.min_version; v <= r.max_version; ++v) CHECK(seen.insert({r.op_type, v}).second);
    // Found at every opset from 7 to the newest known where one of its versions is in effect.
    for (int opset = detail::kOldestOpset; opset <= detail::newest_known_opset(); ++opset) {
      const int v = detail::operator_version(r.op_type, opset);
      if (v >= r.min_version && v <= r.max_version) CHECK(find_rule(r.op_type, opset) == &r);
    }
  }
  CHECK(find_rule("Gelu", 19) == nullptr);  // Gelu is an ai.onnx op since opset 20
  CHECK(find_rule("Gelu", 28) != nullptr);
  CHECK(find_rule("Relu", 12) != nullptr);  // Relu version 6
  CHECK(find_rule("Relu", 5) == nullptr);   // version 1 (consumed_inputs): below opset 7
  CHECK(find_rule("Relu", detail::newest_known_opset() + 1) == nullptr);
  CHECK(detail::operator_version("Add", 13) == 13);
  CHECK(detail::operator_version("Add", 20) == 14);
  CHECK(detail::operator_version("Gelu", 19) == 0);
  CHECK(detail::operator_version("NoSuchOp", 20) == 0);
  CHECK(detail::last_opset_of_version("Softmax", 11) == 12);
}

TEST_CASE("supported_operators lists the table, covering the acceptance models' op types") {
  std::vector<OperatorSupport> ops = supported_operators();
  CHECK(ops.size() == op_table().size());
  auto has = [&](const std::string& type, int opset) {
    for (const auto& o : ops)
      if (o.op_type == type && opset >= o.min_opset && opset <= o.max_opset) return true;
    return false;
  };
  // What torch.onnx.export writes for an MLP, a ResNet-style CNN, a transformer
  // encoder and a GPT-style decoder (opset 13 and the dynamo exporter's 20).
  for (const char* type : {"Gemm", "MatMul", "Add", "Mul", "Div", "Relu", "Erf", "Constant", "Identity", "Conv",
                           "MaxPool", "GlobalAveragePool", "Flatten", "BatchNormalization", "Reshape", "Transpose",
                           "Unsqueeze", "Squeeze", "Gather", "Softmax", "Shape", "Range", "Split", "Concat", "Expand",
                           "Not", "Where"})
    for (int opset : {13, 20}) CHECK_MESSAGE(has(type, opset), type << " at opset " << opset);
  for (const char* type : {"Gelu", "LayerNormalization", "Trilu", "ReduceMean"}) CHECK_MESSAGE(has(type, 20), type);
}

TEST_CASE("rows without a converter name one catalog op that exists") {
  for (const auto& r : op_table()) {
    if (r.convert) continue;
    CAPTURE(r.op_type);
    CHECK(in_catalog(r.catalog));
  }
}

TEST_CASE("an op_type outside its rows' versions says which versions HAL maps") {
  ModelMaker mm(19);
  mm.input("x", TP::FLOAT, {int64_t{2}});
  mm.node("Gelu", {"x"}, {"y"}, "g");
  mm.output("y");
  CHECK_THROWS_WITH_AS(mm.load(), doctest::Contains("Gelu is not an operator of ai.onnx opset 19 (HAL's table maps its versions 20..20)"), Error);
}

// ids [1, seq] -> Shape -> Gather(1) -> Unsqueeze -> Concat([1], seq) -> ConstantOfShape -> Expand:
// shape arithmetic on a symbolic dim folds at load; the graph keeps the symbol.
TEST_CASE("shape arithmetic with a symbolic dim folds at load and keeps the symbol") {
  ModelMaker mm(18);
  mm.input("ids", TP::INT64, {int64_t{1}, std::string("seq")});
  mm.init_i64("one", {}, {1});
  mm.init_i64("one_vec", {1}, {1});
  mm.init_i64("zero_axis", {1}, {0});
  mm.node("Shape", {"ids"}, {"shape"});
  mm.node("Gather", {"shape", "one"}, {"seq"});
  mm.node("Unsqueeze", {"seq", "zero_axis"}, {"seq_vec"});
  attr_i(mm.node("Concat", {"one_vec", "seq_vec", "seq_vec"}, {"mask_shape"}), "axis", 0);
  testing::attr_fill_value(mm.node("ConstantOfShape", {"mask_shape"}, {"ones"}), TP::FLOAT, 1.0f);
  mm.node("Range", {"zero_scalar", "seq", "one"}, {"positions"});
  mm.init_i64("zero_scalar", {}, {0});
  mm.output("ones");
  mm.output("positions", TP::INT64);
  Model m = mm.load();
  const Graph& g = m.graph();
  int64_t seq = m.inputs()[0].shape[1];
  REQUIRE(seq < 0);
  CHECK(g.symbol_name(seq) == "seq");
  // Shape/Gather/Unsqueeze/Concat left no nodes; ConstantOfShape became a fill of [1, seq, seq].
  CHECK(g.nodes()[0].op == "fill");
  CHECK(g.values()[g.outputs()[0]].shape == std::vector<int64_t>{1, seq, seq});
  CHECK(g.values()[g.outputs()[1]].shape == std::vector<int64_t>{seq});
  CHECK(m.outputs()[0].dim_names == std::vector<std::string>{"", "seq", "seq"});
}

TEST_CASE("a reshape target computed from a symbolic dim becomes -1 in the catalog op") {
  ModelMaker mm(18);
  mm.input("x", TP::FLOAT, {int64_t{1}, std::string("seq"), int64_t{8}});
  mm.init_i64("idx", {1}, {1});
  mm.init_i64("tail", {2}, {2, 4});
  mm.init_i64("head", {1}, {1});
  mm.node("Shape", {"x"}, {"s"});
  mm.node("Gather", {"s", "idx"}, {"seq"});
  auto& c = mm.node("Concat", {"head", "seq", "tail"}, {"target"});
  attr_i(c, "axis", 0);
  mm.node("Reshape", {"x", "target"}, {"y"}, "split_heads");
  mm.output("y");
  Model m = mm.load();
  const Graph& g = m.graph();
  int64_t seq = m.inputs()[0].shape[1];
  REQUIRE(g.nodes().size() == 1);
  CHECK(g.nodes()[0].op == "reshape");
  CHECK(g.values()[g.outputs()[0]].shape == std::vector<int64_t>{1, seq, 2, 4});
}

TEST_CASE("a reshape keeping several run-time dims copies them (copy_zeros) and inference keeps their symbols") {
  ModelMaker mm(20);
  mm.input("x", TP::FLOAT, {std::string("batch"), std::string("seq"), int64_t{8}});
  mm.init_i64("idx", {2}, {0, 1});
  mm.init_i64("tail", {2}, {2, 4});
  mm.init_i64("axis0", {1}, {0});
  mm.node("Shape", {"x"}, {"s"});
  mm.node("Gather", {"s", "idx"}, {"bs"});
  attr_i(mm.node("Concat", {"bs", "tail"}, {"target"}), "axis", 0);
  mm.node("Reshape", {"x", "target"}, {"y"}, "split_heads");
  mm.node("Unsqueeze", {"y", "axis0"}, {"z"}, "add_axis");  // [1, batch, seq, 2, 4]: the symbols move
  mm.output("y");
  mm.output("z");
  Model m = mm.load();
  const Graph& g = m.graph();
  int64_t b = m.inputs()[0].shape[0], s = m.inputs()[0].shape[1];
  REQUIRE(g.nodes().size() >= 1);
  const Graph::Node& n = g.nodes()[0];
  CHECK(n.op == "reshape");
  CHECK(g.values()[g.outputs()[0]].shape == std::vector<int64_t>{b, s, 2, 4});
  CHECK(g.values()[g.outputs()[1]].shape == std::vector<int64_t>{1, b, s, 2, 4});
  // The catalog's rule, run with primes for the symbols, gives the symbols back.
  ValueSpec in{HAL_DTYPE_FLOAT32, {b, s, 8}};
  std::vector<ValueSpec> out = infer_node("reshape", {&in}, n.attrs, 1);
  CHECK(out[0].shape == std::vector<int64_t>{b, s, 2, 4});
  // Sizes at run time: every value's shape from the input's.
  std::vector<std::vector<int64_t>> shapes = infer_shapes(g, {{3, 5, 8}});
  CHECK(shapes[g.outputs()[0]] == std::vector<int64_t>{3, 5, 2, 4});
  CHECK(shapes[g.outputs()[1]] == std::vector<int64_t>{1, 3, 5, 2, 4});
}

TEST_CASE("a Reshape whose target is a run-time tensor is translated once the target's value is known") {
  ModelMaker mm(18);
  mm.input("x", TP::FLOAT, {int64_t{2}, int64_t{3}});
  mm.input("target", TP::INT64, {int64_t{2}});
  mm.node("Reshape", {"x", "target"}, {"y"}, "dyn_reshape");
  mm.output("y");
  Model m = mm.load();
  REQUIRE(m.needs_input_values());
  CHECK(m.value_inputs() == std::vector<std::string>{"target"});
  CHECK(m.graph().nodes().empty());
  REQUIRE(m.inputs().size() == 2);  // every input is still the model's to feed
  CHECK(m.outputs().at(0).name == "y");
  CHECK(m.outputs().at(0).dtype == HAL_DTYPE_FLOAT32);
  const int64_t three_two[] = {3, 2};
  Model b = m.bind({HostTensorRef{HAL_DTYPE_INT64, {2}, three_two}});
  CHECK_FALSE(b.needs_input_values());
  REQUIRE(b.inputs().size() == 1);
  CHECK(b.inputs()[0].name == "x");
  CHECK(b.outputs().at(0).shape == std::vector<int64_t>{3, 2});
  // An element count that differs: the node is named.
  const int64_t four_two[] = {4, 2};
  CHECK_THROWS_WITH_AS(m.bind({HostTensorRef{HAL_DTYPE_INT64, {2}, four_two}}),
                       doctest::Contains("node 0 'dyn_reshape' (Reshape, ai.onnx opset 18)"), Error);
  // Values that are not the input's dtype or shape, or too few values.
  const int32_t narrow[] = {3, 2};
  CHECK_THROWS_WITH_AS(m.bind({HostTensorRef{HAL_DTYPE_INT32, {2}, narrow}}),
                       doctest::Contains("input 'target' is int32 [2] but the model declares int64 [2]"), Error);
  CHECK_THROWS_WITH_AS(m.bind({}), doctest::Contains("0 values for 1 value inputs"), Error);
}

TEST_CASE("a Reshape whose target is computed from tensor values runs in stages") {
  ModelMaker mm(18);
  mm.input("x", TP::FLOAT, {int64_t{2}, int64_t{3}});
  mm.input("f", TP::FLOAT, {int64_t{2}, int64_t{2}});
  mm.init_i64("axis0", {1}, {0});
  attr_i(mm.node("Cast", {"f"}, {"fi"}), "to", TP::INT64);
  attr_i(mm.node("ReduceSum", {"fi", "axis0"}, {"t"}), "keepdims", 0);
  mm.node("Reshape", {"x", "t"}, {"y"}, "dyn_reshape");
  mm.output("y");
  // The target is computed on the device from a float matrix: the graph up to it runs first.
  Model m = mm.load();
  REQUIRE(m.runs_in_stages());
  CHECK(m.graph().nodes().empty());
  ModelStage first = m.stage({});
  CHECK_FALSE(first.final);
  CHECK(first.request_what.find("Reshape's target shape") != std::string::npos);
  CHECK(first.request_what.find("node 2 'dyn_reshape'") != std::string::npos);
  CHECK(std::find(first.output_ids.begin(), first.output_ids.end(), first.request) != first.output_ids.end());
  CHECK(first.graph.inputs().size() == 2);
  CHECK(first.request_view);
  CHECK(first.request_view_source == first.model_input_ids.at(0));  // x's bytes are viewed
  // With the target read back (resolved by the runner): the next stage takes x's bytes as an
  // input of that shape, its dims >= 2 symbols, so every such target translates the same.
  const int64_t three_two[] = {3, 2};
  ModelStage second = m.stage({HostTensorRef{HAL_DTYPE_INT64, {2}, three_two}});
  CHECK(second.final);
  REQUIRE(second.rows.size() == 1);
  CHECK(second.rows[0].view);
  CHECK(second.rows[0].source == first.model_input_ids.at(0));
  REQUIRE(second.rows[0].shape.size() == 2);
  CHECK((second.rows[0].shape[0] < 0 && second.rows[0].shape[1] < 0));
  CHECK(second.outputs.at(0).shape == second.rows[0].shape);
  const int64_t two_three[] = {2, 3};
  CHECK(m.stage({HostTensorRef{HAL_DTYPE_INT64, {2}, two_three}}).graph.inputs().size() == second.graph.inputs().size());
  const int64_t one_six[] = {1, 6};  // a dim below 2 stays concrete (a 1 broadcasts)
  ModelStage ones = m.stage({HostTensorRef{HAL_DTYPE_INT64, {2}, one_six}});
  CHECK(ones.rows.at(0).shape[0] == 1);
  CHECK(ones.rows.at(0).shape[1] < 0);
  // With concrete counts (the runner's fallback): the Reshape itself, with the target as a value.
  ModelStage concrete = m.stage({HostTensorRef{HAL_DTYPE_INT64, {2}, three_two}}, false);
  REQUIRE(concrete.graph.nodes().size() == 1);
  CHECK(concrete.graph.nodes()[0].op == "reshape");
  CHECK(concrete.outputs.at(0).shape == std::vector<int64_t>{3, 2});
  // A target whose element count differs: refused naming the node (the runner resolves it
  // first with resolve_reshape, with the same words).
  const int64_t five_two[] = {5, 2};
  CHECK_THROWS_WITH_AS(m.stage({HostTensorRef{HAL_DTYPE_INT64, {2}, five_two}}, false),
                       doctest::Contains("stage 2: node 2 'dyn_reshape' (Reshape, ai.onnx opset 18)"), Error);
  using detail::resolve_reshape;
  CHECK(std::get<std::vector<int64_t>>(resolve_reshape({2, 3}, {-1, 2}, false)) == std::vector<int64_t>{3, 2});
  CHECK(std::get<std::vector<int64_t>>(resolve_reshape({2, 3}, {0, -1}, false)) == std::vector<int64_t>{2, 3});
  CHECK(std::get<std::vector<int64_t>>(resolve_reshape({0, 3}, {0, 3}, true)) == std::vector<int64_t>{0, 3});
  CHECK(std::get<std::string>(resolve_reshape({2, 3}, {5, 2}, false)) == "cannot reshape [2, 3] (6 elements) to [5, 2]");
  CHECK(std::get<std::string>(resolve_reshape({2, 3}, {-1, -1}, false)).find("two dims are -1") != std::string::npos);
  CHECK(std::get<std::string>(resolve_reshape({2, 3}, {4, -1}, false)).find("cannot reshape") != std::string::npos);
  CHECK(std::get<std::string>(resolve_reshape({2, 3}, {-2, 3}, false)) == "dim 0 is -2");
  CHECK(std::get<std::string>(resolve_reshape({6}, {0, 0}, false)).find("is 0 (copy) but the input has rank 1") !=
        std::string::npos);
}

// Found by the fuzz target: a node with fewer inputs than its op needs
// (opset 18: libonnx's checker does not run) read past the node's inputs.
TEST_CASE("a node missing a required input is refused naming it") {
  ModelMaker mm(18);
  mm.input("x", TP::FLOAT, {int64_t{2}, int64_t{3}});
  mm.node("Reshape", {"x"}, {"y"}, "short");
  mm.node("Gemm", {}, {"z"}, "empty");
  mm.output("y");
  CHECK_THROWS_WITH_AS(mm.load(), doctest::Contains("node 0 'short' (Reshape, ai.onnx opset 18): input 1 is required"), Error);
}

}  // namespace
}  // namespace hal::onnx
