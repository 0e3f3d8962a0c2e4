
// Score of query row ROW = b * L + i with key j: scaled dot product plus
// mask, -inf when masked out.
A score(__global const T* q, long qo, __global const T* k, long ko, __global const A* mask, int has_mask, long row,
        long b, long i, long j, long S, long E, A scale, int causal) {
  if (causal && j > i) return -INFINITY;
  A d = 0;
  for (long e = 0; e < E; ++e) d += (A)q[qo + row * E + e] * (A)k[ko + (b * S + j) * E + e];
  d *= scale;
  if (has_mask) d += mask[row * S + j];
  return d;
}

__kernel void attn_forward(__global const T* q, long qo, __global const T* k, long ko, __global const T* v, long vo,
                           __global const A* mask, int has_mask, __global A* P, __global T* out, long oo,
                           __global T* lse, long lo, long L, long S, long E, long Ev, A scale, int causal) {
  __local A red[WG];
  long row = get_group_id(0), b = row / L, i = row % L;
  int l = get_local_id(0);
  __global A* pr = P + row * S;
  A m = -INFINITY;
  for (long j = l; j < S; j += WG) {
    A s = score(q, qo, k, ko, mask, has_mask, row, b, i, j, S, E, scale, causal);
    pr[j] = s;
    m = s > m ? s : m;
  }
  m = wg_max(m, red);
  A sum = 0;
  for (long j = l; j < S; j += WG) {
    A p = m == -INFINITY ? (A)0 : exp(pr[j] - m);
    pr[j] = p;
    sum += p;
  }
  sum = wg_sum(sum, red);
  barrier(CLK_GLOBAL_MEM_FENCE);
  A inv = sum > 0 ? (A)1 / sum : (A)0;
  for (long e = l; e < Ev; e += WG) {
    A acc = 0;
    for (long j = 0; j < S; ++j) acc += pr[j] * (A)v[vo + (b * S + j) * Ev + e];
    out[oo + row * Ev + e] = (T)(acc * inv);
  }
  if (l == 0 && lo >= 0) lse[lo + row] = sum > 0 ? (T)(m + log(sum)) : (T)(-INFINITY);
}

// Query row get_group_id(0): P, dS = P·(dout·vᵀ - D) into scratch, grad_query.
__kernel void attn_backward_rows(__global const T* dout, long doo, __global const T* q, long qo,
                                 __global const T* k, long ko, __global const T* v, long vo, __global const T* o,
                                 long oo, __global const T* lse, long lso, __global const A* mask, int has_mask,
                                 __global A* P, __global A* dS, __global T* dq, long dqo, long L, long S, long E,
                                 long Ev, A scale, int causal) {
  __local A red[WG];
  long row = get_group_id(0), b = row / L, i = row % L;
  int l = get_local_id(0);
  A D = 0;
  for (long e = l; e < Ev; e += WG) D += (A)dout[doo + row * Ev + e] * (A)o[oo + row * Ev + e];
  D = wg_sum(D, red);
  A ls = (A)lse[lso + row];
  for (long j = l; j < S; j += WG) {
    A s = score(q, qo, k, ko, mask, has_mask, row, b, i, j, S, E, scale, causal);
    A p = (s == -INFINITY || ls == -INFINITY) ? (A)0 : exp(s - ls);
    A ds = 0;
    if (p != (A)0) {
      A dp = 0;
      for (long e = 0; e < Ev; ++e) dp += (A)dout[doo + row * Ev + e] * (A)v[vo + (b * S + j) * Ev + e];
      ds = p * (dp - D);
    }
    P[row * S + j] = p;
    dS[row * S + j] = ds;
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (long e = l; e < E; e += WG) {
    A acc = 0;
    for (long j = 0; j < S; ++j) acc += dS[row * S + j] * (A)k[ko + (b * S + j) * E + e];
    dq[dqo + row * E + e] = (T)(acc * scale);
  }
}

// Key row get_group_id(0) = b * S + j: grad_key, grad_value.
__kernel void attn_backward_keys(__global const T* dout, long doo, __global const T* q, long qo,
                                 __global const A* P, __global const A* dS, __global T* dk, long dko, __global T* dv,
                                 long dvo, long L, long S, long E, long Ev, A scale) {
  long key = get_group_id(0), b = key / S, j = key % S;
  int l = get_local_id(0);
  for (long e = l; e < E; e += WG) {
    A acc = 0;
    for (long i = 0; i < L; ++i) acc += dS[(b * L + i) * S + j] * (A)q[qo + (b * L + i) * E + e];
    dk[dko + key * E + e] = (T)(acc * scale);
  }
  for (long e = l; e < Ev; e += WG) {
    A acc = 0;
    for (long i = 0; i < L; ++i) acc += P[(b * L + i) * S + j] * (A)dout[doo + (b * L + i) * Ev + e];
    dv[dvo + key * Ev + e] = (T)acc;
  }
}
