#include "runner/session.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hal/runtime/op_stats.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "runner/storage.hpp"

namespace hal::conformance {

const char* status_name(Status s) {
  switch (s) {
    case Status::kNotRun: return "not run";
    case Status::kPassed: return "passed";
    case Status::kFailed: return "failed";
    case Status::kSkipped: return "skipped";
    case Status::kKnownFailure: return "known failure";
    case Status::kUnexpectedPass: return "unexpected pass";
    case Status::kCrashed: return "crashed";
    case Status::kTimedOut: return "timed out";
  }
  return "?";
}

namespace {
std::vector<RuntimeTestInfo>& runtime_registry() {
  static std::vector<RuntimeTestInfo> tests;
  return tests;
}

const hal_dtype_e kAllDtypes[] = {HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16, HAL_DTYPE_FLOAT64,
                                  HAL_DTYPE_INT8,    HAL_DTYPE_UINT8,   HAL_DTYPE_INT16,    HAL_DTYPE_INT32,
                                  HAL_DTYPE_INT64,   HAL_DTYPE_BOOL};

// The --case selector of a case's generic wrong-output checks ("SEL/wrong-outputs").
constexpr const char* kWrongOutputsSuffix = "/wrong-outputs";

// What --case WANTED picks of the case with this selector and name: the
// case itself, its wrong-output checks (without --case: both, the checks
// with the first case that ran).
struct Pick {
  bool the_case, wrong_outputs;
  bool any() const { return the_case || wrong_outputs; }
};
Pick pick(const std::string& wanted, const std::string& selector, const std::string& name) {
  if (wanted.empty()) return {true, true};
  return {wanted == selector || wanted == name, wanted == selector + kWrongOutputsSuffix};
}

// "a, b, c".
std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// TEXT with every whole-word WORD replaced by BY ("float16" but not the one
// inside "bfloat16").
std::string replace_word(const std::string& text, const std::string& word, const std::string& by) {
  std::string out;
  size_t from = 0;
  for (size_t at; (at = text.find(word, from)) != std::string::npos; from = at + word.size()) {
    const bool whole = (at == 0 || !word_char(text[at - 1])) &&
                       (at + word.size() == text.size() || !word_char(text[at + word.size()]));
    out += text.substr(from, at - from) + (whole ? by : word);
  }
  return out + text.substr(from);
}

// The session being run: the doctest trampoline and reporter find it here.
Session* g_session = nullptr;
std::vector<TestEntry>* g_tests = nullptr;
TestEntry* g_current = nullptr;
// --isolate's child: where each test's start and result go (progress_file).
std::FILE* g_progress = nullptr;
void progress(const std::string& line) {
  if (g_progress == nullptr) return;
  std::fputs((line + "\n").c_str(), g_progress);
  std::fflush(g_progress);
}
// When the running test started (steady clock, ns); -1 between tests. Read
// by the hang watchdog.
std::atomic<int64_t> g_started_ns{-1};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void trampoline() {
  if (g_current != nullptr && g_current->body) g_current->body();
}

std::string doctest_str(const doctest::String& s) { return std::string(s.c_str()); }

// Ends a failure message with the command that reruns it.
constexpr const char* kRerunMark = " -- rerun: ";
// DECLINED lines printed per test; the rest are in the JSON report.
constexpr size_t kDeclinedShown = 3;

// Turns doctest's events into TestEntry results and prints progress: one
// line per op (all its dtypes) or runtime test, and each failure.
class HalReporter : public doctest::IReporter {
 public:
  explicit HalReporter(const doctest::ContextOptions&) {}

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {
    flush_group();
    if (unimplemented_)
      std::printf("%zu catalog ops not implemented by the plugin: skipped (--list-unimplemented names them)\n",
                  unimplemented_);
    if (crashed_ && g_session != nullptr) g_session->crashed();
  }
  void test_case_start(const doctest::TestCaseData& tc) override {
    g_current = &(*g_tests)[tc.m_line - 1];
    progress("start\t" + g_current->name);
    start_ = std::chrono::steady_clock::now();
    g_started_ns = now_ns();
    begin(*g_current);
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& st) override {
    g_started_ns = -1;
    TestEntry& e = *g_current;
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    using R = doctest::TestCaseFailureReason::Enum;
    if (st.failure_flags & R::ShouldHaveFailedAndDid) e.status = Status::kKnownFailure;
    else if (st.failure_flags & R::ShouldHaveFailedButDidnt) e.status = Status::kUnexpectedPass;
    else if (st.failure_flags != R::None || !e.messages.empty()) e.status = Status::kFailed;
    else e.status = Status::kPassed;
    if (e.status == Status::kFailed) {
      // Every failure says how to rerun it alone (op cases name their case).
      for (std::string& m : e.messages)
        if (m.find(kRerunMark) == std::string::npos) m += kRerunMark + g_session->rerun_command(e);
      size_t shown = 0;
      for (const std::string& m : e.messages) {
        if (++shown > 5) {
          std::printf("  FAILED %s: ... %zu more (see --failures-csv)\n", e.name.c_str(), e.messages.size() - 5);
          break;
        }
        std::printf("  FAILED %s: %s\n", e.name.c_str(), m.c_str());
      }
    } else if (e.status == Status::kUnexpectedPass) {
      std::printf("  UNEXPECTED PASS %s: declared a known failure (%s) but it passed\n", e.name.c_str(),
                  e.known_failure.c_str());
    }
    for (size_t i = 0; i < e.declined.size(); ++i) {
      if (i == kDeclinedShown) {
        std::printf("  DECLINED %s: ... %zu more cases (see --report-json)\n", e.name.c_str(), e.declined.size() - i);
        break;
      }
      std::printf("  DECLINED %s: case '%s': %s\n", e.name.c_str(), e.declined[i].case_selector.c_str(),
                  e.declined[i].reason.c_str());
    }
    declined_ += e.declined.size();
    if (st.failure_flags & doctest::TestCaseFailureReason::Crash) {
      crashed_ = true;
      std::printf("hal-conformance: the plugin crashed in %s; the run stops here, the tests after it are "
                  "not run (leave it out with --exclude to run the rest)\n", e.name.c_str());
    }
    counts_[e.status]++;
    progress("end\t" + nlohmann::json{{"name", e.name},
                                        {"status", static_cast<int>(e.status)},
                                        {"seconds", e.seconds},
                                        {"messages", e.messages}}
                           .dump());
    if (e.dtype != HAL_DTYPE_INVALID && e.status == Status::kPassed) passed_dtypes_.push_back(dtype_str(e.dtype));
    if (e.dtype != HAL_DTYPE_INVALID && (e.status == Status::kFailed || e.status == Status::kUnexpectedPass))
      failed_dtypes_.push_back(dtype_str(e.dtype));
    g_current = nullptr;
  }
  void test_case_exception(const doctest::TestCaseException& ex) override {
    if (g_current) g_current->messages.push_back((ex.is_crash ? "crashed: " : "threw: ") + doctest_str(ex.error_string));
  }
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& ad) override {
    if (!ad.m_failed || g_current == nullptr) return;
    // The check's own sentence (CHECK_MESSAGE / INFO) first, then what was
    // checked, so a failure reads as what to fix.
    std::string m;
    for (int i = 0; i < doctest::IReporter::get_num_active_contexts(); ++i) {
      std::ostringstream os;
      doctest::IReporter::get_active_contexts()[i]->stringify(&os);
      if (!os.str().empty()) m += (m.empty() ? "" : "; ") + os.str();
    }
    const bool sentence = !m.empty();
    m += (sentence ? " (check: " : "") + std::string(ad.m_expr);
    if (ad.m_threw) m += " threw: " + doctest_str(ad.m_exception);
    else if (!doctest_str(ad.m_decomp).empty()) m += (sentence ? ", values: " : " (values: ") + doctest_str(ad.m_decomp) + (sentence ? "" : ")");
    if (sentence) m += ")";
    m += " at " + std::string(ad.m_file) + ":" + std::to_string(ad.m_line);
    g_current->messages.push_back(m);
  }
  void log_message(const doctest::MessageData& md) override {
    if (g_current && (md.m_severity & (doctest::assertType::is_check | doctest::assertType::is_require)))
      g_current->messages.push_back(doctest_str(md.m_string));
  }
  void test_case_skipped(const doctest::TestCaseData& tc) override {
    TestEntry& e = (*g_tests)[tc.m_line - 1];
    if (e.skip_reason.empty()) return;  // filtered out by doctest options: not ours
    e.status = Status::kSkipped;
    if (e.skip_reason == kNotImplementedReason) {
      ++unimplemented_;  // one closing line for all of them, not ~150
      return;
    }
    begin(e);
    counts_[e.status]++;
  }

