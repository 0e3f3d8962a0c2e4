// hal-conformance --collectives: the collective suite. The parent process
// spawns one child per rank (the same binary with --collective-rank), each
// runs a scenario against the plugin's collective interface, and the
// parent checks every exit status and that no shared-memory segment was
// left behind. See docs/collectives.md.
#ifndef HAL_CONFORMANCE_COLLECTIVES_COLLECTIVE_SUITE_HPP_
#define HAL_CONFORMANCE_COLLECTIVES_COLLECTIVE_SUITE_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hal/runtime/device.hpp"

namespace hal::conformance {

struct CollectiveOptions {
  uint32_t world = 2;
  int rank = -1;              // >= 0: this process is that rank (a child)
  std::string store_dir;      // the FileStore the ranks share (children)
  std::string scenario = "all";  // all | suite | kill | kill_leader | foreign_id | stale_id | mismatch | abort | tcp
  std::chrono::milliseconds fault_timeout{5000};  // the communicator timeout in fault scenarios
  uint64_t max_bytes = 64ull << 20;               // the largest message of the suite
  uint32_t hosts = 1;  // > 1: rank r runs with HAL_COMM_HOST_ID=hal-conformance-<job>-host<r % hosts>
};

// Child: runs OPTS.scenario as OPTS.rank on DEVICE; prints failures and a
// summary line. Returns the process exit status (0: as expected).
int run_collective_rank(const std::shared_ptr<hal::Device>& device, const CollectiveOptions& opts);

// Parent: runs the scenario(s) OPTS names, each with OPTS.world children
// started as ARGV (even ranks) or ODD_ARGV (odd ranks) plus the child
// options; each selects the plugin and device its ranks use. Returns 0
// when all passed, 1 otherwise.
int spawn_collectives(const std::vector<std::string>& argv, const std::vector<std::string>& odd_argv,
                      const CollectiveOptions& opts);

}  // namespace hal::conformance

#endif  // HAL_CONFORMANCE_COLLECTIVES_COLLECTIVE_SUITE_HPP_
