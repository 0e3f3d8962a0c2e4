// torch_hal: the aten -> catalog table (see mapping.hpp for the row format).
//
// Arguments and attributes follow each catalog op's doc in
// sdk/catalog/ops/*.toml. Where the aten op means something else for some
// argument values, the row's hook declines those calls (they decompose or
// fall back). Not mapped, and why:
//   - scatter.reduce: the catalog's scatter has no reduce mode (scatter.value
//     fills a src tensor and masked_fill.Tensor is a where(): hooks).
//   - var.dim/std.dim (unbiased bool), where.Scalar*, silu_backward and
//     _fused_rms_norm (2.15) are CompositeImplicitAutograd: they reach the
//     device as the rows they are written in (.correction, where.self,
//     sigmoid/mul, rsqrt/mean/mul), and a kernel would bypass their autograd.
//   - scaled_dot_product_attention: sdp_choice() below picks the
//     "overrideable" fused op (a row here) only for calls the catalog op
//     means: no dropout, no GQA, [B, H, L, E] inputs, a mask without grad,
//     causal only when L == S; everything else takes PyTorch's math path
//     (bmm, _softmax, ... rows). A plugin without the catalog ops gets math.
#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>

#include <unordered_map>

#include "backend.hpp"
#include "mapping.hpp"
#include "row_conversion.hpp"

