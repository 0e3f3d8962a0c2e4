// OpenCL plugin: the "index" op group (masked_fill lives in elementwise.cc).
// Index tensors are checked on the device before anything is written: a
// check kernel (one work-group) finds the first index out of range in
// row-major order and reports it in the queue's status words, and every
// kernel of the op returns at once when a status is set. Gathers and
// scatters move elements as unsigned words of the element size, so their
// programs depend on the element size and index dtype only. Sorts run one
// work-item per row (a stable bottom-up merge sort in a scratch buffer).
#include <sstream>

#include "cl_kernel.hpp"
#include "cl_sources.hpp"
#include "hal/sdk/kernel/reduce.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "hal/sdk/op_shapes.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;
using sdk::kernel::ReduceIter;

// Unsigned OpenCL type of DTYPE's element size.
const char* word_type(hal_dtype_e dtype) {
  switch (sdk::dtype_size(dtype)) {
    case 1: return "uchar";
    case 2: return "ushort";
    case 4: return "uint";
    default: return "ulong";
  }
}

Dims dims(const int64_t* v, int n) {
  Dims d{};
  for (int i = 0; i < n; ++i) d.v[i] = v[i];
  return d;
}

// OpenCL C: the element offset of row-major position FLAT over SHAPE/ST.
const char* const kOffsetOf = cl_source::offset_of;  // kernels/offset_of.cl

int norm_dim(const OpCall& c, int64_t dim, int rank) { return sdk::shape_rules::normalize_dim(c, "dim", dim, rank); }

void require_no_alias(const OpCall& c, const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (t->numel() > 0 && t->buffer == out.buffer && t->byte_offset == out.byte_offset)
      sdk::fail(HAL_STATUS_UNIMPLEMENTED, c.name(), ": the OpenCL kernel does not take an output that aliases an index "
                "or source input");
}

// ---- the index check ---------------------------------------------------------

// Indices of INDEX (row-major position i) must lie in [LO[g], HI[g]) for
// g = i / GROUP; the first that does not is reported as
// "<op>: index V in '<arg>' at position P is out of range [lo, hi)".
struct IndexCheck {
  const Tensor* index;
  const char* arg;
  int64_t group = 1;  // indices per group
  std::vector<int64_t> lo, hi;  // per group (at most 8)
};

void run_index_check(const OpCall& c, const Queue& q, const IndexCheck& k) {
  const Tensor& t = *k.index;
  int64_t n = t.numel();
  if (n == 0) return;
  ClDevice& device = device_of(c);
  std::ostringstream s;
  s << kDimsTypedef << kOffsetOf
    << "__kernel void check_index(__global const " << cl_type(t.dtype) << "* in, long off, long n, int rank,"
    << " dims_t shape, dims_t st, long group, dims_t lo, dims_t hi, dims_t site, __global long* status) {\n"
    << "  __local long best[" << kLocalSize << "];\n"
    << "  int lid = get_local_id(0);\n  long mine = -1;\n"
    << "  for (long i = lid; i < n; i += " << kLocalSize << ") {\n"
    << "    long v = (long)in[off + offset_of(i, rank, shape, st)]; long g = i / group;\n"
    << "    if (v < lo.v[g] || v >= hi.v[g]) { mine = i; break; }\n  }\n"
    << "  best[lid] = mine;\n  barrier(CLK_LOCAL_MEM_FENCE);\n"
    << "  if (lid != 0) return;\n  long first = -1;\n"
    << "  for (int j = 0; j < " << kLocalSize << "; ++j)\n"
    << "    if (best[j] >= 0 && (first < 0 || best[j] < first)) first = best[j];\n"
    << "  if (first < 0 || status[0] != 0) return;\n"
    << "  status[0] = " << kStatusIndexAt << "; status[1] = site.v[first / group];\n"
    << "  status[2] = (long)in[off + offset_of(first, rank, shape, st)]; status[3] = first;\n}\n";
  Dims lo{}, hi{}, site{};
  for (size_t g = 0; g < k.lo.size(); ++g) {
    lo.v[g] = k.lo[g];
    hi.v[g] = k.hi[g];
    site.v[g] = status_site(std::string(c.name()) + ": index {value} in '" + k.arg + "' at position {position} is out of range [" +
                            std::to_string(k.lo[g]) + ", " + std::to_string(k.hi[g]) + ")");
  }
  Launch l(device, s.str(), "check_index");
  l.tensor(t).value<cl_long>(n).value<cl_int>(t.rank).value(dims(t.shape, t.rank)).value(dims(t.strides, t.rank));
  l.value<cl_long>(k.group).value(lo).value(hi).value(site).mem(q.status);
  l.enqueue(q, kLocalSize, kLocalSize);
}

