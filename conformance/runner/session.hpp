// hal-conformance: the list of tests of one run and their results.
//
// Every test is a doctest test case registered at run time (one per runtime
// test, one per (op, dtype), one per op that is skipped as a whole), so
// doctest runs them, counts CHECKs and applies the skip / should_fail
// decorators; the "hal" reporter (session.cc) turns its events into the
// results below, the progress lines and the closing summary.
#ifndef HAL_CONFORMANCE_RUNNER_SESSION_HPP_
#define HAL_CONFORMANCE_RUNNER_SESSION_HPP_

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hal/runtime/runtime.hpp"
#include "op_suite.hpp"
#include "runner/case_runner.hpp"

namespace hal::conformance {

// kCrashed and kTimedOut: only with --isolate (the test's child process died
// of a signal, or was killed after --timeout); both count as failed.
enum class Status { kNotRun, kPassed, kFailed, kSkipped, kKnownFailure, kUnexpectedPass, kCrashed, kTimedOut };
const char* status_name(Status s);  // "passed", "failed", "skipped", "known failure", "unexpected pass", ...

struct TestEntry {
  std::string name;   // "runtime.stream_event", "op.add.float32", "op.topk"
  std::string group;  // "runtime" or the op name
  hal_dtype_e dtype = HAL_DTYPE_INVALID;  // op tests of one dtype
  std::string skip_reason;    // non-empty: not run
  std::string known_failure;  // non-empty: declared failing, with this reason
  std::function<void()> body;  // runs under doctest (CHECK/FAIL_CHECK)

