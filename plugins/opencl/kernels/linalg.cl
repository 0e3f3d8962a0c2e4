
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
typedef struct { long v[4]; } v4_t;
typedef struct { long n, c, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw; } conv_t;
typedef struct { long n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, include_pad, divisor; } pool_t;

#define LX (TN / WN)
#define LY (TM / WM)

// C[b, i, j] = alpha * sum_k A[b, i, k] B[b, k, j] (+ beta * S[b, i, j] when
// s_off >= 0). Column j of C and S is at (j / cw) * cs2 + (j % cw) * cs.
// Work-item (lx, ly) computes rows ly*WM.. and the WN consecutive columns
// lx*WN.. of the tile as WM vectors of WN (PoCL runs each work-item as
// SIMD code of that width).
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VLOAD CAT(vload, WN)
#define VSTORE CAT(vstore, WN)
__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm(__global const T* A, long a_off, long a_bs, long a_rs, long a_cs,
          __global const T* B, long b_off, long b_bs, long b_rs, long b_cs,
          __global T* Cm, long c_off, long c_bs, long c_rs, long c_cs, long c_cs2,
          __global const T* S, long s_off, long s_bs, long s_rs, long s_cs, long s_cs2,
          long cw, long M, long N, long K, T alpha, T beta) {
  __local T As[TK][TM];
  __local T Bs[TK][TN];
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int tid = ly * LX + lx;
  const long j0 = (long)get_group_id(0) * TN, i0 = (long)get_group_id(1) * TM;
  const long bt = get_global_id(2);
  A += a_off + bt * a_bs;
  B += b_off + bt * b_bs;
  VT acc[WM];
  for (int r = 0; r < WM; ++r) acc[r] = (VT)0;
  for (long k0 = 0; k0 < K; k0 += TK) {
    for (int e = tid; e < TM * TK; e += LX * LY) {
      int ii = e / TK, kk = e % TK;
      long gi = i0 + ii, gk = k0 + kk;
      As[kk][ii] = (gi < M && gk < K) ? A[gi * a_rs + gk * a_cs] : (T)0;
    }
    for (int e = tid; e < TK * TN; e += LX * LY) {
      int kk = e / TN, jj = e % TN;
      long gk = k0 + kk, gj = j0 + jj;
      Bs[kk][jj] = (gk < K && gj < N) ? B[gk * b_rs + gj * b_cs] : (T)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < TK; ++kk) {
      VT bv = VLOAD(0, &Bs[kk][lx * WN]);
      for (int r = 0; r < WM; ++r) acc[r] += As[kk][ly * WM + r] * bv;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = 0; r < WM; ++r) {
    long i = i0 + ly * WM + r;
    if (i >= M) continue;
    T out[WN];
    VSTORE(acc[r], 0, out);
    for (int c = 0; c < WN; ++c) {
      long j = j0 + lx * WN + c;
      if (j >= N) continue;
      long jh = j / cw, jl = j - jh * cw;
      T v = alpha * out[c];
      if (s_off >= 0) v += beta * S[s_off + bt * s_bs + i * s_rs + jh * s_cs2 + jl * s_cs];
      Cm[c_off + bt * c_bs + i * c_rs + jh * c_cs2 + jl * c_cs] = v;
    }
  }
}

// dst[idx] = src[idx] over a rank-RANK shape, each side with its strides.
__kernel void copy_nd(__global T* dst, long d_off, __global const T* src, long s_off, long n, int rank, dims_t sz,
                      dims_t dst_st, dims_t src_st) {
  long i = get_global_id(0);
  if (i >= n) return;
  long od = d_off, os = s_off, rest = i;
  for (int d = rank - 1; d >= 0; --d) {
    long c = rest % sz.v[d];
    rest /= sz.v[d];
    od += c * dst_st.v[d];
    os += c * src_st.v[d];
  }
  dst[od] = src[os];
}

// col[((c * kh + ki) * kw + kj) * n + b][oh * ow] = x[b, c, (window)] (0 in
// the padding), for the convolution G.
__kernel void im2col(__global T* col, __global const T* x, long x_off, v4_t xs, conv_t g, long total) {
  long i = get_global_id(0);
  if (i >= total) return;
  long P = g.oh * g.ow;
  long p = i % P, r = i / P;
  long b = r % g.n;
  r /= g.n;
  long kj = r % g.kw;
  r /= g.kw;
  long ki = r % g.kh, c = r / g.kh;
  long oh = p / g.ow, ow = p % g.ow;
  long ih = oh * g.sh - g.ph + ki * g.dh, iw = ow * g.sw - g.pw + kj * g.dw;
  col[i] = (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)
               ? x[x_off + b * xs.v[0] + c * xs.v[1] + ih * xs.v[2] + iw * xs.v[3]] : (T)0;
}

// x[b, c, ih, iw] = bias[c] + the sum of the col entries (im2col's layout)
// that read (ih, iw): the convolution's gradient for its input.
__kernel void col2im(__global T* x, long x_off, v4_t xs, __global const T* col, __global const T* bias, long b_off,
                     long b_st, conv_t g, long total) {
  long i = get_global_id(0);
  if (i >= total) return;
  long iw = i % g.w, r = i / g.w;
  long ih = r % g.h;
  r /= g.h;
  long c = r % g.c, b = r / g.c;
  long P = g.oh * g.ow;
  T acc = b_off >= 0 ? bias[b_off + c * b_st] : (T)0;
  for (long ki = 0; ki < g.kh; ++ki) {
    long th = ih + g.ph - ki * g.dh;
    if (th < 0 || th % g.sh != 0 || th / g.sh >= g.oh) continue;
    for (long kj = 0; kj < g.kw; ++kj) {
      long tw = iw + g.pw - kj * g.dw;
      if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.ow) continue;
      acc += col[(((c * g.kh + ki) * g.kw + kj) * g.n + b) * P + (th / g.sh) * g.ow + tw / g.sw];
    }
  }
  x[x_off + b * xs.v[0] + c * xs.v[1] + ih * xs.v[2] + iw * xs.v[3]] = acc;
}

