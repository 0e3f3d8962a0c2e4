
typedef struct { long v[8]; } dims_t;
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
// Every class of SELF (rank R, row-major position i) must be in [0, classes).
__kernel void one_hot_check(__global const long* self, long off, long n, int rank, dims_t sz, dims_t st,
                            long classes, __global long* status, long kind, long site) {
  long i = get_global_id(0);
  if (i >= n) return;
  long rest = i, o = off;
  for (int d = rank - 1; d >= 0; --d) { o += rest % sz.v[d] * st.v[d]; rest /= sz.v[d]; }
  long v = self[o];
  if (v < 0 || v >= classes) {
    if (atom_cmpxchg((volatile __global long*)status, 0L, kind) == 0L) { status[1] = site; status[2] = v; status[3] = i; }
  }
}
// OUT (SELF's shape + [classes]) element i: position i / classes of SELF.
__kernel void one_hot(__global long* out, long out_off, __global const long* self, long off, long n, int rank,
                      dims_t sz, dims_t st, dims_t ost, long classes, __global const long* status) {
  long i = get_global_id(0);
  if (i >= n || status[0] != 0) return;
  long k = i % classes, rest = i / classes, o = off, oo = out_off + k * ost.v[rank];
  for (int d = rank - 1; d >= 0; --d) {
    long cd = rest % sz.v[d]; rest /= sz.v[d];
    o += cd * st.v[d];
    oo += cd * ost.v[d];
  }
  out[oo] = self[o] == k;
}
