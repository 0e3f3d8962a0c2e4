#include "hal/runtime/caching_allocator.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "hal/runtime/error.hpp"

namespace hal {
namespace {
constexpr uint64_t kSmallGranule = 512;
constexpr uint64_t kLargeThreshold = 1ull << 20;
constexpr uint64_t kLargeGranule = 2ull << 20;

// A cached block may serve a smaller request if the waste stays bounded.
bool fits(uint64_t block_size, uint64_t rounded) {
  return rounded < kLargeThreshold ? block_size <= 2 * rounded : block_size <= rounded + rounded / 8;
}
}  // namespace

uint64_t CachingAllocator::round_size(uint64_t size) {
  const uint64_t g = size < kLargeThreshold ? kSmallGranule : kLargeGranule;
  if (size > UINT64_MAX - g) return size;  // absurd sizes go to the plugin as-is and fail there
  return (size + g - 1) / g * g;
}

CachingAllocator::CachingAllocator(hal_device_t* device, const hal_memory_api_t* memory,
                                   const hal_stream_api_t* streams, uint64_t alignment, bool enabled)
    : device_(device), memory_(memory), streams_(streams), alignment_(alignment), enabled_(enabled) {
  // Stream-aware deferral needs events; without them cross-stream frees wait
  // for the stream synchronously instead (see release()).
}

CachingAllocator::~CachingAllocator() {
  try {
    empty_cache();
  } catch (...) {
  }
  for (hal_event_t* e : event_pool_) {
    hal_status_t* s = streams_->event_destroy ? streams_->event_destroy(e) : nullptr;
    if (s) s->destroy(s);
  }
}

CachingAllocator::Block* CachingAllocator::allocate(uint64_t size, hal_stream_t* stream) {
  if (size == 0) throw Error(HAL_STATUS_INVALID_ARGUMENT, "allocate: size 0 is not allowed");
  const uint64_t rounded = enabled_ ? round_size(size) : size;
  std::lock_guard<std::mutex> lock(mu_);
  Block* block = nullptr;
  if (enabled_) {
    process_pending_locked();
    process_returning_locked();
    auto it = free_.lower_bound({stream, rounded});
    if (it != free_.end() && it->first.first == stream && fits(it->first.second, rounded)) {
      block = it->second;
      spare_nodes_.push_back(free_.extract(it));
      ++stats_.cache_hits;
    }
  }
  if (block == nullptr) {
    if (enabled_) collect_locked(rounded, stream);
    hal_buffer_t* buffer = nullptr;
    hal_status_t* status = memory_->buffer_allocate(device_, rounded, alignment_, &buffer);
    if (status != nullptr && status->code == HAL_STATUS_OUT_OF_MEMORY && (!free_.empty() || !returning_.empty())) {
      status->destroy(status);  // retry once with the cache returned to the plugin
      ++stats_.alloc_retries;
      for (auto& [key, cached] : free_) free_block_locked(cached);
      free_.clear();
      wait_returning_locked();
      status = memory_->buffer_allocate(device_, rounded, alignment_, &buffer);
    }
    throw_if_error(status);
    block = new Block();
    block->buffer = buffer;
    block->size = rounded;
    ++stats_.plugin_allocations;
    stats_.reserved_bytes += rounded;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  block->requested = size;
  block->stream = stream;
  block->used_on.clear();
  ++stats_.allocations;
  stats_.allocated_bytes += block->size;
  stats_.requested_bytes += size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return block;
}

void CachingAllocator::record_stream(Block* block, hal_stream_t* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream == nullptr || stream == block->stream) return;
  if (std::find(block->used_on.begin(), block->used_on.end(), stream) == block->used_on.end())
    block->used_on.push_back(stream);
}

hal_event_t* CachingAllocator::take_event_locked() {
  if (!event_pool_.empty()) {
    hal_event_t* e = event_pool_.back();
    event_pool_.pop_back();
    return e;
  }
  hal_event_t* e = nullptr;
  throw_if_error(streams_->event_create(device_, 0, &e));
  return e;
}

void CachingAllocator::release(Block* block) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes -= block->size;
  stats_.requested_bytes -= block->requested;
  if (!enabled_) {
    free_block_locked(block);
    return;
  }
  Pending pending{block, {}};
  for (hal_stream_t* s : block->used_on) {
    const bool can_defer = streams_->event_create && streams_->event_record && streams_->event_query;
    try {
      if (!can_defer) {
        if (streams_->stream_synchronize) throw_if_error(streams_->stream_synchronize(s));
        continue;
      }
      hal_event_t* e = take_event_locked();
      hal_status_t* st = streams_->event_record(e, s);
      if (st != nullptr) {  // stream already destroyed: its work is complete
        st->destroy(st);
        event_pool_.push_back(e);
        continue;
      }
      pending.events.push_back(e);
    } catch (...) {
      // No event could be made: the block is not safe to reuse; give it back.
      for (hal_event_t* e : pending.events) event_pool_.push_back(e);
      free_block_locked(block);
      return;
    }
  }
  if (pending.events.empty())
    cache_locked(block);
  else
    pending_.push_back(std::move(pending));
}

