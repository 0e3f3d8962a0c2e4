// HAL shared layer (hal::common): how many elements a collective's send and
// receive buffers span (hal/collective.h), for the SDK's checks, its host
// communicator and libhal's range checks. Header-only; pure.
#ifndef HAL_COMMON_COLLECTIVE_EXTENT_HPP_
#define HAL_COMMON_COLLECTIVE_EXTENT_HPP_

#include <algorithm>
#include <cstdint>

#include "hal/collective.h"

namespace hal::common {

struct CollectiveExtent {
  uint64_t send = 0, recv = 0;  // elements
};

// KIND with COUNT elements on WORLD ranks. For ALLTOALL with unequal blocks
// pass the four world-sized arrays (else nullptr): a buffer then spans up to
// its farthest block end. Callers bound the values first (no overflow check).
inline CollectiveExtent collective_extent(uint32_t kind, uint64_t count, uint32_t world,
                                          const uint64_t* send_counts = nullptr,
                                          const uint64_t* send_displs = nullptr,
                                          const uint64_t* recv_counts = nullptr,
                                          const uint64_t* recv_displs = nullptr) {
  CollectiveExtent e{count, count};
  if (kind == HAL_COLLECTIVE_ALLGATHER) e.recv = count * world;
  if (kind == HAL_COLLECTIVE_REDUCE_SCATTER) e.send = count * world;
  if (kind == HAL_COLLECTIVE_ALLTOALL) {
    if (send_counts == nullptr) {
      e.send = e.recv = count * world;
    } else {
      e.send = e.recv = 0;
      for (uint32_t p = 0; p < world; ++p) {
        e.send = std::max(e.send, send_displs[p] + send_counts[p]);
        e.recv = std::max(e.recv, recv_displs[p] + recv_counts[p]);
      }
    }
  }
  return e;
}

}  // namespace hal::common

#endif  // HAL_COMMON_COLLECTIVE_EXTENT_HPP_
