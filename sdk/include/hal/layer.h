/*
 * HAL C ABI: layers (ABI 1.9).
 *
 * A layer sits between the core and every plugin's tables, as the Vulkan
 * loader's and Unified Runtime's layers do: the core calls the layer before
 * and after each table entry it forwards to a plugin (device, memory,
 * stream/event, op, graph and collective tables; not the plugin's own
 * create/destroy). A layer sees every call's entry and arguments, may fail a
 * call before the plugin sees it (validation, fault injection), and sees its
 * status afterwards (tracing). Plugins need no change: a layer never wraps
 * handles, so the plugin receives exactly the caller's arguments.
 *
 * A layer is a shared object exporting HAL_LAYER_ENTRY_SYMBOL, or one of the
 * layers built into libhal ("validation", "trace", "faults"). Layers are
 * enabled per process by hal.toml (`layers = [...]`, options in
 * `[layer_options.<name>]`) or $HAL_LAYERS (comma-separated names or paths;
 * replaces the config's list). The first layer listed is the outermost: it
 * sees a call first and its status last. With no layer enabled the core calls
 * the plugins' tables directly (no cost).
 *
 *   HAL_EXPORT hal_status_t* hal_layer_entry(const hal_host_api_t* host,
 *                                            const hal_layer_api_t** out_api);
 *
 * The entry follows the plugin entry's rules (hal/plugin.h): HOST valid until
 * unload; refuse a different MAJOR with ABI_MISMATCH; *out_api a static table.
 * A layer library stays loaded while any plugin it wraps is.
 */
#ifndef HAL_LAYER_H_
#define HAL_LAYER_H_

#include "hal/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HAL_LAYER_ENTRY_SYMBOL "hal_layer_entry"

/* The table entries a layer sees. Values are frozen; new ones are appended
 * (MINOR). */
typedef enum hal_layer_entry_e {
  HAL_LAYER_ENTRY_INVALID = 0,
  /* hal_device_api_t */
  HAL_LAYER_ENTRY_DEVICE_COUNT = 1,
  HAL_LAYER_ENTRY_DEVICE_GET = 2,
  HAL_LAYER_ENTRY_DEVICE_GET_PROPERTIES = 3,
  /* hal_memory_api_t */
  HAL_LAYER_ENTRY_BUFFER_ALLOCATE = 4,
  HAL_LAYER_ENTRY_BUFFER_FREE = 5,
  HAL_LAYER_ENTRY_BUFFER_GET_INFO = 6,
  HAL_LAYER_ENTRY_HOST_ALLOCATE = 7,
  HAL_LAYER_ENTRY_HOST_FREE = 8,
  HAL_LAYER_ENTRY_COPY_HOST_TO_DEVICE = 9,
  HAL_LAYER_ENTRY_COPY_DEVICE_TO_HOST = 10,
  HAL_LAYER_ENTRY_COPY_DEVICE_TO_DEVICE = 11,
  HAL_LAYER_ENTRY_BUFFER_FILL = 12,
  HAL_LAYER_ENTRY_MEMORY_GET_INFO = 13,
  /* hal_stream_api_t */
  HAL_LAYER_ENTRY_STREAM_CREATE = 14,
  HAL_LAYER_ENTRY_STREAM_DESTROY = 15,
  HAL_LAYER_ENTRY_STREAM_SYNCHRONIZE = 16,
  HAL_LAYER_ENTRY_STREAM_QUERY = 17,
  HAL_LAYER_ENTRY_STREAM_ENQUEUE_HOST_FUNC = 18,
  HAL_LAYER_ENTRY_STREAM_WAIT_EVENT = 19,
  HAL_LAYER_ENTRY_EVENT_CREATE = 20,
  HAL_LAYER_ENTRY_EVENT_DESTROY = 21,
  HAL_LAYER_ENTRY_EVENT_RECORD = 22,
  HAL_LAYER_ENTRY_EVENT_QUERY = 23,
  HAL_LAYER_ENTRY_EVENT_SYNCHRONIZE = 24,
  HAL_LAYER_ENTRY_EVENT_ELAPSED_TIME = 25,
  /* hal_op_api_t */
  HAL_LAYER_ENTRY_OP_COUNT = 26,
  HAL_LAYER_ENTRY_OP_GET_NAME = 27,
  HAL_LAYER_ENTRY_OP_RESOLVE = 28,
  HAL_LAYER_ENTRY_OP_CHECK = 29,
  HAL_LAYER_ENTRY_OP_LAUNCH = 30,
  HAL_LAYER_ENTRY_OP_GET_INFO = 31,
  HAL_LAYER_ENTRY_OP_GET_LAYOUTS = 32,
  /* hal_graph_api_t */
  HAL_LAYER_ENTRY_GRAPH_PARTITION = 33,
  HAL_LAYER_ENTRY_GRAPH_COMPILE = 34,
  HAL_LAYER_ENTRY_EXECUTABLE_DESTROY = 35,
  HAL_LAYER_ENTRY_EXECUTABLE_GET_INFO = 36,
  HAL_LAYER_ENTRY_EXECUTABLE_EXECUTE = 37,
  HAL_LAYER_ENTRY_EXECUTABLE_SERIALIZE = 38,
  HAL_LAYER_ENTRY_EXECUTABLE_DESERIALIZE = 39,
  /* hal_collective_api_t */
  HAL_LAYER_ENTRY_COMM_GET_UNIQUE_ID = 40,
  HAL_LAYER_ENTRY_COMM_INIT = 41,
  HAL_LAYER_ENTRY_COMM_SPLIT = 42,
  HAL_LAYER_ENTRY_COMM_DESTROY = 43,
  HAL_LAYER_ENTRY_COMM_ABORT = 44,
  HAL_LAYER_ENTRY_COMM_GET_INFO = 45,
  HAL_LAYER_ENTRY_COMM_GET_ASYNC_ERROR = 46,
  HAL_LAYER_ENTRY_COLLECTIVE = 47,
  HAL_LAYER_ENTRY_BARRIER = 48,
  HAL_LAYER_ENTRY_GROUP_START = 49,
  HAL_LAYER_ENTRY_GROUP_END = 50,
  HAL_LAYER_ENTRY_COUNT_ = 51 /* one past the last value this header knows */
} hal_layer_entry_e;

