// External initializer data: read relative to the model's folder; paths
// leaving it refused.
#include "external_data.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "hal/onnx/model.hpp"
#include "hal/runtime/error.hpp"
#include "test_models.hpp"

namespace hal::onnx {
namespace {

namespace fs = std::filesystem;
using testing::ModelMaker;
using TP = ::onnx::TensorProto;

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
}

// A model adding external initializer "w" (3 floats at LOCATION, OFFSET)
// to its input; written to DIR/model.onnx.
std::string external_model(const std::string& dir, const std::string& location, int64_t offset = 0, int64_t length = 12) {
  ModelMaker mm(17);
  mm.input("x", TP::FLOAT, {int64_t{3}});
  auto* w = mm.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(TP::FLOAT);
  w->add_dims(3);
  w->set_data_location(TP::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  kv("offset", std::to_string(offset));
  kv("length", std::to_string(length));
  mm.node("Add", {"x", "w"}, {"y"});
  mm.output("y");
  std::string path = dir + "/model.onnx";
  std::ofstream(path, std::ios::binary) << mm.bytes();
  return path;
}

std::string error_of(const std::string& path, const LoadOptions& o = {}) {
  try {
    Model::load(path, o);
  } catch (const Error& e) {
    return std::string(status_code_name(e.code())) + ": " + e.what();
  }
  return "no error";
}

TEST_CASE("external data is read relative to the model's folder, at its offset") {
  std::string dir = testing::temp_dir("ext");
  fs::create_directories(dir + "/weights");
  write_floats(dir + "/weights/w.bin", {9, 9, 1.5f, 2.5f, 3.5f});
  Model m = Model::load(external_model(dir, "weights/w.bin", 8, 12));
  const Graph& g = m.graph();
  REQUIRE(g.constants().size() == 1);
  const std::vector<uint8_t>& b = *g.constant_data(g.constants()[0]);
  REQUIRE(b.size() == 12);
  float f[3];
  std::memcpy(f, b.data(), 12);
  CHECK(f[0] == 1.5f);
  CHECK(f[2] == 3.5f);
  // LoadOptions::model_dir overrides the folder; bytes without it refuse external data.
  std::string other = testing::temp_dir("ext_other");
  std::string bytes;
  {
    std::ifstream in(dir + "/model.onnx", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  CHECK_THROWS_WITH_AS(Model::load_bytes(bytes.data(), bytes.size()), doctest::Contains("refused"), Error);
  LoadOptions o;
  o.model_dir = dir;
  CHECK(Model::load_bytes(bytes.data(), bytes.size(), o).graph().constants().size() == 1);
  o.model_dir = other;
  CHECK(error_of(dir + "/model.onnx", o).find("NOT_FOUND") == 0);
}

TEST_CASE("external data escaping the model's folder is refused") {
  std::string root = testing::temp_dir("escape");
  std::string dir = root + "/model";
  fs::create_directories(dir);
  write_floats(root + "/outside.bin", {1, 2, 3});
  CHECK(error_of(external_model(dir, "../outside.bin")).find("'..' component") != std::string::npos);
  CHECK(error_of(external_model(dir, "sub/../../outside.bin")).find("'..' component") != std::string::npos);
  std::string abs = error_of(external_model(dir, root + "/outside.bin"));
  CHECK_MESSAGE(abs.find("absolute") != std::string::npos, abs);
  fs::create_symlink(root + "/outside.bin", dir + "/link.bin");
  std::string sym = error_of(external_model(dir, "link.bin"));
  CHECK_MESSAGE(sym.find("outside the model's folder") != std::string::npos, sym);
  CHECK(sym.find("INVALID_ARGUMENT") == 0);
  // A symlink to a folder outside, then a file below it.
  fs::create_directories(root + "/elsewhere");
  write_floats(root + "/elsewhere/w.bin", {1, 2, 3});
  fs::create_directory_symlink(root + "/elsewhere", dir + "/linkdir");
  CHECK(error_of(external_model(dir, "linkdir/w.bin")).find("outside the model's folder") != std::string::npos);
  // A symlink that stays inside is fine.
  write_floats(dir + "/real.bin", {1, 2, 3});
  fs::create_symlink(dir + "/real.bin", dir + "/inside.bin");
  CHECK(error_of(external_model(dir, "inside.bin")) == "no error");
}

TEST_CASE("external data shorter than offset + length, or missing, is refused") {
  std::string dir = testing::temp_dir("short");
  write_floats(dir + "/w.bin", {1, 2});  // 8 bytes
  std::string e = error_of(external_model(dir, "w.bin", 0, 12));
  CHECK_MESSAGE(e.find("shorter than offset 0 + length 12") != std::string::npos, e);
  CHECK(e.find("initializer 'w'") != std::string::npos);
  CHECK(error_of(external_model(dir, "w.bin", 16, 12)).find("shorter than offset 16") != std::string::npos);
  CHECK(error_of(external_model(dir, "missing.bin")).find("NOT_FOUND") == 0);
  write_floats(dir + "/w4.bin", {1, 2, 3, 4});
  CHECK(error_of(external_model(dir, "w4.bin", 0, 16)).find("external data holds 16 bytes") != std::string::npos);
}

}  // namespace
}  // namespace hal::onnx