// out[c] = sum over (b, h, w) of x[b, c, h, w] (a bias gradient).
__kernel void channel_sums(__global T* out, long o_off, long o_st, __global const T* x, long x_off, v4_t xs,
                           v4_t sz) {
  long c = get_global_id(0);
  if (c >= sz.v[1]) return;
  T acc = (T)0;
  for (long b = 0; b < sz.v[0]; ++b)
    for (long h = 0; h < sz.v[2]; ++h)
      for (long w = 0; w < sz.v[3]; ++w) acc += x[x_off + b * xs.v[0] + c * xs.v[1] + h * xs.v[2] + w * xs.v[3]];
  out[o_off + c * o_st] = acc;
}

#define AT(base, s, b, c, h, w) ((base) + (b) * (s).v[0] + (c) * (s).v[1] + (h) * (s).v[2] + (w) * (s).v[3])
#define OUT_INDEX \
  long i = get_global_id(0); \
  if (i >= total) return; \
  long ow = i % g.ow, r = i / g.ow; \
  long oh = r % g.oh; \
  r /= g.oh; \
  long c = r % g.c, b = r / g.c;

__kernel void max_pool(__global T* y, long y_off, v4_t ys, __global long* ind, long i_off, v4_t is,
                       __global const T* x, long x_off, v4_t xs, pool_t g, long total) {
  OUT_INDEX
  T best = -(T)INFINITY;
  long arg = -1;
  for (long ki = 0; ki < g.kh; ++ki) {
    long ih = oh * g.sh - g.ph + ki * g.dh;
    if (ih < 0 || ih >= g.h) continue;
    for (long kj = 0; kj < g.kw; ++kj) {
      long iw = ow * g.sw - g.pw + kj * g.dw;
      if (iw < 0 || iw >= g.w) continue;
      T v = x[AT(x_off, xs, b, c, ih, iw)];
      if (arg < 0 || v > best || isnan(v)) {  // NaN wins
        best = v;
        arg = ih * g.w + iw;
      }
    }
  }
  y[AT(y_off, ys, b, c, oh, ow)] = best;
  ind[AT(i_off, is, b, c, oh, ow)] = arg;
}

// Reports the first index outside [0, bound) (nothing is written then).
__kernel void index_guard(__global const long* ind, long i_off, v4_t is, pool_t g, long bound,
                          __global long* status, long site, long total) {
  OUT_INDEX
  long v = ind[AT(i_off, is, b, c, oh, ow)];
  if (v < 0 || v >= bound) {
    if (atom_cmpxchg((volatile __global long*)status, 0L, 1L) == 0L) {
      status[1] = site;
      status[2] = v;
      status[3] = bound;
    }
  }
}

// One work-item per (b, c) plane of gx: zeroes it, then adds every gy at
// its index.
__kernel void max_pool_backward(__global T* gx, long x_off, v4_t xs, __global const T* gy, long y_off, v4_t ys,
                                __global const long* ind, long i_off, v4_t is, pool_t g,
                                __global const long* status) {
  long i = get_global_id(0);
  if (i >= g.n * g.c || status[0] != 0) return;
  long c = i % g.c, b = i / g.c;
  for (long h = 0; h < g.h; ++h)
    for (long w = 0; w < g.w; ++w) gx[AT(x_off, xs, b, c, h, w)] = (T)0;
  for (long oh = 0; oh < g.oh; ++oh)
    for (long ow = 0; ow < g.ow; ++ow) {
      long k = ind[AT(i_off, is, b, c, oh, ow)];
      gx[AT(x_off, xs, b, c, k / g.w, k % g.w)] += gy[AT(y_off, ys, b, c, oh, ow)];
    }
}

