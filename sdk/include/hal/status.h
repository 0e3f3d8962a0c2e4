/*
 * HAL C ABI: status objects. See hal/hal.h for the ownership rule.
 */
#ifndef HAL_STATUS_H_
#define HAL_STATUS_H_

#include "hal/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Values are frozen; new ones are appended (MINOR); a reader
 * that sees an unknown code treats it as HAL_STATUS_INTERNAL. */
typedef enum hal_status_code_e {
  HAL_STATUS_OK = 0,                  /* never carried by a status object */
  HAL_STATUS_INVALID_ARGUMENT = 1,    /* a parameter is wrong (NULL, range) */
  HAL_STATUS_UNIMPLEMENTED = 2,       /* entry or feature not provided */
  HAL_STATUS_UNSUPPORTED_DTYPE = 3,   /* dtype not supported by the device */
  HAL_STATUS_OUT_OF_MEMORY = 4,       /* device or host memory exhausted */
  HAL_STATUS_DEVICE_ERROR = 5,        /* the device/driver failed */
  HAL_STATUS_TIMEOUT = 6,             /* a wait ran out of time */
  HAL_STATUS_NOT_FOUND = 7,           /* named thing does not exist */
  HAL_STATUS_OUT_OF_RANGE = 8,        /* index/offset/size past a bound */
  HAL_STATUS_FAILED_PRECONDITION = 9, /* object in the wrong state */
  HAL_STATUS_ALREADY_EXISTS = 10,     /* duplicate name or registration */
  HAL_STATUS_ABI_MISMATCH = 11,       /* incompatible ABI version or size */
  HAL_STATUS_INTERNAL = 12,           /* bug or unexpected failure */
  /* ABI 1.4: the op takes every promoted input in the call's compute dtype
   * (HAL_OP_INPUTS_UNIFORM) and this call has inputs of other dtypes. The
   * caller casts them and calls again (libhal does); nothing was run. */
  HAL_STATUS_MIXED_DTYPES = 13,
  /* ABI 1.6: the object was aborted (a collective communicator after
   * comm_abort or a peer's failure); the message names who and why. */
  HAL_STATUS_ABORTED = 14,
  /* ABI 1.9: the device is gone (driver reset, hardware fault, unplugged):
   * no later call on it can succeed; its buffers' contents are lost. */
  HAL_STATUS_DEVICE_LOST = 15,
  HAL_STATUS_CODE_COUNT_ = 16
} hal_status_code_e;

typedef struct hal_status_t hal_status_t;

/* An error. Created by the callee that failed, then owned by the caller.
 * Immutable until destroyed; may be read from any thread. */
struct hal_status_t {
  size_t struct_size;
  /* A hal_status_code_e value, never HAL_STATUS_OK. */
  uint32_t code;
  /* NUL-terminated UTF-8 that names the plugin, the call and the offending
   * values ("cpu: buffer_allocate: size 0 is not allowed"). Vendor-native
   * error codes travel inside it. Never NULL; owned by the status and valid
   * until destroy. */
  const char* message;
  /* Releases the status and its message. Never NULL. Call exactly once. */
  void (*destroy)(hal_status_t* status);
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_STATUS_H_ */
