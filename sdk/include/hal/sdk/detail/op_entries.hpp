// HAL C++ SDK, internal: the operator table's C entries (hal/op.h) and the
// validation that turns hal_op_args_t into an OpCall (OpCallBuilder, also
// used by the graph entries). Reached through hal/sdk/ops.hpp, which
// completes detail::OpTable so HAL_SDK_PLUGIN hands the table to the core.
#ifndef HAL_SDK_DETAIL_OP_ENTRIES_HPP_
#define HAL_SDK_DETAIL_OP_ENTRIES_HPP_

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "hal/common/extension.hpp"
#include "hal/common/op_call_builder.hpp"
#include "hal/hal.h"
#include "hal/sdk/detail/call.hpp"
#include "hal/sdk/detail/memory_entries.hpp"
#include "hal/sdk/detail/registry.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/op_registry.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::sdk {

// The schema-only checks (counts, attributes, dtype and shape rules) are
// hal::common::OpCallBuilder's, shared with libhal's shape inference; this
// adds the descriptors, buffers and aliasing of a real launch.
struct OpCallBuilder : common::OpCallBuilder {
  // Validates ARGS against SCHEMA and copies them. NEED_BUFFERS: a launch
  // (buffers must be live, of DEVICE, and hold the tensors); else a check,
  // where buffers may be NULL.
  // BATCH: the registry lock the caller holds (buffer lookups use it), or
  // nullptr.
  static std::shared_ptr<const OpCall> build(const OpSchema& schema, Device& device, const hal_op_args_t& args,
                                             bool need_buffers, const detail::Registry::Batch* batch = nullptr) {
    std::shared_ptr<OpCall> call = reusable_call();
    call->schema_ = &schema;
    call->device_ = &device;
    const char* op = schema.name;

    // Inputs.
    bool variadic_in = schema.input_count == 1 && schema.inputs[0].variadic;
    if (args.input_count > 0 && args.inputs == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": inputs is NULL but input_count is ", args.input_count);
    check_input_count(schema, op, args.input_count);
    size_t n_in = variadic_in ? args.input_count : schema.input_count;
    // Element by element, not resize(): resize's value-initialising loop
    // (a memset per Tensor) measured ~10 ns of a 1-element launch.
    call->inputs_.reserve(n_in);
    for (size_t i = 0; i < n_in; ++i) call->inputs_.emplace_back();
    for (size_t i = 0; i < n_in; ++i) {
      const TensorSpec& spec = schema.inputs[variadic_in ? 0 : i];
      const hal_tensor_t* t = i < args.input_count ? args.inputs[i] : nullptr;
      Role label{"input", spec.name, variadic_in, i};
      if (t == nullptr) {
        if (!spec.optional) fail(HAL_STATUS_INVALID_ARGUMENT, op, ": required ", label, " is NULL");
        continue;
      }
      Tensor& dst = call->inputs_[i];
      parse_tensor(op, label, *t, device, need_buffers, dst, batch);
      check_input_dtype(schema, op, i, dst.dtype);
    }

    parse_attrs_into(schema, op, args.attrs, args.attr_count, call->attrs_);

    // Common dtype (PyTorch result_type over the promoted inputs).
    call->common_dtype_ = common_dtype(schema, call->inputs_);

    // Outputs: parse, then compare with what the rules expect.
    bool variadic_out = schema.output_count == 1 && schema.outputs[0].variadic;
    if (args.output_count > 0 && args.outputs == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": outputs is NULL but output_count is ", args.output_count);
    check_output_count(schema, op, args.output_count);
    call->outputs_.reserve(args.output_count);
    for (size_t i = 0; i < args.output_count; ++i) call->outputs_.emplace_back();
    for (size_t i = 0; i < args.output_count; ++i) {
      Role label{"output", schema.outputs[variadic_out ? 0 : i].name, variadic_out, i};
      if (args.outputs[i] == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " is NULL");
      parse_tensor(op, label, *args.outputs[i], device, need_buffers, call->outputs_[i], batch);
    }
    // Per-thread scratch: the shape rules do not launch, so nothing re-enters.
    thread_local std::vector<TensorMeta> expected;
    expected_outputs_into(*call, args.output_count, expected);
    for (size_t i = 0; i < expected.size(); ++i) {
      const Tensor& o = call->outputs_[i];
      Role label{"output", schema.outputs[variadic_out ? 0 : i].name, variadic_out, i};
      if (o.dtype != expected[i].dtype)
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " has dtype ", dtype_name(o.dtype), " but must be ",
             dtype_name(expected[i].dtype));
      if (o.rank != expected[i].rank || !std::equal(o.shape, o.shape + o.rank, expected[i].shape))
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " has shape ", o.shape_str(), " but must be ",
             shape_string(expected[i].shape, expected[i].rank));
      if (has_internal_overlap(o))
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " with shape ", o.shape_str(), " and strides ",
             o.strides_str(), " has overlapping elements (a broadcast view cannot be written)");
    }
    if (need_buffers) check_aliasing(schema, *call, variadic_in, variadic_out);
    return call;
  }

  // A call assembled from parts a graph compiler already validated (a node
  // of a hal::sdk::Graph run through the plugin's own kernel): INPUTS in
  // catalog order (an undefined Tensor for an absent optional input), ATTRS
  // as GraphNode::attrs (every attribute, defaults applied), OUTPUTS.
  // Computes the common dtype and checks nothing else. The caller owns the
  // new call.
  static std::shared_ptr<OpCall> assemble(const OpSchema& schema, Device& device, std::vector<Tensor> inputs,
                                          std::vector<AttrValue> attrs, std::vector<Tensor> outputs) {
    auto call = std::make_shared<OpCall>();
    call->schema_ = &schema;
    call->device_ = &device;
    call->inputs_ = std::move(inputs);
    call->outputs_ = std::move(outputs);
    call->attrs_ = std::move(attrs);
    call->common_dtype_ = common_dtype(schema, call->inputs_);
    return call;
  }
  // The tensors of an assembled CALL, to set its outputs once their shapes
  // are known and to point them at other memory between runs. Only while no
  // kernel holds CALL.
  static std::vector<Tensor>& inputs_of(OpCall& call) { return call.inputs_; }
  static std::vector<Tensor>& outputs_of(OpCall& call) { return call.outputs_; }

  // This thread's previous call object when nothing else holds it any more,
  // emptied (its vectors keep their capacity), else a new one: once warm, a
  // launch allocates no OpCall, tensor or attribute storage. A kernel that
  // keeps its call (queued on an asynchronous stream) holds a reference, so
  // the next build makes a new one instead.
  static std::shared_ptr<OpCall> reusable_call() {
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer does not model the fence below (-Wtsan) and would
    // report the reuse as a race: a new call each time under it.
    return std::make_shared<OpCall>();
#else
    thread_local std::shared_ptr<OpCall> spare;
    if (spare != nullptr && spare.use_count() == 1) {
      // Pairs with the release in the last other holder's decrement: its
      // reads of the call happen before the reuse.
      std::atomic_thread_fence(std::memory_order_acquire);
      spare->inputs_.clear();
      spare->outputs_.clear();
      spare->attrs_.clear();
      spare->common_dtype_ = HAL_DTYPE_INVALID;
      return spare;
    }
    spare = std::make_shared<OpCall>();
    return spare;
#endif
  }

  // ---- pieces shared with the graph interface (detail/graph_entries.hpp);
  // the schema-only ones are inherited from common::OpCallBuilder.
  // OP prefixes every message ("add", "node 3 ('add')").

  // Validates T and copies it into DST (strides filled in); LABEL (anything
  // streamable) names it in messages. NEED_BUFFERS: the buffer must be a
  // live buffer of DEVICE holding the tensor. BATCH: the registry lock the
  // caller holds, or nullptr.
  template <class Label>
  static void parse_tensor(const char* op, const Label& label, const hal_tensor_t& t, Device& device,
                           bool need_buffers, Tensor& dst, const detail::Registry::Batch* batch = nullptr) {
    if (!HAL_STRUCT_HAS_FIELD(&t, hal_tensor_t, strides))
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, ": hal_tensor_t.struct_size ", t.struct_size, " is too small");
    if (t.dtype == HAL_DTYPE_INVALID || t.dtype >= HAL_DTYPE_COUNT_)
      fail(HAL_STATUS_UNSUPPORTED_DTYPE, op, ": ", label, " has unknown dtype value ", t.dtype);
    if (t.rank > HAL_TENSOR_MAX_RANK)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " has rank ", t.rank, " > HAL_TENSOR_MAX_RANK (",
           HAL_TENSOR_MAX_RANK, ")");
    if (t.rank > 0 && t.shape == nullptr)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " has rank ", t.rank, " but shape is NULL");
    dst.defined = true;
    dst.dtype = static_cast<hal_dtype_e>(t.dtype);
    dst.rank = static_cast<int>(t.rank);
    int64_t numel = 1;
    for (int d = 0; d < dst.rank; ++d) {
      dst.shape[d] = t.shape[d];
      if (t.shape[d] < 0)
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " has negative size ", t.shape[d], " in dim ", d,
             " of shape ", dst.shape_str());
      if (__builtin_mul_overflow(numel, t.shape[d], &numel) || numel > (int64_t{1} << 56))
        fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " shape ", dst.shape_str(), " has too many elements");
    }
    if (t.strides == nullptr) {
      dst.set_contiguous_strides();
    } else {
      for (int d = dst.rank - 1; d >= 0; --d) {
        dst.strides[d] = t.strides[d];
        if (t.strides[d] < 0)
          fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " has negative stride ", t.strides[d], " in dim ", d);
      }
    }
    // Last element's offset; overflow-checked.
    int64_t last = 0;
    if (numel > 0)
      for (int d = 0; d < dst.rank; ++d) {
        int64_t step = 0;
        if (__builtin_mul_overflow(dst.shape[d] - 1, dst.strides[d], &step) ||
            __builtin_add_overflow(last, step, &last) || last > (int64_t{1} << 56))
          fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " strides ", dst.strides_str(), " with shape ",
               dst.shape_str(), " overflow");
      }
    dst.byte_offset = t.byte_offset;
    if (!need_buffers) return;
    if (t.buffer == nullptr) {
      if (numel == 0) return;
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " has ", numel, " elements but its buffer is NULL");
    }
    Buffer* buffer = nullptr;
    try {
      buffer = batch != nullptr ? batch->get<Buffer>(t.buffer, detail::Kind::kBuffer, "buffer")
                                : detail::as<Buffer>(t.buffer, detail::Kind::kBuffer, "buffer");
    } catch (const Error& e) {
      fail(e.code(), op, ": ", label, " ", e.what());
    }
    if (&buffer->device() != &device)
      fail(HAL_STATUS_INVALID_ARGUMENT, op, ": ", label, " buffer belongs to another device");
    dst.buffer = buffer;
    uint64_t bytes = numel == 0 ? 0 : static_cast<uint64_t>(last + 1) * dtype_size(dst.dtype);
    if (t.byte_offset > buffer->size() || bytes > buffer->size() - t.byte_offset)
      fail(HAL_STATUS_OUT_OF_RANGE, op, ": ", label, " (shape ", dst.shape_str(), ", strides ", dst.strides_str(),
           ", ", dtype_name(dst.dtype), ") needs bytes [", t.byte_offset, ", ", t.byte_offset + bytes,
           ") but its buffer has ", buffer->size(), " bytes");
    if (void* host = buffer->host_pointer()) dst.data = static_cast<unsigned char*>(host) + t.byte_offset;
  }

  // [first byte, one past the last byte) that T's elements span.
  static std::pair<uint64_t, uint64_t> byte_range(const Tensor& t) {
    int64_t last = 0;
    for (int d = 0; d < t.rank; ++d) last += (t.shape[d] - 1) * t.strides[d];
    return {t.byte_offset, t.byte_offset + static_cast<uint64_t>(last + 1) * t.element_size()};
  }

 private:
  friend struct GraphBuilder;  // has_internal_overlap
  // Whether two distinct indices of T address the same element.
  static bool has_internal_overlap(const Tensor& t) {
    if (t.numel() <= 1) return false;
    int order[HAL_TENSOR_MAX_RANK];
    int n = 0;
    for (int d = 0; d < t.rank; ++d)
      if (t.shape[d] > 1) order[n++] = d;
    // Insertion sort by stride (n <= 8; std::sort trips -Warray-bounds here).
    for (int i = 1; i < n; ++i)
      for (int j = i; j > 0 && t.strides[order[j]] < t.strides[order[j - 1]]; --j) std::swap(order[j], order[j - 1]);
    int64_t reach = 0;  // furthest offset the smaller dims reach
    for (int k = 0; k < n; ++k) {
      int d = order[k];
      if (t.strides[d] <= reach) return true;
      reach += (t.shape[d] - 1) * t.strides[d];
    }
    return false;
  }

  // Whether A and B, whose byte ranges overlap, still share no byte: for
  // some period P (a byte stride of A), every dim of each either steps by a
  // multiple of P or stays inside one period, and the two occupy disjoint
  // byte intervals of the period. Column slices of one parent (the q, k and
  // v views of a fused projection, written in place) pass; anything less
  // regular stays refused.
  static bool disjoint_columns(const Tensor& a, const Tensor& b) {
    auto columns = [](const Tensor& t, uint64_t p, uint64_t* lo, uint64_t* hi) {
      const uint64_t size = t.element_size();
      uint64_t span = size;
      for (int d = 0; d < t.rank; ++d) {
        const uint64_t step = static_cast<uint64_t>(t.strides[d]) * size;
        if (t.shape[d] > 1 && step % p != 0) span += static_cast<uint64_t>(t.shape[d] - 1) * step;
      }
      *lo = t.byte_offset % p;
      *hi = *lo + span;
      return *hi <= p;
    };
    for (int d = 0; d < a.rank; ++d) {
      if (a.shape[d] <= 1 || a.strides[d] <= 0) continue;
      const uint64_t p = static_cast<uint64_t>(a.strides[d]) * a.element_size();
      uint64_t alo, ahi, blo, bhi;
      if (columns(a, p, &alo, &ahi) && columns(b, p, &blo, &bhi) && (ahi <= blo || bhi <= alo)) return true;
    }
    return false;
  }

  static void check_aliasing(const OpSchema& schema, const OpCall& call, bool variadic_in, bool variadic_out) {
    for (size_t o = 0; o < call.output_count(); ++o) {
      const Tensor& out = call.output(o);
      if (out.buffer == nullptr || out.numel() == 0) continue;
      auto ro = byte_range(out);
      Role olabel{"output", schema.outputs[variadic_out ? 0 : o].name, variadic_out, o};
      for (size_t i = 0; i < call.input_count(); ++i) {
        const Tensor& in = call.input(i);
        if (!in.defined || in.buffer != out.buffer || in.numel() == 0) continue;
        auto ri = byte_range(in);
        if (ri.second <= ro.first || ro.second <= ri.first) continue;
        bool exact = in.byte_offset == out.byte_offset && in.dtype == out.dtype && in.sizes() == out.sizes() &&
                     std::equal(in.strides, in.strides + in.rank, out.strides);
        if (exact && schema.alias == Alias::kExact) continue;
        if (!exact && disjoint_columns(out, in)) continue;
        fail(HAL_STATUS_INVALID_ARGUMENT, schema.name, ": ", olabel, " (bytes [", ro.first, ", ", ro.second,
             ")) overlaps ", Role{"input", schema.inputs[variadic_in ? 0 : i].name, variadic_in, i}, " (bytes [",
             ri.first, ", ", ri.second, ")) of the same buffer; ",
             schema.alias == Alias::kExact ? "only an exact in-place alias is allowed"
                                           : "this op allows no aliasing");
      }
      for (size_t p = 0; p < o; ++p) {
        const Tensor& other = call.output(p);
        if (other.buffer != out.buffer || other.numel() == 0) continue;
        auto rp = byte_range(other);
        if (rp.second <= ro.first || ro.second <= rp.first || disjoint_columns(out, other)) continue;
        fail(HAL_STATUS_INVALID_ARGUMENT, schema.name, ": ", olabel, " overlaps output ", p, " of the same buffer");
      }
    }
  }
};

