#include "op_table.hpp"

#include <algorithm>
#include <cmath>
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

// Axis AXIS of a rank-RANK tensor, negative counting from the end.
int64_t norm_axis(Translator& t, int64_t axis, size_t rank, const char* what = "axis") {
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
  if (infer < 0) return out;
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
    if (op == "Mod" && divisible) return Dim::of(x % y);
    if (op == "Equal") return Dim::of(x == y);
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
  std::vector<Dim> out;
  for (size_t i = 0; i < n; ++i) out.push_back(fold_binary(t.node().op_type(), (*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]));
  bool scalar = sa.spec.shape.empty() && sb.spec.shape.empty();
  hal_dtype_e dt = t.node().op_type() == "Equal" ? HAL_DTYPE_BOOL : sa.spec.dtype;
  t.set_output_ints(0, dt, out, scalar);
  return true;
}

// ---- converters ----

void direct(Translator& t, const OpRule& r) {
  std::vector<V> in;
  for (size_t i = 0; i < t.input_count(); ++i) in.push_back(t.has_input(i) ? t.value(i) : V{});
  t.set_output(0, t.emit1(r.catalog, in));
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
  for (size_t i = 1; i < t.input_count(); ++i) acc = t.emit1(r.catalog, {acc, t.value(i)});
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
  if (!target) t.unimplemented("the target shape (input 1 '" + t.input_name(1) + "') is computed at run time from tensor values");
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
  t.unimplemented("indices of rank " + std::to_string(ishape.size()) + " along axis " + std::to_string(axis) + " of a rank-" + std::to_string(dshape.size()) + " tensor");
}

// [0, 1, ..., n) in DT for a length N only known at run time (a symbol): a
// run of ones summed up (the catalog's arange takes its bounds at load).
V symbolic_arange(Translator& t, hal_dtype_e dt, int64_t n) {
  V ones = t.emit_as("fill", {}, {Attr::scalar("value", 1)}, {dt, {n}});
  V sum = t.emit1("cumsum", {ones}, {Attr::i("dim", 0)});
  return t.emit1("sub", {sum, scalar(t, dt, 1)});
}

