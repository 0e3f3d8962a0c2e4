// The report files of a run: JSON (everything), JUnit XML (CI), a CSV of
// failures (one row per failing case and layout) and the op x dtype
// coverage matrix in Markdown (docs/coverage.md).
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "hal/sdk/op_catalog.hpp"
#include "runner/session.hpp"

namespace hal::conformance {

namespace {

std::ofstream open(const std::string& path) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  return f;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') o += ' ';
        else o += c;
    }
  }
  return o;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

std::string plugin_name(const Session& s) { return s.device().plugin_name(); }

const char* json_status(Status st) {
  switch (st) {
    case Status::kPassed: return "passed";
    case Status::kFailed: return "failed";
    case Status::kSkipped: return "skipped";
    case Status::kKnownFailure: return "known_failure";
    case Status::kUnexpectedPass: return "unexpected_pass";
    case Status::kCrashed: return "crashed";
    case Status::kTimedOut: return "timed_out";
    default: return "not_run";
  }
}

// Whether the catalog defines OP for D (its first input's dtypes); true for
// ops outside the catalog.
bool catalog_allows(const std::string& op, hal_dtype_e d) {
  const sdk::OpSchema* s = sdk::find_schema(op.c_str());
  return s == nullptr || s->input_count == 0 || (s->inputs[0].dtypes & HAL_DTYPE_BIT(d)) != 0;
}

}  // namespace

void write_json(const Session& s, const std::string& path) {
  nlohmann::json j;
  j["plugin"] = plugin_name(s);
  j["device"] = s.device().id();
  j["device_name"] = std::string(s.device().properties().name);
  j["summary"] = {{"passed", s.count(Status::kPassed)},
                  {"failed", s.failed()},
                  {"crashed", s.count(Status::kCrashed)},
                  {"timed_out", s.count(Status::kTimedOut)},
                  {"skipped", s.count(Status::kSkipped)},
                  {"known_failures", s.count(Status::kKnownFailure)},
                  {"unexpected_passes", s.count(Status::kUnexpectedPass)},
                  {"declined_cases", s.declined_cases()}};
  if (s.through_core()) {
    CastCounts c = s.casts();
    j["through_core"] = {{"casts", c.on_device}, {"fallback_casts", c.through_fallback}, {"cast_bytes", c.bytes}};
  }
  nlohmann::json tests = nlohmann::json::array();
  for (const TestEntry& e : s.tests()) {
    nlohmann::json t = {{"name", e.name}, {"status", json_status(e.status)}, {"seconds", e.seconds}};
    if (e.group != e.name) t["op"] = e.group;
    if (e.dtype != HAL_DTYPE_INVALID) t["dtype"] = dtype_str(e.dtype);
    if (!e.skip_reason.empty()) t["skip_reason"] = e.skip_reason;
    if (!e.known_failure.empty()) t["known_failure_reason"] = e.known_failure;
    if (!e.messages.empty()) t["messages"] = e.messages;
    nlohmann::json fs = nlohmann::json::array();
    for (const Failure& f : e.failures)
      fs.push_back({{"case", f.case_name}, {"layout", f.layout}, {"shapes", f.shapes}, {"strides", f.strides},
                    {"attributes", f.attrs}, {"max_abs_error", f.max_abs_error},
                    {"max_rel_error", f.max_rel_error}, {"message", f.message}});
    if (!fs.empty()) t["failures"] = fs;
    nlohmann::json ds = nlohmann::json::array();
    for (const Declined& d : e.declined)
      ds.push_back({{"case", d.case_name}, {"case_selector", d.case_selector}, {"reason", d.reason}});
    if (!ds.empty()) t["declined"] = ds;
    tests.push_back(t);
  }
  j["tests"] = tests;
  open(path) << j.dump(2) << "\n";
}

void write_junit(const Session& s, const std::string& path) {
  double total = 0;
  for (const TestEntry& e : s.tests()) total += e.seconds;
  std::ofstream f = open(path);
  f << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  f << "<testsuites>\n<testsuite name=\"hal-conformance " << xml_escape(plugin_name(s)) << "\" tests=\""
    << s.tests().size() << "\" failures=\"" << s.failed()
    << "\" skipped=\"" << s.count(Status::kSkipped) << "\" errors=\"0\" time=\"" << num(total) << "\">\n";
  for (const TestEntry& e : s.tests()) {
    f << "  <testcase classname=\"" << xml_escape(e.group) << "\" name=\"" << xml_escape(e.name) << "\" time=\""
      << num(e.seconds) << "\"";
    std::string body;
    switch (e.status) {
      case Status::kSkipped: body = "    <skipped message=\"" + xml_escape(e.skip_reason) + "\"/>\n"; break;
      case Status::kFailed:
      case Status::kCrashed:
      case Status::kTimedOut: {
        std::string text;
        for (const std::string& m : e.messages) text += m + "\n";
        std::string first = e.messages.empty() ? "failed" : e.messages.front();
        body = "    <failure message=\"" + xml_escape(first) + "\">" + xml_escape(text) + "</failure>\n";
        break;
      }
      case Status::kUnexpectedPass:
        body = "    <failure message=\"unexpected pass: declared a known failure (" + xml_escape(e.known_failure) +
               ") but it passed\"/>\n";
        break;
      case Status::kKnownFailure:
        body = "    <system-out>known failure: " + xml_escape(e.known_failure) + "</system-out>\n";
        break;
      default: break;
    }
    if (!e.declined.empty()) {
      // Not a failure: the cases the plugin declined, one line each.
      std::string text = std::to_string(e.declined.size()) + " cases declined (" + kDeclinedReason + ")\n";
      for (const Declined& d : e.declined) text += "declined: case '" + d.case_selector + "': " + d.reason + "\n";
      body += "    <system-out>" + xml_escape(text) + "</system-out>\n";
    }
    if (body.empty()) f << "/>\n";
    else f << ">\n" << body << "  </testcase>\n";
  }
  f << "</testsuite>\n</testsuites>\n";
}

