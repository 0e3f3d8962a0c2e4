#include "op_table.hpp"

#include "converters.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <cstring>
#include <limits>

#include "hal/common/dtype.hpp"
#include "hal/onnx/operators.hpp"
#include "hal/runtime/error.hpp"
#include "tensor_proto.hpp"

namespace hal::onnx::detail {

namespace {

using V = Graph::Value;

std::string join(const std::vector<int64_t>& v) { return shape_text(v); }

}  // namespace
// Axis AXIS of a rank-RANK tensor, negative counting from the end.
int64_t norm_axis(Translator& t, int64_t axis, size_t rank, const char* what) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) t.invalid(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

bool is_float(hal_dtype_e dt) {
  return dt == HAL_DTYPE_FLOAT32 || dt == HAL_DTYPE_FLOAT64 || dt == HAL_DTYPE_FLOAT16 || dt == HAL_DTYPE_BFLOAT16;
}

// A 0-d constant of dtype DT (float32 / float64 / integer) holding X.
V scalar(Translator& t, hal_dtype_e dt, double x) {
  HostTensor h{dt, {}, {}};
  if (dt == HAL_DTYPE_FLOAT64) {
    h.data.resize(8);
    std::memcpy(h.data.data(), &x, 8);
  } else if (is_float(dt)) {  // 16-bit floats: a float32 0-d tensor does not promote a dimensioned one
    h.dtype = HAL_DTYPE_FLOAT32;
    float f = static_cast<float>(x);
    h.data.resize(4);
    std::memcpy(h.data.data(), &f, 4);
  } else {
    h = int_tensor(dt, {static_cast<int64_t>(x)}, {});
  }
  return t.constant(h);
}
namespace {

// The element count of SHAPE as a constant factor and the symbols it
// multiplies (for reshape's inferred dim).
struct SymProduct {
  int64_t factor = 1;
  std::vector<int64_t> symbols;
};
SymProduct product(const std::vector<int64_t>& shape) {
  SymProduct p;
  for (int64_t d : shape) {
    if (d < 0) p.symbols.push_back(d);
    else if (__builtin_mul_overflow(p.factor, d, &p.factor))
      throw Error(HAL_STATUS_INVALID_ARGUMENT, "element count of " + join(shape) + " overflows int64");
  }
  std::sort(p.symbols.begin(), p.symbols.end());
  return p;
}

// The shape NODE's reshape target gives for an input of shape IN: ONNX
// rules (0 copies the input's dim unless ALLOWZERO, -1 is inferred),
// symbolic dims kept, a dim unknown at load inferred like -1.
std::vector<int64_t> reshape_target(Translator& t, const std::vector<int64_t>& in, const std::vector<Dim>& target,
                                    bool allowzero) {
  std::vector<int64_t> out(target.size());
  int infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const Dim& d = target[i];
    if (d.kind == Dim::kSym) {
      out[i] = d.value;
    } else if (d.kind == Dim::kUnknown || d.value == -1) {
      if (infer >= 0) t.unimplemented("reshape target has two dims not known at load (dims " + std::to_string(infer) + " and " + std::to_string(i) + ")");
      infer = static_cast<int>(i);
    } else if (d.value == 0 && !allowzero) {
      if (i >= in.size()) t.invalid("reshape target dim " + std::to_string(i) + " is 0 (copy) but the input has rank " + std::to_string(in.size()));
      out[i] = in[i];
    } else if (d.value < 0) {
      t.invalid("reshape target dim " + std::to_string(i) + " is " + std::to_string(d.value));
    } else {
      out[i] = d.value;
    }
  }
  if (infer < 0) {
    const SymProduct a = product(in), b = product(out);
    if (a.symbols == b.symbols && a.factor != b.factor)
      t.invalid("cannot reshape " + join(in) + " (" + std::to_string(a.factor) + " elements) to " + join(out) + " (" +
                std::to_string(b.factor) + " elements)");
    return out;
  }
  SymProduct num = product(in), den;
  for (size_t i = 0; i < out.size(); ++i)
    if (static_cast<int>(i) != infer) {
      SymProduct p = product({out[i]});
      den.factor *= p.factor;
      den.symbols.insert(den.symbols.end(), p.symbols.begin(), p.symbols.end());
    }
  std::sort(den.symbols.begin(), den.symbols.end());
  // Cancel the symbols the rest of the target shares with the input.
  std::vector<int64_t> left;
  std::vector<int64_t> den_left = den.symbols;
  for (int64_t s : num.symbols) {
    auto it = std::find(den_left.begin(), den_left.end(), s);
    if (it != den_left.end()) den_left.erase(it);
    else left.push_back(s);
  }
  if (!den_left.empty() || den.factor == 0) {
    out[infer] = t.fresh_symbol(static_cast<size_t>(infer));
  } else if (left.empty()) {
    if (num.factor % den.factor != 0)
      t.invalid("cannot reshape " + join(in) + " to " + join(out) + " (element count " + std::to_string(num.factor) +
                " is not a multiple of " + std::to_string(den.factor) + ")");
    out[infer] = num.factor / den.factor;
  } else if (left.size() == 1 && num.factor == den.factor) {
    out[infer] = left[0];
  } else {
    out[infer] = t.fresh_symbol(static_cast<size_t>(infer));
  }
  return out;
}

}  // namespace
// X with its dims in ORDER (X itself for the identity).
V permuted(Translator& t, V x, const std::vector<size_t>& order) {
  const ValueSpec xs = t.spec(x);  // a copy: emitting nodes may move the graph's specs
  std::vector<int64_t> dims, shape;
  bool identity = true;
  for (size_t k = 0; k < order.size(); ++k) {
    identity = identity && order[k] == k;
    dims.push_back(static_cast<int64_t>(order[k]));
    shape.push_back(xs.shape[order[k]]);
  }
  return identity ? x : t.emit_as("permute", {x}, {Attr::ints("dims", dims)}, {xs.dtype, shape});
}
namespace {

// OUT differs from V's shape only by dims of size 1 (Unsqueeze, Squeeze over
// run-time dims): V's ones permuted to the back, reshaped (its other dims
// copied at the same index) to those dims followed by OUT's ones, permuted
// into OUT's order. V{} (absent) when OUT is not such a shape.
V insert_or_drop_ones(Translator& t, V v, const std::vector<int64_t>& out) {
  const ValueSpec in = t.spec(v);  // a copy: emitting nodes may move the graph's specs
  auto core = [](const std::vector<int64_t>& s) {
    std::vector<size_t> at;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] != 1) at.push_back(i);
    return at;
  };
  std::vector<size_t> ci = core(in.shape), co = core(out);
  if (ci.size() != co.size()) return V{};
  for (size_t k = 0; k < ci.size(); ++k)
    if (in.shape[ci[k]] != out[co[k]]) return V{};
  std::vector<size_t> order = ci;  // V's other dims first, then its ones
  for (size_t i = 0; i < in.shape.size(); ++i)
    if (in.shape[i] == 1) order.push_back(i);
  V front = permuted(t, v, order);
  std::vector<int64_t> mid, attr;
  for (size_t k = 0; k < co.size(); ++k) {
    mid.push_back(out[co[k]]);
    attr.push_back(0);
  }
  mid.resize(out.size(), 1);
  attr.resize(out.size(), 1);
  V reshaped = front;
  if (t.spec(front).shape != mid)
    reshaped = t.emit_as("reshape", {front}, {Attr::ints("shape", attr), Attr::b("copy_zeros", true)},
                         {in.dtype, mid});
  std::vector<size_t> back(out.size());  // out dim i reads mid dim back[i]
  size_t next_one = co.size();
  for (size_t i = 0, k = 0; i < out.size(); ++i) back[i] = (k < co.size() && co[k] == i) ? k++ : next_one++;
  return permuted(t, reshaped, back);
}

// OUT and V's shape end in the same dims (a split or merge of leading dims
// over run-time trailing ones: [b*h, s, d] <-> [b, h, s, d]): that tail is
// permuted to the front, where copy_zeros keeps it, the rest reshaped after
// it (at most one run-time dim there, inferred), and the tail permuted back.
// V{} (absent) when OUT is not such a shape.
V reshape_before_common_tail(Translator& t, V v, const std::vector<int64_t>& out) {
  const ValueSpec in = t.spec(v);  // a copy: emitting nodes may move the graph's specs
  size_t tail = 0;
  while (tail < in.shape.size() && tail < out.size() && in.shape[in.shape.size() - 1 - tail] == out[out.size() - 1 - tail])
    ++tail;
  size_t head_in = in.shape.size() - tail, head_out = out.size() - tail;
  int symbolic = 0;
  for (size_t i = 0; i < head_out; ++i) symbolic += out[i] < 0;
  if (tail == 0 || symbolic > 1) return V{};
  for (size_t i = 0; i < head_out; ++i)  // a literal 0 would read as a copy
    if (out[i] == 0) return V{};
  std::vector<size_t> to_front, back;
  std::vector<int64_t> mid, attr;
  for (size_t i = 0; i < tail; ++i) to_front.push_back(head_in + i);
  for (size_t i = 0; i < head_in; ++i) to_front.push_back(i);
  for (size_t i = 0; i < tail; ++i) {
    mid.push_back(out[head_out + i]);
    attr.push_back(0);
  }
  for (size_t i = 0; i < head_out; ++i) {
    mid.push_back(out[i]);
    attr.push_back(out[i] < 0 ? -1 : out[i]);
  }
  for (size_t i = 0; i < head_out; ++i) back.push_back(tail + i);
  for (size_t i = 0; i < tail; ++i) back.push_back(i);
  V front = permuted(t, v, to_front);
  V reshaped = t.emit_as("reshape", {front}, {Attr::ints("shape", attr), Attr::b("copy_zeros", true)}, {in.dtype, mid});
  return permuted(t, reshaped, back);
}

}  // namespace
// Emits a reshape of V to OUT. A symbolic dim equal to V's dim at the same
// index is written 0 with copy_zeros (ONNX's copy); at most one other
// symbolic dim is written -1 (inferred from the element count).
V reshape_to(Translator& t, V v, const std::vector<int64_t>& out) {
  const ValueSpec in = t.spec(v);  // a copy: emitting may move the graph's values (read after emits below)
  if (in.shape == out) return v;
  if (V origin = t.flatten_origin(v); origin.valid() && t.spec(origin).shape == out) return origin;  // un-flatten
  std::vector<int64_t> attr = out;
  int inferred = 0;
  bool copies = false;
  for (size_t i = 0; i < attr.size(); ++i) {
    if (attr[i] >= 0) continue;
    if (i < in.shape.size() && in.shape[i] == attr[i]) {
      attr[i] = 0;
      copies = true;
    } else {
      attr[i] = -1;
      ++inferred;
    }
  }
  if (inferred > 1) {
    V moved = insert_or_drop_ones(t, v, out);
    if (!moved.valid()) moved = reshape_before_common_tail(t, v, out);
    if (moved.valid()) return moved;
    t.unimplemented("reshape of " + join(in.shape) + " to " + join(out) + " has " + std::to_string(inferred) +
                    " dims only known at run time that are not self's dim at the same index (the catalog's "
                    "reshape copies those and infers one other)");
  }
  if (copies)  // with copy_zeros a literal 0 would copy: only when self's dim there is 0 too
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i] == 0 && !(i < in.shape.size() && in.shape[i] == 0))
        t.unimplemented("reshape of " + join(in.shape) + " to " + join(out) +
                        " mixes a size-0 dim with dims only known at run time");
  std::vector<Attr> attrs{Attr::ints("shape", attr)};
  if (copies) attrs.push_back(Attr::b("copy_zeros", true));
  V flat = t.emit_as("reshape", {v}, attrs, {in.dtype, out});
  // [d0, ..., dj, c...] -> [m, K = prod(c...)] merging several run-time dims:
  // remember [d0, ..., dj, K] (the same reshape with copied leading dims) so
  // a Gemm over the rows and the reshape back can skip the product.
  if (out.size() == 2 && out[1] >= 0 && in.shape.size() > 2) {
    size_t j = in.shape.size();
    int64_t prod = 1;
    while (j > 1 && in.shape[j - 1] >= 0 && prod < out[1]) prod *= in.shape[--j];
    if (prod == out[1] && std::count_if(in.shape.begin(), in.shape.begin() + j, [](int64_t d) { return d < 0; }) > 1) {
      std::vector<int64_t> lead(in.shape.begin(), in.shape.begin() + j);
      lead.push_back(out[1]);
      t.set_flatten_origin(flat, lead == in.shape ? v : reshape_to(t, v, lead));
    }
  }
  return flat;
}
namespace {

// Reshape of a value known at load: new metadata over the same bytes.
bool reshape_host(Translator& t, size_t input, const std::vector<int64_t>& out) {
  const HostTensor* h = t.host(input);
  if (!h) return false;
  for (int64_t d : out)
    if (d < 0) return false;
  HostTensor r = *h;
  if (checked_numel(out, t.where()) != checked_numel(r.shape, t.where()))
    t.invalid("cannot reshape " + join(r.shape) + " to " + join(out));
  r.shape = out;
  const Slot& s = t.in(input);
  if (s.ints && out.size() <= 1) {
    t.set_output_ints(0, r.dtype, *s.ints, out.empty());
    return true;
  }
  t.set_output_host(0, std::move(r));
  return true;
}

// ---- shape arithmetic known at load ----

Dim fold_binary(const std::string& op, const Dim& a, const Dim& b) {
  if (a.known() && b.known()) {
    int64_t x = a.value, y = b.value, r = 0;
    if (op == "Add") return __builtin_add_overflow(x, y, &r) ? Dim::unknown() : Dim::of(r);
    if (op == "Sub") return __builtin_sub_overflow(x, y, &r) ? Dim::unknown() : Dim::of(r);
    if (op == "Mul") return __builtin_mul_overflow(x, y, &r) ? Dim::unknown() : Dim::of(r);
    bool divisible = y != 0 && !(x == std::numeric_limits<int64_t>::min() && y == -1);
    if (op == "Div" && divisible) return Dim::of(x / y);  // ONNX integer Div truncates
    if (op == "FMod" && divisible) return Dim::of(x % y);  // C's: the dividend's sign
    if (op == "Mod" && divisible) return Dim::of(((x % y) + y) % y);  // Python's: the divisor's sign
    if (op == "Equal") return Dim::of(x == y);
    if (op == "Less") return Dim::of(x < y);
    if (op == "LessOrEqual") return Dim::of(x <= y);
    if (op == "Greater") return Dim::of(x > y);
    if (op == "GreaterOrEqual") return Dim::of(x >= y);
    if (op == "And") return Dim::of(x != 0 && y != 0);
    if (op == "Or") return Dim::of(x != 0 || y != 0);
    if (op == "Xor") return Dim::of((x != 0) != (y != 0));
    if (op == "Max") return Dim::of(std::max(x, y));
    if (op == "Min") return Dim::of(std::min(x, y));
    return Dim::unknown();
  }
  // A symbol through an identity stays that symbol.
  if (a.kind == Dim::kSym && b.known()) {
    if ((op == "Mul" || op == "Div") && b.value == 1) return a;
    if ((op == "Add" || op == "Sub") && b.value == 0) return a;
  }
  if (b.kind == Dim::kSym && a.known()) {
    if (op == "Mul" && a.value == 1) return b;
    if (op == "Add" && a.value == 0) return b;
  }
  if (op == "Equal" && a == b && a.kind == Dim::kSym) return Dim::of(1);
  return Dim::unknown();
}

// Folds a binary op on two integer tensors of rank <= 1 known at load
// (numpy broadcasting of a scalar or a size-1 vector). False when either is
// not known.
bool try_fold_binary(Translator& t) {
  auto a = t.ints(0), b = t.ints(1);
  if (!a || !b) return false;
  const Slot& sa = t.in(0);
  const Slot& sb = t.in(1);
  size_t n = std::max(a->size(), b->size());
  if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return false;
  std::string op = t.node().op_type();
  if (op == "Mod" && t.attr_int("fmod", 0) != 0) op = "FMod";
  std::vector<Dim> out;
  for (size_t i = 0; i < n; ++i) out.push_back(fold_binary(op, (*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]));
  bool scalar = sa.spec.shape.empty() && sb.spec.shape.empty();
  static const std::set<std::string> kBool{"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor"};
  hal_dtype_e dt = kBool.count(op) ? HAL_DTYPE_BOOL : sa.spec.dtype;
  t.set_output_ints(0, dt, out, scalar);
  return true;
}

// ---- converters ----


void direct(Translator& t, const OpRule& r) {
  std::vector<V> in;
  for (size_t i = 0; i < t.input_count(); ++i) in.push_back(t.has_input(i) ? t.value(i) : V{});
  t.set_output(0, t.emit1(r.catalog, in));
}

// Neg / Abs: folded on integers known at load (shape arithmetic in exported
// function bodies: Neg(axis) as a count of reduced dims), else one catalog op.
void unary_int_folding(Translator& t, const OpRule& r) {
  auto a = t.ints(0);
  if (a && std::all_of(a->begin(), a->end(), [](const Dim& d) { return d.known(); })) {
    const std::string& type = t.node().op_type();
    std::vector<Dim> out;
    for (const Dim& d : *a)
      out.push_back(Dim::of(type == "Not" ? (d.value == 0) : type == "Neg" || d.value < 0 ? -d.value : d.value));
    t.set_output_ints(0, t.in(0).spec.dtype, out, t.in(0).spec.shape.empty());
    return;
  }
  direct(t, r);
}

void binary(Translator& t, const OpRule& r) {
  if (try_fold_binary(t)) return;
  std::vector<Attr> attrs;
  std::string op = r.catalog;
  if (t.node().op_type() == "Div" && !is_float(t.in(0).spec.dtype)) attrs.push_back(Attr::s("rounding_mode", "trunc"));
  if (t.node().op_type() == "Mod") {
    // fmod=1: C fmod (sign of the dividend); fmod=0: Python's mod (sign of the divisor).
    op = t.attr_int("fmod", 0) ? "fmod" : "remainder";
  }
  t.set_output(0, t.emit1(op, {t.value(0), t.value(1)}, attrs));
}

void variadic(Translator& t, const OpRule& r) {
  const std::string& type = t.node().op_type();
  if (t.input_count() == 2 && (type == "Max" || type == "Min") && try_fold_binary(t)) return;
  V acc = t.value(0);
  const char* op = type == "Mean" ? "add" : r.catalog;
  for (size_t i = 1; i < t.input_count(); ++i) acc = t.emit1(op, {acc, t.value(i)});
  if (type == "Mean") acc = t.emit1("div", {acc, scalar(t, t.spec(acc).dtype, static_cast<double>(t.input_count()))});
  t.set_output(0, acc);
}

void identity(Translator& t, const OpRule&) {
  Slot s = t.in(0);
  if (t.node().op_type() == "Dropout") {
    if (t.has_input(2)) {
      auto mode = t.const_ints(2, "Dropout's training_mode");
      if (!mode.empty() && mode[0] != 0) t.unimplemented("training_mode=true (only inference is supported)");
    }
    if (t.output_count() > 1 && !t.output_name(1).empty()) {
      ValueSpec mask{HAL_DTYPE_BOOL, s.spec.shape};
      t.set_output(1, t.emit_as("fill", {}, {Attr::scalar("value", 1)}, mask));
    }
  }
  const std::string& out = t.output_name(0);
  if (!out.empty()) t.define(out, std::move(s));
}

void constant(Translator& t, const OpRule&) {
  const auto& a = t.node().attribute();
  if (a.size() != 1) t.invalid("needs exactly one value attribute");
  const auto& v = a[0];
  if (v.name() == "value") {
    t.set_output_host(0, tensor_from_proto(v.t(), "", t.where() + " attribute 'value'"));
  } else if (v.name() == "value_float" || v.name() == "value_floats") {
    std::vector<float> f = v.name() == "value_float" ? std::vector<float>{v.f()} : std::vector<float>(v.floats().begin(), v.floats().end());
    HostTensor h{HAL_DTYPE_FLOAT32, v.name() == "value_float" ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(f.size())}, {}};
    h.data.resize(f.size() * 4);
    if (!f.empty()) std::memcpy(h.data.data(), f.data(), h.data.size());
    t.set_output_host(0, std::move(h));
  } else if (v.name() == "value_int") {
    t.set_output_host(0, int_tensor(HAL_DTYPE_INT64, {v.i()}, {}));
  } else if (v.name() == "value_ints") {
    std::vector<int64_t> i(v.ints().begin(), v.ints().end());
    t.set_output_host(0, int_tensor(HAL_DTYPE_INT64, i, {static_cast<int64_t>(i.size())}));
  } else {
    t.unimplemented("value attribute '" + v.name() + "' is not supported (string and sparse constants)");
  }
}

void shape(Translator& t, const OpRule&) {
  const std::vector<int64_t>& s = t.in(0).spec.shape;
  int64_t r = static_cast<int64_t>(s.size());
  int64_t start = t.attr_int("start", 0), end = t.attr_int("end", r);
  start = std::clamp(start < 0 ? start + r : start, int64_t{0}, r);
  end = std::clamp(end < 0 ? end + r : end, int64_t{0}, r);
  std::vector<Dim> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(s[i] < 0 ? Dim::sym(s[i]) : Dim::of(s[i]));
  t.set_output_ints(0, HAL_DTYPE_INT64, dims, false);
}

