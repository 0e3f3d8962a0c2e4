// run_pipeline: the passes in order, each stage's IR dumped on request.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hal/runtime/graph_passes.hpp"

namespace hal {
namespace {

class Dumper {
 public:
  Dumper(const PipelineOptions& o, const Graph& input) {
    std::string dir = o.dump_dir;
    if (dir.empty()) {
      const char* env = std::getenv("HAL_GRAPH_DUMP_DIR");
      dir = env != nullptr ? env : "";
    }
    if (!dir.empty()) dir_ = std::filesystem::path(dir) / input.hash().substr(0, 12);
  }
  void operator()(const Graph& g, const char* stage) {
    if (dir_.empty()) return;
    char prefix[8];
    std::snprintf(prefix, sizeof(prefix), "%02d_", step_++);
    std::filesystem::path file = dir_ / (prefix + std::string(stage) + ".txt");
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << g.dump();
    out.close();
    if (ec || !out)
      throw Error(HAL_STATUS_INTERNAL, "run_pipeline: cannot write the graph dump " + file.string() +
                                           (ec ? ": " + ec.message() : std::string()));
  }

 private:
  std::filesystem::path dir_;
  int step_ = 0;
};

}  // namespace

Graph run_pipeline(Graph g, const PipelineOptions& options) {
  Dumper dump(options, g);
  g.verify();
  dump(g, "input");
  decompose(g, options.supported);
  dump(g, "decompose");
  if (options.fold_device != nullptr) fold_constants(g, *options.fold_device, options.fold_max_bytes);
  dump(g, "fold_constants");
  fuse_patterns(g, options.supported);
  dump(g, "fuse_patterns");
  fold_permutes(g);
  dump(g, "fold_permutes");
  eliminate_common_subexpressions(g);
  dump(g, "cse");
  eliminate_dead_code(g);
  dump(g, "dce");
  g.verify();
  return g;
}

}  // namespace hal
