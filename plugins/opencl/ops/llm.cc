// OpenCL plugin, "llm" group (kernels/llm.cl): fused inference ops over a
// paged KV cache. Straightforward kernels: a work-group per row for the
// norms and per (token, head) for attention (online softmax over the
// context in tiles, block-table lookups in the kernel, no probabilities in
// scratch), a work-item per element elsewhere. Index operands are
// converted to dense long arrays first, so one program per float dtype
// serves every index dtype. What only the data decides (slots, block ids,
// lengths, positions, expert ids) is checked on the device before anything
// is written: a check kernel reports the first bad value in the queue's
// status words and every writing kernel returns when a status is set.
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

hal_dtype_e acc(hal_dtype_e dtype) { return dtype == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32; }

std::string llm_source(hal_dtype_e dtype) {
  return nn::row_prelude(dtype) + "#define STATUS_INDEX_AT " + std::to_string(kStatusIndexAt) + "\n" + cl_source::llm;
}

int64_t product(const Tensor& t, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; ++d) n *= t.shape[d];
  return n;
}

double attention_scale(double attr, int64_t d) {
  return attr != 0 ? attr : d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0;
}

// T (nullptr: absent) as a dense array of dtype TO: T's own buffer when it
// is contiguous and of dtype TO, else a converted copy (queued now).
Dense as_dtype(Ops& ops, const Tensor* t, hal_dtype_e to) {
  Dense d = ops.in(t);
  if (!d.present() || t->dtype == to) return d;
  std::ostringstream s;
  s << cl_prelude({t->dtype, to}) << "__kernel void convert(__global const " << cl_type(t->dtype)
    << "* in, long off, long n, __global " << cl_type(to) << "* out) {\n  long i = get_global_id(0);\n"
    << "  if (i < n) out[i] = (" << cl_type(to) << ")in[off + i];\n}\n";
  int64_t n = t->numel();
  Dense r;
  r.mem = ops.temp(to, n);
  r.off = 0;
  Launch l(ops.device(), s.str(), "convert");
  Ops::arg(l, d).value<cl_long>(n).mem(r.mem);
  l.enqueue(ops.queue(), global_1d(n), kLocalSize);
  return r;
}
Dense as_long(Ops& ops, const Tensor& t) { return as_dtype(ops, &t, HAL_DTYPE_INT64); }

// A status site "<op>: <text>" ({value} and {position} filled in).
int64_t site(const OpCall& c, const std::string& text) { return status_site(std::string(c.name()) + ": " + text); }

// The first of N values of V outside [LO, HI) (-1 accepted with
// ALLOW_PAD) reported as "<op>: <what> {value} in '<arg>' at position
// {position} is out of range [lo, hi)".
void check_range(const OpCall& c, Ops& ops, const std::string& source, const Dense& v, int64_t n, int64_t lo,
                 int64_t hi, bool allow_pad, const char* what, const char* arg) {
  if (n == 0) return;
  std::string text = std::string(what) + " {value} in '" + arg + "' at position {position} is out of range [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + ")" + (allow_pad ? " (-1 pads)" : "");
  Launch l(ops.device(), source, "llm_check_range");
  Ops::arg(l, v).value<cl_long>(n).value<cl_long>(lo).value<cl_long>(hi).value<cl_int>(allow_pad ? 1 : 0);
  l.value<cl_long>(site(c, text)).mem(ops.queue().status);
  l.enqueue(ops.queue(), kWorkGroup, kWorkGroup);
}