void size(Translator& t, const OpRule&) {
  SymProduct p = product(t.in(0).spec.shape);
  Dim d = p.symbols.empty() ? Dim::of(p.factor) : (p.symbols.size() == 1 && p.factor == 1 ? Dim::sym(p.symbols[0]) : Dim::unknown());
  t.set_output_ints(0, HAL_DTYPE_INT64, {d}, true);
}

void cast(Translator& t, const OpRule&) {
  hal_dtype_e to = t.node().op_type() == "CastLike" ? t.in(1).spec.dtype : dtype_from_onnx(static_cast<int32_t>(t.attr_int("to", 0)));
  if (to == HAL_DTYPE_INVALID) t.unimplemented("cast to " + onnx_dtype_name(static_cast<int32_t>(t.attr_int("to", 0))) + " (no HAL dtype)");
  const Slot& s = t.in(0);
  if (s.ints && to != HAL_DTYPE_BOOL && !is_float(to)) {
    t.set_output_ints(0, to, *s.ints, s.spec.shape.empty());
    return;
  }
  if (s.host && (to == HAL_DTYPE_FLOAT32 || to == HAL_DTYPE_FLOAT64) && s.host->data.size() <= 512) {
    if (auto f = float_values(*s.host)) {
      HostTensor h{to, s.host->shape, std::vector<uint8_t>(f->size() * common::dtype_size(to))};
      for (size_t i = 0; i < f->size(); ++i) {
        if (to == HAL_DTYPE_FLOAT32) {
          float x = static_cast<float>((*f)[i]);
          std::memcpy(h.data.data() + i * 4, &x, 4);
        } else {
          std::memcpy(h.data.data() + i * 8, &(*f)[i], 8);
        }
      }
      t.set_output_host(0, std::move(h));
      return;
    }
  }
  if (s.spec.dtype == to) {
    t.alias_output(0, s);
    return;
  }
  t.set_output(0, t.emit_as("copy", {t.value(0)}, {}, {to, s.spec.shape}));
}

void reshape(Translator& t, const OpRule&) {
  auto target = t.ints(1);
  if (!target && t.symbolic_rows() && t.computed_at_run_time(1) && t.viewable(0)) {
    // A target the model computes: the next stage takes x's bytes as a view
    // of that shape, its dims symbols, so a new target re-plans without
    // translating again.
    t.set_output(0, t.runtime_view(t.value(0), t.in(1).value, t.attr_int("allowzero", 0) != 0,
                                   "Reshape's target shape ('" + t.input_name(1) + "')"));
    return;
  }
  if (!target) {
    std::vector<Dim> dims;
    for (int64_t d : t.known_ints(1, "Reshape's target shape")) dims.push_back(Dim::of(d));
    target = dims;
  }
  std::vector<int64_t> out = reshape_target(t, t.in(0).spec.shape, *target, t.attr_int("allowzero", 0) != 0);
  if (reshape_host(t, 0, out)) return;
  const Slot& self = t.in(0);
  if (self.ints && !self.host && out.size() <= 1 && (out.empty() ? 1 : out[0]) == static_cast<int64_t>(self.ints->size())) {
    t.set_output_ints(0, self.spec.dtype, *self.ints, out.empty());  // shape arithmetic stays folded
    return;
  }
  t.set_output(0, reshape_to(t, t.value(0), out));
}

void flatten(Translator& t, const OpRule&) {
  const std::vector<int64_t>& in = t.in(0).spec.shape;
  int64_t axis = t.attr_int("axis", 1);
  int64_t r = static_cast<int64_t>(in.size());
  if (axis < -r || axis > r) t.invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  std::vector<Dim> target{Dim::unknown(), Dim::of(1)};
  std::vector<int64_t> outer(in.begin(), in.begin() + axis), inner(in.begin() + axis, in.end());
  SymProduct po = product(outer), pi = product(inner);
  if (po.symbols.empty()) target[0] = Dim::of(po.factor);
  else if (po.symbols.size() == 1 && po.factor == 1) target[0] = Dim::sym(po.symbols[0]);
  if (pi.symbols.empty()) target[1] = Dim::of(pi.factor);
  else if (pi.symbols.size() == 1 && pi.factor == 1) target[1] = Dim::sym(pi.symbols[0]);
  else target[1] = Dim::unknown();
  std::vector<int64_t> out = reshape_target(t, in, target, true);
  if (reshape_host(t, 0, out)) return;
  const Slot& self = t.in(0);
  if (self.ints && !self.host && out.size() <= 1 && (out.empty() ? 1 : out[0]) == static_cast<int64_t>(self.ints->size())) {
    t.set_output_ints(0, self.spec.dtype, *self.ints, out.empty());  // shape arithmetic stays folded
    return;
  }
  t.set_output(0, reshape_to(t, t.value(0), out));
}

// The axes of Squeeze / Unsqueeze / Reduce*: an input since opset 13 (18 for
// most reductions), an attribute before.
std::optional<std::vector<int64_t>> axes_of(Translator& t, size_t input, int since) {
  if (t.opset() >= since) {
    if (!t.has_input(input)) return std::nullopt;
    return t.const_ints(input, "axes");
  }
  return t.attr_ints("axes");
}

void squeeze(Translator& t, const OpRule&) {
  const Slot& s = t.in(0);
  const std::vector<int64_t>& in = s.spec.shape;
  auto axes = axes_of(t, 1, 13);
  std::vector<bool> drop(in.size(), false);
  if (!axes) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    for (int64_t a : *axes) {
      int64_t k = norm_axis(t, a, in.size());
      if (in[k] != 1) t.invalid("cannot squeeze dim " + std::to_string(k) + " of size " + std::to_string(in[k]) + " (shape " + join(in) + ")");
      drop[k] = true;
    }
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  if (s.ints && out.empty()) {
    t.set_output_ints(0, s.spec.dtype, *s.ints, true);
    return;
  }
  if (reshape_host(t, 0, out)) return;
  const Slot& self = t.in(0);
  if (self.ints && !self.host && out.size() <= 1 && (out.empty() ? 1 : out[0]) == static_cast<int64_t>(self.ints->size())) {
    t.set_output_ints(0, self.spec.dtype, *self.ints, out.empty());  // shape arithmetic stays folded
    return;
  }
  t.set_output(0, reshape_to(t, t.value(0), out));
}

void unsqueeze(Translator& t, const OpRule&) {
  const Slot& s = t.in(0);
  const std::vector<int64_t>& in = s.spec.shape;
  auto axes = axes_of(t, 1, 13);
  if (!axes) t.invalid("needs axes");
  size_t rank = in.size() + axes->size();
  std::vector<bool> insert(rank, false);
  for (int64_t a : *axes) insert[norm_axis(t, a, rank)] = true;
  std::vector<int64_t> out;
  for (size_t i = 0, j = 0; i < rank; ++i) out.push_back(insert[i] ? 1 : in[j++]);
  if (s.ints && out.size() == 1) {
    t.set_output_ints(0, s.spec.dtype, *s.ints, false);
    return;
  }
  if (reshape_host(t, 0, out)) return;
  const Slot& self = t.in(0);
  if (self.ints && !self.host && out.size() <= 1 && (out.empty() ? 1 : out[0]) == static_cast<int64_t>(self.ints->size())) {
    t.set_output_ints(0, self.spec.dtype, *self.ints, out.empty());  // shape arithmetic stays folded
    return;
  }
  t.set_output(0, reshape_to(t, t.value(0), out));
}

void transpose(Translator& t, const OpRule&) {
  size_t rank = t.in(0).spec.shape.size();
  std::vector<int64_t> perm;
  if (auto p = t.attr_ints("perm")) perm = *p;
  else
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  t.set_output(0, t.emit1("permute", {t.value(0)}, {Attr::ints("dims", perm)}));
}

void concat(Translator& t, const OpRule&) {
  int64_t axis = t.attr_int("axis", 0);
  bool fold = true;
  std::vector<Dim> all;
  for (size_t i = 0; i < t.input_count(); ++i) {
    auto d = t.ints(i);
    if (!d || t.in(i).spec.shape.size() != 1) {
      fold = false;
      break;
    }
    all.insert(all.end(), d->begin(), d->end());
  }
  if (fold) {
    t.set_output_ints(0, t.in(0).spec.dtype, all, false);
    return;
  }
  std::vector<V> in;
  for (size_t i = 0; i < t.input_count(); ++i) in.push_back(t.value(i));
  t.set_output(0, t.emit1("cat", in, {Attr::i("dim", axis)}));
}

V wrapped_indices(Translator& t, size_t input, int64_t dim);

void gather(Translator& t, const OpRule&) {
  const Slot& data = t.in(0);
  int64_t axis = norm_axis(t, t.attr_int("axis", 0), data.spec.shape.size());
  auto idx = t.ints(1);
  const std::vector<int64_t>& dshape = data.spec.shape;
  // Shape arithmetic: an element of a shape known at load.
  if (data.ints && idx && dshape.size() == 1) {
    std::vector<Dim> out;
    for (const Dim& i : *idx) {
      if (!i.known()) return t.unimplemented("index only known at run time into shape arithmetic");
      int64_t k = i.value < 0 ? i.value + static_cast<int64_t>(data.ints->size()) : i.value;
      if (k < 0 || k >= static_cast<int64_t>(data.ints->size())) t.invalid("index " + std::to_string(i.value) + " is out of range for " + std::to_string(data.ints->size()) + " elements");
      out.push_back((*data.ints)[k]);
    }
    t.set_output_ints(0, data.spec.dtype, out, t.in(1).spec.shape.empty());
    return;
  }
  const std::vector<int64_t>& ishape = t.in(1).spec.shape;
  V index = t.value(1);
  // Indices known at load: negative ones wrap here (the catalog's ops take
  // non-negative indices).
  if (const HostTensor* h = t.host(1)) {
    if (dshape[axis] < 0) {
      std::vector<int64_t> v = int_values(*h).value_or(std::vector<int64_t>{});
      for (int64_t i : v)
        if (i < 0) t.unimplemented("negative index into a dim only known at run time");
    } else {
      auto v = int_values(*h);
      if (!v) t.invalid("indices must be int32 or int64");
      bool neg = false;
      for (int64_t& i : *v) {
        if (i < -dshape[axis] || i >= dshape[axis]) t.invalid("index " + std::to_string(i) + " is out of range for dim " + std::to_string(axis) + " of size " + std::to_string(dshape[axis]));
        if (i < 0) {
          i += dshape[axis];
          neg = true;
        }
      }
      if (neg) index = t.constant(int_tensor(HAL_DTYPE_INT64, *v, ishape));
    }
  }
  // Indices computed at run time may be negative too (ONNX wraps them).
  if (t.host(1) == nullptr && dshape[axis] >= 0) index = wrapped_indices(t, 1, dshape[axis]);
  if (axis == 0 && dshape.size() == 2 && !ishape.empty() && ishape.size() != 1) {
    t.set_output(0, t.emit1("embedding", {t.value(0), index}));  // a lookup table: rows by index
    return;
  }
  if (ishape.size() == 1) {
    t.set_output(0, t.emit1("index_select", {t.value(0), index}, {Attr::i("dim", axis)}));
    return;
  }
  if (ishape.empty()) {  // one index: select, then drop the axis
    V one = t.emit_as("copy", {index}, {}, {t.spec(index).dtype, {1}});
    V sel = t.emit1("index_select", {t.value(0), one}, {Attr::i("dim", axis)});
    std::vector<int64_t> out = dshape;
    out.erase(out.begin() + axis);
    t.set_output(0, reshape_to(t, sel, out));
    return;
  }
  // Any other rank: the indices flattened, selected, and the result's axis
  // dim unflattened into the indices' shape.
  for (int64_t d : ishape)
    if (d < 0) t.unimplemented("indices of rank " + std::to_string(ishape.size()) + " with a dim only known at run time");
  V flat = reshape_to(t, index, {numel(ishape)});
  V sel = t.emit1("index_select", {t.value(0), flat}, {Attr::i("dim", axis)});
  std::vector<int64_t> out(dshape.begin(), dshape.begin() + axis);
  out.insert(out.end(), ishape.begin(), ishape.end());
  out.insert(out.end(), dshape.begin() + axis + 1, dshape.end());
  t.set_output(0, reshape_to(t, sel, out));
}

// [0, 1, ..., n) from ONES (1-D, n ones of DT): their running sum less one.
V arange_of_ones(Translator& t, V ones, hal_dtype_e dt) {
  return t.emit1("sub", {t.emit1("cumsum", {ones}, {Attr::i("dim", 0)}), scalar(t, dt, 1)});
}

// [0, 1, ..., n) in DT for a length N only known at run time (a symbol): a
// run of ones summed up (the catalog's arange takes its bounds at load).
V symbolic_arange(Translator& t, hal_dtype_e dt, int64_t n) {
  return arange_of_ones(t, t.emit_as("fill", {}, {Attr::scalar("value", 1)}, {dt, {n}}), dt);
}

void slice(Translator& t, const OpRule&) {
  const Slot& data = t.in(0);
  const std::vector<int64_t>& shape = data.spec.shape;
  // Version 1: starts, ends and axes are attributes (no steps); inputs since 10.
  const bool attrs = t.opset() < 10;
  auto required_ints = [&](const char* name) {
    auto v = t.attr_ints(name);
    if (!v) t.invalid(std::string("needs the attribute '") + name + "'");
    return *v;
  };
  std::vector<int64_t> starts = attrs ? required_ints("starts") : t.const_ints(1, "Slice's starts");
  // Ends may be a dim only known at run time (x[:, :seq] with seq from Shape).
  std::vector<Dim> end_dims;
  if (attrs) {
    for (int64_t v : required_ints("ends")) end_dims.push_back(Dim::of(v));
  } else if (auto e = t.ints(2)) {
    end_dims = *e;
  } else {
    for (int64_t v : t.const_ints(2, "Slice's ends")) end_dims.push_back(Dim::of(v));
  }
  std::vector<int64_t> ends;
  for (const Dim& d : end_dims) {
    if (d.kind == Dim::kUnknown) t.unimplemented("Slice's ends are only known at run time and are not a dim of a graph input");
    ends.push_back(d.known() ? d.value : 0);
  }
  std::vector<int64_t> axes, steps(starts.size(), 1);
  if (attrs && t.attr_ints("axes")) axes = *t.attr_ints("axes");
  else if (!attrs && t.has_input(3)) axes = t.const_ints(3, "Slice's axes");
  else
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (!attrs && t.has_input(4)) steps = t.const_ints(4, "Slice's steps");
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    t.invalid("starts, ends, axes and steps differ in length");
  // Per axis: the indices taken (dims known at load), ONNX's clamping rules.
  auto indices = [&](int64_t dim, int64_t start, int64_t end, int64_t step) {
    if (step == 0) t.invalid("step 0");
    auto clampi = [&](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v < 0 && v >= -dim ? v + dim : (v < 0 ? lo : v), lo, hi); };
    if (dim > (int64_t{1} << 24)) t.unimplemented("slicing a dim of " + std::to_string(dim) + " elements (an index list; at most 2^24)");
    step = std::clamp(step, -(dim + 1), dim + 1);  // same indices, no overflow
    std::vector<int64_t> idx;
    if (step > 0) {
      for (int64_t i = clampi(start, 0, dim), e = clampi(end, 0, dim); i < e; i += step) idx.push_back(i);
    } else {
      for (int64_t i = clampi(start, 0, dim - 1), e = clampi(end, -1, dim - 1); i > e; i += step) idx.push_back(i);
    }
    return idx;
  };
  if (data.ints && shape.size() == 1) {
    std::vector<Dim> out;
    for (int64_t i : indices(static_cast<int64_t>(data.ints->size()), starts[0], ends[0], steps[0])) out.push_back((*data.ints)[i]);
    t.set_output_ints(0, data.spec.dtype, out, false);
    return;
  }
  V v = t.value(0);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t axis = norm_axis(t, axes[k], shape.size());
    int64_t dim = t.spec(v).shape[axis];
    if (end_dims[k].kind == Dim::kSym) {
      // [0, seq): whole when the dim is that symbol, else the first seq
      // indices (a seq larger than the dim fails at run time in
      // index_select, naming the index, where ONNX would clamp).
      if (dim == end_dims[k].value && starts[k] == 0 && steps[k] == 1) continue;
      if (starts[k] != 0 || steps[k] != 1)
        t.unimplemented("slicing axis " + std::to_string(axis) + " to an end only known at run time with start " +
                        std::to_string(starts[k]) + " and step " + std::to_string(steps[k]) + " (only start 0, step 1)");
      v = t.emit1("index_select", {v, symbolic_arange(t, HAL_DTYPE_INT64, end_dims[k].value)}, {Attr::i("dim", axis)});
      continue;
    }
    if (dim < 0) {
      if (starts[k] == 0 && steps[k] == 1 && ends[k] >= std::numeric_limits<int32_t>::max()) continue;  // the whole dim
      // A count or view dim read back while the model runs (a symbol with
      // a hint): bounds from the start that the hint shows to be inside
      // the dim take the same indices for every size at least the end
      // ([0, 3) of a count); bounds past the hint take the whole dim for
      // every size up to the end. Either is guarded: the runner translates
      // again for a size outside (Translator::guard).
      const std::optional<Translator::SymbolHint> h = t.hint(dim);
      if (h && starts[k] >= 0 && ends[k] >= 0 && steps[k] > 0) {
        if (ends[k] <= h->hint) {
          if (starts[k] < ends[k]) t.guard(dim, ends[k], std::numeric_limits<int64_t>::max());
          std::vector<int64_t> idx = indices(h->hint, starts[k], ends[k], steps[k]);
          V index = t.constant(int_tensor(HAL_DTYPE_INT64, idx, {static_cast<int64_t>(idx.size())}));
          v = t.emit1("index_select", {v, index}, {Attr::i("dim", axis)});
          continue;
        }
        if (starts[k] == 0 && steps[k] == 1) {
          t.guard(dim, 0, ends[k]);
          continue;
        }
      }
      t.unimplemented("slicing dim " + std::to_string(axis) + ", only known at run time (the catalog has no slice op taking symbolic bounds)");
    }
    std::vector<int64_t> idx = indices(dim, starts[k], ends[k], steps[k]);
    if (static_cast<int64_t>(idx.size()) == dim && steps[k] == 1) continue;
    V index = t.constant(int_tensor(HAL_DTYPE_INT64, idx, {static_cast<int64_t>(idx.size())}));
    v = t.emit1("index_select", {v, index}, {Attr::i("dim", axis)});
  }
  if (v.id == t.in(0).value.id && t.in(0).value.valid()) {
    t.alias_output(0, t.in(0));
    return;
  }
  t.set_output(0, v);
}

void split(Translator& t, const OpRule&) {
  const std::vector<int64_t>& shape = t.in(0).spec.shape;
  int64_t axis = norm_axis(t, t.attr_int("axis", 0), shape.size());
  std::vector<int64_t> sizes;
  if (t.has_input(1)) sizes = t.const_ints(1, "Split's split");
  else if (auto a = t.attr_ints("split")) sizes = *a;
  size_t n = t.output_count();
  std::vector<Attr> attrs{Attr::i("dim", axis)};
  if (!sizes.empty()) {
    attrs.push_back(Attr::ints("sizes", sizes));
  } else {
    int64_t parts = t.attr_int("num_outputs", static_cast<int64_t>(n));
    if (parts <= 0) t.invalid("splits into " + std::to_string(parts) + " outputs");
    if (shape[axis] < 0) t.unimplemented("an even split of dim " + std::to_string(axis) + ", only known at run time");
    attrs.push_back(Attr::i("split_size", (shape[axis] + parts - 1) / parts));
  }
  std::vector<V> outs = t.emit("split", {t.value(0)}, attrs, n);
  for (size_t i = 0; i < outs.size(); ++i) t.set_output(i, outs[i]);
}

}  // namespace
// Numpy broadcasting of two shapes whose dims may be symbols.
std::vector<int64_t> broadcast(Translator& t, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x == 1) out[i] = y;
    else if (y == 1 || x == y) out[i] = x;
    else t.invalid("shapes " + join(a) + " and " + join(b) + " do not broadcast (dim " + std::to_string(i) + ")");
  }
  return out;
}
namespace {

std::vector<int64_t> dims_of(Translator& t, size_t input, const std::string& what) {
  auto d = t.ints(input);
  if (!d) {
    std::vector<Dim> dims;
    for (int64_t x : t.known_ints(input, what)) dims.push_back(Dim::of(x));
    d = dims;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < d->size(); ++i) {
    const Dim& x = (*d)[i];
    if (x.kind == Dim::kUnknown) out.push_back(t.fresh_symbol(i));
    else out.push_back(x.value);
  }
  return out;
}

// Whether input I (rank 1, integers) is computed while the model runs and
// can be sizes of shapes read back as symbols (Translator::runtime_dims).
bool runtime_sizes(Translator& t, size_t i) {
  return !t.ints(i) && t.symbolic_rows() && t.computed_at_run_time(i) && t.in(i).spec.shape.size() == 1;
}

// Zeros of DT shaped as SIZES read back (runtime_dims), made from its
// CARRIER ([0, sizes...]: summing its empty dim 0 gives zeros, and a node
// taking it binds the sizes' symbols where the executable runs). Sizes
// whose KEEP is false are 1 (dropped with SQUEEZE). Without a carrier (no
// symbols) a fill of the concrete shape.
V sized_zeros(Translator& t, V carrier, const std::vector<int64_t>& sizes, const std::vector<bool>& keep, bool squeeze,
              hal_dtype_e dt) {
  std::vector<int64_t> shape, drop;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (keep[d]) shape.push_back(sizes[d]);
    else if (!squeeze) shape.push_back(1);
    if (!keep[d]) drop.push_back(static_cast<int64_t>(d) + 1);
  }
  if (!carrier.valid()) return t.emit_as("fill", {}, {Attr::scalar("value", 0)}, {dt, shape});
  V z = carrier;
  if (!drop.empty()) z = t.emit1("sum", {z}, {Attr::ints("dim", drop), Attr::b("keepdim", !squeeze)});
  z = t.emit1("sum", {z}, {Attr::ints("dim", {0}), Attr::b("keepdim", false)});
  return as_dtype(t, z, dt);
}

