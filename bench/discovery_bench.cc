// Plugin discovery + load + device enumeration (target: hal-info < 20 ms
// excluding process start), measured three ways:
//
//   first in-process create  hal::Runtime::create() once, at start-up: the
//                            plugin .so is mapped for the first time (one
//                            sample; the file is normally in the page cache).
//   BM_Discovery/InProcessWarm  hal::Runtime::create() with default options
//                            (scans <libdir>/hal/plugins next to libhal.so)
//                            and every device's properties read; teardown is
//                            not timed. Plugins are loaded with RTLD_NODELETE,
//                            so from the second create on the library is
//                            already mapped: this is the warm path.
//   spawn                    the hal-info binary run N times (posix_spawn,
//                            output to /dev/null) interleaved with /bin/true
//                            and `hal-info --version` (process start + libhal
//                            and its dependencies linked, no discovery).
//                            Reports medians and
//                              hal-info - /bin/true         (asked-for figure)
//                              hal-info - hal-info --version (discovery only)
//
// Extra flags (removed before Google Benchmark sees the rest):
//   --spawn_runs=N   spawned runs of each command (default 51; 0 skips)
//
// Both the in-process and the spawned runs see this process's environment:
// unset HAL_CONFIG and HAL_PLUGIN_PATH for the figures in docs/performance.md.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hal/runtime/runtime.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// Reads what hal-info shows of every device. Returns the number of devices.
size_t read_devices(const hal::Runtime& rt) {
  uint64_t sum = 0;
  size_t n = 0;
  for (const auto& d : rt.devices()) {
    const hal_device_properties_t& p = d->properties();
    sum += std::strlen(p.name) + std::strlen(p.vendor) + std::strlen(p.driver_version);
    sum += p.total_memory_bytes + p.compute_units + p.capabilities + p.supported_dtypes +
           p.min_buffer_alignment + p.flags;
    sum += d->id().size();
    ++n;
  }
  benchmark::DoNotOptimize(sum);
  return n;
}

void BM_Discovery_InProcessWarm(benchmark::State& state) {
  for (auto _ : state) {
    std::shared_ptr<hal::Runtime> rt = hal::Runtime::create();
    const bool none = read_devices(*rt) == 0;
    state.PauseTiming();  // teardown (plugin destroy) is not part of the figure
    rt.reset();
    state.ResumeTiming();
    if (none) {
      const std::string dir = hal::Runtime::install_plugin_dir();
      state.SkipWithError(("no device found; is the CPU plugin in " + dir + "?").c_str());
      break;
    }
  }
}
BENCHMARK(BM_Discovery_InProcessWarm)
    ->Name("BM_Discovery/InProcessWarm")
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Repetitions(10)
    ->ReportAggregatesOnly(true);

// ---- spawned processes ---------------------------------------------------------

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Wall time in ms of posix_spawn + waitpid of ARGV (stdout/stderr to
// /dev/null); negative when the command could not run or exited non-zero.
double spawn_ms(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const auto t0 = Clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  const auto t1 = Clock::now();
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

int run_spawn_measurement(int runs) {
#ifndef HAL_BENCH_HAL_INFO
  (void)runs;
  std::printf("\nspawn measurement skipped: built without hal-info (HAL_BUILD_TOOLS=OFF)\n");
  return 0;
#else
  struct Cmd {
    const char* label;
    std::vector<std::string> argv;
    std::vector<double> ms;
  };
  std::vector<Cmd> cmds = {{"/bin/true", {"/bin/true"}, {}},
                           {"hal-info", {HAL_BENCH_HAL_INFO}, {}},
                           {"hal-info --version", {HAL_BENCH_HAL_INFO, "--version"}, {}}};
  const int warmup = 3;
  for (int i = 0; i < warmup + runs; ++i) {
    for (Cmd& c : cmds) {  // interleaved, so drift hits all three alike
      const double ms = spawn_ms(c.argv);
      if (ms < 0) {
        std::fprintf(stderr, "spawn measurement: `%s` failed to run or exited non-zero\n", c.label);
        return 1;
      }
      if (i >= warmup) c.ms.push_back(ms);
    }
  }
  std::printf("\nspawned processes: %d runs each (after %d warm-up), wall time of posix_spawn..waitpid\n", runs,
              warmup);
  std::printf("  %-22s %10s %10s %10s\n", "command", "median ms", "min ms", "max ms");
  for (const Cmd& c : cmds)
    std::printf("  %-22s %10.3f %10.3f %10.3f\n", c.label, median(c.ms), *std::min_element(c.ms.begin(), c.ms.end()),
                *std::max_element(c.ms.begin(), c.ms.end()));
  const double t_true = median(cmds[0].ms), t_info = median(cmds[1].ms), t_ver = median(cmds[2].ms);
  std::printf("  hal-info median - /bin/true median           = %.3f ms  (target < 20 ms)\n", t_info - t_true);
  std::printf("  hal-info median - hal-info --version median  = %.3f ms  (discovery+load+enumeration+output only)\n",
              t_info - t_ver);
  std::printf("  hal-info: %s\n", HAL_BENCH_HAL_INFO);
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  int spawn_runs = 51;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strncmp(argv[i], "--spawn_runs=", 13) == 0)
      spawn_runs = std::atoi(argv[i] + 13);
    else
      rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  rest.push_back(nullptr);

  // The very first create in this process maps the plugin library.
  const auto t0 = Clock::now();
  std::shared_ptr<hal::Runtime> first = hal::Runtime::create();
  const size_t devices = read_devices(*first);
  const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  first.reset();
  std::printf("first in-process create (plugin mapped for the first time, 1 sample): %.3f ms, %zu device(s)\n",
              first_ms, devices);
  if (devices == 0) {
    std::fprintf(stderr, "no device found; is the CPU plugin in %s?\n", hal::Runtime::install_plugin_dir().c_str());
    return 1;
  }

  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::fflush(stdout);

  return spawn_runs > 0 ? run_spawn_measurement(spawn_runs) : 0;
}
