#include "layers/layer_stack.hpp"

#include <array>
#include <cstdint>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>

#include "hal/common/status_code.hpp"
#include "hal/runtime/error.hpp"
#include "hal/sdk/status.hpp"
#include "layers/builtin.hpp"
#include "loader/loaded_plugin.hpp"
#include "loader/plugin_loader.hpp"

namespace hal::detail {

// Every entry a layer sees: table member, table type, hal_layer_entry_e.
#define HAL_LAYERED_ENTRIES(X)                                              \
  X(device, hal_device_api_t, device_count, DEVICE_COUNT)                   \
  X(device, hal_device_api_t, device_get, DEVICE_GET)                       \
  X(device, hal_device_api_t, device_get_properties, DEVICE_GET_PROPERTIES) \
  X(memory, hal_memory_api_t, buffer_allocate, BUFFER_ALLOCATE)             \
  X(memory, hal_memory_api_t, buffer_free, BUFFER_FREE)                     \
  X(memory, hal_memory_api_t, buffer_get_info, BUFFER_GET_INFO)             \
  X(memory, hal_memory_api_t, host_allocate, HOST_ALLOCATE)                 \
  X(memory, hal_memory_api_t, host_free, HOST_FREE)                         \
  X(memory, hal_memory_api_t, copy_host_to_device, COPY_HOST_TO_DEVICE)     \
  X(memory, hal_memory_api_t, copy_device_to_host, COPY_DEVICE_TO_HOST)     \
  X(memory, hal_memory_api_t, copy_device_to_device, COPY_DEVICE_TO_DEVICE) \
  X(memory, hal_memory_api_t, buffer_fill, BUFFER_FILL)                     \
  X(memory, hal_memory_api_t, memory_get_info, MEMORY_GET_INFO)             \
  X(stream, hal_stream_api_t, stream_create, STREAM_CREATE)                 \
  X(stream, hal_stream_api_t, stream_destroy, STREAM_DESTROY)               \
  X(stream, hal_stream_api_t, stream_synchronize, STREAM_SYNCHRONIZE)       \
  X(stream, hal_stream_api_t, stream_query, STREAM_QUERY)                   \
  X(stream, hal_stream_api_t, stream_enqueue_host_func, STREAM_ENQUEUE_HOST_FUNC) \
  X(stream, hal_stream_api_t, stream_wait_event, STREAM_WAIT_EVENT)         \
  X(stream, hal_stream_api_t, event_create, EVENT_CREATE)                   \
  X(stream, hal_stream_api_t, event_destroy, EVENT_DESTROY)                 \
  X(stream, hal_stream_api_t, event_record, EVENT_RECORD)                   \
  X(stream, hal_stream_api_t, event_query, EVENT_QUERY)                     \
  X(stream, hal_stream_api_t, event_synchronize, EVENT_SYNCHRONIZE)         \
  X(stream, hal_stream_api_t, event_elapsed_time, EVENT_ELAPSED_TIME)       \
  X(op, hal_op_api_t, op_count, OP_COUNT)                                   \
  X(op, hal_op_api_t, op_get_name, OP_GET_NAME)                             \
  X(op, hal_op_api_t, op_resolve, OP_RESOLVE)                               \
  X(op, hal_op_api_t, op_check, OP_CHECK)                                   \
  X(op, hal_op_api_t, op_launch, OP_LAUNCH)                                 \
  X(op, hal_op_api_t, op_get_info, OP_GET_INFO)                             \
  X(op, hal_op_api_t, op_get_layouts, OP_GET_LAYOUTS)                       \
  X(graph, hal_graph_api_t, graph_partition, GRAPH_PARTITION)               \
  X(graph, hal_graph_api_t, graph_compile, GRAPH_COMPILE)                   \
  X(graph, hal_graph_api_t, executable_destroy, EXECUTABLE_DESTROY)         \
  X(graph, hal_graph_api_t, executable_get_info, EXECUTABLE_GET_INFO)       \
  X(graph, hal_graph_api_t, executable_execute, EXECUTABLE_EXECUTE)         \
  X(graph, hal_graph_api_t, executable_serialize, EXECUTABLE_SERIALIZE)     \
  X(graph, hal_graph_api_t, executable_deserialize, EXECUTABLE_DESERIALIZE) \
  X(collective, hal_collective_api_t, comm_get_unique_id, COMM_GET_UNIQUE_ID) \
  X(collective, hal_collective_api_t, comm_init, COMM_INIT)                 \
  X(collective, hal_collective_api_t, comm_split, COMM_SPLIT)               \
  X(collective, hal_collective_api_t, comm_destroy, COMM_DESTROY)           \
  X(collective, hal_collective_api_t, comm_abort, COMM_ABORT)               \
  X(collective, hal_collective_api_t, comm_get_info, COMM_GET_INFO)         \
  X(collective, hal_collective_api_t, comm_get_async_error, COMM_GET_ASYNC_ERROR) \
  X(collective, hal_collective_api_t, collective, COLLECTIVE)               \
  X(collective, hal_collective_api_t, barrier, BARRIER)                     \
  X(collective, hal_collective_api_t, group_start, GROUP_START)             \
  X(collective, hal_collective_api_t, group_end, GROUP_END)

struct LayerChain {
  std::string plugin;
  // The plugin's own tables (what the thunks forward to).
  hal_device_api_t device{};
  hal_memory_api_t memory{};
  hal_stream_api_t stream{};
  hal_op_api_t op{};
  hal_graph_api_t graph{};
  hal_collective_api_t collective{};
  std::vector<std::shared_ptr<LayerInstance>> layers;
  size_t slot = SIZE_MAX;  // none until install_layers finds one
};

namespace {

namespace fs = std::filesystem;

constexpr size_t kSlots = 32;      // plugin instances with layers alive at once
constexpr size_t kMaxLayers = 16;  // layers per process

const char* const kEntryNames[HAL_LAYER_ENTRY_COUNT_] = {
    "invalid",
#define X(tbl, Table, member, ENTRY) #member,
    HAL_LAYERED_ENTRIES(X)
#undef X
};

std::atomic<LayerChain*> g_slots[kSlots];
std::atomic<uint64_t> g_call_id{0};

template <class Table>
const Table& own_table(const LayerChain& c);
#define HAL_OWN_TABLE(tbl, Table) \
  template <>                     \
  const Table& own_table<Table>(const LayerChain& c) { return c.tbl; }
HAL_OWN_TABLE(device, hal_device_api_t)
HAL_OWN_TABLE(memory, hal_memory_api_t)
HAL_OWN_TABLE(stream, hal_stream_api_t)
HAL_OWN_TABLE(op, hal_op_api_t)
HAL_OWN_TABLE(graph, hal_graph_api_t)
HAL_OWN_TABLE(collective, hal_collective_api_t)
#undef HAL_OWN_TABLE

// A status's code as libhal knows it (an unknown one is INTERNAL).
hal_status_code_e known_code(const hal_status_t* status) {
  const uint32_t c = status->code;
  return c == HAL_STATUS_OK || c >= HAL_STATUS_CODE_COUNT_ ? HAL_STATUS_INTERNAL : static_cast<hal_status_code_e>(c);
}

// A status a layer made, named as that layer's (unless it says so itself):
// a failing layer is reported as the layer, not as the plugin.
hal_status_t* attributed(const LayerInstance& layer, hal_status_t* status) {
  const std::string prefix = "layer " + layer.name + ": ";
  const char* m = status->message != nullptr ? status->message : "(no message)";
  if (std::strncmp(m, prefix.c_str(), prefix.size()) == 0) return status;
  hal_status_t* named = sdk::make_status(known_code(status), prefix + m);
  status->destroy(status);
  return named;
}

// Runs CALL through C's layers around FORWARD (the plugin's entry).
template <class Forward>
hal_status_t* run_layers(const LayerChain& c, const hal_layer_call_t& call, Forward&& forward) {
  const size_t n = c.layers.size();
  void* cookies[kMaxLayers] = {};
  hal_status_t* status = nullptr;
  size_t entered = 0;  // layers whose begin let the call through
  for (; entered < n; ++entered) {
    const LayerInstance& l = *c.layers[entered];
    if (l.api->call_begin == nullptr) continue;
    status = l.api->call_begin(l.instance, &call, &cookies[entered]);
    if (status != nullptr) {
      status = attributed(l, status);
      break;
    }
  }
  if (entered == n) status = forward();
  for (size_t i = entered; i-- > 0;) {
    const LayerInstance& l = *c.layers[i];
    if (l.api->call_end != nullptr) {
      hal_status_t* before = status;
      status = l.api->call_end(l.instance, &call, cookies[i], status);
      if (status != nullptr && status != before) status = attributed(l, status);
    }
  }
  return status;
}

template <size_t Slot, uint32_t Entry, auto Member>
struct Thunk;
template <size_t Slot, uint32_t Entry, class Table, class... A, hal_status_t* (*Table::*Member)(A...)>
struct Thunk<Slot, Entry, Member> {
  static hal_status_t* call(A... a) {
    const LayerChain& c = *g_slots[Slot].load(std::memory_order_acquire);
    void* args[] = {const_cast<void*>(static_cast<const void*>(&a))...};
    const hal_layer_call_t call{sizeof(hal_layer_call_t), Entry, kEntryNames[Entry], c.plugin.c_str(), args,
                                static_cast<uint32_t>(sizeof...(A)),
                                g_call_id.fetch_add(1, std::memory_order_relaxed) + 1};
    return run_layers(c, call, [&] { return (own_table<Table>(c).*Member)(a...); });
  }
};

template <size_t Slot>
void point_at_thunks(LoadedPlugin& p) {
#define X(tbl, Table, member, ENTRY) \
  if (p.tbl.member != nullptr) p.tbl.member = &Thunk<Slot, HAL_LAYER_ENTRY_##ENTRY, &Table::member>::call;
  HAL_LAYERED_ENTRIES(X)
#undef X
}

using Installer = void (*)(LoadedPlugin&);
template <size_t... I>
constexpr std::array<Installer, sizeof...(I)> installers(std::index_sequence<I...>) {
  return {&point_at_thunks<I>...};
}
constexpr std::array<Installer, kSlots> kInstallers = installers(std::make_index_sequence<kSlots>());

std::recursive_mutex g_slot_mutex;  // the chain deleter may run under it

void layer_log(void* context, uint32_t level, const char* message) {
  print_host_log(level, "layer " + static_cast<const LayerInstance*>(context)->name, message);
}

// The layer's table from its library's entry point (or the built-in's),
// checked as the loader checks a plugin's.
const hal_layer_api_t* open_layer(LayerInstance& l, const std::string& spec, const std::vector<std::string>& dirs,
                                  const std::string& where) {
  const std::string what = where + ": layer '" + spec + "'";
  if (const hal_layer_api_t* builtin = builtin_layer(spec)) {
    l.path = "built-in";
    return builtin;
  }
  std::string path = spec;
  if (spec.find('/') == std::string::npos) {
    path.clear();
    std::string searched;
    for (const std::string& d : dirs) {
      const fs::path f = fs::path(d) / ("libhal_layer_" + spec + ".so");
      std::error_code ec;
      if (fs::is_regular_file(f, ec)) {
        path = f.string();
        break;
      }
      searched += (searched.empty() ? "" : ", ") + d;
    }
    if (path.empty())
      throw Error(HAL_STATUS_INVALID_ARGUMENT, what + " does not exist: not a built-in layer (" +
                                                   builtin_layer_names() + ") and no libhal_layer_" + spec +
                                                   ".so in [" + searched + "]");
  }
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(HAL_STATUS_NOT_FOUND, what + ": no such file");
  l.path = fs::absolute(path).lexically_normal().string();
  try {
    l.library.load(boost::dll::fs::path(l.path), module_load_mode());
  } catch (const std::exception& e) {
    throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": cannot load " + l.path + ": " + e.what());
  }
  if (!l.library.has(HAL_LAYER_ENTRY_SYMBOL))
    throw Error(HAL_STATUS_INVALID_ARGUMENT,
                what + ": " + l.path + " has no '" + HAL_LAYER_ENTRY_SYMBOL + "' symbol; not a HAL layer");
  auto entry = l.library.get<hal_status_t*(const hal_host_api_t*, const hal_layer_api_t**)>(HAL_LAYER_ENTRY_SYMBOL);
  l.host.struct_size = sizeof(hal_host_api_t);
  l.host.abi_version_major = HAL_ABI_VERSION_MAJOR;
  l.host.abi_version_minor = HAL_ABI_VERSION_MINOR;
  l.host.host_context = &l;
  l.host.log = &layer_log;
  const hal_layer_api_t* api = nullptr;
  hal_status_t* status = entry(&l.host, &api);
  if (status != nullptr)
    throw Error(status->code == HAL_STATUS_ABI_MISMATCH ? HAL_STATUS_ABI_MISMATCH : HAL_STATUS_INVALID_ARGUMENT,
                what + ": its entry point failed: " + take_message(status));
  if (api == nullptr) throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": its entry point returned no table");
  const std::string host_version =
      std::to_string(HAL_ABI_VERSION_MAJOR) + "." + std::to_string(HAL_ABI_VERSION_MINOR);
  if (api->struct_size < HAL_STRUCT_SIZE_TO(hal_layer_api_t, abi_version_minor) ||
      api->abi_version_major != HAL_ABI_VERSION_MAJOR)
    throw Error(HAL_STATUS_ABI_MISMATCH,
                what + " (" + l.path + ") is built for HAL ABI " + std::to_string(api->abi_version_major) + "." +
                    std::to_string(api->abi_version_minor) + ", this libhal is ABI " + host_version +
                    "; MAJOR must match: rebuild the layer against this HAL's headers");
  if (api->struct_size < HAL_LAYER_API_MIN_SIZE || api->name == nullptr || api->create == nullptr ||
      api->destroy == nullptr)
    throw Error(HAL_STATUS_ABI_MISMATCH, what + " (" + l.path + "): hal_layer_api_t is too small (struct_size " +
                                             std::to_string(api->struct_size) + ") or lacks name/create/destroy");
  return api;
}

}  // namespace