// [0, 1, ..., SIZES[D]) in DT, SIZES read back (runtime_dims, CARRIER).
V sized_arange(Translator& t, V carrier, const std::vector<int64_t>& sizes, size_t d, hal_dtype_e dt) {
  std::vector<bool> keep(sizes.size(), false);
  keep[d] = true;
  return arange_of_ones(t, t.emit1("add", {sized_zeros(t, carrier, sizes, keep, true, dt), scalar(t, dt, 1)}), dt);
}

// broadcast() of A against WANT, sizes read back (runtime_dims): a symbol of
// WANT takes a dim 1 of A; a dim >= 2 of A equal to the symbol's hint stays,
// guarded.
std::vector<int64_t> broadcast_sizes(Translator& t, const std::vector<int64_t>& a, const std::vector<int64_t>& want) {
  const size_t r = std::max(a.size(), want.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - want.size() ? 1 : want[i - (r - want.size())];
    const std::optional<Translator::SymbolHint> h = y < 0 ? t.hint(y) : std::nullopt;
    if (!h || x == 1) {
      out[i] = broadcast(t, {x}, {y})[0];
    } else if (x == h->hint) {
      t.guard(y, x, x);
      out[i] = x;
    } else if (x >= 0) {
      t.invalid("the input's shape " + join(a) + " does not broadcast to a shape of " + std::to_string(h->hint) + " at dim " +
                std::to_string(i));
    } else {
      t.unimplemented("expanding dim " + std::to_string(i) + ", only known at run time, to a size read back");
    }
  }
  return out;
}

void expand(Translator& t, const OpRule&) {
  if (runtime_sizes(t, 1)) {
    // A shape computed while the model runs: its sizes >= 2 are symbols of
    // the next stage; X plus zeros of those sizes broadcasts it.
    V carrier;
    const std::vector<int64_t> want = t.runtime_dims(t.in(1).value, "Expand's shape ('" + t.input_name(1) + "')", "", &carrier);
    const std::vector<int64_t> out = broadcast_sizes(t, t.in(0).spec.shape, want);
    if (out == t.in(0).spec.shape) return t.alias_output(0, t.in(0));
    const hal_dtype_e dt = t.in(0).spec.dtype;
    std::vector<bool> keep;  // the sizes the output takes from WANT (the rest are X's, or 1)
    for (size_t i = 0; i < want.size(); ++i) keep.push_back(out[out.size() - want.size() + i] == want[i] && want[i] != 1);
    V zeros = sized_zeros(t, carrier, want, keep, false, dt);
    t.set_output(0, t.emit1(dt == HAL_DTYPE_BOOL ? "logical_or" : "add", {t.value(0), zeros}));
    return;
  }
  std::vector<int64_t> out = broadcast(t, t.in(0).spec.shape, dims_of(t, 1, "Expand's shape"));
  if (out == t.in(0).spec.shape) {
    t.alias_output(0, t.in(0));
    return;
  }
  t.set_output(0, t.emit_as("copy", {t.value(0)}, {}, {t.in(0).spec.dtype, out}));
}

void constant_of_shape(Translator& t, const OpRule&) {
  HostTensor value{HAL_DTYPE_FLOAT32, {1}, std::vector<uint8_t>(4, 0)};
  if (const auto* a = t.attr("value")) value = tensor_from_proto(a->t(), "", t.where() + " attribute 'value'");
  if (value.data.size() != common::dtype_size(value.dtype)) t.invalid("value must hold one element");
  std::vector<int64_t> shape;
  if (runtime_sizes(t, 0)) {
    // A shape computed while the model runs: its sizes >= 2 are symbols of
    // the next stage; zeros of those sizes plus the value.
    V carrier;
    shape = t.runtime_dims(t.in(0).value, "ConstantOfShape's shape ('" + t.input_name(0) + "')", "", &carrier);
    if (carrier.valid()) {
      V zeros = sized_zeros(t, carrier, shape, std::vector<bool>(shape.size(), true), false, value.dtype);
      V one = t.constant(HostTensor{value.dtype, {}, value.data});
      t.set_output(0, t.emit1(value.dtype == HAL_DTYPE_BOOL ? "logical_or" : "add", {zeros, one}));
      return;
    }
  } else {
    shape = dims_of(t, 0, "ConstantOfShape's shape");
  }
  bool concrete = std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
  if (concrete && checked_numel(shape, t.where()) <= 64) {  // small: keep it foldable
    HostTensor h{value.dtype, shape, {}};
    for (int64_t i = 0, n = checked_numel(shape, t.where()); i < n; ++i) h.data.insert(h.data.end(), value.data.begin(), value.data.end());
    t.set_output_host(0, std::move(h));
    return;
  }
  double x;
  if (auto f = float_values(value)) x = (*f)[0];
  else t.unimplemented("value of type " + onnx_dtype_name(dtype_to_onnx(value.dtype)));
  t.set_output(0, t.emit_as("fill", {}, {Attr::scalar("value", x)}, {value.dtype, shape}));
}

void range(Translator& t, const OpRule&) {
  static const char* const kNames[] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {  // scalars: a malformed model may give an empty or longer tensor
    const std::vector<int64_t>& shape = t.in(i).spec.shape;  // < 0: a symbol
    const bool one = shape.empty() || (shape.size() == 1 && shape[0] == 1);
    if (!one && !(shape.size() == 1 && shape[0] < 0))
      t.invalid(std::string("input '") + kNames[i] + "' must be a scalar (one element), got rank " +
                std::to_string(shape.size()) + (shape.size() == 1 ? " with " + std::to_string(shape[0]) + " elements" : ""));
  }
  auto s = t.ints(0), l = t.ints(1), d = t.ints(2);
  if (s && s->size() != 1) s.reset();  // known element-wise but not one element: as unknown
  if (l && l->size() != 1) l.reset();
  if (d && d->size() != 1) d.reset();
  hal_dtype_e dt = t.in(0).spec.dtype;
  if (s && l && d && (*s)[0].known() && (*l)[0].known() && (*d)[0].known()) {
    int64_t start = (*s)[0].value, limit = (*l)[0].value, delta = (*d)[0].value;
    if (delta == 0) t.invalid("delta 0");
    // ceil((limit - start) / delta) elements, computed in double like the catalog's arange.
    double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
    if (count <= 64) {
      std::vector<int64_t> v;
      for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) v.push_back(start + i * delta);
      t.set_output_host(0, int_tensor(dt, v, {static_cast<int64_t>(v.size())}));
      return;
    }
    t.set_output(0, t.emit1("arange", {}, {Attr::scalar("start", double(start)), Attr::scalar("end", double(limit)), Attr::scalar("step", double(delta)), Attr::dtype("dtype", dt)}));
    return;
  }
  if (s && l && d && (*s)[0].known() && (*d)[0].known() && (*d)[0].value == 1 && (*l)[0].kind == Dim::kSym) {
    // start + [0, 1, ..., n): a run of ones summed up, for a length only known at run time.
    int64_t start = (*s)[0].value;
    int64_t n = (*l)[0].value;
    if (start != 0) t.unimplemented("a run-time limit with start " + std::to_string(start) + " (only 0)");
    t.set_output(0, symbolic_arange(t, dt, n));
    return;
  }
  if (t.symbolic_rows() && (t.computed_at_run_time(0) || t.computed_at_run_time(1) || t.computed_at_run_time(2))) {
    // Computed while the model runs: the length max(ceil((limit - start) /
    // delta), 0) (the difference in the inputs' dtype, the division in
    // double, as onnxruntime) is computed too and read back as a size, a
    // symbol of the next stage; the elements are start + i * delta (in
    // double for floats, as the catalog's arange), so a new length re-plans.
    auto operand = [&](size_t i) {
      V v = t.value(i);
      return t.spec(v).shape.empty() ? v : reshape_to(t, v, {});
    };
    const V start = operand(0), limit = operand(1), delta = operand(2);
    const V wide_delta = as_dtype(t, delta, HAL_DTYPE_FLOAT64);
    V len = t.emit1("ceil", {t.emit1("div", {as_dtype(t, t.emit1("sub", {limit, start}), HAL_DTYPE_FLOAT64), wide_delta})});
    len = t.emit1("clamp", {len, scalar(t, HAL_DTYPE_FLOAT64, 0), V{}});
    len = t.emit1("where", {t.emit1("eq", {delta, scalar(t, dt, 0)}), scalar(t, HAL_DTYPE_FLOAT64, -1), len});
    len = reshape_to(t, as_dtype(t, len, HAL_DTYPE_INT64), {1});
    V carrier;
    const std::vector<int64_t> n = t.runtime_dims(len, "Range's length", "delta 0", &carrier);
    const bool integral = !common::is_floating(dt);
    const hal_dtype_e wide = integral ? HAL_DTYPE_INT64 : HAL_DTYPE_FLOAT64;
    V steps = t.emit1("mul", {sized_arange(t, carrier, n, 0, wide), integral ? as_dtype(t, delta, wide) : wide_delta});
    t.set_output(0, as_dtype(t, t.emit1("add", {steps, as_dtype(t, start, wide)}), dt));
    return;
  }
  // Otherwise their values: known at load, bound per run, or read while the model runs.
  auto one = [&](size_t i, const char* what) {
    HostTensor h = t.known(i, std::string("Range's ") + what);
    auto v = float_values(h);
    if (!v) t.invalid(std::string(what) + " of dtype " + common::dtype_name(h.dtype));
    if (v->size() != 1) t.invalid(std::string(what) + " has " + std::to_string(v->size()) + " elements (one)");
    return (*v)[0];
  };
  const double a = one(0, "start"), b = one(1, "limit"), c = one(2, "delta");
  if (c == 0) t.invalid("delta 0");
  if (!(std::ceil((b - a) / c) > 0)) {  // no elements (the catalog's arange wants a step towards the end)
    t.set_output_host(0, HostTensor{dt, {0}, {}});
    return;
  }
  t.set_output(0, t.emit1("arange", {}, {Attr::scalar("start", a), Attr::scalar("end", b), Attr::scalar("step", c), Attr::dtype("dtype", dt)}));
}

void trilu(Translator& t, const OpRule&) {
  int64_t k = 0;
  if (t.has_input(1)) k = t.const_ints(1, "Trilu's k").at(0);
  t.set_output(0, t.emit1(t.attr_int("upper", 1) ? "triu" : "tril", {t.value(0)}, {Attr::i("diagonal", k)}));
}

void where(Translator& t, const OpRule&) {
  // Shape arithmetic: all three known at load (rank <= 1, broadcast by size 1).
  auto c = t.ints(0), a = t.ints(1), b = t.ints(2);
  if (c && a && b) {
    const size_t n = std::max({c->size(), a->size(), b->size()});
    auto at = [&](const std::vector<Dim>& v, size_t i) { return v[v.size() == 1 ? 0 : i]; };
    bool ok = (c->size() == n || c->size() == 1) && (a->size() == n || a->size() == 1) && (b->size() == n || b->size() == 1);
    std::vector<Dim> out;
    for (size_t i = 0; ok && i < n; ++i) {
      const Dim cond = at(*c, i);
      if (!cond.known()) ok = false;
      else out.push_back(cond.value != 0 ? at(*a, i) : at(*b, i));
    }
    if (ok) {
      const bool scalar = t.in(0).spec.shape.empty() && t.in(1).spec.shape.empty() && t.in(2).spec.shape.empty();
      t.set_output_ints(0, t.in(1).spec.dtype, out, scalar);
      return;
    }
  }
  t.set_output(0, t.emit1("where", {t.value(0), t.value(1), t.value(2)}));
}

// Pow's result has the base's dtype: the catalog's pow promotes (an int32
// base to a float exponent computes in float), then the result is cast back.
void pow(Translator& t, const OpRule&) {
  const hal_dtype_e base = t.in(0).spec.dtype;
  V y = t.emit1("pow", {t.value(0), t.value(1)});
  t.set_output(0, as_dtype(t, y, base));
}

void softmax(Translator& t, const OpRule& r) {
  if (t.opset() >= 13) {
    t.set_output(0, t.emit1(r.catalog, {t.value(0)}, {Attr::i("dim", t.attr_int("axis", -1))}));
    return;
  }
  // Versions 1 and 11: the input is coerced to 2-D at AXIS (default 1) and
  // normalized over the second dim, i.e. over every dim from AXIS on.
  const std::vector<int64_t> in = t.in(0).spec.shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = rank == 0 ? 0 : norm_axis(t, t.attr_int("axis", 1), in.size());
  if (axis >= rank - 1) {
    t.set_output(0, t.emit1(r.catalog, {t.value(0)}, {Attr::i("dim", rank == 0 ? 0 : rank - 1)}));
    return;
  }
  int64_t inner = 1;
  for (int64_t d = axis; d < rank; ++d) {
    if (in[d] < 0)
      t.unimplemented("softmax before opset 13 over dims " + std::to_string(axis) + ".. of " + join(in) +
                      ", one only known at run time");
    inner *= in[d];
  }
  V flat = t.emit1("reshape", {t.value(0)}, {Attr::ints("shape", {-1, inner})});
  t.set_output(0, reshape_to(t, t.emit1(r.catalog, {flat}, {Attr::i("dim", 1)}), in));
}

void gelu(Translator& t, const OpRule&) {
  std::string approx = t.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh") t.invalid("approximate='" + approx + "'");
  t.set_output(0, t.emit1("gelu", {t.value(0)}, {Attr::s("approximate", approx)}));
}

}  // namespace
V transpose2d(Translator& t, V v) { return t.emit1("permute", {v}, {Attr::ints("dims", {1, 0})}); }
namespace {

void gemm(Translator& t, const OpRule&) {
  float alpha = t.attr_float("alpha", 1.0f), beta = t.attr_float("beta", 1.0f);
  bool ta = t.attr_int("transA", 0) != 0, tb = t.attr_int("transB", 0) != 0;
  V a = t.value(0), b = t.value(1);
  if (ta) a = transpose2d(t, a);
  bool has_c = t.has_input(2);
  if (tb && alpha == 1.0f && (!has_c || (beta == 1.0f && t.in(2).spec.shape.size() <= 1))) {
    V origin = ta ? V{} : t.flatten_origin(a);
    if (origin.valid()) {  // rows of a flattened [d0, ..., K]: linear over the unflattened value
      V y = t.emit1("linear", {origin, b, has_c ? t.value(2) : V{}});
      int64_t n = t.spec(y).shape.back();
      V flat = t.emit1("reshape", {y}, {Attr::ints("shape", {-1, n})});
      t.set_flatten_origin(flat, y);
      t.set_output(0, flat);
      return;
    }
    t.set_output(0, t.emit1("linear", {a, b, has_c ? t.value(2) : V{}}));  // weight [N, K] as stored
    return;
  }
  if (tb) b = transpose2d(t, b);
  if (has_c) {
    t.set_output(0, t.emit1("addmm", {t.value(2), a, b}, {Attr::scalar("beta", beta), Attr::scalar("alpha", alpha)}));
    return;
  }
  V y = t.emit1("mm", {a, b});
  if (alpha != 1.0f) y = t.emit1("mul", {y, scalar(t, t.spec(y).dtype, alpha)});
  t.set_output(0, y);
}

}  // namespace
// Symmetric pads ([b1, b2, ..., e1, e2] with b == e) as the catalog's
// per-dim padding; auto_pad SAME_* computed from concrete sizes.
// Conv's / pooling's pads, begin values then end values: the attribute, or
// what auto_pad gives (SAME: the output is ceil(size / stride)).
std::vector<int64_t> conv_pads(Translator& t, size_t spatial, const std::vector<int64_t>& kernel,
                               const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations) {
  std::string auto_pad = t.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads(2 * spatial, 0);
  if (auto p = t.attr_ints("pads")) pads = *p;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const std::vector<int64_t>& in = t.in(0).spec.shape;
    for (size_t i = 0; i < spatial; ++i) {
      int64_t size = in[2 + i];
      if (size < 0) t.unimplemented("auto_pad=" + auto_pad + " over a spatial dim only known at run time");
      int64_t out = (size + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + spatial] = total - pads[i];
    }
  } else if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (auto_pad != "NOTSET") {
    t.invalid("auto_pad='" + auto_pad + "'");
  }
  if (pads.size() != 2 * spatial) t.invalid("pads has " + std::to_string(pads.size()) + " entries for " + std::to_string(spatial) + " spatial dims");
  for (int64_t p : pads)
    if (p < 0) t.invalid("negative pads " + join(pads));
  return pads;
}
namespace {

// The symmetric part of PADS (begin..., end...): per spatial dim the smaller side.
std::vector<int64_t> symmetric_part(const std::vector<int64_t>& pads) {
  const size_t spatial = pads.size() / 2;
  std::vector<int64_t> sym(spatial);
  for (size_t i = 0; i < spatial; ++i) sym[i] = std::min(pads[i], pads[i + spatial]);
  return sym;
}

// ConvTranspose's pads (begin..., end...) as ONNX computes them: given, or
// from output_shape / auto_pad=SAME (output = size * stride) through the
// total padding stride*(size-1) + output_padding + (k-1)*dilation + 1 - output.
// An output_shape past the full output (total < 0) adds the difference to
// OUTPUT_PADDING (zeros computed past the input's last contribution).
std::vector<int64_t> transpose_pads(Translator& t, size_t spatial, const std::vector<int64_t>& kernel,
                                    const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                                    std::vector<int64_t>& output_padding) {
  const std::string auto_pad = t.attr_string("auto_pad", "NOTSET");
  auto output_shape = t.attr_ints("output_shape");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!output_shape && !same) return conv_pads(t, spatial, kernel, strides, dilations);
  if (output_shape && output_shape->size() == spatial + 2) output_shape->erase(output_shape->begin(), output_shape->begin() + 2);
  if (output_shape && output_shape->size() != spatial)
    t.invalid("output_shape has " + std::to_string(output_shape->size()) + " entries for " + std::to_string(spatial) + " spatial dims");
  std::vector<int64_t> pads(2 * spatial, 0);
  const std::vector<int64_t>& in = t.in(0).spec.shape;
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t size = in[2 + i];
    if (size < 0) t.unimplemented("output_shape / auto_pad over a spatial dim only known at run time");
    const int64_t out = output_shape ? (*output_shape)[i] : size * strides[i];
    const int64_t total = strides[i] * (size - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1 - out;
    if (total < 0) {
      output_padding[i] -= total;
      continue;
    }
    pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[i + spatial] = total - pads[i];
  }
  return pads;
}

}  // namespace
// V's elements [BEGIN, size - END) along AXIS (an index_select).
V crop(Translator& t, V v, int64_t axis, int64_t begin, int64_t end) {
  const int64_t size = t.spec(v).shape[static_cast<size_t>(axis)];
  std::vector<int64_t> keep;
  for (int64_t k = begin; k < size - end; ++k) keep.push_back(k);
  V index = t.constant(int_tensor(HAL_DTYPE_INT64, keep, {static_cast<int64_t>(keep.size())}));
  return t.emit1("index_select", {v, index}, {Attr::i("dim", axis)});
}
namespace {

}  // namespace

std::vector<int64_t> ints_or(Translator& t, const char* name, size_t n, int64_t fallback, const char* of) {
  auto v = t.attr_ints(name);
  if (!v) return std::vector<int64_t>(n, fallback);
  if (v->size() != n) t.invalid(std::string(name) + " has " + std::to_string(v->size()) + " entries for " + std::to_string(n) + " " + of);
  return *v;
}

namespace {

// 1-D convolution and pooling run as the 2-D catalog ops over a unit
// height: the attribute lists get ONE in front, the values a unit dim 2.
std::vector<int64_t> lift_1d(std::vector<int64_t> v, size_t spatial, int64_t one) {
  if (spatial == 1) v.insert(v.begin(), one);
  return v;
}
V unit_dim_2(Translator& t, V v, size_t spatial) {
  if (spatial != 1) return v;
  std::vector<int64_t> s = t.spec(v).shape;
  s.insert(s.begin() + 2, 1);
  return reshape_to(t, v, s);
}
V drop_dim_2(Translator& t, V v, size_t spatial) {
  if (spatial != 1) return v;
  std::vector<int64_t> s = t.spec(v).shape;
  s.erase(s.begin() + 2);
  return reshape_to(t, v, s);
}

}  // namespace

