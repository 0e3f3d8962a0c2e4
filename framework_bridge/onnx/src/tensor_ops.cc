// Tensor operators composed from catalog ops, each as ONNX's reference
// computes it: OneHot, the normalizations without a catalog op of their own
// (InstanceNormalization, GroupNormalization, MeanVarianceNormalization,
// LRN), ReverseSequence, TensorScatter, Einsum, Col2Im, MaxUnpool, Det,
// AffineGrid, GridSample, the window functions and BitShift.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "converters.hpp"
#include "hal/common/dtype.hpp"
#include "tensor_proto.hpp"

namespace hal::onnx::detail {

namespace {

using V = Graph::Value;

// Every dim of SHAPE known at load; otherwise UNIMPLEMENTED naming WHAT.
void require_static(Translator& t, const std::vector<int64_t>& shape, const std::string& what) {
  for (int64_t d : shape)
    if (d < 0) t.unimplemented(what + " with a dim only known at run time (shape " + shape_text(shape) + ")");
}

// One integer known at load (or bound per run) from input I.
int64_t one_int(Translator& t, size_t i, const std::string& what) {
  auto f = float_values(t.known(i, what));
  if (!f || f->size() != 1) t.invalid(what + " must be one number");
  return static_cast<int64_t>((*f)[0]);
}

// A constant of dtype DT and SHAPE holding VALUES (float or integer DT).
V typed_constant(Translator& t, hal_dtype_e dt, const std::vector<int64_t>& shape, const std::vector<double>& values) {
  if (!is_float(dt)) {
    std::vector<int64_t> ints(values.begin(), values.end());
    return t.constant(int_tensor(dt, ints, shape));
  }
  if (dt == HAL_DTYPE_FLOAT64) {
    HostTensor h{dt, shape, std::vector<uint8_t>(values.size() * 8)};
    std::memcpy(h.data.data(), values.data(), h.data.size());
    return t.constant(h);
  }
  std::vector<float> f(values.begin(), values.end());
  return as_dtype(t, float_constant(t, shape, f), dt);
}

// ---- OneHot ----
// out = on where (index, negative ones + depth) equals the position along
// AXIS, off elsewhere; indices outside [-depth, depth) match nothing.
void one_hot(Translator& t, const OpRule&) {
  const std::vector<int64_t> ishape = t.in(0).spec.shape;
  const int64_t depth = one_int(t, 1, "OneHot's depth");
  if (depth < 0) t.invalid("depth " + std::to_string(depth) + " is negative");
  const int64_t rank = static_cast<int64_t>(ishape.size()) + 1;
  int64_t axis = t.attr_int("axis", -1);
  if (axis < -rank || axis >= rank) t.invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  const std::vector<int64_t>& vshape = t.in(2).spec.shape;
  if (numel(vshape) != 2) t.invalid("values has shape " + shape_text(vshape) + " (two elements: off, on)");
  const hal_dtype_e it = t.in(0).spec.dtype;
  const hal_dtype_e ct = is_float(it) ? it : HAL_DTYPE_INT64;
  V idx = as_dtype(t, t.value(0), ct);
  idx = t.emit1("where", {t.emit1("lt", {idx, scalar(t, ct, 0)}), t.emit1("add", {idx, scalar(t, ct, static_cast<double>(depth))}), idx});
  std::vector<int64_t> ishape1 = ishape;
  ishape1.insert(ishape1.begin() + axis, 1);
  idx = reshape_to(t, idx, ishape1);
  std::vector<double> classes(static_cast<size_t>(depth));
  for (int64_t c = 0; c < depth; ++c) classes[static_cast<size_t>(c)] = static_cast<double>(c);
  std::vector<int64_t> cshape(static_cast<size_t>(rank), 1);
  cshape[static_cast<size_t>(axis)] = depth;
  V hit = t.emit1("eq", {idx, typed_constant(t, ct, cshape, classes)});
  V values = reshape_to(t, t.value(2), {2});
  std::vector<V> off_on = t.emit("split", {values}, {Attr::i("dim", 0), Attr::i("split_size", 1)}, 2);
  V off = reshape_to(t, off_on[0], {}), on = reshape_to(t, off_on[1], {});
  t.set_output(0, t.emit1("where", {hit, on, off}));
}

// ---- normalizations ----
// InstanceNormalization: group_norm with a group per channel.
void instance_norm(Translator& t, const OpRule&) {
  const std::vector<int64_t>& x = t.in(0).spec.shape;
  if (x.size() < 3) t.invalid("input has rank " + std::to_string(x.size()) + " (N, C and at least one spatial dim)");
  if (x[1] < 0) t.unimplemented("a channel count only known at run time");
  t.set_output(0, t.emit("group_norm", {t.value(0), t.value(1), t.value(2)},
                         {Attr::i("num_groups", x[1]), Attr::f("eps", t.attr_float("epsilon", 1e-5f))}, 3)[0]);
}

// GroupNormalization: scale and bias per channel (21) or per group (18,
// repeated over the group's channels); statistics in float32 (stash_type 1).
void group_norm(Translator& t, const OpRule&) {
  const std::vector<int64_t>& x = t.in(0).spec.shape;
  if (x.size() < 3) t.invalid("input has rank " + std::to_string(x.size()) + " (N, C and at least one spatial dim)");
  const int64_t groups = t.attr_int("num_groups", 0), channels = x[1];
  if (channels < 0) t.unimplemented("a channel count only known at run time");
  if (groups <= 0 || channels % groups != 0)
    t.invalid("num_groups " + std::to_string(groups) + " does not divide the " + std::to_string(channels) + " channels");
  V scale = t.value(1), bias = t.value(2);
  if (t.opset() < 21) {
    std::vector<int64_t> idx(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) idx[static_cast<size_t>(c)] = c / (channels / groups);
    V index = t.constant(int_tensor(HAL_DTYPE_INT64, idx, {channels}));
    scale = t.emit1("index_select", {scale, index}, {Attr::i("dim", 0)});
    bias = t.emit1("index_select", {bias, index}, {Attr::i("dim", 0)});
  }
  const hal_dtype_e dt = t.in(0).spec.dtype;
  const bool stash = t.attr_int("stash_type", 1) == 1 && dt != HAL_DTYPE_FLOAT64;
  const hal_dtype_e ct = stash ? HAL_DTYPE_FLOAT32 : dt;
  V y = t.emit("group_norm", {as_dtype(t, t.value(0), ct), as_dtype(t, scale, ct), as_dtype(t, bias, ct)},
               {Attr::i("num_groups", groups), Attr::f("eps", t.attr_float("epsilon", 1e-5f))}, 3)[0];
  t.set_output(0, as_dtype(t, y, dt));
}

std::vector<int64_t> axes_attr(Translator& t, const char* name, std::vector<int64_t> fallback, size_t rank) {
  std::vector<int64_t> axes = t.attr_ints(name).value_or(fallback);
  for (int64_t& a : axes) a = norm_axis(t, a, rank, "axes entry");
  return axes;
}

// MeanVarianceNormalization: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9).
void mean_variance_norm(Translator& t, const OpRule&) {
  const size_t rank = t.in(0).spec.shape.size();
  std::vector<int64_t> axes = axes_attr(t, "axes", {0, 2, 3}, rank);
  const hal_dtype_e dt = t.in(0).spec.dtype;
  V x = t.value(0);
  auto mean = [&](V v) { return t.emit1("mean", {v}, {Attr::ints("dim", axes), Attr::b("keepdim", true)}); };
  V m = mean(x);
  V sq_mean = mean(t.emit1("mul", {x, x}));
  V sd = t.emit1("sqrt", {t.emit1("sub", {sq_mean, t.emit1("mul", {m, m})})});
  t.set_output(0, t.emit1("div", {t.emit1("sub", {x, m}), t.emit1("add", {sd, scalar(t, dt, 1e-9)})}));
}

// LRN: x / (bias + alpha / size * (sum of x^2 over the channel window))^beta;
// the window [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to the channels.
void lrn(Translator& t, const OpRule&) {
  const std::vector<int64_t>& x = t.in(0).spec.shape;
  if (x.size() < 3) t.invalid("input has rank " + std::to_string(x.size()) + " (N, C and at least one spatial dim)");
  const int64_t size = t.attr_int("size", 0);
  if (size <= 0) t.invalid("size " + std::to_string(size) + " (a positive window)");
  const hal_dtype_e dt = t.in(0).spec.dtype;
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  V v = t.value(0);
  V sq = t.emit1("mul", {v, v});
  std::vector<int64_t> pad(2 * (x.size() - 2), 0);  // torch order: last dim first
  pad.push_back(lo);
  pad.push_back(hi);
  V padded = t.emit1("pad", {sq}, {Attr::ints("pad", pad), Attr::s("mode", "constant"), Attr::scalar("value", 0.0)});
  V sum;
  for (int64_t k = 0; k < size; ++k) {
    V part = crop(t, padded, 1, k, size - 1 - k);
    sum = sum.valid() ? t.emit1("add", {sum, part}) : part;
  }
  const double alpha = t.attr_float("alpha", 1e-4f), beta = t.attr_float("beta", 0.75f), bias = t.attr_float("bias", 1.0f);
  V denom = t.emit1("add", {scalar(t, dt, bias), t.emit1("mul", {sum, scalar(t, dt, alpha / static_cast<double>(size))})});
  t.set_output(0, t.emit1("div", {v, t.emit1("pow", {denom, scalar(t, dt, beta)})}));
}

// ---- sequences along an axis ----
// ReverseSequence: per batch entry b the first lens[b] entries along the
// time axis reversed (lens known at load or bound per run).
void reverse_sequence(Translator& t, const OpRule&) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  if (shape.size() < 2) t.invalid("input has rank " + std::to_string(shape.size()) + " (at least 2)");
  require_static(t, shape, "ReverseSequence's input");
  const int64_t time = t.attr_int("time_axis", 0), batch = t.attr_int("batch_axis", 1);
  if (!((time == 0 && batch == 1) || (time == 1 && batch == 0)))
    t.invalid("time_axis " + std::to_string(time) + " and batch_axis " + std::to_string(batch) + " (0 and 1, in either order)");
  std::vector<Dim> lens_dims;
  for (int64_t l : t.const_ints(1, "sequence_lens")) lens_dims.push_back(Dim::of(l));
  const std::vector<Dim>* lens = &lens_dims;
  const int64_t T = shape[static_cast<size_t>(time)], B = shape[static_cast<size_t>(batch)];
  if (static_cast<int64_t>(lens->size()) != B)
    t.invalid("sequence_lens has " + std::to_string(lens->size()) + " entries for a batch of " + std::to_string(B));
  std::vector<int64_t> idx;  // over the first two dims flattened, in the input's order
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j) {
      const int64_t s = time == 0 ? i : j, b = time == 0 ? j : i;
      const int64_t len = (*lens)[static_cast<size_t>(b)].value;
      if (len < 0 || len > T) t.invalid("sequence_lens holds " + std::to_string(len) + ", outside [0, " + std::to_string(T) + "]");
      const int64_t src = s < len ? len - 1 - s : s;
      idx.push_back(time == 0 ? src * shape[1] + b : b * shape[1] + src);
    }
  std::vector<int64_t> flat = shape;
  flat.erase(flat.begin());
  flat[0] = shape[0] * shape[1];
  V index = t.constant(int_tensor(HAL_DTYPE_INT64, idx, {static_cast<int64_t>(idx.size())}));
  V rows = t.emit1("index_select", {reshape_to(t, t.value(0), flat), index}, {Attr::i("dim", 0)});
  t.set_output(0, reshape_to(t, rows, shape));
}

