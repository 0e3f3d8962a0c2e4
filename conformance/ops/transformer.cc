// hal-conformance: the "transformer" ops — cases and double-precision references.
// Attention is referenced by the textbook formula: the full score matrix,
// a max-subtracted softmax and plain matrix products per batch.
#include <cmath>
#include <limits>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- scaled_dot_product_attention ---------------------------------------------

// Scores s[b][i][j] of a case whose query is input Q (key Q+1, mask MASK):
// -inf where masked out.
struct Scores {
  int64_t B = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1;
  std::vector<double> s;  // [B, L, S]
  double at(int64_t b, int64_t i, int64_t j) const { return s[(b * L + i) * S + j]; }
};

Scores scores(const OpCase& c, size_t qi, size_t mask_i) {
  const HostTensor& q = c.input(qi);
  const HostTensor& k = c.input(qi + 1);
  const HostTensor& v = c.input(qi + 2);
  Scores r;
  for (int d = 0; d + 2 < q.rank(); ++d) r.B *= q.shape[d];
  r.L = q.size(-2);
  r.E = q.size(-1);
  r.S = k.size(-2);
  r.Ev = v.size(-1);
  double given = c.attr_float("scale", 0.0);
  r.scale = given != 0 ? given : r.E > 0 ? 1.0 / std::sqrt(double(r.E)) : 1.0;
  const bool causal = c.attr_bool("is_causal", false);
  std::vector<int64_t> full = q.shape;
  full.back() = r.S;
  r.s.assign(size_t(r.B * r.L * r.S), 0.0);
  for (int64_t b = 0; b < r.B; ++b)
    for (int64_t i = 0; i < r.L; ++i)
      for (int64_t j = 0; j < r.S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < r.E; ++e) dot += q.values[(b * r.L + i) * r.E + e] * k.values[(b * r.S + j) * r.E + e];
        double s = dot * r.scale;
        if (causal && j > i) s = -kInf;
        if (c.has_input(mask_i)) {
          const HostTensor& m = c.input(mask_i);
          double mv = broadcast_at(m, unravel((b * r.L + i) * r.S + j, full));
          s = m.dtype == HAL_DTYPE_BOOL ? (mv != 0 ? s : -kInf) : s + mv;
        }
        r.s[size_t((b * r.L + i) * r.S + j)] = s;
      }
  return r;
}

// Row logsumexp of the scores; -inf for a row with nothing to attend.
std::vector<double> row_lse(const Scores& sc) {
  std::vector<double> lse(size_t(sc.B * sc.L), -kInf);
  for (int64_t r = 0; r < sc.B * sc.L; ++r) {
    double m = -kInf;
    for (int64_t j = 0; j < sc.S; ++j) m = std::max(m, sc.s[r * sc.S + j]);
    if (m == -kInf) continue;
    double z = 0;
    for (int64_t j = 0; j < sc.S; ++j) z += std::exp(sc.s[r * sc.S + j] - m);
    lse[r] = m + std::log(z);
  }
  return lse;
}

double prob(const Scores& sc, const std::vector<double>& lse, int64_t b, int64_t i, int64_t j) {
  double l = lse[b * sc.L + i], s = sc.at(b, i, j);
  return l == -kInf || s == -kInf ? 0.0 : std::exp(s - l);
}

hal_dtype_e lse_dtype(hal_dtype_e dt) { return dt == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32; }

// Forward outputs of query/key/value at QI.. (mask at MASK_I).
std::vector<HostTensor> attention_forward(const OpCase& c, size_t qi, size_t mask_i) {
  const HostTensor& q = c.input(qi);
  const HostTensor& v = c.input(qi + 2);
  Scores sc = scores(c, qi, mask_i);
  std::vector<double> lse = row_lse(sc);
  std::vector<int64_t> os = q.shape, ls = q.shape;
  os.back() = sc.Ev;
  ls.pop_back();
  HostTensor out(q.dtype, os), l(lse_dtype(q.dtype), ls, lse);
  for (int64_t b = 0; b < sc.B; ++b)
    for (int64_t i = 0; i < sc.L; ++i)
      for (int64_t j = 0; j < sc.S; ++j) {
        double p = prob(sc, lse, b, i, j);
        for (int64_t e = 0; e < sc.Ev; ++e) out.values[(b * sc.L + i) * sc.Ev + e] += p * v.values[(b * sc.S + j) * sc.Ev + e];
      }
  return {out, l};
}