IndexCheck simple_check(const Tensor& index, const char* arg, int64_t size) {
  return IndexCheck{&index, arg, std::max<int64_t>(index.numel(), 1), {0}, {size}};
}

// ---- gathers: out[i] = src[o_src(i) + idx[o_idx(i)] * sd] -------------------------

// OUT over the geometry of (out, IDX_VIEW, SRC_VIEW): views are broadcast
// to OUT's shape (stride 0 where the index picks the position).
void launch_take(const OpCall& c, sdk::Stream* stream, const IndexCheck& check, const Tensor& out, const Tensor& idx_view,
                 const Tensor& src_view, int64_t sd) {
  Geometry g(out, {&out, &idx_view, &src_view});
  ClDevice& device = device_of(c);
  const char* e = word_type(out.dtype);
  std::ostringstream s;
  s << kDimsTypedef << "__kernel void take(__global " << e << "* in0, long off0, __global const "
    << cl_type(idx_view.dtype) << "* in1, long off1, __global const " << e << "* in2, long off2, long n, "
    << geometry_params(3) << ", long sd, __global const long* status) {\n"
    << "  long i = get_global_id(0);\n  if (i >= n || status[0] != 0) return;\n"
    << offset_code(3) << "  in0[o0] = in2[o2 + (long)in1[o1] * sd];\n}\n";
  std::string source = s.str();
  device.programs().kernel(source, "take");
  device.submit(stream, [&](const Queue& q) {
    run_index_check(c, q, check);
    if (g.numel == 0) return;
    Launch l(device, source, "take");
    l.tensor(out).tensor(idx_view).tensor(src_view).value<cl_long>(g.numel);
    geometry_args(l, g);
    l.value<cl_long>(sd).mem(q.status);
    l.enqueue(q, global_1d(g.numel), kLocalSize);
  });
}

// T with OUT's shape and the given element strides.
Tensor view(const Tensor& t, const sdk::TensorMeta& shape, const int64_t* strides) {
  Tensor v = t;
  v.rank = shape.rank;
  for (int d = 0; d < shape.rank; ++d) {
    v.shape[d] = shape.shape[d];
    v.strides[d] = strides[d];
  }
  return v;
}

void gather_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = op::gather::self(c);
  const Tensor& index = op::gather::index(c);
  const Tensor& out = op::gather::out(c);
  int dim = norm_dim(c, op::gather::dim(c), self.rank);
  int64_t size = self.rank ? self.shape[dim] : 1, sd = self.rank ? self.strides[dim] : 0;
  int64_t st[HAL_TENSOR_MAX_RANK] = {};
  for (int d = 0; d < self.rank; ++d) st[d] = d == dim ? 0 : self.strides[d];
  launch_take(c, stream, simple_check(index, "index", size), out, index, view(self, out, st), sd);
}

