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

enum class Status { kNotRun, kPassed, kFailed, kSkipped, kKnownFailure, kUnexpectedPass };
const char* status_name(Status s);  // "passed", "failed", "skipped", "known failure", "unexpected pass"

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
};

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
  std::optional<hal_dtype_e> dtype;
  std::vector<KnownFailure> known_failures;
  bool runtime_tests = true;
};

class Session {
 public:
  Session(std::shared_ptr<Device> device, RunOptions options);

  // Builds the test list (no op is launched; op_check decides dtype skips).
  void plan();
  const std::vector<TestEntry>& tests() const { return tests_; }
  // Registers the tests with doctest and runs them. Returns the number of
  // failed tests (unexpected passes included).
  int run();

  const Device& device() const { return *device_; }
  int count(Status s) const;

 private:
  void add_op_tests(const std::string& op, const OpSuite* suite, bool claimed);
  bool matches(const std::string& op, const std::string& test_name) const;
  void add(TestEntry e);

  std::shared_ptr<Device> device_;
  RunOptions options_;
  std::vector<OpSuite> suites_;
  RuntimeContext context_;
  std::vector<TestEntry> tests_;
};

// ---- reports (reports.cc) -----------------------------------------------------
void write_json(const Session& s, const std::string& path);
void write_junit(const Session& s, const std::string& path);
void write_failures_csv(const Session& s, const std::string& path);
void write_coverage_md(const Session& s, const std::string& path);

}  // namespace hal::conformance

#endif  // HAL_CONFORMANCE_RUNNER_SESSION_HPP_
