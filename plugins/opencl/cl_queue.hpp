// OpenCL plugin: where an op's commands go — a command queue and the status
// words its kernels report data errors into — and how those errors become
// HAL statuses.
#ifndef HAL_PLUGINS_OPENCL_CL_QUEUE_HPP_
#define HAL_PLUGINS_OPENCL_CL_QUEUE_HPP_

#include <cstdint>
#include <string>

#include "cl_error.hpp"

namespace hal::opencl {

// Where an op's commands go. STATUS is a small device buffer kernels write
// data errors into (an index out of range); it is read back and cleared at
// the queue owner's next synchronize.
struct Queue {
  cl_command_queue queue = nullptr;
  cl_mem status = nullptr;
};

// Words of Queue::status: what went wrong, where, and the values.
enum StatusWord { kStatusKind = 0, kStatusSite = 1, kStatusValue = 2, kStatusBound = 3, kStatusWords = 4 };
// kStatusIndexAt: an index out of range whose site is the whole message,
// with "{value}" and "{position}" standing for the status words.
enum StatusKind {
  kStatusOk = 0,
  kStatusIndexOutOfRange = 1,
  kStatusDivisionByZero = 2,
  kStatusInvalidValue = 3,
  kStatusIndexAt = 4
};
// OUT_OF_RANGE "<site>: <value> at position <position>": the value word holds
// a long (kStatusValueOutOfRange) or a double's bits (kStatusFloatOutOfRange),
// the bound word the value's row-major position.
enum StatusKindOutOfRange { kStatusValueOutOfRange = 5, kStatusFloatOutOfRange = 6 };

// Registers a human-readable place a kernel may report a data error from
// ("gather: index") and returns its id (stable, deduplicated).
int64_t status_site(const std::string& text);

// Reads QUEUE's status words (after the queue finished); when a kernel
// reported an error, clears them and throws the matching HAL status.
void check_queue_status(const Queue& queue);

// A new in-order command queue of DEVICE with profiling enabled (events
// time commands). Owned by the caller (clReleaseCommandQueue). Throws the
// OpenCL error as a HAL status.
cl_command_queue make_queue(cl_context context, cl_device_id device);

// A new status buffer (kStatusWords zeroed longs) written through QUEUE.
// Owned by the caller (clReleaseMemObject). Throws the OpenCL error.
cl_mem status_buffer(cl_context context, cl_command_queue queue);

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_CL_QUEUE_HPP_