void index_select_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = op::index_select::self(c);
  const Tensor& index = op::index_select::index(c);
  const Tensor& out = op::index_select::out(c);
  int dim = norm_dim(c, op::index_select::dim(c), self.rank);
  int64_t size = self.rank ? self.shape[dim] : 1, sd = self.rank ? self.strides[dim] : 0;
  int64_t st[HAL_TENSOR_MAX_RANK] = {}, ist[HAL_TENSOR_MAX_RANK] = {};
  for (int d = 0; d < self.rank; ++d) st[d] = d == dim ? 0 : self.strides[d];
  if (self.rank) ist[dim] = index.rank ? index.strides[0] : 0;
  launch_take(c, stream, simple_check(index, "index", size), out, view(index, out, ist), view(self, out, st), sd);
}

void embedding_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& weight = op::embedding::weight(c);
  const Tensor& indices = op::embedding::indices(c);
  const Tensor& out = op::embedding::out(c);
  int64_t st[HAL_TENSOR_MAX_RANK] = {}, ist[HAL_TENSOR_MAX_RANK] = {};
  for (int d = 0; d < indices.rank; ++d) ist[d] = indices.strides[d];
  st[out.rank - 1] = weight.strides[1];
  launch_take(c, stream, simple_check(indices, "indices", weight.shape[0]), out, view(indices, out, ist),
              view(weight, out, st), weight.strides[0]);
}

// ---- scatters ------------------------------------------------------------------

// "copy_in": out = self over (out, self), skipped when a status is set.
std::string copy_in_source(const char* e) {
  std::ostringstream s;
  s << "__kernel void copy_in(__global " << e << "* in0, long off0, __global const " << e
    << "* in1, long off1, long n, " << geometry_params(2) << ", __global const long* status) {\n"
    << "  long i = get_global_id(0);\n  if (i >= n || status[0] != 0) return;\n"
    << offset_code(2) << "  in0[o0] = in1[o1];\n}\n";
  return s.str();
}

void enqueue_copy_in(ClDevice& device, const Queue& q, const std::string& source, const Tensor& out, const Tensor& self) {
  if (self.buffer == out.buffer && self.byte_offset == out.byte_offset) return;  // in place
  Geometry g(out, {&out, &self});
  if (g.numel == 0) return;
  Launch l(device, source, "copy_in");
  l.tensor(out).tensor(self).value<cl_long>(g.numel);
  geometry_args(l, g);
  l.mem(q.status);
  l.enqueue(q, global_1d(g.numel), kLocalSize);
}

// out = self; out[.., index[..j..], ..] (+)= src[..j..]: one work-item per
// index column (the indexed dim collapsed), walking j in order.
void scatter_impl(const CallPtr& call, sdk::Stream* stream, int64_t dim_attr, bool add) {
  const OpCall& c = *call;
  const Tensor& self = c.input(0);
  const Tensor& index = c.input(1);
  const Tensor& src = c.input(2);
  const Tensor& out = c.output(0);
  require_no_alias(c, out, {&index, &src});
  int dim = norm_dim(c, dim_attr, self.rank);
  int64_t size = self.rank ? self.shape[dim] : 1;
  sdk::TensorMeta col = index;
  int64_t m = 1, osd = 0, isd = 0, ssd = 0;
  if (index.rank) {
    m = index.shape[dim];
    col.shape[dim] = 1;
    osd = out.strides[dim];
    isd = index.strides[dim];
    ssd = src.strides[dim];
  }
  Tensor ov = view(out, col, out.strides), iv = view(index, col, index.strides), sv = view(src, col, src.strides);
  Geometry g(col, {&ov, &iv, &sv});
  ClDevice& device = device_of(c);
  const char* e = add ? cl_type(out.dtype) : word_type(out.dtype);
  std::string update = add ? (out.dtype == HAL_DTYPE_BOOL ? "(uchar)(in0[t] || v)" : std::string("(") + e + ")(in0[t] + v)") : "v";
  std::ostringstream s;
  s << cl_prelude({out.dtype}) << kDimsTypedef << copy_in_source(e) << "__kernel void scatter(__global " << e
    << "* in0, long off0, __global const " << cl_type(index.dtype) << "* in1, long off1, __global const " << e
    << "* in2, long off2, long n, " << geometry_params(3)
    << ", long m, long osd, long isd, long ssd, __global const long* status) {\n"
    << "  long i = get_global_id(0);\n  if (i >= n || status[0] != 0) return;\n"
    << offset_code(3) << "  for (long j = 0; j < m; ++j) {\n"
    << "    long t = o0 + (long)in1[o1 + j * isd] * osd;\n    " << e << " v = in2[o2 + j * ssd];\n"
    << "    in0[t] = " << update << ";\n  }\n}\n";
  std::string source = s.str();
  device.programs().kernel(source, "scatter");
  device.submit(stream, [&](const Queue& q) {
    run_index_check(c, q, simple_check(index, "index", size));
    enqueue_copy_in(device, q, source, out, self);
    if (g.numel == 0 || m == 0) return;
    Launch l(device, source, "scatter");
    l.tensor(ov).tensor(iv).tensor(sv).value<cl_long>(g.numel);
    geometry_args(l, g);
    l.value<cl_long>(m).value<cl_long>(osd).value<cl_long>(isd).value<cl_long>(ssd).mem(q.status);
    l.enqueue(q, global_1d(g.numel), kLocalSize);
  });
}
void scatter_kernel(const CallPtr& c, sdk::Stream* s) { scatter_impl(c, s, op::scatter::dim(*c), false); }
void scatter_add_kernel(const CallPtr& c, sdk::Stream* s) { scatter_impl(c, s, op::scatter_add::dim(*c), true); }

