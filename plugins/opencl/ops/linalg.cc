// OpenCL plugin: the "linalg" group — matrix products, convolution and
// pooling, float32 and float64.
//
// Every matrix product is one batched, strided GEMM kernel tiled for local
// memory (each work-group computes a TM x TN tile of C, each work-item a
// WM x WN register block of it): strides of A, B, C and their batch strides
// are arguments, so transposed and permuted views need no copy; an alpha/beta
// epilogue adds a broadcast tensor (addmm's self, a bias). C's column index
// may split in two (j -> j / cw, j % cw), so a convolution writes its
// [N, C, H, W] output through any strides. Convolution is im2col into a
// scratch buffer + the GEMM (per group); its backward and the transposed
// convolution are GEMMs + a gathering col2im. Pools are direct kernels, one
// work-item per output (backward: one per (n, c) plane, which owns it).
// One program per dtype holds every kernel.
#include <algorithm>
#include <string>

#include "cl_kernel.hpp"
#include "hal/sdk/kernel/matrix.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/op_shapes.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;
using sdk::kernel::MatrixView;
using sdk::kernel::View4;

// GEMM tiling: a work-group of (TN / WN) x (TM / WM) work-items computes a
// TM x TN tile of C, stepping through K by TK (float32: 32, float64: 16, so
// both tiles take 32 KiB of local memory). Tuned for PoCL on an AVX-512
// CPU: 1024³ float32 went from 2.0 GFLOP/s (64x64 tiles, 4x4 scalar
// blocks) to ~7.3 (128x128, 8 rows x 16-wide vectors per work-item).
constexpr int kTM = 128, kTN = 128, kWM = 8, kWN = 16;

const char* const kSource = R"CLC(
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
)CLC";

std::string make_source(hal_dtype_e dt) {
  std::string t = cl_type(dt), wn = std::to_string(kWN);
  return cl_prelude({dt}) + "typedef " + t + " T;\ntypedef " + t + wn + " VT;\n" + kDimsTypedef +
         "#define TM " + std::to_string(kTM) + "\n#define TN " + std::to_string(kTN) + "\n#define TK " +
         (dt == HAL_DTYPE_FLOAT64 ? "16" : "32") + "\n#define WM " + std::to_string(kWM) + "\n#define WN " + wn +
         "\n" + kSource;
}

const std::string& source(hal_dtype_e dt) {
  static const std::string s32 = make_source(HAL_DTYPE_FLOAT32), s64 = make_source(HAL_DTYPE_FLOAT64);
  if (dt == HAL_DTYPE_FLOAT64) return s64;
  if (dt == HAL_DTYPE_FLOAT32) return s32;
  sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, "linalg: no OpenCL kernel for dtype ", sdk::dtype_name(dt));
}

cl_mem mem_of(const Tensor& t) { return cl_buffer(t.buffer).mem(); }
int64_t off_of(const Tensor& t) { return static_cast<int64_t>(t.byte_offset / t.element_size()); }

