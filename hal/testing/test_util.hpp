// Test helpers shared by the core's doctest suites.
#ifndef HAL_TESTING_TEST_UTIL_HPP_
#define HAL_TESTING_TEST_UTIL_HPP_

#include <sys/stat.h>
#include <sys/wait.h>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "hal/runtime/runtime.hpp"
#include "runtime_util.hpp"  // beside this file: every includer finds it

namespace hal::testing {

inline std::string fixture(const std::string& name) {
  return std::string(HAL_TEST_FIXTURE_DIR) + "/libhal_plugin_fixture_" + name + ".so";
}

// The hal::Error FN throws (fails the test when it throws none).
template <class Fn>
hal::Error error_of(Fn&& fn) {
  try {
    fn();
  } catch (const hal::Error& e) {
    return e;
  }
  FAIL("expected a hal::Error");
  return hal::Error(HAL_STATUS_OK, "");
}

// The message of a C status (released here; *CODE its code), or "" for
// success.
inline std::string message_of(hal_status_t* s, uint32_t* code = nullptr) {
  if (s == nullptr) return "";
  std::string m = s->message;
  if (code) *code = s->code;
  s->destroy(s);
  return m;
}

struct CommandResult {
  int exit_code;
  std::string output;  // stdout only
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r{-1, {}};
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace hal::testing

#endif  // HAL_TESTING_TEST_UTIL_HPP_
