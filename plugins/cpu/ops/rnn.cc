// CPU kernels of the "rnn" group: the pointwise LSTM / GRU cell steps and
// their gradients (formulas and workspace layouts in sdk/catalog/ops/rnn.toml).
// Operands are read as contiguous float32 (float64 for float64) arrays, the
// inputs' own memory when they already are; every output element is computed
// in that type and rounded once on store. Rows are split across threads.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "random_layout.hpp"
#include "vector_math.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;

template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Input I of C as a contiguous array of A (nullptr when the optional input is
// absent); copies live in the Operands.
template <class A>
struct Operands {
  explicit Operands(const OpCall& c) : call(c), tmp(c.input_count()), storage(c.input_count()) {}
  const A* get(size_t i) {
    const Tensor* t = call.optional_input(i);
    if (t == nullptr) return nullptr;
    constexpr hal_dtype_e dt = std::is_same_v<A, double> ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32;
    return contiguous_as<A>(*t, dt, tmp[i], storage[i]);
  }
  const OpCall& call;
  std::vector<Tensor> tmp;
  std::vector<std::vector<unsigned char>> storage;
};

template <class A>
inline A sigmoid(A x) { return vmath::sigmoid(x); }
template <class A>
inline A tanh_a(A x) { return vmath::tanh(x); }

// Calls UNIT(in, out, r, j) for every row r < B and hidden unit j < H of C:
// IN[i] is input i as a contiguous array of A (zeros when absent), OUT[k]
// output k as a contiguous array of T. Rows are split across threads (a row
// is ~10·H flops); UNIT is a generic lambda, inlined into the unit loop.
template <size_t kOutputs, class Unit>
void for_each_unit(const OpCall& c, int64_t b, int64_t h, Unit unit) {
  sdk::kernel::dispatch_float(c.input(0).dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    Operands<A> operands(c);
    // An absent optional input (a bias [G·H], a gradient [B, H]) reads zeros:
    // no branch in the unit loop, so it vectorises.
    const std::vector<A> zeros(static_cast<size_t>(std::max(b * h, 4 * h)), A(0));
    std::array<const A*, 5> in{};
    for (size_t i = 0; i < c.input_count(); ++i) {
      in[i] = operands.get(i);
      if (in[i] == nullptr) in[i] = zeros.data();
    }
    std::vector<std::unique_ptr<ContiguousOut<T>>> outs;
    std::array<T*, kOutputs> out{};
    for (size_t k = 0; k < kOutputs; ++k) {
      outs.push_back(std::make_unique<ContiguousOut<T>>(c.output(k)));
      out[k] = outs.back()->data();
    }
    parallel_for(b, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, h)), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
#pragma omp simd
        for (int64_t j = 0; j < h; ++j) unit(in, out, r, j);
      }
    });
    for (const auto& o : outs) o->finish();
  });
}

// The A and T of a unit lambda's arrays.
#define HAL_RNN_TYPES(in, out)                                    \
  using A = std::remove_cv_t<std::remove_pointer_t<typename std::decay_t<decltype(in)>::value_type>>; \
  using T = std::remove_pointer_t<typename std::decay_t<decltype(out)>::value_type>

// ---- lstm_cell: in ig, hg, cx, ib?, hb?; out hy, cy, workspace [i, f, g, o] -----------

void lstm_cell_body(const OpCall& c) {
  const int64_t h = c.input(2).shape[1];
  for_each_unit<3>(c, c.input(2).shape[0], h, [h](const auto& in, const auto& out, int64_t r, int64_t j) {
    HAL_RNN_TYPES(in, out);
    A g[4];
    for (int64_t k = 0; k < 4; ++k) {
      const int64_t e = r * 4 * h + k * h + j;
      g[k] = in[0][e] + in[1][e] + (in[3][k * h + j] + in[4][k * h + j]);
    }
    const A i = sigmoid(g[0]), f = sigmoid(g[1]), gg = tanh_a(g[2]), o = sigmoid(g[3]);
    const A cn = f * in[2][r * h + j] + i * gg;
    out[1][r * h + j] = T(cn);
    out[0][r * h + j] = T(o * tanh_a(cn));
    T* w = out[2] + r * 4 * h + j;
    w[0] = T(i);
    w[h] = T(f);
    w[2 * h] = T(gg);
    w[3 * h] = T(o);
  });
}
HAL_CPU_KERNEL(lstm_cell_kernel, lstm_cell_body)

// ---- lstm_cell_backward: in cx, cy, workspace, grad_hy?, grad_cy?; out grad_gates, grad_cx

