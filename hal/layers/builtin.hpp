// Internal: the layers built into libhal (validation, trace, faults), each a
// hal_layer_api_t like a layer .so's, written against BuiltinLayer.
#ifndef HAL_LAYERS_BUILTIN_HPP_
#define HAL_LAYERS_BUILTIN_HPP_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hal/layer.h"

namespace hal::detail {

// The built-in layer called NAME, or nullptr.
const hal_layer_api_t* builtin_layer(const std::string& name);
// "validation, trace, faults".
std::string builtin_layer_names();

// The built-in layers' tables (validation.cc, trace.cc, faults.cc; what
// they do: docs/layers.md).
const hal_layer_api_t* validation_layer_api();
const hal_layer_api_t* trace_layer_api();
const hal_layer_api_t* faults_layer_api();

// Options of one layer: hal.toml's [layer_options.<name>] then environment
// variables (which win). Throws hal::Error (INVALID_ARGUMENT) for a key
// not in KNOWN.
class LayerOptionMap {
 public:
  LayerOptionMap(const char* layer, const hal_layer_create_args_t& args, std::vector<std::string> known);
  // The option KEY, else $ENV (when ENV is non-null and set), else FALLBACK.
  // Returns where it came from in *SOURCE ("HAL_TRACE", "option path").
  std::string get(const std::string& key, const char* env, const std::string& fallback,
                  std::string* source = nullptr) const;

 private:
  std::map<std::string, std::string> values_;
};

// What a built-in layer implements; exceptions become statuses naming the
// layer (an exception from begin fails the call, from end replaces its
// status).
class BuiltinLayer {
 public:
  virtual ~BuiltinLayer() = default;
  virtual hal_status_t* begin(const hal_layer_call_t& call, void** cookie) = 0;
  virtual hal_status_t* end(const hal_layer_call_t& call, void* cookie, hal_status_t* status) = 0;
};

// The argument I of CALL, as type T (the entry's parameter type).
template <class T>
T arg(const hal_layer_call_t& call, uint32_t i) {
  return i < call.arg_count ? *static_cast<T*>(call.args[i]) : T{};
}

// Names learnt from the calls a layer sees: op ids (op_resolve) and device
// handles (device_get), so messages say "cpu:0" and "add", not pointers.
// Thread-safe.
class CallNames {
 public:
  // Record what a successful CALL tells (call from end()).
  void learn(const hal_layer_call_t& call);
  std::string op(const char* plugin, uint32_t id) const;
  std::string device(const void* handle) const;  // "cpu:0", else "device 0x..."
  // The device a call runs on, when its first argument (or its args
  // struct) names one; nullptr otherwise.
  static const void* device_of(const hal_layer_call_t& call);

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, uint32_t>, std::string> ops_;
  std::unordered_map<const void*, std::string> devices_;
};

// A hal_layer_api_t over L (a BuiltinLayer constructed from
// (const hal_layer_create_args_t&)).
template <class L>
const hal_layer_api_t* builtin_api(const char* name, const char* description);

}  // namespace hal::detail

#include "layers/builtin_api.inl"

#endif  // HAL_LAYERS_BUILTIN_HPP_
