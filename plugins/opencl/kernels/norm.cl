
#define PARAM(p, po, i, dflt) ((po) >= 0 ? (A)(p)[(po) + (i)] : (A)(dflt))

// layer_norm (RMS 0) / rms_norm (RMS 1) of row get_group_id(0) of D elements.
__kernel void norm_forward(__global const T* x, long xo, __global const T* w, long wo, __global const T* b, long bo,
                           __global T* y, long yo, __global T* mean, long mo, __global T* rstd, long ro, long d,
                           A eps, int rms) {
  __local A red[WG];
  long r = get_group_id(0);
  int l = get_local_id(0);
  long base = r * d;
  A mu = 0;
  if (!rms) {
    A s = 0;
    for (long j = l; j < d; j += WG) s += (A)x[xo + base + j];
    s = wg_sum(s, red);
    mu = d == 0 ? (A)0 : s / (A)d;
  }
  A v = 0;
  for (long j = l; j < d; j += WG) { A t = (A)x[xo + base + j] - mu; v += t * t; }
  v = wg_sum(v, red);
  A rs = (A)1 / sqrt((d == 0 ? (A)0 : v / (A)d) + eps);
  for (long j = l; j < d; j += WG) {
    A bias = rms ? (A)0 : PARAM(b, bo, j, 0);
    y[yo + base + j] = (T)(((A)x[xo + base + j] - mu) * rs * PARAM(w, wo, j, 1) + bias);
  }
  if (l == 0) {
    if (!rms && mo >= 0) mean[mo + r] = (T)mu;
    if (ro >= 0) rstd[ro + r] = (T)rs;
  }
}

// grad_input of row get_group_id(0).
__kernel void norm_backward(__global const T* dy, long dyo, __global const T* x, long xo, __global const T* mean,
                            long mo, __global const T* rstd, long ro, __global const T* w, long wo, __global T* dx,
                            long dxo, long d, int rms) {
  __local A red[WG];
  long r = get_group_id(0);
  int l = get_local_id(0);
  long base = r * d;
  A mu = rms ? (A)0 : (A)mean[mo + r];
  A rs = (A)rstd[ro + r];
  A s1 = 0, s2 = 0;
  for (long j = l; j < d; j += WG) {
    A gw = (A)dy[dyo + base + j] * PARAM(w, wo, j, 1);
    s1 += gw;
    s2 += gw * ((A)x[xo + base + j] - mu) * rs;
  }
  s1 = rms ? (A)0 : wg_sum(s1, red);
  s2 = wg_sum(s2, red);
  A inv_n = d == 0 ? (A)0 : (A)1 / (A)d;
  s1 *= inv_n;
  s2 *= inv_n;
  for (long j = l; j < d; j += WG) {
    A xhat = ((A)x[xo + base + j] - mu) * rs;
    dx[dxo + base + j] = (T)(rs * ((A)dy[dyo + base + j] * PARAM(w, wo, j, 1) - s1 - xhat * s2));
  }
}

// grad_weight (and grad_bias) of feature get_global_id(0): sums over M rows.
__kernel void norm_param_grads(__global const T* dy, long dyo, __global const T* x, long xo, __global const T* mean,
                               long mo, __global const T* rstd, long ro, __global T* dw, long dwo, __global T* db,
                               long dbo, long m, long d, int rms) {
  long i = get_global_id(0);
  if (i >= d) return;
  A sw = 0, sb = 0;
  for (long r = 0; r < m; ++r) {
    A mu = rms ? (A)0 : (A)mean[mo + r];
    A g = (A)dy[dyo + r * d + i];
    sw += g * ((A)x[xo + r * d + i] - mu) * (A)rstd[ro + r];
    sb += g;
  }
  if (dwo >= 0) dw[dwo + i] = (T)sw;
  if (!rms && dbo >= 0) db[dbo + i] = (T)sb;
}

