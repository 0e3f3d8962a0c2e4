#include "hal/runtime/runtime.hpp"

#include <algorithm>
#include <cstdio>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "layers/layer_stack.hpp"
#include "loader/plugin_loader.hpp"

namespace hal {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "libhal_plugin_";
constexpr const char* kSuffix = ".so";

std::vector<std::string> scan_dir(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind(kPrefix, 0) == 0 && file.size() > std::strlen(kPrefix) + 3 &&
        file.compare(file.size() - 3, 3, kSuffix) == 0)
      found.push_back(entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::string> split_path_list(const char* value) {
  std::vector<std::string> out;
  if (value == nullptr) return out;
  std::stringstream ss(value);
  std::string item;
  while (std::getline(ss, item, ':'))
    if (!item.empty()) out.push_back(fs::absolute(item).lexically_normal().string());
  return out;
}

std::string canonical_or_self(const std::string& path) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(path, ec);
  return ec ? path : c.string();
}

}  // namespace

const char* skip_reason_name(SkipReason reason) noexcept {
  switch (reason) {
    case SkipReason::kFileNotFound: return "file_not_found";
    case SkipReason::kUnsafePermissions: return "unsafe_permissions";
    case SkipReason::kHashMismatch: return "hash_mismatch";
    case SkipReason::kLoadFailed: return "load_failed";
    case SkipReason::kMissingEntryPoint: return "missing_entry_point";
    case SkipReason::kEntryFailed: return "entry_failed";
    case SkipReason::kEntryThrew: return "entry_threw";
    case SkipReason::kNullTable: return "null_table";
    case SkipReason::kStructTooSmall: return "struct_too_small";
    case SkipReason::kAbiMajorMismatch: return "abi_major_mismatch";
    case SkipReason::kInvalidPlugin: return "invalid_plugin";
    case SkipReason::kDuplicateName: return "duplicate_name";
    case SkipReason::kInitFailed: return "init_failed";
    case SkipReason::kDisabled: return "disabled";
  }
  return "unknown";
}

// ---- Plugin ----------------------------------------------------------------

Plugin::Plugin(std::shared_ptr<detail::LoadedPlugin> loaded) : loaded_(std::move(loaded)) {}
Plugin::~Plugin() = default;
const std::string& Plugin::name() const { return loaded_->name; }
const std::string& Plugin::path() const { return loaded_->path; }
const std::string& Plugin::vendor() const { return loaded_->vendor; }
const std::string& Plugin::version() const { return loaded_->version; }
uint32_t Plugin::abi_major() const { return loaded_->abi_major; }
uint32_t Plugin::abi_minor() const { return loaded_->abi_minor; }
uint32_t Plugin::negotiated_minor() const { return loaded_->negotiated_minor; }
int64_t Plugin::priority() const { return loaded_->priority; }
uint32_t Plugin::interfaces() const { return loaded_->interfaces; }
uint32_t Plugin::op_count() const {
  uint32_t n = 0;
  if (loaded_->op.op_count != nullptr) throw_if_error(loaded_->op.op_count(loaded_->instance, &n));
  return n;
}
std::string Plugin::op_catalog_version() const {
  if (loaded_->op.op_launch == nullptr) return "";
  return std::to_string(loaded_->op.catalog_version_major) + "." + std::to_string(loaded_->op.catalog_version_minor);
}
const std::string& Plugin::op_note() const { return loaded_->op_note; }
const std::vector<std::string>& Plugin::startup_warnings() const { return loaded_->startup_warnings; }
const std::string& Plugin::graph_note() const { return loaded_->graph_note; }
const std::string& Plugin::collective_note() const { return loaded_->collective_note; }
bool Plugin::serializes_executables() const {
  return has_graph() && loaded_->graph.executable_serialize != nullptr && loaded_->graph.executable_deserialize != nullptr;
}
const std::vector<std::string>& Plugin::disabled_ops() const { return loaded_->disabled_ops; }
const hal_graph_api_t& Plugin::graph_api() const { return loaded_->graph; }
const hal_collective_api_t& Plugin::collective_api() const { return loaded_->collective; }
const hal_plugin_api_t& Plugin::api() const { return loaded_->api; }
const hal_device_api_t& Plugin::device_api() const { return loaded_->device; }
const hal_memory_api_t& Plugin::memory_api() const { return loaded_->memory; }
const hal_stream_api_t& Plugin::stream_api() const { return loaded_->stream; }
const hal_op_api_t& Plugin::op_api() const { return loaded_->op; }
hal_plugin_t* Plugin::handle() const { return loaded_->instance; }