// The sequence data of the attention ops (llm_check_seqs): absent arrays
// are Dense with offset -1.
struct Seqs {
  const char* starts_arg = nullptr;  // "query_start_loc" / "cu_seqlens"
  int64_t B = 0, T = 0;
  int64_t max_blocks = 0, block_size = 1, num_blocks = 0;
};
void check_seqs(const OpCall& c, Ops& ops, const std::string& source, const Seqs& s, const Dense& starts,
                const Dense& lens, const Dense& bt) {
  const int64_t max_len = s.max_blocks * s.block_size;
  const std::string sa = s.starts_arg ? s.starts_arg : "";
  int64_t site_starts = site(c, "'" + sa + "' holds {value} at position {position}, but it must start at 0, never "
                                "decrease and end at the " + std::to_string(s.T) + " tokens of 'query'");
  int64_t site_lens = site(c, "length {value} in 'context_lens' at position {position} is out of range [0, " +
                                  std::to_string(max_len) + "] (max_blocks " + std::to_string(s.max_blocks) +
                                  " x block_size " + std::to_string(s.block_size) + ")");
  int64_t site_qlen = site(c, "length {value} in 'context_lens' at position {position} is less than the sequence's "
                              "new tokens in '" + sa + "' (they are the last of its context)");
  int64_t site_bt = site(c, "block id {value} in 'block_tables' at position {position} is out of range [0, " +
                                std::to_string(s.num_blocks) + ") (an entry the sequence's context length uses)");
  Launch l(ops.device(), source, "llm_check_seqs");
  Ops::arg(l, starts).value<cl_long>(s.B).value<cl_long>(s.T);
  Ops::arg(l, lens).value<cl_long>(max_len);
  Ops::arg(l, bt).value<cl_long>(s.max_blocks).value<cl_long>(s.block_size).value<cl_long>(s.num_blocks);
  l.value<cl_long>(site_starts).value<cl_long>(site_lens).value<cl_long>(site_qlen).value<cl_long>(site_bt);
  l.mem(ops.queue().status);
  l.enqueue(ops.queue(), 1);
}

// seq[t] = the sequence of token t (a [T] long array), from checked STARTS.
cl_mem seq_map(Ops& ops, const std::string& source, const Dense& starts, int64_t B, int64_t T) {
  cl_mem seq = ops.temp(HAL_DTYPE_INT64, T);
  if (B == 0 || T == 0) return seq;
  Launch l(ops.device(), source, "llm_seq_map");
  Ops::arg(l, starts).value<cl_long>(B).mem(seq).mem(ops.queue().status);
  l.enqueue(ops.queue(), global_1d(B), kLocalSize);
  return seq;
}

// ---- add_rms_norm, apply_rotary_pos_emb, silu_and_mul ---------------------------

void add_rms_norm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::add_rms_norm;
  const Tensor& x = a::input(c);
  const int64_t n = x.shape[x.rank - 1], rows = product(x, 0, x.rank - 1);
  if (x.numel() == 0) return;
  ClDevice& device = device_of(c);
  std::string source = llm_source(x.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dx = ops.in(x), dr = ops.in(a::residual(c)), dw = ops.in(a::weight(c));
    Dense out = ops.out(a::out(c)), res = ops.out(a::residual_out(c));
    Launch l(device, source, "llm_add_rms_norm");
    for (const Dense* d : {&dx, &dr, &dw, &out, &res}) Ops::arg(l, *d);
    l.value<cl_long>(n).scalar(acc(x.dtype), a::eps(c));
    l.enqueue(q, static_cast<size_t>(rows) * kWorkGroup, kWorkGroup);
    ops.finish(out);
    ops.finish(res);
  });
}