// group_norm of (sample, group) get_group_id(0): [N, C, HW] input.
__kernel void group_norm(__global const T* x, long xo, __global const T* w, long wo, __global const T* b, long bo,
                         __global T* y, long yo, __global T* mean, long mo, __global T* rstd, long ro, long C, long HW,
                         long G, A eps) {
  __local A red[WG];
  long ng = get_group_id(0);
  int l = get_local_id(0);
  long g = ng % G, cg = C / G, d = cg * HW, base = ng * d;
  A s = 0;
  for (long j = l; j < d; j += WG) s += (A)x[xo + base + j];
  s = wg_sum(s, red);
  A mu = d == 0 ? (A)0 : s / (A)d;
  A v = 0;
  for (long j = l; j < d; j += WG) { A t = (A)x[xo + base + j] - mu; v += t * t; }
  v = wg_sum(v, red);
  A rs = (A)1 / sqrt((d == 0 ? (A)0 : v / (A)d) + eps);
  for (long j = l; j < d; j += WG) {
    long ch = g * cg + j / HW;
    y[yo + base + j] = (T)(((A)x[xo + base + j] - mu) * rs * PARAM(w, wo, ch, 1) + PARAM(b, bo, ch, 0));
  }
  if (l == 0) {
    mean[mo + ng] = (T)mu;
    rstd[ro + ng] = (T)rs;
  }
}

// Per (sample, channel) get_group_id(0): ds = Σ dy·x, dbs = Σ dy over HW.
__kernel void gn_channel_sums(__global const T* dy, long dyo, __global const T* x, long xo, __global A* ds,
                              __global A* dbs, long HW) {
  __local A red[WG];
  long nc = get_group_id(0);
  int l = get_local_id(0);
  A a = 0, c = 0;
  for (long j = l; j < HW; j += WG) {
    A g = (A)dy[dyo + nc * HW + j];
    a += g * (A)x[xo + nc * HW + j];
    c += g;
  }
  a = wg_sum(a, red);
  c = wg_sum(c, red);
  if (l == 0) { ds[nc] = a; dbs[nc] = c; }
}

// grad_input of (sample, group) get_group_id(0).
__kernel void gn_input_grad(__global const T* dy, long dyo, __global const T* x, long xo, __global const T* mean,
                            long mo, __global const T* rstd, long ro, __global const T* w, long wo,
                            __global const A* ds, __global const A* dbs, __global T* dx, long dxo, long C, long HW,
                            long G) {
  long ng = get_group_id(0);
  int l = get_local_id(0);
  long g = ng % G, n = ng / G, cg = C / G, d = cg * HW, base = ng * d;
  A mu = (A)mean[mo + ng], rs = (A)rstd[ro + ng];
  A sw_db = 0, sw_ds = 0;
  for (long k = 0; k < cg; ++k) {
    long ch = g * cg + k;
    sw_db += PARAM(w, wo, ch, 1) * dbs[n * C + ch];
    sw_ds += PARAM(w, wo, ch, 1) * ds[n * C + ch];
  }
  A m1 = d == 0 ? (A)0 : sw_db / (A)d;
  A m2 = d == 0 ? (A)0 : rs * (sw_ds - mu * sw_db) / (A)d;
  A bias = -rs * m1 + rs * rs * mu * m2, sx = -rs * rs * m2;
  for (long j = l; j < d; j += WG) {
    long ch = g * cg + j / HW;
    dx[dxo + base + j] = (T)(rs * PARAM(w, wo, ch, 1) * (A)dy[dyo + base + j] + sx * (A)x[xo + base + j] + bias);
  }
}

// grad_weight, grad_bias of channel get_global_id(0).
__kernel void gn_param_grads(__global const T* mean, long mo, __global const T* rstd, long ro, __global const A* ds,
                             __global const A* dbs, __global T* dw, long dwo, __global T* db, long dbo, long N, long C,
                             long G) {
  long ch = get_global_id(0);
  if (ch >= C) return;
  long cg = C / G;
  A sw = 0, sb = 0;
  for (long n = 0; n < N; ++n) {
    long ng = n * G + ch / cg;
    sw += (A)rstd[ro + ng] * (ds[n * C + ch] - (A)mean[mo + ng] * dbs[n * C + ch]);
    sb += dbs[n * C + ch];
  }
  if (dwo >= 0) dw[dwo + ch] = (T)sw;
  if (dbo >= 0) db[dbo + ch] = (T)sb;
}