namespace torch_hal {
namespace {

using I = InFrom;
using A = AttrFrom;

InputSpec t(const char* arg) { return {arg, I::kTensor}; }
InputSpec opt(const char* arg) { return {arg, I::kOptTensor}; }
InputSpec sc(const char* arg) { return {arg, I::kScalar}; }
InputSpec opt_sc(const char* arg) { return {arg, I::kOptScalar}; }
const InputSpec kNoInput{nullptr, I::kAbsent};

// "abs" -> abs, abs_, abs.out: the overloads of an elementwise op.
std::vector<std::string> fio(const std::string& name) { return {name, name + "_", name + ".out"}; }
// "add", "Tensor", "out" -> add.Tensor, add_.Tensor, add.out.
std::vector<std::string> fio(const std::string& name, const std::string& overload, const std::string& out) {
  return {name + "." + overload, name + "_." + overload, name + "." + out};
}

// ---- hooks ----

// threshold_backward is relu_backward only for threshold 0 (relu's autograd).
void threshold_is_zero(Call& c) {
  const double th = c.arg("threshold").toScalar().toDouble();
  if (th != 0.0) throw Decline{"threshold " + std::to_string(th) + " is not 0"};
}

// _softmax(half_to_float=True) gives float32 from half input.
void softmax_same_dtype(Call& c) {
  if (c.arg("half_to_float").toBool()) throw Decline{"half_to_float=True"};
}

// convolution: conv1d / conv2d / conv_transpose2d by the weight's rank.
void conv_by_rank(Call& c) {
  const int64_t rank = c.arg("weight").toTensor().dim();
  if (rank != 3 && rank != 4) throw Decline{"convolution of rank " + std::to_string(rank)};
  if (!c.arg("transposed").toBool()) {
    c.catalog = rank == 3 ? "conv1d" : "conv2d";
    return;
  }
  if (rank != 4) throw Decline{"transposed convolution of rank " + std::to_string(rank)};
  c.catalog = "conv_transpose2d";
  c.attrs.push_back(hal::Attr::ints("output_padding", c.arg("output_padding").toIntVector()));
}

void conv_not_transposed(Call& c) {
  if (c.arg("transposed").toBool()) throw Decline{"transposed convolution backward"};
  const int64_t rank = c.arg("weight").toTensor().dim();
  if (rank != 3 && rank != 4) throw Decline{"convolution of rank " + std::to_string(rank)};
}

// nll_loss_forward's total_weight (the catalog's loss does not return it):
// the summed weight of the targets that are not ignore_index. The hook
// leaves it out of the launch (eager only: it is computed with device ops).
void nll_loss_outputs(Call& c) {
  if (c.lowering) throw Decline{"total_weight is computed with eager device ops"};
  c.outputs.resize(1);
}

// After the loss: the same catalog op with reduction "sum" over a broadcast
// -1 is that sum (-w[t] * -1 per counted target), one launch of the kernel
// that just ran, where a count of valid targets took two (ne, then sum) and
// a weighted sum five. A plugin declining the broadcast input gets those.
// PyTorch's kernel sums it for a [C] input whatever the reduction; an
// [N, C] input unreduced gets 0.
void nll_total_weight(Call& c) {
  at::Tensor total = c.returns[1];
  const at::Tensor input = c.arg("self").toTensor(), target = c.arg("target").toTensor();
  if (c.arg("reduction").toInt() == at::Reduction::None && input.dim() == 2) {
    total.zero_();
    return;
  }
  const at::Tensor w = c.optional_tensor("weight");
  const int64_t ignore_index = c.arg("ignore_index").toInt();
  try {
    const at::Tensor minus_one = cached_device_scalar(-1, input.scalar_type(), c.dev).expand(input.sizes());
    launch(op_runner(c.dev, "nll_loss"), c.dev, {minus_one, target, w}, {total},
           {hal::Attr::s("reduction", "sum"), hal::Attr::i("ignore_index", ignore_index)});
    return;
  } catch (const hal::Error& e) {
    if (!declined(e)) throw;
  }
  const at::Tensor valid = target.ne(ignore_index);
  if (!w.defined()) {  // the count of valid targets, summed straight into TOTAL in its dtype
    at::sum_out(total, valid, c10::IntArrayRef{}, false, total.scalar_type());
    return;
  }
  total.copy_(w.index_select(0, at::where(valid, target, 0).reshape(-1)).reshape(target.sizes()).mul(valid).sum());
}

// Eval batch norm: PyTorch's CPU kernel (and the catalog op) give empty [0]
// save_mean / save_invstd where the Meta kernel says [C].
void batch_norm_eval_saves_nothing(Call& c) {
  const bool has_flag = c.schema.argumentIndexWithName("training").has_value();
  if (has_flag && c.arg("training").toBool()) return;
  for (size_t i : {1, 2}) c.returns[i] = c.outputs[i] = at::empty({0}, c.returns[0].options());
}

// Eval backward: the catalog op reads running_mean / running_var and no
// saved statistics; PyTorch passes the forward's empty [0] save_mean /
// save_invstd, which the op would reject as the wrong shape.
void batch_norm_backward_stats(Call& c) {
  const char* flag = c.schema.argumentIndexWithName("train").has_value() ? "train" : "update";
  if (c.arg(flag).toBool()) return;
  if (!c.inputs[3].defined() || !c.inputs[4].defined())
    throw Decline{"eval backward without running_mean and running_var"};
  c.inputs[5] = c.inputs[6] = at::Tensor();
}

// The catalog's divisor_override is 0 (none) or positive; PyTorch takes any
// non-zero divisor.
void divisor_not_negative(Call& c) {
  const c10::IValue& d = c.arg("divisor_override");
  if (!d.isNone() && d.toInt() < 0) throw Decline{"divisor_override " + std::to_string(d.toInt()) + " is negative"};
}

// arange.start_out: the catalog's dtype attribute is the out tensor's. An
// integral out with a fractional start or step is declined: PyTorch sizes it
// from the real values but steps in the truncated ones (arange(0, 5., 0.5,
// dtype=int32) is ten 0s), which the catalog op does not mean.
void arange_dtype_of_out(Call& c) {
  const c10::ScalarType dtype = c.arg("out").toTensor().scalar_type();
  if (at::isIntegralType(dtype, /*includeBool=*/true))
    for (const char* arg : {"start", "step"}) {
      const c10::Scalar v = c.arg(arg).toScalar();
      if (v.isFloatingPoint() && v.toDouble() != static_cast<double>(static_cast<int64_t>(v.toDouble())))
        throw Decline{std::string("fractional ") + arg + " for an integral out"};
    }
  c.attrs.push_back(hal::Attr::dtype("dtype", to_hal_dtype(dtype)));
}

// ---- factorizations ----

// PyTorch's check of a factorization's info: raises as its kernels do
// (linalg.svd's "failed to converge", linalg.cholesky's "not positive-definite").
void check_info(const Call& c, const at::Tensor& info, const char* api, const char* input) {
  at::_linalg_check_errors(info, api, /*is_matrix=*/c.arg(input).toTensor().dim() == 2);
}

// _linalg_eigh and _linalg_svd do not return the info the catalog ops write:
// a scratch output, checked after the launch (eager only: it reads info).
void add_info_output(Call& c) {
  if (c.lowering) throw Decline{"the factorization's info is checked after the launch"};
  const at::Tensor a = c.arg("A").toTensor();
  c.outputs.push_back(at::empty(a.sizes().slice(0, a.dim() - 2), a.options().dtype(at::kInt)));
}

void eigh_prepare(Call& c) {
  c.attrs.push_back(hal::Attr::b("upper", c.arg("UPLO").toStringRef() == "U"));
  add_info_output(c);
}
void eigh_check(Call& c) { check_info(c, c.outputs.back(), "linalg.eigh", "A"); }

// A driver (cuSOLVER's gesvd/gesvdj/gesvda) is CUDA's: PyTorch's CPU kernel
// refuses it, and so does the fallback.
void svd_prepare(Call& c) {
  if (!c.arg("driver").isNone()) throw Decline{"driver= is CUDA's"};
  add_info_output(c);
}
void svd_check(Call& c) { check_info(c, c.outputs.back(), "linalg.svd", "A"); }

void cholesky_check(Call& c) {
  if (c.arg("check_errors").toBool()) check_info(c, c.outputs[1], "linalg.cholesky_ex", "self");
}

// LU without pivoting is not the catalog op (nor PyTorch's CPU kernel).
void lu_pivoted(Call& c) {
  if (!c.arg("pivot").toBool()) throw Decline{"pivot=False"};
}
void lu_check(Call& c) {
  if (c.arg("check_errors").toBool()) check_info(c, c.outputs[2], "torch.linalg.lu_factor_ex", "A");
}

// An index tensor the catalog's index ops take: integers. bool and uint8
// are masks (PyTorch turns those into nonzero()): declined.
void require_integer_index(const at::Tensor& t) {
  if (!at::isIntegralType(t.scalar_type(), /*includeBool=*/false) || t.scalar_type() == at::kByte)
    throw Decline{std::string("a ") + c10::toString(t.scalar_type()) + " index (a mask)"};
}

// The catalog's index_put for self[:LEAD, i0, ..., iK-1, ...] = VALUES (the
// aten ops below): it takes the K index tensors broadcast and stacked as one
// int64 [K, *B] tensor, built here with device ops. With LEAD > 0 it indexes
// a permuted view of self whose indexed dims lead, with values expanded to
// PyTorch's indexed shape (self[:LEAD] + B + rest) and permuted alike; the
// output is the same view of the op's output.
void index_put_at(Call& c, const at::Tensor& self, int64_t lead, const std::vector<at::Tensor>& indices,
                  const at::Tensor& values) {
  if (c.lowering) throw Decline{"indices built with device ops"};
  if (values.scalar_type() != self.scalar_type()) throw Decline{"values of another dtype"};
  const int64_t k = static_cast<int64_t>(indices.size());
  if (k == 0 || lead + k > self.dim()) throw Decline{"no index, or more than self's dims"};
  std::vector<at::Tensor> long_indices;
  for (const at::Tensor& t : indices) {
    require_integer_index(t);
    long_indices.push_back(t.to(self.device(), at::kLong));
  }
  const std::vector<at::Tensor> b = at::broadcast_tensors(long_indices);
  std::vector<int64_t> self_perm, value_perm, indexed_shape;
  for (int64_t d = lead; d < lead + k; ++d) self_perm.push_back(d);
  for (int64_t d = 0; d < lead; ++d) self_perm.push_back(d), indexed_shape.push_back(self.size(d));
  for (int64_t d = lead + k; d < self.dim(); ++d) self_perm.push_back(d);
  for (int64_t s : b[0].sizes()) indexed_shape.push_back(s);
  for (int64_t d = lead + k; d < self.dim(); ++d) indexed_shape.push_back(self.size(d));
  if (values.dim() > static_cast<int64_t>(indexed_shape.size())) throw Decline{"values of more dims than indexed"};
  const int64_t nb = b[0].dim();
  for (int64_t d = lead; d < lead + nb; ++d) value_perm.push_back(d);
  for (int64_t d = 0; d < lead; ++d) value_perm.push_back(d);
  for (int64_t d = lead + nb; d < static_cast<int64_t>(indexed_shape.size()); ++d) value_perm.push_back(d);
  c.inputs[0] = self.permute(self_perm);
  c.inputs[1] = at::stack(b, 0);
  c.inputs[2] = values.to(self.device()).expand(indexed_shape).permute(value_perm);
  c.replace_output(0, c.outputs[0].permute(self_perm));
}

// _index_put_impl_ (index_put_'s kernel): Nones then index tensors, e.g.
// x[i] = v, x[:, i] = v. Declined: Nones between indices (PyTorch moves the
// indexed dims first), bool/uint8 masks (PyTorch turns those into
// nonzero()), values of another dtype (PyTorch's error), graphs.
void index_put_stacked_indices(Call& c) {
  std::vector<at::Tensor> indices;
  int64_t lead = 0;  // Nones before the first index
  bool ended = false;
  for (const c10::IValue& v : c.arg("indices").toListRef()) {
    if (v.isNone() || !v.toTensor().defined()) {
      if (indices.empty()) ++lead;
      else ended = true;
      continue;
    }
    if (ended) throw Decline{"Nones between indices"};
    indices.push_back(v.toTensor());
  }
  index_put_at(c, c.arg("self").toTensor(), lead, indices, c.arg("values").toTensor());
}

// index_fill (a Scalar or a 0-d Tensor value) and index_copy along DIM:
// index_put with DIM leading Nones and the 1-D index. Shapes PyTorch
// refuses (a value of rank > 0, an index of rank > 1, a source not shaped
// like the selection) decline, so PyTorch's CPU kernel gives its error.
void index_fill_or_copy_as_index_put(Call& c) {
  const at::Tensor& self = c.arg("self").toTensor();
  const at::Tensor& index = c.arg("index").toTensor();
  if (self.dim() == 0 || index.dim() > 1) throw Decline{"a 0-d self or an index of rank > 1"};
  const int64_t dim = c10::maybe_wrap_dim(c.arg("dim").toInt(), self.dim());
  at::Tensor values;
  if (c.schema.argumentIndexWithName("source")) {
    values = c.arg("source").toTensor();
    std::vector<int64_t> want = self.sizes().vec();
    want[dim] = index.numel();
    if (values.sizes().vec() != want) throw Decline{"a source not shaped like the selection"};
  } else if (c.arg("value").isTensor()) {
    values = c.arg("value").toTensor();
    if (values.dim() != 0) throw Decline{"a value of rank > 0"};
    values = values.to(self.scalar_type());
  } else {
    values = at::full({}, c.arg("value").toScalar(), self.options());
  }
  index_put_at(c, self, dim, {index.reshape({-1})}, values);
}

// index.Tensor with one index tensor (x[i], x[:, i]: the common gathers) as
// index_select on its dim: the index flattened, entries in [-size, 0)
// wrapped (index_select takes [0, size): what is out of range fails), the
// result viewed as PyTorch's self[:P] + B + rest. Several index tensors,
// masks and graphs decline.
void index_as_index_select(Call& c) {
  if (c.lowering) throw Decline{"index wrapped with device ops"};
  const at::Tensor& self = c.arg("self").toTensor();
  at::Tensor index;
  int64_t lead = 0;
  for (const c10::IValue& v : c.arg("indices").toListRef()) {
    if (v.isNone() || !v.toTensor().defined()) {
      if (!index.defined()) ++lead;
      continue;
    }
    if (index.defined()) throw Decline{"several index tensors"};
    index = v.toTensor();
  }
  if (!index.defined() || lead >= self.dim()) throw Decline{"no index tensor"};
  require_integer_index(index);
  const at::Tensor& out = c.outputs[0];
  if (!out.is_contiguous()) throw Decline{"a strided result"};
  const at::Tensor flat = index.to(self.device(), at::kLong).reshape({-1});
  std::vector<int64_t> shape = self.sizes().vec();
  shape[lead] = flat.numel();
  c.catalog = "index_select";
  c.inputs.clear();
  c.inputs.push_back(self);
  // [-size, 0) wraps; anything else stays, so an error names the value given.
  const int64_t size = self.size(lead);
  c.inputs.push_back(at::where(flat.lt(0).logical_and(flat.ge(-size)), flat.add(size), flat));
  c.attrs.push_back(hal::Attr::i("dim", lead));
  c.replace_output(0, out.view(shape));
}

// scatter.value: the catalog's scatter takes a tensor src; the value filled
// into an index-shaped tensor is one (device fill, no host copy).
void scatter_value_as_src(Call& c) {
  if (c.lowering) throw Decline{"src filled with a device op"};
  const at::Tensor& self = c.arg("self").toTensor();
  c.inputs[2] = at::full(c.arg("index").toTensor().sizes(), c.arg("value").toScalar(), self.options());
}

// bitwise_not as bitwise_xor with all ones (-1; 255 for uint8, true for bool).
void bitwise_not_as_xor(Call& c) {
  if (c.lowering) throw Decline{"the constant made with a device op"};
  const at::Tensor& self = c.arg("self").toTensor();
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) throw Decline{"a floating input"};
  const c10::ScalarType t = self.scalar_type();
  if (t == at::kUInt16 || t == at::kUInt32 || t == at::kUInt64) throw Decline{"a wide unsigned input"};
  const c10::Scalar ones = t == at::kBool ? c10::Scalar(true) : t == at::kByte ? c10::Scalar(255) : c10::Scalar(-1);
  c.inputs.push_back(at::full({}, ones, self.options()));
}

// masked_fill.Tensor (a 0-d value tensor) as where(mask, value, self), the
// value in self's dtype on the device. A mask that would broadcast self to a
// larger shape declines (PyTorch's error).
void masked_fill_tensor_as_where(Call& c) {
  const at::Tensor& self = c.arg("self").toTensor();
  const at::Tensor& value = c.arg("value").toTensor();
  const at::Tensor& mask = c.arg("mask").toTensor();
  if (value.dim() != 0) throw Decline{"a value of rank > 0"};
  if (mask.scalar_type() != at::kBool) throw Decline{"a mask that is not bool"};
  if (at::infer_size(mask.sizes(), self.sizes()) != self.sizes()) throw Decline{"a mask broadcasting self"};
  if (c.lowering) throw Decline{"the value converted with a device op"};
  c.inputs[1] = value.to(self.device(), self.scalar_type());
}

// The fused SDPA op takes neither dropout nor a debug mask.
void sdpa_plain(Call& c) {
  if (c.arg("dropout_p").toDouble() != 0.0) throw Decline{"dropout_p != 0"};
  if (c.schema.argumentIndexWithName("return_debug_mask") && c.arg("return_debug_mask").toBool())
    throw Decline{"return_debug_mask=True"};
}

// cat skips legacy empty 1-D tensors ([0]) joining tensors of another rank;
// the catalog's cat takes tensors of the output's rank only.
void cat_skip_legacy_empty(Call& c) {
  const int64_t rank = c.outputs[0].dim();
  Call::Tensors kept;
  for (auto& in : c.inputs)
    if (!(in.dim() == 1 && in.numel() == 0 && rank != 1)) kept.push_back(std::move(in));
  if (kept.empty()) throw Decline{"every input is empty"};
  c.inputs = std::move(kept);
}

// _to_copy and clone as graph copies: same device, no layout change.
void copy_stays_on_device(Call& c) {
  for (const char* arg : {"device", "layout", "pin_memory", "memory_format"}) {
    if (!c.schema.argumentIndexWithName(arg)) continue;
    const c10::IValue& v = c.arg(arg);
    if (v.isNone()) continue;
    if (std::string(arg) == "memory_format" && v.toMemoryFormat() == c10::MemoryFormat::Preserve) continue;
    if (std::string(arg) == "pin_memory" && !v.toBool()) continue;
    if (std::string(arg) == "layout" && v.toLayout() == c10::kStrided) continue;
    if (std::string(arg) == "device" && v.toDevice().type() == c10::DeviceType::PrivateUse1) continue;
    throw Decline{std::string(arg) + " argument"};
  }
}

// PyTorch asks this which SDPA implementation to run for a PrivateUse1 query.
int64_t sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal, std::optional<double>,
                   bool enable_gqa) {
  constexpr auto kMath = static_cast<int64_t>(at::SDPBackend::math);
  if (dropout_p != 0.0 || q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return kMath;
  if (q.size(1) != k.size(1) || k.size(1) != v.size(1) || (enable_gqa && q.size(1) != k.size(1))) return kMath;
  if (is_causal && q.size(2) != k.size(2)) return kMath;
  if (mask && mask->defined() && mask->requires_grad()) return kMath;
  try {
    op_runner(q.device().index(), "scaled_dot_product_attention");
    op_runner(q.device().index(), "scaled_dot_product_attention_backward");
  } catch (const hal::Error&) {
    return kMath;  // the plugin lacks the catalog ops
  }
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

}  // namespace

}  // namespace torch_hal

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_hal::sdp_choice)
}  // namespace at::native

