// HAL C++ SDK: a plugin's op kernels, registered by catalog op.
//
//   void add_kernel(const std::shared_ptr<const OpCall>& call, Stream* stream);
//   ops().add<hal::sdk::op::add>(&add_kernel, kFloatDtypes);   // op::add: hal/sdk/op_catalog.hpp
//   ops().add<hal::sdk::op::mul>(&mul_f32, HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32));  // one kernel per dtype
//   ops().add<hal::sdk::op::mul>(&mul_f16, HAL_DTYPE_BIT(HAL_DTYPE_FLOAT16));
//
// A kernel is uniform unless registered InputMode::kMixed: every promoted
// input then arrives in the call's compute dtype (libhal casts the others),
// so a float32 kernel reads float32 and nothing else.
//
// This header does not include the catalog (a plugin without ops pays
// nothing for it); the TU with HAL_SDK_PLUGIN of a plugin whose kInterfaces
// has HAL_CAPABILITY_OPERATOR includes hal/sdk/ops.hpp for the op table.
//
// The SDK validates every call against the catalog (input count, dtypes,
// attributes, shapes, output shapes and dtypes, buffer ranges, aliasing)
// before the kernel sees it, so a kernel only computes. A kernel queues the
// work on STREAM (or runs it before returning when STREAM is nullptr) and
// may keep CALL alive until then. It reports failures by throwing
// (hal::sdk::fail); nothing may have been written to outputs when it throws
// before queuing.
#ifndef HAL_SDK_OP_REGISTRY_HPP_
#define HAL_SDK_OP_REGISTRY_HPP_

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "hal/sdk/op_schema.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk {

class Stream;

using KernelFn = void (*)(const std::shared_ptr<const OpCall>& call, Stream* stream);

// Dtype masks for the dtypes of a registration.
inline constexpr uint64_t kFloatDtypes = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT16) |
                                         HAL_DTYPE_BIT(HAL_DTYPE_BFLOAT16) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
inline constexpr uint64_t kIntDtypes = HAL_DTYPE_BIT(HAL_DTYPE_INT8) | HAL_DTYPE_BIT(HAL_DTYPE_UINT8) |
                                       HAL_DTYPE_BIT(HAL_DTYPE_INT16) | HAL_DTYPE_BIT(HAL_DTYPE_INT32) |
                                       HAL_DTYPE_BIT(HAL_DTYPE_INT64);
inline constexpr uint64_t kAllDtypes = kFloatDtypes | kIntDtypes | HAL_DTYPE_BIT(HAL_DTYPE_BOOL);

// How a kernel takes its inputs (hal/op.h, "INPUT MODES").
enum class InputMode : uint32_t {
  // Every input that takes part in promotion arrives in the call's compute
  // dtype (OpCall::common_dtype): the SDK declines other calls with
  // HAL_STATUS_MIXED_DTYPES and libhal casts before launching again. The
  // default: a kernel reads one dtype.
  kUniform = HAL_OP_INPUTS_UNIFORM,
  // The kernel reads inputs of any dtype the catalog allows and promotes
  // them itself (int32 + float32 computed in float32).
  kMixed = HAL_OP_INPUTS_MIXED,
};

inline const char* input_mode_name(InputMode m) { return m == InputMode::kMixed ? "mixed" : "uniform"; }

// One op of a plugin: its kernels by compute dtype (one function for every
// dtype, or one per dtype, as the vendor registered them).
struct Kernel {
  const OpSchema* schema = nullptr;
  InputMode input_mode = InputMode::kUniform;
  // Compute dtypes (OpCall::common_dtype) some kernel handles; the catalog's
  // own dtype rules are checked as well.
  uint64_t dtypes = 0;
  KernelFn by_dtype[HAL_DTYPE_COUNT_] = {};
  KernelFn first = nullptr;  // of the first registration: ops without inputs

  // The function for compute dtype DTYPE (HAL_DTYPE_INVALID: an op without
  // typed inputs), or nullptr.
  KernelFn fn(hal_dtype_e dtype) const {
    if (dtype == HAL_DTYPE_INVALID) return first;
    return static_cast<uint32_t>(dtype) < HAL_DTYPE_COUNT_ ? by_dtype[dtype] : nullptr;
  }
};

