// Internal: builtin_api<L> (builtin.hpp), the C table over a BuiltinLayer.
#include <exception>

#include "hal/runtime/error.hpp"
#include "hal/sdk/status.hpp"

namespace hal::detail {

inline hal_status_t* status_of_exception(const char* layer) noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return sdk::make_status(e.code(), std::string("layer ") + layer + ": " + e.what());
  } catch (const std::exception& e) {
    return sdk::make_status(HAL_STATUS_INTERNAL, std::string("layer ") + layer + ": " + e.what());
  } catch (...) {
    return sdk::make_status(HAL_STATUS_INTERNAL, std::string("layer ") + layer + ": unknown exception");
  }
}

template <class L>
const hal_layer_api_t* builtin_api(const char* name, const char* description) {
  static const char* const kName = name;
  static const hal_layer_api_t api = {
      sizeof(hal_layer_api_t),
      HAL_ABI_VERSION_MAJOR,
      HAL_ABI_VERSION_MINOR,
      name,
      description,
      [](const hal_layer_create_args_t* args, hal_layer_t** out) -> hal_status_t* {
        try {
          *out = reinterpret_cast<hal_layer_t*>(static_cast<BuiltinLayer*>(new L(*args)));
          return nullptr;
        } catch (...) {
          return status_of_exception(kName);
        }
      },
      [](hal_layer_t* layer) { delete reinterpret_cast<BuiltinLayer*>(layer); },
      [](hal_layer_t* layer, const hal_layer_call_t* call, void** cookie) -> hal_status_t* {
        try {
          return reinterpret_cast<BuiltinLayer*>(layer)->begin(*call, cookie);
        } catch (...) {
          return status_of_exception(kName);
        }
      },
      [](hal_layer_t* layer, const hal_layer_call_t* call, void* cookie, hal_status_t* status) -> hal_status_t* {
        try {
          return reinterpret_cast<BuiltinLayer*>(layer)->end(*call, cookie, status);
        } catch (...) {
          if (status != nullptr) status->destroy(status);
          return status_of_exception(kName);
        }
      }};
  return &api;
}

}  // namespace hal::detail
