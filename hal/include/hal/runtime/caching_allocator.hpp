// HAL runtime: the per-device caching allocator.
//
// Freed device memory is kept and handed out again without reaching the
// plugin. A block is reused only by allocations on the stream it was last
// allocated on (stream order makes that safe); a block that was also used on
// other streams (Buffer::record_stream) returns to the cache only after
// events recorded on those streams at free time have completed. Blocks are
// not split: when a request misses the cache while the reserve (in use +
// cached) exceeds kReserveLimit times what would then be in use, the least
// recently freed cached blocks of the request's stream go back to the plugin
// first, so reserved memory stays within that factor of peak use on a
// single stream. Collection never blocks the caller: those blocks' last
// kernels may still be queued on the stream, so they are freed once an event
// recorded behind that work has completed (checked on later allocations, and
// waited for by empty_cache). Thread-safe.
#ifndef HAL_RUNTIME_CACHING_ALLOCATOR_HPP_
#define HAL_RUNTIME_CACHING_ALLOCATOR_HPP_

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "hal/hal.h"

namespace hal {

struct AllocatorStats {
  uint64_t allocated_bytes = 0;       // in blocks handed out (rounded sizes)
  uint64_t requested_bytes = 0;       // as asked for by callers
  uint64_t reserved_bytes = 0;        // held from the plugin (in use + cached)
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t allocations = 0;           // allocate() calls that succeeded
  uint64_t cache_hits = 0;            // of those, served from the cache
  uint64_t plugin_allocations = 0;    // buffer_allocate calls made
  uint64_t plugin_frees = 0;          // buffer_free calls made
  // OUT_OF_MEMORY from the plugin answered by returning the cache to it and
  // allocating again (the caller saw no error if that one succeeded).
  uint64_t alloc_retries = 0;
};

class CachingAllocator {
 public:
  struct Block {
    hal_buffer_t* buffer = nullptr;
    uint64_t size = 0;       // rounded, what the plugin allocated
    uint64_t requested = 0;  // what the current user asked for
    hal_stream_t* stream = nullptr;      // allocation stream (NULL: none)
    std::vector<hal_stream_t*> used_on;  // other streams (record_stream)
    uint64_t released_at = 0;            // release order, for collection
  };

  // Bound on reserved / in-use bytes kept by collection on cache misses.
  static constexpr double kReserveLimit = 1.2;

  // DEVICE: plugin device handle; MEMORY/STREAMS: the plugin's normalised
  // tables (STREAMS may lack entries). ENABLED=false passes every call
  // through to the plugin (for debugging and for comparison).
  CachingAllocator(hal_device_t* device, const hal_memory_api_t* memory,
                   const hal_stream_api_t* streams, uint64_t alignment, bool enabled);
  ~CachingAllocator();  // returns every cached block to the plugin
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns a block of at least SIZE bytes for use on STREAM (may be NULL).
  // Throws hal::Error: INVALID_ARGUMENT for size 0, OUT_OF_MEMORY (after
  // emptying the cache and retrying once), or the plugin's error.
  Block* allocate(uint64_t size, hal_stream_t* stream);
  // Marks BLOCK as used on STREAM too, so release waits for STREAM's work.
  void record_stream(Block* block, hal_stream_t* stream);
  // Gives BLOCK back (to the cache, or to the plugin when disabled).
  void release(Block* block) noexcept;
  // Returns every cached block that is safe to free to the plugin; waits for
  // the events of blocks still pending on other streams.
  void empty_cache();
  AllocatorStats stats() const;
  void reset_peak_stats();
  bool enabled() const { return enabled_; }

  // Size a request is rounded to (512-byte granules; 2 MiB above 1 MiB).
  static uint64_t round_size(uint64_t size);

 private:
  struct Pending {
    Block* block;
    std::vector<hal_event_t*> events;
  };
  // Collected blocks on their way back to the plugin: freed once EVENT,
  // recorded on their stream at collection, has completed.
  struct Returning {
    std::vector<Block*> blocks;
    hal_event_t* event;
  };
  void process_pending_locked();
  void process_returning_locked();
  void cache_locked(Block* block);
  // Takes STREAM's oldest cached blocks out of the cache while reserving
  // INCOMING more bytes would exceed kReserveLimit, and frees them (at once
  // when STREAM is NULL, else behind an event on STREAM; see Returning).
  void collect_locked(uint64_t incoming, hal_stream_t* stream);
  // Returns R's blocks to the plugin and its event to the pool.
  void finish_returning_locked(Returning& r);
  // Waits for every Returning's event and frees its blocks.
  void wait_returning_locked();
  void free_block_locked(Block* block);
  hal_event_t* take_event_locked();

  hal_device_t* device_;
  const hal_memory_api_t* memory_;
  const hal_stream_api_t* streams_;
  uint64_t alignment_;
  bool enabled_;
  mutable std::mutex mu_;
  using FreeMap = std::multimap<std::pair<hal_stream_t*, uint64_t>, Block*>;
  FreeMap free_;  // (stream, size)
  // Nodes taken out of free_ by cache hits, reused by cache_locked: a hit
  // and its later release allocate and free no map node.
  std::vector<FreeMap::node_type> spare_nodes_;
  std::vector<Pending> pending_;
  std::vector<Returning> returning_;
  uint64_t returning_bytes_ = 0;  // in returning_, still counted as reserved
  std::vector<hal_event_t*> event_pool_;
  AllocatorStats stats_;
  uint64_t release_clock_ = 0;
};

}  // namespace hal

#endif  // HAL_RUNTIME_CACHING_ALLOCATOR_HPP_
