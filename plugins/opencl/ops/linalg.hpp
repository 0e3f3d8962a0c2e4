// OpenCL plugin: what the "linalg" group's files share (ops/linalg.cc: the
// GEMM and matrix products, ops/conv.cc: convolutions, ops/pool.cc: pools).
// One program per dtype (kernels/linalg.cl) holds every kernel of the group.
// All functions enqueue on the queue they are given and return at once;
// none keeps a reference to its arguments. Thread-safe as ClDevice is.
#ifndef HAL_PLUGINS_OPENCL_OPS_LINALG_HPP_
#define HAL_PLUGINS_OPENCL_OPS_LINALG_HPP_

#include <algorithm>
#include <string>

#include "cl_kernel.hpp"
#include "hal/sdk/kernel/matrix.hpp"

namespace hal::opencl::linalg {

// The group's program source for DT (float32 or float64; else throws
// UNSUPPORTED_DTYPE). Built once, lives as long as the process.
const std::string& source(hal_dtype_e dt);

inline cl_mem mem_of(const Tensor& t) { return mem_or_null(t.buffer); }
inline int64_t off_of(const Tensor& t) { return static_cast<int64_t>(t.byte_offset / t.element_size()); }

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

// The kernels' v4_t: four longs (a 4-D view's sizes or strides).
struct V4 {
  cl_long v[4];
};
inline V4 v4(const int64_t* s) { return V4{{s[0], s[1], s[2], s[3]}}; }

// A GEMM operand: element (b, i, j) at mem[off + b·bs + i·rs + j·cs]; for C
// and S, column j is at (j / cw)·cs2 + (j % cw)·cs.
struct Operand {
  cl_mem mem = nullptr;
  int64_t off = -1, bs = 0, rs = 0, cs = 0, cs2 = 0;
  Operand t() const { return {mem, off, bs, cs, rs, 0}; }
};

// T's elements as the matrix view M.
inline Operand operand(const Tensor& t, const sdk::kernel::MatrixView& m) {
  return {mem_of(t), off_of(t) + m.offset, m.bs, m.rs, m.cs, 0};
}

struct GemmCall {
  Operand a, b, c, s;  // s.off < 0: none
  int64_t batch = 1, m = 0, n = 0, k = 0, cw = 0;  // cw 0: no column split
  double alpha = 1, beta = 0;
};

// C = alpha·(A·B) + beta·S (G's operands) on Q; nothing for an empty C.
void gemm(ClDevice& dev, const Queue& q, hal_dtype_e dt, const GemmCall& g);

// Row-major (contiguous) element strides of SHAPE.
void contiguous(int rank, const int64_t* shape, int64_t* st);

// dst = src elementwise over SHAPE (rank <= 8), each with its strides.
void copy_nd(ClDevice& dev, const Queue& q, hal_dtype_e dt, int rank, const int64_t* shape, cl_mem dst,
             int64_t d_off, const int64_t* dst_st, cl_mem src, int64_t s_off, const int64_t* src_st);

// OUT[c] = Σ over (b, h, w) of the 4-D view (SIZE, STRIDE) of X.
void channel_sums(ClDevice& dev, const Queue& q, hal_dtype_e dt, const Tensor& out, cl_mem x, int64_t x_off,
                  const int64_t* stride, const int64_t* size);

// The group's other files (registered by register_linalg_ops).
void register_conv_ops(sdk::OpRegistry& ops);
void register_pool_ops(sdk::OpRegistry& ops);

}  // namespace hal::opencl::linalg

#endif  // HAL_PLUGINS_OPENCL_OPS_LINALG_HPP_