// A scratch cl_mem released when it goes out of scope (after enqueueing;
// OpenCL keeps it alive until its commands ran).
struct Scratch {
  Scratch(ClDevice& dev, int64_t elements, hal_dtype_e dt)
      : mem(dev.scratch(static_cast<uint64_t>(std::max<int64_t>(elements, 1)) * sdk::dtype_size(dt))) {}
  ~Scratch() { clReleaseMemObject(mem); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  cl_mem mem;
};

struct V4 {
  cl_long v[4];
};
V4 v4(const int64_t* s) { return V4{{s[0], s[1], s[2], s[3]}}; }

// ---- GEMM ---------------------------------------------------------------------

// A GEMM operand: element (b, i, j) at mem[off + b·bs + i·rs + j·cs]; for C
// and S, column j is at (j / cw)·cs2 + (j % cw)·cs.
struct Operand {
  cl_mem mem = nullptr;
  int64_t off = -1, bs = 0, rs = 0, cs = 0, cs2 = 0;
  Operand t() const { return {mem, off, bs, cs, rs, 0}; }
};

Operand operand(const Tensor& t, const MatrixView& m) {
  return {mem_of(t), off_of(t) + m.offset, m.bs, m.rs, m.cs, 0};
}

struct GemmCall {
  Operand a, b, c, s;  // s.off < 0: none
  int64_t batch = 1, m = 0, n = 0, k = 0, cw = 0;  // cw 0: no column split
  double alpha = 1, beta = 0;
};

void gemm(ClDevice& dev, const Queue& q, hal_dtype_e dt, const GemmCall& g) {
  if (g.batch == 0 || g.m == 0 || g.n == 0) return;
  Launch l(dev, source(dt), "gemm");
  auto arg = [&](const Operand& o, bool split) {
    l.mem(o.mem).value<cl_long>(o.off).value<cl_long>(o.bs).value<cl_long>(o.rs).value<cl_long>(o.cs);
    if (split) l.value<cl_long>(o.cs2);
  };
  arg(g.a, false);
  arg(g.b, false);
  arg(g.c, true);
  Operand s = g.s.off >= 0 ? g.s : Operand{g.c.mem, -1, 0, 0, 0, 0};
  arg(s, true);
  l.value<cl_long>(g.cw > 0 ? g.cw : g.n).value<cl_long>(g.m).value<cl_long>(g.n).value<cl_long>(g.k);
  l.scalar(dt, g.k == 0 ? 0.0 : g.alpha).scalar(dt, g.beta);  // no K: alpha·0, NaN-free
  constexpr size_t lx = kTN / kWN, ly = kTM / kWM;
  size_t global[3] = {static_cast<size_t>((g.n + kTN - 1) / kTN) * lx, static_cast<size_t>((g.m + kTM - 1) / kTM) * ly,
                      static_cast<size_t>(g.batch)};
  size_t local[3] = {lx, ly, 1};
  l.enqueue(q, 3, global, local);
}

// Row-major (contiguous) element strides of SHAPE.
void contiguous(int rank, const int64_t* shape, int64_t* st) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    st[d] = s;
    s *= shape[d];
  }
}

// dst = src elementwise over SHAPE (rank <= 8), each with its strides.
void copy_nd(ClDevice& dev, const Queue& q, hal_dtype_e dt, int rank, const int64_t* shape, cl_mem dst,
             int64_t d_off, const int64_t* dst_st, cl_mem src, int64_t s_off, const int64_t* src_st) {
  int64_t n = 1;
  Dims sz{}, ds{}, ss{};
  for (int d = 0; d < rank; ++d) {
    n *= shape[d];
    sz.v[d] = shape[d];
    ds.v[d] = dst_st[d];
    ss.v[d] = src_st[d];
  }
  for (int d = rank; d < 8; ++d) sz.v[d] = 1;
  Launch l(dev, source(dt), "copy_nd");
  l.mem(dst).value<cl_long>(d_off).mem(src).value<cl_long>(s_off).value<cl_long>(n).value<cl_int>(rank);
  l.value(sz).value(ds).value(ss);
  l.enqueue(q, global_1d(n), kLocalSize);
}

// T as rows x cols: itself when its leading dims fold, else a contiguous
// copy in SCRATCH.
Operand rows_operand(ClDevice& dev, const Queue& q, const Tensor& t, std::unique_ptr<Scratch>& scratch,
                     MatrixView& m) {
  if (sdk::kernel::fold_rows(t, m)) return operand(t, m);
  scratch = std::make_unique<Scratch>(dev, t.numel(), t.dtype);
  int64_t st[HAL_TENSOR_MAX_RANK];
  contiguous(t.rank, t.shape, st);
  copy_nd(dev, q, t.dtype, t.rank, t.shape, scratch->mem, 0, st, mem_of(t), off_of(t), t.strides);
  m.rs = m.cols;
  m.cs = 1;
  return {scratch->mem, 0, 0, m.cols, 1, 0};
}

// Where a GEMM writes OUT as rows x cols: OUT itself when its leading dims
// fold, else a contiguous SCRATCH that finish_rows copies to OUT.
Operand rows_output(ClDevice& dev, const Tensor& out, std::unique_ptr<Scratch>& scratch) {
  MatrixView m;
  if (sdk::kernel::fold_rows(out, m)) return operand(out, m);
  scratch = std::make_unique<Scratch>(dev, out.numel(), out.dtype);
  return {scratch->mem, 0, 0, m.cols, 1, 0};
}
void finish_rows(ClDevice& dev, const Queue& q, const Tensor& out, const std::unique_ptr<Scratch>& scratch) {
  if (!scratch) return;
  int64_t st[HAL_TENSOR_MAX_RANK];
  contiguous(out.rank, out.shape, st);
  copy_nd(dev, q, out.dtype, out.rank, out.shape, mem_of(out), off_of(out), out.strides, scratch->mem, 0, st);
}

