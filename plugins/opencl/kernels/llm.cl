// The "llm" group's kernels (ops/llm.cc). Prepended: T, A, WG, wg_sum,
// wg_max (nn::row_prelude) and STATUS_INDEX_AT. Every operand is dense
// row-major; index operands arrive as long. A data error is reported in the
// queue's status words by a check kernel, and every kernel that writes an
// output returns when status[0] != 0, so nothing is written.

void report(__global long* status, long site, long value, long position) {
  status[0] = STATUS_INDEX_AT;
  status[1] = site;
  status[2] = value;
  status[3] = position;
}

// The first of N values (row-major) outside [lo, hi) — -1 accepted when
// ALLOW_PAD — reported at SITE. One work-group of WG items.
__kernel void llm_check_range(__global const long* v, long vo, long n, long lo, long hi, int allow_pad, long site,
                              __global long* status) {
  __local long best[WG];
  int l = get_local_id(0);
  long mine = -1;
  for (long i = l; i < n; i += WG) {
    long x = v[vo + i];
    if ((x < lo || x >= hi) && !(allow_pad && x == -1)) {
      mine = i;
      break;
    }
  }
  best[l] = mine;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l != 0 || status[0] != 0) return;
  long first = -1;
  for (int j = 0; j < WG; ++j)
    if (best[j] >= 0 && (first < 0 || best[j] < first)) first = best[j];
  if (first >= 0) report(status, site, v[vo + first], first);
}

// The sequences' data, in this order (the first error is reported): the
// B + 1 STARTS (0 first, non-decreasing, T last), the B LENS in
// [0, max_len], q_len <= len (when both are given) and the block table
// entries [B, M] each sequence's length uses, in [0, nblocks). Absent
// arrays have offset -1. One work-item: the arrays are small.
__kernel void llm_check_seqs(__global const long* starts, long so, long B, long T_, __global const long* lens,
                             long lo, long max_len, __global const long* bt, long bto, long M, long bs, long nblocks,
                             long site_starts, long site_lens, long site_qlen, long site_bt, __global long* status) {
  if (get_global_id(0) != 0 || status[0] != 0) return;
  if (so >= 0) {
    for (long b = 0; b <= B; ++b) {
      long s = starts[so + b];
      bool bad = (b == 0 && s != 0) || (b > 0 && s < starts[so + b - 1]) || (b == B && s != T_);
      if (bad) {
        report(status, site_starts, s, b);
        return;
      }
    }
  }
  if (lo < 0) return;
  for (long b = 0; b < B; ++b) {
    long n = lens[lo + b];
    if (n < 0 || n > max_len) {
      report(status, site_lens, n, b);
      return;
    }
    if (so >= 0 && starts[so + b + 1] - starts[so + b] > n) {
      report(status, site_qlen, n, b);
      return;
    }
  }
  if (bto < 0) return;
  for (long b = 0; b < B; ++b) {
    long used = (lens[lo + b] + bs - 1) / bs;
    for (long i = 0; i < used; ++i) {
      long id = bt[bto + b * M + i];
      if (id < 0 || id >= nblocks) {
        report(status, site_bt, id, b * M + i);
        return;
      }
    }
  }
}

// seq[t] = b for the tokens [starts[b], starts[b+1]) of sequence
// get_global_id(0) (starts checked first).
__kernel void llm_seq_map(__global const long* starts, long so, long B, __global long* seq,
                          __global const long* status) {
  long b = get_global_id(0);
  if (b >= B || status[0] != 0) return;
  for (long t = starts[so + b]; t < starts[so + b + 1]; ++t) seq[t] = b;
}

__kernel void llm_copy(__global const T* src, long so, __global T* dst, long dso, long n,
                       __global const long* status) {
  long i = get_global_id(0);
  if (i >= n || status[0] != 0) return;
  dst[dso + i] = src[so + i];
}