void apply_rotary_pos_emb_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::apply_rotary_pos_emb;
  const Tensor& query = a::query(c);
  const Tensor& pos = a::position_ids(c);
  const int64_t d = query.shape[query.rank - 1], half = a::cos(c).shape[1], max_pos = a::cos(c).shape[0];
  const int64_t tokens = pos.numel();
  const int interleaved = a::interleaved(c) ? 1 : 0;
  ClDevice& device = device_of(c);
  hal_dtype_e at = acc(query.dtype);
  std::string source = llm_source(query.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dpos = as_long(ops, pos);
    check_range(c, ops, source, dpos, tokens, 0, max_pos, false, "position", "position_ids");
    Dense cs = as_dtype(ops, &a::cos(c), at), sn = as_dtype(ops, &a::sin(c), at);
    for (int which = 0; which < 2; ++which) {
      const Tensor& x = c.input(which);
      const int64_t heads = x.shape[x.rank - 2], rows = tokens * heads;
      if (rows * (d - half) == 0) continue;
      Dense dx = ops.in(x), y = ops.out(c.output(which));
      Launch l(device, source, "llm_rotary");
      for (const Dense* t : {&dx, &y, &cs, &sn, &dpos}) Ops::arg(l, *t);
      l.value<cl_long>(rows).value<cl_long>(heads).value<cl_long>(d).value<cl_long>(half).value<cl_int>(interleaved);
      l.mem(q.status);
      l.enqueue(q, global_1d(rows * (d - half)), kLocalSize);
      ops.finish(y);
    }
  });
}

void silu_and_mul_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& x = op::silu_and_mul::input(c);
  const int64_t n = x.shape[x.rank - 1] / 2, rows = product(x, 0, x.rank - 1);
  if (rows * n == 0) return;
  ClDevice& device = device_of(c);
  std::string source = llm_source(x.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dx = ops.in(x), out = ops.out(op::silu_and_mul::out(c));
    Launch l(device, source, "llm_silu_and_mul");
    Ops::arg(Ops::arg(l, dx), out).value<cl_long>(rows).value<cl_long>(n);
    l.enqueue(q, global_1d(rows * n), kLocalSize);
    ops.finish(out);
  });
}

// ---- fill_kv_cache ------------------------------------------------------------------

void fill_kv_cache_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::fill_kv_cache;
  const Tensor& kc = a::key_cache(c);
  const int64_t tokens = a::key(c).shape[0], slots = kc.shape[0] * kc.shape[1];
  ClDevice& device = device_of(c);
  std::string source = llm_source(kc.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense slot = as_long(ops, a::slot_mapping(c));
    check_range(c, ops, source, slot, tokens, 0, slots, true, "slot", "slot_mapping");
    for (int which = 0; which < 2; ++which) {
      const Tensor& cache = c.input(2 + which);
      const int64_t numel = cache.numel(), row = cache.shape[2] * cache.shape[3];
      if (numel == 0) continue;
      Dense dc = ops.in(cache), out = ops.out(c.output(which));
      if (dc.mem != out.mem || dc.off != out.off) {  // out of place: the outputs start as the caches
        Launch l(device, source, "llm_copy");
        Ops::arg(Ops::arg(l, dc), out).value<cl_long>(numel).mem(q.status);
        l.enqueue(q, global_1d(numel), kLocalSize);
      }
      if (tokens * row > 0) {
        Dense src = ops.in(c.input(which));
        Launch l(device, source, "llm_fill_cache");
        Ops::arg(Ops::arg(Ops::arg(l, src), out), slot).value<cl_long>(tokens).value<cl_long>(row).mem(q.status);
        l.enqueue(q, global_1d(row), kLocalSize);
      }
      ops.finish(out);
    }
  });
}

// ---- attention ------------------------------------------------------------------------

struct Attention {
  int mode = 0;  // 0 decode, 1 paged prefill, 2 varlen prefill (llm_attention)
  int64_t tokens = 0, hq = 0, hk = 1, d = 0, dv = 0, block_size = 1, max_blocks = 0;
  double scale = 1;
  bool causal = true;
  int64_t window = 0;

