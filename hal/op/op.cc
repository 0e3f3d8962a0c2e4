#include "hal/runtime/op.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>

#include "hal/common/op_catalog.hpp"
#include "hal/common/op_schema.hpp"
#include "hal/runtime/op_stats.hpp"
#include "hal/runtime/stream.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {

TensorView::TensorView(const TensorRef& r)
    : buffer(r.buffer), buffer_bytes(r.buffer_bytes), byte_offset(r.byte_offset), dtype(r.dtype) {
  if (r.shape != nullptr) shape.assign(r.shape, r.shape + r.rank);
  if (r.strides != nullptr) strides.assign(r.strides, r.strides + r.rank);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Attr Attr::i(std::string name, int64_t v) {
  Attr a;
  a.name_ = std::move(name);
  a.type_ = HAL_ATTR_TYPE_INT;
  a.i_ = v;
  return a;
}
Attr Attr::f(std::string name, double v) {
  Attr a;
  a.name_ = std::move(name);
  a.type_ = HAL_ATTR_TYPE_FLOAT;
  a.f_ = v;
  return a;
}
Attr Attr::b(std::string name, bool v) {
  Attr a = i(std::move(name), v ? 1 : 0);
  a.type_ = HAL_ATTR_TYPE_BOOL;
  return a;
}
Attr Attr::s(std::string name, std::string v) {
  Attr a;
  a.name_ = std::move(name);
  a.type_ = HAL_ATTR_TYPE_STRING;
  a.payload_ = std::move(v);
  return a;
}
Attr Attr::ints(std::string name, std::vector<int64_t> v) {
  Attr a;
  a.name_ = std::move(name);
  a.type_ = HAL_ATTR_TYPE_INTS;
  a.payload_ = std::move(v);
  return a;
}
Attr Attr::floats(std::string name, std::vector<double> v) {
  Attr a;
  a.name_ = std::move(name);
  a.type_ = HAL_ATTR_TYPE_FLOATS;
  a.payload_ = std::move(v);
  return a;
}
Attr Attr::dtype(std::string name, hal_dtype_e v) {
  Attr a = i(std::move(name), v);
  a.type_ = HAL_ATTR_TYPE_DTYPE;
  return a;
}

hal_attr_t Attr::c_attr() const {
  hal_attr_t a{};
  a.struct_size = sizeof(a);
  a.name = name_.c_str();
  a.type = type_;
  switch (type_) {
    case HAL_ATTR_TYPE_FLOAT: a.value.f = f_; break;
    case HAL_ATTR_TYPE_STRING: a.value.s = std::get<std::string>(payload_).c_str(); break;
    case HAL_ATTR_TYPE_INTS: {
      const auto& v = std::get<std::vector<int64_t>>(payload_);
      a.value.ints = v.data();
      a.count = v.size();
      break;
    }
    case HAL_ATTR_TYPE_FLOATS: {
      const auto& v = std::get<std::vector<double>>(payload_);
      a.value.floats = v.data();
      a.count = v.size();
      break;
    }
    default: a.value.i = i_; break;
  }
  return a;
}

namespace {

const hal_op_api_t& op_api(const Device& device) {
  const hal_op_api_t& op = device.plugin().op;
  if (op.op_resolve == nullptr || op.op_launch == nullptr)
    throw Error(HAL_STATUS_UNIMPLEMENTED, device.plugin_name() + ": the plugin has no operator interface");
  return op;
}

std::string dims(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// Element offset of the last element past the view's byte_offset; -1 when
// it has no elements or malformed strides (negative or overflowing: the
// plugin names those). STRIDES nullptr: contiguous.
int64_t last_element(size_t rank, const int64_t* shape, const int64_t* strides) {
  int64_t last = 0, stride = 1, step = 0;
  for (size_t d = 0; d < rank; ++d)
    if (shape[d] <= 0) return -1;
  for (size_t d = rank; d-- > 0;) {
    int64_t s = strides == nullptr ? stride : strides[d];
    if (s < 0 || __builtin_mul_overflow(shape[d] - 1, s, &step) || __builtin_add_overflow(last, step, &last) ||
        __builtin_mul_overflow(stride, shape[d], &stride))
      return -1;
  }
  return last;
}

int64_t last_element(const TensorView& v) {
  if (!v.strides.empty() && v.strides.size() != v.shape.size()) return -1;
  return last_element(v.shape.size(), v.shape.data(), v.strides.empty() ? nullptr : v.strides.data());
}

std::string dims(size_t rank, const int64_t* v) { return v == nullptr ? "[]" : dims(std::vector<int64_t>(v, v + rank)); }


// A view must stay inside the runtime Buffer it was made from: the plugin
// only sees the (possibly larger) cached block behind it. Throws
// OUT_OF_RANGE when the view (RANK, SHAPE, STRIDES: nullptr = contiguous)
// reaches past BUFFER_BYTES; messages name OP, ROLE and INDEX.
void check_extent(const std::string& op, uint64_t buffer_bytes, uint64_t byte_offset, hal_dtype_e dtype, size_t rank,
                  const int64_t* shape, const int64_t* strides, const char* role, size_t index) {
  size_t elem = common::dtype_size(dtype);
  int64_t last = last_element(rank, shape, strides);
  if (buffer_bytes == 0 || elem == 0 || last < 0) return;  // the plugin refuses what is malformed
  uint64_t end = byte_offset + (static_cast<uint64_t>(last) + 1) * elem;
  if (byte_offset > buffer_bytes || end > buffer_bytes)
    throw Error(HAL_STATUS_OUT_OF_RANGE, op + ": " + role + " " + std::to_string(index) + " (shape " +
                                             dims(rank, shape) + ", strides " + dims(rank, strides) + ", " +
                                             common::dtype_name(dtype) + ") needs bytes [" +
                                             std::to_string(byte_offset) + ", " + std::to_string(end) +
                                             ") but its buffer has " + std::to_string(buffer_bytes) + " bytes");
}

void check_extent(const std::string& op, const TensorView& v, const char* role, size_t index) {
  if (!v.strides.empty() && v.strides.size() != v.shape.size()) return;  // the plugin names it
  check_extent(op, v.buffer_bytes, v.byte_offset, v.dtype, v.shape.size(), v.shape.data(),
               v.strides.empty() ? nullptr : v.strides.data(), role, index);
}

// Whether the promoted inputs among INPUTS[0..N) (nullptr: absent) are of
// more than one dtype: a uniform op's call then needs a cast. V: TensorView
// or TensorRef.
template <class V>
bool mixed_promoted(const common::OpSchema& schema, const V* const* inputs, size_t n) {
  hal_dtype_e first = HAL_DTYPE_INVALID;
  for (size_t i = 0; i < n; ++i) {
    if (inputs[i] == nullptr || !schema.promotes_input(i)) continue;
    if (first == HAL_DTYPE_INVALID) first = inputs[i]->dtype;
    if (inputs[i]->dtype != first) return true;
  }
  return false;
}

}  // namespace

hal_tensor_t detail::c_tensor(const std::string& what, const TensorView& v, const char* role, size_t index) {
  check_extent(what, v, role, index);
  hal_tensor_t t{};
  t.struct_size = sizeof(t);
  t.buffer = v.buffer;
  t.byte_offset = v.byte_offset;
  t.dtype = v.dtype;
  t.rank = static_cast<uint32_t>(v.shape.size());
  t.shape = v.shape.empty() ? nullptr : v.shape.data();
  if (!v.strides.empty() && v.strides.size() != v.shape.size())
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "TensorView has " + std::to_string(v.strides.size()) +
                                                 " strides for rank " + std::to_string(v.shape.size()));
  t.strides = v.strides.empty() ? nullptr : v.strides.data();
  return t;
}

hal_tensor_t detail::c_tensor(const std::string& what, const TensorRef& v, const char* role, size_t index) {
  if (v.rank > 0 && v.shape == nullptr)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": " + role + " " + std::to_string(index) + " has rank " +
                                                 std::to_string(v.rank) + " but no shape");
  check_extent(what, v.buffer_bytes, v.byte_offset, v.dtype, v.rank, v.shape, v.strides, role, index);
  hal_tensor_t t{};
  t.struct_size = sizeof(t);
  t.buffer = v.buffer;
  t.byte_offset = v.byte_offset;
  t.dtype = v.dtype;
  t.rank = v.rank;
  t.shape = v.rank == 0 ? nullptr : v.shape;
  t.strides = v.rank == 0 ? nullptr : v.strides;
  return t;
}