// The ops one plugin implements; an op's id is its index here. Filled in the
// plugin's constructor, read-only afterwards (then thread-safe).
class OpRegistry {
 public:
  // Registers FN for the compute dtypes DTYPES of Op, taking inputs as MODE
  // (default: set_default_input_mode's, else kUniform). An op may be
  // registered several times with disjoint dtypes (one kernel per dtype),
  // always with the same mode. kAllDtypes (the default) stands for every
  // compute dtype the catalog allows for Op (common::catalog_compute_dtypes).
  // Throws (hal::sdk::Error): INVALID_ARGUMENT for a NULL FN, no dtypes, a
  // dtype the catalog does not allow for Op (softmax for int32), or a MODE
  // that differs from the op's earlier registration; ALREADY_EXISTS when a
  // dtype is registered twice.
  template <class Op>
  void add(KernelFn fn, uint64_t dtypes = kAllDtypes, std::optional<InputMode> mode = std::nullopt) {
    add(Op::schema(), fn, dtypes, mode);
  }
  void add(const OpSchema& schema, KernelFn fn, uint64_t dtypes = kAllDtypes,
           std::optional<InputMode> mode_or_default = std::nullopt) {
    const InputMode mode = mode_or_default.value_or(default_mode_);
    if (fn == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "kernel for '", schema.name, "' is NULL");
    dtypes &= (uint64_t{1} << HAL_DTYPE_COUNT_) - 1;
    if (dtypes == 0) fail(HAL_STATUS_INVALID_ARGUMENT, "kernel for '", schema.name, "' is registered for no dtype");
    // A kernel for a dtype the catalog forbids would be listed as
    // implemented and never called: refuse it. kAllDtypes means "every
    // dtype the catalog allows".
    if (const uint64_t allowed = common::catalog_compute_dtypes(schema)) {
      if (dtypes == kAllDtypes || narrow_to_catalog_) dtypes &= allowed;
      if (dtypes == 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, "kernel for '", schema.name, "' is registered for no dtype the catalog "
             "allows: '", schema.name, "' computes in ", dtype_mask_names(allowed), " only (docs/ops.md)");
      if (const uint64_t forbidden = dtypes & ~allowed)
        fail(HAL_STATUS_INVALID_ARGUMENT, "kernel for '", schema.name, "' is registered for ",
             dtype_mask_names(forbidden), ", which the catalog does not allow: '", schema.name, "' computes in ",
             dtype_mask_names(allowed), " only (docs/ops.md)");
    }
    Kernel* k = nullptr;
    for (Kernel& e : kernels_)
      if (e.schema == &schema) k = &e;
    if (k != nullptr) {
      if (k->input_mode != mode)
        fail(HAL_STATUS_INVALID_ARGUMENT, "op '", schema.name, "' registered with ", input_mode_name(k->input_mode),
             " inputs for ", dtype_mask_names(k->dtypes), " and with ", input_mode_name(mode), " inputs for ",
             dtype_mask_names(dtypes), "; an op takes its inputs one way");
      if (uint64_t both = k->dtypes & dtypes)
        fail(HAL_STATUS_ALREADY_EXISTS, "op '", schema.name, "' registered twice for ", dtype_mask_names(both));
    } else {
      kernels_.emplace_back();
      k = &kernels_.back();
      k->schema = &schema;
      k->input_mode = mode;
      k->first = fn;
    }
    k->dtypes |= dtypes;
    for (uint32_t d = 0; d < HAL_DTYPE_COUNT_; ++d)
      if (dtypes & HAL_DTYPE_BIT(d)) k->by_dtype[d] = fn;
  }
  // The mode of later registrations that name none (kUniform until set).
  // A plugin whose kernels all promote themselves sets kMixed once.
  void set_default_input_mode(InputMode mode) { default_mode_ = mode; }
  // From here on, a registration keeps the dtypes of its mask that the
  // catalog allows for the op instead of refusing the others: for a plugin
  // whose generic kernels (one template over every numeric type) are
  // registered with one broad mask for many ops, as the CPU plugin's are.
  // A vendor naming the dtypes of each kernel leaves it off.
  void narrow_to_catalog() { narrow_to_catalog_ = true; }
  size_t size() const { return kernels_.size(); }
  const Kernel& at(size_t id) const { return kernels_.at(id); }
  // Index of NAME, or -1.
  int64_t find(const char* name) const {
    for (size_t i = 0; i < kernels_.size(); ++i)
      if (std::strcmp(kernels_[i].schema->name, name) == 0) return static_cast<int64_t>(i);
    return -1;
  }

 private:
  std::vector<Kernel> kernels_;
  InputMode default_mode_ = InputMode::kUniform;
  bool narrow_to_catalog_ = false;
};

}  // namespace hal::sdk

#endif  // HAL_SDK_OP_REGISTRY_HPP_