// out = self; out[indices[0][b], .., indices[K-1][b], :] (+)= values[b, :]:
// one work-item per element of the indexed slice, walking b in order.
void index_put_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = op::index_put::self(c);
  const Tensor& indices = op::index_put::indices(c);
  const Tensor& values = op::index_put::values(c);
  const Tensor& out = op::index_put::out(c);
  bool accumulate = op::index_put::accumulate(c);
  require_no_alias(c, out, {&indices, &values});
  int K = static_cast<int>(indices.shape[0]);
  int64_t B = K ? indices.numel() / K : 0;
  IndexCheck check{&indices, "indices", std::max<int64_t>(B, 1), {}, {}};
  for (int k = 0; k < K; ++k) check.lo.push_back(-self.shape[k]), check.hi.push_back(self.shape[k]);
  // values broadcast to B's shape + self.shape[K:].
  std::vector<int64_t> full_shape(indices.shape + 1, indices.shape + indices.rank);
  int nb = static_cast<int>(full_shape.size());
  full_shape.insert(full_shape.end(), self.shape + K, self.shape + self.rank);
  sdk::TensorMeta full;
  full.set_shape(full_shape);
  int64_t vst[HAL_TENSOR_MAX_RANK] = {};
  sdk::kernel::broadcast_byte_strides(values, full.rank, full.shape, vst);
  for (int d = 0; d < full.rank; ++d) vst[d] /= static_cast<int64_t>(values.element_size());
  int64_t slice = 1;
  for (int d = K; d < self.rank; ++d) slice *= self.shape[d];

  ClDevice& device = device_of(c);
  const char* e = accumulate ? cl_type(out.dtype) : word_type(out.dtype);
  std::string update = !accumulate ? "v"
                       : out.dtype == HAL_DTYPE_BOOL ? "(uchar)(in0[t] || v)"
                                                     : std::string("(") + e + ")(in0[t] + v)";
  std::ostringstream s;
  s << cl_prelude({out.dtype}) << kDimsTypedef << kOffsetOf << copy_in_source(e)
    << "__kernel void index_put(__global " << e << "* in0, long off0, __global const long* idx, long ioff, __global const "
    << e << "* val, long voff, long slice, long B, int K, int rank, dims_t shape, dims_t ost,\n"
    << "    int irank, dims_t ishape, dims_t ist, int nb, dims_t bshape, dims_t vst, __global const long* status) {\n"
    << "  long s = get_global_id(0);\n  if (s >= slice || status[0] != 0) return;\n"
    << "  long so = 0, sv = 0, rest = s;\n"
    << "  for (int d = rank - 1; d >= K; --d) {\n"
    << "    long i = rest % shape.v[d]; rest /= shape.v[d];\n"
    << "    so += i * ost.v[d]; sv += i * vst.v[nb + d - K];\n  }\n"
    << "  for (long b = 0; b < B; ++b) {\n"
    << "    long t = off0 + so;\n"
    << "    for (int k = 0; k < K; ++k) {\n"
    << "      long v = idx[ioff + offset_of(k * B + b, irank, ishape, ist)];\n"
    << "      if (v < 0) v += shape.v[k];\n      t += v * ost.v[k];\n    }\n"
    << "    " << e << " v = val[voff + sv + offset_of(b, nb, bshape, vst)];\n"
    << "    in0[t] = " << update << ";\n  }\n}\n";
  std::string source = s.str();
  device.programs().kernel(source, "index_put");
  device.submit(stream, [&](const Queue& q) {
    run_index_check(c, q, check);
    enqueue_copy_in(device, q, source, out, self);
    if (slice == 0 || B == 0) return;
    Launch l(device, source, "index_put");
    l.tensor(out).tensor(indices).tensor(values).value<cl_long>(slice).value<cl_long>(B).value<cl_int>(K);
    l.value<cl_int>(self.rank).value(dims(self.shape, self.rank)).value(dims(out.strides, out.rank));
    l.value<cl_int>(indices.rank).value(dims(indices.shape, indices.rank)).value(dims(indices.strides, indices.rank));
    l.value<cl_int>(nb).value(dims(indices.shape + 1, nb)).value(dims(vst, full.rank));
    l.mem(q.status);
    l.enqueue(q, global_1d(slice), kLocalSize);
  });
}

