// OpenCL kernels of the "factorization" group (kernels/factorization.cl):
// Cholesky, LU with partial pivoting and triangular solves, one work item per
// matrix (per right-hand side for the solve), computed in float (double for
// float64). Simple and exact to the algorithm; a device-wide blocked
// factorization is future work. The eigen-, singular-value and QR
// decompositions are not claimed (they take the CPU fallback).
#include <functional>
#include <string>
#include <vector>

#include "cl_sources.hpp"
#include "hal/sdk/kernel/batch.hpp"
#include "hal/sdk/op_catalog.hpp"
#include "nn_common.hpp"
#include "opencl_ops.hpp"

namespace hal::opencl {
namespace {

namespace op = sdk::op;

std::string factorization_source(hal_dtype_e dtype) { return nn::row_prelude(dtype) + cl_source::factorization; }

using sdk::kernel::matrix_batch;

// Runs KERNEL over ITEMS work items with the call's operands, then what ARGS appends.
void run(const CallPtr& call, sdk::Stream* stream, const char* kernel, int64_t items,
         const std::function<void(Launch&)>& args) {
  nn::run_dense(call, stream, factorization_source(call->input(0).dtype), kernel, items, args);
}

void cholesky_kernel(const CallPtr& call, sdk::Stream* stream) {
  const Tensor& a = op::linalg_cholesky::self(*call);
  const int64_t batch = matrix_batch(a), n = a.shape[a.rank - 1];
  const cl_int upper = op::linalg_cholesky::upper(*call) ? 1 : 0;
  run(call, stream, "factor_cholesky", batch,
      [&](Launch& l) { l.value<cl_long>(batch).value<cl_long>(n).value<cl_int>(upper); });
}

void lu_factor_kernel(const CallPtr& call, sdk::Stream* stream) {
  const Tensor& a = op::linalg_lu_factor::self(*call);
  const int64_t batch = matrix_batch(a), m = a.shape[a.rank - 2], n = a.shape[a.rank - 1];
  // An empty matrix still reports info = 0 for each of the batch.
  run(call, stream, "factor_lu", batch, [&](Launch& l) {
    l.value<cl_long>(batch).value<cl_long>(m).value<cl_long>(n);
  });
}

// An operand's batch strides (in matrices) over the output's batch dims,
// right-aligned in 8 slots: 0 where it broadcasts.
cl_long8 batch_strides(const Tensor& t, const Tensor& out) {
  const std::vector<int64_t> strides = sdk::kernel::broadcast_batch_strides(t, out);
  cl_long8 s{};
  for (size_t d = strides.size(), slot = 8; d > 0; --d, --slot) s.s[slot - 1] = strides[d - 1];
  return s;
}

void solve_triangular_kernel(const CallPtr& call, sdk::Stream* stream) {
  const OpCall& c = *call;
  const Tensor &a = op::linalg_solve_triangular::self(c), &b = op::linalg_solve_triangular::b(c);
  const Tensor& x = op::linalg_solve_triangular::x(c);
  const bool left = op::linalg_solve_triangular::left(c);
  const int64_t n = a.shape[a.rank - 1], batch = matrix_batch(x);
  const int64_t r = left ? x.shape[x.rank - 1] : x.shape[x.rank - 2];
  cl_long8 dims;
  for (int i = 0; i < 8; ++i) dims.s[i] = 1;
  for (int d = x.rank - 3, slot = 7; d >= 0; --d, --slot) dims.s[slot] = x.shape[d];
  const cl_long8 as = batch_strides(a, x), bs = batch_strides(b, x);
  run(call, stream, "factor_solve_triangular", batch * r, [&](Launch& l) {
    l.value<cl_long>(batch).value<cl_long>(n).value<cl_long>(r);
    l.value<cl_int>(op::linalg_solve_triangular::upper(c) ? 1 : 0).value<cl_int>(left ? 1 : 0);
    l.value<cl_int>(op::linalg_solve_triangular::unitriangular(c) ? 1 : 0);
    l.value<cl_long8>(dims).value<cl_long8>(as).value<cl_long8>(bs);
  });
}

}  // namespace

void register_factorization_ops(sdk::OpRegistry& ops) {
  ops.add<op::linalg_cholesky>(&cholesky_kernel);
  ops.add<op::linalg_lu_factor>(&lu_factor_kernel);
  ops.add<op::linalg_solve_triangular>(&solve_triangular_kernel);
}

}  // namespace hal::opencl