// ---- matrix products ------------------------------------------------------------

// OUT (= C) = beta·SELF + alpha·(A·B); SELF (may be nullptr) broadcasts to OUT.
void product(const CallPtr& call, sdk::Stream* stream, const Tensor& x, const MatrixView& a, const Tensor& y,
             const MatrixView& b, const Tensor& out, const MatrixView& c, const Tensor* self = nullptr,
             double alpha = 1, double beta = 0) {
  ClDevice& dev = device_of(*call);
  GemmCall g;
  g.a = operand(x, a);
  g.b = operand(y, b);
  g.c = operand(out, c);
  g.batch = c.batch;
  g.m = c.rows;
  g.n = c.cols;
  g.k = a.cols;
  g.alpha = alpha;
  g.beta = beta;
  if (self != nullptr && beta != 0.0) {
    int64_t st[HAL_TENSOR_MAX_RANK];
    sdk::kernel::broadcast_byte_strides(*self, out.rank, out.shape, st);
    int64_t es = static_cast<int64_t>(self->element_size());
    g.s = {mem_of(*self), off_of(*self), 0, 0, 0, 0};
    if (out.rank == 3) g.s.bs = st[0] / es;
    g.s.rs = st[out.rank - 2] / es;
    g.s.cs = st[out.rank - 1] / es;
  }
  dev.submit(stream, [&](const Queue& q) { gemm(dev, q, out.dtype, g); });
}

void mm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  product(call, stream, c.input(0), sdk::kernel::matrix_2d(c.input(0)), c.input(1), sdk::kernel::matrix_2d(c.input(1)),
          c.output(0), sdk::kernel::matrix_2d(c.output(0)));
}

void bmm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  product(call, stream, c.input(0), sdk::kernel::matrix_3d(c.input(0)), c.input(1), sdk::kernel::matrix_3d(c.input(1)),
          c.output(0), sdk::kernel::matrix_3d(c.output(0)));
}

void addmm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  product(call, stream, c.input(1), sdk::kernel::matrix_2d(c.input(1)), c.input(2), sdk::kernel::matrix_2d(c.input(2)),
          c.output(0), sdk::kernel::matrix_2d(c.output(0)), &c.input(0), op::addmm::alpha(c).to_double(),
          op::addmm::beta(c).to_double());
}

void baddbmm_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  product(call, stream, c.input(1), sdk::kernel::matrix_3d(c.input(1)), c.input(2), sdk::kernel::matrix_3d(c.input(2)),
          c.output(0), sdk::kernel::matrix_3d(c.output(0)), &c.input(0), op::baddbmm::alpha(c).to_double(),
          op::baddbmm::beta(c).to_double());
}

void matmul_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  std::vector<sdk::kernel::Gemm> gemms = sdk::kernel::matmul_gemms(c);
  ClDevice& dev = device_of(c);
  const Tensor &x = c.input(0), &y = c.input(1), &out = c.output(0);
  dev.submit(stream, [&](const Queue& q) {
    for (const sdk::kernel::Gemm& m : gemms) {
      GemmCall g;
      g.a = operand(x, m.a);
      g.b = operand(y, m.b);
      g.c = operand(out, m.c);
      g.batch = m.c.batch;
      g.m = m.c.rows;
      g.n = m.c.cols;
      g.k = m.a.cols;
      gemm(dev, q, out.dtype, g);
    }
  });
}

void linear_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor &x = op::linear::input(c), &w = op::linear::weight(c), &out = op::linear::out(c);
  const Tensor* bias = op::linear::bias(c);
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    std::unique_ptr<Scratch> xs, os;
    MatrixView xm;
    GemmCall g;
    g.a = rows_operand(dev, q, x, xs, xm);
    g.b = operand(w, sdk::kernel::matrix_2d(w).t());
    g.c = rows_output(dev, out, os);
    g.m = xm.rows;
    g.n = w.shape[0];
    g.k = w.shape[1];
    if (bias != nullptr) {
      g.s = {mem_of(*bias), off_of(*bias), 0, 0, bias->strides[0], 0};
      g.beta = 1;
    }
    gemm(dev, q, out.dtype, g);
    finish_rows(dev, q, out, os);
  });
}