namespace detail {

// ---- C table entries ----------------------------------------------------------

inline hal_status_t* op_count(hal_plugin_t* p, uint32_t* out) {
  return call("op_count", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_count is NULL");
    *out = static_cast<uint32_t>(plugin->ops().size());
  });
}

inline hal_status_t* op_get_name(hal_plugin_t* p, uint32_t index, const char** out) {
  return call("op_get_name", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    if (out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_name is NULL");
    if (index >= plugin->ops().size())
      fail(HAL_STATUS_OUT_OF_RANGE, "op index ", index, " >= op count ", plugin->ops().size());
    *out = plugin->ops().at(index).schema->name;
  });
}

inline hal_status_t* op_resolve(hal_plugin_t* p, const char* name, hal_op_id_t* out) {
  return call("op_resolve", [&] {
    auto* plugin = as<Plugin>(p, Kind::kPlugin, "plugin");
    if (name == nullptr || out == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "name or out_id is NULL");
    int64_t id = plugin->ops().find(name);
    if (id < 0)
      fail(HAL_STATUS_UNIMPLEMENTED, "op '", name, "' is ",
           find_schema(name) != nullptr ? "in the catalog but not implemented by this plugin"
                                        : "not in the op catalog (version " +
                                              std::to_string(HAL_OP_CATALOG_VERSION_MAJOR) + "." +
                                              std::to_string(HAL_OP_CATALOG_VERSION_MINOR) + ")");
    *out = static_cast<hal_op_id_t>(id);
  });
}

