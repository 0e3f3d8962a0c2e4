#include "cl_queue.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "hal/sdk/plugin.hpp"

namespace hal::opencl {
namespace {

std::mutex& sites_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& sites() {
  static auto* s = new std::vector<std::string>{"(unknown)"};
  return *s;
}

}  // namespace

cl_mem status_buffer(cl_context context, cl_command_queue queue) {
  cl_int err = CL_SUCCESS;
  cl_mem status = clCreateBuffer(context, CL_MEM_READ_WRITE, kStatusWords * sizeof(cl_long), nullptr, &err);
  cl_check(err, "clCreateBuffer", " (stream status words)");
  const cl_long zeros[kStatusWords] = {};
  err = clEnqueueWriteBuffer(queue, status, CL_TRUE, 0, sizeof(zeros), zeros, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) clReleaseMemObject(status);
  cl_check(err, "clEnqueueWriteBuffer", " (stream status words)");
  return status;
}

cl_command_queue make_queue(cl_context context, cl_device_id device) {
  const cl_queue_properties props[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  cl_int err = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueueWithProperties(context, device, props, &err);
  cl_check(err, "clCreateCommandQueueWithProperties");
  return q;
}

int64_t status_site(const std::string& text) {
  std::lock_guard<std::mutex> lock(sites_mutex());
  auto& s = sites();
  auto it = std::find(s.begin(), s.end(), text);
  if (it != s.end()) return it - s.begin();
  s.push_back(text);
  return static_cast<int64_t>(s.size() - 1);
}

void check_queue_status(const Queue& queue) {
  cl_long words[kStatusWords] = {};
  cl_check(clEnqueueReadBuffer(queue.queue, queue.status, CL_TRUE, 0, sizeof(words), words, 0, nullptr, nullptr),
           "clEnqueueReadBuffer", " (stream status words)");
  if (words[kStatusKind] == kStatusOk) return;
  const cl_long zeros[kStatusWords] = {};
  cl_check(clEnqueueWriteBuffer(queue.queue, queue.status, CL_TRUE, 0, sizeof(zeros), zeros, 0, nullptr, nullptr),
           "clEnqueueWriteBuffer", " (stream status words)");
  std::string site;
  {
    std::lock_guard<std::mutex> lock(sites_mutex());
    auto& s = sites();
    site = words[kStatusSite] >= 0 && static_cast<size_t>(words[kStatusSite]) < s.size() ? s[words[kStatusSite]]
                                                                                            : s[0];
  }
  if (words[kStatusKind] == kStatusIndexAt) {
    auto put = [&site](const std::string& key, cl_long v) {
      size_t at = site.find(key);
      if (at != std::string::npos) site.replace(at, key.size(), std::to_string(v));
    };
    put("{value}", words[kStatusValue]);
    put("{position}", words[kStatusBound]);
    sdk::fail(HAL_STATUS_OUT_OF_RANGE, site, "; no output was written");
  }
  if (words[kStatusKind] == kStatusValueOutOfRange || words[kStatusKind] == kStatusFloatOutOfRange) {
    double as_double = 0;
    std::memcpy(&as_double, &words[kStatusValue], sizeof(as_double));
    if (words[kStatusKind] == kStatusFloatOutOfRange)
      sdk::fail(HAL_STATUS_OUT_OF_RANGE, site, ": ", as_double, " at position ", words[kStatusBound],
                "; no output was written");
    sdk::fail(HAL_STATUS_OUT_OF_RANGE, site, ": ", words[kStatusValue], " at position ", words[kStatusBound],
              "; no output was written");
  }
  // Value checks report the value and its row-major position in the input.
  if (words[kStatusKind] == kStatusInvalidValue || words[kStatusKind] == kStatusDivisionByZero)
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, site, " is ", words[kStatusValue], " at position ", words[kStatusBound],
              "; no output was written");
  sdk::fail(HAL_STATUS_OUT_OF_RANGE, site, ": index ", words[kStatusValue], " is out of range for a dimension of size ",
            words[kStatusBound], "; no output was written");
}

}  // namespace hal::opencl