  // QUERY [tokens, Hq, D] over KEY / VALUE ([.., Hk, D] and [.., Dv]: caches
  // or packed rows) with the scale attribute SCALE_ATTR.
  Attention(int m, const Tensor& query, const Tensor& key, const Tensor& value, double scale_attr, bool is_causal,
            int64_t sliding_window)
      : mode(m), tokens(query.shape[0]), hq(query.shape[1]), hk(key.shape[key.rank - 2]), d(query.shape[2]),
        dv(value.shape[value.rank - 1]), scale(attention_scale(scale_attr, d)), causal(is_causal),
        window(sliding_window) {}
  // The paged layout: KEY is a cache [num_blocks, block_size, Hk, D] read
  // through block table BT [B, max_blocks].
  Attention& paged(const Tensor& key, const Tensor& bt) {
    block_size = key.shape[1];
    max_blocks = bt.shape[1];
    return *this;
  }
  // The sequences' bounds checks of a paged call over cache KEY.
  Seqs seqs(const char* starts_arg, int64_t batch, int64_t num_blocks) const {
    Seqs s;
    s.starts_arg = starts_arg;
    s.B = batch;
    s.T = tokens;
    s.max_blocks = max_blocks;
    s.block_size = block_size;
    s.num_blocks = num_blocks;
    return s;
  }
};

// QUERY [tokens, Hq, D] over K / V (caches or packed rows) into OUT.
void launch_attention(Ops& ops, const std::string& source, hal_dtype_e dtype, const Attention& s, const Dense& q,
                      const Dense& k, const Dense& v, const Dense& bt, const Dense& starts, const Dense& lens,
                      cl_mem seq, const Dense& alibi, const Dense& out) {
  if (s.tokens * s.hq * s.dv == 0) return;
  const size_t a_size = sdk::dtype_size(acc(dtype));
  Launch l(ops.device(), source, "llm_attention");
  for (const Dense* t : {&q, &k, &v, &bt, &starts, &lens}) Ops::arg(l, *t);
  l.mem(seq ? seq : ops.queue().status).value<cl_long>(seq ? 0 : -1);
  Ops::arg(Ops::arg(l, alibi), out);
  l.value<cl_long>(s.hq).value<cl_long>(s.hk).value<cl_long>(s.d).value<cl_long>(s.dv);
  l.value<cl_long>(s.block_size).value<cl_long>(s.max_blocks).scalar(acc(dtype), s.scale);
  l.value<cl_int>(s.causal ? 1 : 0).value<cl_long>(s.window).value<cl_int>(s.mode);
  l.local(std::max<int64_t>(s.d, 1) * a_size).local(std::max<int64_t>(s.dv, 1) * a_size).mem(ops.queue().status);
  l.enqueue(ops.queue(), static_cast<size_t>(s.tokens * s.hq) * kWorkGroup, kWorkGroup);
}

void paged_decode_attention_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::paged_decode_attention;
  const Tensor& query = a::query(c);
  const Tensor& kc = a::key_cache(c);
  const Tensor& bt = a::block_tables(c);
  Attention s = Attention(0, query, kc, a::value_cache(c), a::scale(c), true, a::sliding_window(c)).paged(kc, bt);
  Seqs seqs = s.seqs(nullptr, s.tokens, kc.shape[0]);
  ClDevice& device = device_of(c);
  std::string source = llm_source(query.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense none = ops.in(nullptr), dbt = as_long(ops, bt), lens = as_long(ops, a::context_lens(c));
    check_seqs(c, ops, source, seqs, none, lens, dbt);
    Dense dq = ops.in(query), dk = ops.in(kc), dv = ops.in(a::value_cache(c));
    Dense alibi = as_dtype(ops, a::alibi_slopes(c), acc(query.dtype));
    Dense out = ops.out(a::out(c));
    launch_attention(ops, source, query.dtype, s, dq, dk, dv, dbt, none, lens, nullptr, alibi, out);
    ops.finish(out);
  });
}

