/* Compiles every public C header as plain C11 (-Wpedantic -Werror) and checks
 * the frozen layout facts the loader relies on. */
#include "hal/collective.h"
#include "hal/device.h"
#include "hal/extension.h"
#include "hal/graph.h"
#include "hal/hal.h"
#include "hal/memory.h"
#include "hal/op.h"
#include "hal/plugin.h"
#include "hal/status.h"
#include "hal/stream.h"
#include "hal/types.h"

int main(void) {
  int failures = 0;
  /* The first three fields of the plugin and host tables are frozen. */
  if (offsetof(hal_plugin_api_t, struct_size) != 0) ++failures;
  if (offsetof(hal_plugin_api_t, abi_version_major) != sizeof(size_t)) ++failures;
  if (offsetof(hal_host_api_t, abi_version_minor) != sizeof(size_t) + 4) ++failures;
  if (HAL_PLUGIN_API_MIN_SIZE > sizeof(hal_plugin_api_t)) ++failures;
  if (HAL_MEMORY_API_MIN_SIZE >= sizeof(hal_memory_api_t)) ++failures; /* memory_get_info is optional */
  if (HAL_DTYPE_BIT(HAL_DTYPE_BOOL) != 1024u) ++failures;
  /* A 1.0/1.1 graph table (struct_size only) is accepted and covers no entry. */
  if (HAL_GRAPH_API_MIN_SIZE != sizeof(size_t)) ++failures;
  if (HAL_GRAPH_API_MIN_SIZE >= HAL_STRUCT_SIZE_TO(hal_graph_api_t, graph_partition)) ++failures;
  if (HAL_GRAPH_NO_VALUE != 0xFFFFFFFFu) ++failures;
  /* ABI 1.3: the extension base, and `next` appended after the 1.0 tables. */
  if (offsetof(hal_extension_base_t, type) != sizeof(size_t)) ++failures;
  if (offsetof(hal_extension_base_t, next) != 2 * sizeof(size_t)) ++failures;
  if (HAL_EXTENSION_TYPE_INVALID != 0) ++failures;
  if (HAL_EXTENSION_TYPE_VENDOR_FIRST <= HAL_EXTENSION_TYPE_COUNT_) ++failures;
  if (offsetof(hal_plugin_api_t, next) < HAL_PLUGIN_API_MIN_SIZE) ++failures;
  if (offsetof(hal_host_api_t, next) < HAL_STRUCT_SIZE_TO(hal_host_api_t, log)) ++failures;
  {
    /* A typed chain hangs off the void* fields without casts in C. */
    hal_extension_base_t ext = {sizeof(hal_extension_base_t), HAL_EXTENSION_TYPE_VENDOR_FIRST, NULL};
    hal_op_args_t args = {0};
    args.next = &ext;
    if (((const hal_extension_base_t*)args.next)->type != HAL_EXTENSION_TYPE_VENDOR_FIRST) ++failures;
  }
  {
    hal_executable_info_t info;
    if (sizeof(info.description) != 256) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