namespace torch_hal {

const std::vector<Mapping>& mappings() {
  static const std::vector<Mapping>* table = [] {
    auto* rows = new std::vector<Mapping>();  // leaked: kernels point at rows
    auto add = [&](std::vector<std::string> aten, const char* catalog, std::vector<InputSpec> inputs,
                   std::vector<AttrSpec> attrs = {}, Shape shape = Shape::kMeta) -> Mapping& {
      Mapping m;
      m.aten = std::move(aten);
      m.catalog = catalog;
      m.inputs = std::move(inputs);
      m.attrs = std::move(attrs);
      m.shape = shape;
      rows->push_back(std::move(m));
      return rows->back();
    };
    const auto E = Shape::kElementwise, C = Shape::kComparison;
    const AttrSpec alpha{"alpha", "alpha", A::kScalar};

    // ---- binary arithmetic: Tensor and Scalar overloads ----
    add(fio("add", "Tensor", "out"), "add", {t("self"), t("other")}, {alpha}, E);
    add(fio("add", "Scalar", "Scalar_out"), "add", {t("self"), sc("other")}, {alpha}, E);
    add(fio("sub", "Tensor", "out"), "sub", {t("self"), t("other")}, {alpha}, E);
    add(fio("sub", "Scalar", "Scalar_out"), "sub", {t("self"), sc("other")}, {alpha}, E);
    add({"rsub.Tensor", "rsub.Tensor_out"}, "sub", {t("other"), t("self")}, {alpha}, E);
    add({"rsub.Scalar", "rsub.Scalar_out"}, "sub", {sc("other"), t("self")}, {alpha}, E);
    add(fio("mul", "Tensor", "out"), "mul", {t("self"), t("other")}, {}, E);
    add(fio("mul", "Scalar", "Scalar_out"), "mul", {t("self"), sc("other")}, {}, E);
    add(fio("div", "Tensor", "out"), "div", {t("self"), t("other")}, {}, E);
    add(fio("div", "Scalar", "Scalar_out"), "div", {t("self"), sc("other")}, {}, E);
    add(fio("div", "Tensor_mode", "out_mode"), "div", {t("self"), t("other")},
        {{"rounding_mode", "rounding_mode", A::kOptString}});
    add(fio("div", "Scalar_mode", "Scalar_mode_out"), "div", {t("self"), sc("other")},
        {{"rounding_mode", "rounding_mode", A::kOptString}});
    add({"pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out"}, "pow", {t("self"), t("exponent")}, {}, E);
    add({"pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out"}, "pow", {t("self"), sc("exponent")}, {}, E);
    add({"pow.Scalar", "pow.Scalar_out"}, "pow", {sc("self"), t("exponent")});
    for (const char* op : {"maximum", "minimum"}) add({op, std::string(op) + ".out"}, op, {t("self"), t("other")}, {}, E);
    for (const char* op : {"fmod", "remainder"}) {
      add(fio(op, "Tensor", "Tensor_out"), op, {t("self"), t("other")}, {}, E);
      add(fio(op, "Scalar", "Scalar_out"), op, {t("self"), sc("other")}, {}, E);
    }
    add(fio("bitwise_not"), "bitwise_xor", {t("self")}).hook = bitwise_not_as_xor;
    for (const char* op : {"bitwise_and", "bitwise_or", "bitwise_xor"}) {
      add(fio(op, "Tensor", "Tensor_out"), op, {t("self"), t("other")});
      add(fio(op, "Scalar", "Scalar_out"), op, {t("self"), sc("other")});
    }

    // ---- comparisons and logical ops ----
    for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
      add(fio(op, "Tensor", "Tensor_out"), op, {t("self"), t("other")}, {}, C);
      add(fio(op, "Scalar", "Scalar_out"), op, {t("self"), sc("other")}, {}, C);
    }
    for (const char* op : {"logical_and", "logical_or", "logical_xor"}) add(fio(op), op, {t("self"), t("other")}, {}, C);
    add(fio("logical_not"), "logical_not", {t("self")});
    add({"isnan"}, "isnan", {t("self")});

    // ---- where, clamp, lerp, addcmul, addcdiv ----
    add({"where.self", "where.self_out"}, "where", {t("condition"), t("self"), t("other")});
    add({"clamp", "clamp_", "clamp.out"}, "clamp", {t("self"), opt_sc("min"), opt_sc("max")});
    add({"clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out"}, "clamp", {t("self"), opt("min"), opt("max")});
    add({"clamp_min", "clamp_min_", "clamp_min.out"}, "clamp", {t("self"), sc("min"), kNoInput});
    add({"clamp_min.Tensor", "clamp_min_.Tensor", "clamp_min.Tensor_out"}, "clamp", {t("self"), t("min"), kNoInput});
    add({"clamp_max", "clamp_max_", "clamp_max.out"}, "clamp", {t("self"), kNoInput, sc("max")});
    add({"clamp_max.Tensor", "clamp_max_.Tensor", "clamp_max.Tensor_out"}, "clamp", {t("self"), kNoInput, t("max")});
    add(fio("lerp", "Scalar", "Scalar_out"), "lerp", {t("self"), t("end"), sc("weight")});
    add(fio("lerp", "Tensor", "Tensor_out"), "lerp", {t("self"), t("end"), t("weight")});
    add(fio("addcmul"), "addcmul", {t("self"), t("tensor1"), t("tensor2")}, {{"value", "value", A::kScalar}});
    add(fio("addcdiv"), "addcdiv", {t("self"), t("tensor1"), t("tensor2")}, {{"value", "value", A::kScalar}});

    // ---- unary ----
    for (const char* op : {"abs", "neg", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
                           "tanh", "sigmoid", "erf", "floor", "ceil", "round", "sign"})
      add(fio(op), op, {t("self")}, {}, E);
    add({"relu", "relu_"}, "relu", {t("self")}, {}, E);
    for (const char* op : {"tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10",
                           "exp2", "trunc", "erfc", "erfinv", "lgamma", "digamma", "i0"})
      add(fio(op), op, {t("self")}, {}, E);
    add({"fix", "fix_", "fix.out"}, "trunc", {t("self")}, {}, E);
    add({"signbit", "signbit.out"}, "signbit", {t("self")}, {}, C);
    for (const char* op : {"erfcx", "ndtri", "i0e", "i1", "i1e"})
      add({std::string("special_") + op, std::string("special_") + op + ".out"}, op, {t("self")}, {}, E);
    for (const char* op : {"bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1"})
      add({std::string("special_") + op, std::string("special_") + op + ".out"}, op, {t("self")}, {}, E);
    for (const char* op : {"scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"})
      add({std::string("special_") + op, std::string("special_") + op + ".out"}, op, {t("x")}, {}, E);
    for (const char* op : {"igamma", "igammac"}) add(fio(op), op, {t("self"), t("other")}, {}, E);
    add({"special_modified_bessel_i0", "special_modified_bessel_i0.out"}, "i0", {t("self")}, {}, E);
    add({"special_modified_bessel_i1", "special_modified_bessel_i1.out"}, "i1", {t("self")}, {}, E);
    add({"polygamma", "polygamma.out"}, "polygamma", {t("self")}, {{"n", "n", A::kInt}}, E);
    add({"polygamma_"}, "polygamma", {t("self")}, {{"n", "n", A::kInt}});
    for (const char* op : {"atan2", "hypot", "nextafter"}) add(fio(op), op, {t("self"), t("other")}, {}, E);
    add({"arctan2", "arctan2_", "arctan2.out"}, "atan2", {t("self"), t("other")}, {}, E);
    for (const char* op : {"fmax", "fmin"}) add({op, std::string(op) + ".out"}, op, {t("self"), t("other")}, {}, E);
    add(fio("copysign", "Tensor", "out"), "copysign", {t("self"), t("other")}, {}, E);
    add(fio("copysign", "Scalar", "Scalar_out"), "copysign", {t("self"), sc("other")}, {}, E);
    add({"special_zeta", "special_zeta.out"}, "zeta", {t("self"), t("other")}, {}, E);
    add({"special_zeta.self_scalar", "special_zeta.self_scalar_out"}, "zeta", {sc("self"), t("other")});
    add({"special_zeta.other_scalar", "special_zeta.other_scalar_out"}, "zeta", {t("self"), sc("other")}, {}, E);
    add(fio("silu"), "silu", {t("self")}, {}, E);
    add(fio("gelu"), "gelu", {t("self")}, {{"approximate", "approximate", A::kString}});

    // ---- backward of activations ----
    add({"threshold_backward", "threshold_backward.grad_input"}, "relu_backward", {t("grad_output"), t("self")})
        .hook = threshold_is_zero;
    add({"sigmoid_backward", "sigmoid_backward.grad_input"}, "sigmoid_backward", {t("grad_output"), t("output")});
    add({"tanh_backward", "tanh_backward.grad_input"}, "tanh_backward", {t("grad_output"), t("output")});
    add({"silu_backward.grad_input"}, "silu_backward", {t("grad_output"), t("self")});
    add({"gelu_backward", "gelu_backward.grad_input"}, "gelu_backward", {t("grad_output"), t("self")},
        {{"approximate", "approximate", A::kString}});

    // ---- linear algebra ----
    add({"mm", "mm.out"}, "mm", {t("self"), t("mat2")});
    add({"bmm", "bmm.out"}, "bmm", {t("self"), t("mat2")});
    add({"addmm", "addmm_", "addmm.out"}, "addmm", {t("self"), t("mat1"), t("mat2")},
        {{"beta", "beta", A::kScalar}, {"alpha", "alpha", A::kScalar}});
    add({"baddbmm", "baddbmm_", "baddbmm.out"}, "baddbmm", {t("self"), t("batch1"), t("batch2")},
        {{"beta", "beta", A::kScalar}, {"alpha", "alpha", A::kScalar}});

    // ---- reductions ----
    const AttrSpec keepdim{"keepdim", "keepdim", A::kBool}, dtype{"dtype", "dtype", A::kOptDtype};
    add({"sum.dim_IntList", "sum.IntList_out"}, "sum", {t("self")}, {{"dim", "dim", A::kOptInts}, keepdim, dtype});
    add({"sum"}, "sum", {t("self")}, {dtype});
    add({"mean.dim", "mean.out"}, "mean", {t("self")}, {{"dim", "dim", A::kOptInts}, keepdim, dtype});
    add({"mean"}, "mean", {t("self")}, {dtype});
    add({"prod.dim_int", "prod.int_out"}, "prod", {t("self")}, {{"dim", "dim", A::kIntAsInts}, keepdim, dtype});
    add({"prod"}, "prod", {t("self")}, {dtype});
    for (const char* op : {"amax", "amin"})
      add({op, std::string(op) + ".out"}, op, {t("self")}, {{"dim", "dim", A::kInts}, keepdim});
    add({"max.dim", "max.dim_max"}, "max", {t("self")}, {{"dim", "dim", A::kInt}, keepdim});
    add({"min.dim", "min.dim_min"}, "min", {t("self")}, {{"dim", "dim", A::kInt}, keepdim});
    add({"max"}, "amax", {t("self")});
    add({"min"}, "amin", {t("self")});
    for (const char* op : {"argmax", "argmin"})
      add({op, std::string(op) + ".out"}, op, {t("self")}, {{"dim", "dim", A::kOptIntAsInts}, keepdim});
    for (const char* op : {"var", "std"})
      add({std::string(op) + ".correction", std::string(op) + ".correction_out"}, op, {t("self")},
          {{"dim", "dim", A::kOptInts}, {"correction", "correction", A::kOptCorrection}, keepdim});
    add({"logsumexp", "logsumexp.out"}, "logsumexp", {t("self")}, {{"dim", "dim", A::kInts}, keepdim});
    add({"cumsum", "cumsum_", "cumsum.out"}, "cumsum", {t("self")}, {{"dim", "dim", A::kInt}, dtype});
    add({"cumprod", "cumprod_", "cumprod.out"}, "cumprod", {t("self")}, {{"dim", "dim", A::kInt}, dtype});
    add({"any.dims", "any.dims_out"}, "any", {t("self")}, {{"dim", "dim", A::kOptInts}, keepdim});
    add({"all.dims", "all.dims_out"}, "all", {t("self")}, {{"dim", "dim", A::kOptInts}, keepdim});
    add({"any.dim", "any.out"}, "any", {t("self")}, {{"dim", "dim", A::kIntAsInts}, keepdim});
    add({"all.dim", "all.out"}, "all", {t("self")}, {{"dim", "dim", A::kIntAsInts}, keepdim});
    add({"any", "any.all_out"}, "any", {t("self")});
    add({"all", "all.all_out"}, "all", {t("self")});

    // ---- softmax and losses ----
    const AttrSpec dim{"dim", "dim", A::kInt};
    add({"_softmax", "_softmax.out"}, "softmax", {t("self")}, {dim}).hook = softmax_same_dtype;
    add({"_log_softmax", "_log_softmax.out"}, "log_softmax", {t("self")}, {dim}).hook = softmax_same_dtype;
    add({"_softmax_backward_data", "_softmax_backward_data.out"}, "softmax_backward",
        {t("grad_output"), t("output")}, {dim});
    add({"_log_softmax_backward_data", "_log_softmax_backward_data.out"}, "log_softmax_backward",
        {t("grad_output"), t("output")}, {dim});
    const AttrSpec reduction{"reduction", "reduction", A::kReduction}, ignore{"ignore_index", "ignore_index", A::kInt};
    add({"nll_loss_forward", "nll_loss_forward.output"}, "nll_loss", {t("self"), t("target"), opt("weight")},
        {reduction, ignore});
    rows->back().hook = nll_loss_outputs;
    rows->back().after = nll_total_weight;
    add({"nll_loss_backward", "nll_loss_backward.grad_input"}, "nll_loss_backward",
        {t("grad_output"), t("self"), t("target"), opt("weight")}, {reduction, ignore});
    add({"mse_loss", "mse_loss.out"}, "mse_loss", {t("self"), t("target")}, {reduction});
    add({"mse_loss_backward", "mse_loss_backward.grad_input"}, "mse_loss_backward",
        {t("grad_output"), t("self"), t("target")}, {reduction});

    // ---- normalization ----
    const AttrSpec normalized_shape{"normalized_shape", "normalized_shape", A::kInts}, eps{"eps", "eps", A::kFloat};
    add({"native_layer_norm", "native_layer_norm.out"}, "layer_norm", {t("input"), opt("weight"), opt("bias")},
        {normalized_shape, eps});
    add({"native_layer_norm_backward", "native_layer_norm_backward.out"}, "layer_norm_backward",
        {t("grad_out"), t("input"), t("mean"), t("rstd"), opt("weight")}, {normalized_shape})
        .scratch = {"input", "normalized_shape", "normalized_shape"};
    const std::vector<InputSpec> bn_in{t("input"), opt("weight"), opt("bias"), opt("running_mean"),
                                       opt("running_var")};
    const AttrSpec momentum{"momentum", "momentum", A::kFloat};
    add({"native_batch_norm", "native_batch_norm.out", "_native_batch_norm_legit", "_native_batch_norm_legit.out"},
        "batch_norm", bn_in, {{"training", "training", A::kBool}, momentum, eps});
    rows->back().extra_outputs = {"running_mean", "running_var"};
    rows->back().hook = batch_norm_eval_saves_nothing;
    add({"_native_batch_norm_legit.no_stats", "_native_batch_norm_legit.no_stats_out"}, "batch_norm",
        {t("input"), opt("weight"), opt("bias"), kNoInput, kNoInput}, {{"training", "training", A::kBool}, momentum, eps})
        .extra_outputs = {nullptr, nullptr};
    {  // AOTAutograd's functional form (training graphs): the new running stats are returns, not writes
      Mapping& m = add({"_native_batch_norm_legit_functional"}, "batch_norm", bn_in,
                       {{"training", "training", A::kBool}, momentum, eps});
      m.graph_only = true;
      m.hook = batch_norm_eval_saves_nothing;
    }
    {  // and its eval form (inference graphs): running stats read, not updated
      Mapping& m = add({"_native_batch_norm_legit_no_training"}, "batch_norm", bn_in,
                       {{nullptr, "training", A::kFalse}, momentum, eps});
      m.returns_to_catalog = 3;
      m.extra_outputs = {"~running_mean", "~running_var"};
      m.graph_only = true;
      m.hook = batch_norm_eval_saves_nothing;
    }
    {
      Mapping& m = add({"_batch_norm_with_update", "_batch_norm_with_update.out"}, "batch_norm", bn_in,
                       {{nullptr, "training", A::kTrue}, momentum, eps});
      m.returns_to_catalog = 3;  // the 4th, `reserve`, is empty for non-cuDNN backends
      m.extra_outputs = {"running_mean", "running_var"};
    }
    {
      Mapping& m = add({"_batch_norm_no_update", "_batch_norm_no_update.out"}, "batch_norm", bn_in,
                       {{nullptr, "training", A::kFalse}, momentum, eps});
      m.returns_to_catalog = 3;
      m.extra_outputs = {"~running_mean", "~running_var"};
      m.hook = batch_norm_eval_saves_nothing;
    }
    const std::vector<InputSpec> bn_back_in{t("grad_out"), t("input"), opt("weight"), opt("running_mean"),
                                            opt("running_var"), opt("save_mean"), opt("save_invstd")};
    {
      Mapping& m = add({"native_batch_norm_backward", "native_batch_norm_backward.out"}, "batch_norm_backward",
                       bn_back_in, {{"train", "training", A::kBool}, eps});
      m.scratch = {"input", "#C", "#C"};
      m.hook = batch_norm_backward_stats;
    }
    {  // save_var holds invstd, as native_batch_norm_backward's save_invstd
      Mapping& m = add({"batch_norm_backward"}, "batch_norm_backward",
                       {t("grad_out"), t("input"), opt("weight"), opt("running_mean"), opt("running_var"),
                        opt("save_mean"), opt("save_var")},
                       {{"update", "training", A::kBool}, eps});
      m.scratch = {"input", "#C", "#C"};
      m.hook = batch_norm_backward_stats;
    }

    // ---- convolution and pooling ----
    const std::vector<AttrSpec> conv_attrs{{"stride", "stride", A::kInts},
                                           {"padding", "padding", A::kInts},
                                           {"dilation", "dilation", A::kInts},
                                           {"groups", "groups", A::kInt}};
    add({"convolution", "convolution.out"}, "conv2d", {t("input"), t("weight"), opt("bias")}, conv_attrs).hook =
        conv_by_rank;
    {
      Mapping& m = add({"convolution_backward", "convolution_backward.out"}, "conv_backward",
                       {t("grad_output"), t("input"), t("weight")}, conv_attrs);
      m.scratch = {"input", "weight", "#O"};
      m.hook = conv_not_transposed;
    }
    const AttrSpec kernel{"kernel_size", "kernel_size", A::kInts}, stride{"stride", "stride", A::kInts},
        padding{"padding", "padding", A::kInts}, ceil{"ceil_mode", "ceil_mode", A::kBool},
        dilation{"dilation", "dilation", A::kInts};
    add({"max_pool2d_with_indices", "max_pool2d_with_indices.out"}, "max_pool2d", {t("self")},
        {kernel, stride, padding, dilation, ceil});
    add({"max_pool2d_with_indices_backward", "max_pool2d_with_indices_backward.grad_input"}, "max_pool2d_backward",
        {t("grad_output"), t("self"), t("indices")}, {kernel, stride, padding, dilation, ceil});
    const std::vector<AttrSpec> avg{kernel, stride, padding, ceil, {"count_include_pad", "count_include_pad", A::kBool},
                                    {"divisor_override", "divisor_override", A::kOptInt0}};
    add({"avg_pool2d", "avg_pool2d.out"}, "avg_pool2d", {t("self")}, avg).hook = divisor_not_negative;
    add({"avg_pool2d_backward", "avg_pool2d_backward.grad_input"}, "avg_pool2d_backward",
        {t("grad_output"), t("self")}, avg)
        .hook = divisor_not_negative;
    add({"_adaptive_avg_pool2d", "_adaptive_avg_pool2d.out"}, "adaptive_avg_pool2d", {t("self")},
        {{"output_size", "output_size", A::kInts}});
    add({"_adaptive_avg_pool2d_backward", "_adaptive_avg_pool2d_backward.out"}, "adaptive_avg_pool2d_backward",
        {t("grad_output"), t("self")});

    // ---- indexing and data movement ----
    add({"embedding", "embedding.out"}, "embedding", {t("weight"), t("indices")},
        {{"padding_idx", "padding_idx", A::kInt}});
    add({"embedding_dense_backward", "embedding_dense_backward.out"}, "embedding_backward",
        {t("grad_output"), t("indices")},
        {{"num_weights", "num_weights", A::kInt}, {"padding_idx", "padding_idx", A::kInt},
         {"scale_grad_by_freq", "scale_grad_by_freq", A::kBool}});
    add({"index_select", "index_select.out"}, "index_select", {t("self"), t("index")}, {dim});
    add({"gather", "gather.out"}, "gather", {t("self"), t("index")}, {dim});
    add({"scatter.src", "scatter_.src", "scatter.src_out"}, "scatter", {t("self"), t("index"), t("src")}, {dim});
    add({"scatter.value", "scatter_.value", "scatter.value_out"}, "scatter", {t("self"), t("index"), kNoInput}, {dim})
        .hook = scatter_value_as_src;
    add({"scatter_add", "scatter_add_", "scatter_add.out"}, "scatter_add", {t("self"), t("index"), t("src")}, {dim});
    add({"masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Scalar_out"}, "masked_fill",
        {t("self"), t("mask")}, {{"value", "value", A::kScalar}});
    add({"masked_fill.Tensor", "masked_fill_.Tensor", "masked_fill.Tensor_out"}, "where",
        {t("mask"), kNoInput, t("self")})
        .hook = masked_fill_tensor_as_where;
    add({"cat", "cat.out"}, "cat", {{"tensors", I::kTensorList}}, {dim}).hook = cat_skip_legacy_empty;
    add({"index.Tensor", "index.Tensor_out"}, "index_select", {t("self")}).hook = index_as_index_select;
    add({"_index_put_impl_"}, "index_put", {t("self"), kNoInput, t("values")},
        {{"accumulate", "accumulate", A::kBool}})
        .hook = index_put_stacked_indices;
    for (const char* overload : {"int_Scalar", "int_Tensor"}) {
      const std::string o(overload);
      add({"index_fill_." + o, "index_fill." + o, "index_fill." + o + "_out"}, "index_put",
          {t("self"), kNoInput, kNoInput}, {{nullptr, "accumulate", A::kFalse}})
          .hook = index_fill_or_copy_as_index_put;
    }
    add({"index_copy_", "index_copy", "index_copy.out"}, "index_put", {t("self"), kNoInput, kNoInput},
        {{nullptr, "accumulate", A::kFalse}})
        .hook = index_fill_or_copy_as_index_put;
    add({"arange.start_out"}, "arange", {},
        {{"start", "start", A::kScalar}, {"end", "end", A::kScalar}, {"step", "step", A::kScalar}})
        .hook = arange_dtype_of_out;
    add({"flip", "flip.out"}, "flip", {t("self")}, {{"dims", "dims", A::kInts}});
    add({"roll", "roll.out"}, "roll", {t("self")}, {{"shifts", "shifts", A::kInts}, {"dims", "dims", A::kInts}});
    for (const char* op : {"tril", "triu"})
      add(fio(op), op, {t("self")}, {{"diagonal", "diagonal", A::kInt}});
    add({"topk", "topk.values"}, "topk", {t("self")},
        {{"k", "k", A::kInt}, dim, {"largest", "largest", A::kBool}, {"sorted", "sorted", A::kBool}});
    add({"sort", "sort.values"}, "sort", {t("self")}, {dim, {"descending", "descending", A::kBool}});
    add({"sort.stable", "sort.values_stable"}, "sort", {t("self")},
        {dim, {"descending", "descending", A::kBool}, {"stable", "stable", A::kBool}});

    // ---- factorizations (LAPACK's algorithms: sdk/catalog/ops/factorization.toml) ----
    {
      Mapping& m = add({"linalg_cholesky_ex", "linalg_cholesky_ex.L"}, "linalg_cholesky", {t("self")},
                       {{"upper", "upper", A::kBool}});
      m.after = cholesky_check;
    }
    {
      Mapping& m = add({"linalg_lu_factor_ex", "linalg_lu_factor_ex.out"}, "linalg_lu_factor", {t("A")});
      m.hook = lu_pivoted;
      m.after = lu_check;
    }
    add({"linalg_solve_triangular", "linalg_solve_triangular.out"}, "linalg_solve_triangular", {t("self"), t("B")},
        {{"upper", "upper", A::kBool}, {"left", "left", A::kBool}, {"unitriangular", "unitriangular", A::kBool}});
    {
      Mapping& m = add({"_linalg_eigh", "_linalg_eigh.eigenvalues"}, "linalg_eigh", {t("A")},
                       {{"compute_v", "compute_v", A::kBool}});
      m.hook = eigh_prepare;
      m.after = eigh_check;
    }
    {
      Mapping& m = add({"_linalg_svd", "_linalg_svd.U"}, "linalg_svd", {t("A")},
                       {{"full_matrices", "full_matrices", A::kBool}, {"compute_uv", "compute_uv", A::kBool}});
      m.hook = svd_prepare;
      m.after = svd_check;
    }
    add({"linalg_qr", "linalg_qr.out"}, "linalg_qr", {t("A")}, {{"mode", "mode", A::kString}});

    // ---- attention (chosen by sdp_choice) ----
    const std::vector<AttrSpec> sdpa{{"is_causal", "is_causal", A::kBool}, {"scale", "scale", A::kOptFloat}};
    {
      Mapping& m = add({"_scaled_dot_product_fused_attention_overrideable"}, "scaled_dot_product_attention",
                       {t("query"), t("key"), t("value"), opt("attn_bias")}, sdpa);
      m.returns_to_catalog = 2;  // output, logsumexp; the rest are Meta's (no dropout, no varlen)
      m.hook = sdpa_plain;
    }
    {
      Mapping& m = add({"_scaled_dot_product_fused_attention_overrideable_backward"},
                       "scaled_dot_product_attention_backward",
                       {t("grad_out"), t("query"), t("key"), t("value"), t("out"), t("logsumexp"), t("attn_bias")},
                       sdpa);
      m.returns_to_catalog = 3;  // grad_attn_bias: sdp_choice keeps masks that need grad on the math path
      m.scratch = {"query", "key", "value"};
      m.hook = sdpa_plain;
    }

    // ---- graph only: PyTorch's views as copies (mapping.hpp: graph_only) ----
    const AttrSpec shape_of_result{nullptr, "shape", A::kResultShape};
    for (const char* op : {"view", "_unsafe_view", "squeeze", "squeeze.dim", "squeeze.dims", "unsqueeze", "flatten.using_ints"})
      add({op}, "reshape", {t("self")}, {shape_of_result}).graph_only = true;
    add({"permute"}, "permute", {t("self")}, {{"dims", "dims", A::kInts}}).graph_only = true;
    for (const char* op : {"t", "transpose.int"})
      add({op}, "permute", {t("self")}, {{nullptr, "dims", A::kTransposeDims}}).graph_only = true;
    for (const char* op : {"expand", "clone", "_to_copy"}) {
      Mapping& m = add({op}, "copy", {t("self")});
      m.graph_only = true;
      m.hook = copy_stays_on_device;
    }
    return rows;
  }();
  return *table;
}

const Mapping* find_mapping(const std::string& name) {
  static const auto* index = [] {
    auto* by_name = new std::unordered_map<std::string, const Mapping*>();
    for (const Mapping& row : mappings())
      for (const std::string& n : row.aten) by_name->emplace(n, &row);
    return by_name;
  }();
  auto it = index->find(name);
  return it == index->end() ? nullptr : it->second;
}

}  // namespace torch_hal
