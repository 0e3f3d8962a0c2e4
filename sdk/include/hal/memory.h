/*
 * HAL C ABI: the memory interface (required of every plugin).
 *
 * Copies and fills take an optional stream. With stream == NULL the call is
 * synchronous: it returns when the bytes are in place, and it is NOT ordered
 * against work queued on any stream (synchronise first). With a stream the
 * call is queued behind earlier work on that stream and returns at once; host
 * memory passed to it must stay valid and unchanged until the stream has run
 * the copy (synchronise the stream or an event recorded after it).
 *
 * Bounds: offset + size must lie within the buffer; a copy past a buffer's
 * end fails with OUT_OF_RANGE naming the buffer size, offset and size, and
 * nothing is copied.
 */
#ifndef HAL_MEMORY_H_
#define HAL_MEMORY_H_

#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a buffer is. Filled by buffer_get_info; same rules as properties. */
typedef struct hal_buffer_info_t {
  size_t struct_size;
  uint64_t size;          /* bytes requested at allocation */
  hal_device_t* device;   /* device that owns the buffer */
  /* Host address of byte 0 when the device has
   * HAL_DEVICE_FLAG_HOST_ACCESSIBLE_MEMORY, else NULL. Valid until free. */
  void* host_pointer;
} hal_buffer_info_t;

typedef struct hal_memory_api_t {
  size_t struct_size;

  /* Allocates SIZE bytes of device memory aligned to ALIGNMENT (0 means the
   * device's min_buffer_alignment; otherwise a power of two). Contents are
   * undefined. The caller owns *out_buffer and frees it with buffer_free.
   * Errors: INVALID_ARGUMENT (size 0, alignment not a power of two, NULL),
   * OUT_OF_MEMORY (larger than the device's memory or allocation failed). */
  hal_status_t* (*buffer_allocate)(hal_device_t* device, uint64_t size,
                                   uint64_t alignment,
                                   hal_buffer_t** out_buffer);

  /* Frees a buffer. Work still queued that uses it must have completed.
   * Errors: INVALID_ARGUMENT when BUFFER is NULL or not a live buffer of this
   * plugin (for example freed twice); nothing is freed then. */
  hal_status_t* (*buffer_free)(hal_buffer_t* buffer);

  /* Describes a live buffer. Errors: INVALID_ARGUMENT. */
  hal_status_t* (*buffer_get_info)(hal_buffer_t* buffer,
                                   hal_buffer_info_t* inout_info);

  /* Page-locked host memory suitable for fast async copies. The caller owns
   * *out_pointer and frees it with host_free on the same device.
   * Errors: INVALID_ARGUMENT (size 0), OUT_OF_MEMORY. */
  hal_status_t* (*host_allocate)(hal_device_t* device, uint64_t size,
                                 void** out_pointer);
  /* Errors: INVALID_ARGUMENT when POINTER did not come from host_allocate
   * of this device or was freed already. */
  hal_status_t* (*host_free)(hal_device_t* device, void* pointer);

  /* Host -> device. SRC: non-NULL host memory of SIZE bytes (see the stream
   * rule above). Errors: INVALID_ARGUMENT, OUT_OF_RANGE, DEVICE_ERROR. */
  hal_status_t* (*copy_host_to_device)(hal_buffer_t* dst, uint64_t dst_offset,
                                       const void* src, uint64_t size,
                                       hal_stream_t* stream);
  /* Device -> host. */
  hal_status_t* (*copy_device_to_host)(void* dst, hal_buffer_t* src,
                                       uint64_t src_offset, uint64_t size,
                                       hal_stream_t* stream);
  /* Device -> device, same plugin. Overlapping ranges of the same buffer
   * behave like memmove. */
  hal_status_t* (*copy_device_to_device)(hal_buffer_t* dst,
                                         uint64_t dst_offset,
                                         hal_buffer_t* src,
                                         uint64_t src_offset, uint64_t size,
                                         hal_stream_t* stream);
  /* Sets SIZE bytes at OFFSET to VALUE. */
  hal_status_t* (*buffer_fill)(hal_buffer_t* dst, uint64_t offset,
                               uint64_t size, uint8_t value,
                               hal_stream_t* stream);

  /* Free and total device memory in bytes. Errors: INVALID_ARGUMENT. */
  hal_status_t* (*memory_get_info)(hal_device_t* device, uint64_t* out_free,
                                   uint64_t* out_total);
} hal_memory_api_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_MEMORY_H_ */