void paged_prefill_attention_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::paged_prefill_attention;
  const Tensor& query = a::query(c);
  const Tensor& kc = a::key_cache(c);
  const Tensor& bt = a::block_tables(c);
  Attention s =
      Attention(1, query, kc, a::value_cache(c), a::scale(c), a::causal(c), a::sliding_window(c)).paged(kc, bt);
  Seqs seqs = s.seqs("query_start_loc", bt.shape[0], kc.shape[0]);
  ClDevice& device = device_of(c);
  std::string source = llm_source(query.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dbt = as_long(ops, bt), starts = as_long(ops, a::query_start_loc(c)), lens = as_long(ops, a::context_lens(c));
    check_seqs(c, ops, source, seqs, starts, lens, dbt);
    cl_mem seq = seq_map(ops, source, starts, seqs.B, s.tokens);
    Dense dq = ops.in(query), dk = ops.in(kc), dv = ops.in(a::value_cache(c));
    Dense alibi = as_dtype(ops, a::alibi_slopes(c), acc(query.dtype));
    Dense out = ops.out(a::out(c));
    launch_attention(ops, source, query.dtype, s, dq, dk, dv, dbt, starts, lens, seq, alibi, out);
    ops.finish(out);
  });
}

void prefill_attention_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::prefill_attention;
  const Tensor& query = a::query(c);
  Attention s(2, query, a::key(c), a::value(c), a::scale(c), a::causal(c), a::sliding_window(c));
  Seqs seqs = s.seqs("cu_seqlens", a::cu_seqlens(c).shape[0] - 1, 0);
  ClDevice& device = device_of(c);
  std::string source = llm_source(query.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense none = ops.in(nullptr), starts = as_long(ops, a::cu_seqlens(c));
    check_seqs(c, ops, source, seqs, starts, none, none);
    cl_mem seq = seq_map(ops, source, starts, seqs.B, s.tokens);
    Dense dq = ops.in(query), dk = ops.in(a::key(c)), dv = ops.in(a::value(c));
    Dense alibi = as_dtype(ops, a::alibi_slopes(c), acc(query.dtype));
    Dense out = ops.out(a::out(c));
    launch_attention(ops, source, query.dtype, s, dq, dk, dv, none, starts, none, seq, alibi, out);
    ops.finish(out);
  });
}

// ---- mixture of experts ----------------------------------------------------------------

void moe_gating_topk_softmax_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::moe_gating_topk_softmax;
  const Tensor& x = a::router_logits(c);
  const int64_t tokens = x.shape[0], experts = x.shape[1], k = a::top_k(c);
  if (tokens == 0) return;
  ClDevice& device = device_of(c);
  std::string source = llm_source(x.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dx = ops.in(x), w = ops.out(a::topk_weights(c)), ids = ops.out(a::topk_ids(c));
    Launch l(device, source, "llm_moe_gating");
    for (const Dense* t : {&dx, &w, &ids}) Ops::arg(l, *t);
    l.value<cl_long>(tokens).value<cl_long>(experts).value<cl_long>(k).value<cl_int>(a::renormalize(c) ? 1 : 0);
    l.enqueue(q, global_1d(tokens), kLocalSize);
    ops.finish(w);
    ops.finish(ids);
  });
}

