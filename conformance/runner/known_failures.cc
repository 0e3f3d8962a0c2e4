// Known failures: a vendor's list of tests expected to fail, with reasons.
//
//   [[known_failure]]
//   test = "op.add.float16"      # glob over test names
//   reason = "accumulates in float16 (ticket ACME-123)"
#include <stdexcept>
#include <toml++/toml.h>

#include "runner/session.hpp"

namespace hal::conformance {

namespace {
std::string where(const std::string& path, const toml::source_region& r) {
  return path + ":" + std::to_string(r.begin.line);
}
}  // namespace

std::vector<KnownFailure> load_known_failures(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(where(path, e.source()) + ": " + std::string(e.description()));
  }
  std::vector<KnownFailure> out;
  for (auto&& [key, value] : root) {
    if (key.str() != "known_failure")
      throw std::runtime_error(where(path, value.source()) + ": unknown key '" + std::string(key.str()) +
                               "' (expected [[known_failure]] tables)");
  }
  const toml::array* list = root["known_failure"].as_array();
  if (root.contains("known_failure") && list == nullptr)
    throw std::runtime_error(where(path, root["known_failure"].node()->source()) +
                             ": 'known_failure' must be an array of tables ([[known_failure]])");
  if (list == nullptr) return out;
  for (const toml::node& n : *list) {
    const toml::table* t = n.as_table();
    if (t == nullptr) throw std::runtime_error(where(path, n.source()) + ": a known_failure entry must be a table");
    KnownFailure k;
    k.where = where(path, t->source());
    for (auto&& [key, value] : *t) {
      std::string name(key.str());
      if (name != "test" && name != "reason")
        throw std::runtime_error(where(path, value.source()) + ": unknown key '" + name +
                                 "' in a known_failure entry (keys: test, reason)");
      if (!value.is_string())
        throw std::runtime_error(where(path, value.source()) + ": '" + name + "' must be a string");
    }
    auto test = (*t)["test"].value<std::string>();
    if (!test || test->empty())
      throw std::runtime_error(k.where + ": a known_failure entry needs test = \"<glob over test names>\"");
    k.pattern = *test;
    k.reason = (*t)["reason"].value_or(std::string());
    if (k.reason.empty()) throw std::runtime_error(k.where + ": known failure '" + k.pattern + "' needs a reason");
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace hal::conformance
