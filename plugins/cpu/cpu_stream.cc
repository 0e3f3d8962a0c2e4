#include "cpu_stream.hpp"

namespace hal::cpu {

CpuStream::CpuStream(sdk::Device& device) : sdk::Stream(device), worker_([this] { run(); }) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

void CpuStream::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{std::move(task), nullptr});
  }
  work_cv_.notify_one();
}

void CpuStream::enqueue_signal(std::function<void()> signal) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Nothing queued or running: everything before it has completed, so the
    // signal is due now, under the lock as the worker would run it. Its
    // event's timestamp is the record's, not the worker's wake-up (which
    // on a VM can come after the caller's next work).
    if (queue_.empty() && !busy_) {
      signal();
      return;
    }
    queue_.push_back(Item{nullptr, std::move(signal)});
  }
  work_cv_.notify_one();
}

void CpuStream::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    if (item.task) {
      lock.unlock();
      item.task();
      lock.lock();
    }
    if (item.signal) item.signal();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

void CpuStream::record_error(const sdk::Error& error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_) error_ = std::make_unique<sdk::Error>(error);
}

void CpuStream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  if (error_) {
    sdk::Error e = *error_;
    error_.reset();
    throw e;
  }
}

bool CpuStream::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !busy_;
}

void CpuStream::enqueue_host_func(hal_host_func_t fn, void* user_data) {
  enqueue([fn, user_data] { fn(user_data); });
}

void CpuStream::wait(sdk::Event& event) {
  auto state = static_cast<CpuEvent&>(event).state();
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    target = state->recorded;
  }
  if (target == 0) return;  // never recorded: nothing to wait for
  enqueue([state, target] { state->wait_for(target); });
}

void CpuEvent::State::wait_for(uint64_t generation) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return completed >= generation; });
}

void CpuEvent::record(sdk::Stream& stream) {
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    generation = ++state_->recorded;
  }
  static_cast<CpuStream&>(stream).enqueue_signal([state = state_, generation] {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (generation > state->completed) {
        state->completed = generation;
        state->timestamp = std::chrono::steady_clock::now();
      }
    }
    state->cv.notify_all();
  });
}

bool CpuEvent::complete() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->completed >= state_->recorded;
}

void CpuEvent::synchronize() {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    target = state_->recorded;
  }
  state_->wait_for(target);
}

uint64_t CpuEvent::nanoseconds_since(sdk::Event& start_event) {
  auto start = static_cast<CpuEvent&>(start_event).state();
  auto stamp = [](State& s, const char* which) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.recorded == 0) sdk::fail(HAL_STATUS_FAILED_PRECONDITION, which, " event was never recorded");
    if (s.completed < s.recorded)
      sdk::fail(HAL_STATUS_FAILED_PRECONDITION, which, " event has not completed yet");
    return s.timestamp;
  };
  auto t0 = stamp(*start, "start");
  auto t1 = stamp(*state_, "end");
  if (t1 < t0) sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "end event completed before start event");
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

}  // namespace hal::cpu
