/*
 * HAL C ABI: version macros, opaque handles, dtypes, capability bits and the
 * helpers every other ABI header uses. See hal/hal.h for the versioning rules.
 */
#ifndef HAL_TYPES_H_
#define HAL_TYPES_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version this header describes. See hal/hal.h for what bumps which. */
#define HAL_ABI_VERSION_MAJOR 1
#define HAL_ABI_VERSION_MINOR 14

/* Symbol visibility for the one symbol a plugin exports. */
#if defined(_WIN32)
#define HAL_EXPORT __declspec(dllexport)
#else
#define HAL_EXPORT __attribute__((visibility("default")))
#endif

/* Size of a struct up to and including FIELD: the struct_size a reader needs
 * before it may read FIELD. */
#define HAL_STRUCT_SIZE_TO(type, field) \
  (offsetof(type, field) + sizeof(((type*)0)->field))

/* True when the struct at PTR (with a struct_size first member) is large
 * enough to contain FIELD. PTR must not be NULL. */
#define HAL_STRUCT_HAS_FIELD(ptr, type, field) \
  ((ptr)->struct_size >= HAL_STRUCT_SIZE_TO(type, field))

/* Opaque handles. Each is created and owned by a plugin; its lifetime and
 * thread-safety are documented on the entry that creates it. */
typedef struct hal_plugin_s hal_plugin_t; /* one initialised plugin instance */
typedef struct hal_device_s hal_device_t; /* owned by its plugin instance */
typedef struct hal_buffer_s hal_buffer_t; /* device memory allocation */
typedef struct hal_stream_s hal_stream_t; /* in-order work queue */
typedef struct hal_event_s hal_event_t;   /* point in a stream's work */

/* Element types. Values are frozen; new ones are appended (MINOR). Fields
 * holding a dtype are uint32_t. */
typedef enum hal_dtype_e {
  HAL_DTYPE_INVALID = 0,
  HAL_DTYPE_FLOAT32 = 1,
  HAL_DTYPE_FLOAT16 = 2,
  HAL_DTYPE_BFLOAT16 = 3,
  HAL_DTYPE_FLOAT64 = 4,
  HAL_DTYPE_INT8 = 5,
  HAL_DTYPE_UINT8 = 6,
  HAL_DTYPE_INT16 = 7,
  HAL_DTYPE_INT32 = 8,
  HAL_DTYPE_INT64 = 9,
  HAL_DTYPE_BOOL = 10,
  HAL_DTYPE_UINT16 = 11,
  HAL_DTYPE_UINT32 = 12,
  HAL_DTYPE_UINT64 = 13,
  HAL_DTYPE_COMPLEX64 = 14,
  HAL_DTYPE_COMPLEX128 = 15,
  HAL_DTYPE_COUNT_ = 16 /* one past the last value this header knows */
} hal_dtype_e;

/* Bit for a dtype in a dtype set (uint64_t). */
#define HAL_DTYPE_BIT(dtype) ((uint64_t)1 << (uint32_t)(dtype))

/* Capability bits: which of the six interfaces a device implements.
 * Device and memory are required of every device. */
typedef enum hal_capability_e {
  HAL_CAPABILITY_DEVICE = 1u << 0,
  HAL_CAPABILITY_MEMORY = 1u << 1,
  HAL_CAPABILITY_STREAM = 1u << 2,
  HAL_CAPABILITY_COLLECTIVE = 1u << 3,
  HAL_CAPABILITY_OPERATOR = 1u << 4,
  HAL_CAPABILITY_GRAPH = 1u << 5
} hal_capability_e;

/* One key/value option passed to a plugin (from hal.toml's
 * [plugin.options]). Both strings are NUL-terminated UTF-8, owned by the
 * caller and valid only for the duration of the call they are passed to.
 * Non-string TOML values arrive in their TOML text form ("4", "true"). */
typedef struct hal_option_t {
  size_t struct_size;
  const char* key;   /* never NULL */
  const char* value; /* never NULL */
} hal_option_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_TYPES_H_ */