// grad_weight[w, d] = Σ over positions p with indices[p] == w of
// grad_output[p, d], in position order (0 for padding_idx; divided by the
// count when scale_grad_by_freq). One work-item per element of grad_weight.
void embedding_backward_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& grad = op::embedding_backward::grad_output(c);
  const Tensor& indices = op::embedding_backward::indices(c);
  const Tensor& out = op::embedding_backward::grad_weight(c);
  int64_t num = op::embedding_backward::num_weights(c);
  int64_t padding = op::embedding_backward::padding_idx(c);
  bool scale = op::embedding_backward::scale_grad_by_freq(c);
  int64_t D = grad.shape[grad.rank - 1], P = indices.numel();
  ClDevice& device = device_of(c);
  std::ostringstream s;
  s << cl_prelude({out.dtype}) << kDimsTypedef << kOffsetOf << "typedef " << cl_type(out.dtype) << " C;\n"
    << "__kernel void embedding_backward(__global C* out, long ooff, long os0, long os1, __global const C* grad, long goff,"
    << " int grank, dims_t gshape, dims_t gst, __global const " << cl_type(indices.dtype)
    << "* idx, long ioff, int irank, dims_t ishape, dims_t ist, long num, long D, long P, long padding, int scale,"
    << " __global const long* status) {\n"
    << "  long i = get_global_id(0);\n  if (i >= num * D || status[0] != 0) return;\n"
    << "  long w = i / D, d = i % D;\n  C acc = 0; long count = 0;\n"
    << "  for (long p = 0; p < P; ++p) {\n"
    << "    if ((long)idx[ioff + offset_of(p, irank, ishape, ist)] != w) continue;\n"
    << "    ++count;\n"
    << "    if (w != padding) acc += grad[goff + offset_of(p, grank - 1, gshape, gst) + d * gst.v[grank - 1]];\n  }\n"
    << "  if (scale && count > 0) acc = acc * ((C)1 / (C)count);\n"
    << "  out[ooff + w * os0 + d * os1] = acc;\n}\n";
  std::string source = s.str();
  device.programs().kernel(source, "embedding_backward");
  device.submit(stream, [&](const Queue& q) {
    run_index_check(c, q, simple_check(indices, "indices", num));
    if (num * D == 0) return;
    Launch l(device, source, "embedding_backward");
    l.tensor(out).value<cl_long>(out.strides[0]).value<cl_long>(out.strides[1]);
    l.tensor(grad).value<cl_int>(grad.rank).value(dims(grad.shape, grad.rank)).value(dims(grad.strides, grad.rank));
    l.tensor(indices).value<cl_int>(indices.rank).value(dims(indices.shape, indices.rank)).value(dims(indices.strides, indices.rank));
    l.value<cl_long>(num).value<cl_long>(D).value<cl_long>(P).value<cl_long>(padding).value<cl_int>(scale ? 1 : 0);
    l.mem(q.status);
    l.enqueue(q, global_1d(num * D), kLocalSize);
  });
}

