// Quantization operators as catalog compositions, following ONNX's reference
// implementations step by step (where they divide, round half to even,
// saturate and widen), so the integer results are the reference's exactly:
// QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked),
// DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul,
// QLinearConv. Integer products run in float64 (exact: every int8 / uint8
// product sum the node tests and real models make is far below 2^53).
#include <string>
#include <vector>

#include "converters.hpp"
#include "hal/common/dtype.hpp"
#include "hal/onnx/host_tensor.hpp"
#include "tensor_proto.hpp"

namespace hal::onnx::detail {

namespace {

using V = Graph::Value;

struct IntRange {
  double lo, hi;
};

// The saturation range of quantized dtype DT; UNIMPLEMENTED for a dtype the
// catalog cannot compute in (uint16, the 4- and 2-bit and float8 types).
IntRange quant_range(Translator& t, hal_dtype_e dt, const std::string& what) {
  switch (dt) {
    case HAL_DTYPE_INT8: return {-128, 127};
    case HAL_DTYPE_UINT8: return {0, 255};
    case HAL_DTYPE_INT16: return {-32768, 32767};
    case HAL_DTYPE_INT32: return {-2147483648.0, 2147483647.0};
    default:
      t.unimplemented(what + " of dtype " + std::string(common::dtype_name(dt)) +
                      " (quantized dtypes: int8, uint8, int16; the catalog has no " + common::dtype_name(dt) +
                      " arithmetic)");
  }
}

// Scale or zero point INPUT of a (De)QuantizeLinear over X's SHAPE, made
// broadcastable to it as the reference's reshape_input: one element as a
// 0-d value; without BLOCK a 1-D vector along AXIS; with BLOCK each element
// repeated BLOCK times along AXIS (the last block may be partial).
V quant_param(Translator& t, size_t input, const std::vector<int64_t>& shape, int64_t axis, int64_t block) {
  V v = t.value(input);
  const std::vector<int64_t> ps = t.spec(v).shape;
  int64_t n = 1;
  for (int64_t d : ps) n = d < 0 ? -1 : n * d;
  const std::string name = input == 1 ? "the scale" : "the zero point";
  if (n == 1) return ps.empty() ? v : reshape_to(t, v, {});
  if (n < 0) t.unimplemented(name + " with a shape only known at run time");
  axis = norm_axis(t, axis, shape.size());
  if (block == 0) {
    if (ps.size() != 1) t.invalid(name + " has shape " + shape_text(ps) + ": per-axis parameters are 1-D (or set block_size)");
    if (shape[static_cast<size_t>(axis)] != ps[0])
      t.invalid(name + " has " + std::to_string(ps[0]) + " elements; the input's axis " + std::to_string(axis) + " has " +
                std::to_string(shape[static_cast<size_t>(axis)]));
    std::vector<int64_t> dims(shape.size(), 1);
    dims[static_cast<size_t>(axis)] = ps[0];
    return reshape_to(t, v, dims);
  }
  if (block < 0) t.invalid("block_size " + std::to_string(block) + " is negative");
  if (ps.size() != shape.size()) t.invalid(name + " has rank " + std::to_string(ps.size()) + "; blocked parameters have the input's rank " + std::to_string(shape.size()));
  const int64_t len = shape[static_cast<size_t>(axis)];
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool ok = static_cast<int64_t>(d) == axis ? ps[d] == (len + block - 1) / block : ps[d] == shape[d];
    if (!ok)
      t.invalid(name + " has shape " + shape_text(ps) + ", which does not block input shape " + shape_text(shape) +
                " by " + std::to_string(block) + " along axis " + std::to_string(axis));
  }
  std::vector<int64_t> idx(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) idx[static_cast<size_t>(i)] = i / block;
  V index = t.constant(int_tensor(HAL_DTYPE_INT64, idx, {len}));
  return t.emit1("index_select", {v, index}, {Attr::i("dim", axis)});
}

// The node's axis (default 1), checked against the input's rank only where
// a parameter uses it (per-tensor parameters ignore it, as the reference does).
int64_t quant_axis(Translator& t) { return t.attr_int("axis", 1); }

hal_dtype_e onnx_dtype_attr(Translator& t, const char* name) {
  const int64_t code = t.attr_int(name, 0);
  if (code == 0) return HAL_DTYPE_INVALID;
  hal_dtype_e dt = dtype_from_onnx(static_cast<int32_t>(code));
  if (dt == HAL_DTYPE_INVALID) t.unimplemented(std::string(name) + " " + onnx_dtype_name(static_cast<int32_t>(code)) + " (no HAL dtype)");
  return dt;
}

// x / y_scale in the dtype numpy gives it (int32 / float: float64; two
// 16-bit floats of one kind: that kind; otherwise float32), or in PRECISION.
hal_dtype_e division_dtype(hal_dtype_e x, hal_dtype_e scale, hal_dtype_e precision) {
  if (precision != HAL_DTYPE_INVALID) return precision;
  if (x == HAL_DTYPE_INT32 || x == HAL_DTYPE_FLOAT64 || scale == HAL_DTYPE_FLOAT64) return HAL_DTYPE_FLOAT64;
  if (x == scale) return x;
  return HAL_DTYPE_FLOAT32;
}

// round(VALUE) (+ ZERO_POINT, widened first), saturated to OUT's range and
// cast to it. VALUE is a floating value; the sum runs in float32 (float64
// for float64 values) so a 16-bit value's zero point adds exactly.
V requantize(Translator& t, V value, V zero_point, hal_dtype_e out) {
  const IntRange r = quant_range(t, out, "a quantized output");
  const hal_dtype_e wide = t.spec(value).dtype == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32;
  V q = as_dtype(t, t.emit1("round", {value}), wide);
  if (zero_point.valid()) q = t.emit1("add", {q, as_dtype(t, zero_point, wide)});
  q = t.emit1("clamp", {q, scalar(t, wide, r.lo), scalar(t, wide, r.hi)});
  return as_dtype(t, q, out);
}

void quantize_linear(Translator& t, const OpRule&) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  const int64_t axis = quant_axis(t), block = t.opset() >= 21 ? t.attr_int("block_size", 0) : 0;
  hal_dtype_e out = onnx_dtype_attr(t, "output_dtype");
  const bool has_zp = t.has_input(2);
  if (has_zp) {
    const hal_dtype_e zp = t.in(2).spec.dtype;
    if (out != HAL_DTYPE_INVALID && out != zp)
      t.invalid("output_dtype " + std::string(common::dtype_name(out)) + " differs from the zero point's dtype " + common::dtype_name(zp));
    out = zp;
  }
  if (out == HAL_DTYPE_INVALID) out = HAL_DTYPE_UINT8;
  if (out == HAL_DTYPE_INT32) t.invalid("a quantized output of dtype int32 (QuantizeLinear's outputs are 8- or 16-bit)");
  quant_range(t, out, "a quantized output");
  const hal_dtype_e x_dt = t.in(0).spec.dtype, s_dt = t.in(1).spec.dtype;
  if (!is_float(x_dt) && x_dt != HAL_DTYPE_INT32) t.invalid("input x of dtype " + std::string(common::dtype_name(x_dt)) + " (float or int32)");
  if (!is_float(s_dt) && s_dt != HAL_DTYPE_INT32) t.invalid("y_scale of dtype " + std::string(common::dtype_name(s_dt)));
  const hal_dtype_e dd = division_dtype(x_dt, s_dt, onnx_dtype_attr(t, "precision"));
  V scale = as_dtype(t, quant_param(t, 1, shape, axis, block), dd);
  V zp = has_zp ? quant_param(t, 2, shape, axis, block) : V{};
  V q = t.emit1("div", {as_dtype(t, t.value(0), dd), scale});
  t.set_output(0, requantize(t, q, zp, out));
}

