// Loading: every way a plugin can be unusable becomes a skip record with a
// reason, and never disturbs the other plugins. Version negotiation.
#include <doctest/doctest.h>

#include "hal/op_catalog.h"
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hal/runtime/runtime.hpp"
#include "loader/plugin_loader.hpp"
#include "testing/test_util.hpp"

using hal::SkipReason;
using hal::testing::fixture;
using hal::testing::load_config;
using hal::testing::load_only;
using hal::testing::TempDir;
namespace fs = std::filesystem;

namespace {
const std::string kCpu = HAL_TEST_CPU_PLUGIN;

// The single skip record of loading PATH alone.
hal::SkipRecord only_skip(const std::string& path, hal::RuntimeOptions o = {}) {
  auto rt = load_only({path}, o);
  CHECK(rt->plugins().empty());
  REQUIRE(rt->skipped().size() == 1);
  CHECK(rt->skipped()[0].requested);
  return rt->skipped()[0];
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Allocates, copies in and out: proves the plugin really works.
void round_trip(hal::Device& d) {
  hal::Buffer b = d.allocate(100);
  std::string in = "0123456789", out(10, '-');
  b.copy_from_host(in.data(), 10, 37);
  b.copy_to_host(out.data(), 10, 37);
  CHECK(out == in);
}
}  // namespace

TEST_CASE("the CPU plugin loads and negotiates the current ABI") {
  auto rt = load_only({kCpu});
  REQUIRE(rt->plugins().size() == 1);
  CHECK(rt->skipped().empty());
  const auto& p = *rt->plugins()[0];
  CHECK(p.name() == "cpu");
  CHECK(p.path() == kCpu);
  CHECK(p.abi_major() == HAL_ABI_VERSION_MAJOR);
  CHECK(p.negotiated_minor() == HAL_ABI_VERSION_MINOR);
  CHECK(p.interfaces() ==
        (HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY | HAL_CAPABILITY_STREAM | HAL_CAPABILITY_COLLECTIVE |
         HAL_CAPABILITY_OPERATOR | HAL_CAPABILITY_GRAPH));
  REQUIRE(p.devices().size() == 1);
  round_trip(*p.devices()[0]);
}

TEST_CASE("bad plugin files are skipped with a reason") {
  SUBCASE("not a shared object") {
    auto s = only_skip(fixture("not_elf"));
    CHECK(s.reason == SkipReason::kLoadFailed);
    CHECK(contains(s.message, "--plugin: cannot load"));
    CHECK(contains(s.message, "libhal_plugin_fixture_not_elf.so"));
  }
  SUBCASE("a shared object with no entry point") {
    auto s = only_skip(fixture("no_entry"));
    CHECK(s.reason == SkipReason::kMissingEntryPoint);
    CHECK(contains(s.message, "no 'hal_plugin_entry' symbol"));
  }
  SUBCASE("the entry point returns an error") {
    auto s = only_skip(fixture("entry_error"));
    CHECK(s.reason == SkipReason::kEntryFailed);
    CHECK(contains(s.message, "DEVICE_ERROR: fixture_entry_error: driver not installed (native error -3)"));
  }
  SUBCASE("the entry point throws") {
    auto s = only_skip(fixture("entry_throws"));
    CHECK(s.reason == SkipReason::kEntryThrew);
    CHECK(contains(s.message, "exception escaping the C ABI"));
  }
  SUBCASE("the entry point returns a NULL table") {
    CHECK(only_skip(fixture("null_table")).reason == SkipReason::kNullTable);
  }
  SUBCASE("the table's struct_size is below the minimum") {
    auto s = only_skip(fixture("small_struct"));
    CHECK(s.reason == SkipReason::kStructTooSmall);
    CHECK(contains(s.message, "hal_plugin_api_t.struct_size " +
                                  std::to_string(HAL_STRUCT_SIZE_TO(hal_plugin_api_t, name)) +
                                  " is below the minimum " + std::to_string(HAL_PLUGIN_API_MIN_SIZE)));
  }
  SUBCASE("the file does not exist") {
    auto s = only_skip("/nonexistent/libhal_plugin_x.so");
    CHECK(s.reason == SkipReason::kFileNotFound);
    CHECK(contains(s.message, "no such file: /nonexistent/libhal_plugin_x.so"));
  }
}

TEST_CASE("version negotiation") {
  SUBCASE("a plugin built for another MAJOR is skipped") {
    auto s = only_skip(fixture("major_mismatch"));
    CHECK(s.reason == SkipReason::kAbiMajorMismatch);
    std::string minor = std::to_string(HAL_ABI_VERSION_MINOR);
    CHECK(contains(s.message, "plugin built for HAL ABI major 2 (2." + minor + "), this libhal is major 1 (1." + minor +
                                  "); MAJOR must match: rebuild the plugin against the installed HAL (headers of ABI "
                                  "major 1)"));
  }
  SUBCASE("a host of another MAJOR is refused by an SDK plugin") {
    hal::RuntimeOptions o;
    o.host_abi_major = HAL_ABI_VERSION_MAJOR + 1;
    auto s = only_skip(kCpu, o);
    CHECK(s.reason == SkipReason::kAbiMajorMismatch);
    CHECK(contains(s.message, "ABI_MISMATCH: cpu: hal_plugin_entry: host ABI major 2"));
    CHECK(contains(s.message, " (this libhal is ABI 2." + std::to_string(HAL_ABI_VERSION_MINOR) +
                                  "): rebuild the plugin against the installed HAL (headers of ABI major 2)"));
  }
  SUBCASE("a newer MINOR loads and only known fields are used") {
    auto rt = load_only({fixture("newer_minor")});
    REQUIRE(rt->plugins().size() == 1);
    const auto& p = *rt->plugins()[0];
    CHECK(p.abi_minor() == HAL_ABI_VERSION_MINOR + 1);
    CHECK(p.negotiated_minor() == HAL_ABI_VERSION_MINOR);
    CHECK(p.api().struct_size == sizeof(hal_plugin_api_t));  // normalised to what we know
    CHECK(p.device_api().struct_size == sizeof(hal_device_api_t));
    REQUIRE(p.devices().size() == 1);
    round_trip(*p.devices()[0]);
    uint64_t free_bytes = 0, total = 0;
    p.devices()[0]->memory_info(&free_bytes, &total);
    CHECK(total > 0);
  }
  SUBCASE("an older MINOR loads and nothing past its struct_size is read") {
    // The fixture's tables end right before a PROT_NONE page: an overread
    // would crash here.
    auto rt = load_only({fixture("older_minor")});
    REQUIRE(rt->plugins().size() == 1);
    // Its graph table is the 1.0 declaration (struct_size only): no graph.
    CHECK((rt->plugins()[0]->interfaces() & HAL_CAPABILITY_GRAPH) == 0);
    CHECK((rt->plugins()[0]->graph_api().graph_compile == nullptr));
    CHECK(contains(rt->plugins()[0]->graph_note(), "graph compile not used: the graph table lacks graph_partition"));
    auto d = rt->plugins()[0]->devices().at(0);
    round_trip(*d);
    uint64_t f = 0, t = 0;
    CHECK_THROWS_WITH_AS(d->memory_info(&f, &t), "fixture_older_minor: memory_get_info is not implemented by this plugin",
                         hal::Error);
    hal::Stream s = d->create_stream();
    hal::Event a = d->create_event(), b = d->create_event();
    a.record(s);
    b.record(s);
    b.synchronize();
    try {
      hal::Event::elapsed_ns(a, b);
      FAIL("expected UNIMPLEMENTED");
    } catch (const hal::Error& e) {
      CHECK(e.code() == HAL_STATUS_UNIMPLEMENTED);
    }
  }
}

TEST_CASE("graph negotiation: the graph entries are used only from ABI 1.2 on") {
  SUBCASE("a 1.2 plugin with a graph table has the graph interface") {
    auto rt = load_only({fixture("graph")});
    REQUIRE(rt->plugins().size() == 1);
    const auto& p = *rt->plugins()[0];
    CHECK(p.negotiated_minor() == 2);
    CHECK(p.has_graph());
    CHECK((p.interfaces() & HAL_CAPABILITY_OPERATOR) != 0);
    CHECK(p.graph_note().empty());
    CHECK((p.graph_api().executable_execute != nullptr));
  }
  SUBCASE("a plugin announcing 1.1 loads without graph even though its table has entries") {
    auto rt = load_only({fixture("graph_minor1")});
    REQUIRE(rt->plugins().size() == 1);
    const auto& p = *rt->plugins()[0];
    CHECK(p.abi_minor() == 1);
    CHECK(p.negotiated_minor() == 1);
    CHECK_FALSE(p.has_graph());
    CHECK((p.graph_api().graph_partition == nullptr));
    CHECK(p.graph_note() == "graph compile not used: the negotiated ABI 1.1 predates the graph entries (1.2)");
    CHECK((p.interfaces() & HAL_CAPABILITY_OPERATOR) != 0);  // 1.1 entries still used
    round_trip(*p.devices().at(0));
  }
  SUBCASE("a 1.1 host does not use a 1.2 plugin's graph entries") {
    hal::RuntimeOptions o;
    o.host_abi_minor = 1;
    auto rt = load_only({fixture("graph")}, o);
    REQUIRE(rt->plugins().size() == 1);
    CHECK(rt->plugins()[0]->negotiated_minor() == 1);
    CHECK_FALSE(rt->plugins()[0]->has_graph());
  }
  SUBCASE("a current plugin's graph table is used, with no note") {
    auto rt = load_only({kCpu});
    CHECK(rt->plugins().at(0)->has_graph());
    CHECK(rt->plugins().at(0)->graph_note().empty());
  }
}

TEST_CASE("a plugin that registers ops without declaring the operator interface is refused with what to change") {
  auto s = only_skip(fixture("undeclared_ops"));
  CHECK(s.reason == SkipReason::kInitFailed);
  CHECK(contains(s.message, "the plugin registers 1 op(s) (add) but does not declare the operator interface"));
  CHECK(contains(s.message, "add HAL_CAPABILITY_OPERATOR to the plugin class's kInterfaces"));
}

TEST_CASE("extension chains on the plugin table (ABI 1.3): unknown types skipped, malformed chains refused") {
  SUBCASE("elements of unknown types are skipped and the plugin loads") {
    auto rt = load_only({fixture("chain_unknown")});
    REQUIRE(rt->plugins().size() == 1);
    CHECK(rt->skipped().empty());
    const auto& p = *rt->plugins()[0];
    CHECK(p.negotiated_minor() == HAL_ABI_VERSION_MINOR);
    REQUIRE(p.api().next != nullptr);
    CHECK(p.api().next->type == HAL_EXTENSION_TYPE_VENDOR_FIRST);
    round_trip(*p.devices()[0]);
  }
  SUBCASE("a cycle is refused with the element and where it links back to") {
    auto s = only_skip(fixture("chain_cycle"));
    CHECK(s.reason == SkipReason::kInvalidPlugin);
    CHECK(s.name == "fixture_chain_cycle");
    CHECK(contains(s.message, "hal_plugin_api_t.next: extension chain element 2 (at 0x"));
    CHECK(contains(s.message, ") links back to element 1: the chain has a cycle"));
  }
  SUBCASE("an element smaller than hal_extension_base_t is refused with its struct_size") {
    auto s = only_skip(fixture("chain_small"));
    CHECK(s.reason == SkipReason::kInvalidPlugin);
    CHECK(contains(s.message, "hal_plugin_api_t.next: extension chain element 1 (at 0x"));
    CHECK(contains(s.message, ") has struct_size " + std::to_string(sizeof(size_t)) +
                                  ", smaller than hal_extension_base_t (" +
                                  std::to_string(sizeof(hal_extension_base_t)) + ")"));
  }
  SUBCASE("a 1.2 host does not read the chain at all") {
    hal::RuntimeOptions o;
    o.host_abi_minor = 2;
    auto rt = load_only({fixture("chain_cycle")}, o);
    REQUIRE(rt->plugins().size() == 1);
    CHECK(rt->plugins()[0]->negotiated_minor() == 2);
    CHECK(rt->plugins()[0]->api().next == nullptr);
  }
  SUBCASE("older plugins' tables (ABI 1.1, 1.2: no next field) still load") {
    auto rt = load_only({fixture("graph"), fixture("graph_minor1")});
    CHECK(rt->skipped().empty());
    CHECK(rt->plugins().size() == 2);
  }
  SUBCASE("hal-info shows the refusal as a skip record") {
    auto out = hal::testing::run_command("'" + std::string(HAL_TEST_HAL_INFO) + "' --json --plugin '" +
                                         fixture("chain_cycle") + "'");
    CHECK(out.exit_code == 1);
    auto j = nlohmann::json::parse(out.output);
    REQUIRE(j["skipped"].size() == 1);
    CHECK(j["skipped"][0]["reason"] == "invalid_plugin");
    CHECK(contains(j["skipped"][0]["message"].get<std::string>(), "the chain has a cycle"));
  }
}

TEST_CASE("a plugin implementing another op catalog MAJOR loads without its operators") {
  auto rt = load_only({fixture("other_catalog_major")});
  REQUIRE(rt->plugins().size() == 1);
  const auto& p = *rt->plugins()[0];
  CHECK((p.interfaces() & HAL_CAPABILITY_OPERATOR) == 0);
  CHECK(p.op_count() == 0);
  CHECK(contains(p.op_note(), "operators disabled: the plugin implements op catalog " +
                                  std::to_string(HAL_OP_CATALOG_VERSION_MAJOR + 1) + "."));
  auto d = p.devices().at(0);
  round_trip(*d);
  CHECK_THROWS_WITH_AS(hal::OpRunner(d, "add"), "fixture_other_catalog_major: the plugin has no operator interface",
                       hal::Error);
  // The real CPU plugin implements this host's catalog.
  auto cpu = load_only({kCpu});
  CHECK(cpu->plugins().at(0)->op_count() > 0);
  CHECK(cpu->plugins().at(0)->op_catalog_version() ==
        std::to_string(HAL_OP_CATALOG_VERSION_MAJOR) + "." + std::to_string(HAL_OP_CATALOG_VERSION_MINOR));
}

TEST_CASE("one bad plugin does not affect the others") {
  std::vector<std::string> paths;
  for (const char* f : {"not_elf", "no_entry", "entry_error", "entry_throws", "null_table", "small_struct",
                        "major_mismatch"})
    paths.push_back(fixture(f));
  paths.push_back(kCpu);
  auto rt = load_only(paths);
  CHECK(rt->skipped().size() == 7);
  REQUIRE(rt->plugins().size() == 1);
  CHECK(rt->plugins()[0]->name() == "cpu");
  round_trip(*rt->default_device());
}

TEST_CASE("two plugins claiming the same name: the first (or higher priority) wins") {
  TempDir dir;
  fs::copy_file(kCpu, dir / "libhal_plugin_cpu_copy.so");
  SUBCASE("in order") {
    auto rt = load_only({kCpu, dir / "libhal_plugin_cpu_copy.so"});
    REQUIRE(rt->plugins().size() == 1);
    CHECK(rt->plugins()[0]->path() == kCpu);
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].reason == SkipReason::kDuplicateName);
    CHECK(contains(rt->skipped()[0].message, "plugin name 'cpu' is already taken by " + kCpu));
    round_trip(*rt->default_device());
  }
  SUBCASE("by priority") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"" + kCpu + "\"\n[[plugin]]\npath = \"libhal_plugin_cpu_copy.so\"\npriority = 5\n");
    REQUIRE(rt->plugins().size() == 1);
    CHECK(rt->plugins()[0]->path() == dir / "libhal_plugin_cpu_copy.so");
    CHECK(rt->plugins()[0]->priority() == 5);
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].path == kCpu);
    CHECK(rt->skipped()[0].reason == SkipReason::kDuplicateName);
  }
}