// add_rms_norm of row get_group_id(0) of D elements: s = (T)(x + r) into
// res, then out = s·w / sqrt(mean(s²) + eps) read from the rounded s.
// Each item reads and writes only its own elements, so out may be x and
// res may be r.
__kernel void llm_add_rms_norm(__global const T* x, long xo, __global const T* r, long ro, __global const T* w,
                               long wo, __global T* out, long oo, __global T* res, long reso, long d, A eps) {
  __local A red[WG];
  long base = get_group_id(0) * d;
  int l = get_local_id(0);
  A ss = 0;
  for (long j = l; j < d; j += WG) {
    T s = (T)((A)x[xo + base + j] + (A)r[ro + base + j]);
    res[reso + base + j] = s;
    ss += (A)s * (A)s;
  }
  ss = wg_sum(ss, red);
  A rs = (A)1 / sqrt((d == 0 ? (A)0 : ss / (A)d) + eps);
  for (long j = l; j < d; j += WG) out[oo + base + j] = (T)((A)res[reso + base + j] * rs * (A)w[wo + j]);
}

// Rotary embedding of ROWS head rows of D (H heads a token): per row, HALF
// rotated pairs and D - 2·HALF copied dims, one item each (an item reads
// what it writes, so y may be x).
__kernel void llm_rotary(__global const T* x, long xo, __global T* y, long yo, __global const A* cs, long co,
                         __global const A* sn, long sno, __global const long* pos, long po, long rows, long H, long D,
                         long nh, int interleaved, __global const long* status) {
  long per = D - nh, id = get_global_id(0);
  if (id >= rows * per || status[0] != 0) return;
  long r = id / per, j = id % per, base = r * D;
  if (j >= nh) {
    long e = nh + j;  // 2·nh + (j - nh): the copied dims
    y[yo + base + e] = x[xo + base + e];
    return;
  }
  long p = pos[po + r / H];
  A c = cs[co + p * nh + j], n = sn[sno + p * nh + j];
  long ia = base + (interleaved ? 2 * j : j), ib = base + (interleaved ? 2 * j + 1 : j + nh);
  A a = (A)x[xo + ia], b = (A)x[xo + ib];
  y[yo + ia] = (T)(a * c - b * n);
  y[yo + ib] = (T)(b * c + a * n);
}

// out[m, n] = silu(x[m, n])·x[m, N + n], one item per output element.
__kernel void llm_silu_and_mul(__global const T* x, long xo, __global T* out, long oo, long rows, long N) {
  long id = get_global_id(0);
  if (id >= rows * N) return;
  long m = id / N, n = id % N;
  A a = (A)x[xo + m * 2 * N + n], b = (A)x[xo + m * 2 * N + N + n];
  out[oo + id] = (T)(a / ((A)1 + exp(-a)) * b);
}

// fill_kv_cache: element E of a token's [Hk, D] row, for every token in
// order, so the later of two tokens naming one slot wins without atomics.
__kernel void llm_fill_cache(__global const T* src, long so, __global T* cache, long co, __global const long* slot,
                             long slo, long T_, long row, __global const long* status) {
  long e = get_global_id(0);
  if (e >= row || status[0] != 0) return;
  for (long t = 0; t < T_; ++t) {
    long s = slot[slo + t];
    if (s >= 0) cache[co + s * row + e] = src[so + t * row + e];
  }
}

