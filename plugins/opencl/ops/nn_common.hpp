// OpenCL plugin, "nn" and "transformer" groups: what their kernels share.
// Operands reach the row kernels as dense row-major arrays (a tensor's own
// buffer when it is contiguous, else a scratch copy packed before / unpacked
// after the op's kernels), so the kernels index rows with plain arithmetic;
// a row is reduced by one work-group of kWorkGroup items (local-memory tree).
#ifndef HAL_PLUGINS_OPENCL_OPS_NN_COMMON_HPP_
#define HAL_PLUGINS_OPENCL_OPS_NN_COMMON_HPP_

#include <functional>
#include <string>
#include <vector>

#include "cl_kernel.hpp"

namespace hal::opencl::nn {

// Work-group size of the row kernels (the "WG" macro of kRowHelpers).
inline constexpr size_t kWorkGroup = 64;
// Work-groups of the first stage of a reduction to a scalar.
inline constexpr size_t kPartialGroups = 32;

// OpenCL C: "typedef <T> T; typedef <A> A;" (A: float, double for float64),
// the WG macro and work-group reductions wg_sum / wg_max (every item of the
// group calls them with its value; each gets the result).
std::string row_prelude(hal_dtype_e dtype);

// A tensor's elements as a dense row-major array on the device: MEM and
// element offset OFF (-1 for an absent optional input or an empty tensor,
// so kernels test "off >= 0" before touching one).
class Dense {
 public:
  Dense() = default;
  Dense(Dense&& o) noexcept { *this = std::move(o); }
  Dense& operator=(Dense&& o) noexcept;
  ~Dense();

  cl_mem mem = nullptr;
  cl_long off = -1;
  bool present() const { return off >= 0; }

 private:
  friend class Ops;
  cl_mem scratch_ = nullptr;        // owned copy, released after enqueuing
  const Tensor* unpack_ = nullptr;  // output to copy SCRATCH_ into at finish()
};

// The commands of one op on queue Q (inside ClDevice::submit).
class Ops {
 public:
  Ops(ClDevice& device, const Queue& q) : device_(device), q_(q) {}
  ClDevice& device() const { return device_; }
  const Queue& queue() const { return q_; }

  // An input: T itself when contiguous, else a packed copy (queued now).
  // nullptr: absent.
  Dense in(const Tensor* t);
  Dense in(const Tensor& t) { return in(&t); }
  // An output: T itself when contiguous, else scratch that finish() copies
  // into T — unless a data error was reported on the queue.
  Dense out(const Tensor& t);
  void finish(Dense& d);
  // A scratch array of N elements of DTYPE, released with this object.
  cl_mem temp(hal_dtype_e dtype, int64_t n);

  // Launch arguments of D (cl_mem, long offset).
  static Launch& arg(Launch& l, const Dense& d) { return l.mem(d.mem).value<cl_long>(d.off); }

  // Sums of N elements of SRC (dtype's A type, dense) into
  // partial[slot * kPartialGroups ...] (PARTIAL from temp(A, 2 * kPartialGroups)).
  void partial_sum(hal_dtype_e dtype, cl_mem src, cl_long src_off, int64_t n, cl_mem partial, int slot);
  // out[0] = s0 (MODE 1, "sum"), s0 / s1 (MODE 2), s0 / DIVISOR (MODE 3),
  // where s<k> is the total of partial slot k; writes nothing after a data error.
  void final_sum(hal_dtype_e dtype, cl_mem partial, const Dense& out, int mode, double divisor);

  ~Ops();

 private:
  void copy(hal_dtype_e dtype, const Tensor& strided, cl_mem mem, bool pack);
  ClDevice& device_;
  const Queue& q_;
  std::vector<cl_mem> temps_;
};

// Runs KERNEL of SOURCE over ITEMS work items (none when 0) on STREAM with
// every input of CALL, then every output, as dense (buffer, offset) pairs (an
// absent optional input has offset -1), then what EXTRA appends.
void run_dense(const CallPtr& call, sdk::Stream* stream, const std::string& source, const char* kernel,
               int64_t items, const std::function<void(Launch&)>& extra);

// "none" 0, "mean" 1, "sum" 2.
int reduction_code(const std::string& r);

// The group's other registration functions (norm.cc, loss.cc).
void register_norm_ops(sdk::OpRegistry& ops);
void register_loss_ops(sdk::OpRegistry& ops);

}  // namespace hal::opencl::nn

#endif  // HAL_PLUGINS_OPENCL_OPS_NN_COMMON_HPP_