/* One call on its way to a plugin. Owned by the core; valid during
 * call_begin and call_end of that call only. */
typedef struct hal_layer_call_t {
  size_t struct_size;
  uint32_t entry;      /* hal_layer_entry_e */
  const char* name;    /* the entry's name ("buffer_allocate"); never NULL */
  const char* plugin;  /* the plugin's name ("cpu"); never NULL */
  /* ARG_COUNT pointers to the entry's arguments in declaration order
   * (args[0] points at the first parameter, e.g. a hal_device_t*). The
   * pointees are the caller's: read them; after a successful call the
   * out-parameters they point at hold the results. */
  void* const* args;
  uint32_t arg_count;
  /* Unique in the process (pairs a begin with its end); never 0. */
  uint64_t call_id;
} hal_layer_call_t;

typedef struct hal_layer_s hal_layer_t; /* one layer instance */

/* Arguments to hal_layer_api_t.create. Owned by the caller; valid for the
 * duration of the call. */
typedef struct hal_layer_create_args_t {
  size_t struct_size;
  const hal_extension_base_t* next; /* extension chain; NULL */
  /* The options of `[layer_options.<name>]` in hal.toml, as strings. The
   * layer reads its own environment variables itself. Unknown keys and
   * values that do not parse should be refused with INVALID_ARGUMENT
   * naming the key (or the variable) and the value. */
  const hal_option_t* options;
  size_t option_count;
} hal_layer_create_args_t;

/* What a layer offers. Static in the layer; valid until unload. The first
 * three fields are frozen across all MAJOR versions. */
typedef struct hal_layer_api_t {
  size_t struct_size;
  uint32_t abi_version_major;
  uint32_t abi_version_minor;
  /* Unique short name ("validation"): [a-z0-9_]+. Never NULL. */
  const char* name;
  /* One line for hal-info. Never NULL. */
  const char* description;

  /* Makes an instance: one per runtime, shared by every plugin it loads.
   * The caller owns *out_layer and releases it with destroy, after the
   * last call through it has ended. Required. Errors: INVALID_ARGUMENT (an
   * option or environment variable: names it and its value). */
  hal_status_t* (*create)(const hal_layer_create_args_t* args,
                          hal_layer_t** out_layer);
  void (*destroy)(hal_layer_t* layer);

  /* Before the entry runs. Return NULL to let the call go on, or a status
   * (owned by the caller) that becomes the call's result: the plugin and
   * the layers inside this one are not called, the layers outside see the
   * status in call_end, out-parameters stay untouched. *INOUT_COOKIE
   * (initially NULL) is this layer's per-call slot, handed back to
   * call_end. May be NULL (no work before calls). Thread-safe: called from
   * every thread that calls the plugin. */
  hal_status_t* (*call_begin)(hal_layer_t* layer, const hal_layer_call_t* call,
                              void** inout_cookie);
  /* After the entry ran (or an inner layer failed it): STATUS is its
   * result (NULL: success), owned by this layer now. Return the status to
   * pass outward: STATUS itself, NULL, or another one (then destroy
   * STATUS). Also called, with the status a begin returned, for the layers
   * outside the one that failed the call. May be NULL (pass-through).
   * Thread-safe. */
  hal_status_t* (*call_end)(hal_layer_t* layer, const hal_layer_call_t* call,
                            void* cookie, hal_status_t* status);
} hal_layer_api_t;

/* The entry point type (see the top of this file). */
typedef hal_status_t* (*hal_layer_entry_fn)(const hal_host_api_t* host,
                                            const hal_layer_api_t** out_api);

#define HAL_LAYER_API_MIN_SIZE HAL_STRUCT_SIZE_TO(hal_layer_api_t, call_end)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_LAYER_H_ */