 private:
  void begin(const TestEntry& e) {
    if (e.group != group_) {
      flush_group();
      group_ = e.group;
    }
    if (e.dtype != HAL_DTYPE_INVALID) dtypes_ += std::string(dtypes_.empty() ? "" : " ") + dtype_str(e.dtype);
    if (!e.skip_reason.empty()) {
      // Skipped dtypes grouped by reason ("float16, bfloat16: <reason>"), the
      // reason's own dtype name written <dtype> so that identical reasons
      // group; never one dtype named for another's reason.
      std::string dtype = e.dtype != HAL_DTYPE_INVALID ? dtype_str(e.dtype) : "";
      std::string r = dtype.empty() ? e.skip_reason : replace_word(e.skip_reason, dtype, "<dtype>");
      auto it = std::find_if(reasons_.begin(), reasons_.end(), [&](const auto& g) { return g.first == r; });
      if (it == reasons_.end()) it = reasons_.insert(reasons_.end(), {r, {}});
      if (!dtype.empty()) it->second.push_back(dtype);
    }
  }
  void flush_group() {
    if (group_.empty()) return;
    std::string line = group_;
    if (!dtypes_.empty()) line += " [" + dtypes_ + "]";
    line += ": " + std::to_string(counts_[Status::kPassed]) + " passed, " +
            std::to_string(counts_[Status::kFailed] + counts_[Status::kUnexpectedPass]) + " failed, " +
            std::to_string(counts_[Status::kSkipped]) + " skipped";
    if (counts_[Status::kKnownFailure]) line += ", " + std::to_string(counts_[Status::kKnownFailure]) + " known failures";
    if (counts_[Status::kSkipped] && !reasons_.empty()) {
      line += " (";
      for (size_t i = 0; i < reasons_.size(); ++i)
        line += (i ? "; " : "") + (reasons_[i].second.empty() ? "" : join(reasons_[i].second) + ": ") + reasons_[i].first;
      line += ")";
    }
    // A kernel registered for more dtypes than it handles fails only in some.
    if (!failed_dtypes_.empty() && !passed_dtypes_.empty())
      line += " (fails for " + join(failed_dtypes_) + "; passes for " + join(passed_dtypes_) +
              " \u2014 is the kernel registered for dtypes it does not handle?)";
    if (declined_) line += "; " + std::to_string(declined_) + " cases declined (" + kDeclinedReason + ")";
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    group_.clear();
    dtypes_.clear();
    reasons_.clear();
    passed_dtypes_.clear();
    failed_dtypes_.clear();
    counts_.clear();
    declined_ = 0;
  }

