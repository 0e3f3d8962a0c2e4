// OpenCL plugin: a HAL event as the marker command its latest record
// queued on a stream (cl_stream.hpp). A ClEvent holds a reference to that
// marker (released at the next record or destruction); its methods may be
// called from any thread (a mutex guards the marker).
#ifndef HAL_PLUGINS_OPENCL_CL_EVENT_HPP_
#define HAL_PLUGINS_OPENCL_CL_EVENT_HPP_

#include <cstdint>
#include <mutex>

#include "cl_error.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::opencl {

class ClDevice;

class ClEvent final : public sdk::Event {
 public:
  explicit ClEvent(ClDevice& device);
  ~ClEvent() override;
  void record(sdk::Stream& stream) override;
  bool complete() override;
  void synchronize() override;
  uint64_t nanoseconds_since(sdk::Event& start) override;
  // The latest record's marker, or nullptr.
  cl_event marker();

 private:
  std::mutex mutex_;
  cl_event marker_ = nullptr;
};

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_CL_EVENT_HPP_