// TensorScatter (24): present = past with update written along AXIS at
// write_indices[b] + i (mod the cache length when circular), per batch b.
void tensor_scatter(Translator& t, const OpRule&) {
  const std::vector<int64_t> past = t.in(0).spec.shape, upd = t.in(1).spec.shape;
  require_static(t, past, "TensorScatter's past_cache");
  require_static(t, upd, "TensorScatter's update");
  if (past.size() != upd.size() || past.size() < 2)
    t.invalid("past_cache " + shape_text(past) + " and update " + shape_text(upd) + " differ in rank (at least 2)");
  const int64_t axis = norm_axis(t, t.attr_int("axis", -2), past.size());
  if (axis == 0) t.invalid("axis 0 is the batch axis");
  for (size_t d = 0; d < past.size(); ++d)
    if (static_cast<int64_t>(d) == axis ? upd[d] > past[d] : upd[d] != past[d])
      t.invalid("update " + shape_text(upd) + " does not fit past_cache " + shape_text(past) + " along axis " + std::to_string(axis));
  const std::string mode = t.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") t.invalid("mode '" + mode + "' (linear or circular)");
  std::vector<double> steps(static_cast<size_t>(upd[static_cast<size_t>(axis)]));
  for (size_t i = 0; i < steps.size(); ++i) steps[i] = static_cast<double>(i);
  std::vector<int64_t> sshape(past.size(), 1);
  sshape[static_cast<size_t>(axis)] = upd[static_cast<size_t>(axis)];
  V pos = typed_constant(t, HAL_DTYPE_INT64, sshape, steps);
  if (t.has_input(2)) {
    std::vector<int64_t> wshape(past.size(), 1);
    wshape[0] = past[0];
    pos = t.emit1("add", {pos, reshape_to(t, as_dtype(t, t.value(2), HAL_DTYPE_INT64), wshape)});
  }
  if (mode == "circular") pos = t.emit1("remainder", {pos, scalar(t, HAL_DTYPE_INT64, static_cast<double>(past[static_cast<size_t>(axis)]))});
  V index = t.emit_as("copy", {pos}, {}, {HAL_DTYPE_INT64, upd});
  t.set_output(0, t.emit1("scatter", {t.value(0), index, t.value(1)}, {Attr::i("dim", axis)}));
}


// ---- Einsum ----
// Operands reduced to distinct labels (repeated ones: their diagonal),
// labels no one else needs summed out, then contracted pairwise as batched
// matmuls ([batch, left, contracted] x [batch, contracted, right]); the
// result summed over what the output drops and permuted into its order.
struct Labeled {
  V v;
  std::vector<int> labels;  // one per dim: a letter's code, or 1000 + i for ellipsis dim i (from the right)
};

std::vector<int> parse_term(Translator& t, const std::string& term, size_t rank, size_t& ellipsis_rank, bool output) {
  std::vector<int> labels;
  size_t letters = 0;
  for (char c : term)
    if (std::isalpha(static_cast<unsigned char>(c))) ++letters;
  const size_t dots = term.find("...");
  if (!output && dots == std::string::npos && letters != rank)
    t.invalid("term '" + term + "' has " + std::to_string(letters) + " labels for an operand of rank " + std::to_string(rank));
  if (!output && dots != std::string::npos) {
    if (letters > rank) t.invalid("term '" + term + "' has more labels than its operand's rank " + std::to_string(rank));
    ellipsis_rank = std::max(ellipsis_rank, rank - letters);
  }
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (term.compare(i, 3, "...") == 0) {
      const size_t n = output ? ellipsis_rank : rank - letters;
      for (size_t k = 0; k < n; ++k) labels.push_back(1000 + static_cast<int>(n - 1 - k));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      labels.push_back(c);
    } else {
      t.invalid(std::string("equation character '") + c + "' (letters, '...', ',' and '->')");
    }
  }
  return labels;
}

