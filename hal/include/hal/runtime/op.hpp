// HAL runtime: launching catalog ops on a device (the operator interface).
//
//   hal::OpRunner add(device, "add");                    // resolves once
//   add.launch({&a, &b}, {&out}, {hal::Attr::scalar("alpha", 2.0)}, &stream);
//
// Tensors are strided views of runtime Buffers (TensorView). Validation is
// the plugin's (the SDK checks every call against the catalog); errors come
// back as hal::Error naming the plugin, the op, the argument and the values.
//
// Promotion. A plugin's op may take uniform inputs only (hal/op.h, "INPUT
// MODES": every promoted input in the call's compute dtype). launch() then
// casts each other input first, on the same device and stream: through the
// plugin's own "copy" op where it converts that dtype, else through the
// runtime's fallback device (copies out and back). The casts go to scratch
// memory from the device's caching allocator and are counted in op_stats()
// (hal/runtime/op_stats.hpp). Callers see the same results as from a plugin
// whose kernels promote themselves.
#ifndef HAL_RUNTIME_OP_HPP_
#define HAL_RUNTIME_OP_HPP_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hal/common/dim_order.hpp"
#include "hal/common/op_schema.hpp"
#include "hal/hal.h"
#include "hal/runtime/device.hpp"
#include "hal/runtime/error.hpp"
#include "hal/runtime/stream.hpp"

namespace hal {

// A strided view (TensorView, below) whose sizes live with the caller: SHAPE
// and STRIDES point at RANK values (STRIDES may be nullptr: contiguous)
// that must stay valid for the launch. For callers that already hold a
// tensor's sizes (a framework's tensor): nothing is copied per launch.
// Owns nothing; trivially copyable.
struct TensorRef {
  hal_buffer_t* buffer = nullptr;  // nullptr only when empty
  uint64_t buffer_bytes = 0;       // as TensorView::buffer_bytes (0 = unknown)
  uint64_t byte_offset = 0;
  hal_dtype_e dtype = HAL_DTYPE_FLOAT32;
  uint32_t rank = 0;
  const int64_t* shape = nullptr;    // RANK sizes; nullptr only for rank 0
  const int64_t* strides = nullptr;  // RANK element strides, or nullptr
};

// A strided view of device memory. Does not own the memory: the Buffer (or
// plugin buffer) must outlive every launch that uses the view. Copyable.
struct TensorView {
  hal_buffer_t* buffer = nullptr;  // plugin buffer; nullptr only when empty
  // Bytes of BUFFER the view may use: the runtime Buffer's size (the plugin
  // buffer behind a cached Buffer may be larger). 0 = unknown, left to the
  // plugin's own check.
  uint64_t buffer_bytes = 0;
  uint64_t byte_offset = 0;
  hal_dtype_e dtype = HAL_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements; empty = contiguous row-major

  TensorView() = default;
  TensorView(const Buffer& b, hal_dtype_e dt, std::vector<int64_t> sizes, std::vector<int64_t> st = {},
             uint64_t offset = 0)
      : buffer(b.handle()),
        buffer_bytes(b.size()),
        byte_offset(offset),
        dtype(dt),
        shape(std::move(sizes)),
        strides(std::move(st)) {}
  // A copy of R's view (its sizes copied; R's pointers need not outlive it).
  explicit TensorView(const TensorRef& r);
  int64_t numel() const;
};

// A named, typed attribute. Owns its value. Copyable.
class Attr {
 public:
  static Attr i(std::string name, int64_t v);
  static Attr f(std::string name, double v);
  static Attr b(std::string name, bool v);
  static Attr s(std::string name, std::string v);
  static Attr ints(std::string name, std::vector<int64_t> v);
  static Attr floats(std::string name, std::vector<double> v);
  static Attr dtype(std::string name, hal_dtype_e v);
  // A "scalar" attribute from an integer (INT) or a double (FLOAT).
  static Attr scalar(std::string name, double v) { return f(std::move(name), v); }

  const std::string& name() const { return name_; }
  // The C record; valid while this Attr lives and is not modified.
  hal_attr_t c_attr() const;

 private:
  std::string name_;
  uint32_t type_ = HAL_ATTR_TYPE_INVALID;
  int64_t i_ = 0;
  double f_ = 0;
  // STRING, INTS, FLOATS values; empty for the scalar kinds, so making,
  // moving and dropping a number attribute (the launch hot path) touches
  // one object, not three.
  std::variant<std::monostate, std::string, std::vector<int64_t>, std::vector<double>> payload_;
};

// How the plugin's op takes its inputs (hal_op_input_mode_e).
enum class InputMode { kMixed, kUniform };

// Whether launch() casts inputs for a uniform op (kCore, the default) or
// hands every call to the plugin as given (kNone: a mixed call to a uniform
// op then fails with HAL_STATUS_MIXED_DTYPES; hal-conformance's direct mode).
enum class Promotion { kCore, kNone };

struct PromotionState;  // op.cc: what the casting path resolves once

// One op resolved on one device's plugin. Cheap to copy; thread-safe.
// Preferred dim orders of one call's inputs and outputs (OpRunner::layouts).
struct OpLayouts {
  std::vector<common::DimOrder> inputs, outputs;  // empty entry: no preference
};

class OpRunner {
 public:
  // Throws UNIMPLEMENTED when the plugin has no operator interface, does
  // not implement NAME, or hal.toml disables NAME for the plugin
  // (disabled_ops: "disabled by hal.toml"); the message says which.
  OpRunner(std::shared_ptr<Device> device, const std::string& name, Promotion promotion = Promotion::kCore);

