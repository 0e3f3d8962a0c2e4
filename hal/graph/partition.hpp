// Internal: partition of a hal::Graph across devices by capability. Each
// device in order claims the subgraphs its plugin compiles (graph_partition
// over the still-unclaimed nodes), then the single nodes whose op it
// launches (op_resolve, op_check where the node's shapes are concrete, not
// disabled by hal.toml); the fallback device runs what is left.
#ifndef HAL_GRAPH_PARTITION_HPP_
#define HAL_GRAPH_PARTITION_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hal/runtime/device.hpp"
#include "hal/runtime/graph.hpp"

namespace hal::detail {

// Where each node of a graph runs. Plain data (cached on disk as such).
struct Placement {
  // Per node: index into the device list partition() was given.
  std::vector<uint32_t> device;
  // Per node: 0 = op by op; k > 0 = compiled together with the other nodes
  // of group k (ids unique across devices, each group on one device).
  std::vector<uint32_t> group;
  // Per node: why the devices before the one that took it declined it, as
  // "opencl:0: disabled by hal.toml; ..." ("" when the first device took it).
  std::vector<std::string> declined;
  // Per node: run by the fallback device (after every listed device declined).
  std::vector<bool> fallback;
};

// Whether DEVICE's plugin launches node N of G op by op: "" when it does,
// else why not ("disabled by hal.toml", "no kernel (<plugin message>)", the
// plugin's op_check message for a node whose shapes are concrete).
std::string launch_refusal(const std::shared_ptr<Device>& device, const Graph& g, size_t n);

// Partitions G over DEVICES (claim order). When FALLBACK is true, the last
// entry of DEVICES is the fallback device: it claims no subgraph and runs
// single nodes the others declined. Throws UNIMPLEMENTED naming the first
// node nobody runs, its op and each device's reason; a plugin's
// graph_partition error as the plugin gave it (naming itself and the call);
// FAILED_PRECONDITION for a group not convex in the subgraph the plugin saw.
// SUBGRAPHS false: no device is asked for subgraphs (every node op by op).
Placement partition(const Graph& g, const std::vector<std::shared_ptr<Device>>& devices, bool fallback,
                    bool subgraphs = true);

// Why P, a placement partition() did not make (the disk cache's), cannot run
// G over DEVICE_COUNT devices (the last one the fallback when FALLBACK), or
// "" when it can: each group on one device, the fallback flag on exactly
// the fallback device's nodes (none grouped), the groups ordered by their
// data dependences. P's vectors must have G's node count and device
// indices below DEVICE_COUNT.
std::string placement_error(const Graph& g, const Placement& p, size_t device_count, bool fallback);

}  // namespace hal::detail

#endif  // HAL_GRAPH_PARTITION_HPP_
