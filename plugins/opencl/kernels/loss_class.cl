
#define PARAM(p, po, i, dflt) ((po) >= 0 ? (A)(p)[(po) + (i)] : (A)(dflt))

// The lowest position whose target is neither in [0, C) nor IGNORE goes to
// the status words (value: the target, position: its position).
__kernel void check_targets(__global const long* t, long to, long P, long C, long ignore, __global long* status,
                            long kind, long site) {
  __local long red[WG];
  int l = get_local_id(0);
  long bad = P;
  for (long p = l; p < P; p += WG) {
    long v = t[to + p];
    if ((v < 0 || v >= C) && v != ignore) { bad = p; break; }
  }
  red[l] = bad;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w >>= 1) {
    if (l < w && red[l + w] < red[l]) red[l] = red[l + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0 && red[0] < P && status[0] == 0) {
    status[0] = kind;
    status[1] = site;
    status[2] = t[to + red[0]];
    status[3] = red[0];
  }
}

// Loss of position get_group_id(0) of input [N, C, D] (class k of position p
// at (p / D) * C * D + k * D + p % D): to out (REDUCE 0) or to loss / wsel
// (the position's loss and target weight, for a reduction).
__kernel void class_loss(__global const T* x, long xo, __global const long* t, long to, __global const T* w, long wo,
                         __global T* out, long oo, __global A* loss, __global A* wsel, long C, long D, long ignore,
                         A smoothing, int logits, int reduce, __global const long* status) {
  __local A red[WG];
  int bad = status[0] != 0;  // (no return before the reductions: PoCL wants every item at a barrier)
  long p = get_group_id(0);
  int l = get_local_id(0);
  long tc = t[to + p];
  long base = xo + (p / D) * C * D + p % D;
  A val = 0, wt = 0;
  if (!bad && tc != ignore) {
    // log-probability = (x - m) - log_s, as PyTorch: x - (m + log(s)) would
    // round m + log(s) at m's magnitude first. Input log-probabilities: m = log_s = 0.
    A m = 0, log_s = 0;
    if (logits) {
      m = -INFINITY;
      for (long k = l; k < C; k += WG) { A v = (A)x[base + k * D]; m = v > m ? v : m; }
      m = wg_max(m, red);
      A s = 0;
      for (long k = l; k < C; k += WG) s += exp((A)x[base + k * D] - m);
      s = wg_sum(s, red);
      log_s = log(s);
    }
    wt = PARAM(w, wo, tc, 1);
    A nll = -wt * (((A)x[base + tc * D] - m) - log_s);
    A smooth = 0;
    if (smoothing > 0) {
      for (long k = l; k < C; k += WG) smooth -= PARAM(w, wo, k, 1) * (((A)x[base + k * D] - m) - log_s);
      smooth = wg_sum(smooth, red);
    }
    val = ((A)1 - smoothing) * nll + smoothing / (A)C * smooth;
  }
  if (l != 0 || bad) return;
  if (reduce) {
    loss[p] = val;
    wsel[p] = wt;
  } else {
    out[oo + p] = (T)val;
  }
}

// dn[0] = Σ w[t] over the non-ignored targets, dn[1] = Σ w (one work-group).
__kernel void class_denom(__global const long* t, long to, __global const T* w, long wo, long P, long C, long ignore,
                          __global A* dn, __global const long* status) {
  __local A red[WG];
  int bad = status[0] != 0;
  int l = get_local_id(0);
  A a = 0, b = 0;
  for (long p = l; p < P && !bad; p += WG) {
    long tc = t[to + p];
    if (tc != ignore) a += PARAM(w, wo, tc, 1);
  }
  for (long k = l; k < C; k += WG) b += PARAM(w, wo, k, 1);
  a = wg_sum(a, red);
  b = wg_sum(b, red);
  if (l == 0 && !bad) { dn[0] = a; dn[1] = b; }
}

// grad_input of position get_group_id(0). No early return: every item
// reaches the work-group reductions.
__kernel void class_loss_backward(__global const T* g, long go, __global const T* x, long xo, __global const long* t,
                                  long to, __global const T* w, long wo, __global T* dx, long dxo,
                                  __global const A* dn, long C, long D, long ignore, A smoothing, int logits,
                                  int reduction, __global const long* status) {
  __local A red[WG];
  int bad = status[0] != 0;
  long p = get_group_id(0);
  int l = get_local_id(0);
  long tc = t[to + p];
  int skip = bad || tc == ignore;
  long rel = (p / D) * C * D + p % D;
  A m = -INFINITY, s = 0;
  if (logits) {
    for (long k = l; k < C; k += WG) { A v = (A)x[xo + rel + k * D]; m = v > m ? v : m; }
    m = wg_max(m, red);
    for (long k = l; k < C; k += WG) s += exp((A)x[xo + rel + k * D] - m);
    s = wg_sum(s, red);
  }
  if (bad) return;
  if (skip) {
    for (long k = l; k < C; k += WG) dx[dxo + rel + k * D] = (T)0;
    return;
  }
  A sc = reduction == 0 ? (A)g[go + p] : reduction == 1 ? (A)g[go] / dn[0] : (A)g[go];
  A wtc = PARAM(w, wo, tc, 1);
  if (!logits) {
    for (long k = l; k < C; k += WG) dx[dxo + rel + k * D] = (T)(k == tc ? -wtc * sc : (A)0);
    return;
  }
  A inv = (A)1 / s;
  A wt = ((A)1 - smoothing) * wtc, ws = smoothing / (A)C * dn[1], ec = smoothing / (A)C;
  for (long k = l; k < C; k += WG) {
    A prob = exp((A)x[xo + rel + k * D] - m) * inv;
    A v = sc * ((wt + ws) * prob - ec * PARAM(w, wo, k, 1));
    if (k == tc) v -= sc * wt;
    dx[dxo + rel + k * D] = (T)v;
  }
}
