#include "graph/compile_cache.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/sha256.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {
namespace detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kMagic = "HALCC 1\n";

std::atomic<uint64_t> g_compiles{0}, g_deserializations{0}, g_memory_hits{0}, g_disk_hits{0}, g_rebuilds{0};

// Typed fields, each length-prefixed, so no two field sequences give the
// same bytes; the key is their SHA-256.
class KeyBytes {
 public:
  KeyBytes& str(const std::string& s) {
    pod(s.size());
    bytes_ += s;
    return *this;
  }
  template <class T>
  KeyBytes& pod(const T& v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(v));
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

std::string sha256_hex(const std::string& data) { return detail::sha256_hex(data.data(), data.size()); }

// Who the entry was made for: checked on read (a plugin upgrade is stale).
json device_records(const std::vector<std::shared_ptr<Device>>& devices) {
  json out = json::array();
  for (const auto& d : devices)
    out.push_back({{"device", d->id()}, {"plugin", d->plugin_name()}, {"version", d->plugin().version}});
  return out;
}


}  // namespace

std::string entry_path(const std::string& folder, const std::string& key) { return folder + "/" + key + ".halcc"; }

void warn_rebuild(const std::string& path, const std::string& why) {
  std::cerr << "hal: compile cache: " << path << ": " << why << "; rebuilding it\n";
  ++g_rebuilds;
}

SharedExecutable::~SharedExecutable() {
  hal_status_t* st = device_->plugin().graph.executable_destroy(handle_);
  if (st != nullptr) st->destroy(st);  // a destructor has nowhere to report to
}

std::string cache_key(const Graph& g, const std::vector<std::shared_ptr<Device>>& devices, bool fallback,
                      const std::map<std::string, std::string>& options, bool graph_compilers,
                      const std::vector<std::pair<size_t, size_t>>& aliases) {
  KeyBytes h;
  h.str("hal compile cache 2")  // 2: placements split groups that depend on each other both ways
      .pod(uint32_t{HAL_ABI_VERSION_MAJOR})
      .pod(uint32_t{HAL_ABI_VERSION_MINOR});
  h.str(g.hash());  // what the graph computes (names do not count)
  h.pod(fallback).pod(devices.size());
  for (const auto& d : devices) {
    const LoadedPlugin& p = d->plugin();
    h.str(d->id()).str(p.name).str(p.version).str(d->properties().name).pod(p.negotiated_minor);
    h.pod(p.disabled_ops.size());
    for (const std::string& op : p.disabled_ops) h.str(op);
  }
  h.pod(options.size());
  for (const auto& [k, v] : options) h.str(k).str(v);
  if (!graph_compilers) h.str("no graph compilers");  // the default's key bytes stay as they were
  if (!aliases.empty()) {  // (likewise)
    h.str("output aliases").pod(aliases.size());
    for (const auto& [o, i] : aliases) h.pod(uint64_t{o}).pod(uint64_t{i});
  }
  return sha256_hex(h.bytes());
}

namespace {
std::mutex g_memory_mutex;
// Never destroyed: entries hold executables whose plugins may be unloaded
// by then at process exit.
auto* g_memory = new std::map<std::string, std::shared_ptr<const CompiledPlan>>;
}  // namespace

std::shared_ptr<const CompiledPlan> memory_cache_find(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  auto it = g_memory->find(key);
  return it == g_memory->end() ? nullptr : it->second;
}

void memory_cache_store(const std::string& key, std::shared_ptr<const CompiledPlan> plan) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  (*g_memory)[key] = std::move(plan);
}

std::string cache_folder(const std::string& dir) {
  if (!dir.empty()) return dir;
  if (const char* env = std::getenv("HAL_COMPILE_CACHE_DIR"); env != nullptr && *env != '\0') return env;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/hal/compile";
  return "";
}