void slice(Translator& t, const OpRule&) {
  const Slot& data = t.in(0);
  const std::vector<int64_t>& shape = data.spec.shape;
  std::vector<int64_t> starts = t.const_ints(1, "Slice's starts");
  // Ends may be a dim only known at run time (x[:, :seq] with seq from Shape).
  std::vector<Dim> end_dims;
  if (auto e = t.ints(2)) end_dims = *e;
  else
    for (int64_t v : t.const_ints(2, "Slice's ends")) end_dims.push_back(Dim::of(v));
  std::vector<int64_t> ends;
  for (const Dim& d : end_dims) {
    if (d.kind == Dim::kUnknown) t.unimplemented("Slice's ends are only known at run time and are not a dim of a graph input");
    ends.push_back(d.known() ? d.value : 0);
  }
  std::vector<int64_t> axes, steps(starts.size(), 1);
  if (t.has_input(3)) axes = t.const_ints(3, "Slice's axes");
  else
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (t.has_input(4)) steps = t.const_ints(4, "Slice's steps");
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

std::vector<int64_t> dims_of(Translator& t, size_t input, const std::string& what) {
  auto d = t.ints(input);
  if (!d) t.unimplemented(what + " (input '" + t.input_name(input) + "') is computed at run time from tensor values");
  std::vector<int64_t> out;
  for (size_t i = 0; i < d->size(); ++i) {
    const Dim& x = (*d)[i];
    if (x.kind == Dim::kUnknown) out.push_back(t.fresh_symbol(i));
    else out.push_back(x.value);
  }
  return out;
}

void expand(Translator& t, const OpRule&) {
  std::vector<int64_t> out = broadcast(t, t.in(0).spec.shape, dims_of(t, 1, "Expand's shape"));
  if (out == t.in(0).spec.shape) {
    t.alias_output(0, t.in(0));
    return;
  }
  t.set_output(0, t.emit_as("copy", {t.value(0)}, {}, {t.in(0).spec.dtype, out}));
}

void constant_of_shape(Translator& t, const OpRule&) {
  std::vector<int64_t> shape = dims_of(t, 0, "ConstantOfShape's shape");
  HostTensor value{HAL_DTYPE_FLOAT32, {1}, std::vector<uint8_t>(4, 0)};
  if (const auto* a = t.attr("value")) value = tensor_from_proto(a->t(), "", t.where() + " attribute 'value'");
  if (value.data.size() != common::dtype_size(value.dtype)) t.invalid("value must hold one element");
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
  if (!s || !l || !d) {
    auto f0 = t.host(0), f1 = t.host(1), f2 = t.host(2);
    auto v0 = f0 ? float_values(*f0) : std::nullopt, v1 = f1 ? float_values(*f1) : std::nullopt,
         v2 = f2 ? float_values(*f2) : std::nullopt;
    if (v0 && v1 && v2 && v0->size() == 1 && v1->size() == 1 && v2->size() == 1) {
      double a = (*v0)[0], b = (*v1)[0], c = (*v2)[0];
      t.set_output(0, t.emit1("arange", {}, {Attr::scalar("start", a), Attr::scalar("end", b), Attr::scalar("step", c), Attr::dtype("dtype", dt)}));
      return;
    }
  }
  t.unimplemented("start, limit and delta must be known at load (a run-time limit only with start 0 and delta 1)");
}

void trilu(Translator& t, const OpRule&) {
  int64_t k = 0;
  if (t.has_input(1)) k = t.const_ints(1, "Trilu's k").at(0);
  t.set_output(0, t.emit1(t.attr_int("upper", 1) ? "triu" : "tril", {t.value(0)}, {Attr::i("diagonal", k)}));
}

void where(Translator& t, const OpRule&) {
  t.set_output(0, t.emit1("where", {t.value(0), t.value(1), t.value(2)}));
}

void softmax(Translator& t, const OpRule& r) {
  t.set_output(0, t.emit1(r.catalog, {t.value(0)}, {Attr::i("dim", t.attr_int("axis", -1))}));
}

void gelu(Translator& t, const OpRule&) {
  std::string approx = t.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh") t.invalid("approximate='" + approx + "'");
  t.set_output(0, t.emit1("gelu", {t.value(0)}, {Attr::s("approximate", approx)}));
}

V transpose2d(Translator& t, V v) { return t.emit1("permute", {v}, {Attr::ints("dims", {1, 0})}); }

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

// Symmetric pads ([b1, b2, ..., e1, e2] with b == e) as the catalog's
// per-dim padding; auto_pad SAME_* computed from concrete sizes.
std::vector<int64_t> sym_pads(Translator& t, size_t spatial, const std::vector<int64_t>& kernel,
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
  for (size_t i = 0; i < spatial; ++i)
    if (pads[i] != pads[i + spatial]) t.unimplemented("asymmetric pads " + join(pads) + " (the catalog pads both sides alike)");
  return std::vector<int64_t>(pads.begin(), pads.begin() + static_cast<long>(spatial));
}

std::vector<int64_t> ints_or(Translator& t, const char* name, size_t n, int64_t fallback) {
  auto v = t.attr_ints(name);
  if (!v) return std::vector<int64_t>(n, fallback);
  if (v->size() != n) t.invalid(std::string(name) + " has " + std::to_string(v->size()) + " entries for " + std::to_string(n) + " spatial dims");
  return *v;
}

void conv(Translator& t, const OpRule&) {
  const ValueSpec& w = t.in(1).spec;
  size_t spatial = w.shape.size() - 2;
  if (spatial != 1 && spatial != 2) t.unimplemented(std::to_string(spatial) + "-D convolution (only 1-D and 2-D)");
  std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  std::vector<int64_t> strides = ints_or(t, "strides", spatial, 1), dil = ints_or(t, "dilations", spatial, 1);
  std::vector<int64_t> pads = sym_pads(t, spatial, kernel, strides, dil);
  std::vector<Attr> attrs{Attr::ints("stride", strides), Attr::ints("padding", pads), Attr::ints("dilation", dil),
                          Attr::i("groups", t.attr_int("group", 1))};
  V bias = t.has_input(2) ? t.value(2) : V{};
  if (t.node().op_type() == "ConvTranspose") {
    if (spatial != 2) t.unimplemented("1-D ConvTranspose (only 2-D)");
    if (t.attr("output_shape")) t.unimplemented("attribute output_shape (give pads and output_padding)");
    attrs.push_back(Attr::ints("output_padding", ints_or(t, "output_padding", spatial, 0)));
    t.set_output(0, t.emit1("conv_transpose2d", {t.value(0), t.value(1), bias}, attrs));
    return;
  }
  t.set_output(0, t.emit1(spatial == 1 ? "conv1d" : "conv2d", {t.value(0), t.value(1), bias}, attrs));
}

void pool(Translator& t, const OpRule&) {
  size_t spatial = t.in(0).spec.shape.size() - 2;
  if (spatial != 2) t.unimplemented(std::to_string(spatial) + "-D pooling (only 2-D)");
  auto kernel = t.attr_ints("kernel_shape");
  if (!kernel) t.invalid("needs kernel_shape");
  std::vector<int64_t> strides = ints_or(t, "strides", spatial, 1), dil = ints_or(t, "dilations", spatial, 1);
  std::vector<int64_t> pads = sym_pads(t, spatial, *kernel, strides, dil);
  std::vector<Attr> attrs{Attr::ints("kernel_size", *kernel), Attr::ints("stride", strides), Attr::ints("padding", pads),
                          Attr::b("ceil_mode", t.attr_int("ceil_mode", 0) != 0)};
  if (t.node().op_type() == "MaxPool") {
    t.require_attr("storage_order", 0, 0);
    if (t.output_count() > 1 && !t.output_name(1).empty()) t.unimplemented("the Indices output");
    attrs.push_back(Attr::ints("dilation", dil));
    t.set_output(0, t.emit("max_pool2d", {t.value(0)}, attrs)[0]);
    return;
  }
  if (dil != std::vector<int64_t>(spatial, 1)) t.unimplemented("dilations in AveragePool");
  attrs.push_back(Attr::b("count_include_pad", t.attr_int("count_include_pad", 0) != 0));
  t.set_output(0, t.emit1("avg_pool2d", {t.value(0)}, attrs));
}

void global_pool(Translator& t, const OpRule& r) {
  size_t rank = t.in(0).spec.shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 2; i < rank; ++i) dims.push_back(static_cast<int64_t>(i));
  t.set_output(0, t.emit1(r.catalog, {t.value(0)}, {Attr::ints("dim", dims), Attr::b("keepdim", true)}));
}

