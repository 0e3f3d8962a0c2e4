// hal-conformance: the "rnn" group (LSTM / GRU cells and their gradients,
// sdk/catalog/ops/rnn.toml). References in double from the toml's formulas;
// workspaces for the backward cases are drawn in (0.05, 0.95), a range every
// activated gate (sigmoid or tanh) can take.
#include <cmath>
#include <string>
#include <vector>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

using Shape = std::vector<int64_t>;
constexpr hal_status_code_e kBad = HAL_STATUS_INVALID_ARGUMENT;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
hal_dtype_e other_float(hal_dtype_e dt) { return dt == HAL_DTYPE_FLOAT32 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32; }

// A cell's forward inputs: gates [B, G·H] twice, state [B, H], biases [G·H] (or absent).
OpCase cell(const std::string& name, hal_dtype_e dt, int64_t gates, int64_t b, int64_t h, bool bias, uint64_t seed) {
  OpCase c(name);
  c.in(random(dt, {b, gates * h}, seed)).in(random(dt, {b, gates * h}, seed + 1)).in(random(dt, {b, h}, seed + 2));
  if (bias)
    c.in(random(dt, {gates * h}, seed + 3, -1, 1)).in(random(dt, {gates * h}, seed + 4, -1, 1));
  else
    c.absent().absent();
  return c;
}

// The bad-input cases every cell forward shares.
void bad_cell_inputs(std::vector<OpCase>& cases, const char* op, hal_dtype_e dt, int64_t gates, const char* state) {
  const std::vector<HostTensor> outs = gates == 4
      ? std::vector<HostTensor>{HostTensor(dt, {3, 5}), HostTensor(dt, {3, 5}), HostTensor(dt, {3, 20})}
      : std::vector<HostTensor>{HostTensor(dt, {3, 5}), HostTensor(dt, {3, 25})};
  cases.push_back(cell("gates not a multiple of the gate count", dt, gates, 3, 5, false, 40)
                      .error(kBad, outs, {op, "'input_gates'", "multiple of"}));
  cases.back().inputs[0] = random(dt, {3, gates * 5 + 1}, 41);
  cases.push_back(cell("state of the wrong batch", dt, gates, 3, 5, false, 42).error(kBad, outs, {op, state, "[3, 5]"}));
  cases.back().inputs[2] = random(dt, {4, 5}, 43);
  cases.push_back(cell("hidden_gates of another shape", dt, gates, 3, 5, false, 44)
                      .error(kBad, outs, {op, "'hidden_gates'"}));
  cases.back().inputs[1] = random(dt, {3, gates * 5 - gates}, 45);
  cases.push_back(cell("only one bias", dt, gates, 3, 5, true, 46).error(kBad, outs, {op, "both biases or neither"}));
  cases.back().inputs[4].reset();
  cases.push_back(cell("bias of the wrong length", dt, gates, 3, 5, true, 47).error(kBad, outs, {op, "'input_bias'"}));
  cases.back().inputs[3] = random(dt, {gates * 5 + 1}, 48);
  cases.push_back(cell("state dtype differs", dt, gates, 3, 5, false, 49)
                      .error(kBad, outs, {op, state, dtype_str(other_float(dt))}));
  cases.back().inputs[2] = random(other_float(dt), {3, 5}, 50);
}

// ---- lstm_cell ----------------------------------------------------------------------

std::vector<OpCase> lstm_cell_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      cell("[3, 4·5] with biases", dt, 4, 3, 5, true, 1),
      cell("no biases", dt, 4, 2, 7, false, 6),
      cell("one row, one unit", dt, 4, 1, 1, true, 11),
      cell("wide [2, 4·130]", dt, 4, 2, 130, true, 16),
      cell("zero rows", dt, 4, 0, 5, true, 21),
      cell("large gates saturate", dt, 4, 2, 3, false, 26),
  };
  for (double& v : cases.back().inputs[0]->values) v *= 40;
  bad_cell_inputs(cases, "lstm_cell", dt, 4, "'cx'");
  return cases;
}

std::vector<HostTensor> lstm_cell_ref(const OpCase& c) {
  const HostTensor &ig = c.input(0), &hg = c.input(1), &cx = c.input(2);
  const bool bias = c.has_input(3);
  const int64_t b = cx.shape[0], h = cx.shape[1];
  HostTensor hy(ig.dtype, {b, h}), cy(ig.dtype, {b, h}), ws(ig.dtype, {b, 4 * h});
  for (int64_t r = 0; r < b; ++r)
    for (int64_t j = 0; j < h; ++j) {
      double g[4];
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t e = r * 4 * h + k * h + j;
        g[k] = ig.values[e] + hg.values[e] + (bias ? c.input(3).values[k * h + j] + c.input(4).values[k * h + j] : 0.0);
      }
      const double i = sigmoid(g[0]), f = sigmoid(g[1]), gg = std::tanh(g[2]), o = sigmoid(g[3]);
      const double cn = f * cx.values[r * h + j] + i * gg;
      cy.values[r * h + j] = cn;
      hy.values[r * h + j] = o * std::tanh(cn);
      const double act[4] = {i, f, gg, o};
      for (int64_t k = 0; k < 4; ++k) ws.values[r * 4 * h + k * h + j] = act[k];
    }
  return {hy, cy, ws};
}
HAL_CONFORMANCE_SUITE(lstm_cell, lstm_cell_cases, lstm_cell_ref);

