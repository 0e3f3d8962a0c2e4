// Helpers without doctest, shared by the core's test suites and the fuzz
// targets: temporary directories and runtimes loaded hermetically.
#ifndef HAL_TESTING_RUNTIME_UTIL_HPP_
#define HAL_TESTING_RUNTIME_UTIL_HPP_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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

// A runtime that loads exactly PATHS (no config, no environment, no scan).
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

}  // namespace hal::testing

#endif  // HAL_TESTING_RUNTIME_UTIL_HPP_