// HAL_STATUS_MIXED_DTYPES unless every promoted input of CALL is in its
// compute dtype (a uniform kernel reads that dtype only).
inline void require_uniform_inputs(const OpCall& call) {
  const OpSchema& schema = call.schema();
  hal_dtype_e compute = call.common_dtype();
  for (size_t i = 0; i < call.input_count(); ++i) {
    const Tensor& t = call.input(i);
    if (!t.defined || t.dtype == compute || !schema.promotes_input(i)) continue;
    bool variadic = schema.variadic_inputs();
    fail(HAL_STATUS_MIXED_DTYPES, schema.name, ": ",
         OpCallBuilder::Role{"input", schema.inputs[variadic ? 0 : i].name, variadic, i}, " is ",
         dtype_name(t.dtype), " but the call computes in ", dtype_name(compute),
         "; this plugin's kernel takes uniform inputs (every promoted input in the compute dtype): cast it "
         "first (libhal's op launch does)");
  }
}

// KERNEL's function for CALL (of KERNEL's op): UNSUPPORTED_DTYPE when no
// function implements the call's compute dtype, MIXED_DTYPES when a uniform
// kernel would get inputs of another dtype. A launch and a graph compiler
// running the node through the kernel decide alike.
inline KernelFn kernel_for(const Kernel& kernel, const OpCall& call) {
  const hal_dtype_e compute = call.common_dtype();
  if (compute != HAL_DTYPE_INVALID && (kernel.dtypes & HAL_DTYPE_BIT(compute)) == 0)
    fail(HAL_STATUS_UNSUPPORTED_DTYPE, kernel.schema->name, ": this device does not implement dtype ",
         dtype_name(compute), " (it implements ", dtype_mask_names(kernel.dtypes), ")");
  if (kernel.input_mode == InputMode::kUniform) require_uniform_inputs(call);
  return kernel.fn(compute);
}