// V's diagonal over dims P < Q of equal size: Q dropped, P moved last.
Labeled diagonal(Translator& t, Labeled x, size_t p, size_t q) {
  std::vector<int64_t> shape = t.spec(x.v).shape;
  const int64_t n = shape[p];
  if (shape[q] != n) t.invalid("repeated label '" + std::string(1, static_cast<char>(x.labels[p])) + "' over dims of sizes " +
                               std::to_string(n) + " and " + std::to_string(shape[q]));
  std::vector<size_t> order;
  for (size_t d = 0; d < shape.size(); ++d)
    if (d != p && d != q) order.push_back(d);
  order.push_back(p);
  order.push_back(q);
  V moved = permuted(t, x.v, order);
  std::vector<int64_t> flat, out;
  std::vector<int> labels;
  for (size_t k = 0; k + 2 < order.size(); ++k) {
    flat.push_back(shape[order[k]]);
    labels.push_back(x.labels[order[k]]);
  }
  out = flat;
  flat.push_back(n * n);
  out.push_back(n);
  labels.push_back(x.labels[p]);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = i * (n + 1);
  V index = t.constant(int_tensor(HAL_DTYPE_INT64, idx, {n}));
  V d = t.emit1("index_select", {reshape_to(t, moved, flat), index}, {Attr::i("dim", static_cast<int64_t>(flat.size() - 1))});
  return {reshape_to(t, d, out), labels};
}

// X summed over every label not in KEEP.
Labeled sum_out(Translator& t, Labeled x, const std::vector<int>& keep) {
  std::vector<int64_t> dims;
  std::vector<int> labels;
  for (size_t d = 0; d < x.labels.size(); ++d) {
    if (std::find(keep.begin(), keep.end(), x.labels[d]) == keep.end()) dims.push_back(static_cast<int64_t>(d));
    else labels.push_back(x.labels[d]);
  }
  if (dims.empty()) return x;
  return {t.emit1("sum", {x.v}, {Attr::ints("dim", dims), Attr::b("keepdim", false)}), labels};
}

Labeled contract(Translator& t, Labeled a, Labeled b, const std::vector<int>& keep) {
  auto has = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  std::vector<int> batch, left, inner, right;
  for (int l : a.labels) {
    if (has(b.labels, l)) (has(keep, l) ? batch : inner).push_back(l);
    else left.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a.labels, l)) right.push_back(l);
  const std::vector<int64_t> as = t.spec(a.v).shape, bs = t.spec(b.v).shape;
  auto size_of = [&](const Labeled& x, const std::vector<int64_t>& s, int l) {
    return s[static_cast<size_t>(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin())];
  };
  // Broadcast size-1 dims of shared labels (ellipsis dims) to the other side's size.
  auto arrange = [&](const Labeled& x, const std::vector<int64_t>& s, const std::vector<std::vector<int>>& groups,
                     const Labeled& other, const std::vector<int64_t>& os) {
    std::vector<size_t> order;
    std::vector<int64_t> full, merged;
    bool expand = false;
    for (const auto& g : groups) {
      int64_t m = 1;
      for (int l : g) {
        order.push_back(static_cast<size_t>(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin()));
        int64_t n = size_of(x, s, l);
        if (has(other.labels, l)) {
          const int64_t on = size_of(other, os, l);
          if (n != on && n != 1 && on != 1)
            t.invalid("label sizes " + std::to_string(n) + " and " + std::to_string(on) + " do not broadcast");
          if (n == 1 && on != 1) {
            n = on;
            expand = true;
          }
        }
        full.push_back(n);
        m *= n;
      }
      merged.push_back(m);
    }
    V v = permuted(t, x.v, order);
    if (expand) v = t.emit_as("copy", {v}, {}, {t.spec(v).dtype, full});
    return std::make_pair(reshape_to(t, v, merged), full);
  };
  auto [av, afull] = arrange(a, as, {batch, left, inner}, b, bs);
  auto [bv, bfull] = arrange(b, bs, {batch, inner, right}, a, as);
  V prod = t.emit1("matmul", {av, bv});
  std::vector<int64_t> out(afull.begin(), afull.begin() + static_cast<long>(batch.size() + left.size()));
  out.insert(out.end(), bfull.end() - static_cast<long>(right.size()), bfull.end());
  std::vector<int> labels = batch;
  labels.insert(labels.end(), left.begin(), left.end());
  labels.insert(labels.end(), right.begin(), right.end());
  return {reshape_to(t, prod, out), labels};
}

void einsum(Translator& t, const OpRule&) {
  std::string eq;
  for (char c : t.attr_string("equation", "")) if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != t.input_count())
    t.invalid("equation '" + eq + "' has " + std::to_string(terms.size()) + " terms for " + std::to_string(t.input_count()) + " inputs");
  size_t ellipsis_rank = 0;
  std::vector<Labeled> ops;
  for (size_t i = 0; i < terms.size(); ++i) {
    require_static(t, t.in(i).spec.shape, "Einsum's input " + std::to_string(i));
    ops.push_back({t.value(i), parse_term(t, terms[i], t.in(i).spec.shape.size(), ellipsis_rank, false)});
  }
  std::vector<int> out;
  if (arrow != std::string::npos) {
    out = parse_term(t, eq.substr(arrow + 2), 0, ellipsis_rank, true);
  } else {  // implicit: the ellipsis dims, then the labels used once, alphabetically
    std::map<int, int> count;
    for (const Labeled& o : ops)
      for (int l : o.labels) ++count[l];
    for (size_t k = ellipsis_rank; k-- > 0;) out.push_back(1000 + static_cast<int>(k));
    for (auto [l, c] : count)
      if (l < 1000 && c == 1) out.push_back(l);
  }
  for (int l : out) {
    bool found = false;
    for (const Labeled& o : ops) found = found || std::find(o.labels.begin(), o.labels.end(), l) != o.labels.end();
    if (!found && l < 1000) t.invalid("output label '" + std::string(1, static_cast<char>(l)) + "' is in no input term");
  }
  for (Labeled& o : ops)  // repeated labels: the diagonal
    for (bool again = true; again;) {
      again = false;
      for (size_t p = 0; p < o.labels.size() && !again; ++p)
        for (size_t q = p + 1; q < o.labels.size() && !again; ++q)
          if (o.labels[p] == o.labels[q]) {
            o = diagonal(t, o, p, q);
            again = true;
          }
    }
  // Keep what the output or a later operand needs.
  auto needed_after = [&](size_t i) {
    std::vector<int> keep = out;
    for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(keep.end(), ops[j].labels.begin(), ops[j].labels.end());
    return keep;
  };
  std::vector<int> keep0 = needed_after(0);
  for (size_t j = 1; j < ops.size(); ++j) keep0.insert(keep0.end(), ops[j].labels.begin(), ops[j].labels.end());
  Labeled acc = sum_out(t, ops[0], keep0);
  for (size_t i = 1; i < ops.size(); ++i) {
    std::vector<int> keep = needed_after(i);
    std::vector<int> keep_b = keep;
    keep_b.insert(keep_b.end(), acc.labels.begin(), acc.labels.end());
    Labeled b = sum_out(t, ops[i], keep_b);
    acc = contract(t, acc, b, keep);
  }
  acc = sum_out(t, acc, out);
  std::vector<size_t> order;
  for (int l : out) {
    auto it = std::find(acc.labels.begin(), acc.labels.end(), l);
    if (it == acc.labels.end()) t.invalid("output label missing after the contraction");
    order.push_back(static_cast<size_t>(it - acc.labels.begin()));
  }
  t.set_output(0, permuted(t, acc.v, order));
}