TEST_CASE("sha256 pins are checked before loading") {
  TempDir dir;
  const std::string actual = hal::detail::sha256_file(kCpu);
  // Independent check of our hashing against coreutils.
  auto sum = hal::testing::run_command("sha256sum '" + kCpu + "'");
  CHECK(sum.output.substr(0, 64) == actual);
  SUBCASE("mismatch") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"" + kCpu + "\"\nsha256 = \"" + std::string(64, '0') + "\"\n");
    CHECK(rt->plugins().empty());
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].reason == SkipReason::kHashMismatch);
    CHECK(rt->skipped()[0].requested);
    CHECK(contains(rt->skipped()[0].message, dir / "hal.toml:1:1: sha256 is " + actual + " but the configuration pins 0000"));
  }
  SUBCASE("match") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"" + kCpu + "\"\nsha256 = \"" + actual + "\"\n");
    CHECK(rt->skipped().empty());
    CHECK(rt->plugins().size() == 1);
  }
}

TEST_CASE("plugins in a world-writable directory are refused unless allowed") {
  TempDir dir;
  fs::create_directory(dir / "open");
  ::chmod((dir / "open").c_str(), 0777);
  fs::copy_file(kCpu, dir / "open/libhal_plugin_cpu.so");
  const std::string path = dir / "open/libhal_plugin_cpu.so";
  const std::string config = dir / "hal.toml";
  const std::string refused = "directory " + dir / "open is world-writable; refusing to load: chmod o-w " + dir / "open" +
                              " (or move the plugin to a directory only its owner can write)";
  SUBCASE("refused; with no hal.toml in use, says allow_world_writable needs one") {
    auto s = only_skip(path);
    CHECK(s.reason == SkipReason::kUnsafePermissions);
    CHECK(s.message == "--plugin: " + refused +
                           ". No hal.toml is in use (--plugin and HAL_PLUGIN_PATH loads have none), so "
                           "allow_world_writable = true cannot be set for it: that key goes in a hal.toml given by "
                           "--config or HAL_CONFIG, at its top level or in the [[plugin]] entry that lists the plugin");
  }
  SUBCASE("refused when listed in hal.toml: names its [[plugin]] entry and the file") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"open/libhal_plugin_cpu.so\"\n");
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].reason == SkipReason::kUnsafePermissions);
    CHECK(rt->skipped()[0].message == config + ":1:1: " + refused +
                                          ", or set allow_world_writable = true in this [[plugin]] entry of " +
                                          config + " (or at its top level)");
  }
  SUBCASE("refused when found by scanning: names the top level of the hal.toml in use") {
    auto rt = load_config(dir, "search_paths = [\"open\"]\n");
    REQUIRE(rt->skipped().size() == 1);
    CHECK_FALSE(rt->skipped()[0].requested);
    CHECK(rt->skipped()[0].message ==
          refused + ", or set allow_world_writable = true at the top level of " + config + " (the hal.toml in use)");
  }
  SUBCASE("allowed per plugin") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"open/libhal_plugin_cpu.so\"\nallow_world_writable = true\n");
    CHECK(rt->skipped().empty());
    CHECK(rt->plugins().size() == 1);
  }
  SUBCASE("allowed for the whole config") {
    auto rt = load_config(dir, "allow_world_writable = true\n[[plugin]]\npath = \"open/libhal_plugin_cpu.so\"\n");
    CHECK(rt->plugins().size() == 1);
  }
  SUBCASE("a world-writable file is refused too") {
    fs::create_directory(dir / "closed");
    fs::copy_file(kCpu, dir / "closed/libhal_plugin_cpu.so");
    ::chmod((dir / "closed/libhal_plugin_cpu.so").c_str(), 0777);
    const std::string file = dir / "closed/libhal_plugin_cpu.so";
    auto s = only_skip(file);
    CHECK(s.reason == SkipReason::kUnsafePermissions);
    CHECK(contains(s.message, "--plugin: file " + file + " is world-writable; refusing to load: chmod o-w " + file +
                                  ". No hal.toml is in use"));
    auto rt = load_config(dir, "[[plugin]]\npath = \"closed/libhal_plugin_cpu.so\"\n");
    REQUIRE(rt->skipped().size() == 1);
    CHECK(contains(rt->skipped()[0].message, "set allow_world_writable = true in this [[plugin]] entry of " + config));
  }
}

