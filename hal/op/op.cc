#include "hal/runtime/op.hpp"

#include "hal/common/op_schema.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal {

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
  a.s_ = std::move(v);
  return a;
}
Attr Attr::ints(std::string name, std::vector<int64_t> v) {
  Attr a;
  a.name_ = std::move(name);
  a.type_ = HAL_ATTR_TYPE_INTS;
  a.ints_ = std::move(v);
  return a;
}
Attr Attr::floats(std::string name, std::vector<double> v) {
  Attr a;
  a.name_ = std::move(name);
  a.type_ = HAL_ATTR_TYPE_FLOATS;
  a.floats_ = std::move(v);
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
    case HAL_ATTR_TYPE_STRING: a.value.s = s_.c_str(); break;
    case HAL_ATTR_TYPE_INTS: a.value.ints = ints_.data(); a.count = ints_.size(); break;
    case HAL_ATTR_TYPE_FLOATS: a.value.floats = floats_.data(); a.count = floats_.size(); break;
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

// A view must stay inside the runtime Buffer it was made from: the plugin
// only sees the (possibly larger) cached block behind it.
void check_extent(const std::string& op, const TensorView& v, const char* role, size_t index) {
  if (v.buffer_bytes == 0 || v.numel() <= 0) return;
  size_t elem = common::dtype_size(v.dtype);
  if (elem == 0 || (!v.strides.empty() && v.strides.size() != v.shape.size())) return;  // the plugin refuses these
  uint64_t last = 0;
  int64_t stride = 1;
  for (size_t d = v.shape.size(); d-- > 0;) {
    int64_t s = v.strides.empty() ? stride : v.strides[d];
    if (s < 0) return;  // the plugin names negative strides
    last += static_cast<uint64_t>(v.shape[d] - 1) * static_cast<uint64_t>(s);
    stride *= v.shape[d];
  }
  uint64_t end = v.byte_offset + (last + 1) * elem;
  if (v.byte_offset > v.buffer_bytes || end > v.buffer_bytes)
    throw Error(HAL_STATUS_OUT_OF_RANGE, op + ": " + role + " " + std::to_string(index) + " (shape " + dims(v.shape) +
                                             ", strides " + dims(v.strides) + ", " + common::dtype_name(v.dtype) +
                                             ") needs bytes [" + std::to_string(v.byte_offset) + ", " +
                                             std::to_string(end) + ") but its buffer has " +
                                             std::to_string(v.buffer_bytes) + " bytes");
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

namespace {

// The C view of one call; valid while the vectors it was made from live.
struct CArgs {
  std::vector<hal_tensor_t> tensors;
  std::vector<const hal_tensor_t*> inputs, outputs;
  std::vector<hal_attr_t> attrs;
  hal_op_args_t args{};

  CArgs(const std::string& op, hal_op_id_t id, const std::vector<const TensorView*>& in,
        const std::vector<const TensorView*>& out, const std::vector<Attr>& at) {
    tensors.reserve(in.size() + out.size());  // pointers into it stay valid
    inputs.reserve(in.size());
    outputs.reserve(out.size());
    attrs.reserve(at.size());
    auto add = [&](const TensorView* v, const char* role, size_t index) -> const hal_tensor_t* {
      if (v == nullptr) return nullptr;
      tensors.push_back(detail::c_tensor(op, *v, role, index));
      return &tensors.back();
    };
    for (size_t i = 0; i < in.size(); ++i) inputs.push_back(add(in[i], "input", i));
    for (size_t i = 0; i < out.size(); ++i) outputs.push_back(add(out[i], "output", i));
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
};

}  // namespace

OpRunner::OpRunner(std::shared_ptr<Device> device, const std::string& name)
    : device_(std::move(device)), name_(name) {
  throw_if_error(op_api(*device_).op_resolve(device_->plugin().instance, name.c_str(), &id_));
}

void OpRunner::launch(const std::vector<const TensorView*>& inputs, const std::vector<const TensorView*>& outputs,
                      const std::vector<Attr>& attrs, const Stream* stream) const {
  CArgs c(name_, id_, inputs, outputs, attrs);
  throw_if_error(op_api(*device_).op_launch(device_->handle(), &c.args, stream ? stream->handle() : nullptr));
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

std::vector<std::string> op_names(const Device& device) {
  const hal_op_api_t& op = device.plugin().op;
  std::vector<std::string> out;
  if (op.op_count == nullptr || op.op_get_name == nullptr) return out;
  uint32_t n = 0;
  throw_if_error(op.op_count(device.plugin().instance, &n));
  for (uint32_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    throw_if_error(op.op_get_name(device.plugin().instance, i, &name));
    out.emplace_back(name);
  }
  return out;
}

}  // namespace hal