namespace {

// The first N elements in the object, the rest on the heap: a launch's
// descriptors are almost always a handful, and each heap vector per launch
// cost a malloc/free pair (~4 per 1-element add). Not copyable: pointers
// into it are handed out.
template <class T, size_t N>
class InlineArray {
 public:
  explicit InlineArray(size_t capacity) : data_(inline_) {
    if (capacity > N) {
      heap_.reset(new T[capacity]);
      data_ = heap_.get();
    }
  }
  InlineArray(const InlineArray&) = delete;
  InlineArray& operator=(const InlineArray&) = delete;
  T* push_back(const T& v) {  // capacity was given up front
    data_[size_] = v;
    return &data_[size_++];
  }
  T* data() { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  T inline_[N];  // uninitialised until pushed
  std::unique_ptr<T[]> heap_;
  T* data_;
  size_t size_ = 0;
};

// The C view of one call; valid while the vectors it was made from live.
struct CArgs {
  InlineArray<hal_tensor_t, 8> tensors;
  InlineArray<const hal_tensor_t*, 8> inputs, outputs;
  InlineArray<hal_attr_t, 8> attrs;
  hal_op_args_t args{};

  CArgs(const std::string& op, hal_op_id_t id, const std::vector<const TensorView*>& in,
        const std::vector<const TensorView*>& out, const std::vector<Attr>& at)
      : CArgs(op, id, in.data(), in.size(), out.data(), out.size(), at) {}
  // V: TensorView or TensorRef.
  template <class V>
  CArgs(const std::string& op, hal_op_id_t id, const V* const* in, size_t in_count, const V* const* out,
        size_t out_count, const std::vector<Attr>& at)
      : tensors(in_count + out_count), inputs(in_count), outputs(out_count), attrs(at.size()) {
    auto add = [&](const V* v, const char* role, size_t index) -> const hal_tensor_t* {
      if (v == nullptr) return nullptr;
      return tensors.push_back(detail::c_tensor(op, *v, role, index));
    };
    for (size_t i = 0; i < in_count; ++i) inputs.push_back(add(in[i], "input", i));
    for (size_t i = 0; i < out_count; ++i) outputs.push_back(add(out[i], "output", i));
    for (const Attr& a : at) attrs.push_back(a.c_attr());
    args.struct_size = sizeof(args);
    args.op = id;
    args.inputs = inputs.data();
    args.input_count = inputs.size();
    args.outputs = outputs.data();
    args.output_count = outputs.size();
    args.attrs = attrs.empty() ? nullptr : attrs.data();
    args.attr_count = attrs.size();
  }
  CArgs(const CArgs&) = delete;
  CArgs& operator=(const CArgs&) = delete;
};

}  // namespace

// What the casting path of one OpRunner (and its copies) resolves once: the
// plugin's copy op and the fallback device's, and which dtype pairs the
// plugin's copy converts.
struct PromotionState {
  std::once_flag once;
  std::unique_ptr<OpRunner> copy;  // the device's own copy op; nullptr if it has none
  std::string no_copy;             // why not
  std::shared_ptr<Device> fallback;
  std::unique_ptr<OpRunner> fallback_copy;
  std::string no_fallback;  // why casting through the fallback device is impossible
  // [from][to]: 0 unknown, 1 the device's copy converts, 2 it declines.
  std::atomic<uint8_t> converts[HAL_DTYPE_COUNT_][HAL_DTYPE_COUNT_] = {};
};

namespace {

bool known_dtype(hal_dtype_e d) {
  return d != HAL_DTYPE_INVALID && static_cast<uint32_t>(d) < HAL_DTYPE_COUNT_ && common::dtype_size(d) != 0;
}

std::string input_label(const common::OpSchema& schema, size_t i) {
  if (schema.variadic_inputs()) return std::string("input '") + schema.inputs[0].name + "'[" + std::to_string(i) + "]";
  return std::string("input '") + (i < schema.input_count ? schema.inputs[i].name : "?") + "'";
}

}  // namespace

OpRunner::OpRunner(std::shared_ptr<Device> device, const std::string& name, Promotion promotion)
    : device_(std::move(device)), name_(name), promotion_(promotion) {
  const hal_op_api_t& api = op_api(*device_);
  if (device_->plugin().op_disabled(name))
    throw Error(HAL_STATUS_UNIMPLEMENTED, device_->plugin_name() + ": op '" + name +
                                              "' is disabled by hal.toml (the plugin's disabled_ops)");
  throw_if_error(api.op_resolve(device_->plugin().instance, name.c_str(), &id_));
  // The loader zeroes op_get_info below ABI 1.4: such plugins promote themselves.
  if (api.op_get_info != nullptr) {
    hal_op_info_t info{};
    info.struct_size = sizeof(info);
    hal_op_get_info_args_t args{};
    args.struct_size = sizeof(args);
    args.plugin = device_->plugin().instance;
    args.op = id_;
    args.out_info = &info;
    throw_if_error(api.op_get_info(&args));
    input_mode_ = info.input_mode == HAL_OP_INPUTS_UNIFORM ? InputMode::kUniform : InputMode::kMixed;
    compute_dtypes_ = info.compute_dtypes;
  }
  schema_ = common::catalog::find_schema(name.c_str());
  if (promotion_ == Promotion::kCore && schema_ != nullptr && schema_->promote_mask != 0)
    promotion_state_ = std::make_shared<PromotionState>();
}

// The compute dtype when some promoted input must be cast first, else
// HAL_DTYPE_INVALID (nothing to cast, or the call is for the plugin to
// refuse: unknown dtypes, a compute dtype it does not implement).
hal_dtype_e OpRunner::cast_dtype(const std::vector<const TensorView*>& inputs) const {
  if (!promotion_state_) return HAL_DTYPE_INVALID;
  // The common launch: every promoted input of one dtype, nothing to cast.
  if (!mixed_promoted(*schema_, inputs.data(), inputs.size())) return HAL_DTYPE_INVALID;
  for (const TensorView* v : inputs)
    if (v != nullptr && !known_dtype(v->dtype)) return HAL_DTYPE_INVALID;
  hal_dtype_e compute =
      common::compute_dtype(*schema_, inputs.size(), [&](size_t i, bool* defined, hal_dtype_e* dt, int* rank) {
        *defined = inputs[i] != nullptr;
        if (*defined) {
          *dt = inputs[i]->dtype;
          *rank = static_cast<int>(inputs[i]->shape.size());
        }
      });
  if (compute == HAL_DTYPE_INVALID || (compute_dtypes_ & HAL_DTYPE_BIT(compute)) == 0) return HAL_DTYPE_INVALID;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i] != nullptr && inputs[i]->dtype != compute && schema_->promotes_input(i)) return compute;
  return HAL_DTYPE_INVALID;
}