// Attention of row get_group_id(0) = t·Hq + h (query token t, head h over kv
// head h / (Hq / Hk)), online softmax over the context in tiles of WG keys:
// item l scores key j0 + l, then each item updates its dims e ≡ l (mod WG)
// of the output accumulator. MODE 0: decode (token t is sequence t at
// position len - 1); 1: paged prefill (sequence seq[t], position
// len - q_len + i); 2: varlen (keys are rows starts[b] + j, position i).
// Modes 0 and 1 find key j in block bt[b, j / bs], row j % bs.
__kernel void llm_attention(__global const T* q, long qo, __global const T* k, long ko, __global const T* v, long vo,
                            __global const long* bt, long bto, __global const long* starts, long so,
                            __global const long* lens, long lo, __global const long* seq, long sqo,
                            __global const A* alibi, long ao, __global T* out, long oo, long Hq, long Hk, long D,
                            long Dv, long bs, long M, A scale, int causal, long window, int mode, __local A* qs,
                            __local A* acc, __global const long* status) {
  __local A red[WG];
  __local A p[WG];
  __local long krow[WG];
  // No early return: every item must reach the barriers (PoCL).
  const bool live = status[0] == 0;
  long row = get_group_id(0), t = row / Hq, h = row % Hq, kh = h / (Hq / Hk);
  int l = get_local_id(0);
  long b = t, len = 0, pos = 0, start = 0;
  if (!live) {
  } else if (mode == 0) {
    len = lens[lo + b];
    pos = len - 1;
  } else if (mode == 1) {
    b = seq[sqo + t];
    long q0 = starts[so + b];
    len = lens[lo + b];
    pos = len - (starts[so + b + 1] - q0) + (t - q0);
  } else {
    b = seq[sqo + t];
    start = starts[so + b];
    len = starts[so + b + 1] - start;
    pos = t - start;
  }
  long last = causal ? min(pos, len - 1) : len - 1;
  long first = window > 0 ? max((long)0, pos - window + 1) : 0;
  for (long e = l; e < D; e += WG) qs[e] = (A)q[qo + row * D + e];
  for (long e = l; e < Dv; e += WG) acc[e] = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  A slope = ao >= 0 ? alibi[ao + h] : (A)0;
  A m = -INFINITY, sum = 0;
  for (long j0 = first; j0 <= last; j0 += WG) {
    long j = j0 + l;
    A s = -INFINITY;
    if (j <= last) {
      long r = mode == 2 ? start + j : bt[bto + b * M + j / bs] * bs + j % bs;
      krow[l] = r * Hk + kh;
      __global const T* kr = k + ko + (r * Hk + kh) * D;
      A d = 0;
      for (long e = 0; e < D; ++e) d += qs[e] * (A)kr[e];
      s = d * scale + slope * (A)(j - pos);
    }
    A mn = max(m, wg_max(s, red));
    A pj = s == -INFINITY ? (A)0 : exp(s - mn);
    p[l] = pj;
    A corr = m == -INFINITY ? (A)0 : exp(m - mn);
    sum = sum * corr + wg_sum(pj, red);  // wg_sum's barriers publish p and krow
    long count = min((long)WG, last - j0 + 1);
    for (long e = l; e < Dv; e += WG) {
      A a = acc[e] * corr;
      for (long jj = 0; jj < count; ++jj) a += p[jj] * (A)v[vo + krow[jj] * Dv + e];
      acc[e] = a;
    }
    if (mn != -INFINITY) m = mn;
    barrier(CLK_LOCAL_MEM_FENCE);  // p and krow are rewritten by the next tile
  }
  A inv = sum > 0 ? (A)1 / sum : (A)0;
  if (live)
    for (long e = l; e < Dv; e += WG) out[oo + row * Dv + e] = (T)(acc[e] * inv);
}

// moe_gating_topk_softmax of token get_global_id(0): softmax over E, then K
// picks in (p descending, id ascending) order, each the best after the last.
__kernel void llm_moe_gating(__global const T* x, long xo, __global float* w, long wo, __global long* ids, long io,
                             long rows, long E, long K, int renormalize) {
  long t = get_global_id(0);
  if (t >= rows) return;
  __global const T* xr = x + xo + t * E;
  A m = -INFINITY, sum = 0;
  for (long e = 0; e < E; ++e) m = max(m, (A)xr[e]);
  for (long e = 0; e < E; ++e) sum += exp((A)xr[e] - m);
  A prev = INFINITY, picked = 0;
  long prev_id = -1;
  for (long j = 0; j < K; ++j) {
    A best = -INFINITY;
    long best_id = -1;
    for (long e = 0; e < E; ++e) {
      A pe = exp((A)xr[e] - m) / sum;
      bool after = pe < prev || (pe == prev && e > prev_id);
      if (after && (best_id < 0 || pe > best)) {
        best = pe;
        best_id = e;
      }
    }
    ids[io + t * K + j] = best_id;
    picked += best;
    prev = best;
    prev_id = best_id;
  }
  for (long j = 0; j < K; ++j) {
    long e = ids[io + t * K + j];
    A pe = e >= 0 ? exp((A)xr[e] - m) / sum : (A)NAN;  // no pick: NaN logits
    w[wo + t * K + j] = (float)(renormalize ? pe / picked : pe);
  }
}