  std::chrono::steady_clock::time_point start_;
  std::string group_, dtypes_;
  std::vector<std::pair<std::string, std::vector<std::string>>> reasons_;  // reason, its dtypes
  std::vector<std::string> passed_dtypes_, failed_dtypes_;
  std::map<Status, int> counts_;
  size_t unimplemented_ = 0;  // ops skipped as not implemented, over the run
  size_t declined_ = 0;  // cases, over the group's tests
  bool crashed_ = false;
};

DOCTEST_REGISTER_REPORTER("hal", 1, HalReporter);

// The dtypes SUITE's op is tested in: the suite's own, else the catalog's
// for its first input.
uint64_t suite_dtypes(const OpSuite& suite) {
  if (suite.dtypes != 0) return suite.dtypes;
  const sdk::OpSchema* schema = sdk::find_schema(suite.op.c_str());
  return schema != nullptr && schema->input_count > 0 ? schema->inputs[0].dtypes : ~uint64_t{0};
}

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

bool register_runtime_test(const char* name, RuntimeTestFn fn) {
  runtime_registry().push_back({name, fn});
  return true;
}
const std::vector<RuntimeTestInfo>& runtime_tests() { return runtime_registry(); }

std::vector<OpSuite> all_suites() {
  std::vector<OpSuite> out = suites();
  for (const OpSuite& f : fallback_suites()) {
    bool covered = false;
    for (const OpSuite& s : out) covered |= s.op == f.op;
    if (!covered) out.push_back(f);
  }
  return out;
}

Session::Session(std::shared_ptr<Device> device, RunOptions options)
    : device_(std::move(device)), options_(std::move(options)), suites_(all_suites()) {
  context_.device = device_;
  for (const std::string& n : op_names(*device_)) context_.claimed_ops.insert(n);
  context_.suites = &suites_;
}

std::string Session::rerun_command(const TestEntry& e, const Failure* f) const {
  std::string cmd = options_.rerun_prefix + " --filter " + shell_quote(e.name);
  if (f != nullptr && !f->case_selector.empty())
    cmd += " --case " + shell_quote(f->case_selector) + " --layout " + f->layout + " --show-values";
  return cmd;
}

CastCounts Session::casts() const {
  CastCounts c;
  for (const OpStat& st : op_stats()) {
    if (st.device != device_->id()) continue;
    c.on_device += st.casts;
    c.through_fallback += st.fallback_casts;
    c.bytes += st.cast_bytes;
  }
  return c;
}

std::string Session::cast_line() const {
  CastCounts c = casts();
  // Empty when the device under test is the runtime's fallback itself (the CPU plugin).
  std::string fallback = options_.fallback_device.empty() ? "none" : options_.fallback_device;
  return "through the core: " + std::to_string(c.on_device) + " input casts on the device, " +
         std::to_string(c.through_fallback) + " through the fallback device (" + fallback + ")";
}

int Session::declined_cases() const {
  int n = 0;
  for (const TestEntry& e : tests_) n += static_cast<int>(e.declined.size());
  return n;
}

int Session::count(Status s) const {
  int n = 0;
  for (const TestEntry& e : tests_) n += e.status == s;
  return n;
}

bool Session::matches(const std::string& op, const std::string& test_name) const {
  auto hit = [&](const std::string& glob) {
    return (!op.empty() && glob_match(glob, op)) || glob_match(glob, test_name);
  };
  for (const std::string& x : options_.exclude)
    if (hit(x)) return false;
  return options_.filter.empty() || hit(options_.filter);
}

int Session::failed() const {
  return count(Status::kFailed) + count(Status::kUnexpectedPass) + count(Status::kCrashed) +
         count(Status::kTimedOut);
}

void Session::record(size_t index, Status status, double seconds, std::vector<std::string> messages) {
  TestEntry& e = tests_.at(index);
  e.status = status;
  e.seconds = seconds;
  e.messages = std::move(messages);
}

void Session::add(TestEntry e) {
  if (!options_.only_tests.empty() && options_.only_tests.count(e.name) == 0) return;
  for (const KnownFailure& k : options_.known_failures)
    if (glob_match(k.pattern, e.name)) {
      e.known_failure = k.reason.empty() ? "no reason given" : k.reason;
      break;
    }
  tests_.push_back(std::move(e));
}

void Session::plan() {
  tests_.clear();
  if (options_.runtime_tests && !options_.dtype && options_.case_selector.empty()) {
    for (const RuntimeTestInfo& t : runtime_tests()) {
      TestEntry e;
      e.name = "runtime." + t.name;
      e.group = e.name;
      if (!matches("", e.name)) continue;
      RuntimeTestFn fn = t.fn;
      const RuntimeContext* ctx = &context_;
      e.body = [fn, ctx] { fn(*ctx); };
      add(std::move(e));
    }
  }
  // Catalog order, then suites and claimed ops outside the catalog.
  std::vector<std::string> ops;
  auto add_op = [&](const std::string& n) {
    for (const std::string& o : ops)
      if (o == n) return;
    ops.push_back(n);
  };
  for (const sdk::OpSchema& s : sdk::catalog::kOps) add_op(s.name);
  for (const OpSuite& s : suites_) add_op(s.op);
  for (const std::string& n : context_.claimed_ops) add_op(n);
  for (const std::string& op : ops) {
    const OpSuite* suite = nullptr;
    for (const OpSuite& s : suites_)
      if (s.op == op) suite = &s;
    add_op_tests(op, suite, context_.claimed_ops.count(op) != 0);
  }
  if (!options_.case_selector.empty() && tests_.empty())
    throw std::runtime_error("no selected op test has a case '" + options_.case_selector +
                             "' (the FAILED lines and --failures-csv name the cases)");
}

std::string Session::selection_error(bool listing) const {
  if (options_.filter.empty()) return "";
  size_t runnable = 0;
  for (const TestEntry& e : tests_) runnable += e.skip_reason.empty();
  if (listing ? !tests_.empty() : runnable > 0) return "";
  const std::string filter = "--filter '" + options_.filter + "'";
  if (!tests_.empty()) {
    // It selects tests, but none of them runs: say why for each.
    std::string out = "every test " + filter + " selects is skipped, so nothing would be checked:";
    size_t shown = 0;
    for (const TestEntry& e : tests_) {
      if (++shown > 10) {
        out += "\n  ... " + std::to_string(tests_.size() - 10) + " more (--list shows them)";
        break;
      }
      out += "\n  " + e.name + ": " + e.skip_reason;
    }
    if (std::any_of(tests_.begin(), tests_.end(), [](const TestEntry& e) { return e.skip_reason == kNotImplementedReason; }))
      out += "\n" + registered_ops_sentence();
    return out;
  }
  // Nothing matches: every test name there is (any plugin, any dtype), the
  // closest ones, and whether the filter names ops the plugin lacks.
  std::vector<std::string> names;
  for (const RuntimeTestInfo& t : runtime_tests()) names.push_back("runtime." + t.name);
  std::vector<std::string> unregistered;
  for (const OpSuite& suite : suites_) {
    names.push_back("op." + suite.op);
    bool hit = glob_match(options_.filter, suite.op) || glob_match(options_.filter, "op." + suite.op);
    for (hal_dtype_e dt : kAllDtypes)
      if (suite_dtypes(suite) & HAL_DTYPE_BIT(dt)) {
        names.push_back("op." + suite.op + "." + dtype_str(dt));
        hit |= glob_match(options_.filter, names.back());
      }
    if (hit && !context_.claimed_ops.count(suite.op)) unregistered.push_back(suite.op);
  }
  std::string out = "no test matches " + filter;
  if (options_.dtype) out += " with --dtype " + std::string(dtype_str(*options_.dtype));
  if (!options_.exclude.empty()) out += " after --exclude";
  if (!unregistered.empty()) {
    out += ": the plugin does not register " + join(unregistered) + " (a stale .so after a failed build?)\n" +
           registered_ops_sentence();
    return out;
  }
  std::string wanted = options_.filter;
  std::transform(wanted.begin(), wanted.end(), wanted.begin(), [](unsigned char c) { return std::tolower(c); });
  std::stable_sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    return edit_distance(wanted, a) < edit_distance(wanted, b);
  });
  names.resize(std::min<size_t>(names.size(), 3));
  return out + "; the closest test names: " + join(names) + " (--list shows every test)";
}

