// OpenCL plugin: a HAL stream as an in-order OpenCL command queue with its
// own status words (cl_queue.hpp). A ClStream owns the queue and status
// buffer it is made with (released at destruction, after the queue
// finished); its methods may be called from any thread (OpenCL queues are
// thread-safe, a mutex guards the idle() bookkeeping).
#ifndef HAL_PLUGINS_OPENCL_CL_STREAM_HPP_
#define HAL_PLUGINS_OPENCL_CL_STREAM_HPP_

#include <memory>
#include <mutex>

#include "cl_queue.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::opencl {

class ClDevice;

class ClStream final : public sdk::Stream {
 public:
  ClStream(ClDevice& device, cl_command_queue queue, cl_mem status);
  ~ClStream() override;
  void synchronize() override;
  bool idle() override;
  void enqueue_host_func(hal_host_func_t fn, void* user_data) override;
  void wait(sdk::Event& event) override;
  // Kept and thrown once by the next synchronize (host functions' failures).
  void report_error(const sdk::Error& error) override;
  const Queue& queue() const { return queue_; }
  // Bookkeeping for idle(): work was queued (its end is unknown), or a
  // marker (an event's record) is now the queue's last command.
  void note_work();
  void note_marker(cl_event marker);

 private:
  Queue queue_;
  // What idle() knows of the queue's end: nothing queued since the last
  // synchronize (TAIL_ null, DIRTY false), a marker that is its last command
  // (TAIL_), or unknown (DIRTY).
  std::mutex error_mutex_;
  std::unique_ptr<sdk::Error> error_;
  std::mutex tail_mutex_;
  cl_event tail_ = nullptr;
  bool dirty_ = false;
};

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_CL_STREAM_HPP_