// OUT[c] = Σ over (b, h, w) of the 4-D view (SIZE, STRIDE) of X.
void channel_sums(ClDevice& dev, const Queue& q, hal_dtype_e dt, const Tensor& out, cl_mem x, int64_t x_off,
                  const int64_t* stride, const int64_t* size) {
  Launch l(dev, source(dt), "channel_sums");
  l.tensor(out).value<cl_long>(out.strides[0]).mem(x).value<cl_long>(x_off).value(v4(stride)).value(v4(size));
  l.enqueue(q, global_1d(size[1]), kLocalSize);
}

void linear_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  using lb = op::linear_backward;
  const Tensor &gy = lb::grad_output(c), &x = lb::input(c), &w = lb::weight(c);
  const Tensor &gx = lb::grad_input(c), &gw = lb::grad_weight(c), &gb = lb::grad_bias(c);
  ClDevice& dev = device_of(c);
  hal_dtype_e dt = w.dtype;
  dev.submit(stream, [&](const Queue& q) {
    std::unique_ptr<Scratch> gs, xs, os;
    MatrixView gm, xm;
    Operand G = rows_operand(dev, q, gy, gs, gm), X = rows_operand(dev, q, x, xs, xm);
    GemmCall gi;  // grad_input = grad_output · weight
    gi.a = G;
    gi.b = operand(w, sdk::kernel::matrix_2d(w));
    gi.c = rows_output(dev, gx, os);
    gi.m = gm.rows;
    gi.n = w.shape[1];
    gi.k = w.shape[0];
    gemm(dev, q, dt, gi);
    finish_rows(dev, q, gx, os);
    GemmCall gwc;  // grad_weight = grad_outputᵀ · input
    gwc.a = G.t();
    gwc.b = X;
    gwc.c = operand(gw, sdk::kernel::matrix_2d(gw));
    gwc.m = w.shape[0];
    gwc.n = w.shape[1];
    gwc.k = gm.rows;
    gemm(dev, q, dt, gwc);
    int64_t size[4] = {gm.rows, gm.cols, 1, 1}, stride[4] = {G.rs, G.cs, 0, 0};
    channel_sums(dev, q, dt, gb, G.mem, G.off, stride, size);
  });
}

// ---- convolution ---------------------------------------------------------------

struct ConvArgs {
  cl_long n, c, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
};

// A convolution's sizes as 2-D (conv1d: H is a size-1 dim with a unit kernel).
ConvArgs conv_args(const sdk::shape_rules::ConvGeometry& g) {
  ConvArgs a{g.n, g.c_in, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1};
  int j = 2 - g.spatial;  // first of the two dims that exists
  for (int i = 0; i < g.spatial; ++i, ++j) {
    (j == 0 ? a.h : a.w) = g.in[i];
    (j == 0 ? a.oh : a.ow) = g.out[i];
    (j == 0 ? a.kh : a.kw) = g.kernel[i];
    (j == 0 ? a.sh : a.sw) = g.stride[i];
    (j == 0 ? a.ph : a.pw) = g.padding[i];
    (j == 0 ? a.dh : a.dw) = g.dilation[i];
  }
  return a;
}

// COL [c·kh·kw][n][oh·ow] = im2col of X (4-D view XV) for A.
void im2col(ClDevice& dev, const Queue& q, hal_dtype_e dt, cl_mem col, cl_mem x, int64_t x_off, const View4& xv,
            const ConvArgs& a) {
  int64_t total = a.c * a.kh * a.kw * a.n * a.oh * a.ow;
  Launch l(dev, source(dt), "im2col");
  l.mem(col).mem(x).value<cl_long>(x_off).value(v4(xv.stride)).value(a).value<cl_long>(total);
  l.enqueue(q, global_1d(total), kLocalSize);
}