// A (non-transposed) Conv of X by WEIGHT (+ BIAS when valid) with the node's
// attributes: 1-D and 2-D; asymmetric pads pad X first.
V conv_forward(Translator& t, V x, V weight, V bias) {
  const ValueSpec& w = t.spec(weight);
  const size_t spatial = w.shape.size() - 2;
  if (w.shape.size() < 3 || spatial > 2) t.unimplemented(std::to_string(spatial) + "-D convolution (only 1-D and 2-D)");
  std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  if (auto k = t.attr_ints("kernel_shape"); k && *k != kernel)
    t.invalid("kernel_shape " + join(*k) + " differs from the weight's spatial dims " + join(kernel));
  std::vector<int64_t> strides = ints_or(t, "strides", spatial, 1), dil = ints_or(t, "dilations", spatial, 1);
  const int64_t groups = t.attr_int("group", 1);
  std::vector<int64_t> pads = conv_pads(t, spatial, kernel, strides, dil);
  std::vector<int64_t> sym = symmetric_part(pads);
  if (sym != std::vector<int64_t>(pads.begin(), pads.begin() + static_cast<long>(spatial)) ||
      sym != std::vector<int64_t>(pads.begin() + static_cast<long>(spatial), pads.end())) {
    std::vector<int64_t> torch_pad;  // last dim first, [begin, end] pairs: the asymmetric remainder
    for (size_t d = spatial; d-- > 0;) {
      torch_pad.push_back(pads[d] - sym[d]);
      torch_pad.push_back(pads[d + spatial] - sym[d]);
    }
    x = t.emit1("pad", {x}, {Attr::ints("pad", torch_pad), Attr::s("mode", "constant"), Attr::scalar("value", 0.0)});
  }
  std::vector<Attr> attrs{Attr::ints("stride", strides), Attr::ints("padding", sym), Attr::ints("dilation", dil),
                          Attr::i("groups", groups)};
  return t.emit1(spatial == 1 ? "conv1d" : "conv2d", {x, weight, bias}, attrs);
}

namespace {

// Conv and ConvTranspose, 1-D and 2-D. Asymmetric pads: a Conv pads its
// input first; a ConvTranspose computes with the smaller pad and crops.
void conv(Translator& t, const OpRule&) {
  V x = t.value(0), weight = t.value(1);
  V bias = t.has_input(2) ? t.value(2) : V{};
  if (t.node().op_type() != "ConvTranspose") {
    t.set_output(0, conv_forward(t, x, weight, bias));
    return;
  }
  const ValueSpec w = t.in(1).spec;
  const size_t spatial = w.shape.size() - 2;
  if (spatial != 1 && spatial != 2) t.unimplemented(std::to_string(spatial) + "-D convolution (only 1-D and 2-D)");
  std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  if (auto k = t.attr_ints("kernel_shape"); k && *k != kernel)
    t.invalid("kernel_shape " + join(*k) + " differs from the weight's spatial dims " + join(kernel));
  std::vector<int64_t> strides = ints_or(t, "strides", spatial, 1), dil = ints_or(t, "dilations", spatial, 1);
  const int64_t groups = t.attr_int("group", 1);
  std::vector<int64_t> out_pad = ints_or(t, "output_padding", spatial, 0);  // output_shape may add to it
  std::vector<int64_t> pads = transpose_pads(t, spatial, kernel, strides, dil, out_pad);
  std::vector<int64_t> sym = symmetric_part(pads);
  V y = t.emit1("conv_transpose2d", {unit_dim_2(t, x, spatial), unit_dim_2(t, weight, spatial), bias},
                {Attr::ints("stride", lift_1d(strides, spatial, 1)), Attr::ints("padding", lift_1d(sym, spatial, 0)),
                 Attr::ints("output_padding", lift_1d(out_pad, spatial, 0)), Attr::i("groups", groups),
                 Attr::ints("dilation", lift_1d(dil, spatial, 1))});
  y = drop_dim_2(t, y, spatial);
  for (size_t i = 0; i < spatial; ++i)
    if (pads[i] != pads[i + spatial]) y = crop(t, y, static_cast<int64_t>(2 + i), pads[i] - sym[i], pads[i + spatial] - sym[i]);
  t.set_output(0, y);
}

// MaxPool and AveragePool, 1-D (as 2-D over a unit height) and 2-D. Pads
// the catalog's pooling does not take (asymmetric, or more than half the
// kernel) are applied first: -inf for MaxPool; zeros for AveragePool, whose
// divisor then counts only the input's elements unless count_include_pad
// (a second pooling of ones gives the count).
// AveragePool / LpPool with dilations (the catalog's avg_pool2d has none):
// window sums as a depthwise convolution with a kernel of ones (dilated,
// strided) over the input padded with zeros (ceil_mode: the last window's
// overhang too), divided by the count of the elements each window covers
// (the input's, or with COUNT_PAD the padded input's; never the overhang),
// counted the same way over a mask. 3-D runs as 2-D over (H, W) with the
// depth slices as channels, then over (D, 1): sums and counts are separable.
// LpPool: (sum of |x|^p)^(1/p), no division.
V dilated_window_sum(Translator& t, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                     const std::vector<int64_t>& pads, const std::vector<int64_t>& dil, bool ceil_mode, bool count_pad,
                     bool lp, double p) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  const size_t spatial = shape.size() - 2;
  for (int64_t d : shape)
    if (d < 0) t.unimplemented("dilated pooling over a dim only known at run time");
  const hal_dtype_e dt = t.in(0).spec.dtype;
  std::vector<int64_t> extra(spatial, 0), padded(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t span = (kernel[i] - 1) * dil[i] + 1, len = shape[2 + i] + pads[i] + pads[i + spatial];
    if (len < span) t.invalid("the dilated window (" + std::to_string(span) + ") is larger than the padded input (" + std::to_string(len) + ")");
    int64_t out = (len - span) / strides[i] + 1;
    if (ceil_mode) {
      out = (len - span + strides[i] - 1) / strides[i] + 1;
      if ((out - 1) * strides[i] >= shape[2 + i] + pads[i]) --out;  // a window starting in the end padding
    }
    extra[i] = std::max<int64_t>(0, (out - 1) * strides[i] + span - len);
    padded[i] = len + extra[i];
  }
  auto pad_dims = [&](V v, const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
    std::vector<int64_t> torch_pad;  // last dim first
    for (size_t d = spatial; d-- > 0;) {
      torch_pad.push_back(begin[d]);
      torch_pad.push_back(end[d]);
    }
    return t.emit1("pad", {v}, {Attr::ints("pad", torch_pad), Attr::s("mode", "constant"), Attr::scalar("value", 0.0)});
  };
  // Window sums of V ([N, C, *spatial], padded) by a depthwise convolution with ones.
  auto window_sums = [&](V v) {
    const std::vector<int64_t> vs = t.spec(v).shape;
    auto conv = [&](V in, int64_t channels, const std::vector<int64_t>& k, const std::vector<int64_t>& st,
                    const std::vector<int64_t>& dl) {
      std::vector<int64_t> wshape{channels, 1};
      wshape.insert(wshape.end(), k.begin(), k.end());
      int64_t count = channels;
      for (int64_t x : k) count *= x;
      V w = as_dtype(t, float_constant(t, wshape, std::vector<float>(static_cast<size_t>(count), 1.0f)), t.spec(in).dtype);
      return t.emit1(k.size() == 1 ? "conv1d" : "conv2d", {in, w, V{}},
                     {Attr::ints("stride", st), Attr::ints("padding", std::vector<int64_t>(k.size(), 0)),
                      Attr::ints("dilation", dl), Attr::i("groups", channels)});
    };
    if (spatial < 3) return conv(v, vs[1], kernel, strides, dil);
    V y = conv(reshape_to(t, v, {vs[0], vs[1] * vs[2], vs[3], vs[4]}), vs[1] * vs[2], {kernel[1], kernel[2]},
               {strides[1], strides[2]}, {dil[1], dil[2]});
    const std::vector<int64_t> hw = t.spec(y).shape;
    y = reshape_to(t, y, {vs[0], vs[1], vs[2], hw[2] * hw[3]});
    y = conv(y, vs[1], {kernel[0], 1}, {strides[0], 1}, {dil[0], 1});
    return reshape_to(t, y, {vs[0], vs[1], t.spec(y).shape[2], hw[2], hw[3]});
  };
  V x = t.value(0);
  if (lp) x = t.emit1("pow", {t.emit1("abs", {x}), scalar(t, dt, p)});
  std::vector<int64_t> begin(pads.begin(), pads.begin() + static_cast<long>(spatial)), end(spatial);
  for (size_t i = 0; i < spatial; ++i) end[i] = pads[i + spatial] + extra[i];
  V sums = window_sums(pad_dims(x, begin, end));
  if (lp) return t.emit1("pow", {sums, scalar(t, dt, 1.0 / p)});
  // The count: ones over the input (or the padded input), zeros over the rest.
  std::vector<int64_t> mshape{1, 1};
  std::vector<int64_t> mbegin = begin, mend = end;
  for (size_t i = 0; i < spatial; ++i) {
    mshape.push_back(count_pad ? shape[2 + i] + pads[i] + pads[i + spatial] : shape[2 + i]);
    if (count_pad) {
      mbegin[i] = 0;
      mend[i] = extra[i];
    }
  }
  V mask = as_dtype(t, float_constant(t, mshape, std::vector<float>(static_cast<size_t>(numel(mshape)), 1.0f)), dt);
  V count = window_sums(pad_dims(mask, mbegin, mend));
  return t.emit1("div", {sums, count});
}

void pool(Translator& t, const OpRule&) {
  const size_t spatial = t.in(0).spec.shape.size() - 2;
  if (spatial < 1 || spatial > 3) t.unimplemented(std::to_string(spatial) + "-D pooling (1-D, 2-D and 3-D)");
  auto kernel_attr = t.attr_ints("kernel_shape");
  if (!kernel_attr) t.invalid("needs kernel_shape");
  std::vector<int64_t> kernel = *kernel_attr;
  if (kernel.size() != spatial) t.invalid("kernel_shape " + join(kernel) + " for " + std::to_string(spatial) + " spatial dims");
  std::vector<int64_t> strides = ints_or(t, "strides", spatial, 1), dil = ints_or(t, "dilations", spatial, 1);
  std::vector<int64_t> pads = conv_pads(t, spatial, kernel, strides, dil);
  const bool max = t.node().op_type() == "MaxPool";
  // LpPool: (sum over the window of |x|^p)^(1/p), zeros padding: an
  // AveragePool counting the pads, times the window's size.
  const bool lp = t.node().op_type() == "LpPool";
  const bool ceil_mode = t.attr_int("ceil_mode", 0) != 0;
  const bool include_pad = lp || t.attr_int("count_include_pad", 0) != 0;
  const double lp_p = static_cast<double>(t.attr_int("p", 2));
  if (lp && lp_p <= 0) t.invalid("p=" + std::to_string(t.attr_int("p", 2)));
  // The catalog's averaging divides a ceil_mode window past the padded input by its clipped size.
  if (lp && ceil_mode) t.unimplemented("ceil_mode in LpPool");
  if (max) {
    t.require_attr("storage_order", 0, 0);
    if (t.output_count() > 1 && !t.output_name(1).empty()) t.unimplemented("the Indices output");
  } else if (dil != std::vector<int64_t>(spatial, 1)) {
    t.set_output(0, dilated_window_sum(t, kernel, strides, pads, dil, ceil_mode, include_pad, lp, lp_p));
    return;
  }
  // What the catalog takes as is: symmetric pads of at most half the (dilated) kernel.
  std::vector<int64_t> sym = symmetric_part(pads);
  bool fits = true;
  for (size_t i = 0; i < spatial; ++i) {
    if (pads[i] != pads[i + spatial] || 2 * pads[i] > (kernel[i] - 1) * dil[i] + 1) fits = false;
  }
  if (ceil_mode && !fits) t.unimplemented("ceil_mode with pads the catalog's pooling does not take " + join(pads));
  V x = t.value(0);
  const hal_dtype_e dt = t.in(0).spec.dtype;
  if (lp) x = t.emit1("pow", {t.emit1("abs", {x}), scalar(t, dt, lp_p)});
  auto pre_pad = [&](V v, double value) {
    std::vector<int64_t> torch_pad;  // last dim first, [begin, end] pairs
    for (size_t d = spatial; d-- > 0;) {
      torch_pad.push_back(pads[d]);
      torch_pad.push_back(pads[d + spatial]);
    }
    return t.emit1("pad", {v}, {Attr::ints("pad", torch_pad), Attr::s("mode", "constant"), Attr::scalar("value", value)});
  };
  if (!fits) {
    x = pre_pad(x, max ? -std::numeric_limits<double>::infinity() : 0.0);
    std::fill(sym.begin(), sym.end(), 0);
  }
  // 1-D runs as 2-D over a unit height; 3-D as 2-D over (H, W) with the
  // depth slices as channels, then over (D, 1) with H*W as the width (max,
  // sums and per-dim counts are separable).
  const std::vector<int64_t> in_shape = t.in(0).spec.shape;
  if (spatial == 3)
    for (size_t i = 1; i < in_shape.size(); ++i)
      if (in_shape[i] < 0) t.unimplemented("3-D pooling over a dim only known at run time");
  auto run = [&](const char* op, V v, bool count_pad) {
    auto attrs_of = [&](std::vector<int64_t> k, std::vector<int64_t> st, std::vector<int64_t> pd, std::vector<int64_t> dl) {
      std::vector<Attr> a{Attr::ints("kernel_size", k), Attr::ints("stride", st), Attr::ints("padding", pd),
                          Attr::b("ceil_mode", ceil_mode)};
      if (max) a.push_back(Attr::ints("dilation", dl));
      else a.push_back(Attr::b("count_include_pad", count_pad));
      return a;
    };
    auto emit = [&](V in, std::vector<Attr> a) { return max ? t.emit(op, {in}, a)[0] : t.emit1(op, {in}, a); };
    if (spatial < 3) {
      auto lift = [&](std::vector<int64_t> w, int64_t one) { return lift_1d(std::move(w), spatial, one); };
      V y = emit(unit_dim_2(t, v, spatial), attrs_of(lift(kernel, 1), lift(strides, 1), lift(sym, 0), lift(dil, 1)));
      return drop_dim_2(t, y, spatial);
    }
    const std::vector<int64_t> vs = t.spec(v).shape;  // [N, C, D, H, W] (pre-padded when !fits)
    V y = reshape_to(t, v, {vs[0], vs[1] * vs[2], vs[3], vs[4]});
    y = emit(y, attrs_of({kernel[1], kernel[2]}, {strides[1], strides[2]}, {sym[1], sym[2]}, {dil[1], dil[2]}));
    const std::vector<int64_t> hw = t.spec(y).shape;
    y = reshape_to(t, y, {vs[0], vs[1], vs[2], hw[2] * hw[3]});
    y = emit(y, attrs_of({kernel[0], 1}, {strides[0], 1}, {sym[0], 0}, {dil[0], 1}));
    return reshape_to(t, y, {vs[0], vs[1], t.spec(y).shape[2], hw[2], hw[3]});
  };
  if (max) {
    t.set_output(0, run("max_pool2d", x, false));
    return;
  }
  V y = run("avg_pool2d", x, fits ? include_pad : true);
  if (!fits && !include_pad) {
    // The mean over the window's input elements: sum / count, the count from pooling ones.
    std::vector<int64_t> one_shape(in_shape.size(), 1);
    for (size_t i = 0; i < spatial; ++i) one_shape[2 + i] = in_shape[2 + i];
    if (spatial == 3) one_shape[1] = in_shape[1];  // the separable passes reshape over the channels
    for (int64_t d : one_shape)
      if (d < 0) t.unimplemented("AveragePool with these pads over a spatial dim only known at run time");
    std::vector<float> ones_data(static_cast<size_t>(product(one_shape).factor), 1.0f);
    HostTensor ones{HAL_DTYPE_FLOAT32, one_shape, {}};
    ones.data.resize(ones_data.size() * sizeof(float));
    std::memcpy(ones.data.data(), ones_data.data(), ones.data.size());
    V ones_v = t.constant(std::move(ones));
    if (t.in(0).spec.dtype != HAL_DTYPE_FLOAT32)
      ones_v = t.emit_as("copy", {ones_v}, {}, {t.in(0).spec.dtype, one_shape});
    V count = run("avg_pool2d", pre_pad(ones_v, 0.0), true);
    y = t.emit1("div", {y, count});
  }
  if (lp) {
    int64_t area = 1;
    for (int64_t k : kernel) area *= k;
    y = t.emit1("pow", {t.emit1("mul", {y, scalar(t, dt, static_cast<double>(area))}), scalar(t, dt, 1.0 / lp_p)});
  }
  t.set_output(0, y);
}

void global_pool(Translator& t, const OpRule& r) {
  size_t rank = t.in(0).spec.shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 2; i < rank; ++i) dims.push_back(static_cast<int64_t>(i));
  t.set_output(0, t.emit1(r.catalog, {t.value(0)}, {Attr::ints("dim", dims), Attr::b("keepdim", true)}));
}

void batch_norm(Translator& t, const OpRule&) {
  if (t.attr_int("training_mode", 0) != 0) t.unimplemented("training_mode=1 (only inference)");
  if (t.opset() < 9 && t.attr_int("spatial", 1) == 0) t.unimplemented("spatial=0 (per-element statistics)");
  for (size_t i = 1; i < t.output_count(); ++i)
    if (!t.output_name(i).empty()) t.unimplemented("the running mean/var outputs (training only)");
  std::vector<V> outs = t.emit("batch_norm", {t.value(0), t.value(1), t.value(2), t.value(3), t.value(4)},
                               {Attr::b("training", false), Attr::f("eps", t.attr_float("epsilon", 1e-5f))});
  t.set_output(0, outs[0]);
}

// A Scale or Bias that broadcasts to the normalized dims (ONNX allows it;
// the catalog's norms take exactly those dims).
V normalized_param(Translator& t, size_t input, const std::vector<int64_t>& normalized) {
  if (!t.has_input(input)) return V{};
  const ValueSpec spec = t.in(input).spec;
  V v = t.value(input);
  if (spec.shape == normalized) return v;
  std::vector<int64_t> trimmed = spec.shape;
  while (trimmed.size() > normalized.size() && trimmed.front() == 1) trimmed.erase(trimmed.begin());
  if (trimmed.size() > normalized.size())
    t.unimplemented("a scale or bias of shape " + join(spec.shape) + " over normalized dims " + join(normalized));
  if (trimmed != spec.shape) v = reshape_to(t, v, trimmed);
  if (trimmed == normalized) return v;
  return t.emit_as("copy", {v}, {}, {spec.dtype, normalized});  // broadcast
}

// The dtype ONNX's stash_type gives the statistics outputs (1: float32).
hal_dtype_e stash_dtype(Translator& t) {
  const hal_dtype_e dt = dtype_from_onnx(static_cast<int32_t>(t.attr_int("stash_type", 1)));
  if (dt == HAL_DTYPE_INVALID || !is_float(dt)) t.invalid("stash_type " + std::to_string(t.attr_int("stash_type", 1)));
  return dt;
}

// The dims a LayerNormalization / RMSNormalization normalizes over: from
// its axis (default -1) to the end, known at load.
std::vector<int64_t> normalized_dims(Translator& t) {
  const std::vector<int64_t>& in = t.in(0).spec.shape;
  const int64_t axis = norm_axis(t, t.attr_int("axis", -1), in.size());
  std::vector<int64_t> normalized(in.begin() + axis, in.end());
  for (int64_t d : normalized)
    if (d < 0) t.unimplemented("normalizing over a dim only known at run time");
  return normalized;
}

void layer_norm(Translator& t, const OpRule&) {
  const std::vector<int64_t> normalized = normalized_dims(t);
  std::vector<V> outs = t.emit("layer_norm", {t.value(0), normalized_param(t, 1, normalized), normalized_param(t, 2, normalized)},
                               {Attr::ints("normalized_shape", normalized), Attr::f("eps", t.attr_float("epsilon", 1e-5f))});
  t.set_output(0, outs[0]);
  // Mean and InvStdDev: the input's shape with the normalized dims 1, in the stash dtype.
  for (size_t i = 1; i < std::min<size_t>(t.output_count(), 3); ++i) {
    if (t.output_name(i).empty()) continue;
    t.set_output(i, as_dtype(t, outs[i], stash_dtype(t)));
  }
}

void rms_norm(Translator& t, const OpRule&) {
  const std::vector<int64_t> normalized = normalized_dims(t);
  stash_dtype(t);  // validated; the catalog computes in the input's dtype with float accumulation
  std::vector<V> outs = t.emit("rms_norm", {t.value(0), normalized_param(t, 1, normalized)},
                               {Attr::ints("normalized_shape", normalized), Attr::f("eps", t.attr_float("epsilon", 1e-5f))});
  t.set_output(0, outs[0]);
}

}  // namespace
// A float constant of SHAPE (float32 values, stored in DT's width when DT is
// float64; 16-bit dtypes get a float32 constant cast by the caller).
V float_constant(Translator& t, const std::vector<int64_t>& shape, const std::vector<float>& values) {
  HostTensor h{HAL_DTYPE_FLOAT32, shape, {}};
  h.data.resize(values.size() * sizeof(float));
  std::memcpy(h.data.data(), values.data(), h.data.size());
  return t.constant(h);
}

