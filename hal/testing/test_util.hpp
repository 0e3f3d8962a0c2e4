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

namespace hal::testing {

// A private (0700) temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hal_test_XXXXXX").string();
    char* made = mkdtemp(tmpl.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string fixture(const std::string& name) {
  return std::string(HAL_TEST_FIXTURE_DIR) + "/libhal_plugin_fixture_" + name + ".so";
}

// A runtime that loads exactly PATHS (no config, no environment, no scan).
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

inline std::shared_ptr<Runtime> load_only(std::vector<std::string> paths, RuntimeOptions o = {}) {
  o.plugin_paths = std::move(paths);
  o.use_environment = false;
  o.use_layer_environment = false;  // hermetic: $HAL_LAYERS does not apply
  o.use_install_dir = false;
  return Runtime::create(o);
}

// A runtime from config TEXT written to DIR/hal.toml.
inline std::shared_ptr<Runtime> load_config(const TempDir& dir, const std::string& text) {
  write_file(dir / "hal.toml", text);
  RuntimeOptions o;
  o.config_path = dir / "hal.toml";
  o.use_environment = false;
  o.use_layer_environment = false;
  o.use_install_dir = false;
  return Runtime::create(o);
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
