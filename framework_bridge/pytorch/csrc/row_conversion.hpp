// torch_hal: one mapping-table row's conversion of an aten call into a
// catalog call (mapping.hpp: Call) — output shapes and dtypes, catalog
// inputs, attributes and outputs, then the row's hook. The one conversion
// both users of the table share:
//   - the eager kernel (mapped_kernel.cc): device tensors, then a launch;
//   - the torch.compile lowering (graph_lowering.cc): Call::lowering set,
//     meta tensors carrying an FX node's shapes and dtypes, the catalog call
//     added to a hal::Graph instead of launched.
#ifndef TORCH_HAL_CSRC_ROW_CONVERSION_HPP_
#define TORCH_HAL_CSRC_ROW_CONVERSION_HPP_

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "mapping.hpp"

namespace torch_hal {

// Converts calls of one aten overload through its row. Built once per
// overload (the eager kernel's first call, or the lowering's first node of
// it) and kept for the process. convert() is thread-safe (its Meta-result
// cache is locked).
class RowConversion {
 public:
  // ROW must outlive this (table rows live for the process); NAME is the
  // overload ("add.Tensor"); SCHEMA is its schema (the argument positions
  // are resolved once). Throws c10::Error when the row names an argument the
  // schema lacks (a table bug).
  RowConversion(const Mapping& row, std::string name, const c10::FunctionSchema& schema);

  // Fills CALL (whose args are OP's arguments) as the row says: returns
  // (the direct elementwise rule or OP's Meta kernel, Meta results cached
  // per argument signature), inputs, attributes, outputs, then the hook.
  // Device tensors for an eager call; with CALL.lowering, tensor arguments
  // are meta tensors and kept as they are, Scalar inputs become 0-dim CPU
  // tensors (graph constants) and returns are meta tensors. Throws Decline
  // when the row (or its hook) has no catalog equivalent for these
  // arguments, c10::Error for arguments PyTorch itself refuses (tensors on
  // two devices, a complex attribute).
  void convert(const c10::OperatorHandle& op, Call& call) const;

  const Mapping& row() const { return row_; }
  const std::string& name() const { return name_; }
  // Per aten return: the argument it writes (in-place, out=), or -1 for a
  // new tensor.
  const std::vector<int>& return_args() const { return return_arg_; }

 private:
  bool direct_shapes(Call& call) const;
  void meta_shapes(const c10::OperatorHandle& op, Call& call) const;
  c10::ScalarType scalar_dtype(const Call& call, const c10::Scalar& s) const;
  at::Tensor device_scalar(const Call& call, const c10::Scalar& s) const;
  at::Tensor device_tensor(const Call& call, const at::Tensor& t, const char* arg) const;
  void build_inputs(Call& call) const;
  void build_attrs(Call& call) const;
  std::vector<int64_t> scratch_shape(const Call& call, const char* spec) const;
  void build_outputs(Call& call) const;

  // One Meta result: a tensor's metadata, an undefined tensor, or a
  // non-tensor return (SymInt) passed through.
  struct MetaReturn {
    bool tensor = false;
    std::vector<int64_t> sizes, strides;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    c10::IValue other;
  };

  const Mapping& row_;
  const std::string name_;
  std::vector<int> in_index_, attr_index_, return_arg_;
  static constexpr size_t kMetaCacheEntries = 4096;
  mutable std::mutex meta_mu_;
  // Entries are shared: a hit takes a reference, not a copy of the vectors.
  mutable std::unordered_map<std::string, std::shared_ptr<const std::vector<MetaReturn>>> meta_cache_;
};

// S as a 0-dim DTYPE tensor on hal:DEV, made once per device, current
// stream, dtype and value and kept (see clear_device_scalars): read it on
// that stream only, never write it. Thread-safe.
at::Tensor cached_device_scalar(const c10::Scalar& s, c10::ScalarType dtype, c10::DeviceIndex dev);

// Drops the device copies of scalar operands the eager conversion keeps
// (per device, stream, dtype and value, so optimizers' per-step numbers are
// not re-uploaded on every call). They count in memory_allocated until
// then; torch.hal.empty_cache() calls this. Thread-safe.
void clear_device_scalars();

}  // namespace torch_hal

#endif  // TORCH_HAL_CSRC_ROW_CONVERSION_HPP_
