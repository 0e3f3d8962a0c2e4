// Suites the runner carries itself, used only while no conformance/ops/*.cc
// suite covers the op (all_suites() prefers those): they let the runner,
// its tests (conformance.catches_wrong_kernel) and a vendor's first op work
// before the op groups' suites exist. Same contract as any suite.
#include "runner/session.hpp"

namespace hal::conformance {
namespace {

std::vector<OpCase> add_cases(hal_dtype_e dt) {
  std::vector<OpCase> cs;
  cs.push_back(OpCase("same shape [3,5]").in(random(dt, {3, 5}, 1)).in(random(dt, {3, 5}, 2)));
  cs.push_back(OpCase("broadcast [4,1]x[3]").in(random(dt, {4, 1}, 3)).in(random(dt, {3}, 4)));
  cs.push_back(OpCase("0-d").in(random(dt, {}, 5)).in(random(dt, {}, 6)));
  cs.push_back(OpCase("0-d with [2,3]").in(random(dt, {}, 7)).in(random(dt, {2, 3}, 8)));
  cs.push_back(OpCase("zero-size [0,3]x[3]").in(random(dt, {0, 3}, 9)).in(random(dt, {3}, 10)));
  if (dt != HAL_DTYPE_BOOL) {
    hal::Attr alpha = is_float(dt) ? hal::Attr::f("alpha", 0.5) : hal::Attr::i("alpha", 3);
    cs.push_back(OpCase("alpha").in(random(dt, {2, 3, 4}, 11)).in(random(dt, {3, 1}, 12)).attr(alpha));
  }
  cs.push_back(OpCase("bad broadcast [3]x[4]")
                   .in(random(dt, {3}, 13))
                   .in(random(dt, {4}, 14))
                   .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4})}, {"add"}));
  return cs;
}

std::vector<HostTensor> add_ref(const OpCase& c) {
  const HostTensor& a = c.input(0);
  const HostTensor& b = c.input(1);
  double alpha = c.attr_float("alpha", 1.0);
  HostTensor out(promote(a.dtype, b.dtype), *broadcast_shape(a.shape, b.shape));
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, out.shape);
    out.values[i] = broadcast_at(a, idx) + alpha * broadcast_at(b, idx);
  }
  return {out};
}

}  // namespace

const std::vector<OpSuite>& fallback_suites() {
  static const std::vector<OpSuite> s = {OpSuite{"add", add_cases, add_ref}};
  return s;
}

}  // namespace hal::conformance