bool OpRunner::would_cast(const std::vector<const TensorView*>& inputs) const {
  return input_mode_ == InputMode::kUniform && cast_dtype(inputs) != HAL_DTYPE_INVALID;
}

void OpRunner::launch(const std::vector<const TensorView*>& inputs, const std::vector<const TensorView*>& outputs,
                      const std::vector<Attr>& attrs, const Stream* stream) const {
  if (input_mode_ == InputMode::kUniform && promotion_state_) {
    hal_dtype_e compute = cast_dtype(inputs);
    if (compute != HAL_DTYPE_INVALID) return launch_promoted(inputs, outputs, attrs, stream, compute);
  }
  device_->check_usable("op_launch");
  CArgs c(name_, id_, inputs, outputs, attrs);
  hal_status_t* status = op_api(*device_).op_launch(device_->handle(), &c.args, stream ? stream->handle() : nullptr);
  // A plugin may decline a call its op_get_info did not announce (another
  // SDK, an op uniform for some devices only): cast and go again.
  if (status != nullptr && status->code == HAL_STATUS_MIXED_DTYPES && promotion_state_) {
    hal_dtype_e compute = cast_dtype(inputs);
    if (compute != HAL_DTYPE_INVALID) {
      status->destroy(status);
      return launch_promoted(inputs, outputs, attrs, stream, compute);
    }
  }
  device_->check(status);
}

