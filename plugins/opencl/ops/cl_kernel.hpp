// OpenCL plugin: what every kernel launch shares — OpenCL C names of HAL
// dtypes, setting arguments (tensors pass as cl_mem + element offset) and
// enqueueing on the call's stream, and the strided geometry of N operands
// (the SDK's StridedLoop: broadcasting and dim merging, as on the CPU).
#ifndef HAL_PLUGINS_OPENCL_OPS_CL_KERNEL_HPP_
#define HAL_PLUGINS_OPENCL_OPS_CL_KERNEL_HPP_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../cl_device.hpp"
#include "hal/sdk/kernel/strided.hpp"
#include "hal/sdk/plugin.hpp"

namespace hal::opencl {

using sdk::OpCall;
using sdk::Tensor;
using CallPtr = std::shared_ptr<const OpCall>;

inline ClDevice& device_of(const OpCall& call) { return static_cast<ClDevice&>(call.device()); }

// OpenCL C storage type of DTYPE ("float", "long", "uchar" for bool).
const char* cl_type(hal_dtype_e dtype);
// "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" when any of DTYPES is
// float64, else "".
std::string cl_prelude(std::initializer_list<hal_dtype_e> dtypes);
// The same for a list built at run time.
std::string cl_prelude(const std::vector<hal_dtype_e>& dtypes);

// One kernel launch. Holds the kernel's lock from construction to enqueue
// (clSetKernelArg is not thread-safe per kernel): build it, add the
// arguments in order and enqueue, all inside ClDevice::submit.
class Launch {
 public:
  // Compiles (or finds) kernel NAME of SOURCE; a build failure throws with
  // the build log.
  Launch(ClDevice& device, const std::string& source, const std::string& name, const std::string& options = "");

  Launch& mem(cl_mem m) { return raw(sizeof(cl_mem), &m); }
  // TENSOR's buffer and element offset: two arguments (global T*, long).
  Launch& tensor(const Tensor& t);
  // Absent optional tensors still take the two slots: any buffer, offset -1.
  Launch& optional_tensor(const Tensor* t, cl_mem placeholder);
  template <class T>
  Launch& value(const T& v) {
    return raw(sizeof(T), &v);
  }
  // V converted to DTYPE's OpenCL type (an attribute given as double).
  Launch& scalar(hal_dtype_e dtype, double v);
  Launch& scalar(hal_dtype_e dtype, const sdk::Scalar& v);
  // BYTES of __local memory.
  Launch& local(size_t bytes) { return raw(bytes, nullptr); }

  // 1-D over GLOBAL items (no launch when 0); LOCAL 0 lets the driver pick.
  void enqueue(const Queue& q, size_t global, size_t local = 0);
  // DIMS-D; GLOBAL must be a multiple of LOCAL when LOCAL is given.
  void enqueue(const Queue& q, cl_uint dims, const size_t* global, const size_t* local);

 private:
  Launch& raw(size_t size, const void* value);
  KernelEntry& entry_;
  std::unique_lock<std::mutex> lock_;
  std::string name_;
  cl_uint index_ = 0;
};

inline size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Up to kMaxOperands tensors walked over one shape: the SDK's merged
// geometry, in elements. Kernels take it as runtime arguments (so one
// program serves every shape): "int rank, int linear, dims_t sz, dims_t
// st0, ...". LINEAR is 1 when every operand's elements follow the linear
// index, so the kernel skips the index arithmetic.
inline constexpr size_t kMaxOperands = 8;
struct Dims {
  cl_long v[HAL_TENSOR_MAX_RANK];
};
struct Geometry {
  int rank = 0;  // merged rank (0 for a single element or an empty shape)
  int64_t numel = 0;
  int64_t size[HAL_TENSOR_MAX_RANK] = {};
  int64_t stride[kMaxOperands][HAL_TENSOR_MAX_RANK] = {};  // elements
  size_t operands = 0;

  // SHAPE: the iteration shape; OPERANDS broadcast to it (nullptr entries
  // get stride 0).
  Geometry(const sdk::TensorMeta& shape, const std::vector<const Tensor*>& operands);
  bool linear(size_t k) const { return rank == 0 || (rank == 1 && stride[k][0] == 1); }
  bool all_linear() const;
};

// OpenCL C: the dims_t typedef (emit once per program).
extern const char* const kDimsTypedef;
// OpenCL C statements declaring the element offsets "o<k>" of the
// GEOMETRY's operands for linear index "i" (from arguments "off<k>").
std::string offset_code(size_t operands);
// "int rank, int linear, dims_t sz, dims_t st0, ..., dims_t st<N-1>"
std::string geometry_params(size_t operands);
void geometry_args(Launch& launch, const Geometry& g);

// Work-group size of 1-D launches. Fixed, so drivers that compile a kernel
// per work-group size (PoCL) compile it once.
inline constexpr size_t kLocalSize = 64;
inline size_t global_1d(int64_t n) { return round_up(static_cast<size_t>(n), kLocalSize); }

}  // namespace hal::opencl

#endif  // HAL_PLUGINS_OPENCL_OPS_CL_KERNEL_HPP_