std::vector<std::string> Session::unimplemented_ops() const {
  std::vector<std::string> ops;
  for (const TestEntry& e : tests_)
    if (e.skip_reason == kNotImplementedReason) ops.push_back(e.group);
  return ops;
}

std::string Session::registered_ops_sentence() const {
  std::vector<std::string> ops(context_.claimed_ops.begin(), context_.claimed_ops.end());
  if (ops.empty()) return "the plugin registers no op";
  if (ops.size() > 20) {
    const size_t more = ops.size() - 20;
    ops.resize(20);
    ops.push_back("... " + std::to_string(more) + " more");
  }
  return "the plugin registers: " + join(ops);
}

void Session::add_op_tests(const std::string& op, const OpSuite* suite, bool claimed) {
  if (suite == nullptr || !claimed) {
    if (!options_.case_selector.empty()) return;  // --case: only tests that have the case
    TestEntry e;
    e.name = "op." + op;
    e.group = op;
    e.skip_reason = suite == nullptr ? "no conformance suite" : kNotImplementedReason;
    if (matches(op, e.name)) add(std::move(e));
    return;
  }
  const uint64_t mask = suite_dtypes(*suite);
  std::shared_ptr<CaseRunner> runner;
  for (hal_dtype_e dt : kAllDtypes) {
    if (!(mask & HAL_DTYPE_BIT(dt))) continue;
    if (options_.dtype && *options_.dtype != dt) continue;
    TestEntry e;
    e.name = "op." + op + "." + dtype_str(dt);
    e.group = op;
    e.dtype = dt;
    if (!matches(op, e.name)) continue;
    auto cases = std::make_shared<std::vector<OpCase>>();
    try {
      *cases = suite->cases(dt);
    } catch (const std::exception& ex) {
      std::string what = ex.what();
      e.body = [what] { FAIL_CHECK("the suite's case generator threw: " << what); };
      add(std::move(e));
      continue;
    }
    if (cases->empty()) continue;  // the suite says DT is not meaningful for the op
    if (!options_.case_selector.empty()) {
      std::vector<std::string> sel = case_selectors(*cases);
      bool has = false;
      for (size_t i = 0; i < cases->size(); ++i)
        has |= pick(options_.case_selector, sel[i], (*cases)[i].name).any();
      if (!has) continue;
    }
    try {
      if (!runner) runner = std::make_shared<CaseRunner>(device_, op);
      for (const OpCase& c : *cases) {
        if (c.expect_error) continue;
        std::unique_ptr<Error> refused = runner->check(c, suite->reference(c));
        if (refused && (refused->code() == HAL_STATUS_UNSUPPORTED_DTYPE || refused->code() == HAL_STATUS_UNIMPLEMENTED))
          e.skip_reason = std::string("the device refuses it: ") + status_code_name(refused->code()) + ": " +
                          refused->what();
        break;
      }
    } catch (const std::exception&) {
      // Reported when the test runs.
    }
    const OpSuite* s = suite;
    std::shared_ptr<Device> device = device_;
    size_t index = tests_.size();
    std::vector<TestEntry>* tests = &tests_;
    CaseRunner::Options run_options;
    run_options.promotion = options_.through_core ? Promotion::kCore : Promotion::kNone;
    run_options.layout = options_.layout;
    run_options.show_values = options_.show_values ? stdout : nullptr;
    const Session* session = this;
    std::string only_case = options_.case_selector;
    e.body = [s, dt, cases, device, index, tests, run_options, session, only_case] {
      TestEntry& self = (*tests)[index];
      try {
        CaseRunner r(device, s->op, run_options);
        std::vector<std::string> selectors = case_selectors(*cases);
        bool generic_done = false;
        for (size_t i = 0; i < cases->size(); ++i) {
          const OpCase& c = (*cases)[i];
          const Pick want = pick(only_case, selectors[i], c.name);
          size_t failures_before = self.failures.size(), declined_before = self.declined.size();
          if (want.the_case) progress("case\t" + selectors[i]);  // --isolate: the case a crash was in
          Outcome outcome = want.the_case ? r.run(*s, dt, c, self.failures, &self.declined) : Outcome::kNotForDevice;
          for (size_t k = failures_before; k < self.failures.size(); ++k) self.failures[k].case_selector = selectors[i];
          for (size_t k = declined_before; k < self.declined.size(); ++k) self.declined[k].case_selector = selectors[i];
          // The generic wrong-output checks use the first case that ran: a
          // declined case's launch would only be declined again.
          bool generic = only_case.empty() ? outcome == Outcome::kRan && !generic_done : want.wrong_outputs;
          if (generic && !c.expect_error) {
            failures_before = self.failures.size();
            r.run_wrong_outputs(*s, dt, c, self.failures);
            for (size_t k = failures_before; k < self.failures.size(); ++k)
              self.failures[k].case_selector = selectors[i] + kWrongOutputsSuffix;
            generic_done = true;
          }
        }
      } catch (const std::exception& ex) {
        Failure f;
        f.op = s->op;
        f.dtype = dtype_str(dt);
        f.message = ex.what();
        self.failures.push_back(f);
      }
      for (const Failure& f : self.failures) {
        std::string where = f.case_name.empty() ? "" : "case '" + f.case_name + "' (" + f.layout + "): ";
        std::string message = where + f.message + kRerunMark + session->rerun_command(self, &f);
        FAIL_CHECK(message);
      }
    };
    add(std::move(e));
  }
}

