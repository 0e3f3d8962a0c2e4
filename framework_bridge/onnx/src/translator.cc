#include "translator.hpp"

#include <algorithm>
#include <cstring>

#include "hal/common/dtype.hpp"
#include "hal/sdk/kernel/half.hpp"
#include "hal/runtime/error.hpp"
#include "hal/runtime/shape_inference.hpp"
#include "tensor_proto.hpp"

namespace hal::onnx::detail {

namespace {

bool is_integer(hal_dtype_e dt) {
  switch (dt) {
    case HAL_DTYPE_INT8: case HAL_DTYPE_UINT8: case HAL_DTYPE_INT16: case HAL_DTYPE_UINT16:
    case HAL_DTYPE_INT32: case HAL_DTYPE_UINT32: case HAL_DTYPE_INT64: case HAL_DTYPE_UINT64: case HAL_DTYPE_BOOL:
      return true;
    default:
      return false;
  }
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Integer tensors up to this many elements are also kept element-wise, so
// shape arithmetic on them folds at load.
constexpr size_t kMaxFoldedInts = 64;

}  // namespace

HostTensor int_tensor(hal_dtype_e dtype, const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  HostTensor t{dtype, std::move(shape), {}};
  size_t es = common::dtype_size(dtype);
  t.data.resize(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = t.data.data() + i * es;
    int64_t v = values[i];
    switch (dtype) {
      case HAL_DTYPE_INT8: { int8_t x = static_cast<int8_t>(v); std::memcpy(p, &x, 1); break; }
      case HAL_DTYPE_UINT8: case HAL_DTYPE_BOOL: { uint8_t x = static_cast<uint8_t>(dtype == HAL_DTYPE_BOOL ? v != 0 : v); std::memcpy(p, &x, 1); break; }
      case HAL_DTYPE_INT16: case HAL_DTYPE_UINT16: { int16_t x = static_cast<int16_t>(v); std::memcpy(p, &x, 2); break; }
      case HAL_DTYPE_INT32: case HAL_DTYPE_UINT32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
      default: std::memcpy(p, &v, 8); break;
    }
  }
  return t;
}

std::optional<std::vector<int64_t>> int_values(const HostTensor& t) {
  if (!is_integer(t.dtype)) return std::nullopt;
  size_t es = common::dtype_size(t.dtype);
  std::vector<int64_t> out(t.data.size() / es);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = t.data.data() + i * es;
    switch (t.dtype) {
      case HAL_DTYPE_INT8: out[i] = load<int8_t>(p); break;
      case HAL_DTYPE_UINT8: case HAL_DTYPE_BOOL: out[i] = load<uint8_t>(p); break;
      case HAL_DTYPE_INT16: out[i] = load<int16_t>(p); break;
      case HAL_DTYPE_UINT16: out[i] = load<uint16_t>(p); break;
      case HAL_DTYPE_INT32: out[i] = load<int32_t>(p); break;
      case HAL_DTYPE_UINT32: out[i] = load<uint32_t>(p); break;
      default: out[i] = load<int64_t>(p); break;
    }
  }
  return out;
}

std::optional<std::vector<double>> float_values(const HostTensor& t) {
  if (t.dtype == HAL_DTYPE_FLOAT16 || t.dtype == HAL_DTYPE_BFLOAT16) {
    std::vector<double> out(t.data.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      const uint16_t bits = load<uint16_t>(t.data.data() + 2 * i);
      sdk::kernel::BFloat16 bf;
      bf.bits = bits;
      out[i] = t.dtype == HAL_DTYPE_BFLOAT16 ? static_cast<float>(bf) : sdk::kernel::Half::to_float(bits);
    }
    return out;
  }
  if (t.dtype == HAL_DTYPE_FLOAT32 || t.dtype == HAL_DTYPE_FLOAT64) {
    size_t es = common::dtype_size(t.dtype);
    std::vector<double> out(t.data.size() / es);
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = t.dtype == HAL_DTYPE_FLOAT32 ? load<float>(t.data.data() + i * es) : load<double>(t.data.data() + i * es);
    return out;
  }
  auto ints = int_values(t);
  if (!ints) return std::nullopt;
  return std::vector<double>(ints->begin(), ints->end());
}

void Translator::define(const std::string& name, Slot slot) {
  if (slot.host && !slot.ints && slot.host->shape.size() <= 1) {
    auto v = int_values(*slot.host);
    if (v && v->size() <= kMaxFoldedInts) {
      std::vector<Dim> dims;
      for (int64_t x : *v) dims.push_back(Dim::of(x));
      slot.ints = std::move(dims);
    }
  }
  if (!scopes_.empty() && !scopes_.back().count(name)) {
    auto it = slots_.find(name);
    scopes_.back().emplace(name, it == slots_.end() ? std::nullopt : std::optional<Slot>(it->second));
  }
  slots_[name] = std::move(slot);
}

void Translator::pop_scope() {
  for (auto& [name, previous] : scopes_.back()) {
    if (previous) slots_[name] = std::move(*previous);
    else slots_.erase(name);
  }
  scopes_.pop_back();
}

HostTensor Translator::runtime_value(Graph::Value v, const std::string& what) {
  return request(Request{v, what, {}, {}, false});
}

Graph::Value Translator::runtime_rows(Graph::Value source, Graph::Value count, const std::string& what) {
  const size_t k = requests_made_;
  auto n = int_values(request(Request{count, what, {}, {}, true}));
  ValueSpec rows = spec(source);  // a copy: adding the input may move the graph's values
  if (!n || n->size() != 1) invalid(what + " is not one integer");
  if (rows.shape.empty()) invalid(what + " counts the rows of a 0-d value");
  const int64_t have = rows.shape[0];
  if ((*n)[0] < 0 || (have >= 0 && (*n)[0] > have))
    invalid(what + " is " + std::to_string((*n)[0]) + ", outside [0, " + std::to_string(have) + "]");
  rows.shape[0] = symbolic_rows_ && (*n)[0] >= 2 ? fresh_symbol(0) : (*n)[0];
  if (rows.shape[0] < 0) hints_[rows.shape[0]] = {k, 0, (*n)[0]};
  Graph::Value in = graph_.input(rows.dtype, rows.shape);
  rows_inputs_.push_back({in.id, source.id, k});
  return in;
}

Graph::Value Translator::runtime_view(Graph::Value source, Graph::Value target, bool allowzero, const std::string& what) {
  const size_t k = requests_made_;
  Request r{target, what, {}, {}, false};
  r.view = true;
  r.source = source;
  r.allowzero = allowzero;
  auto dims = int_values(request(std::move(r)));
  ValueSpec view = spec(source);  // a copy: adding the input may move the graph's values
  if (!dims) invalid(what + " is not integers");
  view.shape.clear();
  for (size_t d = 0; d < dims->size(); ++d) {
    if ((*dims)[d] < 0) invalid(what + " has dim " + std::to_string(d) + " = " + std::to_string((*dims)[d]) + " after resolving");
    view.shape.push_back((*dims)[d] >= 2 ? fresh_symbol(d) : (*dims)[d]);
    if (view.shape.back() < 0) hints_[view.shape.back()] = {k, d, (*dims)[d]};
  }
  Graph::Value in = graph_.input(view.dtype, view.shape);
  rows_inputs_.push_back({in.id, source.id, k, true});
  return in;
}

std::vector<int64_t> Translator::runtime_dims(Graph::Value dims, const std::string& what, const std::string& negative,
                                              Graph::Value* carrier) {
  if (carrier != nullptr) *carrier = Graph::Value{};
  const size_t k = requests_made_;
  Request r{dims, what, {}, {}, false};
  r.sizes = true;
  auto v = int_values(request(std::move(r)));
  if (!v) invalid(what + " is not integers");
  std::vector<int64_t> out = *v;
  for (size_t d = 0; d < out.size(); ++d)
    if (out[d] < 0) invalid(!negative.empty() ? negative : what + " has element " + std::to_string(d) + " = " + std::to_string(out[d]));
  if (!symbolic_rows_ || (k < concrete_.size() && concrete_[k])) return out;
  bool symbolic = false;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] < 2) continue;
    const int64_t hint = out[d];
    out[d] = fresh_symbol(d);
    hints_[out[d]] = {k, d, hint};
    symbolic = true;
  }
  if (symbolic) {
    std::vector<int64_t> shape{0};
    shape.insert(shape.end(), out.begin(), out.end());
    Graph::Value in = graph_.input(spec(dims).dtype, shape);
    rows_inputs_.push_back({in.id, dims.id, k, false, true});
    if (carrier != nullptr) *carrier = in;
  }
  return out;
}

