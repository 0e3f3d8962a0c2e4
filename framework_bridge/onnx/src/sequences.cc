// Sequences: a sequence is a list of tensors the translation keeps (Slot's
// elements: each a graph value, a constant or folded integers), so its
// operators resolve at load — SequenceConstruct/Empty/Insert/Erase/At/Length
// edit the list, SplitToSequence and ConcatFromSequence become a split and a
// cat/stack, SequenceMap runs its body once per element. Positions come from
// Translator::known (a graph input bound per run, a computed one read while
// the model runs). A sequence's length is fixed per translation: a sequence
// graph input is bound per run with its elements' count and shapes
// (Model::bind), a sequence output returns its elements.
#include <string>
#include <vector>

#include "converters.hpp"
#include "hal/common/dtype.hpp"
#include "tensor_proto.hpp"

namespace hal::onnx::detail {

namespace {

using V = Graph::Value;

const Slot& sequence_input(Translator& t, size_t i) {
  const Slot& s = t.in(i);
  if (!s.sequence) t.invalid("input " + std::to_string(i) + " ('" + t.input_name(i) + "') is a tensor, not a sequence");
  return s;
}

Slot make_sequence(hal_dtype_e dtype, std::vector<Slot> elements) {
  Slot s;
  s.sequence = true;
  s.spec = {dtype, {}};
  s.elements = std::move(elements);
  return s;
}

// Position input I (one integer) for a sequence of N elements: negative ones
// count from the end; INVALID_ARGUMENT unless in [-N, N - 1] (+1 with END_OK).
size_t position(Translator& t, size_t i, size_t n, bool end_ok) {
  std::vector<int64_t> p = t.known_ints(i, "the position");
  if (p.size() != 1) t.invalid("the position has " + std::to_string(p.size()) + " elements (one)");
  const int64_t len = static_cast<int64_t>(n), hi = end_ok ? len : len - 1;
  if (p[0] < -len || p[0] > hi)
    t.invalid("position " + std::to_string(p[0]) + " is out of range for a sequence of " + std::to_string(n) +
              " (valid: " + std::to_string(-len) + ".." + std::to_string(hi) + ")");
  return static_cast<size_t>(p[0] < 0 ? p[0] + len : p[0]);
}

void check_element(Translator& t, const Slot& seq, const Slot& x, const std::string& what) {
  if (x.sequence) t.invalid(what + " is a sequence (a tensor expected)");
  if (seq.spec.dtype != HAL_DTYPE_INVALID && x.spec.dtype != seq.spec.dtype)
    t.invalid(what + " has dtype " + common::dtype_name(x.spec.dtype) + "; the sequence holds " +
              common::dtype_name(seq.spec.dtype));
}

void sequence_construct(Translator& t, const OpRule&) {
  if (t.input_count() == 0) t.invalid("needs at least one tensor");
  std::vector<Slot> elements;
  for (size_t i = 0; i < t.input_count(); ++i) {
    const Slot& x = t.in(i);
    if (x.sequence || x.spec.dtype != t.in(0).spec.dtype)
      t.invalid("input " + std::to_string(i) + " is not a tensor of the first one's dtype");
    elements.push_back(x);
  }
  t.alias_output(0, make_sequence(t.in(0).spec.dtype, std::move(elements)));
}

void sequence_empty(Translator& t, const OpRule&) {
  const int64_t code = t.attr_int("dtype", 1);
  const hal_dtype_e dt = dtype_from_onnx(static_cast<int32_t>(code));
  if (dt == HAL_DTYPE_INVALID) t.unimplemented("dtype " + onnx_dtype_name(static_cast<int32_t>(code)) + " (no HAL dtype)");
  t.alias_output(0, make_sequence(dt, {}));
}

void sequence_insert(Translator& t, const OpRule&) {
  Slot seq = sequence_input(t, 0);
  const Slot& x = t.in(1);
  check_element(t, seq, x, "the inserted tensor");
  const size_t at = t.has_input(2) ? position(t, 2, seq.elements.size(), true) : seq.elements.size();
  seq.elements.insert(seq.elements.begin() + static_cast<long>(at), x);
  seq.spec.dtype = x.spec.dtype;
  t.alias_output(0, seq);
}

void sequence_erase(Translator& t, const OpRule&) {
  Slot seq = sequence_input(t, 0);
  if (seq.elements.empty()) t.invalid("erases from an empty sequence");
  const size_t at = t.has_input(1) ? position(t, 1, seq.elements.size(), false) : seq.elements.size() - 1;
  seq.elements.erase(seq.elements.begin() + static_cast<long>(at));
  t.alias_output(0, seq);
}

void sequence_at(Translator& t, const OpRule&) {
  const Slot& seq = sequence_input(t, 0);
  t.alias_output(0, seq.elements[position(t, 1, seq.elements.size(), false)]);
}

void sequence_length(Translator& t, const OpRule&) {
  const Slot& seq = sequence_input(t, 0);
  t.set_output_host(0, int_tensor(HAL_DTYPE_INT64, {static_cast<int64_t>(seq.elements.size())}, {}));
}

// SplitToSequence: split sizes from `split` (a scalar: chunks of that size,
// the last smaller; a 1-D tensor: the sizes) or, without it, slices of one
// (dropped axis unless keepdims).
void split_to_sequence(Translator& t, const OpRule&) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  const int64_t axis = norm_axis(t, t.attr_int("axis", 0), shape.size());
  const int64_t len = shape[static_cast<size_t>(axis)];
  if (len < 0) t.unimplemented("a split along a dim only known at run time");
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (t.has_input(1)) {
    std::vector<int64_t> split = t.known_ints(1, "SplitToSequence's split");
    if (t.in(1).spec.shape.empty()) {
      if (split.at(0) <= 0) t.invalid("split " + std::to_string(split[0]) + " is not positive");
      for (int64_t left = len; left > 0; left -= split[0]) sizes.push_back(std::min(left, split[0]));
    } else {
      sizes = split;
      int64_t sum = 0;
      for (int64_t s : sizes) {
        if (s < 0) t.invalid("split holds a negative size " + std::to_string(s));
        sum += s;
      }
      if (sum != len) t.invalid("split sizes sum to " + std::to_string(sum) + "; the axis has " + std::to_string(len));
    }
  } else {
    sizes.assign(static_cast<size_t>(len), 1);
    squeeze = t.attr_int("keepdims", 1) == 0;
  }
  std::vector<Slot> elements;
  if (!sizes.empty()) {
    std::vector<V> parts = t.emit("split", {t.value(0)}, {Attr::i("dim", axis), Attr::ints("sizes", sizes)}, sizes.size());
    for (V p : parts) {
      if (squeeze) {
        std::vector<int64_t> out = shape;
        out.erase(out.begin() + axis);
        p = reshape_to(t, p, out);
      }
      Slot e;
      e.value = p;
      e.spec = {t.spec(p).dtype, t.spec(p).shape};
      elements.push_back(e);
    }
  }
  t.alias_output(0, make_sequence(t.in(0).spec.dtype, std::move(elements)));
}

void concat_from_sequence(Translator& t, const OpRule&) {
  const Slot& seq = sequence_input(t, 0);
  if (seq.elements.empty()) t.invalid("concatenates an empty sequence");
  const bool new_axis = t.attr_int("new_axis", 0) != 0;
  const size_t rank = seq.elements[0].spec.shape.size() + (new_axis ? 1 : 0);
  if (t.attr("axis") == nullptr) t.invalid("needs the attribute 'axis'");
  const int64_t axis = norm_axis(t, t.attr_int("axis", 0), rank);
  std::vector<V> vs;
  for (size_t i = 0; i < seq.elements.size(); ++i) {
    const Slot& e = seq.elements[i];
    if (e.value.valid()) vs.push_back(e.value);
    else if (e.host) vs.push_back(t.constant(*e.host));
    else t.unimplemented("element " + std::to_string(i) + " is shape arithmetic over run-time dims");
  }
  t.set_output(0, t.emit1(new_axis ? "stack" : "cat", vs, {Attr::i("dim", axis)}));
}

// SequenceMap: the body once per element of the first input; further inputs
// are sequences of the same length (their element i) or tensors (as is);
// each body output collects into an output sequence.
void sequence_map(Translator& t, const OpRule&) {
  const ::onnx::AttributeProto* a = t.attr("body");
  if (a == nullptr || !a->has_g()) t.invalid("needs the graph attribute 'body'");
  const Slot& first = sequence_input(t, 0);
  const size_t n = first.elements.size();
  for (size_t j = 1; j < t.input_count(); ++j)
    if (t.in(j).sequence && t.in(j).elements.size() != n)
      t.invalid("input " + std::to_string(j) + " is a sequence of " + std::to_string(t.in(j).elements.size()) +
                " elements; the first has " + std::to_string(n));
  std::vector<std::vector<Slot>> outs(t.output_count());
  const std::string here = t.where();
  for (size_t i = 0; i < n; ++i) {
    std::vector<Slot> ins;
    for (size_t j = 0; j < t.input_count(); ++j) ins.push_back(t.in(j).sequence ? t.in(j).elements[i] : t.in(j));
    std::vector<Slot> r = run_subgraph(t, a->g(), ins, "in the body of " + here + ", element " + std::to_string(i) + ": ");
    if (r.size() != outs.size()) t.invalid("the body gives " + std::to_string(r.size()) + " outputs for " + std::to_string(outs.size()));
    for (size_t k = 0; k < r.size(); ++k) outs[k].push_back(r[k]);
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    hal_dtype_e dt = outs[k].empty() ? HAL_DTYPE_INVALID : outs[k][0].spec.dtype;
    if (outs[k].empty() && static_cast<int>(k) < a->g().output_size()) {
      const auto& type = a->g().output(static_cast<int>(k)).type();
      if (type.has_tensor_type()) dt = dtype_from_onnx(type.tensor_type().elem_type());
    }
    t.alias_output(k, make_sequence(dt, std::move(outs[k])));
  }
}

// ---- optionals: a value or nothing, known at load ----
void optional(Translator& t, const OpRule&) {
  Slot o;
  o.optional = true;
  if (t.has_input(0)) {
    o.spec = t.in(0).spec;
    o.elements.push_back(t.in(0));
  } else if (t.attr("type") == nullptr) {
    t.invalid("an empty Optional needs the attribute 'type'");
  }
  t.alias_output(0, o);
}

void optional_has_element(Translator& t, const OpRule&) {
  const bool present = t.has_input(0) && (!t.in(0).optional || !t.in(0).elements.empty());
  t.set_output_host(0, int_tensor(HAL_DTYPE_BOOL, {present ? 1 : 0}, {}));
}

void optional_get_element(Translator& t, const OpRule&) {
  const Slot& o = t.in(0);
  if (!o.optional) {  // a tensor or a sequence (18): itself
    t.alias_output(0, o);
    return;
  }
  if (o.elements.empty()) t.invalid("input 0 ('" + t.input_name(0) + "') is an empty optional");
  t.alias_output(0, o.elements[0]);
}

}  // namespace