// X (4-D view XV) = col2im of COL (+ BIAS[c]) for A (the convolution whose
// input X is).
void col2im(ClDevice& dev, const Queue& q, hal_dtype_e dt, const Tensor& x, const View4& xv, cl_mem col,
            const Tensor* bias, const ConvArgs& a) {
  int64_t total = a.n * a.c * a.h * a.w;
  Launch l(dev, source(dt), "col2im");
  l.tensor(x).value(v4(xv.stride)).mem(col);
  if (bias != nullptr) l.tensor(*bias).value<cl_long>(bias->strides[0]);
  else l.mem(col).value<cl_long>(-1).value<cl_long>(0);
  l.value(a).value<cl_long>(total);
  l.enqueue(q, global_1d(total), kLocalSize);
}

// T (4-D view V of SIZE) packed contiguous in the dim order PERM of the
// 4-D view into SCRATCH; returns it.
cl_mem pack4(ClDevice& dev, const Queue& q, const Tensor& t, const View4& v, const int perm[4],
             std::unique_ptr<Scratch>& scratch) {
  int64_t n = v.size[0] * v.size[1] * v.size[2] * v.size[3];
  scratch = std::make_unique<Scratch>(dev, n, t.dtype);
  int64_t psize[4], pst[4], dst[4];
  for (int d = 0; d < 4; ++d) psize[d] = v.size[perm[d]];
  contiguous(4, psize, pst);
  for (int d = 0; d < 4; ++d) dst[perm[d]] = pst[d];
  copy_nd(dev, q, t.dtype, 4, v.size, scratch->mem, 0, dst, mem_of(t), off_of(t), v.stride);
  return scratch->mem;
}

// A weight [O, I, kH, kW] (4-D view WV) as a row-major [O, I·kH·kW] matrix:
// itself when contiguous, else packed.
Operand weight_rows(ClDevice& dev, const Queue& q, const Tensor& w, const View4& wv, std::unique_ptr<Scratch>& s) {
  int64_t k = wv.size[1] * wv.size[2] * wv.size[3];
  if (w.is_contiguous()) return {mem_of(w), off_of(w), 0, k, 1, 0};
  static const int identity[4] = {0, 1, 2, 3};
  return {pack4(dev, q, w, wv, identity, s), 0, 0, k, 1, 0};
}

constexpr int kChannelsFirst[4] = {1, 0, 2, 3};  // [N, C, H, W] -> [C][N][H·W]

void conv_forward(const CallPtr& call, sdk::Stream* stream, int spatial) {
  const OpCall& c = *call;
  auto cg = sdk::shape_rules::conv_geometry(c, spatial, false);
  const Tensor &x = c.input(0), &w = c.input(1), &y = c.output(0);
  const Tensor* bias = c.optional_input(2);
  View4 xv(x, cg.batched, spatial), wv(w, true, spatial), yv(y, cg.batched, spatial);
  ConvArgs a = conv_args(cg);
  const int64_t groups = cg.groups, cin_g = cg.c_in / groups, cout_g = cg.c_out / groups;
  const int64_t kdim = cin_g * a.kh * a.kw, P = a.oh * a.ow;
  if (cg.n == 0 || cg.c_out == 0) return;
  hal_dtype_e dt = y.dtype;
  ClDevice& dev = device_of(c);
  // Batches per im2col chunk: the scratch stays under ~256 MiB (and the
  // device's allocation limit).
  int64_t per_n = std::max<int64_t>(1, cg.c_in * a.kh * a.kw * P * static_cast<int64_t>(sdk::dtype_size(dt)));
  int64_t limit = std::min<int64_t>(256 << 20, static_cast<int64_t>(dev.max_alloc_bytes()));
  int64_t chunk = std::clamp<int64_t>(limit / per_n, 1, cg.n);
  dev.submit(stream, [&](const Queue& q) {
    std::unique_ptr<Scratch> ws;
    Operand W = weight_rows(dev, q, w, wv, ws);
    Scratch col(dev, cg.c_in * a.kh * a.kw * chunk * P, dt);
    for (int64_t n0 = 0; n0 < cg.n; n0 += chunk) {
      ConvArgs ac = a;
      ac.n = std::min(chunk, cg.n - n0);
      im2col(dev, q, dt, col.mem, mem_of(x), off_of(x) + n0 * xv.stride[0], xv, ac);
      for (int64_t gi = 0; gi < groups; ++gi) {
        GemmCall g;
        g.a = W;
        g.a.off += gi * cout_g * kdim;
        g.b = {col.mem, gi * kdim * ac.n * P, P, ac.n * P, 1, 0};
        g.c = {mem_of(y), off_of(y) + n0 * yv.stride[0] + gi * cout_g * yv.stride[1], yv.stride[0], yv.stride[1],
               yv.stride[3], yv.stride[2]};
        g.cw = a.ow;
        if (bias != nullptr) {
          g.s = {mem_of(*bias), off_of(*bias) + gi * cout_g * bias->strides[0], 0, bias->strides[0], 0, 0};
          g.beta = 1;
        }
        g.batch = ac.n;
        g.m = cout_g;
        g.n = P;
        g.k = kdim;
        gemm(dev, q, dt, g);
      }
    }
  });
}
void conv1d_kernel(const CallPtr& call, sdk::Stream* stream) { conv_forward(call, stream, 1); }
void conv2d_kernel(const CallPtr& call, sdk::Stream* stream) { conv_forward(call, stream, 2); }