// query [.., L, E], key [.., S, E], value [.., S, Ev] of dtype DT.
OpCase qkv(const std::string& name, hal_dtype_e dt, std::vector<int64_t> batch, int64_t L, int64_t S, int64_t E,
           int64_t Ev, uint64_t seed) {
  auto shape = [&](int64_t a, int64_t b) {
    std::vector<int64_t> s = batch;
    s.push_back(a);
    s.push_back(b);
    return s;
  };
  return OpCase(name).in(random(dt, shape(L, E), seed, -1, 1)).in(random(dt, shape(S, E), seed + 1, -1, 1))
      .in(random(dt, shape(S, Ev), seed + 2, -1, 1));
}

HostTensor bool_mask(std::vector<int64_t> shape, uint64_t seed) { return random(HAL_DTYPE_BOOL, std::move(shape), seed); }

// The forward's cases for DT (the backward reuses them).
std::vector<OpCase> attention_value_cases(hal_dtype_e dt) {
  HostTensor row_masked = bool_mask({3, 5}, 40);
  for (int64_t j = 0; j < 5; ++j) row_masked.values[1 * 5 + j] = 0;  // query row 1 sees nothing
  row_masked.values[0] = 1;
  row_masked.values[2 * 5 + 4] = 1;
  return {
      qkv("[2, 3, 4] x [2, 5, 4]", dt, {2}, 3, 5, 4, 3, 1),
      qkv("heads [2, 2, 4, 8], S = 70 (two key blocks)", dt, {2, 2}, 4, 70, 8, 5, 2),
      qkv("L = 70, S = 150 (several query tiles and key blocks)", dt, {1}, 70, 150, 8, 4, 13),
      qkv("causal L = 70, S = 150", dt, {1}, 70, 150, 8, 4, 14).attr(hal::Attr::b("is_causal", true)),
      // Six batch entries: a CPU plugin's backward may run whole entries per thread.
      qkv("causal heads [2, 3], L = 130, S = 140", dt, {2, 3}, 130, 140, 8, 4, 15)
          .attr(hal::Attr::b("is_causal", true)),
      qkv("scale 0.3", dt, {2}, 3, 4, 6, 2, 3).attr(hal::Attr::f("scale", 0.3)),
      qkv("causal", dt, {2}, 5, 5, 4, 3, 4).attr(hal::Attr::b("is_causal", true)),
      qkv("causal L > S", dt, {1}, 6, 3, 4, 2, 5).attr(hal::Attr::b("is_causal", true)),
      qkv("float mask [L, S]", dt, {2, 2}, 3, 4, 4, 3, 6).in(random(dt, {3, 4}, 60, -2, 2)),
      qkv("bool mask [2, 1, 1, S]", dt, {2, 2}, 3, 4, 4, 3, 7).in(bool_mask({2, 1, 1, 4}, 70)),
      qkv("bool mask, fully masked row", dt, {2}, 3, 5, 4, 3, 8).in(row_masked),
      qkv("rank 2", dt, {}, 4, 6, 3, 5, 9),
      qkv("S = 0", dt, {2}, 3, 0, 4, 3, 10),
      qkv("L = 0", dt, {2}, 0, 4, 4, 3, 11),
      qkv("E = 0", dt, {2}, 3, 4, 0, 3, 12),
  };
}

std::vector<OpCase> attention_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = attention_value_cases(dt);
  for (OpCase& c : cases) c.tol(2);
  std::vector<HostTensor> outs = {HostTensor(dt, {2, 3, 3}), HostTensor(lse_dtype(dt), {2, 3})};
  cases.push_back(OpCase("key E mismatch").in(random(dt, {2, 3, 4}, 1)).in(random(dt, {2, 5, 2}, 2))
                      .in(random(dt, {2, 5, 3}, 3)).error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'key'", "E = 2"}));
  cases.push_back(OpCase("value S mismatch").in(random(dt, {2, 3, 4}, 1)).in(random(dt, {2, 5, 4}, 2))
                      .in(random(dt, {2, 4, 3}, 3)).error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'value'", "S = 4"}));
  cases.push_back(qkv("mask with is_causal", dt, {2}, 3, 5, 4, 3, 20).in(bool_mask({3, 5}, 21))
                      .attr(hal::Attr::b("is_causal", true))
                      .error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'attn_mask'", "is_causal"}));
  cases.push_back(qkv("mask not broadcastable", dt, {2}, 3, 5, 4, 3, 22).in(bool_mask({3, 4}, 23))
                      .error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'attn_mask'", "[3, 4]"}));
  cases.push_back(OpCase("query rank 1").in(random(dt, {4}, 1)).in(random(dt, {5, 4}, 2)).in(random(dt, {5, 3}, 3))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3}), HostTensor(lse_dtype(dt), {})},
                             {"'query'", "rank"}));
  return cases;
}