std::optional<DiskEntry> read_entry(const std::string& folder, const std::string& key,
                                    const std::vector<std::shared_ptr<Device>>& devices, const Graph& g,
                                    bool fallback) {
  const size_t node_count = g.nodes().size();
  const std::string path = entry_path(folder, key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string file = buf.str();
  const size_t header = std::strlen(kMagic) + 65;  // magic, 64 hex digits, '\n'
  if (file.size() < header || file.compare(0, std::strlen(kMagic), kMagic) != 0 || file[header - 1] != '\n') {
    warn_rebuild(path, "not a compile cache file of this version (bad header, or truncated to " +
                   std::to_string(file.size()) + " bytes)");
    return std::nullopt;
  }
  const std::string payload = file.substr(header);
  if (sha256_hex(payload) != file.substr(std::strlen(kMagic), 64)) {
    warn_rebuild(path, "checksum mismatch (corrupt or truncated: " + std::to_string(payload.size()) + " payload bytes)");
    return std::nullopt;
  }
  try {
    json j = json::from_cbor(payload);
    if (j.at("key").get<std::string>() != key) {
      warn_rebuild(path, "written for another key");
      return std::nullopt;
    }
    const std::string abi = std::to_string(HAL_ABI_VERSION_MAJOR) + "." + std::to_string(HAL_ABI_VERSION_MINOR);
    if (j.at("abi").get<std::string>() != abi) {
      warn_rebuild(path, "written by HAL ABI " + j.at("abi").get<std::string>() + ", this is " + abi);
      return std::nullopt;
    }
    if (j.at("devices") != device_records(devices)) {
      warn_rebuild(path, "stale: written for " + j.at("devices").dump() + ", now " + device_records(devices).dump());
      return std::nullopt;
    }
    DiskEntry e;
    const json& p = j.at("placement");
    e.placement.device = p.at("device").get<std::vector<uint32_t>>();
    e.placement.group = p.at("group").get<std::vector<uint32_t>>();
    e.placement.declined = p.at("declined").get<std::vector<std::string>>();
    e.placement.fallback = p.at("fallback").get<std::vector<bool>>();
    bool sizes_ok = e.placement.device.size() == node_count && e.placement.group.size() == node_count &&
                    e.placement.declined.size() == node_count && e.placement.fallback.size() == node_count;
    for (uint32_t d : e.placement.device) sizes_ok = sizes_ok && d < devices.size();
    if (!sizes_ok) {
      warn_rebuild(path, "its placement does not fit the graph (" + std::to_string(node_count) + " nodes, " +
                     std::to_string(devices.size()) + " devices)");
      return std::nullopt;
    }
    if (std::string why = placement_error(g, e.placement, devices.size(), fallback); !why.empty()) {
      warn_rebuild(path, "its placement cannot run the graph: " + why);
      return std::nullopt;
    }
    for (const json& x : j.at("executables"))
      e.executables[x.at("group").get<uint32_t>()] = x.at("bytes").get_binary();
    return e;
  } catch (const json::exception& ex) {
    warn_rebuild(path, std::string("malformed payload: ") + ex.what());
    return std::nullopt;
  }
}

void write_entry(const std::string& folder, const std::string& key,
                 const std::vector<std::shared_ptr<Device>>& devices, const DiskEntry& entry) {
  json j;
  j["key"] = key;
  j["abi"] = std::to_string(HAL_ABI_VERSION_MAJOR) + "." + std::to_string(HAL_ABI_VERSION_MINOR);
  j["devices"] = device_records(devices);
  j["placement"] = {{"device", entry.placement.device},
                    {"group", entry.placement.group},
                    {"declined", entry.placement.declined},
                    {"fallback", entry.placement.fallback}};
  j["executables"] = json::array();
  for (const auto& [group, bytes] : entry.executables)
    j["executables"].push_back({{"group", group}, {"bytes", json::binary(bytes)}});
  std::vector<uint8_t> cbor = json::to_cbor(j);
  const std::string payload(cbor.begin(), cbor.end());
  const std::string path = entry_path(folder, key);
  std::error_code ec;
  fs::create_directories(folder, ec);
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) {
    std::cerr << "hal: compile cache: cannot write " << path << ": " << std::strerror(errno) << "\n";
    return;
  }
  const std::string file = kMagic + sha256_hex(payload) + "\n" + payload;
  size_t done = 0;
  while (done < file.size()) {
    ssize_t w = ::write(fd, file.data() + done, file.size() - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  const bool ok = done == file.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::cerr << "hal: compile cache: cannot write " << path << ": " << std::strerror(errno) << "\n";
    ::unlink(tmp.c_str());
  }
}

void count_compile() { ++g_compiles; }
void count_deserialization() { ++g_deserializations; }
void count_memory_hit() { ++g_memory_hits; }
void count_disk_hit() { ++g_disk_hits; }

}  // namespace detail

CompileCacheCounters compile_cache_counters() {
  CompileCacheCounters c;
  c.graph_compiles = detail::g_compiles;
  c.deserializations = detail::g_deserializations;
  c.memory_hits = detail::g_memory_hits;
  c.disk_hits = detail::g_disk_hits;
  c.rebuilt_entries = detail::g_rebuilds;
  return c;
}

void clear_compile_cache() {
  std::lock_guard<std::mutex> lock(detail::g_memory_mutex);
  detail::g_memory->clear();
}

}  // namespace hal
