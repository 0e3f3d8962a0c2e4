/*
 * HAL C ABI: typed extension chains (ABI 1.3), modelled on PJRT's
 * PJRT_Extension_Base.
 *
 * A struct that crosses the boundary may carry a `next` field: a singly
 * linked chain of extension structs, each starting with a
 * hal_extension_base_t, that adds data to the call or table without a new
 * entry or a new field. Whoever fills the struct owns the chain; it lives as
 * long as the struct it hangs off (for call arguments: the duration of the
 * call; for hal_plugin_api_t and hal_host_api_t: until the library is
 * unloaded). Readers never write to a chain and never keep pointers into a
 * call's chain after the call returns.
 *
 * RULES FOR READERS
 *   - An element whose type the reader does not know is skipped (that is what
 *     makes an extension a MINOR addition): a newer writer's extensions are
 *     invisible to an older reader.
 *   - A known type is read only up to its element's struct_size (as every
 *     other struct; HAL_STRUCT_HAS_FIELD).
 *   - A malformed chain is refused with HAL_STATUS_INVALID_ARGUMENT (the core
 *     skips a plugin whose hal_plugin_api_t chain is malformed) and a message
 *     naming the struct, the element's position (0 = the element `next`
 *     points at) and the offending value. Malformed means: an element with
 *     struct_size < sizeof(hal_extension_base_t), an element of type
 *     HAL_EXTENSION_TYPE_INVALID (0), or a cycle. Readers detect cycles in
 *     bounded time (the C++ reader is hal/common/extension.hpp).
 *
 * RULES FOR WRITERS
 *   - Set struct_size to sizeof() of the extension struct, type to its id
 *     and next to the following element or NULL.
 *   - Each type appears at most once in a chain (readers use the first).
 */
#ifndef HAL_EXTENSION_H_
#define HAL_EXTENSION_H_

#include "hal/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The header every extension struct starts with:
 *
 *   typedef struct acme_tuning_ext_t {
 *     hal_extension_base_t base;   // type = ACME_EXTENSION_TYPE_TUNING
 *     uint32_t workgroup_size;
 *   } acme_tuning_ext_t;
 */
typedef struct hal_extension_base_t {
  size_t struct_size; /* sizeof() of the whole extension struct */
  uint32_t type;      /* a hal_extension_type_e or a vendor-private id */
  const struct hal_extension_base_t* next; /* the following element; NULL ends */
} hal_extension_base_t;

/* Registry of standard extension type ids. Values are frozen; new ones are
 * appended (MINOR) together with their struct, in the header of the table
 * or call they extend. */
typedef enum hal_extension_type_e {
  /* Never a valid type: an element carrying it (typically a zero-filled
   * struct whose type was never set) makes the chain malformed. */
  HAL_EXTENSION_TYPE_INVALID = 0,
  /* ABI 1.7: hal_graph_constants_t on hal_graph_t.next (hal/graph.h). */
  HAL_EXTENSION_TYPE_GRAPH_CONSTANTS = 1,
  /* ABI 1.14: hal_graph_output_aliases_t on hal_graph_t.next (hal/graph.h). */
  HAL_EXTENSION_TYPE_GRAPH_OUTPUT_ALIASES = 2,
  HAL_EXTENSION_TYPE_COUNT_ = 3 /* one past the last standard id this header knows */
} hal_extension_type_e;

/* Ids in [HAL_EXTENSION_TYPE_VENDOR_FIRST, HAL_EXTENSION_TYPE_VENDOR_LAST]
 * are vendor-private: never assigned by HAL, meaningful only between a
 * vendor's own plugin and its own host-side code (pick ids from a hash of
 * the vendor name to avoid clashes between vendors). Macros, not enum
 * values, because C enum constants must fit in an int. */
#define HAL_EXTENSION_TYPE_VENDOR_FIRST 0x80000000u
#define HAL_EXTENSION_TYPE_VENDOR_LAST 0xFFFFFFFFu

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_EXTENSION_H_ */