std::variant<std::vector<int64_t>, std::string> resolve_reshape(const std::vector<int64_t>& in,
                                                                 const std::vector<int64_t>& target, bool allowzero) {
  int64_t elements = 1;
  for (int64_t d : in) elements *= d;
  std::vector<int64_t> out(target.size());
  int64_t known = 1;
  std::optional<size_t> infer;
  for (size_t i = 0; i < target.size(); ++i) {
    const int64_t d = target[i];
    if (d == -1) {
      if (infer) return "two dims are -1 (dims " + std::to_string(*infer) + " and " + std::to_string(i) + ")";
      infer = i;
      continue;
    }
    if (d < -1) return "dim " + std::to_string(i) + " is " + std::to_string(d);
    if (d == 0 && !allowzero) {
      if (i >= in.size()) return "dim " + std::to_string(i) + " is 0 (copy) but the input has rank " + std::to_string(in.size());
      out[i] = in[i];
    } else {
      out[i] = d;
    }
    known *= out[i];
  }
  const std::string text = "cannot reshape " + shape_text(in) + " (" + std::to_string(elements) + " elements) to " +
                           shape_text(target);
  if (infer) {
    if (known == 0 || elements % known != 0) return text;
    out[*infer] = elements / known;
  } else if (known != elements) {
    return text;
  }
  return out;
}