void OpRunner::launch(const TensorRef* const* inputs, size_t input_count, const TensorRef* const* outputs,
                      size_t output_count, const std::vector<Attr>& attrs, const Stream* stream) const {
  // A call that may need a cast takes the TensorView path (promotion reads
  // views); the common call has every promoted input in one dtype.
  auto as_views = [&] {
    std::vector<TensorView> views;
    views.reserve(input_count + output_count);
    std::vector<const TensorView*> in, out;
    for (size_t i = 0; i < input_count; ++i)
      in.push_back(inputs[i] == nullptr ? nullptr : &views.emplace_back(*inputs[i]));
    for (size_t i = 0; i < output_count; ++i) out.push_back(&views.emplace_back(*outputs[i]));
    launch(in, out, attrs, stream);
  };
  if (input_mode_ == InputMode::kUniform && promotion_state_ && mixed_promoted(*schema_, inputs, input_count))
    return as_views();
  device_->check_usable("op_launch");
  CArgs c(name_, id_, inputs, input_count, outputs, output_count, attrs);
  hal_status_t* status = op_api(*device_).op_launch(device_->handle(), &c.args, stream ? stream->handle() : nullptr);
  if (status != nullptr && status->code == HAL_STATUS_MIXED_DTYPES && promotion_state_) {
    status->destroy(status);
    return as_views();  // the plugin declined a call it did not announce: cast there
  }
  device_->check(status);
}