void write_failures_csv(const Session& s, const std::string& path) {
  std::ofstream f = open(path);
  f << "op,dtype,case,layout,shapes,strides,attributes,max_abs_error,max_rel_error,message\n";
  for (const TestEntry& e : s.tests()) {
    if (e.status != Status::kFailed && e.status != Status::kKnownFailure && e.status != Status::kCrashed &&
        e.status != Status::kTimedOut)
      continue;
    if (e.failures.empty()) {  // runtime tests, generator errors: no case detail
      std::string text;
      for (const std::string& m : e.messages) text += (text.empty() ? "" : "; ") + m;
      f << csv_field(e.group) << "," << (e.dtype == HAL_DTYPE_INVALID ? "" : dtype_str(e.dtype)) << ",,,,,,,,"
        << csv_field(text) << "\n";
      continue;
    }
    for (const Failure& x : e.failures)
      f << csv_field(x.op) << "," << csv_field(x.dtype) << "," << csv_field(x.case_name) << ","
        << csv_field(x.layout) << "," << csv_field(x.shapes) << "," << csv_field(x.strides) << ","
        << csv_field(x.attrs) << "," << num(x.max_abs_error) << "," << num(x.max_rel_error) << ","
        << csv_field(x.message) << "\n";
  }
}

void write_coverage_md(const Session& s, const std::string& path) {
  static const hal_dtype_e dts[] = {HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16, HAL_DTYPE_FLOAT64,
                                    HAL_DTYPE_INT8,    HAL_DTYPE_UINT8,   HAL_DTYPE_INT16,    HAL_DTYPE_INT32,
                                    HAL_DTYPE_INT64,   HAL_DTYPE_BOOL};
  // op -> dtype -> cell; op -> reason when the op is skipped as a whole.
  std::vector<std::string> ops;
  std::map<std::string, std::map<hal_dtype_e, std::string>> cells;
  std::map<std::string, std::string> whole;
  for (const TestEntry& e : s.tests()) {
    if (e.name.rfind("op.", 0) != 0) continue;
    if (!cells.count(e.group) && !whole.count(e.group)) ops.push_back(e.group);
    std::string cell;
    switch (e.status) {
      case Status::kPassed: cell = "pass"; break;
      case Status::kFailed: case Status::kUnexpectedPass: cell = "**FAIL**"; break;
      case Status::kCrashed: cell = "**CRASH**"; break;
      case Status::kTimedOut: cell = "**HANG**"; break;
      case Status::kSkipped: cell = "skip"; break;
      case Status::kKnownFailure: cell = "known"; break;
      default: cell = "?"; break;
    }
    if (!e.declined.empty()) cell += " (" + std::to_string(e.declined.size()) + " declined)";
    if (e.dtype == HAL_DTYPE_INVALID) whole[e.group] = e.skip_reason;
    else cells[e.group][e.dtype] = cell;
  }
  std::ofstream f = open(path);
  f << "# Op coverage: " << plugin_name(s) << "\n\n"
    << "Generated by `hal-conformance --plugin <" << plugin_name(s) << " plugin> --coverage-md FILE` "
    << "(" << s.device().id() << "). Do not edit; rerun it.\n\n"
    << "Each cell is the result of `op.<op>.<dtype>`: **pass**, **FAIL**, *known* (a declared known failure), "
    << "*skip* (the device refuses the dtype, or the op is skipped as a whole: see the last column), or "
    << "empty when the catalog or the suite does not define the op for that dtype.\n\n"
    << "Summary: " << s.count(Status::kPassed) << " passed, "
    << s.failed() << " failed, " << s.count(Status::kSkipped)
    << " skipped, " << s.count(Status::kKnownFailure) << " known failures";
  if (int d = s.declined_cases())
    f << "; " << d << " cases declined (" << kDeclinedReason << "), shown as \"(N declined)\" in their cells";
  f << ".\n\n";
  f << "| op |";
  for (hal_dtype_e d : dts) f << " " << dtype_str(d) << " |";
  f << " note |\n|---|";
  for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); ++i) f << "---|";
  f << "---|\n";
  for (const std::string& op : ops) {
    f << "| " << op << " |";
    for (hal_dtype_e d : dts) {
      std::string c;
      if (whole.count(op)) c = catalog_allows(op, d) ? "skip" : "";
      else if (cells[op].count(d)) c = cells[op][d];
      f << " " << c << " |";
    }
    f << " " << (whole.count(op) ? whole[op] : "") << " |\n";
  }
}

}  // namespace hal::conformance
