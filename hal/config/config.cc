#include "hal/runtime/config.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "hal/common/op_catalog.hpp"

namespace hal {
namespace {

namespace fs = std::filesystem;

class Parser {
 public:
  explicit Parser(std::string source) : source_(std::move(source)) {
    fs::path p(source_);
    base_ = (source_ == "<string>" || !p.has_parent_path()) ? fs::current_path() : fs::absolute(p).parent_path();
  }

  Config run(const std::string& text) {
    toml::table root;
    try {
      root = toml::parse(text, source_);
    } catch (const toml::parse_error& e) {
      fail(e.source(), std::string("malformed TOML: ") + std::string(e.description()));
    }
    Config c;
    c.source = source_;
    for (auto&& [key, node] : root) {
      const std::string k(key.str());
      if (k == "search_paths") {
        for (const std::string& s : strings(node, k)) c.search_paths.push_back(resolve(s));
      } else if (k == "discover") {
        c.discover = boolean(node, k);
      } else if (k == "default_device") {
        c.default_device = string(node, k);
      } else if (k == "fallback_device") {
        c.fallback_device = string(node, k);
      } else if (k == "failover") {
        c.failover = string(node, k);
        c.failover_origin = location(node.source());
      } else if (k == "wait_timeout_ms") {
        const int64_t ms = integer(node, k);
        if (ms < 0) fail(node.source(), "'wait_timeout_ms' is " + std::to_string(ms) + " (must be >= 0; 0 = no timeout)");
        c.wait_timeout_ms = static_cast<uint64_t>(ms);
      } else if (k == "allow_world_writable") {
        c.allow_world_writable = boolean(node, k);
      } else if (k == "caching_allocator") {
        c.caching_allocator = boolean(node, k);
      } else if (k == "plugin") {
        const toml::array* arr = node.as_array();
        if (arr == nullptr) wrong_type(node, k, "an array of tables ([[plugin]])");
        for (const toml::node& entry : *arr) c.plugins.push_back(plugin(entry));
      } else if (k == "layers") {
        c.layers_origin = location(node.source());
        for (const std::string& l : strings(node, k)) {
          if (l.empty()) fail(node.source(), "'layers' has an empty name");
          c.layers.push_back(l.find('/') != std::string::npos ? resolve(l) : l);
        }
      } else if (k == "layer_options") {
        const toml::table* layers = node.as_table();
        if (layers == nullptr) wrong_type(node, k, "a table of tables ([layer_options.<layer>])");
        for (auto&& [name, table] : *layers) {
          const toml::table* t = table.as_table();
          if (t == nullptr) wrong_type(table, k + "." + std::string(name.str()), "a table");
          std::vector<std::pair<std::string, std::string>> opts;
          for (auto&& [okey, ovalue] : *t) opts.emplace_back(std::string(okey.str()), option(ovalue, okey));
          c.layer_options.emplace_back(std::string(name.str()), std::move(opts));
        }
      } else {
        unknown(key, "top level", "search_paths, discover, default_device, fallback_device, failover, "
                                  "wait_timeout_ms, allow_world_writable, caching_allocator, layers, layer_options, plugin");
      }
    }
    return c;
  }

 private:
  [[noreturn]] void fail(const toml::source_region& where, const std::string& message) const {
    throw ConfigError(HAL_STATUS_INVALID_ARGUMENT,
                      source_ + ":" + std::to_string(where.begin.line) + ":" +
                          std::to_string(where.begin.column) + ": " + message);
  }
  [[noreturn]] void wrong_type(const toml::node& node, const std::string& key, const char* want) const {
    std::ostringstream got;
    got << node.type();
    fail(node.source(), "'" + key + "' must be " + want + ", not " + got.str());
  }
  [[noreturn]] void unknown(const toml::key& key, const char* where, const char* known) const {
    fail(key.source(), "unknown key '" + std::string(key.str()) + "' in " + where + " (known: " + known + ")");
  }