bool Translator::viewable(size_t i) const {
  const Slot& s = in(i);
  return !s.host && !s.ints && s.value.valid() && !graph_.is_constant(s.value.id);
}

bool Translator::computed_at_run_time(size_t i) const {
  const Slot& s = in(i);
  if (s.host || !s.value.valid()) return false;
  if (s.ints && std::all_of(s.ints->begin(), s.ints->end(), [](const Dim& d) { return d.known(); })) return false;
  const std::vector<uint32_t>& inputs = graph_.inputs();
  return staged_ || std::find(inputs.begin(), inputs.end(), s.value.id) == inputs.end();
}

HostTensor Translator::request(Request r) {
  const size_t k = requests_made_++;
  request_cuts_.push_back(graph_.nodes().size());
  if (k < runtime_values_.size()) return runtime_values_[k];
  const std::string what = r.what;
  r.what += " (" + where() + ")";
  pending_ = std::move(r);
  throw Error(HAL_STATUS_UNIMPLEMENTED, where() + ": " + what + " is only known when the model runs");
}

HostTensor Translator::known(size_t i, const std::string& what) {
  return known_slot(in(i), input_name(i), what);
}

HostTensor Translator::known_slot(const Slot& s, const std::string& name, const std::string& what) {
  if (s.host) return *s.host;
  if (s.ints && std::all_of(s.ints->begin(), s.ints->end(), [](const Dim& d) { return d.known(); })) {
    std::vector<int64_t> v;
    for (const Dim& d : *s.ints) v.push_back(d.value);
    return int_tensor(s.spec.dtype, v, s.spec.shape);
  }
  if (!s.value.valid()) {
    // Shape arithmetic over the inputs' run-time dims: evaluated on the host
    // from the fed shapes when the model runs (a request of dims).
    if (!s.ints) unimplemented(what + " ('" + name + "') depends on a dim only known at run time");
    std::vector<int64_t> dims;
    for (const Dim& d : *s.ints) {
      if (d.kind == Dim::kUnknown) unimplemented(what + " ('" + name + "') depends on a value only known at run time");
      dims.push_back(d.value);  // >= 0: a number; < 0: a symbol
    }
    HostTensor h = request(Request{Graph::Value{}, what + " ('" + name + "')", dims, s.spec.shape, false});
    if (auto v = int_values(h)) return int_tensor(s.spec.dtype, *v, s.spec.shape);  // the read-back is int64
    return h;
  }
  const std::vector<uint32_t>& inputs = graph_.inputs();
  if (!staged_ && std::find(inputs.begin(), inputs.end(), s.value.id) != inputs.end())
    needs_value(what + " ('" + name + "') is a graph input");
  return runtime_value(s.value, what + " ('" + name + "')");
}