void OpRunner::launch_promoted(const std::vector<const TensorView*>& inputs,
                               const std::vector<const TensorView*>& outputs, const std::vector<Attr>& attrs,
                               const Stream* stream, hal_dtype_e compute) const {
  const common::OpSchema& schema = *schema_;
  PromotionState& st = *promotion_state_;
  // Messages are built only on the way to an error, off the cast path.
  auto where = [&] { return device_->plugin_name() + ": " + name_; };

  // The call as the kernel will see it. Checked before anything is cast, so
  // a wrong call reports its own error and nothing is written.
  std::vector<TensorView> cast(inputs.size());
  std::vector<const TensorView*> uniform(inputs);
  std::vector<size_t> to_cast;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr || inputs[i]->dtype == compute || !schema.promotes_input(i)) continue;
    cast[i].dtype = compute;
    cast[i].shape = inputs[i]->shape;
    uniform[i] = &cast[i];
    to_cast.push_back(i);
    check_extent(name_, *inputs[i], "input", i);
    // The casts read these views themselves (the kernel sees only the scratch).
    if (inputs[i]->numel() > 0 && last_element(*inputs[i]) < 0)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, where() + ": " + input_label(schema, i) + " has strides " +
                                                   dims(inputs[i]->strides) + " for shape " + dims(inputs[i]->shape) +
                                                   " (one stride per dim, each >= 0)");
    if (inputs[i]->buffer == nullptr && inputs[i]->numel() > 0)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, where() + ": " + input_label(schema, i) + " has " +
                                                   std::to_string(inputs[i]->numel()) + " elements but no buffer");
  }
  const hal_op_api_t& api = op_api(*device_);
  if (api.op_check != nullptr) {
    CArgs c(name_, id_, uniform, outputs, attrs);
    throw_if_error(api.op_check(device_->handle(), &c.args));
  }

  std::call_once(st.once, [&] {
    try {
      st.copy = std::make_unique<OpRunner>(device_, "copy", Promotion::kNone);
    } catch (const Error& e) {
      st.no_copy = e.what();
    }
    st.fallback = device_->fallback_device();
    if (!st.fallback) {
      st.no_fallback = "there is no fallback device (hal.toml's fallback_device, or a loaded cpu plugin)";
      return;
    }
    try {
      st.fallback_copy = std::make_unique<OpRunner>(st.fallback, "copy", Promotion::kNone);
    } catch (const Error& e) {
      st.no_fallback = "the fallback device " + st.fallback->id() + " cannot cast: " + e.what();
    }
  });

  std::vector<Buffer> scratch;
  scratch.reserve(to_cast.size());
  for (size_t i : to_cast) {
    const TensorView& in = *inputs[i];
    const hal_dtype_e from = in.dtype;
    const int64_t n = in.numel();
    if (n == 0) continue;  // no elements: the retyped view needs no buffer
    const uint64_t bytes = static_cast<uint64_t>(n) * common::dtype_size(compute);
    auto what = [&] {
      return input_label(schema, i) + " (" + common::dtype_name(from) + ", shape " + dims(in.shape) + ") cast to " +
             common::dtype_name(compute);
    };
    try {
      scratch.push_back(device_->allocate(bytes, stream));
    } catch (const Error& e) {
      throw Error(e.code(), where() + ": " + what() + " needs " + std::to_string(bytes) + " bytes of scratch on " +
                                device_->id() + ": " + e.what());
    }
    TensorView dst(scratch.back(), compute, in.shape);

    // On the device, when its copy op converts FROM to COMPUTE (asked once
    // per dtype pair).
    std::string declined = st.no_copy;
    if (st.copy) {
      std::atomic<uint8_t>& known = st.converts[from][compute];
      uint8_t converts = known.load(std::memory_order_relaxed);
      if (converts == 0) {
        std::unique_ptr<Error> why = st.copy->check({&in}, {&dst});
        converts = why ? 2 : 1;
        known.store(converts, std::memory_order_relaxed);
        if (why) declined = why->what();
      } else if (converts == 2) {
        declined = std::string("its copy op does not convert ") + common::dtype_name(from) + " to " +
                   common::dtype_name(compute);
      }
      if (converts == 1) {
        st.copy->launch({&in}, {&dst}, {}, stream);
        detail::record_cast(*device_, name_, false, bytes);
        cast[i] = dst;
        continue;
      }
    }

    // Through the fallback device: the input's bytes out, cast there, back in.
    if (!st.fallback_copy)
      throw Error(HAL_STATUS_UNSUPPORTED_DTYPE,
                  where() + ": the plugin's kernel takes uniform " + common::dtype_name(compute) + " inputs but " +
                      what() + " is impossible: the plugin's copy cannot (" + declined + ") and " + st.no_fallback);
    const uint64_t span = static_cast<uint64_t>(last_element(in) + 1) * common::dtype_size(from);
    Device& fb = *st.fallback;
    Buffer src_fb = fb.allocate(span);
    Buffer dst_fb = fb.allocate(bytes);
    std::vector<uint8_t> staging;
    void* src_host = src_fb.host_pointer();
    if (src_host == nullptr) {
      staging.resize(span);
      src_host = staging.data();
    }
    device_->check(device_->plugin().memory.copy_device_to_host(src_host, in.buffer, in.byte_offset, span,
                                                                stream ? stream->handle() : nullptr));
    if (stream) stream->synchronize();  // the host needs the bytes now
    if (!staging.empty()) src_fb.copy_from_host(staging.data(), span);
    TensorView src_view(src_fb, from, in.shape, in.strides);
    TensorView dst_view(dst_fb, compute, in.shape);
    st.fallback_copy->launch({&src_view}, {&dst_view});
    // Synchronous, so the host memory may go; the stream was drained above,
    // so the scratch's earlier users on it are done.
    if (const void* host = dst_fb.host_pointer()) {
      scratch.back().copy_from_host(host, bytes);
    } else {
      staging.resize(bytes);
      dst_fb.copy_to_host(staging.data(), bytes);
      scratch.back().copy_from_host(staging.data(), bytes);
    }
    detail::record_cast(*device_, name_, true, bytes);
    cast[i] = dst;
  }

  CArgs c(name_, id_, uniform, outputs, attrs);
  device_->check(api.op_launch(device_->handle(), &c.args, stream ? stream->handle() : nullptr));
  // The scratch returns to the cache here; with a stream it is reused only
  // by later work on that stream, which runs after this launch.
}