// fused_moe, first half: h[t, j, i] = (T)(silu(W1_e·x_t)·(W3_e·x_t)) for
// e = ids[t, j], one item per (t, j, i).
__kernel void llm_moe_up(__global const T* x, long xo, __global const T* w13, long wo, __global const long* ids,
                         long io, __global T* hbuf, long rows, long K, long I, long H, __global const long* status) {
  long id = get_global_id(0);
  if (id >= rows * K * I || status[0] != 0) return;
  long i = id % I, tj = id / I, t = tj / K;
  long e = ids[io + tj];
  __global const T* xr = x + xo + t * H;
  __global const T* g = w13 + wo + (e * 2 * I + i) * H;
  __global const T* u = g + I * H;
  A gs = 0, us = 0;
  for (long c = 0; c < H; ++c) {
    A xv = (A)xr[c];
    gs += (A)g[c] * xv;
    us += (A)u[c] * xv;
  }
  hbuf[id] = (T)(gs / ((A)1 + exp(-gs)) * us);
}

// fused_moe, second half: out[t, n] = Σ_j w_j·(W2_e·h[t, j])[n], one item
// per (t, n); W = topk weights as A.
__kernel void llm_moe_down(__global const T* hbuf, __global const T* w2, long wo, __global const long* ids, long io,
                           __global const A* tw, long two, __global T* out, long oo, long rows, long K, long I,
                           long H, int renormalize, __global const long* status) {
  long id = get_global_id(0);
  if (id >= rows * H || status[0] != 0) return;
  long t = id / H, n = id % H;
  A total = 0;
  if (renormalize)
    for (long j = 0; j < K; ++j) total += tw[two + t * K + j];
  A acc = 0;
  for (long j = 0; j < K; ++j) {
    long e = ids[io + t * K + j];
    __global const T* wr = w2 + wo + (e * H + n) * I;
    __global const T* hr = hbuf + (t * K + j) * I;
    A d = 0;
    for (long i = 0; i < I; ++i) d += (A)wr[i] * (A)hr[i];
    A wj = tw[two + t * K + j];
    acc += (renormalize ? wj / total : wj) * d;
  }
  out[oo + id] = (T)acc;
}

// dynamic_quant of row get_group_id(0) of K: scale = (float)max|x| / 127,
// q = clamp(rint(x / scale), -127, 127) (rint: round half to even).
__kernel void llm_dynamic_quant(__global const T* x, long xo, __global char* q, long qo, __global float* sc, long sco,
                                long K) {
  __local A red[WG];
  long base = get_group_id(0) * K;
  int l = get_local_id(0);
  A amax = 0;
  for (long j = l; j < K; j += WG) amax = max(amax, fabs((A)x[xo + base + j]));
  amax = wg_max(amax, red);
  float s = (float)amax / 127.0f;
  if (l == 0) sc[sco + get_group_id(0)] = s;
  for (long j = l; j < K; j += WG) {
    A r = s == 0.0f ? (A)0 : rint((A)x[xo + base + j] / (A)s);
    q[qo + base + j] = (char)clamp(r, (A)-127, (A)127);
  }
}

// linear_w8a16: out[m, n] = sc[n]·Σ_k x[m, k]·w[n, k] + bias[n], one item
// per output element.
__kernel void llm_linear_w8a16(__global const T* x, long xo, __global const char* w, long wo, __global const A* sc,
                               long sco, __global const T* bias, long bo, __global T* out, long oo, long rows, long N,
                               long K) {
  long id = get_global_id(0);
  if (id >= rows * N) return;
  long m = id / N, n = id % N;
  __global const T* xr = x + xo + m * K;
  __global const char* wr = w + wo + n * K;
  A acc = 0;
  for (long k = 0; k < K; ++k) acc += (A)xr[k] * (A)wr[k];
  A y = sc[sco + n] * acc;
  if (bo >= 0) y += (A)bias[bo + n];
  out[oo + id] = (T)y;
}
