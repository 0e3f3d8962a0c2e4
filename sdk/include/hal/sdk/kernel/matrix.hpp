// Host-side geometry of matrix products for device kernels: tensors seen as
// (batched) strided matrices, in elements — transposes and permuted views
// are strides, never copies — torch.matmul as a list of batched GEMMs, and
// convolution / pooling tensors seen as 4-D [N, C, H, W].
#ifndef HAL_SDK_KERNEL_MATRIX_HPP_
#define HAL_SDK_KERNEL_MATRIX_HPP_

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "hal/sdk/op_schema.hpp"
#include "hal/sdk/op_shapes.hpp"

namespace hal::sdk::kernel {

// BATCH matrices of ROWS x COLS; element (b, i, j) is at element
// OFFSET + b·BS + i·RS + j·CS of the tensor's storage (OFFSET relative to the
// tensor's own first element). BS = 0 broadcasts one matrix over the batch.
struct MatrixView {
  int64_t offset = 0, batch = 1, rows = 0, cols = 0, bs = 0, rs = 0, cs = 0;

  MatrixView t() const { return {offset, batch, cols, rows, bs, cs, rs}; }
  // Element offset of (B, I, J) in the tensor's storage; a single matrix
  // (BATCH 1) is shared by every B whatever BS says.
  int64_t index(int64_t b, int64_t i, int64_t j) const { return offset + (batch == 1 ? 0 : b * bs) + i * rs + j * cs; }
};

inline MatrixView matrix_2d(const Tensor& t) { return {0, 1, t.shape[0], t.shape[1], 0, t.strides[0], t.strides[1]}; }
inline MatrixView matrix_3d(const Tensor& t) {
  return {0, t.shape[0], t.shape[1], t.shape[2], t.strides[0], t.strides[1], t.strides[2]};
}

// T's leading dims folded into rows ([..., n] -> [rows, n]); false when the
// strides do not allow it without a copy.
inline bool fold_rows(const Tensor& t, MatrixView& m) {
  m = MatrixView{0, 1, 1, t.rank == 0 ? 1 : t.shape[t.rank - 1], 0, 0, t.rank == 0 ? 0 : t.strides[t.rank - 1]};
  for (int d = 0; d + 1 < t.rank; ++d) m.rows *= t.shape[d];
  if (m.rows == 0) return true;
  int inner = -1;  // the next-inner dim of size > 1
  for (int d = t.rank - 2; d >= 0; --d) {
    if (t.shape[d] == 1) continue;
    if (inner < 0) m.rs = t.strides[d];
    else if (t.strides[d] != t.strides[inner] * t.shape[inner]) return false;
    inner = d;
  }
  return true;
}

// One batched GEMM of a matmul: C = A·B over A, B, C.
struct Gemm {
  MatrixView a, b, c;
};

// torch.matmul of CALL (inputs 0, 1; output 0) as batched GEMMs: a 1-D self
// is a row, a 1-D other a column; broadcast batch dims get stride 0; batch
// dims fold into one where all three operands allow it, and the outer ones
// that do not fold give one GEMM each (offsets set).
inline std::vector<Gemm> matmul_gemms(const OpCall& call) {
  const Tensor &x = call.input(0), &y = call.input(1), &out = call.output(0);
  std::vector<int64_t> batch;
  shape_rules::matmul_shape(call, &batch);
  const int nb = static_cast<int>(batch.size());
  MatrixView a = x.rank == 1 ? MatrixView{0, 1, 1, x.shape[0], 0, 0, x.strides[0]}
                             : MatrixView{0, 1, x.shape[x.rank - 2], x.shape[x.rank - 1], 0, x.strides[x.rank - 2],
                                          x.strides[x.rank - 1]};
  MatrixView b = y.rank == 1 ? MatrixView{0, 1, y.shape[0], 1, 0, y.strides[0], 0}
                             : MatrixView{0, 1, y.shape[y.rank - 2], y.shape[y.rank - 1], 0, y.strides[y.rank - 2],
                                          y.strides[y.rank - 1]};
  int out_mat = (x.rank >= 2) + (y.rank >= 2);  // matrix dims in out
  MatrixView o{0, 1, a.rows, b.cols, 0, 0, 0};
  o.rs = x.rank >= 2 ? out.strides[out.rank - out_mat] : 0;
  o.cs = y.rank >= 2 ? out.strides[out.rank - 1] : 0;
  // Batch dims of size > 1, folded where all three strides allow.
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> strides;
  for (int d = 0; d < nb; ++d) {
    if (batch[d] == 1) continue;
    int dx = d - (nb - std::max(x.rank - 2, 0)), dy = d - (nb - std::max(y.rank - 2, 0));
    std::array<int64_t, 3> st{dx >= 0 && x.shape[dx] != 1 ? x.strides[dx] : 0,
                              dy >= 0 && y.shape[dy] != 1 ? y.strides[dy] : 0, out.strides[d]};
    if (!sizes.empty()) {
      auto& s = strides.back();
      if (s[0] == st[0] * batch[d] && s[1] == st[1] * batch[d] && s[2] == st[2] * batch[d]) {
        sizes.back() *= batch[d];
        s = st;
        continue;
      }
    }
    sizes.push_back(batch[d]);
    strides.push_back(st);
  }
  int64_t n = sizes.empty() ? 1 : sizes.back();
  std::array<int64_t, 3> s = strides.empty() ? std::array<int64_t, 3>{0, 0, 0} : strides.back();
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < sizes.size(); ++d) outer *= sizes[d];
  std::vector<Gemm> gemms;
  for (int64_t i = 0; i < outer; ++i) {
    int64_t rem = i, off[3] = {0, 0, 0};
    for (int d = static_cast<int>(sizes.size()) - 2; d >= 0; --d) {
      int64_t idx = rem % sizes[d];
      rem /= sizes[d];
      for (int k = 0; k < 3; ++k) off[k] += idx * strides[d][k];
    }
    Gemm g{a, b, o};
    g.a.offset = off[0];
    g.b.offset = off[1];
    g.c.offset = off[2];
    g.a.batch = s[0] != 0 ? n : 1;
    g.a.bs = s[0];
    g.b.batch = s[1] != 0 ? n : 1;
    g.b.bs = s[1];
    g.c.batch = n;
    g.c.bs = s[2];
    gemms.push_back(g);
  }
  return gemms;
}