// ---- lstm_cell_backward --------------------------------------------------------------

OpCase lstm_back(const std::string& name, hal_dtype_e dt, int64_t b, int64_t h, bool ghy, bool gcy, uint64_t seed) {
  OpCase c(name);
  c.in(random(dt, {b, h}, seed)).in(random(dt, {b, h}, seed + 1, -0.95, 0.95))
      .in(random(dt, {b, 4 * h}, seed + 2, 0.05, 0.95));
  if (ghy) c.in(random(dt, {b, h}, seed + 3)); else c.absent();
  if (gcy) c.in(random(dt, {b, h}, seed + 4)); else c.absent();
  return c;
}

std::vector<OpCase> lstm_cell_backward_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      lstm_back("both gradients", dt, 3, 5, true, true, 1),
      lstm_back("grad_hy only", dt, 2, 4, true, false, 6),
      lstm_back("grad_cy only", dt, 2, 4, false, true, 11),
      lstm_back("wide [2, 130]", dt, 2, 130, true, true, 16),
      lstm_back("zero rows", dt, 0, 4, true, true, 21),
  };
  const std::vector<HostTensor> outs = {HostTensor(dt, {3, 20}), HostTensor(dt, {3, 5})};
  cases.push_back(lstm_back("no gradient at all", dt, 3, 5, false, false, 30)
                      .error(kBad, outs, {"lstm_cell_backward", "neither 'grad_hy' nor 'grad_cy'"}));
  cases.push_back(lstm_back("workspace not [B, 4H]", dt, 3, 5, true, true, 31)
                      .error(kBad, outs, {"lstm_cell_backward", "'cx'", "[3, 4]"}));
  cases.back().inputs[2] = random(dt, {3, 16}, 32, 0.05, 0.95);
  cases.push_back(lstm_back("grad_hy of the wrong shape", dt, 3, 5, true, true, 33)
                      .error(kBad, outs, {"lstm_cell_backward", "'grad_hy'", "[3, 5]"}));
  cases.back().inputs[3] = random(dt, {5, 3}, 34);
  cases.push_back(lstm_back("cy dtype differs", dt, 3, 5, true, true, 35)
                      .error(kBad, outs, {"lstm_cell_backward", "'cy'", dtype_str(other_float(dt))}));
  cases.back().inputs[1] = random(other_float(dt), {3, 5}, 36);
  return cases;
}

std::vector<HostTensor> lstm_cell_backward_ref(const OpCase& c) {
  const HostTensor &cx = c.input(0), &cy = c.input(1), &ws = c.input(2);
  const int64_t b = cx.shape[0], h = cx.shape[1];
  HostTensor gg(cx.dtype, {b, 4 * h}), gcx(cx.dtype, {b, h});
  for (int64_t r = 0; r < b; ++r)
    for (int64_t j = 0; j < h; ++j) {
      const int64_t e = r * h + j, w = r * 4 * h + j;
      const double i = ws.values[w], f = ws.values[w + h], g = ws.values[w + 2 * h], o = ws.values[w + 3 * h];
      const double dh = c.has_input(3) ? c.input(3).values[e] : 0.0;
      const double t = std::tanh(cy.values[e]);
      const double dc = dh * o * (1 - t * t) + (c.has_input(4) ? c.input(4).values[e] : 0.0);
      gg.values[w] = dc * g * i * (1 - i);
      gg.values[w + h] = dc * cx.values[e] * f * (1 - f);
      gg.values[w + 2 * h] = dc * i * (1 - g * g);
      gg.values[w + 3 * h] = dh * t * o * (1 - o);
      gcx.values[e] = dc * f;
    }
  return {gg, gcx};
}
HAL_CONFORMANCE_SUITE(lstm_cell_backward, lstm_cell_backward_cases, lstm_cell_backward_ref);

// ---- gru_cell -------------------------------------------------------------------------

std::vector<OpCase> gru_cell_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      cell("[3, 3·5] with biases", dt, 3, 3, 5, true, 1),
      cell("no biases", dt, 3, 2, 7, false, 6),
      cell("one row, one unit", dt, 3, 1, 1, true, 11),
      cell("wide [2, 3·130]", dt, 3, 2, 130, true, 16),
      cell("zero rows", dt, 3, 0, 5, true, 21),
  };
  bad_cell_inputs(cases, "gru_cell", dt, 3, "'hx'");
  return cases;
}