// ---- nonzero ------------------------------------------------------------------------

// Two passes over chunks of the input: count per chunk, then each chunk
// writes its coordinates after the counts of the chunks before it.
void nonzero_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor& self = op::nonzero::self(c);
  const Tensor& out = op::nonzero::out(c);
  const Tensor& count = op::nonzero::count(c);
  constexpr int64_t kChunk = 4096;
  int64_t n = self.numel();
  int64_t chunks = std::max<int64_t>(1, (n + kChunk - 1) / kChunk);
  ClDevice& device = device_of(c);
  const char* t = cl_type(self.dtype);
  std::ostringstream s;
  s << cl_prelude({self.dtype}) << kDimsTypedef << kOffsetOf
    << "__kernel void nz_count(__global const " << t << "* in, long off, long n, int rank, dims_t shape, dims_t st,"
    << " long chunk, long chunks, __global long* counts) {\n"
    << "  long ch = get_global_id(0);\n  if (ch >= chunks) return;\n  long k = 0, end = min(n, (ch + 1) * chunk);\n"
    << "  for (long i = ch * chunk; i < end; ++i) k += in[off + offset_of(i, rank, shape, st)] != 0;\n"
    << "  counts[ch] = k;\n}\n"
    << "__kernel void nz_write(__global const " << t << "* in, long off, long n, int rank, dims_t shape, dims_t st,"
    << " long chunk, long chunks, __global const long* counts, __global long* out, long ooff, long os0, long os1,"
    << " __global long* count, long coff) {\n"
    << "  long ch = get_global_id(0);\n  if (ch >= chunks) return;\n  long row = 0;\n"
    << "  for (long j = 0; j < ch; ++j) row += counts[j];\n"
    << "  if (ch == chunks - 1) count[coff] = row + counts[ch];\n"
    << "  long end = min(n, (ch + 1) * chunk);\n"
    << "  for (long i = ch * chunk; i < end; ++i) {\n"
    << "    if (!(in[off + offset_of(i, rank, shape, st)] != 0)) continue;\n"
    << "    long rest = i;\n"
    << "    for (int d = rank - 1; d >= 0; --d) { out[ooff + row * os0 + d * os1] = rest % shape.v[d]; rest /= shape.v[d]; }\n"
    << "    ++row;\n  }\n}\n";
  std::string source = s.str();
  device.programs().kernel(source, "nz_count");
  cl_mem counts = device.scratch(static_cast<uint64_t>(chunks) * sizeof(cl_long));
  try {
    device.submit(stream, [&](const Queue& q) {
      auto common = [&](Launch& l) {
        l.tensor(self).value<cl_long>(n).value<cl_int>(self.rank).value(dims(self.shape, self.rank));
        l.value(dims(self.strides, self.rank)).value<cl_long>(kChunk).value<cl_long>(chunks);
      };
      {
        Launch l(device, source, "nz_count");
        common(l);
        l.mem(counts);
        l.enqueue(q, global_1d(chunks), kLocalSize);
      }
      Launch l(device, source, "nz_write");
      common(l);
      l.mem(counts).tensor(out).value<cl_long>(out.strides[0]).value<cl_long>(out.rank > 1 ? out.strides[1] : 0);
      l.tensor(count);
      l.enqueue(q, global_1d(chunks), kLocalSize);
    });
  } catch (...) {
    clReleaseMemObject(counts);
    throw;
  }
  clReleaseMemObject(counts);
}