  Status status = Status::kNotRun;
  double seconds = 0;
  std::vector<std::string> messages;  // what doctest reported as failed
  std::vector<Failure> failures;      // op tests: structured, for the CSV
  std::vector<Declined> declined;     // op tests: cases the plugin declined (direct mode)
};

// Why cases are declined (the only decline: HAL_STATUS_MIXED_DTYPES in
// direct mode), for the progress and summary lines.
inline constexpr const char* kDeclinedReason =
    "mixed input dtypes: the kernel takes uniform inputs; --through-core runs them";


// The skip reason of an op that has a suite but that the plugin does not
// register (summed into one closing line, listed by --list-unimplemented).
inline constexpr const char* kNotImplementedReason = "not implemented by the plugin";

// What the runtime tests get to work with.
struct RuntimeContext {
  std::shared_ptr<Device> device;
  std::set<std::string> claimed_ops;
  const std::vector<OpSuite>* suites = nullptr;
};

// Runtime tests register themselves (runtime_tests.cc) with
// HAL_CONFORMANCE_RUNTIME_TEST(name) { ... CHECK(...) ... }.
using RuntimeTestFn = void (*)(const RuntimeContext&);
bool register_runtime_test(const char* name, RuntimeTestFn fn);
struct RuntimeTestInfo {
  std::string name;
  RuntimeTestFn fn;
};
const std::vector<RuntimeTestInfo>& runtime_tests();
#define HAL_CONFORMANCE_RUNTIME_TEST(NAME)                                                        \
  static void hal_conformance_rt_##NAME(const ::hal::conformance::RuntimeContext&);                \
  static const bool hal_conformance_rt_reg_##NAME [[maybe_unused]] =                              \
      ::hal::conformance::register_runtime_test(#NAME, &hal_conformance_rt_##NAME);                \
  static void hal_conformance_rt_##NAME(const ::hal::conformance::RuntimeContext& ctx [[maybe_unused]])

// Suites the runner brings itself for ops no conformance/ops/*.cc covers
// yet (fallback_suites.cc): they keep the runner testable on its own.
const std::vector<OpSuite>& fallback_suites();

// The suites of this binary (ops/*.cc first, then fallbacks), by op name.
std::vector<OpSuite> all_suites();

struct KnownFailure {
  std::string pattern;  // glob over test names
  std::string reason;
  std::string where;    // file:line
};
// Reads a known-failures TOML file; throws std::runtime_error naming
// file:line on a bad file.
std::vector<KnownFailure> load_known_failures(const std::string& path);

struct RunOptions {
  std::string filter;  // glob; empty = all
  std::vector<std::string> exclude;  // globs: tests left out
  std::optional<hal_dtype_e> dtype;
  std::vector<KnownFailure> known_failures;
  bool runtime_tests = true;
  // A test still running after this many seconds is failed as a hang and
  // the run ends (reports written, exit status 1); 0 = no limit.
  double test_timeout_s = 600;
  // --through-core: launches go through libhal's promotion
  // (hal::Promotion::kCore: the core casts the inputs of uniform kernels);
  // else direct mode (kNone), where a uniform kernel declines mixed cases.
  bool through_core = false;
  // --case: only op tests that have this case, running only it (its
  // selector, see case_selectors(), or every case of that name).
  std::string case_selector;
  std::optional<Layout> layout;  // --layout: only this layout
  bool show_values = false;      // --show-values: print every launch's values
  // Shell words that load the same plugins and device again (hal-conformance
  // as invoked, --plugin or --config, --device, --fallback-plugin,
  // --through-core): every FAILED line ends with it and the words that
  // select the failing test, case and layout.
  std::string rerun_prefix = "hal-conformance";
  // The device libhal casts through when the plugin's copy op cannot
  // ("cpu:0"; empty: none), for the closing cast line.
  std::string fallback_device;
  // --isolate's child processes: only these tests (by name; empty: all),
  // and a file each test's start and result are appended to as it runs
  // (isolate.cc reads it).
  std::set<std::string> only_tests;
  std::string progress_file;
};

// What libhal's promotion did for the tested device during the run
// (hal::op_stats(), summed over its ops).
struct CastCounts {
  uint64_t on_device = 0;       // inputs cast by the plugin's own copy op
  uint64_t through_fallback = 0;  // inputs cast through the fallback device
  uint64_t bytes = 0;
};

class Session {
 public:
  Session(std::shared_ptr<Device> device, RunOptions options);

  // Builds the test list (no op is launched; op_check decides dtype skips).
  void plan();
  const std::vector<TestEntry>& tests() const { return tests_; }
  // After plan(): why the --filter selects nothing to run (LISTING: nothing
  // to list), naming the closest test names or the ops the plugin does not
  // register; empty when it selects something or there is no filter.
  std::string selection_error(bool listing) const;
  // The ops the plugin does not register that have a suite (plan order).
  std::vector<std::string> unimplemented_ops() const;
  // Registers the tests with doctest and runs them. Returns the number of
  // failed tests (unexpected passes included).
  int run();

  const Device& device() const { return *device_; }
  // Called when a test crashed, before the process dies of the signal
  // (main writes the reports and the summary from it).
  void on_crash(std::function<void()> fn) { on_crash_ = std::move(fn); }
  void crashed() const {
    if (on_crash_) on_crash_();
  }
  int count(Status s) const;
  // Failed, unexpected passes, crashed and timed out: what fails the run.
  int failed() const;
  // --isolate: sets the result of test INDEX as its child process reported
  // it (or as the parent saw it die).
  void record(size_t index, Status status, double seconds, std::vector<std::string> messages);
  // --isolate: runs the planned tests in child processes (CHILD_COMMAND:
  // the arguments that load the same plugins and device; this binary is
  // started as /proc/self/exe with them), a new
  // child after each crash or hang, so a test that segfaults, aborts or runs
  // past TIMEOUT_S (killed) is reported as crashed / timed out (signal, the
  // test it was in) and the run goes on to the end. Prints each non-passing
  // test. Returns failed().
  int run_isolated(const std::vector<std::string>& child_command, double timeout_s);
  // Cases declined over all tests.
  int declined_cases() const;
  bool through_core() const { return options_.through_core; }
  CastCounts casts() const;
  // "through the core: 12 input casts on the device, 30 through the
  // fallback device (cpu:0)".
  std::string cast_line() const;
  // The command that reruns E alone, or only F's case and layout of it,
  // printing the values (--show-values) when a case is named.
  std::string rerun_command(const TestEntry& e, const Failure* f = nullptr) const;

 private:
  void add_op_tests(const std::string& op, const OpSuite* suite, bool claimed);
  bool matches(const std::string& op, const std::string& test_name) const;
  std::string registered_ops_sentence() const;  // "the plugin registers: add, mul"
  void add(TestEntry e);

  std::shared_ptr<Device> device_;
  RunOptions options_;
  std::vector<OpSuite> suites_;
  RuntimeContext context_;
  std::vector<TestEntry> tests_;
  std::function<void()> on_crash_;
};

// ---- reports (reports.cc) -----------------------------------------------------
void write_json(const Session& s, const std::string& path);
void write_junit(const Session& s, const std::string& path);
void write_failures_csv(const Session& s, const std::string& path);
void write_coverage_md(const Session& s, const std::string& path);

}  // namespace hal::conformance

#endif  // HAL_CONFORMANCE_RUNNER_SESSION_HPP_