// ---- images ----
// Col2Im: each column entry added into its image position (a scatter_add
// over a host-built index; entries falling into the padding go to a spare
// slot that is dropped).
void col2im(Translator& t, const OpRule&) {
  const std::vector<int64_t> x = t.in(0).spec.shape;
  require_static(t, x, "Col2Im's input");
  const std::vector<int64_t> image = t.const_ints(1, "Col2Im's image_shape");
  const std::vector<int64_t> block = t.const_ints(2, "Col2Im's block_shape");
  const size_t nd = image.size();
  if (x.size() != 3) t.invalid("input has rank " + std::to_string(x.size()) + " (3: N, C * prod(block_shape), L)");
  if (block.size() != nd) t.invalid("block_shape has " + std::to_string(block.size()) + " dims; image_shape " + std::to_string(nd));
  std::vector<int64_t> dil = t.attr_ints("dilations").value_or(std::vector<int64_t>(nd, 1));
  std::vector<int64_t> str = t.attr_ints("strides").value_or(std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = t.attr_ints("pads").value_or(std::vector<int64_t>(2 * nd, 0));
  if (dil.size() != nd || str.size() != nd || pads.size() != 2 * nd) t.invalid("dilations, strides or pads do not match " + std::to_string(nd) + " spatial dims");
  const int64_t k = numel(block);
  if (k <= 0 || x[1] % k != 0) t.invalid("input dim 1 (" + std::to_string(x[1]) + ") is not a multiple of prod(block_shape) " + std::to_string(k));
  std::vector<int64_t> blocks(nd);
  for (size_t d = 0; d < nd; ++d) {
    blocks[d] = (image[d] + pads[d] + pads[d + nd] - dil[d] * (block[d] - 1) - 1) / str[d] + 1;
    if (blocks[d] <= 0) t.invalid("no sliding block fits image dim " + std::to_string(d));
  }
  const int64_t l = numel(blocks), p = numel(image);
  if (x[2] != l) t.invalid("input dim 2 is " + std::to_string(x[2]) + "; the blocks give " + std::to_string(l));
  std::vector<int64_t> idx(static_cast<size_t>(k * l));
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t ll = 0; ll < l; ++ll) {
      int64_t pos = 0, rk = kk, rl = ll;
      bool inside = true;
      std::vector<int64_t> ko(nd), lo(nd);
      for (size_t d = nd; d-- > 0;) {
        ko[d] = rk % block[d];
        rk /= block[d];
        lo[d] = rl % blocks[d];
        rl /= blocks[d];
      }
      for (size_t d = 0; d < nd; ++d) {
        const int64_t at = lo[d] * str[d] - pads[d] + ko[d] * dil[d];
        inside = inside && at >= 0 && at < image[d];
        pos = pos * image[d] + at;
      }
      idx[static_cast<size_t>(kk * l + ll)] = inside ? pos : p;
    }
  const int64_t n = x[0], c = x[1] / k;
  V cols = reshape_to(t, t.value(0), {n, c, k * l});
  V index = t.emit_as("copy", {t.constant(int_tensor(HAL_DTYPE_INT64, idx, {1, 1, k * l}))}, {}, {HAL_DTYPE_INT64, {n, c, k * l}});
  V zeros = t.emit_as("fill", {}, {Attr::scalar("value", 0.0)}, {t.in(0).spec.dtype, {n, c, p + 1}});
  V img = crop(t, t.emit1("scatter_add", {zeros, index, cols}, {Attr::i("dim", 2)}), 2, 0, 1);
  std::vector<int64_t> out{n, c};
  out.insert(out.end(), image.begin(), image.end());
  t.set_output(0, reshape_to(t, img, out));
}

// MaxUnpool: X's values written at their (whole-tensor flat) indices into
// zeros of the inferred shape, padded at the end to output_shape.
void max_unpool(Translator& t, const OpRule&) {
  const std::vector<int64_t> x = t.in(0).spec.shape;
  require_static(t, x, "MaxUnpool's input");
  if (t.in(1).spec.shape != x) t.invalid("indices have shape " + shape_text(t.in(1).spec.shape) + ", X " + shape_text(x));
  const size_t nd = x.size() - 2;
  const std::vector<int64_t> kernel = t.attr_ints("kernel_shape").value_or(std::vector<int64_t>{});
  if (kernel.size() != nd) t.invalid("kernel_shape has " + std::to_string(kernel.size()) + " dims for " + std::to_string(nd) + " spatial dims");
  std::vector<int64_t> str = t.attr_ints("strides").value_or(std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = t.attr_ints("pads").value_or(std::vector<int64_t>(2 * nd, 0));
  std::vector<int64_t> inferred{x[0], x[1]};
  for (size_t d = 0; d < nd; ++d) inferred.push_back((x[d + 2] - 1) * str[d] - (pads[d] + pads[d + nd]) + kernel[d]);
  std::vector<int64_t> shape = inferred;
  if (t.has_input(2)) {
    shape = t.const_ints(2, "MaxUnpool's output_shape");
    if (shape.size() != x.size()) t.invalid("output_shape " + shape_text(shape) + " has the wrong rank");
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] < inferred[d]) t.invalid("output_shape " + shape_text(shape) + " is smaller than the inferred " + shape_text(inferred));
  }
  const int64_t total = numel(inferred), count = numel(x);
  V zeros = t.emit_as("fill", {}, {Attr::scalar("value", 0.0)}, {t.in(0).spec.dtype, {total}});
  V y = t.emit1("scatter", {zeros, reshape_to(t, as_dtype(t, t.value(1), HAL_DTYPE_INT64), {count}), reshape_to(t, t.value(0), {count})},
                {Attr::i("dim", 0)});
  y = reshape_to(t, y, inferred);
  if (shape != inferred) {
    std::vector<int64_t> pad;
    for (size_t d = shape.size(); d-- > 0;) {
      pad.push_back(0);
      pad.push_back(shape[d] - inferred[d]);
    }
    y = t.emit1("pad", {y}, {Attr::ints("pad", pad), Attr::s("mode", "constant"), Attr::scalar("value", 0.0)});
  }
  t.set_output(0, y);
}

// AffineGrid: theta ([N, 2, 3] / [N, 3, 4]) times the homogeneous base grid
// of the (load-time) size, in float64 as the reference computes it.
void affine_grid(Translator& t, const OpRule&) {
  std::vector<int64_t> size = t.const_ints(1, "AffineGrid's size");
  if (size.size() != 4 && size.size() != 5) t.invalid("size has " + std::to_string(size.size()) + " entries (N, C, H, W or N, C, D, H, W)");
  const bool align = t.attr_int("align_corners", 0) != 0;
  std::vector<int64_t> dims(size.begin() + 2, size.end());  // [D,] H, W
  const size_t nd = dims.size();
  const std::vector<int64_t> theta = t.in(0).spec.shape;
  if (theta != std::vector<int64_t>{size[0], static_cast<int64_t>(nd), static_cast<int64_t>(nd + 1)})
    t.invalid("theta has shape " + shape_text(theta) + "; size asks for [" + std::to_string(size[0]) + ", " + std::to_string(nd) +
              ", " + std::to_string(nd + 1) + "]");
  auto coords = [&](int64_t n) {
    std::vector<double> c(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      c[static_cast<size_t>(i)] = align ? (n == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1))
                                        : -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n);
    return c;
  };
  const int64_t points = numel(dims);
  std::vector<double> base;  // [points, nd + 1]: x, y(, z), 1 with x the fastest dim
  std::vector<std::vector<double>> axis(nd);
  for (size_t d = 0; d < nd; ++d) axis[d] = coords(dims[d]);
  for (int64_t p = 0; p < points; ++p) {
    std::vector<int64_t> at(nd);
    for (int64_t r = p, d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
      at[static_cast<size_t>(d)] = r % dims[static_cast<size_t>(d)];
      r /= dims[static_cast<size_t>(d)];
    }
    for (size_t d = nd; d-- > 0;) base.push_back(axis[d][static_cast<size_t>(at[d])]);
    base.push_back(1.0);
  }
  V grid = typed_constant(t, HAL_DTYPE_FLOAT64, {points, static_cast<int64_t>(nd + 1)}, base);
  const hal_dtype_e dt = t.in(0).spec.dtype;
  V th = permuted(t, as_dtype(t, t.value(0), HAL_DTYPE_FLOAT64), {0, 2, 1});  // [N, nd+1, nd]
  V out = t.emit1("matmul", {grid, th});                                       // [N, points, nd]
  std::vector<int64_t> shape{size[0]};
  shape.insert(shape.end(), dims.begin(), dims.end());
  shape.push_back(static_cast<int64_t>(nd));
  t.set_output(0, as_dtype(t, reshape_to(t, out, shape), dt));
}