// ---- sort, argsort, topk ----------------------------------------------------------------

// For every row of self along DIM: its first K elements in stable order
// (ascending with NaN last, or descending with NaN first) into VALUES (may
// be null) and their positions into INDICES.
void sort_rows(const OpCall& c, sdk::Stream* stream, int dim, int64_t k, bool descending, const Tensor* values,
               const Tensor& indices) {
  const Tensor& self = c.input(0);
  ReduceIter it = values ? ReduceIter(self, self.rank ? 1u << dim : 0u, {values, &indices})
                         : ReduceIter(self, self.rank ? 1u << dim : 0u, {&indices});
  int64_t n = self.rank ? self.shape[dim] : 1, rows = it.out_numel();
  int64_t sd = self.rank ? self.strides[dim] : 0;
  int64_t vsd = values && self.rank ? values->strides[dim] : 0, isd = self.rank ? indices.strides[dim] : 0;
  if (rows == 0 || k == 0) return;
  ClDevice& device = device_of(c);
  hal_dtype_e dt = self.dtype;
  bool fl = sdk::is_floating(dt);
  // "a goes before b"
  std::string before = descending ? (fl ? "((isnan(a) && !isnan(b)) || a > b)" : "(a > b)")
                                  : (fl ? "((!isnan(a) && isnan(b)) || a < b)" : "(a < b)");
  std::ostringstream s;
  s << cl_prelude({dt}) << kDimsTypedef << "typedef " << cl_type(dt) << " C;\n"
    << "int before(C a, C b) { return " << before << "; }\n"
    << "__kernel void sort_rows(__global const C* in, long in_off, __global C* vout, long off0, __global long* iout,"
    << " long off1, long rows, long n, long k, long sd, long vsd, long isd, int kept_rank, dims_t ksz, dims_t kin,"
    << " dims_t ko0, dims_t ko1, __global C* sv, __global long* si, int has_values) {\n"
    << "  long r = get_global_id(0);\n  if (r >= rows) return;\n"
    << "  long base = in_off, o0 = off0, o1 = off1, rest = r;\n"
    << "  for (int d = kept_rank - 1; d >= 0; --d) {\n"
    << "    long i = rest % ksz.v[d]; rest /= ksz.v[d];\n"
    << "    base += i * kin.v[d]; o0 += i * ko0.v[d]; o1 += i * ko1.v[d];\n  }\n"
    << "  __global C* av = sv + r * 2 * n; __global C* bv = av + n;\n"
    << "  __global long* ai = si + r * 2 * n; __global long* bi = ai + n;\n"
    << "  for (long j = 0; j < n; ++j) { av[j] = in[base + j * sd]; ai[j] = j; }\n"
    << "  for (long w = 1; w < n; w *= 2) {\n"
    << "    for (long lo = 0; lo < n; lo += 2 * w) {\n"
    << "      long mid = min(lo + w, n), hi = min(lo + 2 * w, n), x = lo, y = mid, o = lo;\n"
    << "      while (x < mid && y < hi) {\n"
    << "        if (before(av[y], av[x])) { bv[o] = av[y]; bi[o++] = ai[y++]; }\n"
    << "        else { bv[o] = av[x]; bi[o++] = ai[x++]; }\n      }\n"
    << "      while (x < mid) { bv[o] = av[x]; bi[o++] = ai[x++]; }\n"
    << "      while (y < hi) { bv[o] = av[y]; bi[o++] = ai[y++]; }\n    }\n"
    << "    __global C* tv = av; av = bv; bv = tv; __global long* ti = ai; ai = bi; bi = ti;\n  }\n"
    << "  for (long j = 0; j < k; ++j) {\n"
    << "    if (has_values) vout[o0 + j * vsd] = av[j];\n    iout[o1 + j * isd] = ai[j];\n  }\n}\n";
  std::string source = s.str();
  device.programs().kernel(source, "sort_rows");
  Dims ksz{}, kin{}, ko0{}, ko1{};
  for (int d = 0; d < it.kept_rank(); ++d) {
    ksz.v[d] = it.kept_size(d);
    kin.v[d] = it.kept_in_stride(d);
    ko0.v[d] = it.kept_out_stride(0, d);
    ko1.v[d] = values ? it.kept_out_stride(1, d) : 0;
  }
  uint64_t items = static_cast<uint64_t>(rows) * 2 * static_cast<uint64_t>(n);
  cl_mem sv = device.scratch(items * self.element_size());
  cl_mem si = nullptr;
  try {
    si = device.scratch(items * sizeof(cl_long));
    device.submit(stream, [&](const Queue& q) {
      Launch l(device, source, "sort_rows");
      l.tensor(self);
      if (values) l.tensor(*values);
      else l.mem(mem_or_null(indices.buffer)).value<cl_long>(0);
      l.tensor(indices);
      l.value<cl_long>(rows).value<cl_long>(n).value<cl_long>(k).value<cl_long>(sd).value<cl_long>(vsd);
      l.value<cl_long>(isd).value<cl_int>(it.kept_rank()).value(ksz).value(kin);
      // Without values, the indices are output 0 of the geometry.
      l.value(values ? ko0 : Dims{}).value(values ? ko1 : ko0);
      l.mem(sv).mem(si).value<cl_int>(values ? 1 : 0);
      l.enqueue(q, global_1d(rows), kLocalSize);
    });
  } catch (...) {
    clReleaseMemObject(sv);
    if (si) clReleaseMemObject(si);
    throw;
  }
  clReleaseMemObject(sv);
  clReleaseMemObject(si);
}