void batch_norm(Translator& t, const OpRule&) {
  if (t.attr_int("training_mode", 0) != 0) t.unimplemented("training_mode=1 (only inference)");
  for (size_t i = 1; i < t.output_count(); ++i)
    if (!t.output_name(i).empty()) t.unimplemented("the running mean/var outputs (training only)");
  std::vector<V> outs = t.emit("batch_norm", {t.value(0), t.value(1), t.value(2), t.value(3), t.value(4)},
                               {Attr::b("training", false), Attr::f("eps", t.attr_float("epsilon", 1e-5f))});
  t.set_output(0, outs[0]);
}

void layer_norm(Translator& t, const OpRule&) {
  const std::vector<int64_t>& in = t.in(0).spec.shape;
  int64_t axis = norm_axis(t, t.attr_int("axis", -1), in.size());
  std::vector<int64_t> normalized(in.begin() + axis, in.end());
  for (int64_t d : normalized)
    if (d < 0) t.unimplemented("normalizing over a dim only known at run time");
  for (size_t i = 1; i < t.output_count(); ++i)
    if (!t.output_name(i).empty()) t.unimplemented("the Mean / InvStdDev outputs");
  std::vector<V> outs = t.emit("layer_norm", {t.value(0), t.has_input(1) ? t.value(1) : V{}, t.has_input(2) ? t.value(2) : V{}},
                               {Attr::ints("normalized_shape", normalized), Attr::f("eps", t.attr_float("epsilon", 1e-5f))});
  t.set_output(0, outs[0]);
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
  t.set_output(0, t.emit1(op, {x}, attrs));
}

void arg_reduce(Translator& t, const OpRule& r) {
  t.require_attr("select_last_index", 0, 0);
  t.set_output(0, t.emit1(r.catalog, {t.value(0)}, {Attr::ints("dim", {t.attr_int("axis", 0)}), Attr::b("keepdim", t.attr_int("keepdims", 1) != 0)}));
}

void cumsum(Translator& t, const OpRule&) {
  t.require_attr("exclusive", 0, 0);
  t.require_attr("reverse", 0, 0);
  t.set_output(0, t.emit1("cumsum", {t.value(0)}, {Attr::i("dim", t.const_ints(1, "CumSum's axis").at(0))}));
}

