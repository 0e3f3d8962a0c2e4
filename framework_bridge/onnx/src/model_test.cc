// Model::load: parsing, checks, initializers, inputs with symbolic dims.
#include "hal/onnx/model.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "hal/runtime/error.hpp"
#include "test_models.hpp"
#include "op_table.hpp"

namespace hal::onnx {
namespace {

using testing::attr_i;
using testing::ModelMaker;
using TP = ::onnx::TensorProto;

// Throws hal::Error with CODE and a message containing every PARTS entry.
template <class F>
void expect_error(F&& f, hal_status_code_e code, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL("no error; expected " << status_code_name(code));
  } catch (const Error& e) {
    CHECK_MESSAGE(e.code() == code, e.what());
    for (const auto& p : parts) CHECK_MESSAGE(std::string(e.what()).find(p) != std::string::npos, "'" << p << "' not in: " << e.what());
  }
}

ModelMaker relu_model(int64_t opset = 17) {
  ModelMaker mm(opset);
  mm.input("x", TP::FLOAT, {std::string("batch"), int64_t{4}});
  mm.node("Relu", {"x"}, {"y"});
  mm.output("y");
  return mm;
}

TEST_CASE("a model's inputs and outputs, symbolic dims named") {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {std::string("batch"), std::string(""), int64_t{4}});
  mm.node("Relu", {"x"}, {"y"});
  mm.output("y");
  Model m = mm.load();
  CHECK(m.opset() == 17);
  REQUIRE(m.inputs().size() == 1);
  const TensorInfo& in = m.inputs()[0];
  CHECK(in.name == "x");
  CHECK(in.dtype == HAL_DTYPE_FLOAT32);
  REQUIRE(in.shape.size() == 3);
  CHECK(in.shape[0] < 0);
  CHECK(in.shape[1] < 0);
  CHECK(in.shape[0] != in.shape[1]);
  CHECK(in.shape[2] == 4);
  CHECK(in.dim_names == std::vector<std::string>{"batch", "x_d1", ""});
  REQUIRE(m.outputs().size() == 1);
  CHECK(m.outputs()[0].name == "y");
  CHECK(m.outputs()[0].shape == in.shape);
  CHECK(m.outputs()[0].dim_names == in.dim_names);
  CHECK(m.graph().nodes().size() == 1);
  CHECK(m.graph().nodes()[0].op == "relu");
  CHECK(m.graph().value_name(m.graph().outputs()[0]) == "y");
}

TEST_CASE("malformed, truncated, empty and non-ONNX bytes are refused") {
  std::string text = "this is not an ONNX model at all, just text";
  expect_error([&] { Model::load_bytes(text.data(), text.size()); }, HAL_STATUS_INVALID_ARGUMENT, {"not a valid ONNX model"});
  std::string good = relu_model().bytes();
  std::string cut = good.substr(0, good.size() / 2);
  expect_error([&] { Model::load_bytes(cut.data(), cut.size()); }, HAL_STATUS_INVALID_ARGUMENT, {"malformed or truncated"});
  expect_error([&] { Model::load_bytes(nullptr, 0); }, HAL_STATUS_INVALID_ARGUMENT, {"empty"});
  expect_error([] { Model::load("/nonexistent/dir/model.onnx"); }, HAL_STATUS_NOT_FOUND, {"/nonexistent/dir/model.onnx", "does not exist"});
  std::string dir = testing::temp_dir("model");
  std::ofstream(dir + "/junk.onnx") << text;
  expect_error([&] { Model::load(dir + "/junk.onnx"); }, HAL_STATUS_INVALID_ARGUMENT, {"junk.onnx", "not a valid ONNX model"});
}

TEST_CASE("opsets up to the newest known load as written by operator version - newer ones and other domains are refused") {
  for (int opset : {6, 7, 12, 13, 21, 22, detail::newest_known_opset()}) {
    CAPTURE(opset);
    CHECK(relu_model(opset).load().graph().nodes().size() == 1);
  }
  // Relu version 1 (consumed_inputs, before opset 6) has no row.
  expect_error([] { relu_model(5).load(); }, HAL_STATUS_UNIMPLEMENTED, {"opset 5 uses Relu version 1", "versions 6..14"});
  expect_error([] { relu_model(0).load(); }, HAL_STATUS_UNIMPLEMENTED, {"opset 0", "opsets 1 to"});
  // Newer than the table knows: refused at the node, naming the operator and the versions the table has.
  expect_error([] { relu_model(detail::newest_known_opset() + 1).load(); }, HAL_STATUS_UNIMPLEMENTED,
               {"Relu", "newer than the", "versions 6..14"});
  ModelMaker mm = relu_model(18);
  auto* o = mm.proto().add_opset_import();
  o->set_domain("com.acme");
  o->set_version(1);
  mm.node("FancyOp", {"y"}, {"z"}, "fancy").set_domain("com.acme");
  mm.proto().mutable_graph()->mutable_output(0)->set_name("z");
  expect_error([&] { mm.load(); }, HAL_STATUS_UNIMPLEMENTED, {"node 1 'fancy'", "FancyOp", "com.acme"});
  ModelMaker none(17);
  none.proto().mutable_opset_import(0)->set_domain("com.acme");
  none.input("x", TP::FLOAT, {int64_t{2}});
  none.output("x");
  expect_error([&] { none.load(); }, HAL_STATUS_INVALID_ARGUMENT, {"no opset of the default domain"});
}