// V in dtype DT (a copy when it differs).
V as_dtype(Translator& t, V v, hal_dtype_e dt) {
  if (t.spec(v).dtype == dt) return v;
  return t.emit_as("copy", {v}, {}, {dt, t.spec(v).shape});
}
namespace {

// [B, S, N*D] -> [B, N, S, D]: the heads split off a packed hidden dim
// (Attention's and LinearAttention's 3-D inputs). WHAT names the input.
V split_heads(Translator& t, V x, int64_t n, const std::string& what) {
  const std::vector<int64_t> sh = t.spec(x).shape;
  for (int64_t d : sh)
    if (d < 0) t.unimplemented(what + " with a dim only known at run time");
  if (n <= 0 || sh[2] % n != 0)
    t.invalid(what + " hidden size " + std::to_string(sh[2]) + " is not a multiple of " + std::to_string(n) + " heads");
  x = reshape_to(t, x, {sh[0], sh[1], n, sh[2] / n});
  return t.emit1("permute", {x}, {Attr::ints("dims", {0, 2, 1, 3})});
}

// [B, H, R, C] with each head repeated GROUPS times in place (h0, h0, h1,
// h1, ...): the key/value heads (or states) a group of query heads shares.
V repeat_heads(Translator& t, V x, int64_t groups) {
  const std::vector<int64_t> sh = t.spec(x).shape;
  x = reshape_to(t, x, {sh[0], sh[1], 1, sh[2], sh[3]});
  x = t.emit_as("copy", {x}, {}, {t.spec(x).dtype, {sh[0], sh[1], groups, sh[2], sh[3]}});
  return reshape_to(t, x, {sh[0], sh[1] * groups, sh[2], sh[3]});
}

// ONNX Attention (23..25) as catalog ops, following the operator's
// reference: 3-D inputs split into heads; past_key/past_value concatenated
// (present_key/present_value); grouped heads repeated; Q and K scaled by
// sqrt(scale); softcap; the bias of attn_mask (bool: 0 / -inf; shorter than
// the keys: padded with masked positions), is_causal and the sliding window
// (bottom-right aligned on the past length); softmax in softmax_precision;
// rows whose bias masks every key give zeros; qk_matmul_output per mode.
void attention(Translator& t, const OpRule&) {
  const hal_dtype_e dt = t.in(0).spec.dtype;
  const size_t rank = t.in(0).spec.shape.size();
  if (rank != 3 && rank != 4) t.invalid("Q has rank " + std::to_string(rank) + " (3 or 4)");
  if (t.in(1).spec.shape.size() != rank || t.in(2).spec.shape.size() != rank) t.invalid("Q, K and V differ in rank");
  if (t.has_input(4) != t.has_input(5)) t.invalid("past_key and past_value must be given together");
  if (t.has_input(6) && t.has_input(4)) t.invalid("nonpad_kv_seqlen cannot be combined with past_key / past_value");
  const auto* qh_attr = t.attr("q_num_heads");
  const auto* kvh_attr = t.attr("kv_num_heads");
  if (rank == 4 && t.opset() >= 25 && (qh_attr || kvh_attr))
    t.invalid("q_num_heads and kv_num_heads must not be given for 4-D inputs");
  auto known = [&](const std::vector<int64_t>& shape, const char* what) {
    for (int64_t d : shape)
      if (d < 0) t.unimplemented(std::string(what) + " with a dim only known at run time");
  };
  V q = t.value(0), k = t.value(1), v = t.value(2);
  const std::vector<int64_t> q_in = t.in(0).spec.shape;
  if (rank == 3) {
    if (!qh_attr || !kvh_attr) t.invalid("3-D Q, K and V need q_num_heads and kv_num_heads");
    const int64_t qh = qh_attr->i(), kvh = kvh_attr->i();
    if (qh <= 0 || kvh <= 0) t.invalid("q_num_heads and kv_num_heads must be positive");
    q = split_heads(t, q, qh, "Q");
    k = split_heads(t, k, kvh, "K");
    v = split_heads(t, v, kvh, "V");
  }
  const std::vector<int64_t> qs = t.spec(q).shape;
  known(qs, "Q");
  const float scale = t.attr("scale") ? t.attr_float("scale", 1.0f) : 1.0f / std::sqrt(static_cast<float>(qs[3]));
  int64_t past = 0;
  if (t.has_input(4)) {
    past = t.in(4).spec.shape.at(2);
    k = t.emit1("cat", {t.value(4), k}, {Attr::i("dim", 2)});
    v = t.emit1("cat", {t.value(5), v}, {Attr::i("dim", 2)});
  }
  if (t.output_count() > 1 && !t.output_name(1).empty()) t.set_output(1, k);
  if (t.output_count() > 2 && !t.output_name(2).empty()) t.set_output(2, v);
  const std::vector<int64_t> ks = t.spec(k).shape, vs = t.spec(v).shape;
  known(ks, "K");
  known(vs, "V");
  const int64_t sq = qs[2], skv = ks[2];
  // The bias: the mask's part (a graph value) plus causal / window (a constant).
  V bias;
  if (t.has_input(3)) {
    V mask = t.value(3);
    const ValueSpec ms = t.spec(mask);
    known(ms.shape, "attn_mask");
    if (ms.dtype == HAL_DTYPE_BOOL) {
      mask = t.emit1("where", {mask, scalar(t, dt, 0.0), scalar(t, dt, -std::numeric_limits<double>::infinity())});
      mask = as_dtype(t, mask, dt);
    }
    const int64_t last = ms.shape.empty() ? 1 : ms.shape.back();
    if (!ms.shape.empty() && last < skv)
      mask = t.emit1("pad", {mask}, {Attr::ints("pad", {0, skv - last}), Attr::s("mode", "constant"),
                                     Attr::scalar("value", -std::numeric_limits<double>::infinity())});
    bias = mask;
  }
  const bool causal = t.attr_int("is_causal", 0) != 0;
  const int64_t left = t.attr_int("left_window_size", -1), right = t.attr_int("right_window_size", -1);
  if (left < -1 || right < -1) t.invalid("window sizes must be -1 or nonnegative");
  // External cache (nonpad_kv_seqlen, a value known at load or bound per
  // run): per batch, the causal/window offset nonpad - sq and the keys past
  // nonpad masked. Else one offset: the past length.
  std::vector<int64_t> offsets{past}, valid{skv};
  if (t.has_input(6)) {
    valid = t.const_ints(6, "nonpad_kv_seqlen");
    if (static_cast<int64_t>(valid.size()) != qs[0])
      t.invalid("nonpad_kv_seqlen has " + std::to_string(valid.size()) + " entries for batch " + std::to_string(qs[0]));
    offsets.clear();
    for (int64_t n : valid) offsets.push_back(n - sq);
  }
  const int64_t groups = static_cast<int64_t>(offsets.size());
  std::vector<float> fixed(static_cast<size_t>(groups * sq * skv), 0.0f);
  bool any_fixed = false;
  for (int64_t b = 0; b < groups; ++b)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < skv; ++j) {
        const int64_t diff = i + offsets[static_cast<size_t>(b)] - j;
        bool allowed = (!causal || diff >= 0) && j < valid[static_cast<size_t>(b)];
        if (left >= 0) allowed = allowed && diff <= left;
        if (right >= 0) allowed = allowed && -diff <= right;
        if (!allowed) {
          fixed[static_cast<size_t>((b * sq + i) * skv + j)] = -std::numeric_limits<float>::infinity();
          any_fixed = true;
        }
      }
  if (any_fixed) {
    const std::vector<int64_t> shape = t.has_input(6) ? std::vector<int64_t>{groups, 1, sq, skv} : std::vector<int64_t>{sq, skv};
    V c = as_dtype(t, float_constant(t, shape, fixed), dt);
    bias = bias.valid() ? t.emit1("add", {bias, c}) : c;
  }
  // Grouped heads: each K/V head repeated for its group of Q heads (interleaved).
  const int64_t qh = qs[1], kvh = ks[1];
  if (qh != kvh) {
    if (kvh <= 0 || qh % kvh != 0 || vs[1] != kvh)
      t.invalid(std::to_string(qh) + " query heads for " + std::to_string(kvh) + " key/value heads");
    k = repeat_heads(t, k, qh / kvh);
    v = repeat_heads(t, v, qh / kvh);
  }
  V root = scalar(t, dt, std::sqrt(static_cast<double>(scale)));
  V scores = t.emit1("matmul", {t.emit1("mul", {q, root}),
                                t.emit1("permute", {t.emit1("mul", {k, root})}, {Attr::ints("dims", {0, 1, 3, 2})})});
  const int64_t mode = t.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) t.invalid("qk_matmul_output_mode " + std::to_string(mode));
  V qk_out = scores;  // mode 0: the raw product, as the spec and onnxruntime have it
  const float softcap = t.attr_float("softcap", 0.0f);
  if (softcap > 0) {
    V cap = scalar(t, dt, softcap);
    scores = t.emit1("mul", {t.emit1("tanh", {t.emit1("div", {scores, cap})}), cap});
  }
  if (mode == 1) qk_out = scores;
  V logits = bias.valid() ? t.emit1("add", {scores, bias}) : scores;
  if (mode == 2) qk_out = logits;
  hal_dtype_e soft_dt = dt;
  if (t.attr("softmax_precision")) {
    soft_dt = dtype_from_onnx(static_cast<int32_t>(t.attr_int("softmax_precision", 1)));
    if (!is_float(soft_dt)) t.invalid("softmax_precision " + std::to_string(t.attr_int("softmax_precision", 1)));
  }
  V probs = t.emit1("softmax", {as_dtype(t, logits, soft_dt)}, {Attr::i("dim", -1)});
  if (bias.valid()) {  // rows the bias masks whole: zeros, not NaN
    V row_max = t.emit1("amax", {bias}, {Attr::ints("dim", {-1}), Attr::b("keepdim", true)});
    V all_masked = t.emit1("eq", {row_max, scalar(t, dt, -std::numeric_limits<double>::infinity())});
    probs = t.emit1("where", {all_masked, scalar(t, soft_dt, 0.0), probs});
  }
  probs = as_dtype(t, probs, dt);
  if (mode == 3) qk_out = probs;
  V y = t.emit1("matmul", {probs, v});
  if (rank == 3) {
    y = t.emit1("permute", {y}, {Attr::ints("dims", {0, 2, 1, 3})});
    const std::vector<int64_t> ys = t.spec(y).shape;
    y = reshape_to(t, y, {ys[0], ys[1], ys[2] * ys[3]});
  }
  t.set_output(0, y);
  if (t.output_count() > 3 && !t.output_name(3).empty()) t.set_output(3, as_dtype(t, qk_out, dt));
}

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the catalog's
// nll_loss (PyTorch's semantics are ONNX's: mean divides by the summed
// weights of the targets not ignored) over log-probabilities, which
// SoftmaxCrossEntropyLoss computes first (log_softmax over the class dim)
// and may return. Targets of another integer dtype are widened to int64.
void class_loss(Translator& t, const OpRule&) {
  const std::string reduction = t.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") t.invalid("reduction='" + reduction + "'");
  const std::vector<int64_t> in = t.in(0).spec.shape;
  if (in.size() < 2) t.invalid("input has rank " + std::to_string(in.size()) + " (needs [N, C, ...])");
  V logp = t.value(0);
  const bool softmax = t.node().op_type() == "SoftmaxCrossEntropyLoss";
  if (softmax) logp = t.emit1("log_softmax", {logp}, {Attr::i("dim", 1)});
  V target = as_dtype(t, t.value(1), HAL_DTYPE_INT64);
  std::vector<Attr> attrs{Attr::s("reduction", reduction)};
  // Without ignore_index every target counts: an index no target can hold.
  attrs.push_back(Attr::i("ignore_index", t.attr("ignore_index") ? t.attr_int("ignore_index", 0)
                                                                 : std::numeric_limits<int64_t>::min()));
  t.set_output(0, t.emit1("nll_loss", {logp, target, t.has_input(2) ? t.value(2) : V{}}, attrs));
  if (softmax && t.output_count() > 1 && !t.output_name(1).empty()) t.set_output(1, logp);
}

// Indices into AXIS of input 0 (size DIM) with ONNX's negative indices
// wrapped (index + dim where negative): the catalog's gather and scatter
// take [0, dim).
V wrapped_indices(Translator& t, size_t input, int64_t dim) {
  V idx = t.value(input);
  if (dim < 0) t.unimplemented("indices into a dim only known at run time");
  const hal_dtype_e it = t.spec(idx).dtype;
  V negative = t.emit1("lt", {idx, scalar(t, it, 0.0)});
  return t.emit1("where", {negative, t.emit1("add", {idx, scalar(t, it, static_cast<double>(dim))}), idx});
}

void gather_elements(Translator& t, const OpRule&) {
  const std::vector<int64_t> in = t.in(0).spec.shape;
  const int64_t axis = norm_axis(t, t.attr_int("axis", 0), in.size());
  t.set_output(0, t.emit1("gather", {t.value(0), wrapped_indices(t, 1, in[axis])}, {Attr::i("dim", axis)}));
}

void scatter_elements(Translator& t, const OpRule&) {
  const std::vector<int64_t> in = t.in(0).spec.shape;
  const int64_t axis = norm_axis(t, t.attr_int("axis", 0), in.size());
  const std::string reduction = t.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add") t.unimplemented("reduction='" + reduction + "' (none and add)");
  t.set_output(0, t.emit1(reduction == "add" ? "scatter_add" : "scatter", {t.value(0), wrapped_indices(t, 1, in[axis]), t.value(2)},
                          {Attr::i("dim", axis)}));
}

// DepthToSpace / SpaceToDepth: a reshape to six dims, a permute, a reshape.
void depth_space(Translator& t, const OpRule&) {
  const std::vector<int64_t> in = t.in(0).spec.shape;
  if (in.size() != 4) t.invalid("input has rank " + std::to_string(in.size()) + " (needs [N, C, H, W])");
  for (int64_t d : in)
    if (d < 0) t.unimplemented("a dim only known at run time");
  const int64_t bs = t.attr_int("blocksize", 0);
  if (bs <= 0) t.invalid("blocksize " + std::to_string(bs));
  const int64_t n = in[0], c = in[1], h = in[2], w = in[3];
  V x = t.value(0);
  if (t.node().op_type() == "DepthToSpace") {
    if (c % (bs * bs) != 0) t.invalid("channels " + std::to_string(c) + " not divisible by blocksize^2");
    const std::string mode = t.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") t.invalid("mode='" + mode + "'");
    const bool dcr = mode == "DCR";
    x = reshape_to(t, x, dcr ? std::vector<int64_t>{n, bs, bs, c / (bs * bs), h, w} : std::vector<int64_t>{n, c / (bs * bs), bs, bs, h, w});
    x = t.emit1("permute", {x}, {Attr::ints("dims", dcr ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3})});
    t.set_output(0, reshape_to(t, x, {n, c / (bs * bs), h * bs, w * bs}));
    return;
  }
  if (h % bs != 0 || w % bs != 0) t.invalid("spatial dims not divisible by blocksize " + std::to_string(bs));
  const std::string mode = t.attr_string("mode", "DCR");  // an attribute since version 28
  if (mode != "DCR" && mode != "CRD") t.invalid("mode='" + mode + "'");
  x = reshape_to(t, x, {n, c, h / bs, bs, w / bs, bs});
  x = t.emit1("permute", {x}, {Attr::ints("dims", mode == "DCR" ? std::vector<int64_t>{0, 3, 5, 1, 2, 4}
                                                                 : std::vector<int64_t>{0, 1, 3, 5, 2, 4})});
  t.set_output(0, reshape_to(t, x, {n, c * bs * bs, h / bs, w / bs}));
}

// EyeLike: ones on diagonal k of a 2-D tensor of the input's shape (known at load).
void eye_like(Translator& t, const OpRule&) {
  const std::vector<int64_t> in = t.in(0).spec.shape;
  if (in.size() != 2) t.invalid("input has rank " + std::to_string(in.size()) + " (2)");
  if (in[0] < 0 || in[1] < 0) t.unimplemented("a dim only known at run time");
  hal_dtype_e dt = t.in(0).spec.dtype;
  if (t.attr("dtype")) {
    dt = dtype_from_onnx(static_cast<int32_t>(t.attr_int("dtype", 1)));
    if (dt == HAL_DTYPE_INVALID) t.unimplemented("dtype " + std::to_string(t.attr_int("dtype", 1)));
  }
  const int64_t k = t.attr_int("k", 0);
  std::vector<int64_t> v(static_cast<size_t>(in[0] * in[1]), 0);
  for (int64_t i = 0; i < in[0]; ++i)
    if (i + k >= 0 && i + k < in[1]) v[static_cast<size_t>(i * in[1] + i + k)] = 1;
  V ones = t.constant(int_tensor(HAL_DTYPE_INT64, v, in));
  t.set_output(0, as_dtype(t, ones, dt));
}

// CenterCropPad: per axis, the centred window of the target size (crop), or
// the input centred in zeros (pad); odd differences put the extra at the end.
void center_crop_pad(Translator& t, const OpRule&) {
  const std::vector<int64_t> in = t.in(0).spec.shape;
  const std::vector<int64_t> target = t.const_ints(1, "CenterCropPad's shape");
  std::vector<int64_t> axes;
  if (auto a = t.attr_ints("axes")) axes = *a;
  else
    for (size_t i = 0; i < in.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (axes.size() != target.size()) t.invalid("shape has " + std::to_string(target.size()) + " entries for " + std::to_string(axes.size()) + " axes");
  V x = t.value(0);
  std::vector<int64_t> torch_pad(2 * in.size(), 0);  // last dim first, [begin, end] pairs
  bool padded = false;
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = norm_axis(t, axes[k], in.size()), dim = in[static_cast<size_t>(a)], want = target[k];
    if (dim < 0) t.unimplemented("a dim only known at run time");
    if (want < 0) t.invalid("shape entry " + std::to_string(want));
    if (want < dim) {
      const int64_t d = dim - want;
      x = crop(t, x, a, d / 2, d - d / 2);
    } else if (want > dim) {
      const int64_t d = want - dim;
      const size_t slot = 2 * (in.size() - 1 - static_cast<size_t>(a));
      torch_pad[slot] = d / 2;
      torch_pad[slot + 1] = d - d / 2;
      padded = true;
    }
  }
  if (padded) x = t.emit1("pad", {x}, {Attr::ints("pad", torch_pad), Attr::s("mode", "constant"), Attr::scalar("value", 0.0)});
  if (x.id == t.in(0).value.id && t.in(0).value.valid()) {
    t.alias_output(0, t.in(0));
    return;
  }
  t.set_output(0, x);
}

// RotaryEmbedding (23) as its reference computes it: heads split from a 3-D
// input ([B, S, H*D]) or taken from a 4-D one ([B, H, S, D]); the first
// rotary_embedding_dim features rotated by the cos/sin caches (rows picked
// by position_ids when given), halves or interleaved pairs.
void rotary_embedding(Translator& t, const OpRule&) {
  const std::vector<int64_t> in = t.in(0).spec.shape;
  for (int64_t d : in)
    if (d < 0) t.unimplemented("a dim only known at run time");
  V x = t.value(0);
  if (in.size() == 4) {
    x = t.emit1("permute", {x}, {Attr::ints("dims", {0, 2, 1, 3})});
  } else if (in.size() == 3) {
    const int64_t heads = t.attr_int("num_heads", 0);
    if (heads <= 0 || in[2] % heads != 0) t.invalid("3-D input needs num_heads dividing " + std::to_string(in[2]));
    x = reshape_to(t, x, {in[0], in[1], heads, in[2] / heads});
  } else {
    t.invalid("input has rank " + std::to_string(in.size()) + " (3 or 4)");
  }
  const std::vector<int64_t> xs = t.spec(x).shape;  // [B, S, H, D]
  const int64_t d = xs[3];
  int64_t rd = t.attr_int("rotary_embedding_dim", 0);
  if (rd == 0) rd = d;
  if (rd < 0 || rd > d || rd % 2 != 0) t.invalid("rotary_embedding_dim " + std::to_string(rd) + " for head size " + std::to_string(d));
  auto range = [&](int64_t from, int64_t to, int64_t step) {
    std::vector<int64_t> v;
    for (int64_t k = from; k < to; k += step) v.push_back(k);
    return t.constant(int_tensor(HAL_DTYPE_INT64, v, {static_cast<int64_t>(v.size())}));
  };
  auto take = [&](V v, V index) { return t.emit1("index_select", {v, index}, {Attr::i("dim", 3)}); };
  V rot = rd == d ? x : take(x, range(0, rd, 1));
  V cos = t.value(1), sin = t.value(2);
  if (t.has_input(3)) {  // [max_position, rd/2] rows at position_ids [B, S]
    V pos = as_dtype(t, t.value(3), HAL_DTYPE_INT64);
    cos = t.emit1("embedding", {cos, pos});
    sin = t.emit1("embedding", {sin, pos});
  }
  const std::vector<int64_t> cs = t.spec(cos).shape;
  if (cs.size() != 3 || cs[2] != rd / 2) t.invalid("cos/sin caches of shape " + join(cs) + " for rotary dim " + std::to_string(rd));
  cos = reshape_to(t, cos, {cs[0], cs[1], 1, cs[2]});
  sin = reshape_to(t, sin, {cs[0], cs[1], 1, cs[2]});
  const bool interleaved = t.attr_int("interleaved", 0) != 0;
  V x1 = interleaved ? take(rot, range(0, rd, 2)) : take(rot, range(0, rd / 2, 1));
  V x2 = interleaved ? take(rot, range(1, rd, 2)) : take(rot, range(rd / 2, rd, 1));
  V real = t.emit1("sub", {t.emit1("mul", {cos, x1}), t.emit1("mul", {sin, x2})});
  V imag = t.emit1("add", {t.emit1("mul", {sin, x1}), t.emit1("mul", {cos, x2})});
  if (interleaved) {
    const std::vector<int64_t> hs = t.spec(real).shape;
    std::vector<int64_t> pair = hs;
    pair.push_back(1);
    V both = t.emit1("cat", {reshape_to(t, real, pair), reshape_to(t, imag, pair)}, {Attr::i("dim", 4)});
    rot = reshape_to(t, both, {hs[0], hs[1], hs[2], rd});
  } else {
    rot = t.emit1("cat", {real, imag}, {Attr::i("dim", 3)});
  }
  V y = rd == d ? rot : t.emit1("cat", {rot, take(x, range(rd, d, 1))}, {Attr::i("dim", 3)});
  if (in.size() == 4) y = t.emit1("permute", {y}, {Attr::ints("dims", {0, 2, 1, 3})});
  else y = reshape_to(t, y, in);
  t.set_output(0, y);
}

