// The "factorization" group's kernels (ops/factorization.cc): Cholesky, LU
// with partial pivoting and triangular solves, as sdk/catalog/ops/
// factorization.toml. Prepended: T, A (nn::row_prelude). Operands are dense
// row-major; each work item owns one matrix (one right-hand side for the
// solve) and computes in A, in place in its output.

// One matrix of self [n, n] per item: its Cholesky factor into l, its info
// into info (0, or the order of the first minor that is not positive).
__kernel void factor_cholesky(__global const T* a, long ao, __global T* l, long lo, __global int* info, long io,
                              long batch, long n, int upper) {
  long b = get_global_id(0);
  if (b >= batch) return;
  __global const T* s = a + ao + b * n * n;
  __global T* f = l + lo + b * n * n;
  // The lower triangle of the symmetric matrix the chosen triangle describes.
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) f[i * n + j] = j <= i ? (upper ? s[j * n + i] : s[i * n + j]) : (T)0;
  int failed = 0;
  for (long j = 0; j < n && !failed; ++j) {
    A d = (A)f[j * n + j];
    for (long k = 0; k < j; ++k) d -= (A)f[j * n + k] * (A)f[j * n + k];
    if (!(d > (A)0)) {
      failed = (int)(j + 1);
      break;
    }
    A r = sqrt(d);
    f[j * n + j] = (T)r;
    for (long i = j + 1; i < n; ++i) {
      A v = (A)f[i * n + j];
      for (long k = 0; k < j; ++k) v -= (A)f[i * n + k] * (A)f[j * n + k];
      f[i * n + j] = (T)(v / r);
    }
  }
  if (upper)
    for (long i = 0; i < n; ++i)
      for (long j = i + 1; j < n; ++j) {
        f[i * n + j] = f[j * n + i];
        f[j * n + i] = (T)0;
      }
  info[io + b] = failed;
}

// One matrix of self [m, n] per item: LU (Doolittle, partial pivoting with
// the first largest |value|, LAPACK's getf2) into lu, 1-based pivots [k].
__kernel void factor_lu(__global const T* a, long ao, __global T* lu, long luo, __global int* piv, long po,
                        __global int* info, long io, long batch, long m, long n) {
  long b = get_global_id(0);
  if (b >= batch) return;
  long k = min(m, n);
  __global const T* src = a + ao + b * m * n;
  __global T* u = lu + luo + b * m * n;
  for (long e = 0; e < m * n; ++e) u[e] = src[e];
  int failed = 0;
  for (long j = 0; j < k; ++j) {
    long p = j;
    A best = fabs((A)u[j * n + j]);
    for (long i = j + 1; i < m; ++i) {
      A v = fabs((A)u[i * n + j]);
      if (v > best) {
        best = v;
        p = i;
      }
    }
    piv[po + b * k + j] = (int)(p + 1);
    if (p != j)
      for (long c = 0; c < n; ++c) {
        T t = u[j * n + c];
        u[j * n + c] = u[p * n + c];
        u[p * n + c] = t;
      }
    A pivot = (A)u[j * n + j];
    if (pivot == (A)0) {
      if (!failed) failed = (int)(j + 1);
      continue;
    }
    for (long i = j + 1; i < m; ++i) {
      A mult = (A)u[i * n + j] / pivot;
      u[i * n + j] = (T)mult;
      for (long c = j + 1; c < n; ++c) u[i * n + c] = (T)((A)u[i * n + c] - mult * (A)u[j * n + c]);
    }
  }
  info[io + b] = failed;
}

// The offset, in matrices, of output matrix BI in an operand whose batch
// strides (in matrices, 0 where it broadcasts) are STRIDES over the output's
// batch dims DIMS (innermost last; unused dims are 1).
long factor_broadcast(long bi, long8 dims, long8 strides) {
  long off = 0;
  long d[8] = {dims.s0, dims.s1, dims.s2, dims.s3, dims.s4, dims.s5, dims.s6, dims.s7};
  long s[8] = {strides.s0, strides.s1, strides.s2, strides.s3, strides.s4, strides.s5, strides.s6, strides.s7};
  for (int i = 7; i >= 0; --i) {
    off += (bi % d[i]) * s[i];
    bi /= d[i];
  }
  return off;
}

// X with A·X = B (left) or X·A = B: one item per (matrix, right-hand side),
// a column of B [n, r] when left, a row of B [r, n] otherwise.
__kernel void factor_solve_triangular(__global const T* a, long ao, __global const T* bm, long bo, __global T* x,
                                      long xo, long batch, long n, long r, int upper, int left, int unit, long8 dims,
                                      long8 a_strides, long8 b_strides) {
  long id = get_global_id(0);
  if (id >= batch * r) return;
  long bi = id / r, v = id % r;
  __global const T* am = a + ao + factor_broadcast(bi, dims, a_strides) * n * n;
  __global const T* bb = bm + bo + factor_broadcast(bi, dims, b_strides) * n * r;
  __global T* xm = x + xo + bi * n * r;
  // Element i of the vector: column v of [n, r] (left) or row v of [r, n].
  long step = left ? r : 1, base = left ? v : v * n;
  // X·A = B is Aᵀ·xᵀ = bᵀ: the transposed A, whose upper triangle is A's lower.
  int up = left ? upper : !upper;
  for (long s = 0; s < n; ++s) {
    long i = up ? n - 1 - s : s;
    A acc = (A)bb[base + i * step];
    long k0 = up ? i + 1 : 0, k1 = up ? n : i;
    for (long k = k0; k < k1; ++k) {
      A aik = left ? (A)am[i * n + k] : (A)am[k * n + i];
      acc -= aik * (A)xm[base + k * step];
    }
    xm[base + i * step] = (T)(unit ? acc : acc / (A)am[i * n + i]);
  }
}
