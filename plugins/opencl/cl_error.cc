#include "cl_error.hpp"

namespace hal::opencl {

const char* cl_error_name(cl_int code) {
  switch (code) {
#define HAL_CL_ERR_(name) \
  case name: return #name;
    HAL_CL_ERR_(CL_DEVICE_NOT_FOUND)
    HAL_CL_ERR_(CL_DEVICE_NOT_AVAILABLE)
    HAL_CL_ERR_(CL_COMPILER_NOT_AVAILABLE)
    HAL_CL_ERR_(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    HAL_CL_ERR_(CL_OUT_OF_RESOURCES)
    HAL_CL_ERR_(CL_OUT_OF_HOST_MEMORY)
    HAL_CL_ERR_(CL_PROFILING_INFO_NOT_AVAILABLE)
    HAL_CL_ERR_(CL_MEM_COPY_OVERLAP)
    HAL_CL_ERR_(CL_BUILD_PROGRAM_FAILURE)
    HAL_CL_ERR_(CL_MAP_FAILURE)
    HAL_CL_ERR_(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    HAL_CL_ERR_(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    HAL_CL_ERR_(CL_COMPILE_PROGRAM_FAILURE)
    HAL_CL_ERR_(CL_LINK_PROGRAM_FAILURE)
    HAL_CL_ERR_(CL_INVALID_VALUE)
    HAL_CL_ERR_(CL_INVALID_DEVICE_TYPE)
    HAL_CL_ERR_(CL_INVALID_PLATFORM)
    HAL_CL_ERR_(CL_INVALID_DEVICE)
    HAL_CL_ERR_(CL_INVALID_CONTEXT)
    HAL_CL_ERR_(CL_INVALID_QUEUE_PROPERTIES)
    HAL_CL_ERR_(CL_INVALID_COMMAND_QUEUE)
    HAL_CL_ERR_(CL_INVALID_HOST_PTR)
    HAL_CL_ERR_(CL_INVALID_MEM_OBJECT)
    HAL_CL_ERR_(CL_INVALID_BINARY)
    HAL_CL_ERR_(CL_INVALID_BUILD_OPTIONS)
    HAL_CL_ERR_(CL_INVALID_PROGRAM)
    HAL_CL_ERR_(CL_INVALID_PROGRAM_EXECUTABLE)
    HAL_CL_ERR_(CL_INVALID_KERNEL_NAME)
    HAL_CL_ERR_(CL_INVALID_KERNEL)
    HAL_CL_ERR_(CL_INVALID_ARG_INDEX)
    HAL_CL_ERR_(CL_INVALID_ARG_VALUE)
    HAL_CL_ERR_(CL_INVALID_ARG_SIZE)
    HAL_CL_ERR_(CL_INVALID_KERNEL_ARGS)
    HAL_CL_ERR_(CL_INVALID_WORK_DIMENSION)
    HAL_CL_ERR_(CL_INVALID_WORK_GROUP_SIZE)
    HAL_CL_ERR_(CL_INVALID_WORK_ITEM_SIZE)
    HAL_CL_ERR_(CL_INVALID_GLOBAL_OFFSET)
    HAL_CL_ERR_(CL_INVALID_EVENT_WAIT_LIST)
    HAL_CL_ERR_(CL_INVALID_EVENT)
    HAL_CL_ERR_(CL_INVALID_OPERATION)
    HAL_CL_ERR_(CL_INVALID_BUFFER_SIZE)
    HAL_CL_ERR_(CL_INVALID_GLOBAL_WORK_SIZE)
#undef HAL_CL_ERR_
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "an unknown OpenCL error";
  }
}

namespace {
// QUERY(size, value, size_ret) is clGetPlatformInfo/clGetDeviceInfo bound
// to one object and property.
template <class Query>
std::string info_string(Query query) {
  size_t size = 0;
  if (query(0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  if (query(size, s.data(), nullptr) != CL_SUCCESS) return "";
  s.resize(size - 1);
  return s;
}
}  // namespace

std::string platform_info_string(cl_platform_id platform, cl_platform_info what) {
  return info_string([&](size_t n, void* v, size_t* r) { return clGetPlatformInfo(platform, what, n, v, r); });
}

std::string device_info_string(cl_device_id device, cl_device_info what) {
  return info_string([&](size_t n, void* v, size_t* r) { return clGetDeviceInfo(device, what, n, v, r); });
}

}  // namespace hal::opencl
