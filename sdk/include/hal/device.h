/*
 * HAL C ABI: the device interface (required of every plugin).
 */
#ifndef HAL_DEVICE_H_
#define HAL_DEVICE_H_

#include "hal/extension.h"
#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HAL_DEVICE_NAME_SIZE 256
#define HAL_DEVICE_VENDOR_SIZE 128
#define HAL_DEVICE_DRIVER_VERSION_SIZE 128

/* Device flags (hal_device_properties_t.flags). */
typedef enum hal_device_flag_e {
  /* Buffers are host-addressable (hal_buffer_info_t.host_pointer set). */
  HAL_DEVICE_FLAG_HOST_ACCESSIBLE_MEMORY = 1u << 0
} hal_device_flag_e;

/* Properties of one device. The CALLER allocates the struct, zero-fills it
 * and sets struct_size; the plugin writes only fields that lie below
 * struct_size. Strings are NUL-terminated and truncated to fit. */
typedef struct hal_device_properties_t {
  size_t struct_size;
  /* Extension chain: NULL, or the first element of a chain of
   * hal_extension_base_t structs (hal/extension.h; readers skip unknown
   * types and refuse malformed chains with INVALID_ARGUMENT). Declared
   * void* since ABI 1.0 and kept so: retyping it would break C++ sources
   * that assign or read a void*. */
  void* next;
  char name[HAL_DEVICE_NAME_SIZE];             /* "Intel Xeon ..." */
  char vendor[HAL_DEVICE_VENDOR_SIZE];         /* "GenuineIntel" */
  char driver_version[HAL_DEVICE_DRIVER_VERSION_SIZE];
  uint64_t total_memory_bytes;    /* memory allocatable by buffers */
  uint32_t compute_units;         /* cores, SMs, CUs ... (>= 1) */
  uint32_t capabilities;          /* hal_capability_e bits */
  uint64_t supported_dtypes;      /* HAL_DTYPE_BIT() set */
  uint64_t min_buffer_alignment;  /* bytes, power of two */
  uint32_t flags;                 /* hal_device_flag_e bits */
} hal_device_properties_t;

/* Device interface table. Returned by the plugin, static, valid while the
 * plugin library is loaded. */
typedef struct hal_device_api_t {
  size_t struct_size;

  /* Number of devices this plugin instance exposes (may be 0).
   * plugin: non-NULL. out_count: non-NULL.
   * Errors: INVALID_ARGUMENT. */
  hal_status_t* (*device_count)(hal_plugin_t* plugin, uint32_t* out_count);

  /* Device handle at INDEX. The handle is owned by the plugin instance and
   * valid until it is destroyed; repeated calls return the same handle.
   * Errors: INVALID_ARGUMENT (NULL), OUT_OF_RANGE (index >= count). */
  hal_status_t* (*device_get)(hal_plugin_t* plugin, uint32_t index,
                              hal_device_t** out_device);

  /* Fills *inout_properties (see hal_device_properties_t for the rules).
   * Errors: INVALID_ARGUMENT (NULL handle, struct_size too small to hold
   * name). */
  hal_status_t* (*device_get_properties)(
      hal_device_t* device, hal_device_properties_t* inout_properties);
} hal_device_api_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_DEVICE_H_ */