TEST_CASE("an unsupported operator is named with its node, index and opset") {
  ModelMaker mm(18);
  mm.input("x", TP::FLOAT, {int64_t{2}, int64_t{3}});
  mm.node("Relu", {"x"}, {"r"});
  mm.node("RoiAlign", {"r", "r", "r"}, {"y"}, "my_roialign");
  mm.output("y");
  expect_error([&] { mm.load(); }, HAL_STATUS_UNIMPLEMENTED, {"node 1 'my_roialign'", "RoiAlign", "opset 18", "not supported"});
}

TEST_CASE("an unsupported attribute value is named") {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {int64_t{1}, int64_t{1}, int64_t{4}, int64_t{4}});
  auto& n = mm.node("MaxPool", {"x"}, {"y"}, "pool");
  testing::attr_ints(n, "kernel_shape", {2, 2});
  attr_i(n, "storage_order", 1);
  mm.output("y");
  expect_error([&] { mm.load(); }, HAL_STATUS_UNIMPLEMENTED, {"node 0 'pool'", "MaxPool", "storage_order=1"});
}

TEST_CASE("a cycle and a dangling value are refused naming the node") {
  for (int64_t opset : {17, 20}) {  // 17: libonnx's checker; 20: HAL's own structural check
    ModelMaker cyc(opset);
    cyc.input("x", TP::FLOAT, {int64_t{2}});
    cyc.node("Add", {"x", "b"}, {"a"}, "first");
    cyc.node("Relu", {"a"}, {"b"}, "second");
    cyc.output("b");
    expect_error([&] { cyc.load(); }, HAL_STATUS_INVALID_ARGUMENT, {"first"});
    ModelMaker dang(opset);
    dang.input("x", TP::FLOAT, {int64_t{2}});
    dang.node("Add", {"x", "ghost"}, {"y"}, "adder");
    dang.output("y");
    expect_error([&] { dang.load(); }, HAL_STATUS_INVALID_ARGUMENT, {"adder", "ghost"});
  }
  ModelMaker cyc(20);
  cyc.input("x", TP::FLOAT, {int64_t{2}});
  cyc.node("Add", {"x", "b"}, {"a"}, "first");
  cyc.node("Relu", {"a"}, {"b"}, "second");
  cyc.output("b");
  expect_error([&] { cyc.load(); }, HAL_STATUS_INVALID_ARGUMENT, {"node 0 'first'", "'b'", "node 1 'second'", "cycle"});
  ModelMaker dang(20);
  dang.input("x", TP::FLOAT, {int64_t{2}});
  dang.node("Add", {"x", "ghost"}, {"y"}, "adder");
  dang.output("y");
  expect_error([&] { dang.load(); }, HAL_STATUS_INVALID_ARGUMENT, {"node 0 'adder'", "'ghost'", "dangling"});
}

TEST_CASE("libonnx's checker refuses an invalid node for opsets <= 17") {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {int64_t{2}});
  mm.node("Relu", {"x", "x"}, {"y"}, "two_inputs");  // Relu takes one input
  mm.output("y");
  expect_error([&] { mm.load(); }, HAL_STATUS_INVALID_ARGUMENT, {"checker"});
}