// ---- Resize (11..19) ----
// Separable, as the operator's reference computes it: per resized axis, the
// output coordinates mapped back (coordinate_transformation_mode), each
// output a weighted sum of neighbouring inputs (nearest, linear or cubic
// coefficients; antialias widens the filter; exclude_outside renormalises;
// edges clamp). Nearest becomes an index_select (exact for every dtype);
// linear and cubic a matmul with the axis's [out, in] weight matrix (float
// dtypes), plus extrapolation_value where tf_crop_and_resize leaves the input.
struct ResizeAxis {
  std::vector<double> weights;  // [out, in], row-major
  std::vector<double> outside;  // [out]: 1 where the output is extrapolated
  int64_t out = 0;
};

std::vector<double> resize_coeffs(const std::string& mode, const std::string& nearest_mode, bool antialias, double a,
                                  double ratio, double scale) {
  if (mode == "nearest") {
    if (ratio == std::floor(ratio)) return {0, 1};
    if (nearest_mode == "round_prefer_floor") return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    if (nearest_mode == "round_prefer_ceil") return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (nearest_mode == "floor") return {1, 0};
    return {0, 1};  // ceil
  }
  if (mode == "linear") {
    if (!antialias) return {1 - ratio, ratio};
    scale = std::min(scale, 1.0);
    const int64_t start = static_cast<int64_t>(std::floor(-1 / scale) + 1), footprint = 2 - 2 * start;
    std::vector<double> c;
    double sum = 0;
    for (int64_t k = start; k < start + footprint; ++k) {
      c.push_back(std::clamp(1 - std::abs((static_cast<double>(k) - ratio) * scale), 0.0, 1.0));
      sum += c.back();
    }
    for (double& v : c) v /= sum;
    return c;
  }
  auto cubic = [a](double x) {
    x = std::abs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
  };
  if (!antialias) return {cubic(ratio + 1), cubic(ratio), cubic(1 - ratio), cubic(2 - ratio)};
  scale = std::min(scale, 1.0);
  const int64_t i_start = static_cast<int64_t>(std::floor(-2 / scale) + 1), i_end = 2 - i_start;
  std::vector<double> c;
  double sum = 0;
  for (int64_t k = i_start; k < i_end; ++k) {
    c.push_back(cubic(scale * (static_cast<double>(k) - ratio)));
    sum += c.back();
  }
  for (double& v : c) v /= sum;
  return c;
}

ResizeAxis resize_axis(Translator& t, int64_t in, int64_t out, double scale, double roi_lo, double roi_hi) {
  const std::string mode = t.attr_string("mode", "nearest");
  const std::string ctm = t.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode = t.attr_string("nearest_mode", "round_prefer_floor");
  const bool antialias = t.attr_int("antialias", 0) != 0 && mode != "nearest";
  const bool exclude = t.attr_int("exclude_outside", 0) != 0;
  const double a = t.attr_float("cubic_coeff_a", -0.75f);
  ResizeAxis r;
  r.out = out;
  r.weights.assign(static_cast<size_t>(out * in), 0.0);
  r.outside.assign(static_cast<size_t>(out), 0.0);
  const double out_width = scale * static_cast<double>(in);
  for (int64_t y = 0; y < out; ++y) {
    const double yd = static_cast<double>(y);
    double x = 0;
    if (ctm == "align_corners") x = out_width == 1 ? 0 : yd * static_cast<double>(in - 1) / (out_width - 1);
    else if (ctm == "asymmetric") x = yd / scale;
    else if (ctm == "tf_crop_and_resize") {
      x = out_width == 1 ? (roi_hi - roi_lo) * static_cast<double>(in - 1) / 2
                         : yd * (roi_hi - roi_lo) * static_cast<double>(in - 1) / (out_width - 1);
      x += roi_lo * static_cast<double>(in - 1);
      if (x < 0 || x > static_cast<double>(in - 1)) {
        r.outside[static_cast<size_t>(y)] = 1;
        continue;
      }
    } else if (ctm == "pytorch_half_pixel") x = out_width == 1 ? -0.5 : (yd + 0.5) / scale - 0.5;
    else if (ctm == "half_pixel") x = (yd + 0.5) / scale - 0.5;
    else if (ctm == "half_pixel_symmetric") {
      const double adjustment = static_cast<double>(out) / out_width, center = static_cast<double>(in) / 2;
      x = center * (1 - adjustment) + (yd + 0.5) / scale - 0.5;
    } else {
      t.invalid("coordinate_transformation_mode='" + ctm + "'");
    }
    const double ratio = x == std::floor(x) ? 1.0 : x - std::floor(x);
    std::vector<double> c = resize_coeffs(mode, nearest_mode, antialias, a, ratio, scale);
    const int64_t n = static_cast<int64_t>(c.size()), pad = (n + 1) / 2;
    const double xp = x + static_cast<double>(pad);
    const int64_t p = static_cast<int64_t>(std::floor(xp));
    const double frac = xp - static_cast<double>(p);
    const int64_t offset = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1) : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
    const int64_t start = p + offset - pad;
    if (exclude) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (start + k < 0 || start + k >= in) c[static_cast<size_t>(k)] = 0;
        sum += c[static_cast<size_t>(k)];
      }
      if (sum != 0)
        for (double& v : c) v /= sum;
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t src = std::clamp<int64_t>(start + k, 0, in - 1);
      r.weights[static_cast<size_t>(y * in + src)] += c[static_cast<size_t>(k)];
    }
  }
  return r;
}

void resize(Translator& t, const OpRule&) {
  const ValueSpec spec = t.in(0).spec;
  const std::vector<int64_t>& in = spec.shape;
  const size_t rank = in.size();
  for (int64_t d : in)
    if (d < 0) t.unimplemented("a dim only known at run time");
  const std::string mode = t.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") t.invalid("mode='" + mode + "'");
  std::vector<int64_t> axes;
  if (auto a = t.attr_ints("axes")) {
    for (int64_t x : *a) axes.push_back(norm_axis(t, x, rank));
  } else {
    for (size_t k = 0; k < rank; ++k) axes.push_back(static_cast<int64_t>(k));
  }
  auto floats_of = [&](size_t i, const char* what) {
    HostTensor known = t.known(i, what);
    const HostTensor* h = &known;
    auto v = float_values(*h);
    if (!v) t.invalid(std::string(what) + " must be float32 or float64");
    return *v;
  };
  std::vector<double> roi;
  if (t.has_input(1) && t.attr_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize")
    roi = floats_of(1, "roi");
  std::vector<double> scales(rank, 1.0);
  std::vector<int64_t> out = in;
  const bool has_sizes = t.has_input(3) && !t.in(3).spec.shape.empty() && t.in(3).spec.shape[0] > 0;
  if (has_sizes) {
    std::vector<int64_t> sizes = t.const_ints(3, "Resize's sizes");
    if (sizes.size() != axes.size()) t.invalid("sizes has " + std::to_string(sizes.size()) + " entries for " + std::to_string(axes.size()) + " axes");
    for (size_t k = 0; k < axes.size(); ++k) {
      out[static_cast<size_t>(axes[k])] = sizes[k];
      scales[static_cast<size_t>(axes[k])] = static_cast<double>(sizes[k]) / static_cast<double>(in[static_cast<size_t>(axes[k])]);
    }
    const std::string policy = t.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") {
      if (policy != "not_larger" && policy != "not_smaller") t.invalid("keep_aspect_ratio_policy='" + policy + "'");
      double chosen = scales[static_cast<size_t>(axes[0])];
      for (int64_t ax : axes)
        chosen = policy == "not_larger" ? std::min(chosen, scales[static_cast<size_t>(ax)]) : std::max(chosen, scales[static_cast<size_t>(ax)]);
      for (int64_t ax : axes) {
        scales[static_cast<size_t>(ax)] = chosen;
        out[static_cast<size_t>(ax)] = static_cast<int64_t>(chosen * static_cast<double>(in[static_cast<size_t>(ax)]) + 0.5);
      }
    }
  } else if (t.has_input(2)) {
    std::vector<double> sc = floats_of(2, "scales");
    if (sc.size() != axes.size()) t.invalid("scales has " + std::to_string(sc.size()) + " entries for " + std::to_string(axes.size()) + " axes");
    for (size_t k = 0; k < axes.size(); ++k) {
      if (sc[k] <= 0) t.invalid("scale " + std::to_string(sc[k]) + " (must be > 0)");
      scales[static_cast<size_t>(axes[k])] = sc[k];
      out[static_cast<size_t>(axes[k])] = static_cast<int64_t>(sc[k] * static_cast<double>(in[static_cast<size_t>(axes[k])]));
    }
  } else {
    t.invalid("needs scales or sizes");
  }
  if (!roi.empty() && roi.size() != 2 * axes.size() && roi.size() != 2 * rank)
    t.invalid("roi has " + std::to_string(roi.size()) + " entries");
  V x = t.value(0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t ax = static_cast<size_t>(axes[k]);
    double lo = 0, hi = 1;
    if (!roi.empty()) {
      const size_t n = roi.size() / 2, j = roi.size() == 2 * rank ? ax : k;
      lo = roi[j];
      hi = roi[j + n];
    }
    if (std::abs(scales[ax] - 1.0) < 1e-9 && out[ax] == in[ax] && roi.empty()) continue;
    if (out[ax] == 0) t.unimplemented("an empty output");
    ResizeAxis r = resize_axis(t, in[ax], out[ax], scales[ax], lo, hi);
    bool any_outside = false;
    for (double o : r.outside) any_outside = any_outside || o != 0;
    if (mode == "nearest" && !any_outside) {
      std::vector<int64_t> src(static_cast<size_t>(r.out));
      for (int64_t y = 0; y < r.out; ++y)
        for (int64_t i = 0; i < in[ax]; ++i)
          if (r.weights[static_cast<size_t>(y * in[ax] + i)] != 0) src[static_cast<size_t>(y)] = i;
      V index = t.constant(int_tensor(HAL_DTYPE_INT64, src, {r.out}));
      x = t.emit1("index_select", {x, index}, {Attr::i("dim", static_cast<int64_t>(ax))});
      continue;
    }
    if (!is_float(spec.dtype)) t.unimplemented(mode + " resize of " + std::string(common::dtype_name(spec.dtype)) + " (floating dtypes)");
    std::vector<float> wt(static_cast<size_t>(in[ax] * r.out));  // [in, out]: x · W along the axis
    for (int64_t y = 0; y < r.out; ++y)
      for (int64_t i = 0; i < in[ax]; ++i) wt[static_cast<size_t>(i * r.out + y)] = static_cast<float>(r.weights[static_cast<size_t>(y * in[ax] + i)]);
    std::vector<int64_t> perm;
    for (size_t d = 0; d < rank; ++d)
      if (d != ax) perm.push_back(static_cast<int64_t>(d));
    perm.push_back(static_cast<int64_t>(ax));
    std::vector<int64_t> back(rank);
    for (size_t d = 0; d < rank; ++d) back[static_cast<size_t>(perm[d])] = static_cast<int64_t>(d);
    V moved = ax + 1 == rank ? x : t.emit1("permute", {x}, {Attr::ints("dims", perm)});
    V y = t.emit1("matmul", {moved, as_dtype(t, float_constant(t, {in[ax], r.out}, wt), spec.dtype)});
    if (any_outside) {
      std::vector<float> extra(static_cast<size_t>(r.out));
      const double value = t.attr_float("extrapolation_value", 0.0f);
      for (int64_t o = 0; o < r.out; ++o) extra[static_cast<size_t>(o)] = static_cast<float>(r.outside[static_cast<size_t>(o)] * value);
      y = t.emit1("add", {y, as_dtype(t, float_constant(t, {r.out}, extra), spec.dtype)});
    }
    x = ax + 1 == rank ? y : t.emit1("permute", {y}, {Attr::ints("dims", back)});
  }
  if (x.id == t.in(0).value.id && t.in(0).value.valid()) {
    t.alias_output(0, t.in(0));
    return;
  }
  t.set_output(0, x);
}

// CausalConvWithState (27): a depthwise 1-D convolution over the past state
// (zeros when absent) followed by the input, no padding; present_state is
// the last k-1 positions of that sequence; optional SiLU.
void causal_conv_with_state(Translator& t, const OpRule&) {
  const std::vector<int64_t> in = t.in(0).spec.shape, w = t.in(1).spec.shape;
  if (in.size() != 3 || w.size() != 3) t.invalid("input and weight must be rank 3");
  for (int64_t d : in)
    if (d < 0) t.unimplemented("a dim only known at run time");
  const int64_t channels = in[1], k = w[2];
  if (w[0] != channels || w[1] != 1) t.invalid("weight " + join(w) + " for " + std::to_string(channels) + " channels (needs [C, 1, k])");
  const std::string activation = t.attr_string("activation", "none");
  if (activation != "none" && activation != "silu" && activation != "swish") t.invalid("activation='" + activation + "'");
  V past;
  if (t.has_input(3)) {
    past = t.value(3);
  } else {
    past = t.emit_as("fill", {}, {Attr::scalar("value", 0)}, {t.in(0).spec.dtype, {in[0], channels, k - 1}});
  }
  V seq = k > 1 ? t.emit1("cat", {past, t.value(0)}, {Attr::i("dim", 2)}) : t.value(0);
  V y = t.emit1("conv1d", {seq, t.value(1), t.has_input(2) ? t.value(2) : V{}},
                {Attr::ints("stride", {1}), Attr::ints("padding", {0}), Attr::ints("dilation", {1}), Attr::i("groups", channels)});
  if (activation != "none") y = t.emit1("silu", {y});
  t.set_output(0, y);
  if (t.output_count() > 1 && !t.output_name(1).empty()) {
    const int64_t total = t.spec(seq).shape[2];
    t.set_output(1, k > 1 ? crop(t, seq, 2, total - (k - 1), 0)
                          : t.emit_as("fill", {}, {Attr::scalar("value", 0)}, {t.in(0).spec.dtype, {in[0], channels, 0}}));
  }
}

// LinearAttention (27): the recurrence the operator defines, step by step
// over the (static) sequence in float32: per token the state decays
// (gated), takes the delta correction (delta), adds k v^T, and the query
// reads it (grouped heads share a state).
void linear_attention(Translator& t, const OpRule&) {
  const std::string rule = t.attr_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta") t.invalid("update_rule='" + rule + "'");
  const bool gating = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (gating != t.has_input(4)) t.invalid("update_rule '" + rule + (gating ? "' needs" : "' forbids") + " the decay input");
  if (delta != t.has_input(5)) t.invalid("update_rule '" + rule + (delta ? "' needs" : "' forbids") + " the beta input");
  const int64_t hq = t.attr_int("q_num_heads", 0), hkv = t.attr_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0) t.invalid("q_num_heads must be a positive multiple of kv_num_heads");
  const std::vector<int64_t> qs = t.in(0).spec.shape, vs = t.in(2).spec.shape;
  if (qs.size() != 3 || t.in(1).spec.shape.size() != 3 || vs.size() != 3) t.invalid("query, key and value must be rank 3");
  for (int64_t d : qs)
    if (d < 0) t.unimplemented("a dim only known at run time");
  const int64_t b = qs[0], steps = qs[1], dk = qs[2] / hq, dv = vs[2] / hkv;
  const hal_dtype_e out_dt = t.in(0).spec.dtype, f32 = HAL_DTYPE_FLOAT32;
  auto heads = [&](size_t input, int64_t n) {  // [B, T, n*d] -> [B, n, T, d], float32
    return split_heads(t, as_dtype(t, t.value(input), f32), n, t.input_name(input));
  };
  V q = heads(0, hq), k = heads(1, hkv), v = heads(2, hkv);
  V decay, beta;
  if (gating) {
    const int64_t last = t.in(4).spec.shape.at(2);
    if (last != hkv && last != hkv * dk) t.invalid("decay's last dim must be kv_num_heads or kv_num_heads * d_k");
    decay = heads(4, hkv);  // [B, Hkv, T, 1 or d_k]
  }
  if (delta) {
    const int64_t last = t.in(5).spec.shape.at(2);
    if (last != hkv && last != 1) t.invalid("beta's last dim must be kv_num_heads or 1");
    beta = heads(5, last);  // [B, last, T, 1]
  }
  V state = t.has_input(3) ? as_dtype(t, t.value(3), f32)
                           : t.emit_as("fill", {}, {Attr::scalar("value", 0)}, {f32, {b, hkv, dk, dv}});
  const float attr_scale = t.attr_float("scale", 0.0f);
  V scale = scalar(t, f32, attr_scale == 0.0f ? 1.0 / std::sqrt(static_cast<double>(dk)) : attr_scale);
  auto step_of = [&](V x, int64_t i) {
    return t.emit1("index_select", {x, t.constant(int_tensor(HAL_DTYPE_INT64, {i}, {1}))}, {Attr::i("dim", 2)});
  };
  auto transpose_last = [&](V x) { return t.emit1("permute", {x}, {Attr::ints("dims", {0, 1, 3, 2})}); };
  std::vector<V> outs;
  for (int64_t i = 0; i < steps; ++i) {
    V qt = step_of(q, i), kt = step_of(k, i), vt = step_of(v, i);  // [B, H, 1, d]
    if (gating) state = t.emit1("mul", {state, transpose_last(t.emit1("exp", {step_of(decay, i)}))});
    if (delta) {
      V retrieved = t.emit1("matmul", {kt, state});  // [B, Hkv, 1, d_v]
      vt = t.emit1("mul", {step_of(beta, i), t.emit1("sub", {vt, retrieved})});
    }
    state = t.emit1("add", {state, t.emit1("matmul", {transpose_last(kt), vt})});
    V read = state;
    if (hq != hkv) read = repeat_heads(t, read, hq / hkv);  // each KV state read by its group of query heads
    outs.push_back(t.emit1("mul", {t.emit1("matmul", {qt, read}), scale}));
  }
  V y = outs.size() == 1 ? outs[0] : t.emit1("cat", outs, {Attr::i("dim", 2)});  // [B, Hq, T, d_v]
  y = t.emit1("permute", {y}, {Attr::ints("dims", {0, 2, 1, 3})});
  t.set_output(0, as_dtype(t, reshape_to(t, y, {b, steps, hq * dv}), out_dt));
  if (t.output_count() > 1 && !t.output_name(1).empty())
    t.set_output(1, as_dtype(t, state, t.has_input(3) ? t.in(3).spec.dtype : out_dt));
}

// ScatterND: the catalog's index_put, whose indices are the K index tensors
// stacked in front ([K, *B]; ONNX has them last, [*B, K]).
void scatter_nd(Translator& t, const OpRule&) {
  const std::string reduction = t.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add") t.unimplemented("reduction='" + reduction + "' (none and add)");
  const std::vector<int64_t> is = t.in(1).spec.shape;
  if (is.empty() || is.back() < 1) t.invalid("indices of shape " + join(is) + " (the last dim indexes the data)");
  std::vector<int64_t> perm{static_cast<int64_t>(is.size()) - 1};
  for (size_t d = 0; d + 1 < is.size(); ++d) perm.push_back(static_cast<int64_t>(d));
  V idx = as_dtype(t, t.value(1), HAL_DTYPE_INT64);
  if (is.size() > 1) idx = t.emit1("permute", {idx}, {Attr::ints("dims", perm)});
  t.set_output(0, t.emit1("index_put", {t.value(0), idx, t.value(2)}, {Attr::b("accumulate", reduction == "add")}));
}