std::vector<std::shared_ptr<LayerInstance>> load_layers(const std::vector<std::string>& specs,
                                                        const LayerOptions& options,
                                                        const std::vector<std::string>& search_dirs,
                                                        const std::string& where) {
  std::vector<std::shared_ptr<LayerInstance>> out;
  if (specs.size() > kMaxLayers)
    throw Error(HAL_STATUS_INVALID_ARGUMENT,
                where + ": " + std::to_string(specs.size()) + " layers; at most " + std::to_string(kMaxLayers));
  for (size_t i = 0; i < specs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (specs[i] == specs[j])
        throw Error(HAL_STATUS_INVALID_ARGUMENT, where + ": layer '" + specs[i] + "' is listed twice");
  // Runtimes alive at once with the same layer and options share its
  // instance (one trace file, one validation state, one fault schedule),
  // and so their plugins share thunk slots (install_layers).
  static std::mutex cache_mutex;
  static std::map<std::string, std::weak_ptr<LayerInstance>> cache;
  std::lock_guard<std::mutex> cache_lock(cache_mutex);
  for (const std::string& spec : specs) {
    std::string key = spec;
    for (const auto& [name, opts] : options)
      for (const auto& [k, v] : opts) key += "\n" + name + "." + k + "=" + v;
    if (auto shared = cache[key].lock()) {
      out.push_back(std::move(shared));
      continue;
    }
    auto l = std::make_shared<LayerInstance>();
    l->api = open_layer(*l, spec, search_dirs, where);
    l->name = l->api->name;
    l->description = l->api->description != nullptr ? l->api->description : "";
    std::vector<hal_option_t> opts;
    auto it = options.find(l->name);
    if (it != options.end())
      for (const auto& [k, v] : it->second) opts.push_back({sizeof(hal_option_t), k.c_str(), v.c_str()});
    hal_layer_create_args_t args{sizeof(args), nullptr, opts.empty() ? nullptr : opts.data(), opts.size()};
    hal_status_t* status = l->api->create(&args, &l->instance);
    if (status != nullptr) {
      const hal_status_code_e code = known_code(status);
      throw Error(code, where + ": layer '" + l->name + "' failed to start: " + take_message(status));
    }
    cache[key] = l;
    out.push_back(std::move(l));
  }
  for (const auto& [name, unused] : options) {
    bool listed = false;
    for (const auto& l : out) listed = listed || l->name == name;
    if (!listed && !out.empty())
      throw Error(HAL_STATUS_INVALID_ARGUMENT,
                  where + ": [layer_options." + name + "] names a layer that is not enabled");
  }
  return out;
}

void install_layers(LoadedPlugin& plugin, std::vector<std::shared_ptr<LayerInstance>> layers) {
  if (layers.empty()) return;
  // Plugins of the same library (same tables) under the same layers share
  // one chain and its slot: the thunks forward to the same entries.
  std::string key = plugin.name;
  auto bytes = [&key](const auto& table) { key.append(reinterpret_cast<const char*>(&table), sizeof(table)); };
  bytes(plugin.device), bytes(plugin.memory), bytes(plugin.stream), bytes(plugin.op), bytes(plugin.graph),
      bytes(plugin.collective);
  for (const auto& l : layers) key.append(reinterpret_cast<const char*>(&l), sizeof(l));
  static std::map<std::string, std::weak_ptr<LayerChain>> chains;
  std::lock_guard<std::recursive_mutex> lock(g_slot_mutex);
  std::shared_ptr<LayerChain> chain = chains[key].lock();
  if (!chain) {
    chain = std::shared_ptr<LayerChain>(new LayerChain, [](LayerChain* c) {
      std::lock_guard<std::recursive_mutex> l(g_slot_mutex);
      if (c->slot < kSlots) g_slots[c->slot].store(nullptr, std::memory_order_release);
      delete c;
    });
    chain->plugin = plugin.name;
    chain->device = plugin.device;
    chain->memory = plugin.memory;
    chain->stream = plugin.stream;
    chain->op = plugin.op;
    chain->graph = plugin.graph;
    chain->collective = plugin.collective;
    chain->layers = std::move(layers);
    size_t slot = 0;
    while (slot < kSlots && g_slots[slot].load(std::memory_order_relaxed) != nullptr) ++slot;
    if (slot == kSlots)
      throw Error(HAL_STATUS_INTERNAL, "plugin '" + plugin.name + "': more than " + std::to_string(kSlots) +
                                           " distinct plugin libraries and layer sets are layered at once");
    chain->slot = slot;
    g_slots[slot].store(chain.get(), std::memory_order_release);
    chains[key] = chain;
  }
  kInstallers[chain->slot](plugin);
  plugin.layers = std::move(chain);
}

}  // namespace hal::detail