std::vector<HostTensor> attention_ref(const OpCase& c) { return attention_forward(c, 0, 3); }
HAL_CONFORMANCE_SUITE(scaled_dot_product_attention, attention_cases, attention_ref);

// ---- scaled_dot_product_attention_backward ---------------------------------------

// grad_out, query, key, value, out, logsumexp[, attn_mask] from a forward case.
OpCase backward_case(const OpCase& fwd, uint64_t seed) {
  std::vector<HostTensor> f = attention_forward(fwd, 0, 3);
  OpCase c(fwd.name);
  c.attrs = fwd.attrs;
  c.in(random(f[0].dtype, f[0].shape, seed, -1, 1));
  for (size_t i = 0; i < 3; ++i) c.in(fwd.input(i));
  for (double& x : f[0].values) x = round_to(f[0].dtype, x);
  for (double& x : f[1].values) x = round_to(f[1].dtype, x);
  c.in(f[0]).in(f[1]);
  if (fwd.has_input(3)) c.in(fwd.input(3));
  return c;
}

std::vector<OpCase> attention_backward_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases;
  uint64_t seed = 100;
  for (const OpCase& f : attention_value_cases(dt)) cases.push_back(backward_case(f, seed++).tol(4));
  OpCase base = backward_case(qkv("", dt, {2}, 3, 5, 4, 3, 30), 31);
  std::vector<HostTensor> outs = {HostTensor(dt, {2, 3, 4}), HostTensor(dt, {2, 5, 4}), HostTensor(dt, {2, 5, 3})};
  OpCase bad_lse = base;
  bad_lse.name = "logsumexp of the wrong shape";
  bad_lse.inputs[5] = HostTensor(lse_dtype(dt), {2, 4});
  cases.push_back(bad_lse.error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'logsumexp'", "[2, 4]"}));
  OpCase bad_grad = base;
  bad_grad.name = "grad_out of the wrong shape";
  bad_grad.inputs[0] = random(dt, {2, 3, 4}, 32);
  cases.push_back(bad_grad.error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'grad_out'", "[2, 3, 4]"}));
  return cases;
}

std::vector<HostTensor> attention_backward_ref(const OpCase& c) {
  const HostTensor& dout = c.input(0);
  const HostTensor& q = c.input(1);
  const HostTensor& k = c.input(2);
  const HostTensor& v = c.input(3);
  const HostTensor& out = c.input(4);
  const std::vector<double>& lse = c.input(5).values;
  Scores sc = scores(c, 1, 6);
  HostTensor gq(q.dtype, q.shape), gk(k.dtype, k.shape), gv(v.dtype, v.shape);
  const int64_t L = sc.L, S = sc.S, E = sc.E, Ev = sc.Ev;
  for (int64_t b = 0; b < sc.B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      double d = 0;
      for (int64_t e = 0; e < Ev; ++e) d += dout.values[(b * L + i) * Ev + e] * out.values[(b * L + i) * Ev + e];
      for (int64_t j = 0; j < S; ++j) {
        double p = prob(sc, lse, b, i, j);
        double dp = 0;
        for (int64_t e = 0; e < Ev; ++e) dp += dout.values[(b * L + i) * Ev + e] * v.values[(b * S + j) * Ev + e];
        double ds = p * (dp - d);
        for (int64_t e = 0; e < Ev; ++e) gv.values[(b * S + j) * Ev + e] += p * dout.values[(b * L + i) * Ev + e];
        for (int64_t e = 0; e < E; ++e) {
          gq.values[(b * L + i) * E + e] += sc.scale * ds * k.values[(b * S + j) * E + e];
          gk.values[(b * S + j) * E + e] += sc.scale * ds * q.values[(b * L + i) * E + e];
        }
      }
    }
  return {gq, gk, gv};
}
HAL_CONFORMANCE_SUITE(scaled_dot_product_attention_backward, attention_backward_cases, attention_backward_ref);

// ---- rotary_embedding -----------------------------------------------------------

// cos (or sin when SINE) of Llama's angles pos·10000^(-2k/D), [S, D/2].
HostTensor angles(hal_dtype_e dt, int64_t S, int64_t D, bool sine) {
  HostTensor t(dt, {S, D / 2});
  for (int64_t p = 0; p < S; ++p)
    for (int64_t k = 0; k < D / 2; ++k) {
      double theta = double(p + 1) * std::pow(10000.0, -2.0 * double(k) / double(D));
      t.values[p * (D / 2) + k] = round_to(dt, sine ? std::sin(theta) : std::cos(theta));
    }
  return t;
}

OpCase rotary(const std::string& name, hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed, bool interleaved,
              hal_dtype_e angle_dt = HAL_DTYPE_INVALID) {
  const int64_t S = shape[shape.size() - 2], D = shape.back();
  hal_dtype_e adt = angle_dt == HAL_DTYPE_INVALID ? dt : angle_dt;
  return OpCase(name).in(random(dt, shape, seed)).in(angles(adt, S, D, false)).in(angles(adt, S, D, true))
      .attr(hal::Attr::b("interleaved", interleaved));
}

std::vector<OpCase> rotary_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases;
  for (bool inter : {false, true}) {
    std::string tag = inter ? " interleaved" : " halves";
    cases.push_back(rotary("[2, 3, 5, 8]" + tag, dt, {2, 3, 5, 8}, 1, inter));
    cases.push_back(rotary("rank 2 [4, 6]" + tag, dt, {4, 6}, 2, inter));
    cases.push_back(rotary("zero-size [0, 3, 4]" + tag, dt, {0, 3, 4}, 3, inter));
    cases.push_back(rotary("D = 0" + tag, dt, {2, 3, 0}, 4, inter));
    cases.push_back(rotary("float32 angles" + tag, dt, {2, 4, 6}, 5, inter, HAL_DTYPE_FLOAT32));
  }
  // Backward = the op with sin negated: rotating by θ then by -θ is the identity.
  OpCase inverse = rotary("sin negated", dt, {3, 4, 8}, 6, false);
  for (double& s : inverse.inputs[2]->values) s = -s;
  cases.push_back(inverse);
  cases.push_back(OpCase("odd D = 5").in(random(dt, {2, 3, 5}, 8)).in(angles(dt, 3, 4, false)).in(angles(dt, 3, 4, true))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3, 5})}, {"'x'", "D = 5"}));
  OpCase bad_cos = rotary("cos of the wrong shape", dt, {2, 3, 8}, 9, false);
  bad_cos.inputs[1] = angles(dt, 4, 8, false);
  cases.push_back(bad_cos.error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3, 8})}, {"'cos'", "[4, 4]"}));
  cases.push_back(OpCase("x rank 1").in(random(dt, {8}, 10)).in(angles(dt, 1, 8, false)).in(angles(dt, 1, 8, true))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {8})}, {"'x'", "rank"}));
  return cases;
}

std::vector<HostTensor> rotary_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  const HostTensor& cs = c.input(1);
  const HostTensor& sn = c.input(2);
  const bool interleaved = c.attr_bool("interleaved", false);
  HostTensor out(x.dtype, x.shape);
  const int64_t S = x.size(-2), D = x.size(-1), H = D / 2;
  for (int64_t row = 0; D > 0 && row < x.numel() / D; ++row)
    for (int64_t k = 0; k < H; ++k) {
      int64_t ia = row * D + (interleaved ? 2 * k : k), ib = row * D + (interleaved ? 2 * k + 1 : k + H);
      double cv = cs.values[(row % S) * H + k], sv = sn.values[(row % S) * H + k];
      out.values[ia] = x.values[ia] * cv - x.values[ib] * sv;
      out.values[ib] = x.values[ib] * cv + x.values[ia] * sv;
    }
  return {out};
}
HAL_CONFORMANCE_SUITE(rotary_embedding, rotary_cases, rotary_ref);

}  // namespace
}  // namespace hal::conformance