// A tensor seen as 4-D [N, C, H, W]: unbatched tensors (BATCHED false) get
// a size-1 N, 1-D convolution tensors (SPATIAL 1) a size-1 H.
struct View4 {
  int64_t size[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 0};

  View4(const Tensor& t, bool batched, int spatial) {
    int src = 0;
    for (int d = 0; d < 4; ++d) {
      if ((d == 0 && !batched) || (d == 2 && spatial == 1)) continue;
      size[d] = t.shape[src];
      stride[d] = t.strides[src];
      ++src;
    }
  }
  // Element offset of (N, C, H, W) in the tensor's storage.
  int64_t offset(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return n * stride[0] + c * stride[1] + h * stride[2] + w * stride[3];
  }
};

// A View4 over host-accessible storage (the tensor's DATA, element type T):
// for plugins whose kernels loop on the host. Borrows DATA; valid while the
// tensor's memory is.
template <class T>
struct HostView4 : View4 {
  T* p = nullptr;

  HostView4(const Tensor& t, bool batched, int spatial) : View4(t, batched, spatial), p(static_cast<T*>(t.data)) {}
  T& at(int64_t n, int64_t c, int64_t h, int64_t w) const { return p[offset(n, c, h, w)]; }
};

}  // namespace hal::sdk::kernel

#endif  // HAL_SDK_KERNEL_MATRIX_HPP_
