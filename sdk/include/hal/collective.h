/*
 * HAL C ABI: the collective communication (all-reduce, broadcast, ...) interface (optional; advertised with
 * HAL_CAPABILITY_COLLECTIVE).
 *
 * Declared now so the entry point and negotiation are fixed; its entries are
 * appended in later MINOR versions. A plugin that does not implement it
 * leaves hal_plugin_api_t.collective NULL.
 */
#ifndef HAL_COLLECTIVE_H_
#define HAL_COLLECTIVE_H_

#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hal_collective_api_t {
  size_t struct_size;
  /* Entries are appended here (MINOR). */
} hal_collective_api_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_COLLECTIVE_H_ */
