// HAL C++ SDK: a plugin's op kernels, registered by catalog op.
//
//   void add_kernel(const std::shared_ptr<const OpCall>& call, Stream* stream);
//   ops().add<hal::sdk::op::add>(&add_kernel, kFloatDtypes);   // op::add: hal/sdk/op_catalog.hpp
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
#include <vector>

#include "hal/sdk/op_schema.hpp"
#include "hal/sdk/status.hpp"

namespace hal::sdk {

class Stream;

using KernelFn = void (*)(const std::shared_ptr<const OpCall>& call, Stream* stream);

// Dtype masks for Kernel::dtypes.
inline constexpr uint64_t kFloatDtypes = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT16) |
                                         HAL_DTYPE_BIT(HAL_DTYPE_BFLOAT16) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
inline constexpr uint64_t kIntDtypes = HAL_DTYPE_BIT(HAL_DTYPE_INT8) | HAL_DTYPE_BIT(HAL_DTYPE_UINT8) |
                                       HAL_DTYPE_BIT(HAL_DTYPE_INT16) | HAL_DTYPE_BIT(HAL_DTYPE_INT32) |
                                       HAL_DTYPE_BIT(HAL_DTYPE_INT64);
inline constexpr uint64_t kAllDtypes = kFloatDtypes | kIntDtypes | HAL_DTYPE_BIT(HAL_DTYPE_BOOL);

struct Kernel {
  const OpSchema* schema = nullptr;
  KernelFn fn = nullptr;
  // Compute dtypes (OpCall::common_dtype) the kernel handles; the catalog's
  // own dtype rules are checked as well.
  uint64_t dtypes = kAllDtypes;
};

// The ops one plugin implements; an op's id is its index here. Filled in the
// plugin's constructor, read-only afterwards (then thread-safe).
class OpRegistry {
 public:
  template <class Op>
  void add(KernelFn fn, uint64_t dtypes = kAllDtypes) {
    add(Op::schema(), fn, dtypes);
  }
  void add(const OpSchema& schema, KernelFn fn, uint64_t dtypes = kAllDtypes) {
    if (fn == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "kernel for '", schema.name, "' is NULL");
    for (const Kernel& k : kernels_)
      if (k.schema == &schema) fail(HAL_STATUS_ALREADY_EXISTS, "op '", schema.name, "' registered twice");
    kernels_.push_back(Kernel{&schema, fn, dtypes});
  }
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
};

}  // namespace hal::sdk

#endif  // HAL_SDK_OP_REGISTRY_HPP_