// ---- Runtime ---------------------------------------------------------------

std::string Runtime::install_plugin_dir() {
  boost::system::error_code ec;
  auto here = boost::dll::this_line_location(ec);  // libhal.so itself
  if (ec) return {};
  return (fs::path(here.parent_path().string()) / "hal" / "plugins").string();
}

std::shared_ptr<Runtime> Runtime::create(const RuntimeOptions& options) {
  auto rt = std::make_shared<Runtime>();
  const char* env_config = options.use_environment ? std::getenv("HAL_CONFIG") : nullptr;
  if (options.config_path)
    rt->config_ = Config::load(*options.config_path);
  else if (env_config != nullptr && *env_config != '\0')
    rt->config_ = Config::load(env_config);

  struct Candidate {
    PluginSpec spec;
    bool requested;
  };
  std::vector<Candidate> candidates;

  if (!options.plugin_paths.empty()) {
    for (const std::string& p : options.plugin_paths) {
      PluginSpec spec;
      spec.path = fs::absolute(p).lexically_normal().string();
      spec.origin = "--plugin";
      candidates.push_back({spec, true});
    }
  } else {
    std::vector<std::string> env_entries =
        options.use_environment ? split_path_list(std::getenv("HAL_PLUGIN_PATH")) : std::vector<std::string>{};
    std::vector<std::string> dirs = rt->config_.search_paths;
    for (const std::string& e : env_entries) {
      std::error_code ec;
      if (fs::is_directory(e, ec)) {
        dirs.push_back(e);
      } else {
        PluginSpec spec;
        spec.path = e;
        spec.origin = "HAL_PLUGIN_PATH";
        candidates.push_back({spec, true});
      }
    }
    if (options.use_install_dir) {
      std::string install = install_plugin_dir();
      if (!install.empty()) dirs.push_back(install);
    }
    rt->search_paths_ = dirs;

    std::vector<Candidate> listed;
    for (PluginSpec spec : rt->config_.plugins) {
      if (spec.path.empty()) {
        for (const std::string& d : dirs) {
          fs::path f = fs::path(d) / (kPrefix + spec.name + kSuffix);
          std::error_code ec;
          if (fs::is_regular_file(f, ec)) {
            spec.path = f.string();
            break;
          }
        }
      }
      listed.push_back({spec, true});
    }
    candidates.insert(candidates.begin(), listed.begin(), listed.end());
    if (rt->config_.discover)
      for (const std::string& d : dirs)
        for (const std::string& f : scan_dir(d)) {
          PluginSpec spec;
          spec.path = f;
          candidates.push_back({spec, false});
        }
  }

  // One load per file: the first mention (explicit before scanned) wins.
  std::set<std::string> seen;
  std::vector<Candidate> unique;
  for (Candidate& c : candidates) {
    if (c.spec.path.empty()) {
      std::string where = c.spec.origin.empty() ? "" : c.spec.origin + ": ";
      std::string dirs;
      for (const std::string& d : rt->search_paths_) dirs += (dirs.empty() ? "" : ", ") + d;
      rt->skipped_.push_back({"", c.spec.name, SkipReason::kFileNotFound,
                              where + "plugin '" + c.spec.name + "': " + kPrefix + c.spec.name + kSuffix +
                                  " not found in search paths [" + dirs + "]",
                              c.requested});
      continue;
    }
    if (!seen.insert(canonical_or_self(c.spec.path)).second) continue;
    if (!c.spec.enabled) {
      rt->skipped_.push_back({c.spec.path, c.spec.name, SkipReason::kDisabled,
                              c.spec.origin + ": enabled = false", false});
      continue;
    }
    unique.push_back(std::move(c));
  }
  std::stable_sort(unique.begin(), unique.end(),
                   [](const Candidate& a, const Candidate& b) { return a.spec.priority > b.spec.priority; });

  // Layers: started before any plugin, put in front of each as it loads.
  {
    std::vector<std::string> specs = rt->config_.layers;
    std::string where = rt->config_.layers_origin.empty() ? "hal.toml" : rt->config_.layers_origin;
    const char* env =
        options.use_environment || options.use_layer_environment ? std::getenv("HAL_LAYERS") : nullptr;
    if (env != nullptr && *env != '\0') {  // set and empty: the config's list
      specs.clear();
      std::stringstream list(env);
      for (std::string item; std::getline(list, item, ',');)
        if (!item.empty()) specs.push_back(item);
      where = "HAL_LAYERS";
    }
    detail::LayerOptions layer_options;
    for (const auto& [name, opts] : rt->config_.layer_options) layer_options[name] = opts;
    std::vector<std::string> layer_dirs = rt->search_paths_;
    const std::string install = options.use_install_dir ? install_plugin_dir() : "";
    if (!install.empty() && std::find(layer_dirs.begin(), layer_dirs.end(), install) == layer_dirs.end())
      layer_dirs.push_back(install);
    rt->layers_ = detail::load_layers(specs, layer_options, layer_dirs, where);
  }

  std::map<std::string, std::string> loaded_names;
  for (Candidate& c : unique) {
    detail::LoadRequest req;
    req.spec = c.spec;
    req.requested = c.requested;
    req.allow_world_writable = rt->config_.allow_world_writable;
    req.config_path = rt->config_.source;
    req.host_abi_major = options.host_abi_major;
    req.host_abi_minor = options.host_abi_minor;
    req.loaded_path_of = [&](const std::string& name) -> std::optional<std::string> {
      auto it = loaded_names.find(name);
      if (it == loaded_names.end()) return std::nullopt;
      return it->second;
    };
    detail::LoadOutcome out = detail::load_plugin(req);
    if (out.skip) {
      rt->skipped_.push_back(*out.skip);
      continue;
    }
    auto loaded = out.plugin;
    try {
      detail::install_layers(*loaded, rt->layers_);
    } catch (const Error& e) {
      rt->skipped_.push_back({loaded->path, loaded->name, SkipReason::kInitFailed, e.what(), c.requested});
      continue;
    }
    auto plugin = std::make_shared<Plugin>(loaded);
    try {
      uint32_t count = 0;
      throw_if_error(loaded->device.device_count(loaded->instance, &count));
      for (uint32_t i = 0; i < count; ++i) {
        hal_device_t* handle = nullptr;
        throw_if_error(loaded->device.device_get(loaded->instance, i, &handle));
        hal_device_properties_t props{};
        props.struct_size = sizeof(props);
        // A device lost already is listed (hal-info shows it lost) but takes no work.
        std::string lost;
        try {
          throw_if_error(loaded->device.device_get_properties(handle, &props));
        } catch (const Error& e) {
          if (e.code() != HAL_STATUS_DEVICE_LOST) throw;
          lost = e.what();
          props = hal_device_properties_t{};
          props.struct_size = sizeof(props);
          props.min_buffer_alignment = 64;
          std::snprintf(props.name, sizeof(props.name), "%s", "(lost)");
        }
        props.name[sizeof(props.name) - 1] = '\0';
        props.vendor[sizeof(props.vendor) - 1] = '\0';
        props.driver_version[sizeof(props.driver_version) - 1] = '\0';
        plugin->devices_.push_back(
            std::make_shared<Device>(loaded, i, handle, props, rt->config_.caching_allocator));
        if (!lost.empty()) plugin->devices_.back()->mark_lost(lost);
        plugin->devices_.back()->set_wait_timeout_ms(rt->config_.wait_timeout_ms);
      }
    } catch (const Error& e) {
      rt->skipped_.push_back({loaded->path, loaded->name, SkipReason::kInitFailed,
                              std::string("device enumeration failed: ") + e.what(), c.requested});
      continue;
    }
    loaded_names[loaded->name] = loaded->path;
    rt->plugins_.push_back(std::move(plugin));
  }
  // Each device learns where libhal casts what it cannot (OpRunner). A
  // fallback_device naming no device is reported when it is asked for.
  std::shared_ptr<Device> fallback;
  try {
    fallback = rt->fallback_device();
  } catch (const Error&) {
  }
  if (fallback)
    for (const auto& d : rt->devices())
      if (d != fallback) d->set_fallback_device(fallback);
  // Likewise the failover device; one naming no device is said once here
  // (the run goes on without failover) and by failover_device().
  std::shared_ptr<Device> failover;
  try {
    failover = rt->failover_device();
  } catch (const Error& e) {
    std::fprintf(stderr, "hal: %s: no failover: %s\n",
                 rt->config_.failover_origin.empty() ? "failover" : rt->config_.failover_origin.c_str(), e.what());
  }
  if (failover)
    for (const auto& d : rt->devices())
      if (d != failover) d->set_failover_device(failover);
  return rt;
}

