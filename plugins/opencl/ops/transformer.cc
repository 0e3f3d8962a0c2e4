// OpenCL plugin, "transformer" group: scaled_dot_product_attention (and its
// backward) as a straightforward kernel set — not flash attention: the
// [B, L, S] probabilities are materialised in scratch. Forward: one
// work-group per query row computes its scores, max, softmax, logsumexp and
// output row. Backward: one work-group per query row (P, dS and
// grad_query), then one per key row (grad_key, grad_value). A mask is first
// expanded to a dense additive [B, L, S] array (bool: 0 / -inf).
// rotary_embedding: one work-item per rotated pair.
#include <cmath>
#include <sstream>

#include "cl_sources.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "nn_common.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;
using nn::Dense;
using nn::kWorkGroup;
using nn::Ops;

const char* const kAttentionSource = cl_source::attention;  // kernels/attention.cl

std::string attention_source(hal_dtype_e dtype) { return nn::row_prelude(dtype) + kAttentionSource; }
hal_dtype_e acc(hal_dtype_e dtype) { return dtype == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32; }

// The dense additive mask [B, L, S] of accumulation dtype A from MASK
// (broadcast to query's batch dims + [L, S]).
std::string mask_source(hal_dtype_e a, hal_dtype_e mask) {
  std::ostringstream s;
  s << cl_prelude({a, mask}) << kDimsTypedef << "__kernel void mask_pack(__global " << cl_type(a)
    << "* in0, long off0, __global const " << cl_type(mask) << "* in1, long off1, long n, " << geometry_params(2)
    << ", int is_bool) {\n  long i = get_global_id(0);\n  if (i >= n) return;\n"
    << offset_code(2) << "  in0[o0] = is_bool ? (in1[o1] != 0 ? (" << cl_type(a) << ")0 : (" << cl_type(a)
    << ")(-INFINITY)) : (" << cl_type(a) << ")in1[o1];\n}\n";
  return s.str();
}

struct Shapes {
  int64_t B = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1;
};
Shapes shapes(const OpCall& c, size_t q_i, double scale_attr) {
  const Tensor& query = c.input(q_i);
  const Tensor& key = c.input(q_i + 1);
  const Tensor& value = c.input(q_i + 2);
  Shapes s;
  const int r = query.rank;
  for (int d = 0; d < r - 2; ++d) s.B *= query.shape[d];
  s.L = query.shape[r - 2];
  s.E = query.shape[r - 1];
  s.S = key.shape[r - 2];
  s.Ev = value.shape[r - 1];
  s.scale = scale_attr != 0 ? scale_attr : s.E > 0 ? 1.0 / std::sqrt(static_cast<double>(s.E)) : 1.0;
  return s;
}

// Queues the dense mask (nullptr when there is none).
cl_mem dense_mask(Ops& ops, const Tensor* mask, const Tensor& query, const Shapes& s) {
  if (mask == nullptr) return nullptr;
  hal_dtype_e a = acc(query.dtype);
  cl_mem m = ops.temp(a, s.B * s.L * s.S);
  Tensor target = query;  // [batch..., L, S], row-major, dtype A
  target.dtype = a;
  target.shape[target.rank - 1] = s.S;
  target.set_contiguous_strides();
  Geometry g(target, {&target, mask});
  if (g.numel == 0) return m;
  Launch l(ops.device(), mask_source(a, mask->dtype), "mask_pack");
  l.mem(m).value<cl_long>(0).tensor(*mask).value<cl_long>(g.numel);
  geometry_args(l, g);
  l.value<cl_int>(mask->dtype == HAL_DTYPE_BOOL ? 1 : 0);
  l.enqueue(ops.queue(), global_1d(g.numel), kLocalSize);
  return m;
}

void attention_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::scaled_dot_product_attention;
  const Tensor& query = c.input(0);
  Shapes s = shapes(c, 0, a::scale(c));
  if (s.B * s.L == 0) return;
  bool causal = a::is_causal(c);
  ClDevice& device = device_of(c);
  hal_dtype_e dt = query.dtype;
  std::string source = attention_source(dt);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dq = ops.in(query), dk = ops.in(c.input(1)), dv = ops.in(c.input(2));
    Dense out = ops.out(c.output(0)), lse = ops.out(c.output(1));
    cl_mem mask = dense_mask(ops, c.optional_input(3), query, s);
    cl_mem p = ops.temp(acc(dt), s.B * s.L * s.S);
    Launch l(device, source, "attn_forward");
    Ops::arg(Ops::arg(Ops::arg(l, dq), dk), dv).mem(mask ? mask : q.status).value<cl_int>(mask ? 1 : 0).mem(p);
    Ops::arg(Ops::arg(l, out), lse).value<cl_long>(s.L).value<cl_long>(s.S).value<cl_long>(s.E);
    l.value<cl_long>(s.Ev).scalar(acc(dt), s.scale).value<cl_int>(causal ? 1 : 0);
    l.enqueue(q, static_cast<size_t>(s.B * s.L) * kWorkGroup, kWorkGroup);
    ops.finish(out);
    ops.finish(lse);
  });
}