// batch_norm statistics of channel get_group_id(0) into stats (mean at ch,
// invstd at C + ch), the saved statistics and the running stats' update.
__kernel void bn_stats(__global const T* x, long xo, __global const T* rm, long rmo, __global const T* rv, long rvo,
                       __global A* stats, __global T* smean, long smo, __global T* sinv, long sio, __global T* rm_out,
                       long rmoo, __global T* rv_out, long rvoo, long N, long C, long HW, int training, A momentum,
                       A eps) {
  __local A red[WG];
  long ch = get_group_id(0);
  int l = get_local_id(0);
  long count = N * HW;
  if (!training) {
    if (l == 0) {
      A m = (A)rm[rmo + ch], v = (A)rv[rvo + ch];
      stats[ch] = m;
      stats[C + ch] = (A)1 / sqrt(v + eps);
      if (rmoo >= 0) rm_out[rmoo + ch] = (T)m;
      if (rvoo >= 0) rv_out[rvoo + ch] = (T)v;
    }
  } else {
    A s = 0;
    for (long i = l; i < count; i += WG) s += (A)x[xo + ((i / HW) * C + ch) * HW + i % HW];
    s = wg_sum(s, red);
    A mu = count == 0 ? (A)0 : s / (A)count;
    A v = 0;
    for (long i = l; i < count; i += WG) { A t = (A)x[xo + ((i / HW) * C + ch) * HW + i % HW] - mu; v += t * t; }
    v = wg_sum(v, red);
    if (l == 0) {
      A inv = count == 0 ? (A)0 : (A)1 / sqrt(v / (A)count + eps);
      stats[ch] = mu;
      stats[C + ch] = inv;
      if (smo >= 0) smean[smo + ch] = (T)mu;
      if (sio >= 0) sinv[sio + ch] = (T)inv;
      if (rmo >= 0) {
        A m0 = (A)rm[rmo + ch], v0 = (A)rv[rvo + ch];
        if (count > 0) {
          m0 = ((A)1 - momentum) * m0 + momentum * mu;
          v0 = ((A)1 - momentum) * v0 + momentum * v / (A)(count - 1);
        }
        if (rmoo >= 0) rm_out[rmoo + ch] = (T)m0;
        if (rvoo >= 0) rv_out[rvoo + ch] = (T)v0;
      }
    }
  }
}

// y = x·invstd·w + b - mean·invstd·w, one element per item.
__kernel void bn_apply(__global const T* x, long xo, __global const T* w, long wo, __global const T* b, long bo,
                       __global const A* stats, __global T* y, long yo, long total, long C, long HW) {
  long i = get_global_id(0);
  if (i >= total) return;
  long ch = (i / HW) % C;
  A inv = stats[C + ch], wv = PARAM(w, wo, ch, 1);
  A scale = inv * wv, shift = PARAM(b, bo, ch, 0) - stats[ch] * inv * wv;
  y[yo + i] = (T)((A)x[xo + i] * scale + shift);
}

// batch_norm_backward of channel get_group_id(0).
__kernel void bn_backward(__global const T* dy, long dyo, __global const T* x, long xo, __global const T* w, long wo,
                          __global const T* mean, long mo, __global const T* inv, long io, __global T* dx, long dxo,
                          __global T* dw, long dwo, __global T* db, long dbo, long N, long C, long HW, int training,
                          A eps) {
  __local A red[WG];
  long ch = get_group_id(0);
  int l = get_local_id(0);
  long count = N * HW;
  A mu = (A)mean[mo + ch];
  A rs = training ? (A)inv[io + ch] : (A)1 / sqrt((A)inv[io + ch] + eps);
  A sdy = 0, sdyx = 0;
  for (long i = l; i < count; i += WG) {
    long k = ((i / HW) * C + ch) * HW + i % HW;
    A g = (A)dy[dyo + k];
    sdy += g;
    sdyx += g * ((A)x[xo + k] - mu);
  }
  sdy = wg_sum(sdy, red);
  sdyx = wg_sum(sdyx, red);
  if (l == 0) {
    if (dbo >= 0) db[dbo + ch] = (T)sdy;
    if (dwo >= 0) dw[dwo + ch] = (T)(sdyx * rs);
  }
  A a = rs * PARAM(w, wo, ch, 1), m = 0, kk = 0;
  if (training && count > 0) {
    m = sdy / (A)count;
    kk = rs * rs * sdyx / (A)count;
  }
  for (long i = l; i < count; i += WG) {
    long k = ((i / HW) * C + ch) * HW + i % HW;
    dx[dxo + k] = (T)(a * ((A)dy[dyo + k] - m - kk * ((A)x[xo + k] - mu)));
  }
}
