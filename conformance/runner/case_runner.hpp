// hal-conformance: running one OpCase on a device and judging the result.
// Implements the checks promised at the top of op_suite.hpp: every layout
// variant, comparison with the reference, untouched gap bytes, unchanged
// inputs, the suite's bad-input cases and the generic wrong-output errors.
#ifndef HAL_CONFORMANCE_RUNNER_CASE_RUNNER_HPP_
#define HAL_CONFORMANCE_RUNNER_CASE_RUNNER_HPP_

#include <cstdio>
#include <memory>
#include <optional>
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
  // Each tensor dense in the dim order the plugin prefers for it
  // (op_get_layouts, ABI 1.8), row-major where it has no preference; run
  // only when it prefers some tensor of the case otherwise than row-major.
  kPreferred,
};
const char* layout_name(Layout l);
// The layout called NAME ("strided"); nullopt for an unknown name.
std::optional<Layout> parse_layout(const std::string& name);

// One thing that went wrong; a row of --failures-csv.
struct Failure {
  std::string op, dtype, case_name, layout;
  // What --case takes to rerun the case alone (case_selectors()); empty
  // when the failure is not a case's.
  std::string case_selector;
  std::string shapes, strides, attrs;
  double max_abs_error = 0, max_rel_error = 0;
  std::string message;
};

// A case the plugin declined as given, in direct mode: HAL_STATUS_MIXED_DTYPES
// (a uniform kernel, inputs of several dtypes). Neither run nor failed;
// reported with the plugin's reason (--through-core runs it).
struct Declined {
  std::string case_name, case_selector;
  std::string reason;  // the plugin's message
};

// What run() did with a case.
enum class Outcome {
  kRan,         // launched (failures, if any, were appended)
  kNotForDevice,  // the device refuses its dtypes (UNSUPPORTED_DTYPE): not run, not reported
  kDeclined,    // HAL_STATUS_MIXED_DTYPES in direct mode: not run (see Declined)
};

// --case selectors of CASES, by index: the case's name, or "name#k" (k from
// 1, in order) for names that occur more than once.
std::vector<std::string> case_selectors(const std::vector<OpCase>& cases);

// Per-dtype tolerances (DIOPI's defaults), before a case's tolerance_scale.
struct Tolerance {
  double atol, rtol;
};
Tolerance default_tolerance(hal_dtype_e dt);

// "alpha=2, dims=[0,1]".
std::string attrs_str(const std::vector<hal::Attr>& attrs);
std::string shape_str(const std::vector<int64_t>& shape);
// ARG as one POSIX shell word (single-quoted unless it is plain).
std::string shell_quote(const std::string& arg);

// What a failure of output INDEX of OP adds when that output's dtype OUT is
// not the test's compute dtype COMPUTE (sum's dtype=float64, an integer
// sum's int64): the kernel must write the output's own dtype. Empty when
// they agree.
std::string output_dtype_hint(const std::string& op, size_t index, hal_dtype_e out, hal_dtype_e compute);

class CaseRunner {
 public:
  struct Options {
    // kNone (direct mode): calls reach the plugin as given, so a uniform
    // kernel declines mixed cases. kCore (--through-core): libhal casts
    // the inputs of uniform kernels first.
    Promotion promotion = Promotion::kNone;
    // Only this layout (--layout); bad-input cases always run contiguous.
    std::optional<Layout> layout;
    // --show-values: for every launch, print each input's dtype, shape,
    // strides and values, the expected and the actual outputs here
    // (element by element, capped). Not owned; nullptr = silent.
    std::FILE* show_values = nullptr;
  };

  // Launches OP on DEVICE; on a stream of its own when the device has
  // streams, else synchronously. Throws hal::Error when OP cannot be
  // resolved.
  CaseRunner(std::shared_ptr<Device> device, const std::string& op, Options options);
  CaseRunner(std::shared_ptr<Device> device, const std::string& op) : CaseRunner(std::move(device), op, Options{}) {}

  // Runs C (cases for DTYPE) in every layout it allows (or options.layout),
  // or as a bad-input case when it expects an error. Appends what went
  // wrong to FAILURES; a declined case appends its reason to DECLINED.
  Outcome run(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c, std::vector<Failure>& failures,
              std::vector<Declined>* declined = nullptr);
  // Only the given layout (tests of the runner itself, thread-safety test).
  // kDeclined only for a bad-input case the plugin declined with
  // MIXED_DTYPES (outputs untouched) in direct mode.
  Outcome run_layout(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c, Layout layout,
                     std::vector<Failure>& failures, std::vector<Declined>* declined = nullptr);
  // The generic checks of an op: C's first output given the wrong shape,
  // then the wrong dtype, must be refused (INVALID_ARGUMENT naming the op)
  // with every output untouched.
  void run_wrong_outputs(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c, std::vector<Failure>& failures);

  // Would the device accept C (op_check, no buffers)? nullptr if so.
  std::unique_ptr<Error> check(const OpCase& c, const std::vector<HostTensor>& outputs) const;
  // The dim orders the plugin prefers for C's inputs and OUTPUTS, asked
  // with row-major inputs (OpRunner::layouts); nullopt when it says nothing
  // or prefers row-major (or nothing) for every tensor.
  std::optional<OpLayouts> preferred_layouts(const OpCase& c, const std::vector<HostTensor>& outputs) const;

 private:
  // Direct mode and C's inputs are of several dtypes: a MIXED_DTYPES
  // refusal of C is then a decline, not a failure.
  bool may_decline(const OpCase& c) const;

  std::shared_ptr<Device> device_;
  Options options_;
  OpRunner runner_;
  Stream stream_;  // invalid without stream support
};

}  // namespace hal::conformance

#endif  // HAL_CONFORMANCE_RUNNER_CASE_RUNNER_HPP_