std::unique_ptr<Error> OpRunner::check(const std::vector<const TensorView*>& inputs,
                                       const std::vector<const TensorView*>& outputs,
                                       const std::vector<Attr>& attrs) const {
  const hal_op_api_t& api = op_api(*device_);
  if (api.op_check == nullptr)
    return std::make_unique<Error>(HAL_STATUS_UNIMPLEMENTED, device_->plugin_name() + ": op_check is not implemented");
  try {
    CArgs c(name_, id_, inputs, outputs, attrs);
    throw_if_error(api.op_check(device_->handle(), &c.args));
  } catch (const Error& e) {
    return std::make_unique<Error>(e);
  }
  return nullptr;
}

std::optional<OpLayouts> OpRunner::layouts(const std::vector<const TensorView*>& inputs,
                                           const std::vector<const TensorView*>& outputs,
                                           const std::vector<Attr>& attrs) const {
  const hal_op_api_t& api = op_api(*device_);
  if (api.op_get_layouts == nullptr) return std::nullopt;
  CArgs c(name_, id_, inputs, outputs, attrs);
  std::vector<hal_op_layout_t> in(inputs.size()), out(outputs.size());
  std::vector<hal_op_layout_t*> in_ptrs, out_ptrs;
  for (hal_op_layout_t& l : in) {
    l.struct_size = sizeof(l);
    in_ptrs.push_back(&l);
  }
  for (hal_op_layout_t& l : out) {
    l.struct_size = sizeof(l);
    out_ptrs.push_back(&l);
  }
  hal_op_get_layouts_args_t args{};
  args.struct_size = sizeof(args);
  args.device = device_->handle();
  args.call = &c.args;
  args.out_inputs = in_ptrs.data();
  args.out_outputs = out_ptrs.data();
  if (hal_status_t* st = api.op_get_layouts(&args)) {
    st->destroy(st);  // a call the plugin refuses has no layout to prefer
    return std::nullopt;
  }
  auto orders = [](const std::vector<hal_op_layout_t>& ls, const std::vector<const TensorView*>& views) {
    std::vector<common::DimOrder> o(ls.size());
    for (size_t i = 0; i < ls.size(); ++i) {
      if (ls[i].preference != HAL_OP_LAYOUT_PREFERRED || views[i] == nullptr) continue;
      const size_t rank = views[i]->shape.size();
      common::DimOrder order(ls[i].dim_order, ls[i].dim_order + std::min<size_t>(rank, HAL_TENSOR_MAX_RANK));
      if (common::is_dim_order(order, rank)) o[i] = std::move(order);  // else no usable preference
    }
    return o;
  };
  return OpLayouts{orders(in, inputs), orders(out, outputs)};
}

std::vector<std::string> op_names(const Device& device) {
  const hal_op_api_t& op = device.plugin().op;
  std::vector<std::string> out;
  if (op.op_count == nullptr || op.op_get_name == nullptr) return out;
  uint32_t n = 0;
  throw_if_error(op.op_count(device.plugin().instance, &n));
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    throw_if_error(op.op_get_name(device.plugin().instance, i, &name));
    if (!device.plugin().op_disabled(name)) out.emplace_back(name);
  }
  return out;
}

}  // namespace hal