// Validates the call; returns the device, kernel function and the built call.
inline std::shared_ptr<const OpCall> prepare_op(hal_device_t* d, const hal_op_args_t* args, bool need_buffers,
                                                KernelFn* out_fn) {
  Device* device = nullptr;
  const Kernel* found = nullptr;
  std::shared_ptr<const OpCall> call;
  {
    Registry::Batch batch(registry());  // one lock for the device's and every buffer's lookup
    device = batch.get<Device>(d, Kind::kDevice, "device");
    if (args == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "args is NULL");
    if (!HAL_STRUCT_HAS_FIELD(args, hal_op_args_t, attr_count))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_op_args_t.struct_size ", args->struct_size, " is too small");
    common::require_well_formed_extension_chain(args->next, "hal_op_args_t.next");
    Plugin* plugin = static_cast<Plugin*>(const_cast<void*>(batch.owner(device)));
    if (plugin == nullptr || args->op >= plugin->ops().size())
      fail(HAL_STATUS_INVALID_ARGUMENT, "op id ", args->op, " was not returned by op_resolve of this plugin");
    found = &plugin->ops().at(args->op);
    call = OpCallBuilder::build(*found->schema, *device, *args, need_buffers, &batch);
  }
  const KernelFn fn = kernel_for(*found, *call);
  device->check_op(*call);
  *out_fn = fn;
  return call;
}

