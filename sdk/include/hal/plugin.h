/*
 * HAL C ABI: the plugin entry point, host services and the plugin table.
 *
 * A plugin shared object exports exactly one symbol, HAL_PLUGIN_ENTRY_SYMBOL:
 *
 *   HAL_EXPORT hal_status_t* hal_plugin_entry(const hal_host_api_t* host,
 *                                             const hal_plugin_api_t** out_api);
 *
 * The core calls it once after loading the library. The plugin reads the
 * host's ABI version from HOST, refuses a different MAJOR by returning an
 * ABI_MISMATCH status, and otherwise returns its static tables. The core
 * then checks the plugin's MAJOR and each table's struct_size, negotiates
 * MINOR down, and only then calls create().
 */
#ifndef HAL_PLUGIN_H_
#define HAL_PLUGIN_H_

#include "hal/collective.h"
#include "hal/device.h"
#include "hal/extension.h"
#include "hal/graph.h"
#include "hal/memory.h"
#include "hal/op.h"
#include "hal/status.h"
#include "hal/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HAL_PLUGIN_ENTRY_SYMBOL "hal_plugin_entry"

typedef enum hal_log_level_e {
  HAL_LOG_DEBUG = 0,
  HAL_LOG_INFO = 1,
  HAL_LOG_WARNING = 2,
  HAL_LOG_ERROR = 3
} hal_log_level_e;

/* Services the host offers a plugin. Owned by the host; valid from the entry
 * call until the library is unloaded. The first three fields are frozen
 * across all MAJOR versions. */
typedef struct hal_host_api_t {
  size_t struct_size;
  uint32_t abi_version_major;
  uint32_t abi_version_minor;
  /* Opaque host context, passed back to every service. */
  void* host_context;
  /* Logs MESSAGE (NUL-terminated, copied before return) at LEVEL
   * (hal_log_level_e). Thread-safe; never NULL. The host tags the message
   * with the plugin's name. */
  void (*log)(void* host_context, uint32_t level, const char* message);

  /* ---- ABI 1.3 ---- */

  /* The host's extension chain (hal/extension.h): NULL or the first
   * element; owned by the host, valid as long as this struct. A plugin
   * reads it only when the host's abi_version_minor >= 3 and struct_size
   * covers it; a malformed chain should make the entry point fail with
   * INVALID_ARGUMENT. */
  const hal_extension_base_t* next;
} hal_host_api_t;

/* Arguments to hal_plugin_api_t.create. Owned by the caller; valid only for
 * the duration of the call (copy what you keep). */
typedef struct hal_plugin_create_args_t {
  size_t struct_size;
  /* Extension chain: NULL, or the first element of a chain of
   * hal_extension_base_t structs (hal/extension.h; readers skip unknown
   * types and refuse malformed chains with INVALID_ARGUMENT). Declared
   * void* since ABI 1.0 and kept so: retyping it would break C++ sources
   * that assign or read a void*. */
  void* next;
  /* Plugin options from the configuration; OPTIONS may be NULL when
   * OPTION_COUNT is 0. Unknown keys should be refused with
   * INVALID_ARGUMENT naming the key. */
  const hal_option_t* options;
  size_t option_count;
} hal_plugin_create_args_t;

/* What a plugin offers. Static in the plugin; valid until the library is
 * unloaded. The first three fields are frozen across all MAJOR versions. */
typedef struct hal_plugin_api_t {
  size_t struct_size;
  uint32_t abi_version_major; /* HAL_ABI_VERSION_MAJOR the plugin built with */
  uint32_t abi_version_minor; /* HAL_ABI_VERSION_MINOR the plugin built with */

  /* Unique short name ("cpu", "opencl"): [a-z0-9_]+. Never NULL. */
  const char* name;
  /* Free text; never NULL. */
  const char* vendor;
  /* The plugin's own version ("1.2.0"); never NULL. */
  const char* plugin_version;

  /* Initialises a plugin instance (enumerates devices, starts threads).
   * The caller owns *out_plugin and releases it with destroy. Required.
   * Errors: INVALID_ARGUMENT (bad option: names key and value),
   * DEVICE_ERROR (driver failure). */
  hal_status_t* (*create)(const hal_plugin_create_args_t* args,
                          hal_plugin_t** out_plugin);
  /* Releases an instance and everything it owns (devices). Buffers, streams
   * and events must have been released first. Required. */
  void (*destroy)(hal_plugin_t* plugin);

  /* Interface tables. device and memory are required; the others may be
   * NULL ("not implemented"). */
  const hal_device_api_t* device;
  const hal_memory_api_t* memory;
  const hal_stream_api_t* stream;
  const hal_collective_api_t* collective;
  const hal_op_api_t* op;
  const hal_graph_api_t* graph;

  /* ---- ABI 1.3 ---- */

  /* The plugin's extension chain (hal/extension.h): NULL or the first
   * element; static in the plugin like the table. Extensions of any of the
   * interface tables hang off this one chain (the tables have no `next` of
   * their own). The core reads it only when the negotiated MINOR is >= 3
   * and struct_size covers it, and skips a plugin whose chain is malformed
   * (reason invalid_plugin, naming the element and the value). */
  const hal_extension_base_t* next;
} hal_plugin_api_t;

/* The entry point type. HOST: non-NULL, valid until unload. OUT_API:
 * non-NULL; on success *out_api points at the plugin's static table. On
 * error returns a status (ABI_MISMATCH for a MAJOR it cannot serve) and
 * leaves *out_api untouched. Must not throw. Called once per load, from one
 * thread. */
typedef hal_status_t* (*hal_plugin_entry_fn)(const hal_host_api_t* host,
                                             const hal_plugin_api_t** out_api);

/* Smallest struct_size of each table the core accepts: the size of the
 * MAJOR 1 table as first published (MINOR 0). Anything smaller is refused. */
#define HAL_PLUGIN_API_MIN_SIZE HAL_STRUCT_SIZE_TO(hal_plugin_api_t, graph)
#define HAL_DEVICE_API_MIN_SIZE \
  HAL_STRUCT_SIZE_TO(hal_device_api_t, device_get_properties)
#define HAL_MEMORY_API_MIN_SIZE \
  HAL_STRUCT_SIZE_TO(hal_memory_api_t, buffer_fill)
/* HAL_GRAPH_API_MIN_SIZE is in hal/graph.h. */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_PLUGIN_H_ */