TEST_CASE("a file not named libhal_plugin_<declared name>.so loads, with a warning") {
  TempDir dir;
  const std::string cpux = dir / "libhal_plugin_cpux.so";
  fs::copy_file(kCpu, cpux);
  const std::string warning =
      "file name libhal_plugin_cpux.so does not match the declared plugin name 'cpu': it should be "
      "libhal_plugin_cpu.so (hal_add_plugin(cpu) must match HAL_SDK_PLUGIN's name), or hal.toml's name = \"cpu\" "
      "does not find it";
  auto rt = load_only({cpux});
  REQUIRE(rt->plugins().size() == 1);
  CHECK(rt->plugins()[0]->startup_warnings() == std::vector<std::string>{warning});
  CHECK(load_only({kCpu})->plugins().at(0)->startup_warnings().empty());

  const std::string info = HAL_TEST_HAL_INFO;
  auto text = hal::testing::run_command("'" + info + "' --plugin '" + cpux + "'");
  CHECK(text.exit_code == 0);
  CHECK_MESSAGE(contains(text.output, "    warning: " + warning + "\n"), text.output);
  auto j = nlohmann::json::parse(hal::testing::run_command("'" + info + "' --json --plugin '" + cpux + "'").output);
  REQUIRE(j["plugins"].size() == 1);
  CHECK(j["plugins"][0]["warnings"] == nlohmann::json::array({warning}));
}