std::vector<int64_t> Translator::known_ints(size_t i, const std::string& what) {
  HostTensor h = known(i, what);
  auto v = int_values(h);
  if (!v) invalid(what + " (input '" + input_name(i) + "') has dtype " + common::dtype_name(h.dtype) + ", not an integer one");
  return *v;
}

const Slot& Translator::slot(const std::string& name) const {
  auto it = slots_.find(name);
  if (it == slots_.end()) invalid("reads '" + name + "', which no input, initializer or earlier node defines");
  return it->second;
}

void Translator::begin_node(const ::onnx::NodeProto& node, size_t index, int64_t opset) {
  node_ = &node;
  index_ = index;
  opset_ = opset;
}

std::string Translator::where() const {
  std::string dom = node_->domain().empty() ? "ai.onnx" : node_->domain();
  return context_ + "node " + std::to_string(index_) + " '" + node_->name() + "' (" + node_->op_type() + ", " + dom + " opset " +
         std::to_string(opset_) + ")";
}

void Translator::unimplemented(const std::string& what) const {
  throw Error(HAL_STATUS_UNIMPLEMENTED, where() + ": " + what);
}
void Translator::invalid(const std::string& what) const { throw Error(HAL_STATUS_INVALID_ARGUMENT, where() + ": " + what); }
void Translator::needs_value(const std::string& what) const {
  value_needed_ = true;
  unimplemented(what);
}

const std::string& Translator::input_name(size_t i) const {
  static const std::string kNone;
  return i < static_cast<size_t>(node_->input_size()) ? node_->input(static_cast<int>(i)) : kNone;
}
const std::string& Translator::output_name(size_t i) const {
  static const std::string kNone;
  return i < static_cast<size_t>(node_->output_size()) ? node_->output(static_cast<int>(i)) : kNone;
}
void Translator::alias_output(size_t i, const Slot& slot) {
  if (!output_name(i).empty()) define(output_name(i), slot);
}

size_t Translator::input_count() const {
  size_t n = static_cast<size_t>(node_->input_size());
  while (n > 0 && node_->input(static_cast<int>(n - 1)).empty()) --n;
  return n;
}
bool Translator::has_input(size_t i) const { return i < input_count() && !input_name(i).empty(); }

const Slot& Translator::in(size_t i) const {
  if (!has_input(i)) invalid("input " + std::to_string(i) + " is required but not given");
  return slot(input_name(i));
}

Graph::Value Translator::value_of(const std::string& name) {
  Slot& s = const_cast<Slot&>(slot(name));
  if (s.value.valid()) return s.value;
  if (s.sequence) invalid("'" + name + "' is a sequence, used as a tensor");
  if (!s.host) unimplemented("'" + name + "' is only known as shape arithmetic with run-time dims and is used as a tensor");
  s.value = graph_.constant(s.host->dtype, s.host->shape, s.host->data, name);
  return s.value;
}
Graph::Value Translator::value(size_t i) {
  in(i);
  return value_of(input_name(i));
}

std::optional<std::vector<Dim>> Translator::ints(size_t i) const { return in(i).ints; }

std::vector<int64_t> Translator::const_ints(size_t i, const std::string& what) {
  auto d = ints(i);
  if (d && std::all_of(d->begin(), d->end(), [](const Dim& x) { return x.known(); })) {
    std::vector<int64_t> out;
    for (const Dim& x : *d) out.push_back(x.value);
    return out;
  }
  return known_ints(i, what);
}

const HostTensor* Translator::host(size_t i) const {
  if (!has_input(i)) return nullptr;
  const Slot& s = in(i);
  return s.host ? &*s.host : nullptr;
}

