
#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
typedef struct { long v[8]; } dims_t;
#define EPB (WIDE ? 2 : 4)

// u[k] in [0, 1) of element EPB·B + k: the SDK's mapping (24 bits: the
// float32 ops' uniforms; float64 takes 53 bits of two words).
void block_uniforms(ulong seed, ulong offset, long b, double* u) {
  hal_philox_block_uniforms(seed, offset, (ulong)b, WIDE, 24, u);
}

// Element offset of row-major position I of a tensor (SZ, ST, OFF).
long at(long i, int rank, dims_t sz, dims_t st, long off) {
  for (int d = rank - 1; d >= 0; --d) { off += i % sz.v[d] * st.v[d]; i /= sz.v[d]; }
  return off;
}

__kernel void uniform(__global T* out, long off, long n, int rank, dims_t sz, dims_t st, ulong seed, ulong offset,
                      T lo, T span) {
  long b = get_global_id(0);
  if (b * EPB >= n) return;
  double u[4];
  block_uniforms(seed, offset, b, u);
  for (int k = 0; k < EPB; ++k) {
    long e = b * EPB + k;
    if (e < n) out[at(e, rank, sz, st, off)] = lo + span * (T)u[k];
  }
}

__kernel void normal(__global T* out, long off, long n, int rank, dims_t sz, dims_t st, ulong seed, ulong offset,
                     T mean, T sd) {
  long b = get_global_id(0);
  if (b * EPB >= n) return;
  double u[4];
  block_uniforms(seed, offset, b, u);
  for (int k = 0; k < EPB; k += 2) {
    T u1 = (T)(1.0 - u[k]), u2 = (T)u[k + 1];
    T r = sqrt((T)-2 * log(u1));
    T cs = cospi((T)2 * u2), sn = sinpi((T)2 * u2);
    long e = b * EPB + k;
    if (e < n) out[at(e, rank, sz, st, off)] = mean + sd * (r * cs);
    if (e + 1 < n) out[at(e + 1, rank, sz, st, off)] = mean + sd * (r * sn);
  }
}

// Every probability must be in [0, 1] (NaN too is refused).
__kernel void bernoulli_check(__global const T* self, long off, long n, int rank, dims_t sz, dims_t st,
                              __global long* status, long kind, long site) {
  long i = get_global_id(0);
  if (i >= n) return;
  double v = (double)self[at(i, rank, sz, st, off)];
  if (!(v >= 0.0 && v <= 1.0)) {
    if (atom_cmpxchg((volatile __global long*)status, 0L, kind) == 0L) {
      status[1] = site; status[2] = as_long(v); status[3] = i;
    }
  }
}

__kernel void bernoulli(__global T* out, long off, __global const T* self, long self_off, long n, int rank,
                        dims_t sz, dims_t ost, dims_t st, ulong seed, ulong offset, __global const long* status) {
  long b = get_global_id(0);
  if (b * EPB >= n || status[0] != 0) return;
  double u[4];
  block_uniforms(seed, offset, b, u);
  for (int k = 0; k < EPB; ++k) {
    long e = b * EPB + k;
    if (e < n) {
      double p = (double)self[at(e, rank, sz, st, self_off)];
      out[at(e, rank, sz, ost, off)] = u[k] < p ? (T)1 : (T)0;
    }
  }
}

__kernel void dropout(__global T* out, long off, __global uchar* mask, long mask_off, __global const T* self,
                      long self_off, long n, int rank, dims_t sz, dims_t ost, dims_t mst, dims_t st, ulong seed,
                      ulong offset, double keep_below, T scale) {
  long b = get_global_id(0);
  if (b * EPB >= n) return;
  double u[4];
  block_uniforms(seed, offset, b, u);
  for (int k = 0; k < EPB; ++k) {
    long e = b * EPB + k;
    if (e < n) {
      int keep = u[k] < keep_below;
      T x = self[at(e, rank, sz, st, self_off)];
      mask[at(e, rank, sz, mst, mask_off)] = (uchar)keep;
      out[at(e, rank, sz, ost, off)] = x * (keep ? scale : (T)0);
    }
  }
}
