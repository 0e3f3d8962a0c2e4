/*
 * HAL C ABI: the stream/event interface (optional; advertised with
 * HAL_CAPABILITY_STREAM).
 *
 * A stream is an in-order queue of device work: every call that takes a
 * stream returns once the work is queued, and queued work runs in the order
 * it was queued, off the caller's thread. Events mark a point in a stream.
 */
#ifndef HAL_STREAM_H_
#define HAL_STREAM_H_

#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A host function run in stream order (no-op marker, callbacks, deferred
 * frees). Runs on a plugin thread; must not call back into the stream that
 * runs it. */
typedef void (*hal_host_func_t)(void* user_data);

typedef struct hal_stream_api_t {
  size_t struct_size;

  /* Creates a stream. FLAGS: 0 (reserved). The caller owns *out_stream and
   * destroys it with stream_destroy. Errors: INVALID_ARGUMENT, DEVICE_ERROR. */
  hal_status_t* (*stream_create)(hal_device_t* device, uint32_t flags,
                                 hal_stream_t** out_stream);
  /* Waits for the stream's queued work, then releases it. Errors:
   * INVALID_ARGUMENT when STREAM is not a live stream (e.g. destroyed). */
  hal_status_t* (*stream_destroy)(hal_stream_t* stream);
  /* Blocks until all queued work has run. Errors: INVALID_ARGUMENT; the
   * first asynchronous failure of queued work since the last synchronize,
   * reported once with its own code (DEVICE_ERROR, or e.g. OUT_OF_RANGE for
   * an op that found an index out of range in device data; such an op
   * writes none of its outputs). */
  hal_status_t* (*stream_synchronize)(hal_stream_t* stream);
  /* *out_idle = true when all queued work has run. Never blocks. */
  hal_status_t* (*stream_query)(hal_stream_t* stream, bool* out_idle);
  /* Queues FN(USER_DATA). FN: non-NULL. */
  hal_status_t* (*stream_enqueue_host_func)(hal_stream_t* stream,
                                            hal_host_func_t fn,
                                            void* user_data);
  /* Makes later work on STREAM wait until EVENT (its latest record) has
   * completed; EVENT may belong to another stream of the same device.
   * Waiting on a never-recorded event is a no-op. */
  hal_status_t* (*stream_wait_event)(hal_stream_t* stream, hal_event_t* event);

  /* Creates an event. FLAGS: 0 (reserved). Caller owns it; destroy with
   * event_destroy. */
  hal_status_t* (*event_create)(hal_device_t* device, uint32_t flags,
                                hal_event_t** out_event);
  /* Errors: INVALID_ARGUMENT when EVENT is not live. */
  hal_status_t* (*event_destroy)(hal_event_t* event);
  /* Captures the current end of STREAM's queue; the event completes (and
   * takes its timestamp) when the stream reaches it. Re-recording replaces
   * the previous capture. */
  hal_status_t* (*event_record)(hal_event_t* event, hal_stream_t* stream);
  /* *out_complete = true when the latest record has completed, or the event
   * was never recorded. Never blocks. */
  hal_status_t* (*event_query)(hal_event_t* event, bool* out_complete);
  /* Blocks until the latest record has completed. */
  hal_status_t* (*event_synchronize)(hal_event_t* event);
  /* Nanoseconds between two completed events' timestamps (END - START).
   * Errors: FAILED_PRECONDITION when either was never recorded or has not
   * completed; INVALID_ARGUMENT when END precedes START or they belong to
   * different devices. */
  hal_status_t* (*event_elapsed_time)(hal_event_t* start, hal_event_t* end,
                                      uint64_t* out_nanoseconds);
} hal_stream_api_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_STREAM_H_ */
