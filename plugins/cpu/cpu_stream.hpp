// CPU plugin: streams run queued work in order on one worker thread each;
// events complete (and take their timestamp) when that worker reaches them,
// or at once when recorded on an idle stream.
#ifndef HAL_PLUGINS_CPU_CPU_STREAM_HPP_
#define HAL_PLUGINS_CPU_CPU_STREAM_HPP_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "hal/sdk/plugin.hpp"

namespace hal::cpu {

class CpuStream final : public sdk::Stream {
 public:
  explicit CpuStream(sdk::Device& device);
  ~CpuStream() override;  // runs the remaining work, then joins the worker

  // Queues TASK; returns at once. Thread-safe.
  void enqueue(std::function<void()> task);
  // Queues SIGNAL (an event's completion), run under the stream's lock just
  // before the worker reports itself idle: whoever the signal wakes already
  // sees the stream idle when it was the last work. On an idle stream (no
  // work queued or running) it runs now, on the caller, under that lock.
  void enqueue_signal(std::function<void()> signal);

  // Keeps the first error of queued work; synchronize() throws it once.
  void record_error(const sdk::Error& error);

  void synchronize() override;
  bool idle() override;
  void enqueue_host_func(hal_host_func_t fn, void* user_data) override;
  void wait(sdk::Event& event) override;
  void report_error(const sdk::Error& error) override { record_error(error); }

 private:
  void run();

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  struct Item {
    std::function<void()> task;    // run without the lock
    std::function<void()> signal;  // run under the lock, after TASK
  };
  std::deque<Item> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::unique_ptr<sdk::Error> error_;
  std::thread worker_;
};

class CpuEvent final : public sdk::Event {
 public:
  explicit CpuEvent(sdk::Device& device) : sdk::Event(device), state_(std::make_shared<State>()) {}

  void record(sdk::Stream& stream) override;
  bool complete() override;
  void synchronize() override;
  uint64_t nanoseconds_since(sdk::Event& start) override;

  // Blocks until the record current at the time of the call has completed.
  // Shared with stream tasks, so a task may outlive the event object.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t recorded = 0;   // generation of the latest record
    uint64_t completed = 0;  // generation the stream has reached
    std::chrono::steady_clock::time_point timestamp;
    void wait_for(uint64_t generation);
  };
  std::shared_ptr<State> state() const { return state_; }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hal::cpu

#endif  // HAL_PLUGINS_CPU_CPU_STREAM_HPP_
