/*
 * HAL C ABI: the graph compile (claim, compile, execute HAL graph IR) interface (optional; advertised with
 * HAL_CAPABILITY_GRAPH).
 *
 * Declared now so the entry point and negotiation are fixed; its entries are
 * appended in later MINOR versions. A plugin that does not implement it
 * leaves hal_plugin_api_t.graph NULL.
 */
#ifndef HAL_GRAPH_H_
#define HAL_GRAPH_H_

#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hal_graph_api_t {
  size_t struct_size;
  /* Entries are appended here (MINOR). */
} hal_graph_api_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_GRAPH_H_ */