// GatherND (batch_dims 0): each index row [*B, K] addresses a slice of the
// data's first K dims; rows become linear indices into those dims merged,
// negative ones wrapped.
void gather_nd(Translator& t, const OpRule&) {
  if (t.attr_int("batch_dims", 0) != 0) t.unimplemented("batch_dims != 0");
  const std::vector<int64_t> ds = t.in(0).spec.shape, is = t.in(1).spec.shape;
  for (int64_t d : ds)
    if (d < 0) t.unimplemented("a data dim only known at run time");
  if (!is.empty() && is.back() < 0) t.unimplemented("the indices' last dim only known at run time");
  if (is.empty() || is.back() < 1 || is.back() > static_cast<int64_t>(ds.size())) t.invalid("indices of shape " + join(is));
  const size_t k = static_cast<size_t>(is.back());
  std::vector<int64_t> batch(is.begin(), is.end() - 1);
  // The lookups: a number, or one run-time dim (NonZero's count) times nothing else.
  const SymProduct lookups = product(batch);
  if (!lookups.symbols.empty() && (lookups.symbols.size() > 1 || lookups.factor != 1))
    t.unimplemented("indices dims " + join(is) + " whose product is not one dim only known at run time");
  const int64_t n = lookups.symbols.empty() ? lookups.factor : lookups.symbols[0];
  V idx = as_dtype(t, t.value(1), HAL_DTYPE_INT64);
  V linear;
  int64_t stride = 1, merged = 1;
  for (size_t j = k; j-- > 0;) {
    V col = t.emit1("index_select", {idx, t.constant(int_tensor(HAL_DTYPE_INT64, {static_cast<int64_t>(j)}, {1}))},
                    {Attr::i("dim", static_cast<int64_t>(is.size()) - 1)});
    V negative = t.emit1("lt", {col, scalar(t, HAL_DTYPE_INT64, 0)});
    col = t.emit1("where", {negative, t.emit1("add", {col, scalar(t, HAL_DTYPE_INT64, static_cast<double>(ds[j]))}), col});
    if (stride != 1) col = t.emit1("mul", {col, scalar(t, HAL_DTYPE_INT64, static_cast<double>(stride))});
    linear = linear.valid() ? t.emit1("add", {linear, col}) : col;
    stride *= ds[j];
    merged *= ds[j];
  }
  std::vector<int64_t> rest(ds.begin() + static_cast<long>(k), ds.end());
  std::vector<int64_t> flat_shape{merged};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  V flat = reshape_to(t, t.value(0), flat_shape);
  V sel = t.emit1("index_select", {flat, reshape_to(t, linear, {n})}, {Attr::i("dim", 0)});
  std::vector<int64_t> out = batch;
  out.insert(out.end(), rest.begin(), rest.end());
  t.set_output(0, reshape_to(t, sel, out));
}

// BitwiseNot: x XOR all-ones.
void bitwise_not(Translator& t, const OpRule&) {
  const hal_dtype_e dt = t.in(0).spec.dtype;
  if (is_float(dt) || dt == HAL_DTYPE_BOOL) t.invalid("BitwiseNot of " + std::string(common::dtype_name(dt)));
  t.set_output(0, t.emit1("bitwise_xor", {t.value(0), scalar(t, dt, -1)}));
}

void reduce(Translator& t, const OpRule& r) {
  const std::string& type = t.node().op_type();
  // Opset at which axes moved from an attribute to an input.
  int since = type == "ReduceSum" ? 13 : 18;
  auto axes = axes_of(t, 1, since);
  bool keep = t.attr_int("keepdims", 1) != 0;
  if ((!axes || axes->empty()) && t.attr_int("noop_with_empty_axes", 0)) {
    t.alias_output(0, t.in(0));
    return;
  }
  std::vector<int64_t> dims = axes ? *axes : std::vector<int64_t>{};
  if (dims.empty())
    for (size_t i = 0; i < t.in(0).spec.shape.size(); ++i) dims.push_back(static_cast<int64_t>(i));
  V x = t.value(0);
  std::string op = r.catalog;
  if (type == "ReduceSumSquare") {
    x = t.emit1("mul", {x, x});
    op = "sum";
  }
  std::vector<Attr> attrs{Attr::ints("dim", dims), Attr::b("keepdim", keep)};
  if (type == "ReduceL2") attrs.push_back(Attr::f("p", 2.0));
  if (type == "ReduceL1") {
    x = t.emit1("abs", {x});
    op = "sum";
  }
  if (type == "ReduceLogSum") {
    t.set_output(0, t.emit1("log", {t.emit1("sum", {x}, attrs)}));
    return;
  }
  t.set_output(0, t.emit1(op, {x}, attrs));
}

// select_last_index: the first index in the flipped input, mapped back.
void arg_reduce(Translator& t, const OpRule&) {
  const char* op = t.node().op_type() == "ArgMax" ? "argmax" : "argmin";
  const std::vector<int64_t> in = t.in(0).spec.shape;
  const int64_t axis = norm_axis(t, t.attr_int("axis", 0), std::max<size_t>(in.size(), 1));
  const bool keep = t.attr_int("keepdims", 1) != 0;
  if (t.attr_int("select_last_index", 0) == 0 || in.empty()) {
    t.set_output(0, t.emit1(op, {t.value(0)}, {Attr::ints("dim", {axis}), Attr::b("keepdim", keep)}));
    return;
  }
  if (in[axis] < 0) t.unimplemented("select_last_index over a dim only known at run time");
  V flipped = t.emit1("flip", {t.value(0)}, {Attr::ints("dims", {axis})});
  V index = t.emit1(op, {flipped}, {Attr::ints("dim", {axis}), Attr::b("keepdim", keep)});
  t.set_output(0, t.emit1("sub", {scalar(t, HAL_DTYPE_INT64, static_cast<double>(in[axis] - 1)), index}));
}

// CumSum and CumProd: reverse flips before and after; exclusive leaves the
// element itself out (CumSum: the running sum minus it; CumProd: a one
// shifted in front, as a product cannot be divided back out: zeros); the
// result keeps the input's dtype (the catalog widens integers to int64, as
// torch does).
void cumulative(Translator& t, const OpRule&) {
  const std::string& type = t.node().op_type();
  const bool prod = type == "CumProd";
  const ValueSpec in = t.in(0).spec;
  const int64_t axis = norm_axis(t, t.const_ints(1, type + "'s axis").at(0), std::max<size_t>(in.shape.size(), 1));
  const bool reverse = t.attr_int("reverse", 0) != 0, exclusive = t.attr_int("exclusive", 0) != 0;
  V x = t.value(0);
  if (reverse) x = t.emit1("flip", {x}, {Attr::ints("dims", {axis})});
  V scanned = x;
  if (prod && exclusive) {
    if (in.shape[static_cast<size_t>(axis)] < 0) t.unimplemented("exclusive over a dim only known at run time");
    std::vector<int64_t> torch_pad(2 * (in.shape.size() - static_cast<size_t>(axis)), 0);
    torch_pad[torch_pad.size() - 2] = 1;  // one in front along AXIS
    scanned = t.emit1("pad", {x}, {Attr::ints("pad", torch_pad), Attr::s("mode", "constant"), Attr::scalar("value", 1.0)});
    scanned = crop(t, scanned, axis, 0, 1);
  }
  V y = as_dtype(t, t.emit1(prod ? "cumprod" : "cumsum", {scanned}, {Attr::i("dim", axis)}), in.dtype);
  if (!prod && exclusive) y = t.emit1("sub", {y, x});
  if (reverse) y = t.emit1("flip", {y}, {Attr::ints("dims", {axis})});
  t.set_output(0, y);
}

// A stable sort, then the first K: ONNX wants the lower index first among
// equal values, which the catalog's topk leaves unspecified.
void topk(Translator& t, const OpRule&) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  const int64_t axis = norm_axis(t, t.attr_int("axis", -1), shape.size());
  const std::vector<Attr> order{Attr::i("dim", axis), Attr::b("descending", t.attr_int("largest", 1) != 0), Attr::b("stable", true)};
  if (t.opset() >= 10 && t.symbolic_rows() && t.computed_at_run_time(1)) {
    // K computed while the model runs: the first K of the sort are the
    // first K rows of the axis's indices, a count read back (a symbol of the
    // next stage for K >= 2, so a new K re-plans without translating).
    std::vector<V> sorted = t.emit("sort", {t.value(0)}, order, 2);
    V first = t.runtime_rows(symbolic_arange(t, HAL_DTYPE_INT64, shape[axis]), t.value(1), "TopK's K");
    for (V& v : sorted) v = t.emit1("index_select", {v, first}, {Attr::i("dim", axis)});
    t.set_output(0, sorted[0]);
    t.set_output(1, sorted[1]);
    return;
  }
  // K: an attribute in version 1, an input since 10.
  int64_t k = t.opset() < 10 ? t.attr_int("k", -1) : t.const_ints(1, "TopK's K").at(0);
  if (k < 0) t.invalid("K is " + std::to_string(k) + " (must be >= 0)");
  if (shape[axis] >= 0 && k > shape[axis])
    t.invalid("K is " + std::to_string(k) + " but axis " + std::to_string(axis) + " has " + std::to_string(shape[axis]) +
              " elements");
  std::vector<V> sorted = t.emit("sort", {t.value(0)}, order, 2);
  if (k != shape[axis]) {
    std::vector<int64_t> first(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) first[static_cast<size_t>(i)] = i;
    V index = t.constant(int_tensor(HAL_DTYPE_INT64, first, {k}));
    for (V& v : sorted) v = t.emit1("index_select", {v, index}, {Attr::i("dim", axis)});
  }
  t.set_output(0, sorted[0]);
  t.set_output(1, sorted[1]);
}

void clip(Translator& t, const OpRule&) {
  if (t.opset() < 11) {  // version 6: the bounds are attributes (default: the float range)
    const hal_dtype_e dt = t.in(0).spec.dtype;
    const auto* lo = t.attr("min");
    const auto* hi = t.attr("max");
    t.set_output(0, t.emit1("clamp", {t.value(0), lo ? scalar(t, dt, lo->f()) : V{}, hi ? scalar(t, dt, hi->f()) : V{}}));
    return;
  }
  t.set_output(0, t.emit1("clamp", {t.value(0), t.has_input(1) ? t.value(1) : V{}, t.has_input(2) ? t.value(2) : V{}}));
}

void tile(Translator& t, const OpRule&) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  const bool fixed = std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
  if (fixed && runtime_sizes(t, 1) && t.in(1).spec.shape[0] == static_cast<int64_t>(shape.size())) {
    // Repeats computed while the model runs: the output's dims (repeats
    // times the input's) are read back as sizes, symbols of the next stage,
    // and each axis gathers index i % dim, so a new repeat re-plans.
    const int64_t rank = static_cast<int64_t>(shape.size());
    V sizes = t.emit1("mul", {t.value(1), t.constant(int_tensor(t.in(1).spec.dtype, shape, {rank}))});
    V carrier;
    const std::vector<int64_t> out = t.runtime_dims(sizes, "Tile's output shape (repeats '" + t.input_name(1) + "' times the input's)",
                                                    "repeats '" + t.input_name(1) + "' has a negative element", &carrier);
    V v = t.value(0);
    for (size_t d = 0; d < shape.size(); ++d) {
      if (out[d] == shape[d]) continue;
      V index = t.emit1("remainder", {sized_arange(t, carrier, out, d, HAL_DTYPE_INT64),
                                      scalar(t, HAL_DTYPE_INT64, static_cast<double>(shape[d]))});
      v = t.emit1("index_select", {v, index}, {Attr::i("dim", static_cast<int64_t>(d))});
    }
    t.set_output(0, v);
    return;
  }
  t.set_output(0, t.emit1("repeat", {t.value(0)}, {Attr::ints("repeats", t.const_ints(1, "Tile's repeats"))}));
}

// Pad (version 11 on) with pads the model computes, for an input whose
// dims are known at load and at least 1 on the padded axes: the output's
// dims (the input's plus the pads) are read back as sizes, symbols of the
// next stage once they vary (Translator::runtime_dims), and each padded
// axis gathers from the input at i - begin, taken as ONNX's MODE does
// outside the input (the edge for "replicate", mirrored for "reflect",
// wrapped for "wrap"; for "constant" the edge, then the value where any
// axis was outside). false: not such a Pad.
bool runtime_pads(Translator& t, const std::string& mode) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  if (!runtime_sizes(t, 1) || (t.has_input(3) && !t.ints(3) && !t.host(3))) return false;
  const size_t rank = shape.size();
  std::vector<int64_t> axes;
  if (t.has_input(3)) axes = t.const_ints(3, "Pad's axes");
  else
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  for (int64_t& a : axes) {
    a = norm_axis(t, a, rank);
    if (shape[a] < 1) return false;
  }
  const int64_t n = static_cast<int64_t>(axes.size());
  if (t.in(1).spec.shape[0] != 2 * n) return false;  // the general path names the error
  double value = 0.0;
  if (t.has_input(2)) {
    auto v = float_values(t.known(2, "Pad's constant_value"));
    if (!v || v->size() != 1) t.invalid("constant_value must be one float or integer");
    value = (*v)[0];
  }
  auto part = [&](int64_t from) {
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = from + i;
    return t.emit1("index_select", {t.value(1), t.constant(int_tensor(HAL_DTYPE_INT64, idx, {n}))}, {Attr::i("dim", 0)});
  };
  const V begin = part(0);
  std::vector<int64_t> dims;
  for (int64_t a : axes) dims.push_back(shape[a]);
  V sizes = t.emit1("add", {t.emit1("add", {t.constant(int_tensor(HAL_DTYPE_INT64, dims, {n})), begin}), part(n)});
  V carrier;
  const std::string name = "pads '" + t.input_name(1) + "'";
  const std::vector<int64_t> out = t.runtime_dims(sizes, "Pad's output shape (the input's plus " + name + ")",
                                                  name + " remove more than the input has", &carrier);
  const hal_dtype_e dt = t.in(0).spec.dtype;
  V v = t.value(0);
  V outside;  // "constant": where the output lies outside the input, broadcast over the padded axes
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = axes[k], last = shape[a] - 1;
    V b = t.emit1("index_select", {begin, t.constant(int_tensor(HAL_DTYPE_INT64, {static_cast<int64_t>(k)}, {1}))}, {Attr::i("dim", 0)});
    V idx = t.emit1("sub", {sized_arange(t, carrier, out, k, HAL_DTYPE_INT64), b});
    V inside = t.emit1("clamp", {idx, scalar(t, HAL_DTYPE_INT64, 0), scalar(t, HAL_DTYPE_INT64, static_cast<double>(last))});
    if (mode == "replicate") {
      v = t.emit1("index_select", {v, inside}, {Attr::i("dim", a)});
    } else if (mode == "wrap") {
      v = t.emit1("index_select", {v, t.emit1("remainder", {idx, scalar(t, HAL_DTYPE_INT64, static_cast<double>(shape[a]))})},
                  {Attr::i("dim", a)});
    } else if (mode == "reflect") {
      V m = scalar(t, HAL_DTYPE_INT64, static_cast<double>(last));
      V mirrored = t.emit1("sub", {m, t.emit1("abs", {t.emit1("sub", {m, t.emit1("abs", {idx})})})});
      v = t.emit1("index_select", {v, mirrored}, {Attr::i("dim", a)});
    } else {
      // The edge's index, and where the index was clamped (outside), as a
      // mask along this axis; the value goes there at the end.
      v = t.emit1("index_select", {v, inside}, {Attr::i("dim", a)});
      std::vector<int64_t> along(shape.size(), 1);
      along[static_cast<size_t>(a)] = out[k];
      V here = reshape_to(t, t.emit1("ne", {idx, inside}), along);
      outside = outside.valid() ? t.emit1("logical_or", {outside, here}) : here;
    }
  }
  if (outside.valid()) v = t.emit1("where", {outside, scalar(t, dt, value), v});
  t.set_output(0, v);
  return true;
}

void pad(Translator& t, const OpRule&) {
  std::string mode = t.attr_string("mode", "constant");
  if (mode == "edge") mode = "replicate";
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "wrap") t.unimplemented("mode='" + mode + "'");
  size_t rank = t.in(0).spec.shape.size();
  // Version 2: pads and value are attributes; inputs since 11.
  const bool attrs = t.opset() < 11;
  std::vector<int64_t> pads;
  if (attrs) {
    auto p = t.attr_ints("pads");
    if (!p) t.invalid("needs the attribute 'pads'");
    pads = *p;
  } else if (runtime_pads(t, mode)) {
    return;
  } else {
    pads = t.const_ints(1, "Pad's pads");
  }
  std::vector<int64_t> axes;
  if (!attrs && t.has_input(3)) axes = t.const_ints(3, "Pad's axes");
  else
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  if (pads.size() != 2 * axes.size()) t.invalid("pads has " + std::to_string(pads.size()) + " entries for " + std::to_string(axes.size()) + " axes");
  // ONNX: [b_axis0, b_axis1, ..., e_axis0, ...]; catalog (torch): last dim first, [b, e] pairs.
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = norm_axis(t, axes[i], rank);
    begin[a] = pads[i];
    end[a] = pads[i + axes.size()];
  }
  std::vector<int64_t> torch_pad;
  size_t first = 0;
  while (first < rank && begin[first] == 0 && end[first] == 0) ++first;
  for (size_t d = rank; d-- > first;) {
    torch_pad.push_back(begin[d]);
    torch_pad.push_back(end[d]);
  }
  double value = attrs ? t.attr_float("value", 0.0f) : 0.0;
  if (!attrs) {
    if (t.has_input(2)) {
      auto v = float_values(t.known(2, "Pad's constant_value"));
      if (!v || v->size() != 1) t.invalid("constant_value must be one float or integer");
      value = (*v)[0];
    }
  }
  if (torch_pad.empty()) {
    t.alias_output(0, t.in(0));
    return;
  }
  if (mode == "wrap") {  // the catalog's pad has no wrap: each padded axis gathers index (i - begin) mod dim
    const std::vector<int64_t>& shape = t.in(0).spec.shape;
    V v = t.value(0);
    for (size_t d = 0; d < rank; ++d) {
      if (begin[d] == 0 && end[d] == 0) continue;
      if (shape[d] < 1) t.unimplemented("wrap-padding dim " + std::to_string(d) + " of size " + std::to_string(shape[d]) + " (known at load, >= 1)");
      const int64_t out = shape[d] + begin[d] + end[d];
      if (out < 0) t.invalid("pads remove more than dim " + std::to_string(d) + " has");
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < out; ++i) idx.push_back((((i - begin[d]) % shape[d]) + shape[d]) % shape[d]);
      v = t.emit1("index_select", {v, t.constant(int_tensor(HAL_DTYPE_INT64, idx, {out}))}, {Attr::i("dim", static_cast<int64_t>(d))});
    }
    t.set_output(0, v);
    return;
  }
  t.set_output(0, t.emit1("pad", {t.value(0)}, {Attr::ints("pad", torch_pad), Attr::s("mode", mode), Attr::scalar("value", value)}));
}

// ---- composites (no single catalog op) ----

void leaky_relu(Translator& t, const OpRule&) {
  V x = t.value(0);
  hal_dtype_e dt = t.spec(x).dtype;
  V pos = t.emit1("gt", {x, scalar(t, dt, 0)});
  V neg = t.emit1("mul", {x, scalar(t, dt, t.attr_float("alpha", 0.01f))});
  t.set_output(0, t.emit1("where", {pos, x, neg}));
}

void elu(Translator& t, const OpRule&) {
  V x = t.value(0);
  hal_dtype_e dt = t.spec(x).dtype;
  V pos = t.emit1("gt", {x, scalar(t, dt, 0)});
  V neg = t.emit1("mul", {t.emit1("expm1", {x}), scalar(t, dt, t.attr_float("alpha", 1.0f))});
  t.set_output(0, t.emit1("where", {pos, x, neg}));
}

// max(0, min(1, alpha * x + beta)).
V hard_sigmoid_of(Translator& t, V x, double alpha, double beta) {
  hal_dtype_e dt = t.spec(x).dtype;
  V y = t.emit1("add", {t.emit1("mul", {x, scalar(t, dt, alpha)}), scalar(t, dt, beta)});
  return t.emit1("clamp", {y, scalar(t, dt, 0), scalar(t, dt, 1)});
}

void hard_sigmoid(Translator& t, const OpRule&) {
  t.set_output(0, hard_sigmoid_of(t, t.value(0), t.attr_float("alpha", 0.2f), t.attr_float("beta", 0.5f)));
}

// Element-wise activations ONNX defines by formula, composed from catalog
// ops as the operator's function body (or reference) states them.
void formula_activation(Translator& t, const OpRule&) {
  const std::string& type = t.node().op_type();
  V x = t.value(0);
  const hal_dtype_e dt = t.spec(x).dtype;
  if (!is_float(dt)) t.unimplemented(type + " of " + std::string(common::dtype_name(dt)) + " (floating dtypes)");
  auto c = [&](double v) { return scalar(t, dt, v); };
  auto f = [&](const char* name, double fallback) { return static_cast<double>(t.attr_float(name, static_cast<float>(fallback))); };
  V y;
  if (type == "Softplus") {  // log(exp(x) + 1)
    y = t.emit1("log", {t.emit1("add", {t.emit1("exp", {x}), c(1)})});
  } else if (type == "Softsign") {  // x / (1 + |x|)
    y = t.emit1("div", {x, t.emit1("add", {t.emit1("abs", {x}), c(1)})});
  } else if (type == "Mish") {  // x * tanh(softplus(x))
    V sp = t.emit1("log", {t.emit1("add", {t.emit1("exp", {x}), c(1)})});
    y = t.emit1("mul", {x, t.emit1("tanh", {sp})});
  } else if (type == "Swish") {  // x * sigmoid(alpha * x)
    y = t.emit1("mul", {x, t.emit1("sigmoid", {t.emit1("mul", {x, c(f("alpha", 1.0))})})});
  } else if (type == "ThresholdedRelu") {  // x if x > alpha, else 0
    y = t.emit1("where", {t.emit1("gt", {x, c(f("alpha", 1.0))}), x, c(0)});
  } else if (type == "Selu") {  // gamma * (x if x > 0, else alpha * (exp(x) - 1))
    const double alpha = f("alpha", 1.67326319217681884765625), gamma = f("gamma", 1.05070102214813232421875);
    V neg = t.emit1("mul", {t.emit1("sub", {t.emit1("exp", {x}), c(1)}), c(alpha)});
    y = t.emit1("mul", {t.emit1("where", {t.emit1("gt", {x, c(0)}), x, neg}), c(gamma)});
  } else if (type == "Celu") {  // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    const double alpha = f("alpha", 1.0);
    V e = t.emit1("mul", {t.emit1("sub", {t.emit1("exp", {t.emit1("div", {x, c(alpha)})}), c(1)}), c(alpha)});
    y = t.emit1("add", {t.emit1("maximum", {x, c(0)}), t.emit1("minimum", {e, c(0)})});
  } else if (type == "Shrink") {  // x + bias if x < -lambd, x - bias if x > lambd, else 0
    const double lambd = f("lambd", 0.5), bias = f("bias", 0.0);
    V low = t.emit1("where", {t.emit1("lt", {x, c(-lambd)}), t.emit1("add", {x, c(bias)}), c(0)});
    y = t.emit1("where", {t.emit1("gt", {x, c(lambd)}), t.emit1("sub", {x, c(bias)}), low});
  } else {
    t.unimplemented(type);
  }
  t.set_output(0, as_dtype(t, y, dt));
}

