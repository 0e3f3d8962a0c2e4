// hal-conformance: runs the conformance tests (runtime tests + one op test
// per (op, dtype) with a suite) on one device of a plugin. See
// docs/conformance.md.
//
//   hal-conformance --plugin libhal_plugin_acme.so [--filter 'add*'] [--dtype float16]
//                   [--known-failures acme.toml] [--report-json r.json] ...
//
// Exit status: 0 when nothing failed, 1 when a test failed (or a declared
// known failure passed), 2 on a usage or loading error.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "runner/session.hpp"

namespace po = boost::program_options;
using namespace hal::conformance;

namespace {

std::optional<hal_dtype_e> parse_dtype(const std::string& s) {
  for (int d = HAL_DTYPE_FLOAT32; d <= HAL_DTYPE_BOOL; ++d)
    if (s == dtype_str(static_cast<hal_dtype_e>(d))) return static_cast<hal_dtype_e>(d);
  return std::nullopt;
}

int run(int argc, char** argv) {
  po::options_description desc(
      "Usage: hal-conformance [--plugin FILE | --config FILE] [options]\n\n"
      "Runs the HAL conformance tests on one device: runtime tests, then each op the plugin\n"
      "implements that has a conformance suite, in every dtype, layout and bad-input case.\n\n"
      "Options");
  desc.add_options()
      ("help,h", "show this help")
      ("plugin,p", po::value<std::string>(), "load only this plugin file (libhal_plugin_<name>.so)")
      ("config,c", po::value<std::string>(), "load plugins as this hal.toml says")
      ("device,d", po::value<std::string>(), "device to test, e.g. cpu:0 (default: the plugin's first "
                                             "device, or the configured default device)")
      ("filter,f", po::value<std::string>(), "only tests whose op name or test name matches this glob "
                                             "('add*', 'op.add.float16', 'runtime.*')")
      ("dtype", po::value<std::string>(), "only op tests of this dtype (float32, float16, bfloat16, float64, "
                                          "int8, uint8, int16, int32, int64, bool); skips runtime tests")
      ("list", "list the tests that would run, with skip reasons and known failures, and exit")
      ("known-failures", po::value<std::string>(), "TOML file of [[known_failure]] test = GLOB, reason = TEXT")
      ("report-json", po::value<std::string>(), "write every test's result as JSON")
      ("report-junit", po::value<std::string>(), "write a JUnit XML report")
      ("failures-csv", po::value<std::string>(), "write one CSV row per failing case and layout")
      ("coverage-md", po::value<std::string>(), "write the op x dtype result matrix as Markdown")
      ("no-runtime-tests", "run only op tests");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::fprintf(stderr, "hal-conformance: %s (see --help)\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm.count("plugin") && vm.count("config")) {
    std::fprintf(stderr, "hal-conformance: --plugin and --config exclude each other\n");
    return 2;
  }

  RunOptions opts;
  if (vm.count("filter")) opts.filter = vm["filter"].as<std::string>();
  if (vm.count("dtype")) {
    opts.dtype = parse_dtype(vm["dtype"].as<std::string>());
    if (!opts.dtype) {
      std::fprintf(stderr, "hal-conformance: unknown dtype '%s' (see --help)\n", vm["dtype"].as<std::string>().c_str());
      return 2;
    }
  }
  opts.runtime_tests = !vm.count("no-runtime-tests");
  if (vm.count("known-failures")) {
    try {
      opts.known_failures = load_known_failures(vm["known-failures"].as<std::string>());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hal-conformance: known failures: %s\n", e.what());
      return 2;
    }
  }

  hal::RuntimeOptions ro;
  if (vm.count("plugin")) {
    ro.plugin_paths = {vm["plugin"].as<std::string>()};
    ro.use_environment = false;
    ro.use_install_dir = false;
  }
  if (vm.count("config")) ro.config_path = vm["config"].as<std::string>();
  std::shared_ptr<hal::Runtime> rt;
  std::shared_ptr<hal::Device> device;
  try {
    rt = hal::Runtime::create(ro);
    for (const hal::SkipRecord& s : rt->skipped())
      if (s.requested || vm.count("plugin"))
        std::fprintf(stderr, "hal-conformance: plugin %s not loaded: %s: %s\n",
                     s.path.empty() ? s.name.c_str() : s.path.c_str(), hal::skip_reason_name(s.reason),
                     s.message.c_str());
    if (vm.count("device")) device = rt->device(vm["device"].as<std::string>());
    else if (vm.count("plugin") && !rt->plugins().empty() && !rt->plugins()[0]->devices().empty())
      device = rt->plugins()[0]->devices()[0];
    else device = rt->default_device();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hal-conformance: %s\n", e.what());
    return 2;
  }

  Session session(device, opts);
  try {
    session.plan();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hal-conformance: %s\n", e.what());
    return 2;
  }
  std::printf("hal-conformance: plugin %s, device %s (%s), %zu tests\n", device->plugin_name().c_str(),
              device->id().c_str(), device->properties().name, session.tests().size());

  if (vm.count("list")) {
    for (const TestEntry& e : session.tests()) {
      std::string line = e.name;
      if (!e.skip_reason.empty()) line += "  [skipped: " + e.skip_reason + "]";
      if (!e.known_failure.empty()) line += "  [known failure: " + e.known_failure + "]";
      std::printf("%s\n", line.c_str());
    }
    return 0;
  }

  int failed = session.run();
  try {
    if (vm.count("report-json")) write_json(session, vm["report-json"].as<std::string>());
    if (vm.count("report-junit")) write_junit(session, vm["report-junit"].as<std::string>());
    if (vm.count("failures-csv")) write_failures_csv(session, vm["failures-csv"].as<std::string>());
    if (vm.count("coverage-md")) write_coverage_md(session, vm["coverage-md"].as<std::string>());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hal-conformance: %s\n", e.what());
    return 2;
  }
  if (int k = session.count(Status::kKnownFailure)) std::printf("%d known failures (declared; not counted as failed)\n", k);
  if (int u = session.count(Status::kUnexpectedPass))
    std::printf("%d unexpected passes (declared known failures that passed; counted as failed)\n", u);
  std::printf("%d passed, %d failed, %d skipped\n", session.count(Status::kPassed), failed,
              session.count(Status::kSkipped));
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
