// hal-conformance: how an op is tested. Each op group registers OpSuites in
// conformance/ops/<group>.cc; the runner (conformance/runner/) does the rest
// for every suite, generically:
//
//   - runs each case on the plugin's device and compares every output with
//     the suite's REFERENCE (double precision, simple loops, written here
//     independently of any plugin), with per-dtype tolerances;
//   - runs each case again with every input (and output) laid out
//     differently: at an odd byte offset, strided with gaps, and with
//     permuted (transposed) memory order, checking that gap bytes around a
//     strided output are never written;
//   - checks inputs are unchanged after the launch (unintended mutation);
//   - for each op, launches with an output of the wrong shape and of the
//     wrong dtype and checks the error names the op and that the output is
//     untouched;
//   - runs the suite's bad-input cases (expect_error) the same way.
//
// A suite only says which cases to run and what the right answer is.
//
//   std::vector<OpCase> add_cases(hal_dtype_e dt) {
//     return {
//       OpCase("same shape").in(random(dt, {3, 4}, 1)).in(random(dt, {3, 4}, 2)),
//       OpCase("broadcast").in(random(dt, {3, 1}, 3)).in(random(dt, {4}, 4))
//           .attr(hal::Attr::f("alpha", 2.0)),
//       OpCase("0-d").in(random(dt, {}, 5)).in(random(dt, {}, 6)),
//       OpCase("zero-size").in(random(dt, {0, 4}, 7)).in(random(dt, {4}, 8)),
//     };
//   }
//   std::vector<HostTensor> add_ref(const OpCase& c) {
//     ...compute in double from c.inputs, return {out} with dtype + shape...
//   }
//   HAL_CONFORMANCE_SUITE(add, add_cases, add_ref);
#ifndef HAL_CONFORMANCE_OP_SUITE_HPP_
#define HAL_CONFORMANCE_OP_SUITE_HPP_

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hal/hal.h"
#include "hal/runtime/op.hpp"

namespace hal::conformance {

// ---- host tensors ------------------------------------------------------------

// Logical values of a tensor, row-major, as doubles (integers are exact up
// to 2^53; cases keep int64 values inside that). Independent of any layout:
// the runner decides how the values sit in device memory.
struct HostTensor {
  hal_dtype_e dtype = HAL_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<double> values;

  HostTensor() = default;
  HostTensor(hal_dtype_e dt, std::vector<int64_t> s) : dtype(dt), shape(std::move(s)), values(count(shape), 0.0) {}
  HostTensor(hal_dtype_e dt, std::vector<int64_t> s, std::vector<double> v)
      : dtype(dt), shape(std::move(s)), values(std::move(v)) {}

  static int64_t count(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t numel() const { return count(shape); }
  int rank() const { return static_cast<int>(shape.size()); }
  // Size of DIM (negative counts from the end).
  int64_t size(int dim) const { return shape[dim < 0 ? dim + rank() : dim]; }
  // Row-major strides in elements.
  std::vector<int64_t> strides() const {
    std::vector<int64_t> s(shape.size(), 1);
    for (int d = rank() - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
    return s;
  }
  // Flat index of a multi-index.
  int64_t offset(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
    return off;
  }
  double& at(const std::vector<int64_t>& idx) { return values[offset(idx)]; }
  double at(const std::vector<int64_t>& idx) const { return values[offset(idx)]; }
};

// Multi-index of flat row-major index FLAT in SHAPE.
inline std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return idx;
}

// NumPy broadcast of two shapes; nullopt if they do not broadcast.
std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// The value of T at index IDX of a (larger) broadcast shape.
double broadcast_at(const HostTensor& t, const std::vector<int64_t>& idx);

// ---- dtypes ------------------------------------------------------------------

bool is_float(hal_dtype_e dt);
bool is_int(hal_dtype_e dt);  // integers, not bool
const char* dtype_str(hal_dtype_e dt);
// PyTorch's promote_types (bool < integers < floating; f16+bf16 -> f32).
// Written here again on purpose: the suite checks the SDK's promotion.
hal_dtype_e promote(hal_dtype_e a, hal_dtype_e b);
// Rounds V to what DT can hold (float16/bfloat16 rounding to nearest even,
// integer wrap-around, bool = V != 0). The runner rounds inputs and expected
// outputs with it.
double round_to(hal_dtype_e dt, double v);

// ---- input generators (deterministic in SEED; values rounded to DT) ----------

// Uniform in [LO, HI); for integer dtypes whole numbers in [LO, HI); for
// bool, true with probability 1/2.
HostTensor random(hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed, double lo = -2.0, double hi = 2.0);
// Like random, but |x| >= MIN_ABS (for divisors, logs, ...).
HostTensor random_nonzero(hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed, double min_abs = 0.5,
                          double hi = 2.0);
// Every element V.
HostTensor full(hal_dtype_e dt, std::vector<int64_t> shape, double v);
// Values 0, 1, 2, ... (then rounded to DT).
HostTensor iota(hal_dtype_e dt, std::vector<int64_t> shape, double start = 0.0, double step = 1.0);
// A 0-d tensor holding V.
inline HostTensor scalar(hal_dtype_e dt, double v) { return HostTensor(dt, {}, {round_to(dt, v)}); }
// A random permutation of 0..N-1 (distinct values: no ties for sort/topk).
HostTensor permutation(hal_dtype_e dt, int64_t n, uint64_t seed);

// ---- cases -------------------------------------------------------------------

// How one output is compared.
enum class Compare {
  kDefault,  // tolerance by dtype for floating outputs, exact otherwise
  kExact,    // every value equal (NaN equals NaN)
  kSkip,     // not compared (contents unspecified, e.g. a scratch output)
};

// One call of an op. Built with the chainable setters; copyable.
struct OpCase {
  std::string name;  // short, unique within the suite and dtype: "broadcast [3,1]x[4]"
  // In launch order; nullopt = an absent optional input.
  std::vector<std::optional<HostTensor>> inputs;
  std::vector<hal::Attr> attrs;
  // Per output; missing entries are kDefault.
  std::vector<Compare> compare;
  // Multiplies the dtype's default tolerances (long reductions, chains of
  // ops). Keep it as small as the maths allows.
  double tolerance_scale = 1.0;
  // Also run with non-contiguous / offset layouts (off for cases where the
  // layout is the point or too large to repeat).
  bool layouts = true;
  // A bad-input case: the launch must fail with this status code (and the
  // message contain every string of ERROR_MENTIONS); outputs are allocated
  // as OUTPUTS_FOR_ERROR says and must stay untouched.
  std::optional<hal_status_code_e> expect_error;
  std::vector<std::string> error_mentions;
  std::vector<HostTensor> outputs_for_error;
  // Custom check, replacing the comparison of all outputs (e.g. sort
  // stability, topk with ties, random ops' statistics). Returns "" when
  // ACTUAL is acceptable, else what is wrong.
  std::function<std::string(const OpCase&, const std::vector<HostTensor>& expected,
                            const std::vector<HostTensor>& actual)>
      custom_check;

