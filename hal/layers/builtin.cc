#include "layers/builtin.hpp"

#include <cstdio>
#include <cstdlib>

#include "hal/runtime/error.hpp"

namespace hal::detail {

const hal_layer_api_t* builtin_layer(const std::string& name) {
  if (name == "validation") return validation_layer_api();
  if (name == "trace") return trace_layer_api();
  if (name == "faults") return faults_layer_api();
  return nullptr;
}

std::string builtin_layer_names() { return "validation, trace, faults"; }

LayerOptionMap::LayerOptionMap(const char* layer, const hal_layer_create_args_t& args,
                               std::vector<std::string> known) {
  for (size_t i = 0; i < args.option_count; ++i) {
    const std::string key = args.options[i].key != nullptr ? args.options[i].key : "";
    bool ok = false;
    for (const std::string& k : known) ok = ok || k == key;
    if (!ok) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error(HAL_STATUS_INVALID_ARGUMENT, std::string("unknown option '") + key + "' of layer " + layer +
                                                   " (known: " + (list.empty() ? "none" : list) + ")");
    }
    values_[key] = args.options[i].value != nullptr ? args.options[i].value : "";
  }
}

std::string LayerOptionMap::get(const std::string& key, const char* env, const std::string& fallback,
                                std::string* source) const {
  if (env != nullptr) {
    const char* v = std::getenv(env);
    if (v != nullptr && *v != '\0') {
      if (source) *source = env;
      return v;
    }
  }
  auto it = values_.find(key);
  if (it != values_.end()) {
    if (source) *source = "option " + key;
    return it->second;
  }
  if (source) *source = "default";
  return fallback;
}

void CallNames::learn(const hal_layer_call_t& call) {
  if (call.entry == HAL_LAYER_ENTRY_OP_RESOLVE) {
    const char* name = arg<const char*>(call, 1);
    const hal_op_id_t* id = arg<hal_op_id_t*>(call, 2);
    if (name == nullptr || id == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    ops_[{call.plugin, *id}] = name;
  } else if (call.entry == HAL_LAYER_ENTRY_DEVICE_GET) {
    hal_device_t* const* out = arg<hal_device_t**>(call, 2);
    if (out == nullptr || *out == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    devices_[*out] = std::string(call.plugin) + ":" + std::to_string(arg<uint32_t>(call, 1));
  }
}

std::string CallNames::op(const char* plugin, uint32_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ops_.find({plugin, id});
  return it != ops_.end() ? it->second : "op #" + std::to_string(id);
}

std::string CallNames::device(const void* handle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = devices_.find(handle);
  if (it != devices_.end()) return it->second;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "device %p", handle);
  return buf;
}

const void* CallNames::device_of(const hal_layer_call_t& call) {
  switch (call.entry) {
    case HAL_LAYER_ENTRY_DEVICE_GET_PROPERTIES:
    case HAL_LAYER_ENTRY_BUFFER_ALLOCATE:
    case HAL_LAYER_ENTRY_HOST_ALLOCATE:
    case HAL_LAYER_ENTRY_HOST_FREE:
    case HAL_LAYER_ENTRY_MEMORY_GET_INFO:
    case HAL_LAYER_ENTRY_STREAM_CREATE:
    case HAL_LAYER_ENTRY_EVENT_CREATE:
    case HAL_LAYER_ENTRY_OP_CHECK:
    case HAL_LAYER_ENTRY_OP_LAUNCH:
    case HAL_LAYER_ENTRY_GRAPH_PARTITION:
    case HAL_LAYER_ENTRY_GRAPH_COMPILE:
      return arg<hal_device_t*>(call, 0);
    default:
      return nullptr;
  }
}

}  // namespace hal::detail