void fused_moe_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::fused_moe;
  const Tensor& x = a::hidden_states(c);
  const Tensor& w13 = a::gate_up_weights(c);
  const int64_t tokens = x.shape[0], hidden = x.shape[1], experts = w13.shape[0], inter = w13.shape[1] / 2;
  const int64_t k = a::topk_ids(c).shape[1];
  ClDevice& device = device_of(c);
  hal_dtype_e dt = x.dtype;
  std::string source = llm_source(dt);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense ids = as_long(ops, a::topk_ids(c));
    check_range(c, ops, source, ids, tokens * k, 0, experts, false, "expert id", "topk_ids");
    if (tokens * hidden == 0) return;
    Dense dx = ops.in(x), dw13 = ops.in(w13), dw2 = ops.in(a::down_weights(c));
    Dense tw = as_dtype(ops, &a::topk_weights(c), acc(dt));
    Dense out = ops.out(a::out(c));
    cl_mem h = ops.temp(dt, tokens * k * inter);
    if (tokens * k * inter > 0) {
      Launch l(device, source, "llm_moe_up");
      Ops::arg(Ops::arg(Ops::arg(l, dx), dw13), ids).mem(h);
      l.value<cl_long>(tokens).value<cl_long>(k).value<cl_long>(inter).value<cl_long>(hidden).mem(q.status);
      l.enqueue(q, global_1d(tokens * k * inter), kLocalSize);
    }
    Launch l(device, source, "llm_moe_down");
    l.mem(h);
    Ops::arg(Ops::arg(Ops::arg(Ops::arg(l, dw2), ids), tw), out);
    l.value<cl_long>(tokens).value<cl_long>(k).value<cl_long>(inter).value<cl_long>(hidden);
    l.value<cl_int>(a::renormalize(c) ? 1 : 0).mem(q.status);
    l.enqueue(q, global_1d(tokens * hidden), kLocalSize);
    ops.finish(out);
  });
}

// ---- quantisation ------------------------------------------------------------------------

void dynamic_quant_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& x = op::dynamic_quant::input(c);
  const int64_t k = x.shape[x.rank - 1], rows = product(x, 0, x.rank - 1);
  if (rows == 0) return;
  ClDevice& device = device_of(c);
  std::string source = llm_source(x.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dx = ops.in(x), out = ops.out(op::dynamic_quant::out(c)), scale = ops.out(op::dynamic_quant::scale(c));
    Launch l(device, source, "llm_dynamic_quant");
    for (const Dense* t : {&dx, &out, &scale}) Ops::arg(l, *t);
    l.value<cl_long>(k);
    l.enqueue(q, static_cast<size_t>(rows) * kWorkGroup, kWorkGroup);
    ops.finish(out);
    ops.finish(scale);
  });
}

void linear_w8a16_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using a = op::linear_w8a16;
  const Tensor& x = a::input(c);
  const int64_t k = x.shape[x.rank - 1], rows = product(x, 0, x.rank - 1), n = a::weight(c).shape[0];
  if (rows * n == 0) return;
  ClDevice& device = device_of(c);
  std::string source = llm_source(x.dtype);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    Dense dx = ops.in(x), w = ops.in(a::weight(c)), scale = as_dtype(ops, &a::scale(c), acc(x.dtype));
    Dense bias = ops.in(a::bias(c)), out = ops.out(a::out(c));
    Launch l(device, source, "llm_linear_w8a16");
    for (const Dense* t : {&dx, &w, &scale, &bias, &out}) Ops::arg(l, *t);
    l.value<cl_long>(rows).value<cl_long>(n).value<cl_long>(k);
    l.enqueue(q, global_1d(rows * n), kLocalSize);
    ops.finish(out);
  });
}

}  // namespace

void register_llm_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::add_rms_norm>(&add_rms_norm_kernel, F);
  ops.add<op::apply_rotary_pos_emb>(&apply_rotary_pos_emb_kernel, F);
  ops.add<op::silu_and_mul>(&silu_and_mul_kernel, F);
  ops.add<op::fill_kv_cache>(&fill_kv_cache_kernel, F);
  ops.add<op::paged_decode_attention>(&paged_decode_attention_kernel, F);
  ops.add<op::paged_prefill_attention>(&paged_prefill_attention_kernel, F);
  ops.add<op::prefill_attention>(&prefill_attention_kernel, F);
  ops.add<op::moe_gating_topk_softmax>(&moe_gating_topk_softmax_kernel, F);
  ops.add<op::fused_moe>(&fused_moe_kernel, F);
  ops.add<op::dynamic_quant>(&dynamic_quant_kernel, F);
  ops.add<op::linear_w8a16>(&linear_w8a16_kernel, F);
}

}  // namespace hal::opencl