void sort_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  int dim = norm_dim(c, op::sort::dim(c), c.input(0).rank);
  int64_t n = c.input(0).rank ? c.input(0).shape[dim] : 1;
  sort_rows(c, stream, dim, n, op::sort::descending(c), &op::sort::values(c), op::sort::indices(c));
}

void argsort_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  int dim = norm_dim(c, op::argsort::dim(c), c.input(0).rank);
  int64_t n = c.input(0).rank ? c.input(0).shape[dim] : 1;
  sort_rows(c, stream, dim, n, op::argsort::descending(c), nullptr, op::argsort::indices(c));
}

void topk_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  int dim = norm_dim(c, op::topk::dim(c), c.input(0).rank);
  sort_rows(c, stream, dim, op::topk::k(c), op::topk::largest(c), &op::topk::values(c), op::topk::indices(c));
}

}  // namespace

void register_index_ops(sdk::OpRegistry& ops) {
  const uint64_t F = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);
  const uint64_t numeric = F | sdk::kIntDtypes;
  const uint64_t all = numeric | HAL_DTYPE_BIT(HAL_DTYPE_BOOL);
  ops.add<op::embedding>(&embedding_kernel, all);
  ops.add<op::embedding_backward>(&embedding_backward_kernel, F);
  ops.add<op::index_select>(&index_select_kernel, all);
  ops.add<op::gather>(&gather_kernel, all);
  ops.add<op::scatter>(&scatter_kernel, all);
  ops.add<op::scatter_add>(&scatter_add_kernel, numeric);
  ops.add<op::index_put>(&index_put_kernel, all);
  ops.add<op::nonzero>(&nonzero_kernel, all);
  ops.add<op::topk>(&topk_kernel, numeric);
  ops.add<op::sort>(&sort_kernel, all);
  ops.add<op::argsort>(&argsort_kernel, all);
}

}  // namespace hal::opencl
