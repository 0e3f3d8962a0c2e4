#include "nn_common.hpp"

#include <sstream>

namespace hal::opencl::nn {

std::string row_prelude(hal_dtype_e dtype) {
  std::ostringstream s;
  bool f64 = dtype == HAL_DTYPE_FLOAT64;
  s << cl_prelude({dtype}) << "typedef " << cl_type(dtype) << " T;\n"
    << "typedef " << (f64 ? "double" : "float") << " A;\n"
    << "#define WG " << kWorkGroup << "\n"
    << R"(
A wg_sum(A v, __local A* s) {
  int l = get_local_id(0);
  s[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w >>= 1) {
    if (l < w) s[l] += s[l + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  A r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
A wg_max(A v, __local A* s) {
  int l = get_local_id(0);
  s[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w >>= 1) {
    if (l < w && s[l + w] > s[l]) s[l] = s[l + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  A r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
)";
  return s.str();
}

Dense& Dense::operator=(Dense&& o) noexcept {
  std::swap(mem, o.mem);
  std::swap(off, o.off);
  std::swap(scratch_, o.scratch_);
  std::swap(unpack_, o.unpack_);
  return *this;
}

Dense::~Dense() {
  if (scratch_ != nullptr) clReleaseMemObject(scratch_);
}

namespace {

// Strided copy between a tensor and its dense image; skipped (unpacking)
// when the queue has a data error.
std::string copy_source(hal_dtype_e dtype) {
  std::ostringstream s;
  s << cl_prelude({dtype}) << kDimsTypedef << "__kernel void copy(__global " << cl_type(dtype)
    << "* in0, long off0, __global const " << cl_type(dtype) << "* in1, long off1, long n, " << geometry_params(2)
    << ", __global const long* status, int guarded) {\n"
    << "  long i = get_global_id(0);\n  if (i >= n) return;\n  if (guarded && status[0] != 0) return;\n"
    << offset_code(2) << "  in0[o0] = in1[o1];\n}\n";
  return s.str();
}

// A's OpenCL type of DTYPE's reductions.
hal_dtype_e acc_dtype(hal_dtype_e dtype) { return dtype == HAL_DTYPE_FLOAT64 ? HAL_DTYPE_FLOAT64 : HAL_DTYPE_FLOAT32; }

std::string sum_source(hal_dtype_e dtype) {
  std::ostringstream s;
  s << row_prelude(dtype) << "#define NG " << kPartialGroups << "\n" << R"(
__kernel void partial_sum(__global const A* src, long off, long n, __global A* partial, int slot) {
  __local A red[WG];
  long g = get_group_id(0);
  A acc = 0;
  for (long i = g * WG + get_local_id(0); i < n; i += (long)NG * WG) acc += src[off + i];
  acc = wg_sum(acc, red);
  if (get_local_id(0) == 0) partial[slot * NG + g] = acc;
}
__kernel void final_sum(__global const A* partial, __global T* out, long ooff, int mode, A divisor,
                        __global const long* status) {
  if (get_global_id(0) != 0 || status[0] != 0) return;
  A s0 = 0, s1 = 0;
  for (int g = 0; g < NG; ++g) { s0 += partial[g]; s1 += partial[NG + g]; }
  out[ooff] = (T)(mode == 1 ? s0 : mode == 2 ? s0 / s1 : s0 / divisor);
}
)";
  return s.str();
}

Tensor dense_meta(const Tensor& t) {
  Tensor c = t;
  c.set_contiguous_strides();
  return c;
}

}  // namespace

void Ops::copy(hal_dtype_e dtype, const Tensor& strided, cl_mem mem, bool pack) {
  Tensor dense = dense_meta(strided);
  const Tensor& dst = pack ? dense : strided;
  const Tensor& src = pack ? strided : dense;
  Geometry g(strided, {&dst, &src});
  Launch l(device_, copy_source(dtype), "copy");
  if (pack) l.mem(mem).value<cl_long>(0).tensor(strided);
  else l.tensor(strided).mem(mem).value<cl_long>(0);
  l.value<cl_long>(g.numel);
  geometry_args(l, g);
  l.mem(q_.status).value<cl_int>(pack ? 0 : 1);
  l.enqueue(q_, global_1d(g.numel), kLocalSize);
}

Dense Ops::in(const Tensor* t) {
  Dense d;
  d.mem = q_.status;  // absent or empty: any buffer, offset -1
  d.off = -1;
  if (t == nullptr) return d;
  if (t->numel() == 0) return d;
  if (t->is_contiguous()) {
    d.mem = mem_or_null(t->buffer);
    d.off = static_cast<cl_long>(t->byte_offset / t->element_size());
    return d;
  }
  d.scratch_ = device_.scratch(static_cast<uint64_t>(t->numel()) * t->element_size());
  d.mem = d.scratch_;
  d.off = 0;
  copy(t->dtype, *t, d.mem, true);
  return d;
}

Dense Ops::out(const Tensor& t) {
  Dense d = in(nullptr);
  if (t.numel() == 0) return d;
  if (t.is_contiguous()) {
    d.mem = mem_or_null(t.buffer);
    d.off = static_cast<cl_long>(t.byte_offset / t.element_size());
    return d;
  }
  d.scratch_ = device_.scratch(static_cast<uint64_t>(t.numel()) * t.element_size());
  d.mem = d.scratch_;
  d.off = 0;
  d.unpack_ = &t;
  return d;
}

void Ops::finish(Dense& d) {
  if (d.unpack_ == nullptr) return;
  copy(d.unpack_->dtype, *d.unpack_, d.mem, false);
  d.unpack_ = nullptr;
}

cl_mem Ops::temp(hal_dtype_e dtype, int64_t n) {
  cl_mem m = device_.scratch(static_cast<uint64_t>(std::max<int64_t>(n, 1)) * sdk::dtype_size(dtype));
  temps_.push_back(m);
  return m;
}

Ops::~Ops() {
  for (cl_mem m : temps_) clReleaseMemObject(m);
}

void Ops::partial_sum(hal_dtype_e dtype, cl_mem src, cl_long src_off, int64_t n, cl_mem partial, int slot) {
  Launch l(device_, sum_source(dtype), "partial_sum");
  l.mem(src).value<cl_long>(src_off).value<cl_long>(n).mem(partial).value<cl_int>(slot);
  l.enqueue(q_, kPartialGroups * kWorkGroup, kWorkGroup);
}

void Ops::final_sum(hal_dtype_e dtype, cl_mem partial, const Dense& out, int mode, double divisor) {
  Launch l(device_, sum_source(dtype), "final_sum");
  l.mem(partial);
  arg(l, out).value<cl_int>(mode).scalar(acc_dtype(dtype), divisor).mem(q_.status);
  l.enqueue(q_, 1);
}

void run_dense(const CallPtr& call, sdk::Stream* stream, const std::string& source, const char* kernel,
               int64_t items, const std::function<void(Launch&)>& extra) {
  const OpCall& c = *call;
  if (items == 0) return;
  ClDevice& device = device_of(c);
  device.submit(stream, [&](const Queue& q) {
    Ops ops(device, q);
    std::vector<Dense> ins, outs;
    ins.reserve(c.input_count());
    outs.reserve(c.output_count());
    for (size_t i = 0; i < c.input_count(); ++i) ins.push_back(ops.in(c.optional_input(i)));
    for (size_t i = 0; i < c.output_count(); ++i) outs.push_back(ops.out(c.output(i)));
    Launch l(device, source, kernel);
    for (const Dense& d : ins) Ops::arg(l, d);
    for (const Dense& d : outs) Ops::arg(l, d);
    extra(l);
    l.enqueue(q, global_1d(items), kLocalSize);
    for (Dense& d : outs) ops.finish(d);
  });
}

int reduction_code(const std::string& r) { return r == "none" ? 0 : r == "mean" ? 1 : 2; }

}  // namespace hal::opencl::nn
