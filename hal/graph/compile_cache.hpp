// Internal: the compile cache. In memory, a process-wide map from key to
// the compiled plan (placement + executables, shared by every CompiledGraph
// made from it); on disk, one file per key holding the placement and each
// executable the plugin serialised (hal_graph_api_t.executable_serialize,
// ABI 1.5). Keys: SHA-256 over the graph, each device's plugin name and
// version, device and disabled ops, and the compile options; the graph
// part is Graph::hash() (names do not count).
//
// File format: the line "HALCC 1\n", the SHA-256 (hex) of the payload and
// "\n", then the payload: CBOR (nlohmann-json) {key, abi, devices[],
// placement{device[], group[], declined[], fallback[]}, executables[{group,
// bytes}]}. A file whose magic, checksum, CBOR, key, ABI or plugin versions
// do not match, or whose placement cannot run the graph, is stale or
// corrupt: warned about on stderr (one line naming the file) and rebuilt. Writes go to a temporary file in the same folder,
// renamed over the entry (atomic on POSIX).
#ifndef HAL_GRAPH_COMPILE_CACHE_HPP_
#define HAL_GRAPH_COMPILE_CACHE_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/partition.hpp"
#include "hal/runtime/compiled_graph.hpp"

namespace hal::detail {

// One executable, destroyed (executable_destroy) when the last compiled
// graph or cache entry using it goes. Holds its device (and so its plugin).
class SharedExecutable {
 public:
  SharedExecutable(std::shared_ptr<Device> device, hal_executable_t* handle)
      : device_(std::move(device)), handle_(handle) {}
  SharedExecutable(const SharedExecutable&) = delete;
  SharedExecutable& operator=(const SharedExecutable&) = delete;
  ~SharedExecutable();
  hal_executable_t* handle() const { return handle_; }
  Device& device() const { return *device_; }

 private:
  std::shared_ptr<Device> device_;
  hal_executable_t* handle_;
};

// What compile made of a graph for a set of devices: immutable once built.
struct CompiledPlan {
  Placement placement;
  std::map<uint32_t, std::shared_ptr<SharedExecutable>> executables;  // by group id
  size_t compiled = 0, deserialized = 0;                 // how the executables were obtained
  // Per CompileOptions::output_aliases pair (in the key): the group that may
  // update it in place, or 0.
  std::vector<uint32_t> alias_groups;
};

// The key (SHA-256, hex) of compiling G for DEVICES (the last one the
// fallback when FALLBACK) with OPTIONS, subgraphs compiled or not
// (CompileOptions::graph_compilers).
// ALIASES: CompileOptions::output_aliases.
std::string cache_key(const Graph& g, const std::vector<std::shared_ptr<Device>>& devices, bool fallback,
                      const std::map<std::string, std::string>& options, bool graph_compilers = true,
                      const std::vector<std::pair<size_t, size_t>>& aliases = {});

// The memory cache. Thread-safe.
std::shared_ptr<const CompiledPlan> memory_cache_find(const std::string& key);
void memory_cache_store(const std::string& key, std::shared_ptr<const CompiledPlan> plan);

// The cache folder: DIR when non-empty, else $HAL_COMPILE_CACHE_DIR, else
// $HOME/.cache/hal/compile ("" when none of them is set).
std::string cache_folder(const std::string& dir);

// What a disk entry holds.
struct DiskEntry {
  Placement placement;
  std::map<uint32_t, std::vector<uint8_t>> executables;  // by group id; groups absent: not serialisable
};

// Reads the entry for KEY in FOLDER, checked against DEVICES (the last one
// the fallback when FALLBACK) and G (its placement must run G:
// placement_error); nullopt when there is none, or (after a warning on
// stderr naming the file and why) when it is corrupt, stale or hostile.
std::optional<DiskEntry> read_entry(const std::string& folder, const std::string& key,
                                    const std::vector<std::shared_ptr<Device>>& devices, const Graph& g,
                                    bool fallback);
// Writes the entry atomically; a failure is warned about (the cache is an
// optimisation), never thrown.
void write_entry(const std::string& folder, const std::string& key,
                 const std::vector<std::shared_ptr<Device>>& devices, const DiskEntry& entry);

// The file of KEY's entry in FOLDER.
std::string entry_path(const std::string& folder, const std::string& key);
// Warns on stderr (one line: "hal: compile cache: PATH: WHY; rebuilding
// it") and counts a rebuilt entry.
void warn_rebuild(const std::string& path, const std::string& why);

// Counts for compile_cache_counters(). Thread-safe.
void count_compile();
void count_deserialization();
void count_memory_hit();
void count_disk_hit();

}  // namespace hal::detail

#endif  // HAL_GRAPH_COMPILE_CACHE_HPP_