inline hal_status_t* op_check(hal_device_t* d, const hal_op_args_t* args) {
  return call("op_check", [&] {
    KernelFn fn = nullptr;
    prepare_op(d, args, false, &fn);
  });
}

inline hal_status_t* op_launch(hal_device_t* d, const hal_op_args_t* args, hal_stream_t* s) {
  return call("op_launch", [&] {
    KernelFn fn = nullptr;
    auto op_call = prepare_op(d, args, true, &fn);
    Stream* stream = optional_stream(s, op_call->device());
    fn(op_call, stream);
  });
}

inline hal_status_t* op_get_info(const hal_op_get_info_args_t* args) {
  return call("op_get_info", [&] {
    if (args == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "args is NULL");
    if (!HAL_STRUCT_HAS_FIELD(args, hal_op_get_info_args_t, out_info))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_op_get_info_args_t.struct_size ", args->struct_size, " is too small");
    common::require_well_formed_extension_chain(args->next, "hal_op_get_info_args_t.next");
    auto* plugin = as<Plugin>(args->plugin, Kind::kPlugin, "plugin");
    if (args->out_info == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "out_info is NULL");
    hal_op_info_t* info = args->out_info;
    if (!HAL_STRUCT_HAS_FIELD(info, hal_op_info_t, compute_dtypes))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_op_info_t.struct_size ", info->struct_size, " is too small");
    if (args->op >= plugin->ops().size())
      fail(HAL_STATUS_INVALID_ARGUMENT, "op id ", args->op, " was not returned by op_resolve of this plugin");
    const Kernel& kernel = plugin->ops().at(args->op);
    info->input_mode = static_cast<uint32_t>(kernel.input_mode);
    info->compute_dtypes = kernel.dtypes;
  });
}

