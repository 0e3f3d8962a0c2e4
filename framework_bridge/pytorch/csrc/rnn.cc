// torch_hal: PyTorch's fused RNN cells on the "hal" device. nn.LSTM / GRU /
// LSTMCell / GRUCell on an accelerator run each time step as two gate
// projections (matmuls, mapped rows) and one fused pointwise cell:
// aten::_thnn_fused_lstm_cell / _thnn_fused_gru_cell, with their backwards
// (which PyTorch only implements for CUDA). Each runs as the catalog's rnn
// group op (sdk/catalog/ops/rnn.toml: lstm_cell, lstm_cell_backward,
// gru_cell, gru_cell_backward; the workspaces are PyTorch's layouts). A
// plugin that lacks the op or declines the dtype gets the same formulas as
// device ops (add, sigmoid, tanh, mul, cat), so the cells never fall back
// to the CPU. A bias's gradient is the gate gradient summed over the batch.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "backend.hpp"

namespace torch_hal {
namespace {

using Tensor = at::Tensor;
using OptTensor = std::optional<at::Tensor>;

Tensor value_or_undefined(const OptTensor& t) { return t.has_value() ? *t : Tensor(); }

// Checks that every defined tensor of TENSORS is on REF's hal device (the
// message names the aten op and the argument, as PyTorch's CUDA kernel does).
void check_same_device(const char* op, const Tensor& ref, const char* ref_name,
                       std::initializer_list<std::pair<const char*, const Tensor*>> tensors) {
  TORCH_CHECK_VALUE(ref.is_privateuseone(), op, ": argument '", ref_name, "' is on ", ref.device(),
                    ", not a hal device");
  for (const auto& [name, t] : tensors)
    TORCH_CHECK_VALUE(!t->defined() || t->device() == ref.device(), op, ": argument '", name, "' is on ",
                      t->device(), " but '", ref_name, "' is on ", ref.device(),
                      " (every tensor argument must be on the same device)");
}

// Whether every defined tensor has REF's dtype (else the formulas run as
// device ops, whose type promotion mixed dtypes need: autocast casts the
// projections, not a float32 state).
bool one_dtype(const Tensor& ref, std::initializer_list<Tensor> tensors) {
  for (const Tensor& t : tensors)
    if (t.defined() && t.scalar_type() != ref.scalar_type()) return false;
  return true;
}

// The sum of the gate projections (and biases), PyTorch's order of additions.
Tensor summed_gates(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& input_bias,
                    const Tensor& hidden_bias) {
  Tensor g = input_gates + hidden_gates;
  if (input_bias.defined()) g = g + input_bias + hidden_bias;
  return g;
}

// Whether the cell's optional biases are both given or both absent.
void check_biases(const char* op, const Tensor& ib, const Tensor& hb) {
  TORCH_CHECK_VALUE(ib.defined() == hb.defined(), op, ": input_bias and hidden_bias must both be given or both be None");
}

// ---- LSTM ----

std::tuple<Tensor, Tensor, Tensor> lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx,
                                             const OptTensor& input_bias_opt, const OptTensor& hidden_bias_opt) {
  constexpr const char* kOp = "aten::_thnn_fused_lstm_cell";
  const Tensor ib = value_or_undefined(input_bias_opt), hb = value_or_undefined(hidden_bias_opt);
  check_same_device(kOp, input_gates, "input_gates",
                    {{"hidden_gates", &hidden_gates}, {"cx", &cx}, {"input_bias", &ib}, {"hidden_bias", &hb}});
  check_biases(kOp, ib, hb);
  c10::DeviceGuard guard(input_gates.device());
  const c10::ScalarType dt = input_gates.scalar_type();
  if (cx.dim() == 2 && one_dtype(input_gates, {hidden_gates, cx, ib, hb}))
    if (auto out = run_catalog(kOp, "lstm_cell", input_gates, {input_gates, hidden_gates, cx, ib, hb},
                               {{cx.sizes().vec(), dt}, {cx.sizes().vec(), dt}, {input_gates.sizes().vec(), dt}}))
      return {(*out)[0], (*out)[1], (*out)[2]};
  const std::vector<Tensor> g = summed_gates(input_gates, hidden_gates, ib, hb).chunk(4, 1);
  const Tensor i = g[0].sigmoid(), f = g[1].sigmoid(), c = g[2].tanh(), o = g[3].sigmoid();
  const Tensor cy = f * cx + i * c;
  const Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, c, o}, 1)};
}