  OpCase() = default;
  explicit OpCase(std::string n) : name(std::move(n)) {}
  OpCase& in(HostTensor t) {
    inputs.emplace_back(std::move(t));
    return *this;
  }
  OpCase& absent() {
    inputs.emplace_back(std::nullopt);
    return *this;
  }
  OpCase& attr(hal::Attr a) {
    attrs.push_back(std::move(a));
    return *this;
  }
  OpCase& cmp(std::vector<Compare> c) {
    compare = std::move(c);
    return *this;
  }
  OpCase& tol(double scale) {
    tolerance_scale = scale;
    return *this;
  }
  OpCase& no_layouts() {
    layouts = false;
    return *this;
  }
  // Bad input: expect CODE, with OUTPUTS preallocated (shape/dtype; values
  // are the sentinel the runner checks afterwards).
  OpCase& error(hal_status_code_e code, std::vector<HostTensor> outputs, std::vector<std::string> mentions = {}) {
    expect_error = code;
    outputs_for_error = std::move(outputs);
    error_mentions = std::move(mentions);
    return *this;
  }
  // Convenience for the reference: input I (must be present).
  const HostTensor& input(size_t i) const { return *inputs.at(i); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].has_value(); }
  // Attribute values by name, with a default when the case does not set it.
  int64_t attr_int(const std::string& name, int64_t def) const;
  double attr_float(const std::string& name, double def) const;  // INT or FLOAT attrs
  bool attr_bool(const std::string& name, bool def) const;
  std::string attr_string(const std::string& name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& name, const std::vector<int64_t>& def) const;
  hal_dtype_e attr_dtype(const std::string& name, hal_dtype_e def) const;
};

// Expected outputs of a case: one HostTensor per output (its dtype and
// shape are what the runner allocates). Values need not be rounded.
using Reference = std::function<std::vector<HostTensor>(const OpCase&)>;
// The cases for one dtype (the dtype the op computes in: the common dtype
// of its promoted inputs, or its first input's). Return {} when DT is not
// meaningful for the op (it is then not tested for DT).
using CaseGenerator = std::function<std::vector<OpCase>(hal_dtype_e dt)>;

struct OpSuite {
  std::string op;     // catalog name
  CaseGenerator cases;
  Reference reference;
  // dtypes to test; 0 = the dtypes the catalog allows for the op's first
  // input.
  uint64_t dtypes = 0;
};

// Registers SUITE at static-initialisation time (one binary: the suites of
// every conformance/ops/*.cc file).
bool register_suite(OpSuite suite);
const std::vector<OpSuite>& suites();

// The runner launches every op once with an output of the wrong shape and
// once with the wrong dtype, expecting INVALID_ARGUMENT. For an op whose
// output shape or dtype is the caller's choice (fill's shape, copy's
// dtype, an upper-bound output) that check does not apply: turn it off.
struct FreeOutputs {
  bool shape = false;  // any output shape is valid
  bool dtype = false;  // any output dtype is valid
};
bool register_free_outputs(const std::string& op, FreeOutputs free);
FreeOutputs free_outputs(const std::string& op);

#define HAL_CONFORMANCE_CONCAT_(a, b) a##b
#define HAL_CONFORMANCE_CONCAT(a, b) HAL_CONFORMANCE_CONCAT_(a, b)
// HAL_CONFORMANCE_SUITE(op_name, cases_fn, reference_fn [, dtype_mask])
#define HAL_CONFORMANCE_SUITE(OP, ...)                                                  \
  static const bool HAL_CONFORMANCE_CONCAT(hal_conformance_suite_, OP) [[maybe_unused]] = \
      ::hal::conformance::register_suite(::hal::conformance::OpSuite{#OP, __VA_ARGS__})

// HAL_CONFORMANCE_FREE_OUTPUTS(op_name, shape_is_free, dtype_is_free)
#define HAL_CONFORMANCE_FREE_OUTPUTS(OP, SHAPE, DTYPE)                                            \
  static const bool HAL_CONFORMANCE_CONCAT(hal_conformance_free_outputs_, OP) [[maybe_unused]] = \
      ::hal::conformance::register_free_outputs(#OP, ::hal::conformance::FreeOutputs{SHAPE, DTYPE})

}  // namespace hal::conformance

#endif  // HAL_CONFORMANCE_OP_SUITE_HPP_