  std::string string(const toml::node& node, const std::string& key) const {
    if (!node.is_string()) wrong_type(node, key, "a string");
    return node.as_string()->get();
  }
  bool boolean(const toml::node& node, const std::string& key) const {
    if (!node.is_boolean()) wrong_type(node, key, "a boolean");
    return node.as_boolean()->get();
  }
  int64_t integer(const toml::node& node, const std::string& key) const {
    if (!node.is_integer()) wrong_type(node, key, "an integer");
    return node.as_integer()->get();
  }
  std::vector<std::string> strings(const toml::node& node, const std::string& key) const {
    const toml::array* arr = node.as_array();
    if (arr == nullptr) wrong_type(node, key, "an array of strings");
    std::vector<std::string> out;
    for (const toml::node& item : *arr) out.push_back(string(item, key + "[]"));
    return out;
  }
  std::string resolve(const std::string& path) const {
    fs::path p = (fs::path(path).is_absolute() ? fs::path(path) : base_ / path).lexically_normal();
    if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();  // "dir/" -> "dir"
    return p.string();
  }
  std::string location(const toml::source_region& where) const {
    return source_ + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
  }

  PluginSpec plugin(const toml::node& entry) const {
    const toml::table* t = entry.as_table();
    if (t == nullptr) wrong_type(entry, "plugin", "a table");
    PluginSpec spec;
    spec.origin = location(entry.source());
    for (auto&& [key, node] : *t) {
      const std::string k(key.str());
      if (k == "name") {
        spec.name = string(node, k);
        bool ok = !spec.name.empty() && spec.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") ==
                                            std::string::npos;
        if (!ok) fail(node.source(), "plugin name '" + spec.name + "' must match [a-z0-9_]+");
      } else if (k == "path") {
        spec.path = resolve(string(node, k));
      } else if (k == "priority") {
        spec.priority = integer(node, k);
      } else if (k == "enabled") {
        spec.enabled = boolean(node, k);
      } else if (k == "sha256") {
        std::string h = string(node, k);
        for (char& ch : h) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (h.size() != 64 || h.find_first_not_of("0123456789abcdef") != std::string::npos)
          fail(node.source(), "'sha256' must be 64 hexadecimal digits, got '" + string(node, k) + "'");
        spec.sha256 = h;
      } else if (k == "allow_world_writable") {
        spec.allow_world_writable = boolean(node, k);
      } else if (k == "options") {
        const toml::table* opts = node.as_table();
        if (opts == nullptr) wrong_type(node, k, "a table");
        for (auto&& [okey, ovalue] : *opts) spec.options.emplace_back(std::string(okey.str()), option(ovalue, okey));
      } else if (k == "disabled_ops") {
        const toml::array* arr = node.as_array();
        if (arr == nullptr) wrong_type(node, k, "an array of catalog op names");
        for (const toml::node& item : *arr) {
          std::string op = string(item, k + "[]");
          if (common::catalog::find_schema(op.c_str()) == nullptr) fail(item.source(), "disabled_ops: '" + op + "' is not an op of the catalog (docs/ops.md)");
          spec.disabled_ops.push_back(std::move(op));
        }
      } else {
        unknown(key, "[[plugin]]",
                "name, path, priority, enabled, sha256, allow_world_writable, options, disabled_ops");
      }
    }
    if (spec.name.empty() && spec.path.empty()) fail(entry.source(), "[[plugin]] needs 'name' or 'path'");
    return spec;
  }

  std::string option(const toml::node& v, const toml::key& key) const {
    if (auto s = v.as_string()) return s->get();
    if (auto i = v.as_integer()) return std::to_string(i->get());
    if (auto b = v.as_boolean()) return b->get() ? "true" : "false";
    if (auto f = v.as_floating_point()) {
      std::ostringstream os;
      os << f->get();
      return os.str();
    }
    wrong_type(v, "options." + std::string(key.str()), "a string, integer, float or boolean");
  }

  std::string source_;
  fs::path base_;
};

}  // namespace

Config Config::parse(const std::string& text, const std::string& source) { return Parser(source).run(text); }

Config Config::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(HAL_STATUS_NOT_FOUND, path + ": cannot read config file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

}  // namespace hal