void topk(Translator& t, const OpRule&) {
  int64_t k = t.const_ints(1, "TopK's K").at(0);
  std::vector<V> outs = t.emit("topk", {t.value(0)}, {Attr::i("k", k), Attr::i("dim", t.attr_int("axis", -1)),
                                                       Attr::b("largest", t.attr_int("largest", 1) != 0),
                                                       Attr::b("sorted", t.attr_int("sorted", 1) != 0)});
  t.set_output(0, outs[0]);
  t.set_output(1, outs[1]);
}

void clip(Translator& t, const OpRule&) {
  t.set_output(0, t.emit1("clamp", {t.value(0), t.has_input(1) ? t.value(1) : V{}, t.has_input(2) ? t.value(2) : V{}}));
}

void tile(Translator& t, const OpRule&) {
  t.set_output(0, t.emit1("repeat", {t.value(0)}, {Attr::ints("repeats", t.const_ints(1, "Tile's repeats"))}));
}

void pad(Translator& t, const OpRule&) {
  std::string mode = t.attr_string("mode", "constant");
  if (mode == "edge") mode = "replicate";
  if (mode != "constant" && mode != "reflect" && mode != "replicate") t.unimplemented("mode='" + mode + "'");
  size_t rank = t.in(0).spec.shape.size();
  std::vector<int64_t> pads = t.const_ints(1, "Pad's pads");
  std::vector<int64_t> axes;
  if (t.has_input(3)) axes = t.const_ints(3, "Pad's axes");
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
  double value = 0;
  if (const HostTensor* h = t.host(2)) value = float_values(*h).value_or(std::vector<double>{0}).at(0);
  else if (t.has_input(2)) t.unimplemented("constant_value computed at run time");
  if (torch_pad.empty()) {
    t.alias_output(0, t.in(0));
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

void hard_swish(Translator& t, const OpRule&) {
  V x = t.value(0);
  t.set_output(0, t.emit1("mul", {x, hard_sigmoid_of(t, x, 1.0 / 6.0, 0.5)}));
}

void is_inf(Translator& t, const OpRule&) {
  if (t.attr_int("detect_negative", 1) != 1 || t.attr_int("detect_positive", 1) != 1)
    t.unimplemented("detect_negative / detect_positive = 0 (only both)");
  t.set_output(0, t.emit1("isinf", {t.value(0)}));
}

constexpr int kMin = 13, kMax = 21;

const std::vector<OpRule> kTable = {
    // Elementwise, one catalog op each.
    {"Abs", kMin, kMax, "abs", nullptr, ""},
    {"Neg", kMin, kMax, "neg", nullptr, ""},
    {"Exp", kMin, kMax, "exp", nullptr, ""},
    {"Log", kMin, kMax, "log", nullptr, ""},
    {"Sqrt", kMin, kMax, "sqrt", nullptr, ""},
    {"Reciprocal", kMin, kMax, "reciprocal", nullptr, ""},
    {"Sin", kMin, kMax, "sin", nullptr, ""},
    {"Cos", kMin, kMax, "cos", nullptr, ""},
    {"Tanh", kMin, kMax, "tanh", nullptr, ""},
    {"Tan", kMin, kMax, "tan", nullptr, ""},
    {"Asin", kMin, kMax, "asin", nullptr, ""},
    {"Acos", kMin, kMax, "acos", nullptr, ""},
    {"Atan", kMin, kMax, "atan", nullptr, ""},
    {"Sinh", kMin, kMax, "sinh", nullptr, ""},
    {"Cosh", kMin, kMax, "cosh", nullptr, ""},
    {"Asinh", kMin, kMax, "asinh", nullptr, ""},
    {"Acosh", kMin, kMax, "acosh", nullptr, ""},
    {"Atanh", kMin, kMax, "atanh", nullptr, ""},
    {"Sigmoid", kMin, kMax, "sigmoid", nullptr, ""},
    {"Relu", kMin, kMax, "relu", nullptr, ""},
    {"Erf", kMin, kMax, "erf", nullptr, ""},
    {"Floor", kMin, kMax, "floor", nullptr, ""},
    {"Ceil", kMin, kMax, "ceil", nullptr, ""},
    {"Round", kMin, kMax, "round", nullptr, ""},
    {"Sign", kMin, kMax, "sign", nullptr, ""},
    {"Not", kMin, kMax, "logical_not", nullptr, ""},
    {"IsNaN", kMin, kMax, "isnan", nullptr, ""},
    {"IsInf", kMin, kMax, "isinf", is_inf, "detect_negative and detect_positive both 1"},
    {"Add", kMin, kMax, "add", binary, ""},
    {"Sub", kMin, kMax, "sub", binary, ""},
    {"Mul", kMin, kMax, "mul", binary, ""},
    {"Div", kMin, kMax, "div", binary, ""},
    {"Mod", kMin, kMax, "fmod|remainder", binary, ""},
    {"Pow", kMin, kMax, "pow", nullptr, ""},
    {"Equal", kMin, kMax, "eq", binary, ""},
    {"Less", kMin, kMax, "lt", nullptr, ""},
    {"LessOrEqual", kMin, kMax, "le", nullptr, ""},
    {"Greater", kMin, kMax, "gt", nullptr, ""},
    {"GreaterOrEqual", kMin, kMax, "ge", nullptr, ""},
    {"And", kMin, kMax, "logical_and", nullptr, ""},
    {"Or", kMin, kMax, "logical_or", nullptr, ""},
    {"Xor", kMin, kMax, "logical_xor", nullptr, ""},
    {"BitwiseAnd", 18, kMax, "bitwise_and", nullptr, ""},
    {"BitwiseOr", 18, kMax, "bitwise_or", nullptr, ""},
    {"BitwiseXor", 18, kMax, "bitwise_xor", nullptr, ""},
    {"Where", kMin, kMax, "where", where, ""},
    {"Max", kMin, kMax, "maximum", variadic, ""},
    {"Min", kMin, kMax, "minimum", variadic, ""},
    {"Sum", kMin, kMax, "add", variadic, ""},
    {"Mean", kMin, kMax, "add+div", variadic, ""},
    {"Clip", kMin, kMax, "clamp", clip, ""},
    {"Cast", kMin, kMax, "copy", cast, "string and float8 types"},
    {"CastLike", 15, kMax, "copy", cast, "string and float8 types"},
    // Activations.
    {"Softmax", kMin, kMax, "softmax", softmax, ""},
    {"LogSoftmax", kMin, kMax, "log_softmax", softmax, ""},
    {"Gelu", 20, kMax, "gelu", gelu, ""},
    {"LeakyRelu", kMin, kMax, "gt+mul+where", leaky_relu, ""},
    {"Elu", kMin, kMax, "gt+expm1+mul+where", elu, ""},
    {"HardSigmoid", kMin, kMax, "mul+add+clamp", hard_sigmoid, ""},
    {"HardSwish", 14, kMax, "mul+add+clamp+mul", hard_swish, ""},
    // Linear algebra, convolution, pooling, normalisation.
    {"MatMul", kMin, kMax, "matmul", nullptr, ""},
    {"Gemm", kMin, kMax, "linear|addmm|mm", gemm, "transA/transB need the catalog's permute"},
    {"Conv", kMin, kMax, "conv1d|conv2d", conv, "1-D and 2-D; symmetric pads"},
    {"ConvTranspose", kMin, kMax, "conv_transpose2d", conv, "2-D; symmetric pads; no output_shape"},
    {"MaxPool", kMin, kMax, "max_pool2d", pool, "2-D; symmetric pads; storage_order 0; no Indices output"},
    {"AveragePool", kMin, kMax, "avg_pool2d", pool, "2-D; symmetric pads; no dilations"},
    {"GlobalAveragePool", kMin, kMax, "mean", global_pool, ""},
    {"GlobalMaxPool", kMin, kMax, "amax", global_pool, ""},
    {"BatchNormalization", kMin, kMax, "batch_norm", batch_norm, "inference only (training_mode 0)"},
    {"LayerNormalization", 17, kMax, "layer_norm", layer_norm, "normalized dims known at load; Mean/InvStdDev outputs"},
    // Reductions.
    {"ReduceMean", kMin, kMax, "mean", reduce, "axes known at load"},
    {"ReduceSum", kMin, kMax, "sum", reduce, "axes known at load"},
    {"ReduceMax", kMin, kMax, "amax", reduce, "axes known at load"},
    {"ReduceMin", kMin, kMax, "amin", reduce, "axes known at load"},
    {"ReduceProd", kMin, kMax, "prod", reduce, "axes known at load"},
    {"ReduceL1", kMin, kMax, "abs+sum", reduce, "axes known at load"},
    {"ReduceL2", kMin, kMax, "norm", reduce, "axes known at load"},
    {"ReduceSumSquare", kMin, kMax, "mul+sum", reduce, "axes known at load"},
    {"ReduceLogSumExp", kMin, kMax, "logsumexp", reduce, "axes known at load"},
    {"ArgMax", kMin, kMax, "argmax", arg_reduce, "select_last_index 0"},
    {"ArgMin", kMin, kMax, "argmin", arg_reduce, "select_last_index 0"},
    {"CumSum", kMin, kMax, "cumsum", cumsum, "exclusive 0, reverse 0; axis known at load"},
    {"TopK", kMin, kMax, "topk", topk, "K known at load"},
    // Shapes and data movement.
    {"Identity", kMin, kMax, "", identity, ""},
    {"Dropout", kMin, kMax, "", identity, "inference only"},
    {"Constant", kMin, kMax, "", constant, "no string or sparse values"},
    {"Shape", kMin, kMax, "", shape, ""},
    {"Size", kMin, kMax, "", size, ""},
    {"Reshape", kMin, kMax, "reshape", reshape, "target known at load; run-time dims: self's dim at the same index (copied), one other inferred, and leading run-time dims merged for a Gemm and split back after it (the Gemm runs unflattened)"},
    {"Flatten", kMin, kMax, "reshape", flatten, "at most one run-time dim in the result"},
    {"Squeeze", kMin, kMax, "reshape", squeeze, "axes known at load"},
    {"Unsqueeze", kMin, kMax, "reshape", unsqueeze, "axes known at load"},
    {"Transpose", kMin, kMax, "permute", transpose, ""},
    {"Concat", kMin, kMax, "cat", concat, ""},
    {"Split", kMin, kMax, "split", split, "split sizes known at load"},
    {"Gather", kMin, kMax, "index_select|embedding", gather, "indices of rank <= 1, or any rank into a 2-D table on axis 0; negative run-time indices"},
    {"Slice", kMin, kMax, "index_select", slice, "starts/axes/steps known at load; ends known at load or a run-time dim (then start 0, step 1); run-time dims otherwise sliced whole"},
    {"Expand", kMin, kMax, "copy", expand, "shape known at load (run-time dims allowed)"},
    {"ConstantOfShape", kMin, kMax, "fill", constant_of_shape, ""},
    {"Range", kMin, kMax, "arange|fill+cumsum+sub", range, "a run-time limit only with start 0, delta 1"},
    {"Trilu", 14, kMax, "tril|triu", trilu, "k known at load"},
    {"Tile", kMin, kMax, "repeat", tile, "repeats known at load"},
    {"Pad", kMin, kMax, "pad", pad, "pads known at load; mode wrap"},
};

}  // namespace

const std::vector<OpRule>& op_table() { return kTable; }

}  // namespace hal::onnx::detail

namespace hal::onnx {

std::vector<OperatorSupport> supported_operators() {
  std::vector<OperatorSupport> out;
  for (const detail::OpRule& r : detail::op_table()) out.push_back({r.op_type, r.min_opset, r.max_opset, r.catalog, r.limits});
  return out;
}

}  // namespace hal::onnx

namespace hal::onnx::detail {

const OpRule* find_rule(const std::string& op_type, int64_t opset) {
  for (const OpRule& r : kTable)
    if (op_type == r.op_type && opset >= r.min_opset && opset <= r.max_opset) return &r;
  return nullptr;
}

void translate_node(Translator& t) {
  const OpRule* r = find_rule(t.node().op_type(), t.opset());
  if (!r) {
    for (const OpRule& any : kTable)
      if (t.node().op_type() == any.op_type)
        t.unimplemented("HAL maps " + std::string(any.op_type) + " for opsets " + std::to_string(any.min_opset) + ".." +
                        std::to_string(any.max_opset) + " only");
    t.unimplemented("operator not supported (no mapping to the HAL op catalog; docs/onnx.md lists the supported ones)");
  }
  if (r->convert) r->convert(t, *r);
  else direct(t, *r);
}

}  // namespace hal::onnx::detail