const std::vector<OpRule>& sequence_rows() {
  static const std::vector<OpRule> rows = {
      {"SequenceConstruct", 11, 11, "(a list kept at load)", sequence_construct, ""},
      {"SequenceEmpty", 11, 11, "(a list kept at load)", sequence_empty, ""},
      {"SequenceInsert", 11, 11, "(a list kept at load)", sequence_insert, "position known at load or read while the model runs"},
      {"SequenceErase", 11, 11, "(a list kept at load)", sequence_erase, "position known at load or read while the model runs"},
      {"SequenceAt", 11, 11, "(a list kept at load)", sequence_at, "position known at load or read while the model runs"},
      {"SequenceLength", 11, 11, "(a list kept at load)", sequence_length, ""},
      {"SplitToSequence", 11, 24, "split|split+reshape", split_to_sequence, "split known at load or read while the model runs"},
      {"ConcatFromSequence", 11, 11, "cat|stack", concat_from_sequence, ""},
      {"SequenceMap", 17, 17, "(the body per element)", sequence_map, ""},
      {"Optional", 15, 28, "(a value or nothing, kept at load)", optional, "no optional graph inputs"},
      {"OptionalHasElement", 15, 28, "(known at load)", optional_has_element, "no optional graph inputs"},
      {"OptionalGetElement", 15, 28, "(known at load)", optional_get_element, "no optional graph inputs"},
  };
  return rows;
}

}  // namespace hal::onnx::detail
