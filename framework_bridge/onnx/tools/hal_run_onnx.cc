// hal-run-onnx: runs an ONNX model through the HAL and prints the partition,
// the outputs and the timings.
//
//   hal-run-onnx model.onnx --input x=x.npy [--config hal.toml] [--device hal:1]
//                [--output-dir out/] [--bench 20] [--explain]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "hal/common/dtype.hpp"
#include "hal/onnx/session.hpp"
#include "hal/runtime/error.hpp"
#include "npy.hpp"

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string info_text(const hal::onnx::TensorInfo& t) {
  std::string out = t.name + ": " + hal::common::dtype_name(t.dtype) + " [";
  for (size_t i = 0; i < t.shape.size(); ++i) out += (i ? ", " : "") + (t.shape[i] < 0 ? t.dim_names[i] : std::to_string(t.shape[i]));
  return out + "]";
}

int run(int argc, char** argv) {
  std::string model_path, config, device, output_dir;
  std::vector<std::string> inputs;
  int bench = 0;
  po::options_description opts("hal-run-onnx MODEL.onnx [options]");
  opts.add_options()("help,h", "show this help")                                                        //
      ("input,i", po::value(&inputs)->composing(), "NAME=FILE.npy: feed model input NAME (repeat for each input)")  //
      ("config", po::value(&config), "hal.toml to use (default: $HAL_CONFIG, else the default search)")  //
      ("device", po::value(&device), "device: hal:N (runtime index) or a plugin name (default: the config's)")  //
      ("output-dir", po::value(&output_dir), "write each output to DIR/<output name>.npy")                  //
      ("bench", po::value(&bench)->default_value(0), "after the first run, time N more runs")              //
      ("no-graph-compile", "plugins compile no subgraphs: every node runs op by op (no fusion)")           //
      ("no-layouts", "values between op-by-op launches stay row-major (not the plugins' preferred layouts)")  //
      ("explain", "print the model, device and partition in full");
  po::options_description hidden;
  hidden.add_options()("model", po::value(&model_path));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("model", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "hal-run-onnx: " << e.what() << "\n" << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  if (model_path.empty()) {
    std::cerr << "hal-run-onnx: no model given\n" << opts;
    return 2;
  }
  if (bench < 0) {
    std::cerr << "hal-run-onnx: --bench must be >= 0\n";
    return 2;
  }

  std::vector<std::pair<std::string, hal::onnx::HostTensor>> feeds_owned;
  for (const std::string& spec : inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      std::cerr << "hal-run-onnx: --input '" << spec << "' is not NAME=FILE.npy\n";
      return 2;
    }
    feeds_owned.emplace_back(spec.substr(0, eq), hal::onnx::npy::read(spec.substr(eq + 1)));
  }

  auto t0 = Clock::now();
  hal::onnx::Model model = hal::onnx::Model::load(model_path);
  double load_ms = ms_since(t0);
  hal::onnx::SessionOptions so;
  so.config = config;
  so.device = device;
  so.graph_compilers = vm.count("no-graph-compile") == 0;
  so.layouts = vm.count("no-layouts") == 0;
  t0 = Clock::now();
  hal::onnx::Session session(model, so);
  double compile_ms = ms_since(t0);

  std::vector<std::pair<std::string, hal::onnx::HostTensorRef>> feeds;
  for (const auto& [name, t] : feeds_owned) feeds.push_back({name, {t.dtype, t.shape, t.data.data()}});
  t0 = Clock::now();
  std::vector<hal::onnx::HostTensor> outs = session.run({}, feeds);
  double first_ms = ms_since(t0);
  std::vector<double> times;
  for (int i = 0; i < bench; ++i) {
    t0 = Clock::now();
    session.run({}, feeds);
    times.push_back(ms_since(t0));
  }

  std::cout << "model: " << model_path << " (opset " << model.opset() << ", " << model.graph().nodes().size()
            << " HAL nodes)\n";
  for (const auto& in : model.inputs()) std::cout << "  input  " << info_text(in) << "\n";
  if (vm.count("explain")) std::cout << session.explain();
  else {
    std::string e = session.explain();
    size_t p = e.find("partition:");
    std::cout << e.substr(e.find("device:"), e.find('\n', e.find("device:")) - e.find("device:") + 1)
              << e.substr(p, e.find('\n', p) - p + 1);
  }
  for (size_t j = 0; j < outs.size(); ++j) {
    const std::string& name = model.outputs()[j].name;
    std::cout << "  output " << name << ": " << hal::common::dtype_name(outs[j].dtype) << " " << shape_text(outs[j].shape);
    if (!output_dir.empty()) {
      std::filesystem::create_directories(output_dir);
      std::string file = (std::filesystem::path(output_dir) / (name + ".npy")).string();
      hal::onnx::npy::write(file, outs[j]);
      std::cout << " -> " << file;
    }
    std::cout << "\n";
  }
  std::printf("timings: load %.3f ms, compile %.3f ms, first run %.3f ms", load_ms, compile_ms, first_ms);
  if (!times.empty()) {
    std::vector<double> s = times;
    std::sort(s.begin(), s.end());
    double mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
    std::printf(", %d runs: mean %.3f ms, p50 %.3f ms, min %.3f ms", bench, mean, s[s.size() / 2], s.front());
  }
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const hal::Error& e) {
    std::cerr << "hal-run-onnx: " << hal::status_code_name(e.code()) << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "hal-run-onnx: " << e.what() << "\n";
    return 1;
  }
}