std::tuple<Tensor, Tensor, Tensor> lstm_cell_backward(const OptTensor& grad_hy_opt, const OptTensor& grad_cy_opt,
                                                      const Tensor& cx, const Tensor& cy, const Tensor& workspace,
                                                      bool has_bias) {
  constexpr const char* kOp = "aten::_thnn_fused_lstm_cell_backward_impl";
  const Tensor ghy = value_or_undefined(grad_hy_opt), gcy = value_or_undefined(grad_cy_opt);
  if (!ghy.defined() && !gcy.defined()) return {};  // PyTorch's: no gradient flows
  check_same_device(kOp, workspace, "workspace", {{"grad_hy", &ghy}, {"grad_cy", &gcy}, {"cx", &cx}, {"cy", &cy}});
  c10::DeviceGuard guard(workspace.device());
  Tensor grad_gates, grad_cx;
  const c10::ScalarType dt = workspace.scalar_type();
  std::optional<std::vector<Tensor>> out;
  if (cx.dim() == 2 && one_dtype(workspace, {cx, cy, ghy, gcy}))
    out = run_catalog(kOp, "lstm_cell_backward", workspace, {cx, cy, workspace, ghy, gcy},
                      {{workspace.sizes().vec(), dt}, {cx.sizes().vec(), dt}});
  if (out) {
    grad_gates = (*out)[0];
    grad_cx = (*out)[1];
  } else {
    const std::vector<Tensor> w = workspace.chunk(4, 1);
    const Tensor &i = w[0], &f = w[1], &c = w[2], &o = w[3];
    const Tensor t = cy.tanh();
    Tensor dc = ghy.defined() ? ghy * o * (1 - t * t) : at::zeros_like(cy);
    if (gcy.defined()) dc = dc + gcy;
    const Tensor dog = ghy.defined() ? ghy * t * o * (1 - o) : at::zeros_like(o);
    grad_gates = at::cat({dc * c * i * (1 - i), dc * cx * f * (1 - f), dc * i * (1 - c * c), dog}, 1);
    grad_cx = dc * f;
  }
  return {grad_gates, grad_cx, has_bias ? grad_gates.sum(0) : Tensor()};
}

// ---- GRU ----

std::tuple<Tensor, Tensor> gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                    const OptTensor& input_bias_opt, const OptTensor& hidden_bias_opt) {
  constexpr const char* kOp = "aten::_thnn_fused_gru_cell";
  const Tensor ib = value_or_undefined(input_bias_opt), hb = value_or_undefined(hidden_bias_opt);
  check_same_device(kOp, input_gates, "input_gates",
                    {{"hidden_gates", &hidden_gates}, {"hx", &hx}, {"input_bias", &ib}, {"hidden_bias", &hb}});
  check_biases(kOp, ib, hb);
  c10::DeviceGuard guard(input_gates.device());
  const c10::ScalarType dt = input_gates.scalar_type();
  if (hx.dim() == 2 && one_dtype(input_gates, {hidden_gates, hx, ib, hb}))
    if (auto out = run_catalog(kOp, "gru_cell", input_gates, {input_gates, hidden_gates, hx, ib, hb},
                               {{hx.sizes().vec(), dt}, {{hx.size(0), 5 * hx.size(1)}, dt}}))
      return {(*out)[0], (*out)[1]};
  const std::vector<Tensor> xi = (ib.defined() ? input_gates + ib : input_gates).chunk(3, 1);
  const std::vector<Tensor> xh = (hb.defined() ? hidden_gates + hb : hidden_gates).chunk(3, 1);
  const Tensor r = (xi[0] + xh[0]).sigmoid(), z = (xi[1] + xh[1]).sigmoid();
  const Tensor n = (xi[2] + r * xh[2]).tanh();
  const Tensor hy = (1 - z) * n + z * hx;
  return {hy, at::cat({r, z, n, xh[2], hx}, 1)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gru_cell_backward(const Tensor& grad_hy, const Tensor& workspace,
                                                                     bool has_bias) {
  constexpr const char* kOp = "aten::_thnn_fused_gru_cell_backward";
  check_same_device(kOp, workspace, "workspace", {{"grad_hy", &grad_hy}});
  c10::DeviceGuard guard(workspace.device());
  Tensor gi, gh, ghx;
  const c10::ScalarType dt = workspace.scalar_type();
  std::optional<std::vector<Tensor>> out;
  if (grad_hy.dim() == 2 && one_dtype(workspace, {grad_hy})) {
    const std::vector<int64_t> gates{grad_hy.size(0), 3 * grad_hy.size(1)};
    out = run_catalog(kOp, "gru_cell_backward", workspace, {grad_hy, workspace},
                      {{gates, dt}, {gates, dt}, {grad_hy.sizes().vec(), dt}});
  }
  if (out) {
    gi = (*out)[0];
    gh = (*out)[1];
    ghx = (*out)[2];
  } else {
    const std::vector<Tensor> w = workspace.chunk(5, 1);
    const Tensor &r = w[0], &z = w[1], &n = w[2], &hn = w[3], &hx = w[4];
    const Tensor dn = grad_hy * (1 - z) * (1 - n * n);
    const Tensor dz = grad_hy * (hx - n) * z * (1 - z);
    const Tensor dr = dn * hn * r * (1 - r);
    gi = at::cat({dr, dz, dn}, 1);
    gh = at::cat({dr, dz, dn * r}, 1);
    ghx = grad_hy * z;
  }
  if (!has_bias) return {gi, gh, ghx, Tensor(), Tensor()};
  return {gi, gh, ghx, gi.sum(0), gh.sum(0)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(gru_cell_backward));
}

}  // namespace torch_hal
