// OpenCL plugin: the "linalg" group's convolutions (conv1d, conv2d,
// conv_backward, conv_transpose2d), float32 and float64. A convolution is
// im2col into a scratch buffer + the group's GEMM (ops/linalg.hpp) per
// group; its backward and the transposed convolution are GEMMs + a
// gathering col2im.
#include <memory>

#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/op_shapes.hpp"
#include "linalg.hpp"

namespace hal::opencl::linalg {
namespace {

namespace op = sdk::op;
using sdk::kernel::View4;

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

}  // namespace

void register_conv_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  ops.add<op::conv1d>(&conv1d_kernel, F);
  ops.add<op::conv2d>(&conv2d_kernel, F);
  ops.add<op::conv_backward>(&conv_backward_kernel, F);
  ops.add<op::conv_transpose2d>(&conv_transpose2d_kernel, F);
}

}  // namespace hal::opencl::linalg