// avg_pool2d's window of output (oh, ow), clipped to the input, and its
// divisor (PyTorch's rule); false when empty.
bool avg_window(pool_t g, long oh, long ow, long* h0, long* h1, long* w0, long* w1, long* div) {
  long a = oh * g.sh - g.ph, e = ow * g.sw - g.pw;
  long a1 = min(a + g.kh, g.h + g.ph), e1 = min(e + g.kw, g.w + g.pw);
  long padded = (a1 - a) * (e1 - e);
  *h0 = max(a, 0L);
  *w0 = max(e, 0L);
  *h1 = min(a1, g.h);
  *w1 = min(e1, g.w);
  *div = g.divisor ? g.divisor : g.include_pad ? padded : (*h1 - *h0) * (*w1 - *w0);
  return *h0 < *h1 && *w0 < *w1;
}

__kernel void avg_pool(__global T* y, long y_off, v4_t ys, __global const T* x, long x_off, v4_t xs, pool_t g,
                       long total) {
  OUT_INDEX
  long h0, h1, w0, w1, div;
  T sum = (T)0;
  bool any = avg_window(g, oh, ow, &h0, &h1, &w0, &w1, &div);
  for (long ih = h0; ih < h1; ++ih)
    for (long iw = w0; iw < w1; ++iw) sum += x[AT(x_off, xs, b, c, ih, iw)];
  y[AT(y_off, ys, b, c, oh, ow)] = any ? sum / (T)div : (T)0;
}

__kernel void avg_pool_backward(__global T* gx, long x_off, v4_t xs, __global const T* gy, long y_off, v4_t ys,
                                pool_t g) {
  long i = get_global_id(0);
  if (i >= g.n * g.c) return;
  long c = i % g.c, b = i / g.c;
  for (long h = 0; h < g.h; ++h)
    for (long w = 0; w < g.w; ++w) gx[AT(x_off, xs, b, c, h, w)] = (T)0;
  for (long oh = 0; oh < g.oh; ++oh)
    for (long ow = 0; ow < g.ow; ++ow) {
      long h0, h1, w0, w1, div;
      if (!avg_window(g, oh, ow, &h0, &h1, &w0, &w1, &div)) continue;
      T v = gy[AT(y_off, ys, b, c, oh, ow)] / (T)div;
      for (long ih = h0; ih < h1; ++ih)
        for (long iw = w0; iw < w1; ++iw) gx[AT(x_off, xs, b, c, ih, iw)] += v;
    }
}

// Adaptive windows: output o of SIZE over IN spans [o*in/size, ceil((o+1)*in/size)).
__kernel void adaptive_avg_pool(__global T* y, long y_off, v4_t ys, __global const T* x, long x_off, v4_t xs,
                                pool_t g, long total) {
  OUT_INDEX
  long h0 = oh * g.h / g.oh, h1 = ((oh + 1) * g.h + g.oh - 1) / g.oh;
  long w0 = ow * g.w / g.ow, w1 = ((ow + 1) * g.w + g.ow - 1) / g.ow;
  T sum = (T)0;
  for (long ih = h0; ih < h1; ++ih)
    for (long iw = w0; iw < w1; ++iw) sum += x[AT(x_off, xs, b, c, ih, iw)];
  y[AT(y_off, ys, b, c, oh, ow)] = sum / (T)((h1 - h0) * (w1 - w0));
}

__kernel void adaptive_avg_pool_backward(__global T* gx, long x_off, v4_t xs, __global const T* gy, long y_off,
                                         v4_t ys, pool_t g) {
  long i = get_global_id(0);
  if (i >= g.n * g.c) return;
  long c = i % g.c, b = i / g.c;
  for (long h = 0; h < g.h; ++h)
    for (long w = 0; w < g.w; ++w) gx[AT(x_off, xs, b, c, h, w)] = (T)0;
  for (long oh = 0; oh < g.oh; ++oh) {
    long h0 = oh * g.h / g.oh, h1 = ((oh + 1) * g.h + g.oh - 1) / g.oh;
    for (long ow = 0; ow < g.ow; ++ow) {
      long w0 = ow * g.w / g.ow, w1 = ((ow + 1) * g.w + g.ow - 1) / g.ow;
      T v = gy[AT(y_off, ys, b, c, oh, ow)] / (T)((h1 - h0) * (w1 - w0));
      for (long ih = h0; ih < h1; ++ih)
        for (long iw = w0; iw < w1; ++iw) gx[AT(x_off, xs, b, c, ih, iw)] += v;
    }
  }
}