// PRelu: x if x >= 0, else slope * x (slope broadcast to x).
void prelu(Translator& t, const OpRule&) {
  V x = t.value(0);
  const hal_dtype_e dt = t.spec(x).dtype;
  V neg = t.emit1("mul", {x, t.value(1)});
  t.set_output(0, t.emit1("where", {t.emit1("lt", {x, scalar(t, dt, 0)}), neg, x}));
}

// Hardmax: 1 at the first maximum along axis, 0 elsewhere (before 13: over
// the input coerced to 2-D at axis, i.e. over every dim from axis on).
void hardmax(Translator& t, const OpRule&) {
  const std::vector<int64_t> in = t.in(0).spec.shape;
  const hal_dtype_e dt = t.in(0).spec.dtype;
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = norm_axis(t, t.attr_int("axis", t.opset() >= 13 ? -1 : 1), in.size());
  V x = t.value(0);
  int64_t classes = 1;
  if (t.opset() < 13 && axis < rank - 1) {
    for (int64_t d = axis; d < rank; ++d) {
      if (in[d] < 0) t.unimplemented("Hardmax before opset 13 over a dim only known at run time");
      classes *= in[d];
    }
    x = t.emit1("reshape", {x}, {Attr::ints("shape", {-1, classes})});
  } else {
    classes = in[axis];
    if (classes < 0) t.unimplemented("Hardmax over a dim only known at run time");
  }
  const int64_t dim = t.opset() < 13 && axis < rank - 1 ? 1 : axis;
  V idx = t.emit1("argmax", {x}, {Attr::ints("dim", {dim}), Attr::b("keepdim", false)});
  V hot = t.emit1("one_hot", {idx}, {Attr::i("num_classes", classes)});  // classes last
  const int64_t r = static_cast<int64_t>(t.spec(hot).shape.size());
  if (dim != r - 1) {
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < r - 1; ++d) {
      if (d == dim) perm.push_back(r - 1);
      perm.push_back(d);
    }
    if (static_cast<int64_t>(perm.size()) < r) perm.push_back(r - 1);
    hot = t.emit1("permute", {hot}, {Attr::ints("dims", perm)});
  }
  hot = as_dtype(t, hot, dt);
  t.set_output(0, reshape_to(t, hot, in));
}

// LpNormalization: x / ||x||_p along axis (p 1 or 2).
void lp_normalization(Translator& t, const OpRule&) {
  const int64_t p = t.attr_int("p", 2);
  if (p != 1 && p != 2) t.invalid("p=" + std::to_string(p) + " (1 or 2)");
  const std::vector<int64_t> in = t.in(0).spec.shape;
  const int64_t axis = norm_axis(t, t.attr_int("axis", -1), in.size());
  V x = t.value(0);
  V norm = t.emit1("norm", {x}, {Attr::ints("dim", {axis}), Attr::b("keepdim", true), Attr::f("p", static_cast<double>(p))});
  // A zero vector stays zero (the reference's 0 / 0 guard), not NaN.
  V zero = t.emit1("eq", {norm, scalar(t, t.spec(x).dtype, 0)});
  t.set_output(0, t.emit1("where", {zero, x, t.emit1("div", {x, norm})}));
}

void hard_swish(Translator& t, const OpRule&) {
  V x = t.value(0);
  t.set_output(0, t.emit1("mul", {x, hard_sigmoid_of(t, x, 1.0 / 6.0, 0.5)}));
}

// IsInf: isinf, narrowed to one sign by detect_negative / detect_positive = 0.
void is_inf(Translator& t, const OpRule&) {
  const bool neg = t.attr_int("detect_negative", 1) != 0, pos = t.attr_int("detect_positive", 1) != 0;
  V x = t.value(0), inf = t.emit1("isinf", {x});
  const hal_dtype_e dt = t.spec(x).dtype;
  if (neg && !pos) inf = t.emit1("logical_and", {inf, t.emit1("lt", {x, scalar(t, dt, 0)})});
  if (pos && !neg) inf = t.emit1("logical_and", {inf, t.emit1("gt", {x, scalar(t, dt, 0)})});
  if (!pos && !neg) inf = t.emit1("logical_and", {inf, t.emit1("ne", {x, x})});  // all false, NaN included
  t.set_output(0, inf);
}

const std::vector<OpRule> kTable = {
    // Elementwise, one catalog op each.
    {"Abs", 6, 13, "abs", unary_int_folding, ""},
    {"Neg", 6, 13, "neg", unary_int_folding, ""},
    {"Exp", 6, 13, "exp", nullptr, ""},
    {"Log", 6, 13, "log", nullptr, ""},
    {"Sqrt", 6, 13, "sqrt", nullptr, ""},
    {"Reciprocal", 6, 13, "reciprocal", nullptr, ""},
    {"Sin", 7, 22, "sin", nullptr, ""},
    {"Cos", 7, 22, "cos", nullptr, ""},
    {"Tanh", 6, 13, "tanh", nullptr, ""},
    {"Tan", 7, 22, "tan", nullptr, ""},
    {"Asin", 7, 22, "asin", nullptr, ""},
    {"Acos", 7, 22, "acos", nullptr, ""},
    {"Atan", 7, 22, "atan", nullptr, ""},
    {"Sinh", 9, 22, "sinh", nullptr, ""},
    {"Cosh", 9, 22, "cosh", nullptr, ""},
    {"Asinh", 9, 22, "asinh", nullptr, ""},
    {"Acosh", 9, 22, "acosh", nullptr, ""},
    {"Atanh", 9, 22, "atanh", nullptr, ""},
    {"Sigmoid", 6, 13, "sigmoid", nullptr, ""},
    {"Relu", 6, 14, "relu", nullptr, ""},
    {"Erf", 9, 13, "erf", nullptr, ""},
    {"Floor", 6, 13, "floor", nullptr, ""},
    {"Ceil", 6, 13, "ceil", nullptr, ""},
    {"Round", 11, 22, "round", nullptr, ""},
    {"Sign", 9, 13, "sign", nullptr, ""},
    {"Not", 1, 1, "logical_not", unary_int_folding, ""},
    {"IsNaN", 9, 20, "isnan", nullptr, ""},
    {"IsInf", 10, 20, "isinf|isinf+lt|gt+logical_and", is_inf, ""},
    {"Add", 7, 14, "add", binary, ""},
    {"Sub", 7, 14, "sub", binary, ""},
    {"Mul", 7, 14, "mul", binary, ""},
    {"Div", 7, 14, "div", binary, ""},
    {"Mod", 10, 28, "fmod|remainder", binary, ""},
    {"Pow", 7, 15, "pow|pow+copy", pow, ""},
    {"Equal", 7, 19, "eq", binary, "no strings"},
    {"Less", 7, 13, "lt", binary, ""},
    {"LessOrEqual", 12, 16, "le", binary, ""},
    {"Greater", 7, 13, "gt", binary, ""},
    {"GreaterOrEqual", 12, 16, "ge", binary, ""},
    {"And", 7, 7, "logical_and", binary, ""},
    {"Or", 7, 7, "logical_or", binary, ""},
    {"Xor", 7, 7, "logical_xor", binary, ""},
    {"BitwiseAnd", 18, 18, "bitwise_and", nullptr, ""},
    {"BitwiseOr", 18, 18, "bitwise_or", nullptr, ""},
    {"BitwiseXor", 18, 18, "bitwise_xor", nullptr, ""},
    {"Where", 9, 16, "where", where, ""},
    {"Max", 6, 13, "maximum", variadic, ""},
    {"Min", 6, 13, "minimum", variadic, ""},
    {"Sum", 6, 13, "add", variadic, ""},
    {"Mean", 6, 13, "add+div", variadic, ""},
    {"Clip", 6, 13, "clamp", clip, ""},
    {"Cast", 6, 28, "copy", cast, "string and float8 types"},
    {"CastLike", 15, 25, "copy", cast, "string and float8 types"},
    // Activations.
    {"Softmax", 1, 13, "softmax", softmax, ""},
    {"LogSoftmax", 1, 13, "log_softmax", softmax, ""},
    {"Gelu", 20, 20, "gelu", gelu, ""},
    {"LeakyRelu", 6, 16, "gt+mul+where", leaky_relu, ""},
    {"Elu", 6, 22, "gt+expm1+mul+where", elu, ""},
    {"HardSigmoid", 6, 22, "mul+add+clamp", hard_sigmoid, ""},
    {"Softplus", 1, 22, "exp+add+log", formula_activation, ""},
    {"Softsign", 1, 22, "abs+add+div", formula_activation, ""},
    {"Mish", 18, 22, "exp+add+log+tanh+mul", formula_activation, ""},
    {"Swish", 24, 24, "mul+sigmoid", formula_activation, ""},
    {"ThresholdedRelu", 10, 22, "gt+where", formula_activation, ""},
    {"Selu", 6, 22, "exp+sub+mul+gt+where", formula_activation, ""},
    {"Celu", 12, 28, "div+exp+sub+mul+maximum+minimum+add", formula_activation, ""},
    {"Shrink", 9, 9, "lt+gt+add+sub+where", formula_activation, ""},
    {"PRelu", 7, 16, "lt+mul+where", prelu, ""},
    {"DepthToSpace", 11, 28, "reshape+permute", depth_space, "shapes known at load"},
    {"SpaceToDepth", 13, 28, "reshape+permute", depth_space, "shapes known at load"},
    {"CumProd", 26, 26, "cumprod+flip+pad+index_select", cumulative, "axis known at load or from an input's value"},
    {"CenterCropPad", 18, 18, "index_select+pad", center_crop_pad, "shape known at load or from an input's value"},
    {"RotaryEmbedding", 23, 23, "index_select+mul+sub+add+cat+embedding+permute+reshape", rotary_embedding, "shapes known at load"},
    {"LpPool", 11, 22, "abs+pow+avg_pool2d+mul|abs+pow+pad+avg_pool2d+mul", pool, "1-D, 2-D and 3-D (shapes known at load); no ceil_mode"},
    {"CausalConvWithState", 27, 27, "cat+conv1d+silu+index_select", causal_conv_with_state, "shapes known at load"},
    {"LinearAttention", 27, 27, "matmul+mul+add+exp+sub+index_select+cat+permute+reshape+copy", linear_attention, "the sequence length known at load (the recurrence is unrolled)"},
    {"ScatterND", 11, 18, "permute+index_put", scatter_nd, "reduction none or add"},
    {"GatherND", 11, 13, "index_select+lt+add+where+mul+reshape", gather_nd, "batch_dims 0; shapes known at load"},
    {"BitwiseNot", 18, 18, "bitwise_xor", bitwise_not, ""},
    {"Resize", 11, 19, "index_select|permute+matmul+add", resize, "shapes, scales, sizes and roi known at load or from an input's value; linear and cubic of floating dtypes"},
    {"EyeLike", 9, 22, "copy", eye_like, "shape known at load"},
    {"Hardmax", 1, 13, "argmax+one_hot+permute+copy", hardmax, ""},
    {"LpNormalization", 1, 22, "norm+div+eq+where", lp_normalization, ""},
    {"HardSwish", 14, 22, "mul+add+clamp+mul", hard_swish, ""},
    // Linear algebra, convolution, pooling, normalisation.
    {"MatMul", 1, 13, "matmul", nullptr, ""},
    {"Gemm", 7, 13, "linear|addmm|mm", gemm, "transA/transB need the catalog's permute"},
    {"Conv", 1, 22, "conv1d|conv2d|pad+conv1d|pad+conv2d", conv, "1-D and 2-D"},
    {"ConvTranspose", 1, 22, "conv_transpose2d|conv_transpose2d+index_select", conv, "1-D and 2-D"},
    {"MaxPool", 1, 22, "max_pool2d|pad+max_pool2d", pool, "1-D, 2-D and 3-D (shapes known at load); storage_order 0; no Indices output; ceil_mode only with symmetric pads of at most half the kernel"},
    {"AveragePool", 7, 22, "avg_pool2d|pad+avg_pool2d+div|pad+conv2d+div", pool, "1-D, 2-D and 3-D (shapes known at load); dilations with static shapes; ceil_mode only with symmetric pads of at most half the kernel"},
    {"GlobalAveragePool", 1, 22, "mean", global_pool, ""},
    {"GlobalMaxPool", 1, 22, "amax", global_pool, ""},
    {"BatchNormalization", 7, 15, "batch_norm", batch_norm, "inference only (training_mode 0)"},
    {"LayerNormalization", 17, 17, "layer_norm", layer_norm, "normalized dims known at load"},
    {"RMSNormalization", 23, 23, "rms_norm", rms_norm, "normalized dims known at load"},
    {"NegativeLogLikelihoodLoss", 12, 22, "nll_loss", class_loss, ""},
    {"GatherElements", 11, 13, "gather", gather_elements, ""},
    {"Scatter", 9, 9, "scatter", scatter_elements, ""},
    {"ScatterElements", 11, 18, "scatter|scatter_add", scatter_elements, "reduction none or add"},
    {"SoftmaxCrossEntropyLoss", 12, 13, "log_softmax+nll_loss", class_loss, ""},
    {"Attention", 23, 25, "matmul+mul+softmax+where+add+amax+eq+cat+copy+tanh+pad", attention, "shapes known at load"},
    // Reductions.
    {"ReduceMean", 1, 18, "mean", reduce, "axes known at load"},
    {"ReduceSum", 1, 13, "sum", reduce, "axes known at load"},
    {"ReduceMax", 1, 20, "amax", reduce, "axes known at load"},
    {"ReduceMin", 1, 20, "amin", reduce, "axes known at load"},
    {"ReduceProd", 1, 18, "prod", reduce, "axes known at load"},
    {"ReduceL1", 1, 18, "abs+sum", reduce, "axes known at load"},
    {"ReduceL2", 1, 18, "norm", reduce, "axes known at load"},
    {"ReduceSumSquare", 1, 18, "mul+sum", reduce, "axes known at load"},
    {"ReduceLogSum", 1, 28, "sum+log", reduce, "axes known at load or from an input's value"},
    {"ReduceLogSumExp", 1, 28, "logsumexp", reduce, "axes known at load"},
    {"ArgMax", 1, 13, "argmax|flip+argmax+sub", arg_reduce, ""},
    {"ArgMin", 1, 13, "argmin|flip+argmin+sub", arg_reduce, ""},
    {"CumSum", 11, 14, "cumsum+flip+sub+copy", cumulative, "axis known at load or from an input's value"},
    {"TopK", 1, 24, "sort+index_select", topk, "K known at load, from an input's value, or computed (a count of the sort's first rows, a symbol of the stages after it)"},
    // Shapes and data movement.
    {"Identity", 1, 25, "", identity, ""},
    {"Dropout", 7, 22, "", identity, "inference only"},
    {"Constant", 9, 25, "", constant, "no string or sparse values"},
    {"Shape", 1, 25, "", shape, ""},
    {"Size", 1, 25, "", size, ""},
    {"Reshape", 5, 25, "reshape", reshape, "target known at load; run-time dims: self's dim at the same index (copied), one other inferred, and leading run-time dims merged for a Gemm and split back after it (the Gemm runs unflattened); a target the model computes: the next stage views x's bytes in that shape, dims >= 2 symbols (a new target binds them)"},
    {"Flatten", 1, 25, "reshape", flatten, "at most one run-time dim in the result"},
    {"Squeeze", 1, 25, "reshape", squeeze, "axes known at load"},
    {"Unsqueeze", 1, 25, "reshape", unsqueeze, "axes known at load"},
    {"Transpose", 1, 25, "permute", transpose, ""},
    {"Concat", 4, 13, "cat", concat, ""},
    {"Split", 2, 18, "split", split, "split sizes known at load"},
    {"Gather", 1, 13, "index_select|embedding|lt+add+where+index_select+reshape", gather, "indices of rank >= 2 with static shape (any rank into a 2-D table on axis 0)"},
    {"Slice", 1, 13, "index_select", slice, "starts/axes/steps known at load; ends known at load or a run-time dim (then start 0, step 1); a count or view dim read back sliced from the start (guarded); run-time dims otherwise sliced whole"},
    {"Expand", 8, 13, "copy|add", expand, "a computed shape broadcasts the input to its sizes"},
    {"ConstantOfShape", 9, 25, "fill|add", constant_of_shape, ""},
    {"Range", 11, 27, "arange|cumsum+mul+add", range, ""},
    {"Trilu", 14, 14, "tril|triu", trilu, "k known at load"},
    {"Tile", 6, 13, "repeat|index_select", tile, "computed repeats: an input whose dims are known at load"},
    {"Pad", 2, 25, "pad|index_select", pad, "computed pads, and mode wrap: an input whose dims are known at load (>= 1 on the padded axes)"},
};

}  // namespace

const std::vector<OpRule>& op_table() {
  static const std::vector<OpRule> table = [] {
    std::vector<OpRule> all = kTable;
    for (const auto* rows : {&quantize_rows(), &recurrent_rows(), &tensor_rows(), &control_flow_rows(), &sequence_rows()}) all.insert(all.end(), rows->begin(), rows->end());
    return all;
  }();
  return table;
}

}  // namespace hal::onnx::detail

namespace hal::onnx {

std::vector<OperatorSupport> supported_operators() {
  std::vector<OperatorSupport> out;
  for (const detail::OpRule& r : detail::op_table())
    out.push_back({r.op_type, std::max(r.min_version, detail::kOldestOpset),
                   detail::last_opset_of_version(r.op_type, r.max_version), r.catalog, r.limits});
  return out;
}

}  // namespace hal::onnx

namespace hal::onnx::detail {

namespace {
#include "op_versions.inc"

const OperatorVersions* versions_of(const std::string& op_type) {
  for (const OperatorVersions& v : kOperatorVersions)
    if (op_type == v.op_type) return &v;
  return nullptr;
}
}  // namespace

int newest_known_opset() { return kNewestKnownOpset; }

int operator_version(const std::string& op_type, int64_t opset) {
  const OperatorVersions* v = versions_of(op_type);
  int found = 0;
  if (v != nullptr)
    for (int version : v->versions)
      if (version != 0 && version <= opset) found = version;
  return found;
}

int last_opset_of_version(const std::string& op_type, int version) {
  if (const OperatorVersions* v = versions_of(op_type))
    for (int next : v->versions)
      if (next > version) return next - 1;
  return kNewestKnownOpset;
}

const OpRule* find_rule(const std::string& op_type, int64_t opset) {
  if (opset > kNewestKnownOpset) return nullptr;
  const int version = operator_version(op_type, opset);
  if (version == 0) return nullptr;
  for (const OpRule& r : op_table())
    if (op_type == r.op_type && version >= r.min_version && version <= r.max_version) return &r;
  return nullptr;
}

void translate_node(Translator& t) {
  const OpRule* r = find_rule(t.node().op_type(), t.opset());
  if (!r) {
    const int version = operator_version(t.node().op_type(), t.opset());
    std::string rows;
    for (const OpRule& any : op_table())
      if (t.node().op_type() == any.op_type)
        rows += (rows.empty() ? "" : ", ") + std::to_string(any.min_version) + ".." + std::to_string(any.max_version);
    if (!rows.empty() && t.opset() > kNewestKnownOpset)
      t.unimplemented("opset " + std::to_string(t.opset()) + " is newer than the " +
                      std::to_string(kNewestKnownOpset) + " HAL's table knows, so which " + t.node().op_type() +
                      " version it uses is unknown; the table maps versions " + rows + " of it");
    if (!rows.empty() && version == 0)
      t.unimplemented(t.node().op_type() + " is not an operator of ai.onnx opset " + std::to_string(t.opset()) +
                      " (HAL's table maps its versions " + rows + ")");
    if (!rows.empty())
      t.unimplemented("opset " + std::to_string(t.opset()) + " uses " + t.node().op_type() + " version " +
                      std::to_string(version) + "; HAL's table maps versions " + rows + " of it");
    t.unimplemented("operator not supported (no mapping to the HAL op catalog; docs/onnx.md lists the supported ones)");
  }
  if (r->convert) r->convert(t, *r);
  else direct(t, *r);
}

void translate_graph(Translator& t, const ::onnx::GraphProto& g, int64_t opset) {
  for (size_t i = 0; i < static_cast<size_t>(g.node_size()); ++i) {
    const auto& n = g.node(static_cast<int>(i));
    t.begin_node(n, i, opset);
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      t.unimplemented("domain '" + n.domain() + "' is not supported (HAL maps the default domain ai.onnx only)");
    try {
      translate_node(t);
    } catch (const std::logic_error& e) {  // an index or size a malformed model breaks: refused, never a crash
      t.invalid(std::string("malformed operands (") + e.what() + ")");
    }
  }
}

}  // namespace hal::onnx::detail
