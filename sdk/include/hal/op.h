/*
 * HAL C ABI: the operator (standard op catalog: resolve, query, launch) interface (optional; advertised with
 * HAL_CAPABILITY_OPERATOR).
 *
 * Declared now so the entry point and negotiation are fixed; its entries are
 * appended in later MINOR versions. A plugin that does not implement it
 * leaves hal_plugin_api_t.op NULL.
 */
#ifndef HAL_OP_H_
#define HAL_OP_H_

#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hal_op_api_t {
  size_t struct_size;
  /* Entries are appended here (MINOR). */
} hal_op_api_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_OP_H_ */