// Det: the product of LU's diagonal, negated per row swap.
void det(Translator& t, const OpRule&) {
  const std::vector<int64_t> x = t.in(0).spec.shape;
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2] || x.back() < 0)
    t.invalid("input has shape " + shape_text(x) + " (square matrices [..., n, n])");
  require_static(t, x, "Det's input");
  const int64_t n = x.back();
  const hal_dtype_e dt = t.in(0).spec.dtype;
  const hal_dtype_e ct = dt == HAL_DTYPE_FLOAT64 ? dt : HAL_DTYPE_FLOAT32;
  std::vector<V> lu = t.emit("linalg_lu_factor", {as_dtype(t, t.value(0), ct)}, {}, 3);
  std::vector<int64_t> batch(x.begin(), x.end() - 2), flat = batch;
  flat.push_back(n * n);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<double> ones_based(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    idx[static_cast<size_t>(i)] = i * (n + 1);
    ones_based[static_cast<size_t>(i)] = static_cast<double>(i + 1);
  }
  V diag = t.emit1("index_select", {reshape_to(t, lu[0], flat), t.constant(int_tensor(HAL_DTYPE_INT64, idx, {n}))},
                   {Attr::i("dim", static_cast<int64_t>(batch.size()))});
  const int64_t last = static_cast<int64_t>(batch.size());
  V prod = t.emit1("prod", {diag}, {Attr::ints("dim", {last}), Attr::b("keepdim", false)});
  V swaps = t.emit1("ne", {lu[1], typed_constant(t, HAL_DTYPE_INT32, {n}, ones_based)});
  V count = t.emit1("sum", {as_dtype(t, swaps, HAL_DTYPE_INT64)}, {Attr::ints("dim", {last}), Attr::b("keepdim", false)});
  V odd = t.emit1("ne", {t.emit1("remainder", {count, scalar(t, HAL_DTYPE_INT64, 2)}), scalar(t, HAL_DTYPE_INT64, 0)});
  V result = t.emit1("where", {odd, t.emit1("neg", {prod}), prod});
  t.set_output(0, as_dtype(t, result, dt));
}

// ---- window functions: host constants of the (load-time) size ----
void window(Translator& t, const OpRule&) {
  const int64_t size = one_int(t, 0, t.node().op_type() + "'s size");
  if (size < 0) t.invalid("size " + std::to_string(size) + " is negative");
  const bool periodic = t.attr_int("periodic", 1) != 0;
  const int64_t code = t.attr_int("output_datatype", 1);
  const hal_dtype_e out = dtype_from_onnx(static_cast<int32_t>(code));
  if (out == HAL_DTYPE_INVALID || out == HAL_DTYPE_BOOL) t.invalid("output_datatype " + onnx_dtype_name(static_cast<int32_t>(code)));
  const double n1 = static_cast<double>(periodic ? size : size - 1), pi = 3.14159265358979323846;
  const std::string& op = t.node().op_type();
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    const double n = static_cast<double>(i);
    double v;
    if (op == "HannWindow") v = std::pow(std::sin(n * pi / n1), 2);
    else if (op == "HammingWindow") v = 25.0 / 46.0 - std::cos(n * pi * 2 / n1) * (1 - 25.0 / 46.0);
    else v = std::cos(n * pi * 2 / n1) * -0.5 + std::cos(n * pi * 4 / n1) * 0.08 + 0.42;
    w[static_cast<size_t>(i)] = v;
  }
  if (is_float(out) && common::dtype_size(out) == 2) {
    t.set_output(0, typed_constant(t, out, {size}, w));
    return;
  }
  t.set_output(0, as_dtype(t, typed_constant(t, HAL_DTYPE_FLOAT64, {size}, w), out));
}

// ---- BitShift ----
// In int64: a right shift is a floor division by 2^s (a shift past the
// width: -1 or 0 by the sign, as the reference); a left shift a product by
// 2^s wrapped to the width (int64: the bits that stay below the sign bit,
// and the one that lands on it); shifts outside [0, width) give 0.
V pow2(Translator& t, V s) {  // 2^s for s in [0, 32], exactly
  return as_dtype(t, t.emit1("exp2", {as_dtype(t, s, HAL_DTYPE_FLOAT64)}), HAL_DTYPE_INT64);
}

V floor_div_pow2(Translator& t, V a, V s) {  // floor(a / 2^s), s in [0, 64)
  V lo = t.emit1("clamp", {s, scalar(t, HAL_DTYPE_INT64, 0), scalar(t, HAL_DTYPE_INT64, 32)});
  V hi = t.emit1("sub", {s, lo});
  V q = t.emit1("div", {a, pow2(t, lo)}, {Attr::s("rounding_mode", "floor")});
  return t.emit1("div", {q, pow2(t, hi)}, {Attr::s("rounding_mode", "floor")});
}

void bit_shift(Translator& t, const OpRule&) {
  const hal_dtype_e dt = t.in(0).spec.dtype;
  if (t.in(1).spec.dtype != dt)
    t.invalid("the shift's dtype " + std::string(common::dtype_name(t.in(1).spec.dtype)) + " differs from X's " + common::dtype_name(dt));
  const bool is_signed = dt == HAL_DTYPE_INT8 || dt == HAL_DTYPE_INT16 || dt == HAL_DTYPE_INT32 || dt == HAL_DTYPE_INT64;
  if (!is_signed && dt != HAL_DTYPE_UINT8)
    t.invalid("X of dtype " + std::string(common::dtype_name(dt)) + " (integers; the catalog has no uint16/32/64 arithmetic)");
  const std::string dir = t.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") t.invalid("direction '" + dir + "' (LEFT or RIGHT)");
  const int64_t width = 8 * static_cast<int64_t>(common::dtype_size(dt));
  const hal_dtype_e i64 = HAL_DTYPE_INT64;
  V a = as_dtype(t, t.value(0), i64), s = as_dtype(t, t.value(1), i64);
  V valid = t.emit1("logical_and", {t.emit1("ge", {s, scalar(t, i64, 0)}), t.emit1("lt", {s, scalar(t, i64, static_cast<double>(width))})});
  V zero = scalar(t, i64, 0);
  V r;
  if (dir == "RIGHT") {
    // Out of range: a signed shift by width - 1 gives the reference's -1 / 0.
    V sc = t.emit1("where", {valid, s, scalar(t, i64, static_cast<double>(width - 1))});
    r = floor_div_pow2(t, a, sc);
    if (!is_signed) r = t.emit1("where", {valid, r, zero});
  } else {
    V sc = t.emit1("where", {valid, s, zero});
    if (width < 64) {
      V lo = t.emit1("clamp", {sc, zero, scalar(t, i64, 32)});
      r = t.emit1("mul", {t.emit1("mul", {a, pow2(t, lo)}), pow2(t, t.emit1("sub", {sc, lo}))});
      r = t.emit1("bitwise_and", {r, t.constant(int_tensor(i64, {(int64_t{1} << width) - 1}, {}))});
      if (is_signed) {
        V wrap = t.emit1("ge", {r, t.constant(int_tensor(i64, {int64_t{1} << (width - 1)}, {}))});
        r = t.emit1("where", {wrap, t.emit1("sub", {r, t.constant(int_tensor(i64, {int64_t{1} << width}, {}))}), r});
      }
    } else {
      V keep = floor_div_pow2(t, t.constant(int_tensor(i64, {INT64_MAX}, {})), sc);  // 2^(63-s) - 1
      V low = t.emit1("bitwise_and", {a, keep});
      V top = t.emit1("bitwise_and", {floor_div_pow2(t, a, t.emit1("sub", {scalar(t, i64, 63), sc})), scalar(t, i64, 1)});
      V lo = t.emit1("clamp", {sc, zero, scalar(t, i64, 32)});
      r = t.emit1("mul", {t.emit1("mul", {low, pow2(t, lo)}), pow2(t, t.emit1("sub", {sc, lo}))});
      r = t.emit1("add", {r, t.emit1("where", {t.emit1("eq", {top, scalar(t, i64, 1)}),
                                              t.constant(int_tensor(i64, {INT64_MIN}, {})), zero})});
    }
    r = t.emit1("where", {valid, r, zero});
  }
  t.set_output(0, as_dtype(t, r, dt));
}