void conv_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  auto cg = sdk::shape_rules::conv_backward_geometry(c);
  const int sp = cg.spatial;
  const Tensor &gy = c.input(0), &x = c.input(1), &w = c.input(2);
  const Tensor &gx = c.output(0), &gw = c.output(1), &gb = c.output(2);
  View4 gyv(gy, cg.batched, sp), xv(x, cg.batched, sp), wv(w, true, sp), gxv(gx, cg.batched, sp),
      gwv(gw, true, sp);
  ConvArgs a = conv_args(cg);
  const int64_t groups = cg.groups, cin_g = cg.c_in / groups, cout_g = cg.c_out / groups;
  const int64_t kdim = cin_g * a.kh * a.kw, P = a.oh * a.ow, NP = cg.n * P;
  hal_dtype_e dt = w.dtype;
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    std::unique_ptr<Scratch> gys, ws, gws;
    cl_mem gyp = pack4(dev, q, gy, gyv, kChannelsFirst, gys);  // [C_out][N][P]
    Scratch col(dev, cg.c_in * a.kh * a.kw * NP, dt);
    im2col(dev, q, dt, col.mem, mem_of(x), off_of(x), xv, a);
    // grad_weight[g] = grad_output[g] [cout_g, N·P] · colᵀ[g] [N·P, kdim]
    Operand GW{mem_of(gw), off_of(gw), 0, kdim, 1, 0};
    if (!gw.is_contiguous()) {
      gws = std::make_unique<Scratch>(dev, gw.numel(), dt);
      GW = {gws->mem, 0, 0, kdim, 1, 0};
    }
    for (int64_t gi = 0; gi < groups; ++gi) {
      GemmCall g;
      g.a = {gyp, gi * cout_g * NP, 0, NP, 1, 0};
      g.b = {col.mem, gi * kdim * NP, 0, 1, NP, 0};
      g.c = GW;
      g.c.off += gi * cout_g * kdim;
      g.m = cout_g;
      g.n = kdim;
      g.k = NP;
      gemm(dev, q, dt, g);
    }
    if (gws) {
      int64_t st[4];
      contiguous(4, gwv.size, st);
      copy_nd(dev, q, dt, 4, gwv.size, mem_of(gw), off_of(gw), gwv.stride, gws->mem, 0, st);
    }
    // grad_input: col = weight[g]ᵀ [kdim, cout_g] · grad_output[g] [cout_g, P] per n, then col2im.
    Operand W = weight_rows(dev, q, w, wv, ws);
    for (int64_t gi = 0; gi < groups; ++gi) {
      GemmCall g;
      g.a = W.t();
      g.a.off += gi * cout_g * kdim;
      g.b = {gyp, gi * cout_g * NP, P, NP, 1, 0};
      g.c = {col.mem, gi * kdim * NP, P, NP, 1, 0};
      g.batch = cg.n;
      g.m = kdim;
      g.n = P;
      g.k = cout_g;
      gemm(dev, q, dt, g);
    }
    col2im(dev, q, dt, gx, gxv, col.mem, nullptr, a);
    channel_sums(dev, q, dt, gb, mem_of(gy), off_of(gy), gyv.stride, gyv.size);
  });
}