TEST_CASE("config problems with plugins name file:line and keep the rest") {
  TempDir dir;
  SUBCASE("missing plugin file") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"" + kCpu + "\"\n\n[[plugin]]\npath = \"missing.so\"\n");
    CHECK(rt->plugins().size() == 1);
    REQUIRE(rt->skipped().size() == 1);
    const auto& s = rt->skipped()[0];
    CHECK(s.reason == SkipReason::kFileNotFound);
    CHECK(s.requested);
    CHECK(s.message == dir / "hal.toml:4:1: no such file: " + dir / "missing.so");
  }
  SUBCASE("a name that is found nowhere") {
    auto rt = load_config(dir, "search_paths = [\".\"]\n[[plugin]]\nname = \"acme\"\n");
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].reason == SkipReason::kFileNotFound);
    CHECK(rt->skipped()[0].message == dir / "hal.toml:2:1: plugin 'acme': libhal_plugin_acme.so not found in search paths [" + dir.path() + "]");
  }
  SUBCASE("a name found in a search path") {
    fs::create_directory(dir / "plugins");
    fs::copy_file(kCpu, dir / "plugins/libhal_plugin_cpu.so");
    auto rt = load_config(dir, "search_paths = [\"plugins\"]\ndiscover = false\n[[plugin]]\nname = \"cpu\"\n");
    REQUIRE(rt->plugins().size() == 1);
    CHECK(rt->plugins()[0]->path() == dir / "plugins/libhal_plugin_cpu.so");
  }
  SUBCASE("a name that does not match what the plugin says") {
    fs::copy_file(kCpu, dir / "libhal_plugin_gpu.so");
    auto rt = load_config(dir, "search_paths = [\".\"]\n[[plugin]]\nname = \"gpu\"\n");
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].reason == SkipReason::kInvalidPlugin);
    CHECK(contains(rt->skipped()[0].message, "configured as 'gpu' but the plugin calls itself 'cpu'"));
  }
  SUBCASE("bad plugin options fail initialisation, naming the option") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"" + kCpu + "\"\noptions = { device_count = \"many\" }\n");
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].reason == SkipReason::kInitFailed);
    CHECK(contains(rt->skipped()[0].message,
                   "create() failed: INVALID_ARGUMENT: cpu: create: option 'device_count' = 'many' is not an integer"));
    rt = load_config(dir, "[[plugin]]\npath = \"" + kCpu + "\"\noptions = { colour = \"red\" }\n");
    CHECK(contains(rt->skipped().at(0).message, "unknown option 'colour' = 'red'"));
  }
  SUBCASE("options reach the plugin") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"" + kCpu + "\"\noptions = { device_count = 3 }\n");
    REQUIRE(rt->plugins().size() == 1);
    CHECK(rt->devices().size() == 3);
    CHECK(rt->device("cpu:2")->index() == 2);
  }
  SUBCASE("disabled plugins are listed, not loaded") {
    auto rt = load_config(dir, "[[plugin]]\npath = \"" + kCpu + "\"\nenabled = false\n");
    CHECK(rt->plugins().empty());
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].reason == SkipReason::kDisabled);
    CHECK_FALSE(rt->skipped()[0].requested);
  }
  SUBCASE("a broken config file is an error, not a silent default") {
    CHECK_THROWS_AS(load_config(dir, "[[plugin]\n"), hal::ConfigError);
  }
}