void lstm_cell_backward_body(const OpCall& c) {
  const int64_t h = c.input(0).shape[1];
  for_each_unit<2>(c, c.input(0).shape[0], h, [h](const auto& in, const auto& out, int64_t r, int64_t j) {
    HAL_RNN_TYPES(in, out);
    const int64_t e = r * h + j;
    const A* w = in[2] + r * 4 * h + j;
    const A i = w[0], f = w[h], g = w[2 * h], o = w[3 * h];
    const A dh = in[3][e];
    // vmath's own (always inlined): through the tanh_a wrapper GCC kept an out-of-line call per
    // element here, a third of the op's time (forcing the wrapper inline slowed the forward 7x).
    const A t = vmath::tanh(in[1][e]);
    const A dc = dh * o * (A(1) - t * t) + in[4][e];
    T* d = out[0] + r * 4 * h + j;
    d[0] = T(dc * g * i * (A(1) - i));
    d[h] = T(dc * in[0][e] * f * (A(1) - f));
    d[2 * h] = T(dc * i * (A(1) - g * g));
    d[3 * h] = T(dh * t * o * (A(1) - o));
    out[1][e] = T(dc * f);
  });
}
HAL_CPU_KERNEL(lstm_cell_backward_kernel, lstm_cell_backward_body)

// ---- gru_cell: in ig, hg, hx, ib?, hb?; out hy, workspace [r, z, n, h_n, hx] ------------

void gru_cell_body(const OpCall& c) {
  const int64_t h = c.input(2).shape[1];
  for_each_unit<2>(c, c.input(2).shape[0], h, [h](const auto& in, const auto& out, int64_t r, int64_t j) {
    HAL_RNN_TYPES(in, out);
    A xi[3], xh[3];
    for (int64_t k = 0; k < 3; ++k) {
      const int64_t e = r * 3 * h + k * h + j;
      xi[k] = in[0][e] + in[3][k * h + j];
      xh[k] = in[1][e] + in[4][k * h + j];
    }
    const A rg = sigmoid(xi[0] + xh[0]), z = sigmoid(xi[1] + xh[1]);
    const A n = tanh_a(xi[2] + rg * xh[2]);
    const A hp = in[2][r * h + j];
    out[0][r * h + j] = T((A(1) - z) * n + z * hp);
    T* w = out[1] + r * 5 * h + j;
    w[0] = T(rg);
    w[h] = T(z);
    w[2 * h] = T(n);
    w[3 * h] = T(xh[2]);
    w[4 * h] = T(hp);
  });
}
HAL_CPU_KERNEL(gru_cell_kernel, gru_cell_body)

// ---- gru_cell_backward: in grad_hy, workspace; out grad_input_gates, grad_hidden_gates, grad_hx

void gru_cell_backward_body(const OpCall& c) {
  const int64_t h = c.input(0).shape[1];
  for_each_unit<3>(c, c.input(0).shape[0], h, [h](const auto& in, const auto& out, int64_t r, int64_t j) {
    HAL_RNN_TYPES(in, out);
    const int64_t e = r * h + j;
    const A* w = in[1] + r * 5 * h + j;
    const A rg = w[0], z = w[h], n = w[2 * h], hn = w[3 * h], hp = w[4 * h];
    const A go = in[0][e];
    const A dn = go * (A(1) - z) * (A(1) - n * n);
    const A dz = go * (hp - n) * z * (A(1) - z);
    const A dr = dn * hn * rg * (A(1) - rg);
    T* di = out[0] + r * 3 * h + j;
    T* dh = out[1] + r * 3 * h + j;
    di[0] = T(dr);
    di[h] = T(dz);
    di[2 * h] = T(dn);
    dh[0] = T(dr);
    dh[h] = T(dz);
    dh[2 * h] = T(dn * rg);
    out[2][e] = T(go * z);
  });
}
HAL_CPU_KERNEL(gru_cell_backward_kernel, gru_cell_backward_body)

#undef HAL_RNN_TYPES

}  // namespace

void register_rnn_ops(sdk::OpRegistry& ops) {
  ops.add<op::lstm_cell>(&lstm_cell_kernel, sdk::kFloatDtypes);
  ops.add<op::lstm_cell_backward>(&lstm_cell_backward_kernel, sdk::kFloatDtypes);
  ops.add<op::gru_cell>(&gru_cell_kernel, sdk::kFloatDtypes);
  ops.add<op::gru_cell_backward>(&gru_cell_backward_kernel, sdk::kFloatDtypes);
}

}  // namespace hal::cpu