// ---- GridSample (16: 2-D, bilinear/nearest/bicubic; 20: N-D, linear/nearest/cubic) ----
// As the reference: per spatial dim, the grid coordinate denormalized
// (align_corners), rounded half to even for nearest, brought inside the
// borders (border: clamped; reflection: reflected), then the taps (1, 2 or
// 4 per dim) with their weights, each tap fetched through the padding rule
// (zeros: weight 0 outside; border: clamped; reflection: reflected). The
// output is the sum over tap combinations of the weights' product times the
// gathered value.
struct Taps {
  std::vector<V> index;   // [N, P] int64, inside [0, d)
  std::vector<V> weight;  // [N, P], 0 for a zeros-padded tap outside
};

V reflect(Translator& t, V x, double lo, double hi) {
  const hal_dtype_e dt = t.spec(x).dtype;
  const double range = hi - lo;
  auto fold = [&](V dx, double from, double to_even, double sign_even) {
    // n = trunc(dx / range), r = dx - n * range; even n: from + sign * r, odd: the other border
    V n = t.emit1("trunc", {t.emit1("div", {dx, scalar(t, dt, range)})});
    V r = t.emit1("sub", {dx, t.emit1("mul", {n, scalar(t, dt, range)})});
    V even = t.emit1("eq", {t.emit1("fmod", {n, scalar(t, dt, 2)}), scalar(t, dt, 0)});
    V a = t.emit1("add", {scalar(t, dt, from), t.emit1("mul", {r, scalar(t, dt, sign_even)})});
    V b = t.emit1("sub", {scalar(t, dt, to_even), t.emit1("mul", {r, scalar(t, dt, sign_even)})});
    return t.emit1("where", {even, a, b});
  };
  V below = fold(t.emit1("sub", {scalar(t, dt, lo), x}), lo, hi, 1.0);
  V above = fold(t.emit1("sub", {x, scalar(t, dt, hi)}), hi, lo, -1.0);
  return t.emit1("where", {t.emit1("lt", {x, scalar(t, dt, lo)}), below,
                           t.emit1("where", {t.emit1("gt", {x, scalar(t, dt, hi)}), above, x})});
}

// Keys' cubic coefficients (alpha -0.75) of tap K at fractional offset F.
V cubic_coeff(Translator& t, V f, int k) {
  const hal_dtype_e dt = t.spec(f).dtype;
  const double a = -0.75;
  auto c = [&](double v) { return scalar(t, dt, v); };
  auto mul = [&](V x, V y) { return t.emit1("mul", {x, y}); };
  auto add = [&](V x, V y) { return t.emit1("add", {x, y}); };
  V x = k == 0 ? add(f, c(1)) : k == 1 ? f : k == 2 ? t.emit1("sub", {c(1), f}) : t.emit1("sub", {c(2), f});
  if (k == 0 || k == 3)  // ((a*x - 5a)*x + 8a)*x - 4a
    return add(mul(add(mul(add(mul(x, c(a)), c(-5 * a)), x), c(8 * a)), x), c(-4 * a));
  return add(mul(mul(add(mul(x, c(a + 2)), c(-(a + 3))), x), x), c(1));  // ((a+2)*x - (a+3))*x*x + 1
}

Taps grid_taps(Translator& t, V g, int64_t d, bool align, const std::string& mode, const std::string& padding) {
  const hal_dtype_e dt = t.spec(g).dtype;
  auto c = [&](double v) { return scalar(t, dt, v); };
  const double size = static_cast<double>(d);
  V x = align ? t.emit1("mul", {t.emit1("add", {g, c(1)}), c((size - 1) / 2)})
              : t.emit1("div", {t.emit1("sub", {t.emit1("mul", {t.emit1("add", {g, c(1)}), c(size)}), c(1)}), c(2)});
  if (mode == "nearest") x = t.emit1("round", {x});
  const double lo = align ? 0.0 : -0.5, hi = align ? size - 1 : size - 0.5;
  if (padding == "border") {
    V out = t.emit1("logical_or", {t.emit1("lt", {x, c(lo)}), t.emit1("gt", {x, c(hi)})});
    x = t.emit1("where", {out, t.emit1("clamp", {x, c(0), c(size - 1)}), x});
  } else if (padding == "reflection") {
    x = reflect(t, x, lo, hi);
  }
  V base = mode == "nearest" ? t.emit1("trunc", {x}) : t.emit1("floor", {x});
  V frac = t.emit1("sub", {x, base});
  std::vector<int> offsets = mode == "nearest" ? std::vector<int>{0} : mode == "linear" ? std::vector<int>{0, 1}
                                                                                      : std::vector<int>{-1, 0, 1, 2};
  Taps taps;
  for (size_t k = 0; k < offsets.size(); ++k) {
    V i = t.emit1("add", {base, c(offsets[k])});
    V w = mode == "nearest" ? t.emit1("add", {t.emit1("mul", {frac, c(0)}), c(1)})
          : mode == "linear" ? (k == 0 ? t.emit1("sub", {c(1), frac}) : frac)
                             : cubic_coeff(t, frac, static_cast<int>(k));
    if (padding == "zeros") {
      V inside = t.emit1("logical_and", {t.emit1("ge", {i, c(0)}), t.emit1("le", {i, c(size - 1)})});
      w = t.emit1("where", {inside, w, c(0)});
      i = t.emit1("clamp", {i, c(0), c(size - 1)});
    } else if (padding == "border") {
      i = t.emit1("clamp", {i, c(0), c(size - 1)});
    } else {
      i = t.emit1("trunc", {reflect(t, i, lo, hi)});
      i = t.emit1("clamp", {i, c(0), c(size - 1)});
    }
    taps.index.push_back(as_dtype(t, i, HAL_DTYPE_INT64));
    taps.weight.push_back(w);
  }
  return taps;
}

void grid_sample(Translator& t, const OpRule&) {
  const std::vector<int64_t> x = t.in(0).spec.shape, grid = t.in(1).spec.shape;
  require_static(t, x, "GridSample's X");
  require_static(t, grid, "GridSample's grid");
  const size_t nd = x.size() - 2;
  if (x.size() < 3 || grid.size() != x.size() || grid.back() != static_cast<int64_t>(nd) || grid[0] != x[0])
    t.invalid("grid has shape " + shape_text(grid) + " for X " + shape_text(x) + " (expected [N, *out, " + std::to_string(nd) + "])");
  if (t.opset() < 20 && nd != 2) t.invalid("GridSample before opset 20 takes 4-D inputs");
  std::string mode = t.attr_string("mode", t.opset() < 20 ? "bilinear" : "linear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  if (mode != "linear" && mode != "nearest" && mode != "cubic") t.invalid("mode '" + mode + "'");
  const std::string padding = t.attr_string("padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection") t.invalid("padding_mode '" + padding + "'");
  const bool align = t.attr_int("align_corners", 0) != 0;
  const hal_dtype_e xdt = t.in(0).spec.dtype;
  if (!is_float(xdt)) t.invalid("X of dtype " + std::string(common::dtype_name(xdt)) + " (a floating dtype)");
  const hal_dtype_e gdt = t.in(1).spec.dtype == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32;
  const int64_t n = x[0], ch = x[1];
  std::vector<int64_t> out(grid.begin() + 1, grid.end() - 1);
  const int64_t points = numel(out);
  V g = as_dtype(t, t.value(1), gdt);
  std::vector<Taps> per_dim(nd);
  for (size_t i = 0; i < nd; ++i) {  // grid's last dim lists the coordinates fastest dim first
    V index = t.constant(int_tensor(HAL_DTYPE_INT64, {static_cast<int64_t>(nd - 1 - i)}, {1}));
    V gi = reshape_to(t, t.emit1("index_select", {g, index}, {Attr::i("dim", static_cast<int64_t>(grid.size() - 1))}), {n, points});
    per_dim[i] = grid_taps(t, gi, x[2 + i], align, mode, padding);
  }
  const int64_t total = numel(std::vector<int64_t>(x.begin() + 2, x.end()));
  V flat = reshape_to(t, as_dtype(t, t.value(0), gdt), {n, ch, total});
  V acc;
  std::vector<size_t> pick(nd, 0);
  for (bool more = true; more;) {
    V lin, w;
    int64_t stride = 1;
    for (size_t i = nd; i-- > 0;) {
      V idx = per_dim[i].index[pick[i]];
      V term = stride == 1 ? idx : t.emit1("mul", {idx, scalar(t, HAL_DTYPE_INT64, static_cast<double>(stride))});
      lin = lin.valid() ? t.emit1("add", {lin, term}) : term;
      w = w.valid() ? t.emit1("mul", {w, per_dim[i].weight[pick[i]]}) : per_dim[i].weight[pick[i]];
      stride *= x[2 + i];
    }
    V index = t.emit_as("copy", {reshape_to(t, lin, {n, 1, points})}, {}, {HAL_DTYPE_INT64, {n, ch, points}});
    V val = t.emit1("mul", {t.emit1("gather", {flat, index}, {Attr::i("dim", 2)}), reshape_to(t, w, {n, 1, points})});
    acc = acc.valid() ? t.emit1("add", {acc, val}) : val;
    more = false;
    for (size_t i = 0; i < nd && !more; ++i) {
      if (++pick[i] < per_dim[i].index.size()) more = true;
      else pick[i] = 0;
    }
  }
  std::vector<int64_t> shape{n, ch};
  shape.insert(shape.end(), out.begin(), out.end());
  t.set_output(0, as_dtype(t, reshape_to(t, acc, shape), xdt));
}

// ---- outputs whose shape depends on the data ----
// The first N rows of the catalog's nonzero output ([numel, rank], N read
// while the model runs: the model runs in stages; the next one takes those
// rows as an input whose count is a symbol, so a new count re-plans without
// translating or compiling again).
V nonzero_rows(Translator& t, V x, const std::string& what) {
  std::vector<V> o = t.emit("nonzero", {x}, {}, 2);
  return t.runtime_rows(o[0], o[1], what);
}

// NonZero: [rank, n], the coordinates of the nonzero elements in row-major order.
void non_zero(Translator& t, const OpRule&) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;  // run-time dims too: the catalog's bound is numel
  if (shape.empty()) t.unimplemented("a 0-d input");
  t.set_output(0, permuted(t, nonzero_rows(t, t.value(0), "NonZero's count of nonzero elements"), {1, 0}));
}

