#include "cl_kernel.hpp"

#include <sstream>

namespace hal::opencl {

const char* cl_type(hal_dtype_e dtype) {
  switch (dtype) {
    case HAL_DTYPE_FLOAT32: return "float";
    case HAL_DTYPE_FLOAT64: return "double";
    case HAL_DTYPE_INT8: return "char";
    case HAL_DTYPE_UINT8: return "uchar";
    case HAL_DTYPE_INT16: return "short";
    case HAL_DTYPE_INT32: return "int";
    case HAL_DTYPE_INT64: return "long";
    case HAL_DTYPE_BOOL: return "uchar";
    default: sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, "dtype ", sdk::dtype_name(dtype), " has no OpenCL kernel type");
  }
}

std::string cl_prelude(const std::vector<hal_dtype_e>& dtypes) {
  for (hal_dtype_e d : dtypes)
    if (d == HAL_DTYPE_FLOAT64) return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  return "";
}
std::string cl_prelude(std::initializer_list<hal_dtype_e> dtypes) { return cl_prelude(std::vector<hal_dtype_e>(dtypes)); }

Launch::Launch(ClDevice& device, const std::string& source, const std::string& name, const std::string& options)
    : entry_(device.programs().kernel(source, name, options)), lock_(entry_.mutex), name_(name) {}

Launch& Launch::raw(size_t size, const void* value) {
  cl_check(clSetKernelArg(entry_.kernel, index_, size, value), "clSetKernelArg", " (kernel '", name_, "', argument ",
           index_, ")");
  ++index_;
  return *this;
}

Launch& Launch::tensor(const Tensor& t) {
  mem(mem_or_null(t.buffer));
  return value<cl_long>(static_cast<cl_long>(t.byte_offset / t.element_size()));
}

Launch& Launch::optional_tensor(const Tensor* t, cl_mem placeholder) {
  if (t != nullptr) return tensor(*t);
  mem(placeholder);
  return value<cl_long>(-1);
}

Launch& Launch::scalar(hal_dtype_e dtype, double v) {
  switch (dtype) {
    case HAL_DTYPE_FLOAT32: return value<cl_float>(static_cast<cl_float>(v));
    case HAL_DTYPE_FLOAT64: return value<cl_double>(v);
    case HAL_DTYPE_INT8: return value<cl_char>(static_cast<cl_char>(v));
    case HAL_DTYPE_UINT8: case HAL_DTYPE_BOOL: return value<cl_uchar>(static_cast<cl_uchar>(v));
    case HAL_DTYPE_INT16: return value<cl_short>(static_cast<cl_short>(v));
    case HAL_DTYPE_INT32: return value<cl_int>(static_cast<cl_int>(v));
    case HAL_DTYPE_INT64: return value<cl_long>(static_cast<cl_long>(v));
    default: sdk::fail(HAL_STATUS_UNSUPPORTED_DTYPE, "dtype ", sdk::dtype_name(dtype), " has no OpenCL kernel type");
  }
}

Launch& Launch::scalar(hal_dtype_e dtype, const sdk::Scalar& v) {
  if (v.is_integral() && dtype == HAL_DTYPE_INT64) return value<cl_long>(v.to_int());
  if (v.is_integral() && !sdk::is_floating(dtype)) return scalar(dtype, static_cast<double>(v.to_int()));
  return scalar(dtype, v.to_double());
}

void Launch::enqueue(const Queue& q, size_t global, size_t local) {
  if (global == 0) return;
  enqueue(q, 1, &global, local ? &local : nullptr);
}

void Launch::enqueue(const Queue& q, cl_uint dims, const size_t* global, const size_t* local) {
  for (cl_uint d = 0; d < dims; ++d)
    if (global[d] == 0) return;
  cl_check(clEnqueueNDRangeKernel(q.queue, entry_.kernel, dims, nullptr, global, local, 0, nullptr, nullptr),
           "clEnqueueNDRangeKernel", " (kernel '", name_, "')");
  lock_.unlock();
}

Geometry::Geometry(const sdk::TensorMeta& shape, const std::vector<const Tensor*>& ops) : operands(ops.size()) {
  if (ops.size() > kMaxOperands)
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, ops.size(), " operands exceed the OpenCL kernels' ", kMaxOperands);
  int64_t full[kMaxOperands][HAL_TENSOR_MAX_RANK] = {};
  for (size_t k = 0; k < ops.size(); ++k)
    if (ops[k] != nullptr) sdk::kernel::broadcast_byte_strides(*ops[k], shape.rank, shape.shape, full[k]);
  sdk::kernel::StridedLoop<kMaxOperands> loop(shape.rank, shape.shape, full);
  rank = loop.rank();
  numel = loop.numel();
  for (int d = 0; d < rank; ++d) {
    size[d] = loop.size(d);
    for (size_t k = 0; k < ops.size(); ++k)
      stride[k][d] = ops[k] == nullptr ? 0 : loop.byte_stride(k, d) / static_cast<int64_t>(ops[k]->element_size());
  }
}

bool Geometry::all_linear() const {
  for (size_t k = 0; k < operands; ++k)
    if (!linear(k)) return false;
  return true;
}

const char* const kDimsTypedef = "typedef struct { long v[8]; } dims_t;\n";

std::string offset_code(size_t operands) {
  std::ostringstream s;
  for (size_t k = 0; k < operands; ++k) s << "  long o" << k << " = off" << k << ";\n";
  s << "  if (linear) {\n";
  for (size_t k = 0; k < operands; ++k) s << "    o" << k << " += i;\n";
  s << "  } else {\n    long rest = i;\n    for (int d = rank - 1; d >= 0; --d) {\n"
    << "      long c = rest % sz.v[d]; rest /= sz.v[d];\n";
  for (size_t k = 0; k < operands; ++k) s << "      o" << k << " += c * st" << k << ".v[d];\n";
  s << "    }\n  }\n";
  return s.str();
}

std::string geometry_params(size_t operands) {
  std::string s = "int rank, int linear, dims_t sz";
  for (size_t k = 0; k < operands; ++k) s += ", dims_t st" + std::to_string(k);
  return s;
}

void geometry_args(Launch& launch, const Geometry& g) {
  launch.value<cl_int>(g.rank).value<cl_int>(g.all_linear() ? 1 : 0);
  Dims sz{};
  for (int d = 0; d < 8; ++d) sz.v[d] = d < g.rank ? g.size[d] : 1;
  launch.value(sz);
  for (size_t k = 0; k < g.operands; ++k) {
    Dims st{};
    for (int d = 0; d < 8; ++d) st.v[d] = d < g.rank ? g.stride[k][d] : 0;
    launch.value(st);
  }
}

}  // namespace hal::opencl
