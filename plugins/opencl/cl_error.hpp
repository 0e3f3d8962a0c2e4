// OpenCL plugin: turning OpenCL error codes into HAL statuses that name the
// call and the native code (the vendor's code travels inside the message),
// and string queries of platforms and devices.
#ifndef HAL_PLUGINS_OPENCL_CL_ERROR_HPP_
#define HAL_PLUGINS_OPENCL_CL_ERROR_HPP_

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include <string>

#include "hal/sdk/status.hpp"

namespace hal::opencl {

// "CL_OUT_OF_RESOURCES" for -5; "CL error -1234" for codes it does not know.
const char* cl_error_name(cl_int code);

// Throws when CODE is not CL_SUCCESS: OUT_OF_MEMORY for the allocation
// failures, DEVICE_ERROR otherwise, naming CALL and the OpenCL code.
template <class... Context>
void cl_check(cl_int code, const char* call, const Context&... context) {
  if (code == CL_SUCCESS) return;
  hal_status_code_e status =
      (code == CL_MEM_OBJECT_ALLOCATION_FAILURE || code == CL_OUT_OF_HOST_MEMORY || code == CL_INVALID_BUFFER_SIZE)
          ? HAL_STATUS_OUT_OF_MEMORY
          : HAL_STATUS_DEVICE_ERROR;
  sdk::fail(status, call, " failed with ", cl_error_name(code), " (", code, ")", context...);
}

// A string property of a platform or device ("" when the query fails).
std::string platform_info_string(cl_platform_id platform, cl_platform_info what);
std::string device_info_string(cl_device_id device, cl_device_info what);

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_CL_ERROR_HPP_
