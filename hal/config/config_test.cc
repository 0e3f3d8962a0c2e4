// hal.toml parsing: every field, and every error naming file:line:column.
#include <doctest/doctest.h>

#include "hal/runtime/config.hpp"
#include "testing/test_util.hpp"

using hal::Config;
using hal::ConfigError;

namespace {
// The message of the ConfigError that parsing TEXT (as /etc/hal/hal.toml) throws.
std::string error_of(const std::string& text) {
  try {
    Config::parse(text, "/etc/hal/hal.toml");
  } catch (const ConfigError& e) {
    CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
    return e.what();
  }
  FAIL("no error for: " << text);
  return {};
}
}  // namespace

TEST_CASE("a complete config parses with paths relative to the file") {
  Config c = Config::parse(R"(
search_paths = ["plugins", "/opt/hal/plugins"]
discover = false
default_device = "cpu:1"
fallback_device = "cpu:0"
allow_world_writable = true
caching_allocator = false

[[plugin]]
name = "cpu"
priority = 10
sha256 = "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
options = { device_count = 2, mode = "fast", ratio = 0.5, strict = true }

[[plugin]]
path = "vendor/libhal_plugin_acme.so"
enabled = false
allow_world_writable = true
)",
                           "/etc/hal/hal.toml");
  CHECK(c.source == "/etc/hal/hal.toml");
  REQUIRE(c.search_paths.size() == 2);
  CHECK(c.search_paths[0] == "/etc/hal/plugins");
  CHECK(c.search_paths[1] == "/opt/hal/plugins");
  CHECK_FALSE(c.discover);
  CHECK(c.default_device == "cpu:1");
  CHECK(c.fallback_device == "cpu:0");
  CHECK(c.allow_world_writable);
  CHECK_FALSE(c.caching_allocator);
  REQUIRE(c.plugins.size() == 2);
  const auto& cpu = c.plugins[0];
  CHECK(cpu.name == "cpu");
  CHECK(cpu.path.empty());
  CHECK(cpu.priority == 10);
  CHECK(cpu.enabled);
  REQUIRE(cpu.sha256);
  CHECK(*cpu.sha256 == "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
  CHECK(cpu.origin == "/etc/hal/hal.toml:9:1");
  REQUIRE(cpu.options.size() == 4);
  CHECK(cpu.options[0] == std::make_pair(std::string("device_count"), std::string("2")));
  CHECK(cpu.options[1].second == "fast");
  CHECK(cpu.options[2].second == "0.5");
  CHECK(cpu.options[3].second == "true");
  const auto& acme = c.plugins[1];
  CHECK(acme.path == "/etc/hal/vendor/libhal_plugin_acme.so");
  CHECK_FALSE(acme.enabled);
  CHECK(acme.allow_world_writable);
}

TEST_CASE("an empty config means defaults") {
  Config c = Config::parse("", "x.toml");
  CHECK(c.discover);
  CHECK(c.caching_allocator);
  CHECK(c.plugins.empty());
}

TEST_CASE("malformed TOML names file:line:column") {
  std::string m = error_of("discover = true\n[[plugin]\nname = \"cpu\"\n");
  CHECK(m.rfind("/etc/hal/hal.toml:2:", 0) == 0);
  CHECK(m.find("malformed TOML") != std::string::npos);
}

TEST_CASE("unknown keys name file:line:column and the known keys") {
  CHECK(error_of("discover = true\nbogus = 1\n") ==
        "/etc/hal/hal.toml:2:1: unknown key 'bogus' in top level (known: search_paths, discover, default_device, "
        "fallback_device, failover, wait_timeout_ms, allow_world_writable, caching_allocator, layers, "
        "layer_options, plugin)");
  std::string m = error_of("[[plugin]]\nname = \"cpu\"\n  priorty = 3\n");
  CHECK(m.rfind("/etc/hal/hal.toml:3:3: unknown key 'priorty' in [[plugin]]", 0) == 0);
}

TEST_CASE("wrong types name file:line:column the key and both types") {
  CHECK(error_of("[[plugin]]\nname = \"cpu\"\npriority = \"high\"\n") ==
        "/etc/hal/hal.toml:3:12: 'priority' must be an integer, not string");
  CHECK(error_of("discover = \"yes\"\n") == "/etc/hal/hal.toml:1:12: 'discover' must be a boolean, not string");
  CHECK(error_of("search_paths = \"plugins\"\n") ==
        "/etc/hal/hal.toml:1:16: 'search_paths' must be an array of strings, not string");
  CHECK(error_of("search_paths = [1]\n").rfind("/etc/hal/hal.toml:1:17: 'search_paths[]' must be a string", 0) == 0);
  CHECK(error_of("plugin = 3\n") ==
        "/etc/hal/hal.toml:1:10: 'plugin' must be an array of tables ([[plugin]]), not integer");
  CHECK(error_of("[[plugin]]\nname = \"cpu\"\noptions = { list = [1, 2] }\n")
            .rfind("/etc/hal/hal.toml:3:20: 'options.list' must be a string, integer, float or boolean", 0) == 0);
}

TEST_CASE("invalid values name file:line:column") {
  CHECK(error_of("[[plugin]]\nname = \"cpu\"\nsha256 = \"abc\"\n") ==
        "/etc/hal/hal.toml:3:10: 'sha256' must be 64 hexadecimal digits, got 'abc'");
  CHECK(error_of("[[plugin]]\nname = \"Bad-Name\"\n") ==
        "/etc/hal/hal.toml:2:8: plugin name 'Bad-Name' must match [a-z0-9_]+");
  CHECK(error_of("[[plugin]]\npriority = 1\n") == "/etc/hal/hal.toml:1:1: [[plugin]] needs 'name' or 'path'");
}

TEST_CASE("an unreadable config file is NOT_FOUND naming the path") {
  try {
    Config::load("/nonexistent/hal.toml");
    FAIL("expected an error");
  } catch (const ConfigError& e) {
    CHECK(e.code() == HAL_STATUS_NOT_FOUND);
    CHECK(std::string(e.what()) == "/nonexistent/hal.toml: cannot read config file");
  }
}

TEST_CASE("the shipped default hal.toml parses") {
  Config c = Config::load(HAL_TEST_DEFAULT_CONFIG);
  CHECK(c.default_device == "cpu:0");
  REQUIRE(c.plugins.size() >= 1);
  CHECK(c.plugins[0].name == "cpu");
}
