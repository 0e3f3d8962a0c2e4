#include "runner/case_runner.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "runner/storage.hpp"

namespace hal::conformance {

namespace {

constexpr uint8_t kInputFill = 0x5A;   // gap bytes of inputs
constexpr uint8_t kOutputFill = 0xA7;  // every output byte before the launch
constexpr uint64_t kGuardBytes = 16;   // after the last element: catches overruns

// A tensor placed in device memory in some layout, with the host image of
// its whole buffer (what was written, or for outputs the sentinel).
struct Placed {
  Buffer buffer;
  TensorView view;
  std::vector<uint8_t> image;
  std::vector<int64_t> strides;           // used (also for contiguous)
  std::vector<uint64_t> element_offsets;  // byte offset of each element, row-major order
  hal_dtype_e dtype = HAL_DTYPE_FLOAT32;
  std::vector<int64_t> shape;
};

std::vector<int64_t> layout_strides(const std::vector<int64_t>& shape, Layout layout) {
  int r = static_cast<int>(shape.size());
  std::vector<int64_t> s(shape.size(), 1);
  if (r == 0) return s;
  auto dim = [&](int d) { return std::max<int64_t>(shape[d], 1); };
  switch (layout) {
    case Layout::kContiguous:
    case Layout::kOffset:
    case Layout::kPreferred:  // place() gives its strides; row-major here
      for (int d = r - 2; d >= 0; --d) s[d] = s[d + 1] * dim(d + 1);
      break;
    case Layout::kStrided:
      s[r - 1] = 2;
      for (int d = r - 2; d >= 0; --d) s[d] = s[d + 1] * dim(d + 1) + 1;
      break;
    case Layout::kPermuted:
      for (int d = 1; d < r; ++d) s[d] = s[d - 1] * dim(d - 1);
      break;
  }
  return s;
}

int64_t layout_offset_elements(Layout layout) {
  return layout == Layout::kOffset ? 3 : layout == Layout::kStrided ? 1 : 0;
}

// Allocates and uploads T in LAYOUT (kPreferred: dense in ORDER, empty for
// row-major). Inputs carry their values; outputs (VALUES false) are all
// sentinel.
Placed place(Device& device, const HostTensor& t, Layout layout, bool values, const common::DimOrder& order = {}) {
  Placed p;
  p.dtype = t.dtype;
  p.shape = t.shape;
  size_t es = storage_size(t.dtype);
  if (es == 0) throw Error(HAL_STATUS_INVALID_ARGUMENT, std::string("the runner cannot store dtype ") + dtype_str(t.dtype));
  p.strides = layout == Layout::kPreferred ? common::dense_strides(t.shape, order) : layout_strides(t.shape, layout);
  int64_t off = layout_offset_elements(layout);
  int64_t n = t.numel();
  int64_t extent = 0;
  if (n > 0) {
    extent = 1;
    for (size_t d = 0; d < t.shape.size(); ++d) extent += (t.shape[d] - 1) * p.strides[d];
  }
  uint64_t bytes = static_cast<uint64_t>(off + extent) * es + kGuardBytes;
  p.image.assign(bytes, values ? kInputFill : kOutputFill);
  p.element_offsets.resize(static_cast<size_t>(n));
  std::vector<int64_t> idx(t.shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t pos = off;
    for (size_t d = 0; d < idx.size(); ++d) pos += idx[d] * p.strides[d];
    p.element_offsets[i] = static_cast<uint64_t>(pos) * es;
    if (values) encode(t.dtype, t.values[i], &p.image[p.element_offsets[i]]);
    for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {  // row-major increment
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  p.buffer = device.allocate(bytes);
  p.buffer.copy_from_host(p.image.data(), bytes);
  std::vector<int64_t> view_strides = layout == Layout::kContiguous ? std::vector<int64_t>{} : p.strides;
  p.view = TensorView(p.buffer, t.dtype, t.shape, view_strides, static_cast<uint64_t>(off) * es);
  // op.h lets a zero-element tensor come with no buffer (frameworks pass one
  // so for a 0-byte storage); the contiguous layout checks that, the others
  // a real buffer (whose guard bytes must stay untouched).
  if (n == 0 && layout == Layout::kContiguous) {
    p.view.buffer = nullptr;
    p.view.buffer_bytes = 0;
  }
  return p;
}

std::vector<uint8_t> download(const Placed& p) {
  std::vector<uint8_t> out(p.image.size());
  p.buffer.copy_to_host(out.data(), out.size());
  return out;
}

HostTensor read_values(const Placed& p, const std::vector<uint8_t>& bytes) {
  HostTensor t(p.dtype, p.shape);
  for (size_t i = 0; i < p.element_offsets.size(); ++i) t.values[i] = decode(p.dtype, &bytes[p.element_offsets[i]]);
  return t;
}

// "" when every byte of P outside its elements still holds the sentinel.
std::string check_gaps(const Placed& p, const std::vector<uint8_t>& bytes, bool whole_buffer) {
  std::vector<uint8_t> is_elem(bytes.size(), 0);
  size_t es = storage_size(p.dtype);
  if (!whole_buffer)
    for (uint64_t o : p.element_offsets) std::memset(&is_elem[o], 1, es);
  for (size_t b = 0; b < bytes.size(); ++b)
    if (!is_elem[b] && bytes[b] != kOutputFill) {
      std::ostringstream s;
      s << "byte " << b << " of the output's buffer was written (0x" << std::hex << int(bytes[b]) << std::dec
        << ", was 0x" << std::hex << int(kOutputFill) << std::dec << ") although "
        << (whole_buffer ? "the launch failed" : "it is outside the tensor (gap, offset or guard byte)");
      return s.str();
    }
  return "";
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

std::string strides_str(const std::vector<int64_t>& s) { return shape_str(s); }

// How outputs of DTYPE are compared: exactly, or within atol + rtol*|e|.
struct Judge {
  bool exact;
  double atol, rtol;
  Judge(hal_dtype_e dtype, Compare mode, double scale) : exact(mode == Compare::kExact || !is_float(dtype)) {
    Tolerance tol = default_tolerance(dtype);
    atol = tol.atol * scale;
    rtol = tol.rtol * scale;
  }
  // E is the reference already rounded to the output dtype.
  bool ok(double e, double a) const {
    if (std::isnan(e) || std::isnan(a)) return std::isnan(e) && std::isnan(a);
    if (a == e) return true;
    double d = std::fabs(a - e);
    return !exact && std::isfinite(d) && d <= atol + rtol * std::fabs(e);
  }
};

// Compares ACTUAL with EXPECTED (rounded to the output dtype). "" if equal
// within tolerance; records the largest errors.
std::string compare(const HostTensor& expected, const HostTensor& actual, Compare mode, double scale,
                    double& max_abs, double& max_rel) {
  if (expected.values.size() != actual.values.size())
    return "the reference has " + std::to_string(expected.values.size()) + " values for shape " +
           shape_str(expected.shape) + " (a suite bug)";
  const Judge judge(actual.dtype, mode, scale);
  int64_t bad = 0, first = -1;
  double first_e = 0, first_a = 0;
  for (size_t i = 0; i < actual.values.size(); ++i) {
    double e = round_to(actual.dtype, expected.values[i]);
    double a = actual.values[i];
    if (std::isnan(e) != std::isnan(a)) {
      max_abs = max_rel = INFINITY;
    } else if (!std::isnan(e) && a != e) {
      double d = std::fabs(a - e);
      max_abs = std::max(max_abs, d);
      if (e != 0) max_rel = std::max(max_rel, d / std::fabs(e));
      else if (d > 0) max_rel = INFINITY;
    }
    if (!judge.ok(e, a) && bad++ == 0) {
      first = static_cast<int64_t>(i);
      first_e = e;
      first_a = a;
    }
  }
  if (bad == 0) return "";
  std::ostringstream s;
  s << "at " << shape_str(unravel(first, actual.shape)) << " got " << fmt(first_a) << ", expected " << fmt(first_e);
  if (judge.exact) s << " (exact)";
  else s << " (atol " << judge.atol << ", rtol " << judge.rtol << ")";
  s << "; " << bad << " of " << actual.values.size() << " values differ; max abs error " << fmt(max_abs)
    << ", max rel error " << fmt(max_rel);
  return s.str();
}

// --show-values: at most this many elements of a tensor are printed (and
// of an output, up to kShownDiffering more that differ).
constexpr size_t kShownElements = 32;
constexpr size_t kShownDiffering = 16;

void show_tensor(std::FILE* out, const std::string& what, const HostTensor& t, const Placed* placed) {
  std::fprintf(out, "  %s: %s %s", what.c_str(), dtype_str(t.dtype), shape_str(t.shape).c_str());
  if (placed != nullptr)
    std::fprintf(out, ", strides %s, byte offset %llu", shape_str(placed->strides).c_str(),
                 static_cast<unsigned long long>(placed->view.byte_offset));
  std::fprintf(out, "\n");
  size_t n = t.values.size();
  for (size_t i = 0; i < n && i < kShownElements; ++i)
    std::fprintf(out, "    %s %s\n", shape_str(unravel(static_cast<int64_t>(i), t.shape)).c_str(), fmt(t.values[i]).c_str());
  if (n > kShownElements) std::fprintf(out, "    ... %zu more elements not shown\n", n - kShownElements);
}

// Expected and actual side by side, differing elements marked; the first
// kShownElements, then up to kShownDiffering differing ones after them.
void show_output(std::FILE* out, size_t index, const HostTensor& expected, const HostTensor* actual, Compare mode,
                 double scale) {
  std::fprintf(out, "  output %zu: %s %s%s\n", index, dtype_str(expected.dtype), shape_str(expected.shape).c_str(),
               actual == nullptr ? " (expected only)" : mode == Compare::kSkip ? " (not compared)" : "");
  const Judge judge(expected.dtype, mode, scale);
  size_t n = expected.values.size(), shown = 0, differing_shown = 0;
  for (size_t i = 0; i < n; ++i) {
    double e = round_to(expected.dtype, expected.values[i]);
    bool has_actual = actual != nullptr && i < actual->values.size();
    bool bad = has_actual && mode != Compare::kSkip && !judge.ok(e, actual->values[i]);
    if (i >= kShownElements && !(bad && differing_shown < kShownDiffering)) continue;
    ++shown;
    differing_shown += bad && i >= kShownElements;
    std::string idx = shape_str(unravel(static_cast<int64_t>(i), expected.shape));
    if (!has_actual) std::fprintf(out, "    %s expected %s\n", idx.c_str(), fmt(e).c_str());
    else
      std::fprintf(out, "    %s expected %s, actual %s%s\n", idx.c_str(), fmt(e).c_str(), fmt(actual->values[i]).c_str(),
                   bad ? "   <-- differs" : "");
  }
  if (shown < n) std::fprintf(out, "    ... %zu more elements not shown\n", n - shown);
}

std::string code_str(hal_status_code_e c) { return status_code_name(c); }

}  // namespace

std::optional<Layout> parse_layout(const std::string& name) {
  for (Layout l : {Layout::kContiguous, Layout::kOffset, Layout::kStrided, Layout::kPermuted, Layout::kPreferred})
    if (name == layout_name(l)) return l;
  return std::nullopt;
}

std::vector<std::string> case_selectors(const std::vector<OpCase>& cases) {
  std::map<std::string, int> count, seen;
  for (const OpCase& c : cases) ++count[c.name];
  std::vector<std::string> out;
  out.reserve(cases.size());
  for (const OpCase& c : cases)
    out.push_back(count[c.name] == 1 ? c.name : c.name + "#" + std::to_string(++seen[c.name]));
  return out;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kOffset: return "offset";
    case Layout::kStrided: return "strided";
    case Layout::kPermuted: return "permuted";
    case Layout::kPreferred: return "preferred";
  }
  return "?";
}

Tolerance default_tolerance(hal_dtype_e dt) {
  switch (dt) {
    case HAL_DTYPE_FLOAT32: return {1e-5, 1e-5};
    case HAL_DTYPE_FLOAT16: return {1e-3, 1e-3};
    case HAL_DTYPE_BFLOAT16: return {1e-2, 1e-2};
    case HAL_DTYPE_FLOAT64: return {1e-10, 1e-10};
    default: return {0, 0};
  }
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string shell_quote(const std::string& arg) {
  bool plain = !arg.empty();
  for (char c : arg) plain &= std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./:=+,@%", c) != nullptr;
  if (plain) return arg;
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string output_dtype_hint(const std::string& op, size_t index, hal_dtype_e out, hal_dtype_e compute) {
  if (out == compute || out == HAL_DTYPE_INVALID || compute == HAL_DTYPE_INVALID) return "";
  return std::string(" (output ") + std::to_string(index) + " is " + dtype_str(out) + " while the call computes in " +
         dtype_str(compute) + ": an output's dtype follows the catalog's rule for '" + op +
         "' (docs/ops.md), not the compute dtype, so the kernel must write the output's own dtype "
         "(Tensor::dtype) or refuse the call with UNSUPPORTED_DTYPE; docs/vendor_guide.md, \"Output dtypes\")";
}

std::string attrs_str(const std::vector<hal::Attr>& attrs) {
  std::ostringstream s;
  for (size_t k = 0; k < attrs.size(); ++k) {
    hal_attr_t a = attrs[k].c_attr();
    s << (k ? ", " : "") << attrs[k].name() << "=";
    switch (a.type) {
      case HAL_ATTR_TYPE_INT: s << a.value.i; break;
      case HAL_ATTR_TYPE_FLOAT: s << fmt(a.value.f); break;
      case HAL_ATTR_TYPE_BOOL: s << (a.value.i ? "true" : "false"); break;
      case HAL_ATTR_TYPE_STRING: s << '"' << a.value.s << '"'; break;
      case HAL_ATTR_TYPE_DTYPE: s << dtype_str(static_cast<hal_dtype_e>(a.value.i)); break;
      case HAL_ATTR_TYPE_INTS:
        s << shape_str(std::vector<int64_t>(a.value.ints, a.value.ints + a.count));
        break;
      case HAL_ATTR_TYPE_FLOATS:
        s << "[";
        for (size_t i = 0; i < a.count; ++i) s << (i ? "," : "") << fmt(a.value.floats[i]);
        s << "]";
        break;
      default: s << "?"; break;
    }
  }
  return s.str();
}

CaseRunner::CaseRunner(std::shared_ptr<Device> device, const std::string& op, Options options)
    : device_(std::move(device)), options_(options), runner_(device_, op, options.promotion) {
  if (device_->supports(HAL_CAPABILITY_STREAM)) stream_ = device_->create_stream();
}

bool CaseRunner::may_decline(const OpCase& c) const {
  if (options_.promotion != Promotion::kNone) return false;
  std::set<hal_dtype_e> dtypes;
  for (const auto& t : c.inputs)
    if (t) dtypes.insert(t->dtype);
  return dtypes.size() > 1;
}

namespace {
// Shape-only views of C's inputs and OUTPUTS (no buffers: op_check and
// op_get_layouts read no data), and pointers to them (nullptr: absent).
struct MetaViews {
  MetaViews(const OpCase& c, const std::vector<HostTensor>& outputs) {
    in_views.reserve(c.inputs.size());
    for (const auto& t : c.inputs) {
      TensorView v;
      if (t) {
        v.dtype = t->dtype;
        v.shape = t->shape;
      }
      in_views.push_back(v);
    }
    for (const HostTensor& t : outputs) {
      TensorView v;
      v.dtype = t.dtype;
      v.shape = t.shape;
      out_views.push_back(v);
    }
    for (size_t i = 0; i < c.inputs.size(); ++i) ins.push_back(c.inputs[i] ? &in_views[i] : nullptr);
    for (const TensorView& v : out_views) outs.push_back(&v);
  }
  MetaViews(const MetaViews&) = delete;
  std::vector<TensorView> in_views, out_views;
  std::vector<const TensorView*> ins, outs;
};
}  // namespace

std::optional<OpLayouts> CaseRunner::preferred_layouts(const OpCase& c, const std::vector<HostTensor>& outputs) const {
  MetaViews v(c, outputs);
  std::optional<OpLayouts> l = runner_.layouts(v.ins, v.outs, c.attrs);
  if (!l) return std::nullopt;
  for (const auto* orders : {&l->inputs, &l->outputs})
    for (const common::DimOrder& o : *orders)
      if (!o.empty() && !common::is_row_major_order(o)) return l;
  return std::nullopt;
}

std::unique_ptr<Error> CaseRunner::check(const OpCase& c, const std::vector<HostTensor>& outputs) const {
  MetaViews v(c, outputs);
  return runner_.check(v.ins, v.outs, c.attrs);
}

Outcome CaseRunner::run(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c, std::vector<Failure>& failures,
                        std::vector<Declined>* declined) {
  if (c.expect_error) return run_layout(suite, dtype, c, Layout::kContiguous, failures, declined);
  // A case whose dtypes the device declines in op_check (float16 inputs of
  // a float32 test on a device without float16) is not the device's to pass.
  // A uniform kernel declining mixed inputs is reported as declined: the
  // plugin is right to, and --through-core runs the case through the casts.
  // The reference's outputs (shapes and dtypes) for op_check and
  // op_get_layouts; nullopt when it throws (run_layout reports that).
  std::optional<std::vector<HostTensor>> reference;
  try {
    reference = suite.reference(c);
  } catch (const std::exception&) {
    // reported by run_layout
  }
  try {
    std::unique_ptr<Error> refused = reference ? check(c, *reference) : nullptr;
    if (refused && refused->code() == HAL_STATUS_UNSUPPORTED_DTYPE) return Outcome::kNotForDevice;
    if (refused && refused->code() == HAL_STATUS_MIXED_DTYPES && may_decline(c)) {
      if (declined != nullptr) declined->push_back({c.name, "", refused->what()});
      return Outcome::kDeclined;
    }
  } catch (const std::exception&) {
    // reported by run_layout
  }
  bool has_rank2 = false;
  for (const auto& t : c.inputs) has_rank2 |= t && t->rank() >= 2;
  std::vector<Layout> layouts = {Layout::kContiguous};
  if (c.layouts) {
    layouts.push_back(Layout::kOffset);
    layouts.push_back(Layout::kStrided);
    if (has_rank2) layouts.push_back(Layout::kPermuted);
    try {
      if (reference && preferred_layouts(c, *reference)) layouts.push_back(Layout::kPreferred);
    } catch (const std::exception&) {
      // a call the views cannot describe: run_layout reports it
    }
  }
  if (options_.layout) {
    bool allowed = std::find(layouts.begin(), layouts.end(), *options_.layout) != layouts.end();
    layouts.clear();
    if (allowed) layouts.push_back(*options_.layout);
    else if (options_.show_values)
      std::fprintf(options_.show_values, "case '%s' does not run in layout %s (%s)\n", c.name.c_str(),
                   layout_name(*options_.layout),
                   !c.layouts                               ? "the case runs contiguous only"
                   : *options_.layout == Layout::kPreferred ? "the plugin prefers only row-major (or nothing) for it"
                                                            : "permuted needs an input of rank >= 2");
  }
  for (Layout l : layouts) {
    size_t before = failures.size();
    run_layout(suite, dtype, c, l, failures, declined);
    // A case wrong in the plain layout is reported once, not per layout.
    if (l == Layout::kContiguous && failures.size() > before) break;
  }
  return Outcome::kRan;
}

Outcome CaseRunner::run_layout(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c, Layout layout,
                               std::vector<Failure>& failures, std::vector<Declined>* declined) {
  Failure f;
  f.op = suite.op;
  f.dtype = dtype_str(dtype);
  f.case_name = c.name;
  f.layout = layout_name(layout);
  f.attrs = attrs_str(c.attrs);
  auto fail = [&](std::string msg) {
    f.message = std::move(msg);
    failures.push_back(f);
    if (options_.show_values) std::fprintf(options_.show_values, "  FAILED: %s\n", f.message.c_str());
    return Outcome::kRan;
  };
  std::FILE* show = options_.show_values;
  if (show)
    std::fprintf(show, "case '%s' (%s), op.%s.%s%s:\n", c.name.c_str(), layout_name(layout), suite.op.c_str(),
                 dtype_str(dtype), options_.promotion == Promotion::kCore ? ", through the core" : "");
  try {
    std::vector<HostTensor> expected;
    if (c.expect_error) {
      expected = c.outputs_for_error;
    } else {
      try {
        expected = suite.reference(c);
      } catch (const std::exception& e) {
        return fail(std::string("the suite's reference threw: ") + e.what());
      }
    }
    // kPreferred: each tensor in the order the plugin prefers (row-major
    // where it has none).
    OpLayouts orders;
    if (layout == Layout::kPreferred) {
      if (auto l = preferred_layouts(c, expected)) orders = std::move(*l);
      orders.inputs.resize(c.inputs.size());
      orders.outputs.resize(expected.size());
    }
    auto order_of = [&](bool input, size_t i) {
      const std::vector<common::DimOrder>& v = input ? orders.inputs : orders.outputs;
      return i < v.size() ? v[i] : common::DimOrder{};
    };
    std::vector<Placed> ins, outs;
    ins.reserve(c.inputs.size());
    std::string shapes, strides;
    for (const auto& t : c.inputs) {
      if (!t) {
        ins.emplace_back();
        shapes += (shapes.empty() ? "" : " ") + std::string("-");
        strides += (strides.empty() ? "" : " ") + std::string("-");
        continue;
      }
      ins.push_back(place(*device_, *t, layout, true, order_of(true, ins.size())));
      shapes += (shapes.empty() ? "" : " ") + shape_str(t->shape);
      strides += (strides.empty() ? "" : " ") + strides_str(ins.back().strides);
    }
    shapes += " ->";
    strides += " ->";
    for (const HostTensor& t : expected) {
      outs.push_back(place(*device_, t, layout, false, order_of(false, outs.size())));
      shapes += " " + shape_str(t.shape);
      strides += " " + strides_str(outs.back().strides);
    }
    f.shapes = shapes;
    f.strides = strides;
    if (show) {
      for (size_t i = 0; i < ins.size(); ++i)
        if (c.inputs[i]) show_tensor(show, "input " + std::to_string(i), *c.inputs[i], &ins[i]);
        else std::fprintf(show, "  input %zu: absent\n", i);
      if (!c.attrs.empty()) std::fprintf(show, "  attributes: %s\n", attrs_str(c.attrs).c_str());
    }

    std::vector<const TensorView*> in_views, out_views;
    for (size_t i = 0; i < ins.size(); ++i) in_views.push_back(c.inputs[i] ? &ins[i].view : nullptr);
    for (const Placed& p : outs) out_views.push_back(&p.view);

    if (c.expect_error) {
      // Synchronous: a data-dependent error is then the launch's own.
      std::string what;
      try {
        runner_.launch(in_views, out_views, c.attrs, nullptr);
        what = std::string("expected ") + code_str(*c.expect_error) + " but the launch succeeded";
      } catch (const Error& e) {
        std::string msg = e.what();
        if (show) std::fprintf(show, "  expected %s; the launch failed with %s: %s\n", code_str(*c.expect_error).c_str(),
                               code_str(e.code()).c_str(), msg.c_str());
        // A uniform kernel may decline mixed inputs before looking further;
        // the expected error is then checked by --through-core.
        if (e.code() == HAL_STATUS_MIXED_DTYPES && e.code() != *c.expect_error && may_decline(c)) {
          for (size_t o = 0; o < outs.size(); ++o) {
            std::string g = check_gaps(outs[o], download(outs[o]), true);
            if (!g.empty()) return fail("declined with MIXED_DTYPES but output " + std::to_string(o) + ": " + g);
          }
          if (declined != nullptr) declined->push_back({c.name, "", msg});
          if (show) std::fprintf(show, "  DECLINED (mixed input dtypes)\n");
          return Outcome::kDeclined;
        }
        if (e.code() != *c.expect_error)
          what = std::string("expected ") + code_str(*c.expect_error) + ", got " + code_str(e.code()) + ": " + msg;
        for (const std::string& m : c.error_mentions)
          if (what.empty() && msg.find(m) == std::string::npos)
            what = "the error message does not mention '" + m + "': " + msg;
      }
      for (size_t o = 0; o < outs.size() && what.empty(); ++o) {
        std::string g = check_gaps(outs[o], download(outs[o]), true);
        if (!g.empty()) what = "output " + std::to_string(o) + ": " + g;
      }
      if (!what.empty()) return fail(what);
      if (show) std::fprintf(show, "  ok\n");
      return Outcome::kRan;
    }

    try {
      if (stream_.valid()) {
        runner_.launch(in_views, out_views, c.attrs, &stream_);
        stream_.synchronize();
      } else {
        runner_.launch(in_views, out_views, c.attrs, nullptr);
      }
    } catch (const Error& e) {
      if (show)
        for (size_t o = 0; o < expected.size(); ++o) show_output(show, o, expected[o], nullptr, Compare::kDefault, 1);
      return fail(std::string("launch failed: ") + code_str(e.code()) + ": " + e.what());
    }

    for (size_t i = 0; i < ins.size(); ++i) {
      if (!c.inputs[i]) continue;
      if (download(ins[i]) != ins[i].image)
        return fail("input " + std::to_string(i) + " was modified by the launch (or the bytes around it)");
    }
    std::vector<HostTensor> actual;
    for (size_t o = 0; o < outs.size(); ++o) {
      std::vector<uint8_t> bytes = download(outs[o]);
      std::string g = check_gaps(outs[o], bytes, false);
      if (!g.empty())
        return fail("output " + std::to_string(o) + ": " + g + output_dtype_hint(suite.op, o, outs[o].dtype, dtype));
      actual.push_back(read_values(outs[o], bytes));
    }
    if (show)
      for (size_t o = 0; o < outs.size(); ++o)
        show_output(show, o, expected[o], &actual[o], c.custom_check ? Compare::kSkip : o < c.compare.size() ? c.compare[o] : Compare::kDefault,
                    c.tolerance_scale);
    if (c.custom_check) {
      std::string why = c.custom_check(c, expected, actual);
      if (!why.empty()) return fail(why);
      if (show) std::fprintf(show, "  ok (the suite's own check)\n");
      return Outcome::kRan;
    }
    std::string all;
    for (size_t o = 0; o < outs.size(); ++o) {
      Compare mode = o < c.compare.size() ? c.compare[o] : Compare::kDefault;
      if (mode == Compare::kSkip) continue;
      double max_abs = 0, max_rel = 0;
      std::string why = compare(expected[o], actual[o], mode, c.tolerance_scale, max_abs, max_rel);
      f.max_abs_error = std::max(f.max_abs_error, max_abs);
      f.max_rel_error = std::max(f.max_rel_error, max_rel);
      if (!why.empty())
        all += (all.empty() ? "" : "; ") +
               ("output " + std::to_string(o) + " " + why + output_dtype_hint(suite.op, o, actual[o].dtype, dtype));
    }
    if (!all.empty()) return fail(all);
    if (show) std::fprintf(show, "  ok\n");
  } catch (const std::exception& e) {
    return fail(std::string("error while running the case: ") + e.what());
  }
  return Outcome::kRan;
}

void CaseRunner::run_wrong_outputs(const OpSuite& suite, hal_dtype_e dtype, const OpCase& c,
                                   std::vector<Failure>& failures) {
  std::vector<HostTensor> expected;
  try {
    expected = suite.reference(c);
  } catch (const std::exception&) {
    return;  // reported by the case itself
  }
  if (expected.empty()) return;
  HostTensor wrong_shape = expected[0];
  if (wrong_shape.shape.empty()) wrong_shape.shape = {2};
  else wrong_shape.shape[0] += 1;
  wrong_shape.values.assign(static_cast<size_t>(wrong_shape.numel()), 0.0);
  HostTensor wrong_dtype = expected[0];
  wrong_dtype.dtype = expected[0].dtype == HAL_DTYPE_FLOAT32 ? HAL_DTYPE_INT32 : HAL_DTYPE_FLOAT32;

  struct Variant {
    const char* name;
    HostTensor out;
  } variants[] = {{"wrong output shape", wrong_shape}, {"wrong output dtype", wrong_dtype}};
  FreeOutputs free = free_outputs(suite.op);
  for (const Variant& v : variants) {
    if ((&v == &variants[0] && free.shape) || (&v == &variants[1] && free.dtype)) continue;
    OpCase e = c;
    e.name = std::string(v.name) + " (from '" + c.name + "')";
    std::vector<HostTensor> outs = expected;
    outs[0] = v.out;
    e.error(HAL_STATUS_INVALID_ARGUMENT, outs, {suite.op});
    run_layout(suite, dtype, e, Layout::kContiguous, failures);
  }
}

}  // namespace hal::conformance