std::vector<HostTensor> gru_cell_ref(const OpCase& c) {
  const HostTensor &ig = c.input(0), &hg = c.input(1), &hx = c.input(2);
  const bool bias = c.has_input(3);
  const int64_t b = hx.shape[0], h = hx.shape[1];
  HostTensor hy(ig.dtype, {b, h}), ws(ig.dtype, {b, 5 * h});
  for (int64_t r = 0; r < b; ++r)
    for (int64_t j = 0; j < h; ++j) {
      double xi[3], xh[3];
      for (int64_t k = 0; k < 3; ++k) {
        const int64_t e = r * 3 * h + k * h + j;
        xi[k] = ig.values[e] + (bias ? c.input(3).values[k * h + j] : 0.0);
        xh[k] = hg.values[e] + (bias ? c.input(4).values[k * h + j] : 0.0);
      }
      const double rg = sigmoid(xi[0] + xh[0]), z = sigmoid(xi[1] + xh[1]), n = std::tanh(xi[2] + rg * xh[2]);
      const double hp = hx.values[r * h + j];
      hy.values[r * h + j] = (1 - z) * n + z * hp;
      const double saved[5] = {rg, z, n, xh[2], hp};
      for (int64_t k = 0; k < 5; ++k) ws.values[r * 5 * h + k * h + j] = saved[k];
    }
  return {hy, ws};
}
HAL_CONFORMANCE_SUITE(gru_cell, gru_cell_cases, gru_cell_ref);

// ---- gru_cell_backward ------------------------------------------------------------------

OpCase gru_back(const std::string& name, hal_dtype_e dt, int64_t b, int64_t h, uint64_t seed) {
  return OpCase(name).in(random(dt, {b, h}, seed)).in(random(dt, {b, 5 * h}, seed + 1, 0.05, 0.95));
}

std::vector<OpCase> gru_cell_backward_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      gru_back("[3, 5]", dt, 3, 5, 1),
      gru_back("one row, one unit", dt, 1, 1, 3),
      gru_back("wide [2, 130]", dt, 2, 130, 5),
      gru_back("zero rows", dt, 0, 4, 7),
  };
  const std::vector<HostTensor> outs = {HostTensor(dt, {3, 15}), HostTensor(dt, {3, 15}), HostTensor(dt, {3, 5})};
  cases.push_back(gru_back("workspace not [B, 5H]", dt, 3, 5, 10)
                      .error(kBad, outs, {"gru_cell_backward", "'workspace'", "multiple of 5"}));
  cases.back().inputs[1] = random(dt, {3, 24}, 11);
  cases.push_back(gru_back("grad_hy of another batch", dt, 3, 5, 12)
                      .error(kBad, outs, {"gru_cell_backward", "'grad_hy'", "[3, 5]"}));
  cases.back().inputs[0] = random(dt, {2, 5}, 13);
  cases.push_back(gru_back("workspace dtype differs", dt, 3, 5, 14)
                      .error(kBad, outs, {"gru_cell_backward", "'workspace'", dtype_str(other_float(dt))}));
  cases.back().inputs[1] = random(other_float(dt), {3, 25}, 15);
  return cases;
}

std::vector<HostTensor> gru_cell_backward_ref(const OpCase& c) {
  const HostTensor &ghy = c.input(0), &ws = c.input(1);
  const int64_t b = ghy.shape[0], h = ghy.shape[1];
  HostTensor gi(ghy.dtype, {b, 3 * h}), gh(ghy.dtype, {b, 3 * h}), ghx(ghy.dtype, {b, h});
  for (int64_t r = 0; r < b; ++r)
    for (int64_t j = 0; j < h; ++j) {
      const int64_t w = r * 5 * h + j, d = r * 3 * h + j, e = r * h + j;
      const double rg = ws.values[w], z = ws.values[w + h], n = ws.values[w + 2 * h], hn = ws.values[w + 3 * h],
                   hp = ws.values[w + 4 * h];
      const double go = ghy.values[e];
      const double dn = go * (1 - z) * (1 - n * n), dz = go * (hp - n) * z * (1 - z), dr = dn * hn * rg * (1 - rg);
      gi.values[d] = dr;
      gi.values[d + h] = dz;
      gi.values[d + 2 * h] = dn;
      gh.values[d] = dr;
      gh.values[d + h] = dz;
      gh.values[d + 2 * h] = dn * rg;
      ghx.values[e] = go * z;
    }
  return {gi, gh, ghx};
}
HAL_CONFORMANCE_SUITE(gru_cell_backward, gru_cell_backward_cases, gru_cell_backward_ref);

}  // namespace
}  // namespace hal::conformance