TEST_CASE("initializers become graph constants from raw_data and typed fields") {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {int64_t{3}});
  mm.init_f32("w_raw", {3}, {1.5f, -2.0f, 3.25f});
  auto* typed = mm.proto().mutable_graph()->add_initializer();
  typed->set_name("w_typed");
  typed->set_data_type(TP::FLOAT);
  typed->add_dims(3);
  for (float f : {4.0f, 5.0f, 6.0f}) typed->add_float_data(f);
  auto* i8 = mm.proto().mutable_graph()->add_initializer();
  i8->set_name("i8");
  i8->set_data_type(TP::INT8);
  i8->add_dims(2);
  i8->add_int32_data(-3);
  i8->add_int32_data(7);
  mm.node("Add", {"x", "w_raw"}, {"a"});
  mm.node("Mul", {"a", "w_typed"}, {"y"});
  mm.node("Identity", {"i8"}, {"z"});
  mm.output("y");
  mm.output("z", TP::INT8);
  Model m = mm.load();
  const Graph& g = m.graph();
  REQUIRE(g.constants().size() == 3);
  auto bytes_of = [&](const std::string& name) -> std::vector<uint8_t> {
    for (uint32_t id : g.constants())
      if (g.value_name(id) == name) return *g.constant_data(id);
    FAIL("no constant " << name);
    return {};
  };
  std::vector<uint8_t> raw = bytes_of("w_raw"), typed_b = bytes_of("w_typed"), i8b = bytes_of("z");
  float f[3];
  std::memcpy(f, raw.data(), 12);
  CHECK(f[2] == 3.25f);
  std::memcpy(f, typed_b.data(), 12);
  CHECK(f[1] == 5.0f);
  REQUIRE(i8b.size() == 2);
  CHECK(static_cast<int8_t>(i8b[0]) == -3);
  CHECK(i8b[1] == 7);
  CHECK(m.inputs().size() == 1);  // initializers are not inputs
}

TEST_CASE("an initializer whose data does not match its shape is refused") {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {int64_t{3}});
  auto& w = mm.init_f32("w", {4}, {1, 2, 3});  // 12 bytes for 4 floats
  (void)w;
  mm.node("Add", {"x", "w"}, {"y"});
  mm.output("y");
  expect_error([&] { mm.load(); }, HAL_STATUS_INVALID_ARGUMENT, {"initializer 'w'", "raw_data holds 12 bytes", "needs 16"});
  ModelMaker str(17);
  str.input("x", TP::FLOAT, {int64_t{1}});
  auto* s = str.proto().mutable_graph()->add_initializer();
  s->set_name("names");
  s->set_data_type(TP::STRING);
  s->add_dims(1);
  s->add_string_data("a");
  str.node("Identity", {"x"}, {"y"});
  str.output("y");
  expect_error([&] { str.load(); }, HAL_STATUS_INVALID_ARGUMENT, {"initializer 'names'", "STRING"});
}

TEST_CASE("graph outputs that are inputs or constants are copied by a node") {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {int64_t{2}});
  mm.init_f32("c", {2}, {1, 2});
  mm.output("x");
  mm.output("c");
  Model m = mm.load();
  REQUIRE(m.graph().nodes().size() == 2);
  CHECK(m.graph().nodes()[0].op == "copy");
  CHECK(m.outputs()[1].name == "c");
}

// The fuzz target's seed corpus: hand-made models (control flow included)
// and two torch.onnx.export MLPs (opset 13 TorchScript, opset 20 dynamo)
// load; the wrong-opset seed is refused; the If on a computed condition runs
// in stages, its first stage stopping at the condition.
TEST_CASE("the fuzz seed corpus loads (torch-exported MLPs included)") {
  size_t loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(HAL_TEST_CORPUS_DIR)) {
    std::string name = entry.path().filename().string();
    CAPTURE(name);
    if (name == "bad_opset.onnx") {
      expect_error([&] { Model::load(entry.path().string()); }, HAL_STATUS_UNIMPLEMENTED, {"opset 5 uses Relu version 1"});
      continue;
    }
    if (name == "range_not_scalar.onnx") {  // a fuzzer find: it crashed the Range translation
      expect_error([&] { Model::load(entry.path().string()); }, HAL_STATUS_INVALID_ARGUMENT,
                   {"(Range", "input 'start' must be a scalar (one element), got rank 8"});
      continue;
    }
    Model m = Model::load(entry.path().string());
    CHECK(!m.outputs().empty());
    ++loaded;
    if (name == "unique_huge_input.onnx") {  // a fuzzer find: translating its Unique of 2^28 declared elements
      CHECK(m.runs_in_stages());            // built 2 GiB of index constants (now aranges on the device)
      continue;
    }
    if (name == "if_staged.onnx") {
      REQUIRE(m.runs_in_stages());
      ModelStage first = m.stage({});
      CHECK_FALSE(first.final);
      CHECK(first.request_what.find("If's condition ('c')") != std::string::npos);
      continue;
    }
    CHECK(!m.graph().nodes().empty());
  }
  CHECK(loaded == 11);
}

}  // namespace
}  // namespace hal::onnx
