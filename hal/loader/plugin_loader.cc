#include "loader/plugin_loader.hpp"

#include "hal/common/extension.hpp"
#include "hal/op_catalog.h"
#include "runtime/sha256.hpp"

#include <dlfcn.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace hal::detail {
namespace {

namespace fs = std::filesystem;

// Host service: plugin log lines go to stderr at or above $HAL_LOG_LEVEL.
void host_log(void* context, uint32_t level, const char* message) {
  if (message == nullptr) return;
  {
    auto* plugin = static_cast<LoadedPlugin*>(context);
    if (plugin->in_create && level >= HAL_LOG_WARNING) plugin->startup_warnings.emplace_back(message);
  }
  const auto* plugin = static_cast<const LoadedPlugin*>(context);
  print_host_log(level, plugin->name.empty() ? plugin->path : plugin->name, message);
}

bool world_writable(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0;
}

// Refuses a world-writable DIR (the plugin's directory) or file at PATH:
// the safe fix first, then where allow_world_writable would go, if anywhere.
std::string world_writable_refusal(const LoadRequest& r, const std::string& path, bool dir) {
  std::string m = (dir ? "directory " : "file ") + path + " is world-writable; refusing to load: chmod o-w " + path +
                  (dir ? " (or move the plugin to a directory only its owner can write)" : "");
  const std::string& config = r.config_path;
  if (config.empty())
    return m + ". No hal.toml is in use (--plugin and HAL_PLUGIN_PATH loads have none), so allow_world_writable = "
               "true cannot be set for it: that key goes in a hal.toml given by --config or HAL_CONFIG, at its top "
               "level or in the [[plugin]] entry that lists the plugin";
  // A [[plugin]] entry's origin is "<config>:line:column".
  if (r.spec.origin.rfind(config + ":", 0) == 0)
    return m + ", or set allow_world_writable = true in this [[plugin]] entry of " + config + " (or at its top level)";
  return m + ", or set allow_world_writable = true at the top level of " + config + " (the hal.toml in use)";
}

std::string rebuild_advice(uint32_t host_major) {
  return "rebuild the plugin against the installed HAL (headers of ABI major " + std::to_string(host_major) + ")";
}

// Copies SIZE bytes of the plugin's table (never more than it declared, never
// more than we know) into a zeroed struct of ours.
template <class T>
void normalise(T& out, const T* in) {
  std::memset(&out, 0, sizeof(T));
  if (in == nullptr) return;
  std::memcpy(&out, in, std::min(in->struct_size, sizeof(T)));
  out.struct_size = sizeof(T);
}

}  // namespace

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(HAL_STATUS_NOT_FOUND, path + ": cannot read file for sha256");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> chunk(1 << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    EVP_DigestUpdate(ctx.get(), chunk.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  return hex(digest, len);
}

void print_host_log(uint32_t level, const std::string& who, const char* message) {
  static const uint32_t threshold = [] {
    const char* env = std::getenv("HAL_LOG_LEVEL");
    std::string v = env ? env : "warning";
    if (v == "debug") return 0u;
    if (v == "info") return 1u;
    if (v == "error") return 3u;
    return 2u;
  }();
  if (message == nullptr || level < threshold) return;
  static const char* const kLevels[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "[hal %s] %s: %s\n", kLevels[std::min(level, 3u)], who.c_str(), message);
}

std::string take_message(hal_status_t* status) {
  std::string m = status->message ? status->message : "(no message)";
  m = std::string(status_code_name(status->code)) + ": " + m;
  status->destroy(status);
  return m;
}

boost::dll::load_mode::type module_load_mode() {
  return static_cast<boost::dll::load_mode::type>(boost::dll::load_mode::rtld_now |
                                                  boost::dll::load_mode::rtld_local | RTLD_NODELETE);
}

LoadOutcome load_plugin(const LoadRequest& request) {
  const PluginSpec& spec = request.spec;
  auto plugin = std::make_shared<LoadedPlugin>();
  plugin->path = spec.path;
  plugin->priority = spec.priority;
  plugin->disabled_ops = spec.disabled_ops;
  auto skip = [&](SkipReason reason, const std::string& message) {
    LoadOutcome out;
    out.skip = SkipRecord{spec.path, plugin->name.empty() ? spec.name : plugin->name, reason,
                          (spec.origin.empty() ? "" : spec.origin + ": ") + message, request.requested};
    return out;
  };

  const fs::path path(spec.path);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return skip(SkipReason::kFileNotFound, "no such file: " + spec.path);

  if (!spec.allow_world_writable && !request.allow_world_writable) {
    const fs::path dir = path.parent_path();
    if (world_writable(dir))
      return skip(SkipReason::kUnsafePermissions, world_writable_refusal(request, dir.string(), true));
    if (world_writable(path))
      return skip(SkipReason::kUnsafePermissions, world_writable_refusal(request, spec.path, false));
  }

  if (spec.sha256) {
    std::string actual;
    try {
      actual = sha256_file(spec.path);
    } catch (const Error& e) {
      return skip(SkipReason::kFileNotFound, e.what());
    }
    if (actual != *spec.sha256)
      return skip(SkipReason::kHashMismatch, "sha256 is " + actual + " but the configuration pins " + *spec.sha256);
  }

  try {
    plugin->library.load(boost::dll::fs::path(spec.path), module_load_mode());
  } catch (const std::exception& e) {
    return skip(SkipReason::kLoadFailed, std::string("cannot load: ") + e.what());
  }
  if (!plugin->library.has(HAL_PLUGIN_ENTRY_SYMBOL))
    return skip(SkipReason::kMissingEntryPoint,
                std::string("no '") + HAL_PLUGIN_ENTRY_SYMBOL + "' symbol; not a HAL plugin");
  auto entry = plugin->library.get<hal_status_t*(const hal_host_api_t*, const hal_plugin_api_t**)>(
      HAL_PLUGIN_ENTRY_SYMBOL);

  plugin->host.struct_size = sizeof(hal_host_api_t);
  plugin->host.abi_version_major = request.host_abi_major;
  plugin->host.abi_version_minor = request.host_abi_minor;
  plugin->host.host_context = plugin.get();
  plugin->host.log = &host_log;

  const hal_plugin_api_t* api = nullptr;
  hal_status_t* status = nullptr;
  try {
    status = entry(&plugin->host, &api);
  } catch (const std::exception& e) {
    return skip(SkipReason::kEntryThrew, std::string("entry point threw a C++ exception (ABI violation): ") + e.what());
  } catch (...) {
    return skip(SkipReason::kEntryThrew, "entry point threw an exception (ABI violation)");
  }
  if (status != nullptr) {
    // The plugin refused this host; its message says why, ours what to do.
    if (status->code == HAL_STATUS_ABI_MISMATCH)
      return skip(SkipReason::kAbiMajorMismatch,
                  "entry point failed: " + take_message(status) + " (this libhal is ABI " +
                      std::to_string(request.host_abi_major) + "." + std::to_string(request.host_abi_minor) +
                      "): " + rebuild_advice(request.host_abi_major));
    return skip(SkipReason::kEntryFailed, "entry point failed: " + take_message(status));
  }
  if (api == nullptr) return skip(SkipReason::kNullTable, "entry point succeeded but returned a NULL table");

  constexpr size_t kHeader = HAL_STRUCT_SIZE_TO(hal_plugin_api_t, abi_version_minor);
  if (api->struct_size < kHeader)
    return skip(SkipReason::kStructTooSmall, "hal_plugin_api_t.struct_size " + std::to_string(api->struct_size) +
                                                 " is smaller than its frozen header (" + std::to_string(kHeader) + ")");
  plugin->abi_major = api->abi_version_major;
  plugin->abi_minor = api->abi_version_minor;
  if (api->abi_version_major != request.host_abi_major)
    return skip(SkipReason::kAbiMajorMismatch,
                "plugin built for HAL ABI major " + std::to_string(api->abi_version_major) + " (" +
                    std::to_string(api->abi_version_major) + "." + std::to_string(api->abi_version_minor) +
                    "), this libhal is major " + std::to_string(request.host_abi_major) + " (" +
                    std::to_string(request.host_abi_major) + "." + std::to_string(request.host_abi_minor) +
                    "); MAJOR must match: " + rebuild_advice(request.host_abi_major));
  if (api->struct_size < HAL_PLUGIN_API_MIN_SIZE)
    return skip(SkipReason::kStructTooSmall, "hal_plugin_api_t.struct_size " + std::to_string(api->struct_size) +
                                                 " is below the minimum " + std::to_string(HAL_PLUGIN_API_MIN_SIZE));
  normalise(plugin->api, api);
  plugin->negotiated_minor = std::min(request.host_abi_minor, api->abi_version_minor);

  const hal_plugin_api_t& a = plugin->api;
  if (a.name == nullptr || a.vendor == nullptr || a.plugin_version == nullptr || a.create == nullptr ||
      a.destroy == nullptr || a.device == nullptr || a.memory == nullptr)
    return skip(SkipReason::kInvalidPlugin,
                "hal_plugin_api_t lacks a required field (name, vendor, plugin_version, create, destroy, device, "
                "memory)");
  plugin->name = a.name;
  plugin->vendor = a.vendor;
  plugin->version = a.plugin_version;
  if (plugin->name.empty() ||
      plugin->name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
    return skip(SkipReason::kInvalidPlugin, "plugin name '" + plugin->name + "' must match [a-z0-9_]+");
  if (!spec.name.empty() && spec.name != plugin->name)
    return skip(SkipReason::kInvalidPlugin,
                "configured as '" + spec.name + "' but the plugin calls itself '" + plugin->name + "'");
  // The chain arrived in ABI 1.3; normalise() already zeroed it when the
  // plugin's struct_size ends before it.
  if (plugin->negotiated_minor < 3) plugin->api.next = nullptr;
  if (auto e = common::extension_chain_error(plugin->api.next, "hal_plugin_api_t.next"))
    return skip(SkipReason::kInvalidPlugin, *e);

  if (a.device->struct_size < HAL_DEVICE_API_MIN_SIZE)
    return skip(SkipReason::kStructTooSmall, "hal_device_api_t.struct_size " + std::to_string(a.device->struct_size) +
                                                 " is below the minimum " + std::to_string(HAL_DEVICE_API_MIN_SIZE));
  if (a.memory->struct_size < HAL_MEMORY_API_MIN_SIZE)
    return skip(SkipReason::kStructTooSmall, "hal_memory_api_t.struct_size " + std::to_string(a.memory->struct_size) +
                                                 " is below the minimum " + std::to_string(HAL_MEMORY_API_MIN_SIZE));
  normalise(plugin->device, a.device);
  normalise(plugin->memory, a.memory);
  normalise(plugin->stream, a.stream);
  // The op table's entries arrived in ABI 1.1; a 1.0 plugin's op table
  // (struct_size only) normalises to all-NULL entries anyway.
  if (plugin->negotiated_minor >= 1) normalise(plugin->op, a.op);
  // op_get_info arrived in ABI 1.4; below it every op takes mixed inputs.
  if (plugin->negotiated_minor < 4) plugin->op.op_get_info = nullptr;
  // op_get_layouts arrived in ABI 1.8; below it no tensor has a preference.
  if (plugin->negotiated_minor < 8) plugin->op.op_get_layouts = nullptr;
  // Ops keep their meaning only within a catalog MAJOR: a plugin built for
  // another one loads, without its operators.
  if (plugin->op.op_launch != nullptr && plugin->op.catalog_version_major != HAL_OP_CATALOG_VERSION_MAJOR) {
    plugin->op_note = "operators disabled: the plugin implements op catalog " +
                      std::to_string(plugin->op.catalog_version_major) + "." +
                      std::to_string(plugin->op.catalog_version_minor) + " but the host's is " +
                      std::to_string(HAL_OP_CATALOG_VERSION_MAJOR) + "." + std::to_string(HAL_OP_CATALOG_VERSION_MINOR) +
                      " (MAJOR must match)";
    plugin->op = hal_op_api_t{};
  }
  // The graph table's entries arrived in ABI 1.2: an older plugin's table
  // (struct_size only) means "graph not implemented".
  if (a.graph != nullptr && a.graph->struct_size < HAL_GRAPH_API_MIN_SIZE)
    return skip(SkipReason::kStructTooSmall, "hal_graph_api_t.struct_size " + std::to_string(a.graph->struct_size) +
                                                 " is below the minimum " + std::to_string(HAL_GRAPH_API_MIN_SIZE));
  if (plugin->negotiated_minor >= 2) normalise(plugin->graph, a.graph);
  // Serialisation arrived in ABI 1.5: below it (or with half of it),
  // executables are compiled each time.
  if (plugin->negotiated_minor < 5 || plugin->graph.executable_serialize == nullptr ||
      plugin->graph.executable_deserialize == nullptr) {
    plugin->graph.executable_serialize = nullptr;
    plugin->graph.executable_deserialize = nullptr;
  }
  const hal_graph_api_t& g = plugin->graph;
  const bool graph_usable = g.graph_partition != nullptr && g.graph_compile != nullptr &&
                            g.executable_destroy != nullptr && g.executable_execute != nullptr;
  if (a.graph != nullptr && !graph_usable) {
    plugin->graph_note = plugin->negotiated_minor < 2
                             ? "graph compile not used: the negotiated ABI 1." + std::to_string(plugin->negotiated_minor) +
                                   " predates the graph entries (1.2)"
                             : "graph compile not used: the graph table lacks graph_partition, graph_compile, "
                               "executable_destroy or executable_execute";
    plugin->graph = hal_graph_api_t{};
  }
  // Collective entries arrived in ABI 1.6, all at once: an older or partial
  // table means "no collectives".
  if (a.collective != nullptr) {
    if (plugin->negotiated_minor < 6) {
      plugin->collective_note = "collectives not used: the negotiated ABI 1." +
                                std::to_string(plugin->negotiated_minor) + " predates them (1.6)";
    } else if (a.collective->struct_size < HAL_COLLECTIVE_API_1_6_SIZE) {
      plugin->collective_note = "collectives not used: hal_collective_api_t.struct_size " +
                                std::to_string(a.collective->struct_size) + " is below ABI 1.6's " +
                                std::to_string(HAL_COLLECTIVE_API_1_6_SIZE);
    } else {
      normalise(plugin->collective, a.collective);
      const hal_collective_api_t& c = plugin->collective;
      if (!c.comm_get_unique_id || !c.comm_init || !c.comm_destroy || !c.comm_abort || !c.comm_get_info ||
          !c.comm_get_async_error || !c.collective || !c.barrier || !c.group_start || !c.group_end) {
        plugin->collective_note = "collectives not used: the table lacks a required entry (all but comm_split are)";
        plugin->collective = hal_collective_api_t{};
      }
    }
  }
  if (plugin->device.device_count == nullptr || plugin->device.device_get == nullptr ||
      plugin->device.device_get_properties == nullptr || plugin->memory.buffer_allocate == nullptr ||
      plugin->memory.buffer_free == nullptr)
    return skip(SkipReason::kInvalidPlugin, "device or memory table lacks a required entry");
  plugin->interfaces = HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY;
  if (a.stream != nullptr) plugin->interfaces |= HAL_CAPABILITY_STREAM;
  if (plugin->collective.collective != nullptr) plugin->interfaces |= HAL_CAPABILITY_COLLECTIVE;
  if (plugin->op.op_resolve != nullptr && plugin->op.op_launch != nullptr)
    plugin->interfaces |= HAL_CAPABILITY_OPERATOR;
  if (graph_usable) plugin->interfaces |= HAL_CAPABILITY_GRAPH;

  if (request.loaded_path_of) {
    if (auto other = request.loaded_path_of(plugin->name))
      return skip(SkipReason::kDuplicateName,
                  "plugin name '" + plugin->name + "' is already taken by " + *other + " (higher priority or earlier)");
  }

  // hal.toml's name = "..." looks for libhal_plugin_<name>.so, so a file
  // named otherwise loads only by path or scan (hal_add_plugin's name and
  // HAL_SDK_PLUGIN's differ).
  const std::string expected_file = "libhal_plugin_" + plugin->name + ".so";
  if (path.filename() != expected_file)
    plugin->startup_warnings.push_back(
        "file name " + path.filename().string() + " does not match the declared plugin name '" + plugin->name +
        "': it should be " + expected_file + " (hal_add_plugin(" + plugin->name +
        ") must match HAL_SDK_PLUGIN's name), or hal.toml's name = \"" + plugin->name + "\" does not find it");

  std::vector<hal_option_t> options;
  for (const auto& [key, value] : spec.options)
    options.push_back(hal_option_t{sizeof(hal_option_t), key.c_str(), value.c_str()});
  hal_plugin_create_args_t args{};
  args.struct_size = sizeof(args);
  args.options = options.empty() ? nullptr : options.data();
  args.option_count = options.size();
  hal_plugin_t* instance = nullptr;
  plugin->in_create = true;
  try {
    status = a.create(&args, &instance);
  } catch (...) {
    plugin->in_create = false;
    return skip(SkipReason::kInitFailed, "create() threw an exception (ABI violation)");
  }
  plugin->in_create = false;
  if (status != nullptr) return skip(SkipReason::kInitFailed, "create() failed: " + take_message(status));
  if (instance == nullptr) return skip(SkipReason::kInitFailed, "create() returned no instance");
  plugin->instance = instance;

  LoadOutcome out;
  out.plugin = std::move(plugin);
  return out;
}

}  // namespace hal::detail