void dequantize_linear(Translator& t, const OpRule&) {
  const std::vector<int64_t> shape = t.in(0).spec.shape;
  const int64_t axis = quant_axis(t), block = t.opset() >= 21 ? t.attr_int("block_size", 0) : 0;
  const hal_dtype_e x_dt = t.in(0).spec.dtype;
  quant_range(t, x_dt, "input x");
  if (t.has_input(2) && t.in(2).spec.dtype != x_dt)
    t.invalid("the zero point's dtype " + std::string(common::dtype_name(t.in(2).spec.dtype)) + " differs from x's " +
              common::dtype_name(x_dt));
  hal_dtype_e out = onnx_dtype_attr(t, "output_dtype");
  if (out == HAL_DTYPE_INVALID) out = t.in(1).spec.dtype;
  if (!is_float(out)) t.invalid("output dtype " + std::string(common::dtype_name(out)) + " (a floating dtype)");
  V y = as_dtype(t, t.value(0), HAL_DTYPE_FLOAT32);
  if (t.has_input(2)) y = t.emit1("sub", {y, as_dtype(t, quant_param(t, 2, shape, axis, block), HAL_DTYPE_FLOAT32)});
  y = t.emit1("mul", {y, as_dtype(t, quant_param(t, 1, shape, axis, block), HAL_DTYPE_FLOAT32)});
  t.set_output(0, as_dtype(t, y, out));
}