// (grad_out, query, key, value, out, logsumexp, attn_mask?) -> grad_query,
// grad_key, grad_value.
void attention_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::scaled_dot_product_attention_backward;
  const Tensor& query = c.input(1);
  Shapes s = shapes(c, 1, a::scale(c));
  bool causal = a::is_causal(c);
  ClDevice& device = device_of(c);
  hal_dtype_e dt = query.dtype;
  std::string source = attention_source(dt);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense g = ops.in(c.input(0)), dq_in = ops.in(query), k = ops.in(c.input(2)), v = ops.in(c.input(3)),
          o = ops.in(c.input(4)), lse = ops.in(c.input(5));
    Dense dq = ops.out(c.output(0)), dk = ops.out(c.output(1)), dv = ops.out(c.output(2));
    cl_mem mask = dense_mask(ops, c.optional_input(6), query, s);
    cl_mem p = ops.temp(acc(dt), s.B * s.L * s.S), ds = ops.temp(acc(dt), s.B * s.L * s.S);
    {
      Launch l(device, source, "attn_backward_rows");
      for (const Dense* d : {&g, &dq_in, &k, &v, &o, &lse}) Ops::arg(l, *d);
      l.mem(mask ? mask : q.status).value<cl_int>(mask ? 1 : 0).mem(p).mem(ds);
      Ops::arg(l, dq).value<cl_long>(s.L).value<cl_long>(s.S).value<cl_long>(s.E).value<cl_long>(s.Ev);
      l.scalar(acc(dt), s.scale).value<cl_int>(causal ? 1 : 0);
      l.enqueue(q, static_cast<size_t>(s.B * s.L) * kWorkGroup, kWorkGroup);
    }
    {
      Launch l(device, source, "attn_backward_keys");
      Ops::arg(Ops::arg(l, g), dq_in).mem(p).mem(ds);
      Ops::arg(Ops::arg(l, dk), dv).value<cl_long>(s.L).value<cl_long>(s.S).value<cl_long>(s.E).value<cl_long>(s.Ev);
      l.scalar(acc(dt), s.scale);
      l.enqueue(q, static_cast<size_t>(s.B * s.S) * kWorkGroup, kWorkGroup);
    }
    ops.finish(dq);
    ops.finish(dk);
    ops.finish(dv);
  });
}

std::string rotary_source(hal_dtype_e x, hal_dtype_e cs, hal_dtype_e sn) {
  std::ostringstream s;
  s << cl_prelude({x, cs, sn}) << "typedef " << cl_type(x) << " T;\ntypedef "
    << (x == HAL_DTYPE_FLOAT64 ? "double" : "float") << " C;\n"
    << "__kernel void rotary(__global const T* x, long xo, __global const " << cl_type(cs) << "* cs, long co, "
    << "__global const " << cl_type(sn) << "* sn, long so, __global T* out, long oo, long pairs, long S, long D, "
    << R"(int interleaved) {
  long id = get_global_id(0);
  if (id >= pairs) return;
  long H = D / 2, r = id / H, k = id % H, s = r % S;
  C c = (C)cs[co + s * H + k], n = (C)sn[so + s * H + k];
  long ia = r * D + (interleaved ? 2 * k : k), ib = r * D + (interleaved ? 2 * k + 1 : k + H);
  C a = (C)x[xo + ia], b = (C)x[xo + ib];
  out[oo + ia] = (T)(a * c - b * n);
  out[oo + ib] = (T)(b * c + a * n);
}
)";
  return s.str();
}

void rotary_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& x = c.input(0);
  const int64_t S = x.shape[x.rank - 2], D = x.shape[x.rank - 1];
  const int64_t pairs = D == 0 ? 0 : x.numel() / D * (D / 2);
  if (pairs == 0) return;
  bool interleaved = op::rotary_embedding::interleaved(c);
  ClDevice& device = device_of(c);
  std::string source = rotary_source(x.dtype, c.input(1).dtype, c.input(2).dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dx = ops.in(x), cs = ops.in(c.input(1)), sn = ops.in(c.input(2));
    Dense out = ops.out(c.output(0));
    Launch l(device, source, "rotary");
    for (const Dense* d : {&dx, &cs, &sn, &out}) Ops::arg(l, *d);
    l.value<cl_long>(pairs).value<cl_long>(S).value<cl_long>(D).value<cl_int>(interleaved ? 1 : 0);
    l.enqueue(q, global_1d(pairs), kLocalSize);
    ops.finish(out);
  });
}

}  // namespace

void register_transformer_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::scaled_dot_product_attention>(&attention_kernel, F);
  ops.add<op::scaled_dot_product_attention_backward>(&attention_backward_kernel, F);
  ops.add<op::rotary_embedding>(&rotary_kernel, F);
}

}  // namespace hal::opencl