int Session::run() {
  g_session = this;
  if (options_.through_core) reset_op_stats();  // the closing cast line counts this run only
  g_tests = &tests_;
  if (!options_.progress_file.empty()) {
    g_progress = std::fopen(options_.progress_file.c_str(), "a");
    if (g_progress == nullptr)
      throw std::runtime_error("cannot append to " + options_.progress_file + ": " + std::strerror(errno));
  }
  // doctest keeps pointers to the names: they live in tests_ (not resized from here on).
  static std::deque<std::string> suite_names;
  for (size_t i = 0; i < tests_.size(); ++i) {
    TestEntry& e = tests_[i];
    doctest::detail::TestSuite ts;
    suite_names.push_back(e.group);
    ts* suite_names.back().c_str();
    doctest::detail::TestCase tc(&trampoline, "hal-conformance", static_cast<unsigned>(i + 1), ts);
    tc* e.name.c_str();
    tc* doctest::skip(!e.skip_reason.empty());
    tc* doctest::should_fail(!e.known_failure.empty());
    doctest::detail::regTest(tc);
  }
  // A hung plugin must not hang CI: fail the running test, write what we
  // have, and end the process (the hung call cannot be interrupted).
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog;
  if (options_.test_timeout_s > 0)
    watchdog = std::thread([&] {
      std::unique_lock<std::mutex> l(m);
      while (!cv.wait_for(l, std::chrono::milliseconds(200), [&] { return done; })) {
        int64_t started = g_started_ns;
        if (started < 0 || (now_ns() - started) * 1e-9 < options_.test_timeout_s || g_current == nullptr) continue;
        TestEntry& e = *g_current;
        e.status = Status::kFailed;
        e.messages.push_back("timed out after " + std::to_string(static_cast<int>(options_.test_timeout_s)) +
                             " s (the plugin hangs?)");
        e.messages.back() += kRerunMark + rerun_command(e);
        std::printf("  FAILED %s: %s\nhal-conformance: %s hung; the run stops here (leave it out with --exclude, "
                    "or raise --timeout)\n",
                    e.name.c_str(), e.messages.back().c_str(), e.name.c_str());
        crashed();
        std::fflush(stdout);
        std::_Exit(1);
      }
    });
  doctest::Context ctx;
  ctx.setOption("reporters", "hal");
  ctx.setOption("order-by", "file");
  ctx.setOption("no-intro", true);
  ctx.setOption("no-version", true);
  ctx.run();
  if (watchdog.joinable()) {
    {
      std::lock_guard<std::mutex> l(m);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
  }
  g_session = nullptr;
  if (g_progress != nullptr) std::fclose(g_progress);
  g_progress = nullptr;
  return failed();
}

}  // namespace hal::conformance