// Every dim of V reduced by OP to a 0-d value.
V reduce_all(Translator& t, const char* op, V v) {
  std::vector<int64_t> dims(t.spec(v).shape.size());
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
  if (dims.empty()) return v;
  return t.emit1(op, {v}, {Attr::ints("dim", dims), Attr::b("keepdim", false)});
}

// DynamicQuantizeLinear: uint8 over the range [min(0, min x), max(0, max x)].
void dynamic_quantize_linear(Translator& t, const OpRule&) {
  if (t.in(0).spec.dtype != HAL_DTYPE_FLOAT32) t.invalid("input x of dtype " + std::string(common::dtype_name(t.in(0).spec.dtype)) + " (float32)");
  const hal_dtype_e f = HAL_DTYPE_FLOAT32;
  V x = t.value(0);
  V maxx = t.emit1("maximum", {reduce_all(t, "amax", x), scalar(t, f, 0)});
  V minx = t.emit1("minimum", {reduce_all(t, "amin", x), scalar(t, f, 0)});
  V range = t.emit1("sub", {maxx, minx});
  range = t.emit1("where", {t.emit1("eq", {maxx, minx}), scalar(t, f, 1), range});
  V scale = t.emit1("div", {range, scalar(t, f, 255)});
  V zp = t.emit1("sub", {scalar(t, f, 0), t.emit1("div", {minx, scale})});
  zp = t.emit1("round", {t.emit1("clamp", {zp, scalar(t, f, 0), scalar(t, f, 255)})});
  t.set_output(0, requantize(t, t.emit1("div", {x, scale}), zp, HAL_DTYPE_UINT8));
  t.set_output(1, scale);
  t.set_output(2, as_dtype(t, zp, HAL_DTYPE_UINT8));
}

// Input I (int8 / uint8) minus its zero point ZP_INPUT (absent: 0) in
// float64; WHAT names the input.
V shifted(Translator& t, size_t i, size_t zp_input, const char* what) {
  const hal_dtype_e dt = t.in(i).spec.dtype;
  if (dt != HAL_DTYPE_INT8 && dt != HAL_DTYPE_UINT8)
    t.invalid(std::string(what) + " of dtype " + common::dtype_name(dt) + " (int8 or uint8)");
  V v = as_dtype(t, t.value(i), HAL_DTYPE_FLOAT64);
  if (!t.has_input(zp_input)) return v;
  if (t.in(zp_input).spec.dtype != dt)
    t.invalid(std::string(what) + "'s zero point has dtype " + common::dtype_name(t.in(zp_input).spec.dtype) + ", not " +
              common::dtype_name(dt));
  return t.emit1("sub", {v, as_dtype(t, t.value(zp_input), HAL_DTYPE_FLOAT64)});
}

// A zero point of a MatMul's first operand: one element (a per-row one is
// refused: ONNX's reference and onnxruntime disagree on how it broadcasts).
void require_one_element(Translator& t, size_t zp_input, const char* what) {
  if (!t.has_input(zp_input)) return;
  if (numel(t.in(zp_input).spec.shape) != 1) t.unimplemented(std::string("a per-row zero point of ") + what + " (only one element)");
}

void matmul_integer(Translator& t, const OpRule&) {
  require_one_element(t, 2, "A");
  V a = shifted(t, 0, 2, "A"), b = shifted(t, 1, 3, "B");
  t.set_output(0, as_dtype(t, t.emit1("matmul", {a, b}), HAL_DTYPE_INT32));
}

// Convolution weight input W minus its zero point ZP_INPUT (absent: 0) in
// float64: one element, or one per output channel (broadcast as [M, 1, ...]).
V shifted_weight(Translator& t, size_t w_input, size_t zp_input) {
  V w = as_dtype(t, t.value(w_input), HAL_DTYPE_FLOAT64);
  if (!t.has_input(zp_input)) return w;
  V zp = as_dtype(t, t.value(zp_input), HAL_DTYPE_FLOAT64);
  const int64_t n = numel(t.spec(zp).shape);
  if (n != 1) {
    std::vector<int64_t> dims(t.in(w_input).spec.shape.size(), 1);
    dims[0] = n;
    zp = reshape_to(t, zp, dims);
  }
  return t.emit1("sub", {w, zp});
}

