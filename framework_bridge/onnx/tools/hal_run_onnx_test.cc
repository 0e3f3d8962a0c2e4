// hal-run-onnx end to end: .npy in, .npy out, partition and timings printed.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "npy.hpp"
#include "test_models.hpp"

namespace hal::onnx {
namespace {

TEST_CASE("hal-run-onnx runs a model from .npy inputs and writes .npy outputs") {
  namespace fs = std::filesystem;
  std::string dir = testing::temp_dir("cli");
  testing::ModelMaker mm(17);
  mm.input("x", ::onnx::TensorProto::FLOAT, {std::string("n")});
  mm.init_f32("two", {}, {2.0f});
  mm.node("Mul", {"x", "two"}, {"doubled"});
  mm.output("doubled");
  std::ofstream(dir + "/m.onnx", std::ios::binary) << mm.bytes();
  HostTensor x{HAL_DTYPE_FLOAT32, {3}, std::vector<uint8_t>(12)};
  float xs[3] = {1.5f, -2, 4};
  std::memcpy(x.data.data(), xs, 12);
  npy::write(dir + "/x.npy", x);
  std::string config = testing::cpu_session().config;
  std::string cmd = std::string(HAL_TEST_RUN_ONNX) + " " + dir + "/m.onnx --input x=" + dir + "/x.npy --config " + config +
                    " --output-dir " + dir + "/out --bench 3 --explain > " + dir + "/log.txt 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream log_in(dir + "/log.txt");
  std::string log((std::istreambuf_iterator<char>(log_in)), std::istreambuf_iterator<char>());
  CHECK_MESSAGE(log.find("partition:") != std::string::npos, log);
  CHECK(log.find("3 runs: mean") != std::string::npos);
  CHECK(log.find("output doubled: float32 [3]") != std::string::npos);
  HostTensor y = npy::read(dir + "/out/doubled.npy");
  float ys[3];
  REQUIRE(y.data.size() == 12);
  std::memcpy(ys, y.data.data(), 12);
  CHECK(ys[0] == 3.0f);
  CHECK(ys[1] == -4.0f);
  CHECK(ys[2] == 8.0f);
  // --no-graph-compile: the same outputs, every node op by op.
  std::string plain = std::string(HAL_TEST_RUN_ONNX) + " " + dir + "/m.onnx --input x=" + dir + "/x.npy --config " +
                      config + " --output-dir " + dir + "/plain --no-graph-compile --explain > " + dir +
                      "/plain.txt 2>&1";
  REQUIRE(std::system(plain.c_str()) == 0);
  HostTensor y2 = npy::read(dir + "/plain/doubled.npy");
  CHECK(y2.data == y.data);
  // A wrong feed name fails with the session's message and exit code 1.
  std::string bad = std::string(HAL_TEST_RUN_ONNX) + " " + dir + "/m.onnx --input y=" + dir + "/x.npy --config " + config +
                    " > " + dir + "/bad.txt 2>&1";
  int rc = std::system(bad.c_str());
  CHECK(WEXITSTATUS(rc) == 1);
  std::ifstream bad_in(dir + "/bad.txt");
  std::string bad_log((std::istreambuf_iterator<char>(bad_in)), std::istreambuf_iterator<char>());
  CHECK_MESSAGE(bad_log.find("INVALID_ARGUMENT: feed 'y' is not an input") != std::string::npos, bad_log);
}

}  // namespace
}  // namespace hal::onnx