TEST_CASE("discovery: HAL_PLUGIN_PATH and HAL_CONFIG") {
  TempDir dir;
  fs::create_directory(dir / "p");
  fs::copy_file(kCpu, dir / "p/libhal_plugin_cpu.so");
  hal::testing::write_file(dir / "p/README.txt", "not a plugin, not scanned");
  hal::RuntimeOptions o;
  o.use_install_dir = false;
  SUBCASE("a directory in HAL_PLUGIN_PATH is scanned") {
    ::setenv("HAL_PLUGIN_PATH", (dir / "p").c_str(), 1);
    auto rt = hal::Runtime::create(o);
    ::unsetenv("HAL_PLUGIN_PATH");
    REQUIRE(rt->plugins().size() == 1);
    CHECK(rt->plugins()[0]->path() == dir / "p/libhal_plugin_cpu.so");
    CHECK(rt->search_paths() == std::vector<std::string>{dir / "p"});
  }
  SUBCASE("a file in HAL_PLUGIN_PATH is requested explicitly") {
    ::setenv("HAL_PLUGIN_PATH", (dir / "p/missing.so").c_str(), 1);
    auto rt = hal::Runtime::create(o);
    ::unsetenv("HAL_PLUGIN_PATH");
    REQUIRE(rt->skipped().size() == 1);
    CHECK(rt->skipped()[0].requested);
    CHECK(rt->skipped()[0].message.rfind("HAL_PLUGIN_PATH: no such file", 0) == 0);
  }
  SUBCASE("HAL_CONFIG picks the config, and an explicit path overrides it") {
    hal::testing::write_file(dir / "a.toml", "search_paths = [\"p\"]\ndefault_device = \"cpu:1\"\n"
                                              "[[plugin]]\nname = \"cpu\"\noptions = { device_count = 2 }\n");
    hal::testing::write_file(dir / "b.toml", "discover = false\n");
    ::setenv("HAL_CONFIG", (dir / "a.toml").c_str(), 1);
    auto rt = hal::Runtime::create(o);
    CHECK(rt->config().source == dir / "a.toml");
    CHECK(rt->devices().size() == 2);
    CHECK(rt->default_device()->id() == "cpu:1");
    o.config_path = dir / "b.toml";
    auto rt2 = hal::Runtime::create(o);
    ::unsetenv("HAL_CONFIG");
    CHECK(rt2->config().source == dir / "b.toml");
    CHECK(rt2->plugins().empty());
  }
}