void conv_integer(Translator& t, const OpRule&) {
  V x = shifted(t, 0, 2, "x");
  t.set_output(0, as_dtype(t, conv_forward(t, x, shifted_weight(t, 1, 3), V{}), HAL_DTYPE_INT32));
}

// The float32 product a_scale * b_scale / y_scale (the reference's), widened
// to float64 as numpy widens it against the int32 accumulator.
V requant_factor(Translator& t, size_t a_scale, size_t b_scale, size_t y_scale, const std::vector<int64_t>& b_dims) {
  auto f32 = [&](size_t i) { return as_dtype(t, t.value(i), HAL_DTYPE_FLOAT32); };
  V bs = f32(b_scale);
  if (!b_dims.empty() && numel(t.spec(bs).shape) != 1) bs = reshape_to(t, bs, b_dims);
  V f = t.emit1("div", {t.emit1("mul", {f32(a_scale), bs}), f32(y_scale)});
  return as_dtype(t, f, HAL_DTYPE_FLOAT64);
}

void qlinear_matmul(Translator& t, const OpRule&) {
  require_one_element(t, 2, "a");
  V a = shifted(t, 0, 2, "a"), b = shifted(t, 3, 5, "b");
  V acc = t.emit1("matmul", {a, b});
  const hal_dtype_e out = t.has_input(7) ? t.in(7).spec.dtype : t.in(0).spec.dtype;
  V y = t.emit1("mul", {acc, requant_factor(t, 1, 4, 6, {})});
  t.set_output(0, requantize(t, y, t.has_input(7) ? t.value(7) : V{}, out));
}

// QLinearConv: the integer convolution (+ int32 bias), times x_scale *
// w_scale (per output channel) / y_scale, plus y_zero_point, saturated.
void qlinear_conv(Translator& t, const OpRule&) {
  V x = shifted(t, 0, 2, "x");
  V w = shifted_weight(t, 3, 5);
  const std::vector<int64_t> ws = t.in(3).spec.shape;
  V bias = t.has_input(8) ? as_dtype(t, t.value(8), HAL_DTYPE_FLOAT64) : V{};
  V acc = conv_forward(t, x, w, bias);
  std::vector<int64_t> out_dims(t.spec(acc).shape.size() - 1, 1);
  out_dims[0] = ws[0];  // [M, 1, ...] against [N, M, ...]
  V y = t.emit1("mul", {acc, requant_factor(t, 1, 4, 6, out_dims)});
  const hal_dtype_e out = t.has_input(7) ? t.in(7).spec.dtype : t.in(0).spec.dtype;
  t.set_output(0, requantize(t, y, t.has_input(7) ? t.value(7) : V{}, out));
}

}  // namespace

const std::vector<OpRule>& quantize_rows() {
  static const std::vector<OpRule> rows = {
      {"QuantizeLinear", 10, 28, "div+round+add+clamp+copy|index_select", quantize_linear,
       "int8, uint8 and int16 outputs (no uint16, 4-/2-bit or float8)"},
      {"DequantizeLinear", 10, 28, "sub+mul+copy|index_select", dequantize_linear,
       "int8, uint8, int16 and int32 inputs (no uint16, 4-/2-bit or float8)"},
      {"DynamicQuantizeLinear", 11, 11, "amax+amin+div+round+clamp+copy", dynamic_quantize_linear, ""},
      {"MatMulInteger", 10, 10, "sub+matmul+copy", matmul_integer, "a per-tensor zero point of A"},
      {"ConvInteger", 10, 10, "sub+conv1d|conv2d+copy", conv_integer, "1-D and 2-D"},
      {"QLinearMatMul", 10, 21, "sub+matmul+mul+div+round+add+clamp+copy", qlinear_matmul,
       "int8 / uint8; a per-tensor zero point of a"},
      {"QLinearConv", 10, 10, "sub+conv1d|conv2d+mul+div+round+add+clamp+copy", qlinear_conv, "1-D and 2-D"},
  };
  return rows;
}

}  // namespace hal::onnx::detail
