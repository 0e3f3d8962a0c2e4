// HAL C++ SDK, internal: the device table's C entries (hal/device.h).
// Before the guard: plugin.hpp includes this header after defining Plugin.
#include "hal/sdk/plugin.hpp"

#ifndef HAL_SDK_DETAIL_DEVICE_ENTRIES_HPP_
#define HAL_SDK_DETAIL_DEVICE_ENTRIES_HPP_

#include <cstdint>

#include "hal/hal.h"
#include "hal/sdk/detail/call.hpp"
#include "hal/sdk/detail/registry.hpp"
#include "hal/sdk/device.hpp"

namespace hal::sdk::detail {

inline hal_status_t* device_count(hal_plugin_t* p, uint32_t* out) {
  return call("device_count", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_count is NULL");
    *out = static_cast<uint32_t>(plugin->device_count());
  });
}

inline hal_status_t* device_get(hal_plugin_t* p, uint32_t index, hal_device_t** out) {
  return call("device_get", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_device is NULL");
    if (index >= plugin->device_count())
      fail(HAL_STATUS_OUT_OF_RANGE, "device index ", index, " >= device count ",
           plugin->device_count());
    *out = reinterpret_cast<hal_device_t*>(&plugin->device(index));
  });
}

inline hal_status_t* device_get_properties(hal_device_t* d, hal_device_properties_t* out) {
  return call("device_get_properties", [&] {
    auto* device = as<Device>(d, Kind::kDevice, "device");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "properties is NULL");
    if (!HAL_STRUCT_HAS_FIELD(out, hal_device_properties_t, name))
      fail(HAL_STATUS_INVALID_ARGUMENT, "properties struct_size ", out->struct_size,
           " is too small");
    const DeviceProperties& p = device->cached_properties();
    using P = hal_device_properties_t;
#define HAL_SDK_SET_(field, value) \
  if (HAL_STRUCT_HAS_FIELD(out, P, field)) out->field = value
    copy_string(out->name, sizeof(out->name), p.name);
    if (HAL_STRUCT_HAS_FIELD(out, P, vendor)) copy_string(out->vendor, sizeof(out->vendor), p.vendor);
    if (HAL_STRUCT_HAS_FIELD(out, P, driver_version))
      copy_string(out->driver_version, sizeof(out->driver_version), p.driver_version);
    HAL_SDK_SET_(total_memory_bytes, p.total_memory_bytes);
    HAL_SDK_SET_(compute_units, p.compute_units);
    HAL_SDK_SET_(capabilities, info().interfaces | HAL_CAPABILITY_DEVICE | HAL_CAPABILITY_MEMORY);
    HAL_SDK_SET_(supported_dtypes, p.supported_dtypes);
    HAL_SDK_SET_(min_buffer_alignment, p.min_buffer_alignment);
    HAL_SDK_SET_(flags, p.flags);
#undef HAL_SDK_SET_
  });
}

inline const hal_device_api_t kDeviceApi = {sizeof(hal_device_api_t), &device_count, &device_get,
                                            &device_get_properties};

}  // namespace hal::sdk::detail

#endif  // HAL_SDK_DETAIL_DEVICE_ENTRIES_HPP_