TEST_CASE("the install plugin dir is next to libhal") {
  // In the build tree, lib/libhal.so and lib/hal/plugins/libhal_plugin_cpu.so.
  CHECK(hal::Runtime::install_plugin_dir() == fs::path(kCpu).parent_path().string());
  hal::RuntimeOptions o;
  o.use_environment = false;
  auto rt = hal::Runtime::create(o);
  REQUIRE(rt->plugins().size() >= 1);
  CHECK(rt->plugins()[0]->name() == "cpu");
}

TEST_CASE("hal-info: text and JSON agree - exit status reports requested failures") {
  const std::string info = HAL_TEST_HAL_INFO;
  auto text = hal::testing::run_command("env -u HAL_CONFIG -u HAL_PLUGIN_PATH '" + info + "' -v");
  auto json = hal::testing::run_command("env -u HAL_CONFIG -u HAL_PLUGIN_PATH '" + info + "' --json");
  CHECK(text.exit_code == 0);
  CHECK(json.exit_code == 0);
  auto j = nlohmann::json::parse(json.output);
  REQUIRE(j["plugins"].size() >= 1);
  REQUIRE(j["devices"].size() >= 1);
  for (const auto& p : j["plugins"]) {
    CHECK(contains(text.output, "  " + p["name"].get<std::string>() + " " + p["version"].get<std::string>()));
    CHECK(contains(text.output, "path: " + p["path"].get<std::string>()));
  }
  for (const auto& d : j["devices"]) {
    CHECK(contains(text.output, "  " + d["id"].get<std::string>() + "  " + d["name"].get<std::string>()));
    CHECK(d["total_memory_bytes"].get<uint64_t>() > 0);
    CHECK(d["capabilities"].size() >= 2);
  }
  CHECK(contains(text.output, "plugins: " + std::to_string(j["plugins"].size()) + " loaded"));
  CHECK(contains(text.output, "devices: " + std::to_string(j["devices"].size())));

  auto bad = hal::testing::run_command("'" + info + "' --json --plugin '" + fixture("no_entry") + "'");
  CHECK(bad.exit_code == 1);
  auto bj = nlohmann::json::parse(bad.output);
  REQUIRE(bj["skipped"].size() == 1);
  CHECK(bj["skipped"][0]["reason"] == "missing_entry_point");
  CHECK(bj["plugins"].empty());

  {  // "(requested)" is explained once under skipped:, and only when it appears
    const std::string legend =
        "skipped:\n  (requested: named by --plugin, a [[plugin]] entry of hal.toml or a file in HAL_PLUGIN_PATH, not "
        "picked up by a directory scan; hal-info exits 1 when a requested plugin is skipped)\n";
    auto two = hal::testing::run_command("'" + info + "' --plugin '" + fixture("no_entry") + "' --plugin '" +
                                         fixture("null_table") + "'");
    CHECK(two.exit_code == 1);
    CHECK_MESSAGE(contains(two.output, legend), two.output);
    CHECK(two.output.find("(requested:") == two.output.rfind("(requested:"));
    CHECK(contains(two.output, "reason: missing_entry_point (requested)\n"));
    TempDir scan;
    fs::create_directory(scan / "p");
    fs::copy_file(fixture("no_entry"), scan / "p/libhal_plugin_no_entry.so");
    hal::testing::write_file(scan / "hal.toml", "search_paths = [\"p\"]\n");
    auto scanned = hal::testing::run_command("env -u HAL_PLUGIN_PATH '" + info + "' --config '" + scan / "hal.toml" + "'");
    CHECK(scanned.exit_code == 0);
    CHECK_MESSAGE(contains(scanned.output, "skipped:\n  " + scan / "p/libhal_plugin_no_entry.so\n"), scanned.output);
    CHECK_FALSE(contains(scanned.output, "requested"));
  }

  auto probe = hal::testing::run_command("'" + info + "' --plugin '" + kCpu + "'");
  CHECK(probe.exit_code == 0);
  CHECK(contains(probe.output, "cpu:0"));
  CHECK(contains(probe.output, "graph compile: implemented, executables serialisable"));
  auto graph = hal::testing::run_command("'" + info + "' --json --plugin '" + fixture("graph_minor1") + "' --plugin '" +
                                         fixture("graph") + "'");
  auto gj = nlohmann::json::parse(graph.output);
  for (const auto& p : gj["plugins"]) {
    bool minor1 = p["name"] == "fixture_graph_minor1";
    CHECK(p["graph"]["implemented"] == !minor1);
    CHECK(contains(p["graph"]["note"].get<std::string>(), minor1 ? "predates the graph entries" : ""));
  }
  CHECK(contains(hal::testing::run_command("'" + info + "' --plugin '" + fixture("graph") + "'").output,
                 "graph compile: implemented, executables "));
  for (const auto& p : gj["plugins"]) CHECK(p["graph"]["serializable"].is_boolean());

  {  // disabled_ops from hal.toml, in text and JSON
    TempDir cfg_dir;
    hal::testing::write_file(cfg_dir / "hal.toml", "discover = false\n[[plugin]]\npath = \"" + kCpu +
                                                       "\"\ndisabled_ops = [\"gelu\", \"erf\"]\n");
    auto dt = hal::testing::run_command("'" + info + "' --config '" + cfg_dir / "hal.toml" + "'");
    CHECK(dt.exit_code == 0);
    CHECK_MESSAGE(contains(dt.output, "    disabled by hal.toml: gelu erf\n"), dt.output);
    auto dj = nlohmann::json::parse(
        hal::testing::run_command("'" + info + "' --json --config '" + cfg_dir / "hal.toml" + "'").output);
    REQUIRE(dj["plugins"].size() == 1);
    CHECK(dj["plugins"][0]["disabled_ops"] == nlohmann::json({"gelu", "erf"}));
    CHECK(dj["plugins"][0]["graph"]["serializable"] == true);  // the CPU plugin's host-graph executables
    CHECK(nlohmann::json::parse(hal::testing::run_command("'" + info + "' --json --plugin '" + kCpu + "'").output)
              ["plugins"][0]["disabled_ops"]
              .empty());
  }

  TempDir dir;
  hal::testing::write_file(dir / "hal.toml", "discover = 1\n");
  auto cfg = hal::testing::run_command("'" + info + "' --config '" + dir / "hal.toml" + "' 2>&1");
  CHECK(cfg.exit_code == 2);
  CHECK(contains(cfg.output, dir / "hal.toml:1:12: 'discover' must be a boolean, not integer"));
  auto usage = hal::testing::run_command("'" + info + "' --bogus 2>&1");
  CHECK(usage.exit_code == 2);
  CHECK(contains(usage.output, "unrecognised option '--bogus'"));
}
