#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/passes/pass_test_util.hpp"
#include "hal/runtime/graph_passes.hpp"
#include "testing/test_util.hpp"

using hal::testing::float_bytes;

TEST_CASE("run_pipeline: decompose, fold, CSE and DCE in order, each stage dumped, same results") {
  hal::testing::OpTester cpu(HAL_TEST_CPU_PLUGIN);
  hal::testing::TempDir dir;
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {g.symbol("n"), 2}, "x");
  auto w = g.constant(HAL_DTYPE_FLOAT32, {2}, float_bytes({0.5, 2}), "w");
  auto scale = g.add_op("exp", {w});                 // folds
  auto a = g.add_op("silu", {x});                    // decomposed (silu unsupported)
  auto b = g.add_op("silu", {x});                    // then the same nodes: CSE
  auto unused = g.add_op("neg", {x});                // dead
  g.mark_output(g.add_op("add", {g.add_op("mul", {a, scale}), b}), "y");
  (void)unused;
  hal::PipelineOptions o;
  o.supported = [](const std::string& op) { return op != "silu"; };
  o.fold_device = cpu.device().get();
  o.dump_dir = dir.path();
  hal::Graph out = hal::run_pipeline(g, o);
  std::vector<std::string> ops;
  for (const auto& n : out.nodes()) ops.push_back(n.op);
  CHECK(ops == std::vector<std::string>{"sigmoid", "mul", "mul", "add"});
  CHECK(out.constants().size() == 1);
  CHECK(out.value_name(out.outputs()[0]) == "y");
  std::vector<std::vector<float>> in = {{-1, 0, 1, 2, 3, -4}};
  auto want = hal::testing::run_graph(cpu, g, in, {{3, 2}});
  auto got = hal::testing::run_graph(cpu, out, in, {{3, 2}});
  REQUIRE(got.size() == 1);
  for (size_t i = 0; i < want[0].size(); ++i) CHECK(got[0][i] == doctest::Approx(want[0][i]));

  std::filesystem::path stages = std::filesystem::path(dir.path()) / g.hash().substr(0, 12);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(stages)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"00_input.txt", "01_decompose.txt", "02_fold_constants.txt",
                                          "03_fuse_patterns.txt", "04_fold_permutes.txt", "05_cse.txt",
                                          "06_dce.txt"});
  std::ifstream last(stages / "06_dce.txt");
  std::stringstream text;
  text << last.rdbuf();
  CHECK(text.str() == out.dump());
}

TEST_CASE("run_pipeline: an invalid graph is refused by the first verify, naming the node") {
  hal::Graph g;
  auto x = g.input(HAL_DTYPE_FLOAT32, {2});
  g.mark_output(g.add_op("relu", {x}, hal::ValueSpec{HAL_DTYPE_FLOAT32, {3}}));
  CHECK_THROWS_WITH_AS(hal::run_pipeline(g, {}),
                       "node 0 ('relu'): output 0 (value 1) is declared float32 [3] but the catalog's rules give "
                       "float32 [2] (? = a size derived from symbols)",
                       hal::Error);
}
