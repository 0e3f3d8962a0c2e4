// hal-conformance: runs the conformance tests (runtime tests + one op test
// per (op, dtype) with a suite) on one device of a plugin. See
// docs/conformance.md.
//
//   hal-conformance --plugin libhal_plugin_acme.so [--filter 'add*'] [--dtype float16]
//                   [--known-failures acme.toml] [--report-json r.json] [--through-core] ...
//
// Exit status: 0 when nothing failed, 1 when a test failed (or a declared
// known failure passed), 2 on a usage or loading error.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "collectives/collective_suite.hpp"
#include "runner/session.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace hal::conformance;

namespace {

// Whether A and B name the same file (false if either does not exist).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && fs::equivalent(a, b, ec) && !ec;
}

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
      ("exclude,x", po::value<std::vector<std::string>>(), "leave out tests whose op name or test name matches "
                                                           "this glob (repeatable)")
      ("dtype", po::value<std::string>(), "only op tests of this dtype (float32, float16, bfloat16, float64, "
                                          "int8, uint8, int16, int32, int64, bool); skips runtime tests")
      ("list", "list the tests that would run, with skip reasons and known failures, and exit")
      ("list-unimplemented", "list the catalog ops (with a conformance suite) that the plugin does not implement, "
                             "and exit")
      ("known-failures", po::value<std::string>(), "TOML file of [[known_failure]] test = GLOB, reason = TEXT")
      ("report-json", po::value<std::string>(), "write every test's result as JSON")
      ("report-junit", po::value<std::string>(), "write a JUnit XML report")
      ("failures-csv", po::value<std::string>(), "write one CSV row per failing case and layout")
      ("coverage-md", po::value<std::string>(), "write the op x dtype result matrix as Markdown")
      ("no-runtime-tests", "run only op tests")
      ("through-core", "launch through libhal's promotion: the core casts the inputs of uniform kernels (with "
                       "--plugin, the CPU plugin is loaded as the fallback device to cast through)")
      ("fallback-plugin", po::value<std::string>(), "with --plugin --through-core: the plugin file whose first "
                                                    "device casts what the plugin's copy op cannot (default: "
                                                    "libhal_plugin_cpu.so in libhal's plugin directory)")
      ("case", po::value<std::string>(), "only op tests that have this case, running only it (the name a FAILED "
                                         "line gives; NAME#k for the k-th of several cases of one name)")
      ("layout", po::value<std::string>(), "only this layout: contiguous, offset, strided, permuted or preferred (bad-input "
                                           "cases always run contiguous)")
      ("show-values", "print every launch's inputs (dtype, shape, strides, values), expected and actual outputs")
      ("timeout", po::value<double>()->default_value(600), "seconds one test may take before it is failed as a "
                                                          "hang and the run ends (0: no limit); with --isolate, "
                                                          "before its process is killed (TIMED OUT) and the run "
                                                          "goes on")
      ("isolate", "run the tests in child processes: a test that segfaults, aborts or hangs (--timeout) is "
                  "reported CRASHED (with the signal) or TIMED OUT, and the run goes on to the end and its totals")
      ("isolate-tests", po::value<std::string>(), "(internal) with --isolate-child: run only the tests named in "
                                                 "this file")
      ("isolate-child", po::value<std::string>(), "(internal) append each test's start and result to this file")
      ("collectives", "run the collective suite instead: spawns --world processes, one per rank, and checks "
                      "every collective, dtype and size, then the fault scenarios (a killed rank, another job's "
                      "or a stale unique id, mismatched arguments) and that no /dev/shm segment is left")
      ("world", po::value<uint32_t>()->default_value(2), "with --collectives: the number of ranks")
      ("collective-hosts", po::value<uint32_t>()->default_value(1),
       "with --collectives: emulated hosts on this machine: rank r runs with HAL_COMM_HOST_ID naming host "
       "r % N, so the communicator goes hierarchical (shared memory within a host, TCP between hosts)")
      ("collective-scenario", po::value<std::string>()->default_value("all"),
       "with --collectives: all, suite, mismatch, abort, foreign_id, stale_id, kill, kill_leader or tcp")
      ("collective-max-bytes", po::value<uint64_t>()->default_value(64ull << 20),
       "with --collectives: the largest message (a float32 allreduce and broadcast)")
      ("collective-fault-timeout-ms", po::value<uint64_t>()->default_value(5000),
       "with --collectives: the communicator timeout of the fault scenarios")
      ("mixed-plugin", po::value<std::string>(), "with --collectives --plugin: odd ranks load this plugin file "
                                                 "instead (a job mixing devices of two plugins)")
      ("collective-rank", po::value<int>(), "(internal) run as this rank")
      ("collective-store", po::value<std::string>(), "(internal) the ranks' FileStore directory");
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

  hal::conformance::CollectiveOptions collective;
  const bool collectives = vm.count("collectives") != 0;
  if (collectives) {
    collective.world = vm["world"].as<uint32_t>();
    collective.scenario = vm["collective-scenario"].as<std::string>();
    collective.hosts = vm["collective-hosts"].as<uint32_t>();
    if (collective.hosts == 0 || collective.hosts > 64) {
      std::fprintf(stderr, "hal-conformance: --collective-hosts %u is not in [1, 64]\n", collective.hosts);
      return 2;
    }
    collective.max_bytes = vm["collective-max-bytes"].as<uint64_t>();
    collective.fault_timeout = std::chrono::milliseconds(vm["collective-fault-timeout-ms"].as<uint64_t>());
    if (collective.world == 0 || collective.world > 64) {
      std::fprintf(stderr, "hal-conformance: --world %u is not in [1, 64]\n", collective.world);
      return 2;
    }
    if (!vm.count("collective-rank")) {
      // The parent: the children load the same plugins and device.
      std::vector<std::string> child = {argv[0], "--collectives"};
      for (const char* o : {"plugin", "config", "device"})
        if (vm.count(o)) child.insert(child.end(), {std::string("--") + o, vm[o].as<std::string>()});
      std::vector<std::string> odd = child;
      if (vm.count("mixed-plugin")) {
        if (!vm.count("plugin")) {
          std::fprintf(stderr, "hal-conformance: --mixed-plugin goes with --plugin\n");
          return 2;
        }
        odd = {argv[0], "--collectives", "--plugin", vm["mixed-plugin"].as<std::string>()};
      }
      return hal::conformance::spawn_collectives(child, odd, collective);
    }
    collective.rank = vm["collective-rank"].as<int>();
    collective.store_dir = vm.count("collective-store") ? vm["collective-store"].as<std::string>() : "";
  }

  const bool through_core = vm.count("through-core") != 0;
  if (vm.count("fallback-plugin") && !(vm.count("plugin") && through_core)) {
    std::fprintf(stderr, "hal-conformance: --fallback-plugin goes with --plugin and --through-core (with --config, "
                         "the config's fallback_device is used)\n");
    return 2;
  }

  RunOptions opts;
  opts.through_core = through_core;
  opts.show_values = vm.count("show-values") != 0;
  if (vm.count("case")) opts.case_selector = vm["case"].as<std::string>();
  if (vm.count("layout")) {
    opts.layout = parse_layout(vm["layout"].as<std::string>());
    if (!opts.layout) {
      std::fprintf(stderr, "hal-conformance: unknown layout '%s' (contiguous, offset, strided, permuted, preferred)\n",
                   vm["layout"].as<std::string>().c_str());
      return 2;
    }
  }
  // What a FAILED line's rerun command starts with: the same plugins and device.
  opts.rerun_prefix = shell_quote(argv[0]);
  for (const char* o : {"plugin", "config", "device", "fallback-plugin"})
    if (vm.count(o)) opts.rerun_prefix += std::string(" --") + o + " " + shell_quote(vm[o].as<std::string>());
  if (through_core) opts.rerun_prefix += " --through-core";
  if (vm.count("filter")) opts.filter = vm["filter"].as<std::string>();
  if (vm.count("exclude")) opts.exclude = vm["exclude"].as<std::vector<std::string>>();
  if (vm.count("dtype")) {
    opts.dtype = parse_dtype(vm["dtype"].as<std::string>());
    if (!opts.dtype) {
      std::fprintf(stderr, "hal-conformance: unknown dtype '%s' (see --help)\n", vm["dtype"].as<std::string>().c_str());
      return 2;
    }
  }
  opts.runtime_tests = !vm.count("no-runtime-tests");
  opts.test_timeout_s = vm["timeout"].as<double>();
  if (vm.count("isolate-child")) opts.progress_file = vm["isolate-child"].as<std::string>();
  if (vm.count("isolate-tests")) {
    std::ifstream in(vm["isolate-tests"].as<std::string>());
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) opts.only_tests.insert(line);
  }
  if (vm.count("known-failures")) {
    try {
      opts.known_failures = load_known_failures(vm["known-failures"].as<std::string>());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hal-conformance: known failures: %s\n", e.what());
      return 2;
    }
  }

  hal::RuntimeOptions ro;
  std::string fallback_file;  // --plugin --through-core: loaded beside the plugin
  if (vm.count("plugin")) {
    const std::string plugin = vm["plugin"].as<std::string>();
    ro.plugin_paths = {plugin};
    ro.use_environment = false;
    ro.use_install_dir = false;
    if (through_core) {
      fallback_file = vm.count("fallback-plugin") ? vm["fallback-plugin"].as<std::string>()
                                                  : hal::Runtime::install_plugin_dir() + "/libhal_plugin_cpu.so";
      std::error_code ec;
      if (same_file(fallback_file, plugin)) {
        fallback_file.clear();  // the plugin is its own fallback
      } else if (!vm.count("fallback-plugin") && !fs::is_regular_file(fallback_file, ec)) {
        std::fprintf(stderr, "hal-conformance: no fallback plugin at %s (name one with --fallback-plugin): casts "
                             "the plugin's copy op cannot do will fail\n", fallback_file.c_str());
        fallback_file.clear();
      } else {
        ro.plugin_paths.push_back(fallback_file);
      }
    }
  }
  if (vm.count("config")) ro.config_path = vm["config"].as<std::string>();
  std::shared_ptr<hal::Runtime> rt;
  std::shared_ptr<hal::Device> device;
  try {
    rt = hal::Runtime::create(ro);
    for (const hal::SkipRecord& s : rt->skipped()) {
      if (!fallback_file.empty() && same_file(s.path, fallback_file))
        std::fprintf(stderr, "hal-conformance: fallback plugin %s not loaded (casts the plugin's copy op cannot do "
                             "will fail): %s: %s\n", s.path.c_str(), hal::skip_reason_name(s.reason), s.message.c_str());
      else if (s.requested || vm.count("plugin"))
        std::fprintf(stderr, "hal-conformance: plugin %s not loaded: %s: %s\n",
                     s.path.empty() ? s.name.c_str() : s.path.c_str(), hal::skip_reason_name(s.reason),
                     s.message.c_str());
    }
    if (vm.count("device")) {
      device = rt->device(vm["device"].as<std::string>());
    } else if (vm.count("plugin")) {
      // The --plugin's first device, never the fallback plugin's.
      for (const auto& p : rt->plugins())
        if (same_file(p->path(), vm["plugin"].as<std::string>()) && !p->devices().empty()) device = p->devices()[0];
      if (!device) {
        std::fprintf(stderr, "hal-conformance: plugin %s has no device to test\n", vm["plugin"].as<std::string>().c_str());
        return 2;
      }
    } else {
      device = rt->default_device();
    }
    if (through_core)
      if (std::shared_ptr<hal::Device> f = device->fallback_device()) opts.fallback_device = f->id();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hal-conformance: %s\n", e.what());
    return 2;
  }

  if (collectives) return hal::conformance::run_collective_rank(device, collective);

  Session session(device, opts);
  try {
    session.plan();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hal-conformance: %s\n", e.what());
    return 2;
  }
  std::printf("hal-conformance: plugin %s, device %s (%s), %zu tests%s\n", device->plugin_name().c_str(),
              device->id().c_str(), device->properties().name, session.tests().size(),
              !through_core ? "" : opts.fallback_device.empty() ? ", through the core (no fallback device)"
                                 : (", through the core (fallback device " + opts.fallback_device + ")").c_str());

  if (std::string why = session.selection_error(vm.count("list") != 0); !why.empty()) {
    std::fprintf(stderr, "hal-conformance: %s\n", why.c_str());
    return 2;
  }
  if (vm.count("list-unimplemented")) {
    for (const std::string& op : session.unimplemented_ops()) std::printf("%s\n", op.c_str());
    return 0;
  }
  if (vm.count("list")) {
    for (const TestEntry& e : session.tests()) {
      std::string line = e.name;
      if (!e.skip_reason.empty()) line += "  [skipped: " + e.skip_reason + "]";
      if (!e.known_failure.empty()) line += "  [known failure: " + e.known_failure + "]";
      std::printf("%s\n", line.c_str());
    }
    return 0;
  }

  auto finish = [&]() -> bool {
    bool ok = true;
    try {
      if (vm.count("report-json")) write_json(session, vm["report-json"].as<std::string>());
      if (vm.count("report-junit")) write_junit(session, vm["report-junit"].as<std::string>());
      if (vm.count("failures-csv")) write_failures_csv(session, vm["failures-csv"].as<std::string>());
      if (vm.count("coverage-md")) write_coverage_md(session, vm["coverage-md"].as<std::string>());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hal-conformance: %s\n", e.what());
      ok = false;
    }
    if (session.through_core()) std::printf("%s\n", session.cast_line().c_str());
    if (int d = session.declined_cases())
      std::printf("%d cases declined (%s)\n", d, kDeclinedReason);
    if (int k = session.count(Status::kKnownFailure))
      std::printf("%d known failures (declared; not counted as failed)\n", k);
    if (int u = session.count(Status::kUnexpectedPass))
      std::printf("%d unexpected passes (declared known failures that passed; counted as failed)\n", u);
    if (session.count(Status::kCrashed) + session.count(Status::kTimedOut) > 0)
      std::printf("%d crashed, %d timed out (counted as failed)\n", session.count(Status::kCrashed),
                  session.count(Status::kTimedOut));
    std::printf("%d passed, %d failed, %d skipped\n", session.count(Status::kPassed), session.failed(),
                session.count(Status::kSkipped));
    std::fflush(stdout);
    return ok;
  };
  int failed = 0;
  if (vm.count("isolate")) {
    // Each child loads the same plugins and device and runs the tests it is given.
    std::vector<std::string> child = {argv[0]};
    for (const char* o : {"plugin", "config", "device", "fallback-plugin", "known-failures", "dtype", "case", "layout"})
      if (vm.count(o)) child.insert(child.end(), {std::string("--") + o, vm[o].as<std::string>()});
    if (through_core) child.push_back("--through-core");
    try {
      failed = session.run_isolated(child, opts.test_timeout_s);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hal-conformance: %s\n", e.what());
      return 2;
    }
  } else {
    // A crash ends the process with its signal; the reports still say how far it got.
    session.on_crash([&] { finish(); });
    failed = session.run();
  }
  if (!finish()) return 2;
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