// Compress: the slices along axis (the flattened input without one) whose
// condition entry is true; a condition shorter than the axis selects among its first entries.
void compress(Translator& t, const OpRule&) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  // Run-time dims (an earlier count of rows): along an axis; flattened, only a 1-D input.
  if (t.attr("axis") == nullptr && shape.size() != 1) require_static(t, shape, "Compress's input without an axis");
  const std::vector<int64_t>& cs = t.in(1).spec.shape;
  if (cs.size() != 1) t.invalid("condition has shape " + shape_text(cs) + " (1-D)");
  if (t.in(1).spec.dtype != HAL_DTYPE_BOOL) t.invalid("condition has dtype " + std::string(common::dtype_name(t.in(1).spec.dtype)) + " (bool)");
  V x = t.value(0);
  int64_t axis = 0;
  if (t.attr("axis") != nullptr) {
    axis = norm_axis(t, t.attr_int("axis", 0), shape.size());
  } else if (shape.size() != 1) {
    x = reshape_to(t, x, {numel(shape)});
  }
  const int64_t len = t.attr("axis") != nullptr || shape.size() == 1 ? shape[static_cast<size_t>(axis)] : numel(shape);
  if (cs[0] >= 0 && len >= 0 && cs[0] > len)
    t.invalid("condition has " + std::to_string(cs[0]) + " entries for a dim of " + std::to_string(len));
  V rows = nonzero_rows(t, t.value(1), "Compress's count of true conditions");
  V index = reshape_to(t, rows, {t.spec(rows).shape[0]});
  t.set_output(0, t.emit1("index_select", {x, index}, {Attr::i("dim", axis)}));
}

// Unique without an axis, of an input computed while the model runs, on
// the device: a stable sort; the first of each run of equal values starts a
// group; their count is a count of rows read back (a symbol of the next
// stage, so new values re-plan without translating). The group of each
// sorted element (a cumulative sum of the starts) gives the inverse indices
// and the counts by scatters; "sorted": 0 orders the groups by their first
// index (the sort keeps it first in each group). false: not such a Unique.
bool unique_on_device(Translator& t) {
  const Slot& in = t.in(0);
  const hal_dtype_e dt = in.spec.dtype;
  static const hal_dtype_e kSortable[] = {HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT64, HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16,
                                          HAL_DTYPE_INT8,    HAL_DTYPE_INT16,   HAL_DTYPE_INT32,   HAL_DTYPE_INT64,
                                          HAL_DTYPE_UINT8};
  if (in.host || t.attr("axis") != nullptr || std::find(std::begin(kSortable), std::end(kSortable), dt) == std::end(kSortable))
    return false;
  for (int64_t d : in.spec.shape)
    if (d < 0) return false;
  const int64_t n = numel(in.spec.shape);
  if (n < 1) return false;
  V flat = in.spec.shape.size() == 1 ? t.value(0) : reshape_to(t, t.value(0), {n});
  std::vector<V> sorted = t.emit("sort", {flat}, {Attr::i("dim", 0), Attr::b("descending", false), Attr::b("stable", true)}, 2);
  // [from, to) made by the device, not a constant: the input's declared
  // size must not decide how much the translation allocates (the load
  // fuzzer's out-of-memory: a Unique of 2^28 elements built 2 GiB of them).
  auto range_of = [&](int64_t from, int64_t to) {
    return t.emit1("arange", {}, {Attr::scalar("start", double(from)), Attr::scalar("end", double(to)),
                                  Attr::scalar("step", 1.0), Attr::dtype("dtype", HAL_DTYPE_INT64)});
  };
  const HostTensor yes{HAL_DTYPE_BOOL, {1}, {1}};
  V starts = t.constant(yes);
  if (n > 1) {
    V prev = t.emit1("index_select", {sorted[0], range_of(0, n - 1)}, {Attr::i("dim", 0)});
    V cur = t.emit1("index_select", {sorted[0], range_of(1, n)}, {Attr::i("dim", 0)});
    starts = t.emit1("cat", {starts, t.emit1("ne", {cur, prev})}, {Attr::i("dim", 0)});
  }
  V rows = nonzero_rows(t, starts, "Unique's count of distinct values");
  const int64_t groups = t.spec(rows).shape[0];
  V first = reshape_to(t, rows, {groups});  // each group's position in the sort
  V y = t.emit1("index_select", {sorted[0], first}, {Attr::i("dim", 0)});
  V indices = t.emit1("index_select", {sorted[1], first}, {Attr::i("dim", 0)});
  V group = t.emit1("sub", {t.emit1("cumsum", {as_dtype(t, starts, HAL_DTYPE_INT64)}, {Attr::i("dim", 0)}), scalar(t, HAL_DTYPE_INT64, 1)});
  V zeros = t.emit1("mul", {first, scalar(t, HAL_DTYPE_INT64, 0)});  // [groups], sized by the rows read back
  V ones = t.emit_as("fill", {}, {Attr::scalar("value", 1)}, {HAL_DTYPE_INT64, {n}});
  V counts = t.emit1("scatter_add", {zeros, group, ones}, {Attr::i("dim", 0)});
  V none = t.emit_as("fill", {}, {Attr::scalar("value", 0)}, {HAL_DTYPE_INT64, {n}});
  V inverse = t.emit1("scatter", {none, sorted[1], group}, {Attr::i("dim", 0)});
  if (t.attr_int("sorted", 1) == 0) {
    std::vector<V> by_first = t.emit("sort", {indices}, {Attr::i("dim", 0), Attr::b("descending", false), Attr::b("stable", true)}, 2);
    const V order = by_first[1];
    y = t.emit1("index_select", {y, order}, {Attr::i("dim", 0)});
    counts = t.emit1("index_select", {counts, order}, {Attr::i("dim", 0)});
    indices = by_first[0];
    V position = t.emit1("sub", {t.emit1("cumsum", {t.emit1("add", {zeros, scalar(t, HAL_DTYPE_INT64, 1)})}, {Attr::i("dim", 0)}),
                                 scalar(t, HAL_DTYPE_INT64, 1)});
    V rank = t.emit1("scatter", {zeros, order, position}, {Attr::i("dim", 0)});  // each sorted group's place in the output
    inverse = t.emit1("index_select", {rank, inverse}, {Attr::i("dim", 0)});
  }
  t.set_output(0, y);
  if (t.output_count() > 1 && !t.output_name(1).empty()) t.set_output(1, indices);
  if (t.output_count() > 2 && !t.output_name(2).empty()) t.set_output(2, inverse);
  if (t.output_count() > 3 && !t.output_name(3).empty()) t.set_output(3, counts);
  return true;
}

