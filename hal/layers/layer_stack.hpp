// Internal: layers (hal/layer.h) between the core and a plugin's tables.
// Runtime::create loads the enabled layers once (load_layers) and puts them
// in front of every plugin it loads (install_layers): the plugin's table
// copies in LoadedPlugin are replaced by thunks that run the layers' hooks
// around the plugin's own entries. With no layer nothing is replaced.
#ifndef HAL_LAYERS_LAYER_STACK_HPP_
#define HAL_LAYERS_LAYER_STACK_HPP_

#include <boost/dll/shared_library.hpp>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hal/hal.h"

namespace hal::detail {

struct LoadedPlugin;

// One enabled layer: its library (none for a built-in), its table and its
// instance (destroyed with this object, after every plugin it wraps).
struct LayerInstance {
  boost::dll::shared_library library;  // declared first: unloaded last
  const hal_layer_api_t* api = nullptr;
  hal_layer_t* instance = nullptr;
  std::string name, description;
  std::string path;  // the .so, or "built-in"
  hal_host_api_t host{};  // handed to the layer's entry; must outlive it
  LayerInstance() = default;
  LayerInstance(const LayerInstance&) = delete;
  LayerInstance& operator=(const LayerInstance&) = delete;
  ~LayerInstance() {
    if (instance != nullptr) api->destroy(instance);
  }
};

using LayerOptions = std::map<std::string, std::vector<std::pair<std::string, std::string>>>;

// Loads SPECS in order (a layer with the same spec and options that a live
// runtime already started is shared, not started again): a built-in layer's name ("validation", "trace",
// "faults"), a path to a layer .so (contains '/'), or a NAME found as
// libhal_layer_NAME.so in SEARCH_DIRS. OPTIONS[name] go to the layer's
// create. WHERE names the source of the list in errors ("hal.toml:3:1",
// "HAL_LAYERS"). Throws hal::Error naming the layer: INVALID_ARGUMENT (an
// unknown name, a duplicate, a refused option), ABI_MISMATCH (built for
// another MAJOR, table too small), NOT_FOUND (no such file), and the
// layer's own create status.
std::vector<std::shared_ptr<LayerInstance>> load_layers(const std::vector<std::string>& specs,
                                                        const LayerOptions& options,
                                                        const std::vector<std::string>& search_dirs,
                                                        const std::string& where);

// Puts LAYERS (outermost first) in front of PLUGIN's device, memory,
// stream, op, graph and collective tables; PLUGIN keeps them alive. Plugin
// instances of one library under the same layer instances share a thunk
// slot; throws hal::Error (INTERNAL) when more than 32 distinct (library,
// layers) pairs are layered at once. Call once per plugin, before any call
// through its tables from another thread.
void install_layers(LoadedPlugin& plugin, std::vector<std::shared_ptr<LayerInstance>> layers);

}  // namespace hal::detail

#endif  // HAL_LAYERS_LAYER_STACK_HPP_
