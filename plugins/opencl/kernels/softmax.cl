
// Row r of the [outer, n, inner] view: elements base + j * inner.
__kernel void softmax(__global const T* x, long xo, __global T* y, long yo, long n, long inner, int log_mode) {
  __local A red[WG];
  long r = get_group_id(0);
  int l = get_local_id(0);
  long base = (r / inner) * n * inner + r % inner;
  A m = -INFINITY;
  for (long j = l; j < n; j += WG) { A v = (A)x[xo + base + j * inner]; m = v > m ? v : m; }
  m = wg_max(m, red);
  A s = 0;
  for (long j = l; j < n; j += WG) s += exp((A)x[xo + base + j * inner] - m);
  s = wg_sum(s, red);
  if (log_mode) {
    // (x - m) - log(s), as PyTorch: m + log(s) would round at m's magnitude first.
    A log_s = log(s);
    for (long j = l; j < n; j += WG) y[yo + base + j * inner] = (T)(((A)x[xo + base + j * inner] - m) - log_s);
  } else {
    A inv = (A)1 / s;
    for (long j = l; j < n; j += WG) y[yo + base + j * inner] = (T)(exp((A)x[xo + base + j * inner] - m) * inv);
  }
}
// softmax: gi = y·(g - Σ g·y); log_softmax: gi = g - exp(y)·Σ g.
__kernel void softmax_backward(__global const T* g, long go, __global const T* y, long yo, __global T* gi, long gio,
                               long n, long inner, int log_mode) {
  __local A red[WG];
  long r = get_group_id(0);
  int l = get_local_id(0);
  long base = (r / inner) * n * inner + r % inner;
  A s = 0;
  for (long j = l; j < n; j += WG) {
    long k = base + j * inner;
    s += log_mode ? (A)g[go + k] : (A)g[go + k] * (A)y[yo + k];
  }
  s = wg_sum(s, red);
  for (long j = l; j < n; j += WG) {
    long k = base + j * inner;
    A gv = (A)g[go + k], yv = (A)y[yo + k];
    gi[gio + k] = (T)(log_mode ? gv - exp(yv) * s : yv * (gv - s));
  }
}