// Unique otherwise: computed on the host from the input read while the
// model runs (outputs of data-dependent size; numpy's np.unique for sorted,
// order of first occurrence otherwise); the results are constants of the
// next stage.
void unique(Translator& t, const OpRule&) {
  if (unique_on_device(t)) return;
  const Slot& in = t.in(0);
  require_static(t, in.spec.shape, "Unique's input");
  const HostTensor h = in.host ? *in.host : t.runtime_value(t.value(0), "Unique's input");
  const std::vector<int64_t>& shape = h.shape;
  const bool sorted = t.attr_int("sorted", 1) != 0;
  const bool has_axis = t.attr("axis") != nullptr;
  const int64_t axis = has_axis ? norm_axis(t, t.attr_int("axis", 0), shape.size()) : 0;
  // Slices along AXIS (elements when flattened), each as bytes and as comparable numbers.
  const size_t es = common::dtype_size(h.dtype);
  std::vector<int64_t> flat_shape = has_axis ? shape : std::vector<int64_t>{numel(shape)};
  const int64_t count = flat_shape.empty() ? 1 : flat_shape[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < flat_shape.size(); ++d) {
    if (static_cast<int64_t>(d) < axis) outer *= flat_shape[d];
    if (static_cast<int64_t>(d) > axis) inner *= flat_shape[d];
  }
  auto numbers = float_values(h);
  auto ints = int_values(h);
  if (!numbers) t.invalid("input of dtype " + std::string(common::dtype_name(h.dtype)));
  auto key_of = [&](int64_t k) {  // slice K's elements, outer-major (as numpy compares the moved axis)
    std::vector<double> key;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const size_t at = static_cast<size_t>((o * count + k) * inner + i);
        key.push_back(ints ? static_cast<double>((*ints)[at]) : (*numbers)[at]);
      }
    return key;
  };
  std::vector<std::vector<double>> keys(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) keys[static_cast<size_t>(k)] = key_of(k);
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) order[static_cast<size_t>(k)] = k;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  // Groups of equal keys; the first occurrence of each.
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(count));
  std::vector<int64_t> group_of_sorted(static_cast<size_t>(count));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || keys[order[i]] != keys[order[i - 1]]) {
      first.push_back(order[i]);
      counts.push_back(0);
    }
    ++counts.back();
    group_of_sorted[i] = static_cast<int64_t>(first.size() - 1);
  }
  std::vector<int64_t> rank(first.size());  // output position of each group
  for (size_t g = 0; g < rank.size(); ++g) rank[g] = static_cast<int64_t>(g);
  if (!sorted) {  // by first occurrence
    std::vector<size_t> by_first(first.size());
    for (size_t g = 0; g < by_first.size(); ++g) by_first[g] = g;
    std::sort(by_first.begin(), by_first.end(), [&](size_t a, size_t b) { return first[a] < first[b]; });
    for (size_t pos = 0; pos < by_first.size(); ++pos) rank[by_first[pos]] = static_cast<int64_t>(pos);
  }
  const size_t groups = first.size();
  std::vector<int64_t> out_first(groups), out_counts(groups);
  for (size_t g = 0; g < groups; ++g) {
    out_first[static_cast<size_t>(rank[g])] = first[g];
    out_counts[static_cast<size_t>(rank[g])] = counts[g];
  }
  for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = rank[static_cast<size_t>(group_of_sorted[i])];
  // Y: the slices of the first occurrences, in output order.
  std::vector<int64_t> yshape = flat_shape;
  if (!yshape.empty()) yshape[static_cast<size_t>(axis)] = static_cast<int64_t>(groups);
  HostTensor y{h.dtype, yshape, std::vector<uint8_t>(static_cast<size_t>(numel(yshape)) * es)};
  for (int64_t o = 0; o < outer; ++o)
    for (size_t g = 0; g < groups; ++g)
      std::memcpy(y.data.data() + ((o * static_cast<int64_t>(groups) + static_cast<int64_t>(g)) * inner) * es,
                  h.data.data() + ((o * count + out_first[g]) * inner) * es, static_cast<size_t>(inner) * es);
  const int64_t n = static_cast<int64_t>(groups);
  t.set_output_host(0, std::move(y));
  if (t.output_count() > 1 && !t.output_name(1).empty()) t.set_output_host(1, int_tensor(HAL_DTYPE_INT64, out_first, {n}));
  if (t.output_count() > 2 && !t.output_name(2).empty()) t.set_output_host(2, int_tensor(HAL_DTYPE_INT64, inverse, {count}));
  if (t.output_count() > 3 && !t.output_name(3).empty()) t.set_output_host(3, int_tensor(HAL_DTYPE_INT64, out_counts, {n}));
}

}  // namespace

const std::vector<OpRule>& tensor_rows() {
  static const std::vector<OpRule> rows = {
      {"OneHot", 9, 28, "lt+add+where+eq", one_hot, "depth known at load or from an input's value"},
      {"InstanceNormalization", 6, 22, "group_norm", instance_norm, "channels known at load"},
      {"GroupNormalization", 18, 21, "group_norm|index_select+group_norm", group_norm, "channels known at load"},
      {"MeanVarianceNormalization", 9, 13, "mean+mul+sub+sqrt+add+div", mean_variance_norm, ""},
      {"LRN", 1, 13, "mul+pad+index_select+add+pow+div", lrn, ""},
      {"ReverseSequence", 10, 28, "reshape+index_select", reverse_sequence, "shapes known at load; sequence_lens known at load or from an input's value"},
      {"TensorScatter", 24, 24, "add+remainder+copy+scatter", tensor_scatter, "shapes known at load"},
      {"Einsum", 12, 28, "permute+index_select+sum+copy+matmul+reshape", einsum, "shapes known at load"},
      {"Col2Im", 18, 18, "fill+scatter_add+index_select+reshape", col2im, "shapes, image_shape and block_shape known at load"},
      {"MaxUnpool", 9, 22, "fill+scatter+reshape|pad", max_unpool, "shapes known at load"},
      {"AffineGrid", 20, 20, "permute+matmul+copy", affine_grid, "size known at load or from an input's value"},
      {"Det", 11, 22, "linalg_lu_factor+index_select+prod+ne+sum+where", det, "shapes known at load; float32 and float64 (16-bit floats computed in float32)"},
      {"BitShift", 11, 28, "ge+lt+where+exp2+div+mul+bitwise_and+copy", bit_shift, "int8..int64 and uint8 (no uint16/32/64)"},
      {"GridSample", 16, 22, "round|floor+where+clamp+gather+mul+add", grid_sample, "shapes known at load"},
      {"NonZero", 9, 13, "nonzero+permute", non_zero, "the count read while the model runs (staged), a symbol of the stages after it"},
      {"Compress", 9, 28, "nonzero+index_select", compress, "the count read while the model runs (staged), a symbol of the stages after it; without an axis, a 1-D input or one whose shape is known at load"},
      {"Unique", 11, 28, "sort+ne+nonzero+index_select+cumsum+scatter_add+scatter|(host: the input read while the model runs)", unique, "shapes known at load; with an axis, or of dtypes the sort lacks, on the host"},
      {"HannWindow", 17, 17, "", window, "size known at load or from an input's value"},
      {"HammingWindow", 17, 17, "", window, "size known at load or from an input's value"},
      {"BlackmanWindow", 17, 17, "", window, "size known at load or from an input's value"},
  };
  return rows;
}

}  // namespace hal::onnx::detail