inline hal_status_t* op_get_layouts(const hal_op_get_layouts_args_t* args) {
  return call("op_get_layouts", [&] {
    if (args == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "args is NULL");
    if (!HAL_STRUCT_HAS_FIELD(args, hal_op_get_layouts_args_t, out_outputs))
      fail(HAL_STATUS_INVALID_ARGUMENT, "hal_op_get_layouts_args_t.struct_size ", args->struct_size, " is too small");
    common::require_well_formed_extension_chain(args->next, "hal_op_get_layouts_args_t.next");
    const hal_op_args_t* c = args->call;
    if (c == nullptr) fail(HAL_STATUS_INVALID_ARGUMENT, "call is NULL");
    if (HAL_STRUCT_HAS_FIELD(c, hal_op_args_t, output_count) &&
        ((c->input_count > 0 && args->out_inputs == nullptr) || (c->output_count > 0 && args->out_outputs == nullptr)))
      fail(HAL_STATUS_INVALID_ARGUMENT, "out_inputs or out_outputs is NULL for a call with ", c->input_count,
           " inputs and ", c->output_count, " outputs");
    KernelFn fn = nullptr;
    auto op_call = prepare_op(args->device, c, false, &fn);
    auto check_size = [](const hal_op_layout_t* l, const char* role, size_t i) {
      if (l != nullptr && !HAL_STRUCT_HAS_FIELD(l, hal_op_layout_t, dim_order))
        fail(HAL_STATUS_INVALID_ARGUMENT, role, "[", i, "].struct_size ", l->struct_size, " is too small");
    };
    for (size_t i = 0; i < c->input_count; ++i) check_size(args->out_inputs[i], "out_inputs", i);
    for (size_t j = 0; j < c->output_count; ++j) check_size(args->out_outputs[j], "out_outputs", j);
    OpLayouts layouts;
    layouts.inputs.resize(op_call->input_count());
    layouts.outputs.resize(op_call->output_count());
    op_call->device().op_layouts(*op_call, layouts);
    // Checked whole before anything is written: a bad answer leaves every
    // layout untouched.
    auto checked = [&](const std::vector<common::DimOrder>& orders, size_t count, bool input) {
      for (size_t i = 0; i < count && i < orders.size(); ++i) {
        const Tensor& t = input ? op_call->input(i) : op_call->output(i);
        if (!orders[i].empty() && (!t.defined || !common::is_dim_order(orders[i], static_cast<size_t>(t.rank))))
          fail(HAL_STATUS_INTERNAL, op_call->name(), ": the plugin's layout for ", input ? "input " : "output ", i,
               " is not a dim order of its rank ", t.rank);
      }
    };
    checked(layouts.inputs, c->input_count, true);
    checked(layouts.outputs, c->output_count, false);
    auto write = [](hal_op_layout_t* l, const common::DimOrder* order) {
      if (l == nullptr) return;
      l->preference = order != nullptr && !order->empty() ? HAL_OP_LAYOUT_PREFERRED : HAL_OP_LAYOUT_ANY;
      for (size_t d = 0; d < HAL_TENSOR_MAX_RANK; ++d)
        l->dim_order[d] = order != nullptr && d < order->size() ? static_cast<uint32_t>((*order)[d]) : 0;
    };
    for (size_t i = 0; i < c->input_count; ++i)
      write(args->out_inputs[i], i < layouts.inputs.size() ? &layouts.inputs[i] : nullptr);
    for (size_t j = 0; j < c->output_count; ++j)
      write(args->out_outputs[j], j < layouts.outputs.size() ? &layouts.outputs[j] : nullptr);
  });
}

inline const hal_op_api_t kOpApi = {sizeof(hal_op_api_t), HAL_OP_CATALOG_VERSION_MAJOR, HAL_OP_CATALOG_VERSION_MINOR,
                                    &op_count,   &op_get_name, &op_resolve,    &op_check,
                                    &op_launch,  &op_get_info, &op_get_layouts};

template <class P>
struct OpTable<P, true> {
  static const hal_op_api_t* get() { return &kOpApi; }
};
}  // namespace detail
}  // namespace hal::sdk

#endif  // HAL_SDK_DETAIL_OP_ENTRIES_HPP_