void conv_transpose2d_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  auto cg = sdk::shape_rules::conv_geometry(c, 2, true);
  const Tensor &x = c.input(0), &w = c.input(1), &y = c.output(0);
  const Tensor* bias = c.optional_input(2);
  View4 xv(x, cg.batched, 2), wv(w, true, 2), yv(y, cg.batched, 2);
  // The convolution whose input gradient this is: input y, output x.
  ConvArgs a = conv_args(cg);
  a.c = cg.c_out;
  std::swap(a.h, a.oh);
  std::swap(a.w, a.ow);
  const int64_t groups = cg.groups, xin_g = cg.c_in / groups, yout_g = cg.c_out / groups;
  const int64_t kdim = yout_g * a.kh * a.kw, P = a.oh * a.ow, NP = cg.n * P;
  if (cg.n == 0 || cg.c_out == 0) return;
  hal_dtype_e dt = y.dtype;
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    std::unique_ptr<Scratch> xs, ws;
    cl_mem xp = pack4(dev, q, x, xv, kChannelsFirst, xs);  // [C_in][N][H·W]
    Operand W = weight_rows(dev, q, w, wv, ws);               // [C_in, C_out/g·kH·kW]
    Scratch col(dev, cg.c_out * a.kh * a.kw * NP, dt);
    for (int64_t gi = 0; gi < groups; ++gi) {
      GemmCall g;
      g.a = W.t();
      g.a.off += gi * xin_g * kdim;
      g.b = {xp, gi * xin_g * NP, P, NP, 1, 0};
      g.c = {col.mem, gi * kdim * NP, P, NP, 1, 0};
      g.batch = cg.n;
      g.m = kdim;
      g.n = P;
      g.k = xin_g;
      gemm(dev, q, dt, g);
    }
    col2im(dev, q, dt, y, yv, col.mem, bias, a);
  });
}

// ---- pooling ---------------------------------------------------------------------

struct PoolArgs {
  cl_long n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, include_pad, divisor;
};

PoolArgs pool_args(const sdk::shape_rules::PoolGeometry& g) {
  return {g.n, g.c, g.in[0], g.in[1], g.out[0], g.out[1], g.kernel[0], g.kernel[1], g.stride[0], g.stride[1],
          g.padding[0], g.padding[1], g.dilation[0], g.dilation[1], 0, 0};
}

int64_t outputs_of(const PoolArgs& a) { return a.n * a.c * a.oh * a.ow; }

void max_pool2d_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  auto g = sdk::shape_rules::pool_geometry(c, 0, true);
  const Tensor &x = c.input(0), &y = c.output(0), &ind = c.output(1);
  PoolArgs a = pool_args(g);
  int64_t total = outputs_of(a);
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    Launch l(dev, source(x.dtype), "max_pool");
    l.tensor(y).value(v4(View4(y, g.batched, 2).stride)).tensor(ind).value(v4(View4(ind, g.batched, 2).stride));
    l.tensor(x).value(v4(View4(x, g.batched, 2).stride)).value(a).value<cl_long>(total);
    l.enqueue(q, global_1d(total), kLocalSize);
  });
}

void max_pool2d_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  auto g = sdk::shape_rules::pool_geometry(c, 1, true);
  const Tensor &gy = c.input(0), &ind = c.input(2), &gx = c.output(0);
  PoolArgs a = pool_args(g);
  int64_t total = outputs_of(a), plane = a.h * a.w;
  V4 is = v4(View4(ind, g.batched, 2).stride);
  int64_t site = status_site("max_pool2d_backward: an index in 'indices' is out of range [0, " +
                             std::to_string(plane) + ")");
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    {
      Launch l(dev, source(gy.dtype), "index_guard");
      l.tensor(ind).value(is).value(a).value<cl_long>(plane).mem(q.status).value<cl_long>(site).value<cl_long>(total);
      l.enqueue(q, global_1d(total), kLocalSize);
    }
    Launch l(dev, source(gy.dtype), "max_pool_backward");
    l.tensor(gx).value(v4(View4(gx, g.batched, 2).stride)).tensor(gy).value(v4(View4(gy, g.batched, 2).stride));
    l.tensor(ind).value(is).value(a).mem(q.status);
    l.enqueue(q, global_1d(a.n * a.c), kLocalSize);
  });
}