  const std::string& name() const { return name_; }
  hal_op_id_t id() const { return id_; }
  Device& device() const { return *device_; }
  // As the plugin declared it (op_get_info, ABI 1.4); kMixed for plugins
  // that predate it.
  InputMode input_mode() const { return input_mode_; }
  // Compute dtypes the plugin runs the op in (HAL_DTYPE_BIT mask); every
  // dtype for plugins that predate op_get_info.
  uint64_t compute_dtypes() const { return compute_dtypes_; }
  Promotion promotion() const { return promotion_; }

  // Queues the op on STREAM (nullptr: runs synchronously). An absent
  // optional input is a nullptr entry. Throws hal::Error; on error nothing
  // was queued or written to the outputs. A view reaching past its Buffer's
  // size is OUT_OF_RANGE here, before the plugin sees it. With promotion
  // (above), also: OUT_OF_MEMORY when a cast's scratch does not fit (naming
  // the sizes), and UNSUPPORTED_DTYPE when neither the plugin's copy nor a
  // fallback device can cast an input (naming op, dtypes and plugin).
  void launch(const std::vector<const TensorView*>& inputs, const std::vector<const TensorView*>& outputs,
              const std::vector<Attr>& attrs = {}, const Stream* stream = nullptr) const;
  // The same for views given as TensorRef: INPUTS[0..INPUT_COUNT) (nullptr:
  // an absent optional input) and OUTPUTS[0..OUTPUT_COUNT), which with
  // what they point at must stay valid until this returns. The launch path
  // of a framework bridge: no per-call copy of sizes. Same errors and
  // guarantees, promotion included.
  void launch(const TensorRef* const* inputs, size_t input_count, const TensorRef* const* outputs,
              size_t output_count, const std::vector<Attr>& attrs, const Stream* stream = nullptr) const;
  // Whether the device would accept the call (buffers are not read):
  // nullptr when it would, else the reason. Asks the plugin as given: a
  // mixed call to a uniform op is HAL_STATUS_MIXED_DTYPES here even though
  // launch() would cast (see would_cast()).
  std::unique_ptr<Error> check(const std::vector<const TensorView*>& inputs,
                               const std::vector<const TensorView*>& outputs,
                               const std::vector<Attr>& attrs = {}) const;
  // The layouts the plugin's kernel prefers for this call (op_get_layouts,
  // ABI 1.8; hal/op.h, LAYOUTS): one dim order per input and output,
  // outermost dim first, empty for "no preference". nullopt when the plugin
  // does not say (no op_get_layouts, a negotiated MINOR below 8) or refuses
  // the call (what op_check would refuse). Views need no buffers; inputs'
  // strides are the ones they will have. Thread-safe.
  std::optional<OpLayouts> layouts(const std::vector<const TensorView*>& inputs,
                                   const std::vector<const TensorView*>& outputs,
                                   const std::vector<Attr>& attrs = {}) const;
  // Whether launch() would cast some input of this call first (promotion
  // kCore, a uniform op, an input not in the compute dtype).
  bool would_cast(const std::vector<const TensorView*>& inputs) const;
  // The op's catalog schema (static storage), or nullptr for an op outside
  // the catalog (a plugin extension). Thread-safe.
  const common::OpSchema* schema() const noexcept { return schema_; }

 private:
  void launch_promoted(const std::vector<const TensorView*>& inputs, const std::vector<const TensorView*>& outputs,
                       const std::vector<Attr>& attrs, const Stream* stream, hal_dtype_e compute) const;
  hal_dtype_e cast_dtype(const std::vector<const TensorView*>& inputs) const;

  std::shared_ptr<Device> device_;
  std::string name_;
  hal_op_id_t id_ = 0;
  InputMode input_mode_ = InputMode::kMixed;
  uint64_t compute_dtypes_ = ~uint64_t{0};
  Promotion promotion_ = Promotion::kCore;
  const common::OpSchema* schema_ = nullptr;  // nullptr: not a catalog op (no promotion)
  std::shared_ptr<PromotionState> promotion_state_;
};

namespace detail {
// The C descriptor of V (valid while V lives). Throws OUT_OF_RANGE when V
// reaches past its Buffer's size and INVALID_ARGUMENT for a strides/rank
// mismatch; messages start with WHAT and name ROLE and INDEX ("input 1").
hal_tensor_t c_tensor(const std::string& what, const TensorView& v, const char* role, size_t index);
// The same for a TensorRef (also INVALID_ARGUMENT for a rank without a shape).
hal_tensor_t c_tensor(const std::string& what, const TensorRef& v, const char* role, size_t index);
}  // namespace detail

// Names of the ops DEVICE's plugin implements (empty without an operator
// interface), without those hal.toml disables for it.
std::vector<std::string> op_names(const Device& device);

}  // namespace hal

#endif  // HAL_RUNTIME_OP_HPP_