std::shared_ptr<Device> Runtime::failover_device() const {
  if (config_.failover.empty()) return nullptr;
  return device(config_.failover);
}

std::vector<LayerInfo> Runtime::layers() const {
  std::vector<LayerInfo> out;
  for (const auto& l : layers_) out.push_back({l->name, l->path, l->description});
  return out;
}

std::vector<std::shared_ptr<Device>> Runtime::devices() const {
  std::vector<std::shared_ptr<Device>> all;
  for (const auto& p : plugins_) all.insert(all.end(), p->devices().begin(), p->devices().end());
  return all;
}

std::shared_ptr<Device> Runtime::device(const std::string& spec) const {
  std::string name = spec;
  uint32_t index = 0;
  auto colon = spec.find(':');
  if (colon != std::string::npos) {
    name = spec.substr(0, colon);
    const std::string idx = spec.substr(colon + 1);
    if (idx.empty() || idx.size() > 9 || idx.find_first_not_of("0123456789") != std::string::npos)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "device spec '" + spec + "': index must be a number");
    index = static_cast<uint32_t>(std::stoul(idx));
  }
  std::string known;
  for (const auto& p : plugins_) {
    for (const auto& d : p->devices()) {
      if (p->name() == name && d->index() == index) return d;
      known += (known.empty() ? "" : ", ") + d->id();
    }
  }
  throw Error(HAL_STATUS_NOT_FOUND, "no device '" + spec + "' (devices: " + (known.empty() ? "none" : known) + ")");
}

std::shared_ptr<Device> Runtime::default_device() const {
  if (!config_.default_device.empty()) return device(config_.default_device);
  auto all = devices();
  if (all.empty()) throw Error(HAL_STATUS_NOT_FOUND, "no HAL device is available (no plugin loaded any device)");
  return all.front();
}

std::shared_ptr<Device> Runtime::fallback_device() const {
  if (!config_.fallback_device.empty()) return device(config_.fallback_device);
  for (const auto& p : plugins_)
    if (p->name() == "cpu" && !p->devices().empty()) return p->devices().front();
  return nullptr;
}

}  // namespace hal