template <class Op>
PoolArgs avg_args(const OpCall& c, size_t index, bool& batched) {
  auto g = sdk::shape_rules::pool_geometry(c, index, false);
  batched = g.batched;
  PoolArgs a = pool_args(g);
  a.include_pad = Op::count_include_pad(c) ? 1 : 0;
  a.divisor = Op::divisor_override(c);
  return a;
}

// Runs forward pool kernel NAME: Y from X.
void pool_forward(const OpCall& c, sdk::Stream* stream, const char* name, const PoolArgs& a, bool batched) {
  const Tensor &x = c.input(0), &y = c.output(0);
  int64_t total = outputs_of(a);
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    Launch l(dev, source(x.dtype), name);
    l.tensor(y).value(v4(View4(y, batched, 2).stride)).tensor(x).value(v4(View4(x, batched, 2).stride));
    l.value(a).value<cl_long>(total);
    l.enqueue(q, global_1d(total), kLocalSize);
  });
}

// Runs backward pool kernel NAME: GX (output 0) from GY (input 0).
void pool_backward(const OpCall& c, sdk::Stream* stream, const char* name, const PoolArgs& a, bool batched) {
  const Tensor &gy = c.input(0), &gx = c.output(0);
  ClDevice& dev = device_of(c);
  dev.submit(stream, [&](const Queue& q) {
    Launch l(dev, source(gy.dtype), name);
    l.tensor(gx).value(v4(View4(gx, batched, 2).stride)).tensor(gy).value(v4(View4(gy, batched, 2).stride));
    l.value(a);
    l.enqueue(q, global_1d(a.n * a.c), kLocalSize);
  });
}

void avg_pool2d_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool batched;
  PoolArgs a = avg_args<op::avg_pool2d>(*call, 0, batched);
  pool_forward(*call, stream, "avg_pool", a, batched);
}

void avg_pool2d_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool batched;
  PoolArgs a = avg_args<op::avg_pool2d_backward>(*call, 1, batched);
  pool_backward(*call, stream, "avg_pool_backward", a, batched);
}

// Adaptive pools: input INDEX, the pooled tensor SMALL.
PoolArgs adaptive_args(const OpCall& c, size_t index, const Tensor& small, bool& batched) {
  auto g = sdk::shape_rules::pool_input(c, index);
  g.out[0] = small.shape[small.rank - 2];
  g.out[1] = small.shape[small.rank - 1];
  batched = g.batched;
  return pool_args(g);
}

void adaptive_avg_pool2d_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool batched;
  PoolArgs a = adaptive_args(*call, 0, call->output(0), batched);
  pool_forward(*call, stream, "adaptive_avg_pool", a, batched);
}

void adaptive_avg_pool2d_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  bool batched;
  PoolArgs a = adaptive_args(*call, 1, call->input(0), batched);
  pool_backward(*call, stream, "adaptive_avg_pool_backward", a, batched);
}

}  // namespace

void register_linalg_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::mm>(&mm_kernel, F);
  ops.add<op::bmm>(&bmm_kernel, F);
  ops.add<op::matmul>(&matmul_kernel, F);
  ops.add<op::addmm>(&addmm_kernel, F);
  ops.add<op::baddbmm>(&baddbmm_kernel, F);
  ops.add<op::linear>(&linear_kernel, F);
  ops.add<op::linear_backward>(&linear_backward_kernel, F);
  ops.add<op::conv1d>(&conv1d_kernel, F);
  ops.add<op::conv2d>(&conv2d_kernel, F);
  ops.add<op::conv_backward>(&conv_backward_kernel, F);
  ops.add<op::conv_transpose2d>(&conv_transpose2d_kernel, F);
  ops.add<op::max_pool2d>(&max_pool2d_kernel, F);
  ops.add<op::max_pool2d_backward>(&max_pool2d_backward_kernel, F);
  ops.add<op::avg_pool2d>(&avg_pool2d_kernel, F);
  ops.add<op::avg_pool2d_backward>(&avg_pool2d_backward_kernel, F);
  ops.add<op::adaptive_avg_pool2d>(&adaptive_avg_pool2d_kernel, F);
  ops.add<op::adaptive_avg_pool2d_backward>(&adaptive_avg_pool2d_backward_kernel, F);
}

}  // namespace hal::opencl
