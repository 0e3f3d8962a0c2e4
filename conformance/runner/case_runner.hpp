// hal-conformance: running one OpCase on a device and judging the result.
// Implements the checks promised at the top of op_suite.hpp: every layout
// variant, comparison with the reference, untouched gap bytes, unchanged
// inputs, the suite's bad-input cases and the generic wrong-output errors.
#ifndef HAL_CONFORMANCE_RUNNER_CASE_RUNNER_HPP_
#define HAL_CONFORMANCE_RUNNER_CASE_RUNNER_HPP_

#include <memory>
#include <string>
#include <vector>

#include "hal/runtime/runtime.hpp"
#include "op_suite.hpp"

namespace hal::conformance {

// How every tensor of a launch sits in device memory.
enum class Layout {
  kContiguous,  // row-major, offset 0, strides passed as NULL
  kOffset,      // row-major at an odd element offset (never 16-byte aligned)
  kStrided,     // gaps between elements and rows; gap bytes are checked
  kPermuted,    // memory order of the dims reversed (a transposed view)
};
const char* layout_name(Layout l);

// One thing that went wrong; a row of --failures-csv.
struct Failure {
  std::string op, dtype, case_name, layout;
  std::string shapes, strides, attrs;
  double max_abs_error = 0, max_rel_error = 0;
  std::string message;
};

// Per-dtype tolerances (DIOPI's defaults), before a case's tolerance_scale.
struct Tolerance {
  double atol, rtol;
};
Tolerance default_tolerance(hal_dtype_e dt);

// "alpha=2, dims=[0,1]".
std::string attrs_str(const std::vector<hal::Attr>& attrs);
std::string shape_str(const std::vector<int64_t>& shape);

class CaseRunner {
 public:
  // Launches OP on DEVICE; on a stream of its own when the device has
  // streams, else synchronously. Throws hal::Error when OP cannot be
  // resolved.
  CaseRunner(std::shared_ptr<Device> device, const std::string& op);

  // Runs C (cases for DTYPE) in every layout it allows, or as a bad-input
  // case when it expects an error. Appends what went wrong to FAILURES.
  void run(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c, std::vector<Failure>& failures);
  // Only the given layout (tests of the runner itself, thread-safety test).
  void run_layout(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c, Layout layout,
                  std::vector<Failure>& failures);
  // The generic checks of an op: C's first output given the wrong shape,
  // then the wrong dtype, must be refused (INVALID_ARGUMENT naming the op)
  // with every output untouched.
  void run_wrong_outputs(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c, std::vector<Failure>& failures);

  // Would the device accept C (op_check, no buffers)? nullptr if so.
  std::unique_ptr<Error> check(const OpCase& c, const std::vector<HostTensor>& outputs) const;

 private:
  std::shared_ptr<Device> device_;
  OpRunner runner_;
  Stream stream_;  // invalid without stream support
};

}  // namespace hal::conformance

#endif  // HAL_CONFORMANCE_RUNNER_CASE_RUNNER_HPP_