void CachingAllocator::cache_locked(Block* block) {
  block->released_at = ++release_clock_;
  if (spare_nodes_.empty()) {
    free_.insert({{block->stream, block->size}, block});
    return;
  }
  FreeMap::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.key() = {block->stream, block->size};
  node.mapped() = block;
  free_.insert(std::move(node));
}

void CachingAllocator::process_pending_locked() {
  for (size_t i = 0; i < pending_.size();) {
    bool done = true;
    for (hal_event_t* e : pending_[i].events) {
      bool complete = false;
      hal_status_t* st = streams_->event_query(e, &complete);
      if (st != nullptr) {
        st->destroy(st);
        complete = false;
      }
      if (!complete) {
        done = false;
        break;
      }
    }
    if (done) {
      for (hal_event_t* e : pending_[i].events) event_pool_.push_back(e);
      cache_locked(pending_[i].block);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void CachingAllocator::collect_locked(uint64_t incoming, hal_stream_t* stream) {
  // Without splitting, cached blocks of sizes no longer asked for would stay
  // reserved forever; on a miss (already a plugin call) the oldest go back
  // until the reserve is within kReserveLimit of what is in use.
  uint64_t taken = 0;
  const auto over_limit = [&] {
    const long double in_use = static_cast<long double>(stats_.allocated_bytes + incoming);
    const long double kept = static_cast<long double>(stats_.reserved_bytes - returning_bytes_ - taken + incoming);
    return kept > kReserveLimit * in_use;
  };
  // Only STREAM's blocks: they are ordered before this request on its
  // stream, as a reuse would be.
  std::vector<Block*> victims;
  while (over_limit()) {
    auto first = free_.lower_bound({stream, 0}), last = free_.lower_bound({stream, UINT64_MAX});
    if (first == last) break;
    auto oldest = first;
    for (auto it = first; it != last; ++it)
      if (it->second->released_at < oldest->second->released_at) oldest = it;
    victims.push_back(oldest->second);
    taken += oldest->second->size;
    spare_nodes_.push_back(free_.extract(oldest));
  }
  if (victims.empty()) return;
  if (stream == nullptr) {  // NULL stream: its work completed on return
    for (Block* b : victims) free_block_locked(b);
    return;
  }
  // The victims' last kernels may still be queued on STREAM: reuse would be
  // ordered after them, but handing them back to the plugin is not. An event
  // behind that work frees them later without stalling this caller.
  if (streams_->event_create && streams_->event_record && streams_->event_query) {
    hal_event_t* e = nullptr;
    try {
      e = take_event_locked();
    } catch (...) {
      e = nullptr;
    }
    if (e != nullptr) {
      hal_status_t* st = streams_->event_record(e, stream);
      if (st == nullptr) {
        returning_bytes_ += taken;
        returning_.push_back({std::move(victims), e});
        return;
      }
      st->destroy(st);
      event_pool_.push_back(e);
    }
  }
  hal_status_t* st = streams_->stream_synchronize ? streams_->stream_synchronize(stream) : nullptr;
  if (streams_->stream_synchronize == nullptr || st != nullptr) {  // cannot prove the blocks idle: keep them
    if (st != nullptr) st->destroy(st);
    for (Block* b : victims) cache_locked(b);
    return;
  }
  for (Block* b : victims) free_block_locked(b);
}

void CachingAllocator::finish_returning_locked(Returning& r) {
  for (Block* b : r.blocks) {
    returning_bytes_ -= b->size;
    free_block_locked(b);
  }
  event_pool_.push_back(r.event);
}

void CachingAllocator::process_returning_locked() {
  for (size_t i = 0; i < returning_.size();) {
    bool complete = false;
    hal_status_t* st = streams_->event_query(returning_[i].event, &complete);
    if (st != nullptr) {
      st->destroy(st);
      complete = false;
    }
    if (complete) {
      finish_returning_locked(returning_[i]);
      returning_.erase(returning_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void CachingAllocator::wait_returning_locked() {
  for (Returning& r : returning_) {
    if (streams_->event_synchronize) {
      hal_status_t* s = streams_->event_synchronize(r.event);
      if (s) s->destroy(s);
    } else {
      for (bool complete = false; !complete;) {
        hal_status_t* s = streams_->event_query(r.event, &complete);
        if (s != nullptr) {
          s->destroy(s);
          break;
        }
        if (!complete) std::this_thread::yield();
      }
    }
    finish_returning_locked(r);
  }
  returning_.clear();
}

void CachingAllocator::free_block_locked(Block* block) {
  hal_status_t* s = memory_->buffer_free(block->buffer);
  if (s != nullptr) s->destroy(s);  // nothing sane to do; the plugin reported it
  ++stats_.plugin_frees;
  stats_.reserved_bytes -= block->size;
  delete block;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Pending& p : pending_) {
    for (hal_event_t* e : p.events) {
      if (streams_->event_synchronize) {
        hal_status_t* s = streams_->event_synchronize(e);
        if (s) s->destroy(s);
      }
      event_pool_.push_back(e);
    }
    cache_locked(p.block);
  }
  pending_.clear();
  wait_returning_locked();
  for (auto& [key, block] : free_) free_block_locked(block);
  free_.clear();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

}  // namespace hal