const ::onnx::AttributeProto* Translator::attr(const std::string& name) const {
  for (const auto& a : node_->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t Translator::attr_int(const std::string& name, int64_t fallback) const {
  const auto* a = attr(name);
  return a ? a->i() : fallback;
}
float Translator::attr_float(const std::string& name, float fallback) const {
  const auto* a = attr(name);
  return a ? a->f() : fallback;
}
std::string Translator::attr_string(const std::string& name, const std::string& fallback) const {
  const auto* a = attr(name);
  return a ? a->s() : fallback;
}
std::optional<std::vector<int64_t>> Translator::attr_ints(const std::string& name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
void Translator::require_attr(const std::string& name, int64_t expected, int64_t fallback) const {
  int64_t v = attr_int(name, fallback);
  if (v != expected)
    unimplemented("attribute " + name + "=" + std::to_string(v) + " is not supported (only " + std::to_string(expected) + ")");
}

size_t Translator::output_count() const { return static_cast<size_t>(node_->output_size()); }

void Translator::set_output(size_t i, Graph::Value v) {
  if (i >= output_count() || output_name(i).empty()) return;
  const std::string& name = output_name(i);
  Slot s;
  s.spec = spec(v);
  s.value = v;
  if (graph_.value_name(v.id).empty()) graph_.set_value_name(v.id, name);
  define(name, std::move(s));
}

void Translator::set_output_host(size_t i, HostTensor t) {
  if (i >= output_count() || output_name(i).empty()) return;
  Slot s;
  s.spec = {t.dtype, t.shape};
  s.host = std::move(t);
  define(output_name(i), std::move(s));
}

void Translator::set_output_ints(size_t i, hal_dtype_e dtype, std::vector<Dim> dims, bool scalar) {
  if (i >= output_count() || output_name(i).empty()) return;
  Slot s;
  s.spec = {dtype, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(dims.size())}};
  bool concrete = true;
  std::vector<int64_t> values;
  for (const Dim& d : dims) {
    concrete = concrete && d.known();
    values.push_back(d.value);
  }
  if (concrete) s.host = int_tensor(dtype, values, s.spec.shape);
  s.ints = std::move(dims);
  define(output_name(i), std::move(s));
}

std::vector<Graph::Value> Translator::emit(const std::string& op, const std::vector<Graph::Value>& inputs,
                                           const std::vector<Attr>& attrs, size_t output_count) {
  std::vector<const ValueSpec*> in;
  for (const Graph::Value& v : inputs) in.push_back(v.valid() ? &spec(v) : nullptr);
  InferContext ctx;
  ctx.label = where() + " -> catalog '" + op + "'";
  ctx.fresh_symbol = [&](size_t, size_t dim) { return fresh_symbol(dim); };
  ctx.symbol_name = [&](int64_t s) { return graph_.symbol_name(s); };
  std::vector<ValueSpec> outs;
  try {
    outs = infer_node(op, in, attrs, output_count, ctx);
  } catch (const Error& e) {
    if (e.code() == HAL_STATUS_UNIMPLEMENTED) unimplemented("the catalog has no op '" + op + "' (" + e.what() + ")");
    throw;
  }
  return graph_.add_node(op, inputs, attrs, outs);
}

Graph::Value Translator::emit1(const std::string& op, const std::vector<Graph::Value>& inputs, const std::vector<Attr>& attrs) {
  return emit(op, inputs, attrs)[0];
}

Graph::Value Translator::emit_as(const std::string& op, const std::vector<Graph::Value>& inputs,
                                 const std::vector<Attr>& attrs, const ValueSpec& out) {
  return graph_.add_node(op, inputs, attrs, {out})[0];
}

Graph::Value Translator::constant(const HostTensor& t) {
  std::string base = node_->name().empty() ? node_->op_type() : node_->name();
  return graph_.constant(t.dtype, t.shape, t.data, base + "_const" + std::to_string(constants_made_++));
}

std::optional<Translator::SymbolHint> Translator::hint(int64_t symbol) const {
  auto it = hints_.find(symbol);
  if (it == hints_.end()) return std::nullopt;
  return it->second;
}

void Translator::guard(int64_t symbol, int64_t lo, int64_t hi) {
  const SymbolHint h = hint(symbol).value();
  if (h.hint < lo || h.hint > hi)
    throw Error(HAL_STATUS_INTERNAL, where() + ": a guard [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                         "] its own hint " + std::to_string(h.hint) + " breaks");
  guards_.push_back({h.request, h.element, lo, hi});
}

int64_t Translator::fresh_symbol(size_t dim) {
  std::string base = node_->name().empty() ? "node" + std::to_string(index_) : node_->name();
  std::string name = base + "_d" + std::to_string(dim);
  for (int k = 1; symbol_names_.count(name); ++k) name = base + "_d" + std::to_string(dim) + "_" + std::to_string(k);
  return named_symbol(name);
}

int64_t Translator::named_symbol(const std::string& name) {
  symbol_names_.insert(name);
  return graph_.symbol(name);
}

}  // namespace hal::onnx::detail
