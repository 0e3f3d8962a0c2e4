// hal-conformance: the "reduction" ops — cases and double-precision references.
//
// The references group the input's values by output element (in row-major
// order of the reduced dims) and fold each group with a plain loop.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

using hal::Attr;

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- reference helpers ----------------------------------------------------------

// Which dims of a rank-RANK tensor DIMS reduces ([] = all).
std::vector<bool> reduced_dims(int rank, const std::vector<int64_t>& dims) {
  std::vector<bool> r(static_cast<size_t>(rank), dims.empty());
  for (int64_t d : dims)
    if (rank > 0) r[static_cast<size_t>(d < 0 ? d + rank : d)] = true;
  return r;
}

// The input's values grouped by output element, and the output shape.
struct Groups {
  std::vector<int64_t> shape;
  std::vector<std::vector<double>> values;
};

Groups group(const HostTensor& x, const std::vector<bool>& reduced, bool keepdim) {
  Groups g;
  std::vector<int64_t> kept;  // kept dims of x, in order
  for (int d = 0; d < x.rank(); ++d) {
    if (!reduced[d]) {
      g.shape.push_back(x.shape[d]);
      kept.push_back(d);
    } else if (keepdim) {
      g.shape.push_back(1);
    }
  }
  g.values.resize(static_cast<size_t>(HostTensor::count(g.shape)));
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, x.shape);
    int64_t o = 0;
    for (int64_t d : kept) o = o * x.shape[d] + idx[d];
    g.values[static_cast<size_t>(o)].push_back(x.values[static_cast<size_t>(i)]);
  }
  return g;
}

Groups group(const OpCase& c) {
  const HostTensor& x = c.input(0);
  return group(x, reduced_dims(x.rank(), c.attr_ints("dim", {})), c.attr_bool("keepdim", false));
}

// OUT (dtype DT, the groups' shape) with F applied to each group.
HostTensor fold(const Groups& g, hal_dtype_e dt, const std::function<double(const std::vector<double>&)>& f) {
  HostTensor out(dt, g.shape);
  for (size_t i = 0; i < g.values.size(); ++i) out.values[i] = f(g.values[i]);
  return out;
}

// sum/prod/cumsum: the 'dtype' attribute, else int64 for integers and bool.
hal_dtype_e int64_rule(const OpCase& c) {
  hal_dtype_e in = c.input(0).dtype;
  return c.attr_dtype("dtype", is_float(in) ? in : HAL_DTYPE_INT64);
}

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// First position of the maximum (MAX) or minimum; NaN wins. -1 when empty.
int64_t arg_extreme(const std::vector<double>& v, bool max) {
  int64_t best = -1;
  for (size_t i = 0; i < v.size(); ++i) {
    if (best >= 0 && std::isnan(v[static_cast<size_t>(best)])) break;
    if (best < 0 || std::isnan(v[i]) || (max ? v[i] > v[static_cast<size_t>(best)] : v[i] < v[static_cast<size_t>(best)]))
      best = static_cast<int64_t>(i);
  }
  return best;
}

// ---- cases shared by the reductions --------------------------------------------

struct Shape {
  const char* name;
  std::vector<int64_t> shape;
  std::vector<int64_t> dims;  // empty: the 'dim' attribute is not given
  bool keepdim;
};

// Cases over dims lists for a reduction with output dtype OUT_DT. IDENTITY:
// the op may reduce an empty dim (else that is a bad-input case). DIM_REQUIRED:
// always pass 'dim' ([] for all dims).
std::vector<OpCase> reduce_cases(hal_dtype_e dt, hal_dtype_e out_dt, bool identity, bool dim_required = false,
                                 double lo = -2.0, double hi = 2.0) {
  static const std::vector<Shape> shapes = {
      {"[3,5] dim [1]", {3, 5}, {1}, false},
      {"[3,5] dim [0] keepdim", {3, 5}, {0}, true},
      {"[2,3,4] dim [-1,0]", {2, 3, 4}, {-1, 0}, false},
      {"[2,3,4] dim [1] keepdim", {2, 3, 4}, {1}, true},
      {"[4,5] all dims", {4, 5}, {}, false},
      {"[2,3,4] all dims keepdim", {2, 3, 4}, {}, true},
      {"[17,33] dim [0] (columns)", {17, 33}, {0}, false},
      {"[33,17] dim [1] (rows)", {33, 17}, {1}, false},
      {"[5,1,6] dim [1]", {5, 1, 6}, {1}, false},
      {"0-d", {}, {}, false},
      {"0-d dim [0]", {}, {0}, false},
      {"zero-size [0,4] dim [1]", {0, 4}, {1}, false},
  };
  std::vector<OpCase> cases;
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    OpCase c(s.name);
    c.in(random(dt, s.shape, seed++, lo, hi));
    if (!s.dims.empty() || dim_required) c.attr(Attr::ints("dim", s.dims));
    if (s.keepdim) c.attr(Attr::b("keepdim", true));
    cases.push_back(std::move(c));
  }
  if (identity) {
    cases.push_back(OpCase("zero-size [0,4] dim [0]").in(random(dt, {0, 4}, 50)).attr(Attr::ints("dim", {0})));
    cases.push_back(OpCase("zero-size [0,4] all dims").in(random(dt, {0, 4}, 51)).attr(Attr::ints("dim", {})));
  } else {
    cases.push_back(OpCase("empty reduced dim").in(random(dt, {0, 4}, 52)).attr(Attr::ints("dim", {0}))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(out_dt, {4})}, {"dim 0", "size 0"}));
  }
  cases.push_back(OpCase("dim out of range").in(random(dt, {3, 5}, 53)).attr(Attr::ints("dim", {2}))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(out_dt, {3})}, {"dim", "2", "rank 2"}));
  cases.push_back(OpCase("dim repeated").in(random(dt, {3, 5}, 54)).attr(Attr::ints("dim", {1, -1}))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(out_dt, {3})}, {"dim", "twice"}));
  cases.push_back(OpCase("dim given as int").in(random(dt, {3, 5}, 55)).attr(Attr::i("dim", 1))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(out_dt, {3})}, {"dim", "ints"}));
  return cases;
}

// A NaN among ordinary values (floating dtypes only).
OpCase with_nan(hal_dtype_e dt, const char* name, std::vector<int64_t> dims) {
  HostTensor x = random(dt, {3, 6}, 77);
  x.values[7] = kNaN;   // row 1
  x.values[16] = kNaN;  // row 2
  x.values[13] = kNaN;  // row 2, first
  OpCase c(name);
  c.in(x).attr(Attr::ints("dim", std::move(dims)));
  return c;
}

// Rows of 19 (longer than a SIMD vector, so specials land in a vectorised
// body and in its remainder) of values in [0.5, 1.5), distinct within a row
// and a column in every float dtype (a product of a row stays in range), with:
//   row 0: NaN at 1                 row 4: -inf at 1
//   row 1: +inf at 2, -inf at 17    row 5: +inf at 0, 0 at 3
//   row 2: +inf at 0 and at 18      row 6: +inf at 4, -inf at 9, NaN at 18
//   row 3: all -inf                 row 7: ordinary
// PyTorch: NaN propagates through every reduction and scan (argmax/argmin
// and max/min's index: the first NaN's position); inf + -inf and inf · 0
// are NaN, so are a variance with an infinity (inf - inf) and logsumexp of
// a row with a NaN; logsumexp of an all -inf row is -inf; among equal
// extremes (two +inf, all -inf) the first position is the index.
HostTensor specials(hal_dtype_e dt) {
  HostTensor x(dt, {8, 19});
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t j = 0; j < 19; ++j) x.at({r, j}) = round_to(dt, 0.5 + static_cast<double>((7 * r + 5 * j) % 19) / 19.0);
  x.at({0, 1}) = kNaN;
  x.at({1, 2}) = kInf;
  x.at({1, 17}) = -kInf;
  x.at({2, 0}) = kInf;
  x.at({2, 18}) = kInf;
  for (int64_t j = 0; j < 19; ++j) x.at({3, j}) = -kInf;
  x.at({4, 1}) = -kInf;
  x.at({5, 0}) = kInf;
  x.at({5, 3}) = 0;
  x.at({6, 4}) = kInf;
  x.at({6, 9}) = -kInf;
  x.at({6, 18}) = kNaN;
  return x;
}

// The special rows reduced along dim 1 and along dim 0 (the 'dim' attribute
// as ints, or as an int for max/min and the scans).
std::vector<OpCase> special_cases(hal_dtype_e dt, bool int_dim = false) {
  std::vector<OpCase> cases;
  for (int64_t d : {1, 0}) {
    OpCase c(std::string("NaN and infinities ") + (d == 1 ? "along rows, dim 1" : "along columns, dim 0"));
    c.in(specials(dt)).attr(int_dim ? Attr::i("dim", d) : Attr::ints("dim", {d}));
    cases.push_back(std::move(c));
  }
  return cases;
}

// Rows of 20 whose partial sums leave float16's range (±60000 each) but
// whose sums do not: PyTorch accumulates float16 and bfloat16 in float, so
// the sums are 0, 0 and 60000.
HostTensor beyond_float16(hal_dtype_e dt) {
  HostTensor x(dt, {3, 20});
  for (int64_t j = 0; j < 20; ++j) {
    x.at({0, j}) = round_to(dt, j < 10 ? 60000 : -60000);
    x.at({1, j}) = round_to(dt, j % 4 < 2 ? 60000 : -60000);
    x.at({2, j}) = round_to(dt, 3000);
  }
  return x;
}

void append(std::vector<OpCase>& to, std::vector<OpCase> more) {
  for (OpCase& c : more) to.push_back(std::move(c));
}

// ---- sum, prod, mean --------------------------------------------------------------

std::vector<OpCase> sum_cases(hal_dtype_e dt) {
  auto cases = reduce_cases(dt, is_float(dt) ? dt : HAL_DTYPE_INT64, true);
  if (dt == HAL_DTYPE_FLOAT32 || dt == HAL_DTYPE_FLOAT64)
    cases.push_back(OpCase("1e5 elements").in(random(dt, {100000}, 60, 0.0, 1.0)).no_layouts());
  cases.push_back(OpCase("[64,300] dim [1]").in(random(dt, {64, 300}, 61)).attr(Attr::ints("dim", {1})));
  if (is_float(dt)) {
    cases.push_back(OpCase("dtype float64").in(random(dt, {3, 5}, 62)).attr(Attr::ints("dim", {1}))
                        .attr(Attr::dtype("dtype", HAL_DTYPE_FLOAT64)));
    append(cases, special_cases(dt));
    cases.push_back(OpCase("partial sums beyond float16's range").in(beyond_float16(dt)).attr(Attr::ints("dim", {1})));
  } else {
    cases.push_back(OpCase("dtype int32").in(random(dt, {3, 5}, 63)).attr(Attr::ints("dim", {0}))
                        .attr(Attr::dtype("dtype", HAL_DTYPE_INT32)));
    cases.push_back(OpCase("output keeps the input dtype").in(random(dt, {3, 5}, 64)).attr(Attr::ints("dim", {1}))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt == HAL_DTYPE_INT64 ? HAL_DTYPE_INT32 : dt, {3})},
                               {"dtype", "int64"}));
  }
  return cases;
}
std::vector<HostTensor> sum_ref(const OpCase& c) { return {fold(group(c), int64_rule(c), sum_of)}; }
HAL_CONFORMANCE_SUITE(sum, sum_cases, sum_ref);

std::vector<OpCase> prod_cases(hal_dtype_e dt) {
  // Values near 1 keep products of up to 33 elements in range.
  double lo = is_float(dt) ? 0.5 : dt == HAL_DTYPE_UINT8 ? 0.0 : -1.0, hi = is_float(dt) ? 1.5 : 2.0;
  auto cases = reduce_cases(dt, is_float(dt) ? dt : HAL_DTYPE_INT64, true, false, lo, hi);
  if (is_float(dt)) append(cases, special_cases(dt));
  return cases;
}
std::vector<HostTensor> prod_ref(const OpCase& c) {
  return {fold(group(c), int64_rule(c), [](const std::vector<double>& v) {
    double p = 1;
    for (double x : v) p *= x;
    return p;
  })};
}
HAL_CONFORMANCE_SUITE(prod, prod_cases, prod_ref);

std::vector<OpCase> mean_cases(hal_dtype_e dt) {
  if (!is_float(dt)) {
    return {
        OpCase("integer input with dtype float32").in(random(dt, {3, 5}, 70)).attr(Attr::ints("dim", {1}))
            .attr(Attr::dtype("dtype", HAL_DTYPE_FLOAT32)),
        OpCase("integer input without a floating dtype").in(random(dt, {3, 5}, 71))
            .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {})}, {"dtype", "floating"}),
    };
  }
  auto cases = reduce_cases(dt, dt, true);
  if (dt == HAL_DTYPE_FLOAT32)
    cases.push_back(OpCase("1e5 elements").in(random(dt, {100000}, 72, 0.0, 1.0)).no_layouts());
  append(cases, special_cases(dt));
  cases.push_back(OpCase("partial sums beyond float16's range").in(beyond_float16(dt)).attr(Attr::ints("dim", {1})));
  return cases;
}
std::vector<HostTensor> mean_ref(const OpCase& c) {
  return {fold(group(c), c.attr_dtype("dtype", c.input(0).dtype),
               [](const std::vector<double>& v) { return v.empty() ? kNaN : sum_of(v) / static_cast<double>(v.size()); })};
}
HAL_CONFORMANCE_SUITE(mean, mean_cases, mean_ref);

// ---- amax, amin ----------------------------------------------------------------------

std::vector<OpCase> extreme_cases(hal_dtype_e dt) {
  auto cases = reduce_cases(dt, dt, false);
  if (is_float(dt)) {
    cases.push_back(with_nan(dt, "NaN propagates", {1}));
    cases.push_back(OpCase("infinities").in(HostTensor(dt, {2, 3}, {-kInf, -kInf, -kInf, kInf, 1, -kInf}))
                        .attr(Attr::ints("dim", {1})));
    append(cases, special_cases(dt));
  }
  return cases;
}
double extreme(const std::vector<double>& v, bool max) { return v[static_cast<size_t>(arg_extreme(v, max))]; }
std::vector<HostTensor> amax_ref(const OpCase& c) {
  return {fold(group(c), c.input(0).dtype, [](const std::vector<double>& v) { return extreme(v, true); })};
}
std::vector<HostTensor> amin_ref(const OpCase& c) {
  return {fold(group(c), c.input(0).dtype, [](const std::vector<double>& v) { return extreme(v, false); })};
}
HAL_CONFORMANCE_SUITE(amax, extreme_cases, amax_ref);
HAL_CONFORMANCE_SUITE(amin, extreme_cases, amin_ref);

// ---- max, min (values and indices along one dim) -----------------------------------

std::vector<OpCase> max_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("[3,5] dim 1").in(random(dt, {3, 5}, 80)).attr(Attr::i("dim", 1)),
      OpCase("[3,5] dim 0 keepdim").in(random(dt, {3, 5}, 81)).attr(Attr::i("dim", 0)).attr(Attr::b("keepdim", true)),
      OpCase("[2,3,4] dim -2").in(random(dt, {2, 3, 4}, 82)).attr(Attr::i("dim", -2)),
      OpCase("[17,33] dim 0 (columns)").in(random(dt, {17, 33}, 83)).attr(Attr::i("dim", 0)),
      OpCase("[9,200] dim 1").in(random(dt, {9, 200}, 84)).attr(Attr::i("dim", 1)),
      OpCase("0-d dim 0").in(random(dt, {}, 85)).attr(Attr::i("dim", 0)),
      OpCase("zero-size [0,4] dim 1").in(random(dt, {0, 4}, 86)).attr(Attr::i("dim", 1)),
      OpCase("empty reduced dim").in(random(dt, {0, 4}, 87)).attr(Attr::i("dim", 0))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4}), HostTensor(HAL_DTYPE_INT64, {4})}, {"dim 0", "size 0"}),
      OpCase("dim out of range").in(random(dt, {3, 5}, 88)).attr(Attr::i("dim", -3))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3}), HostTensor(HAL_DTYPE_INT64, {3})}, {"dim", "-3"}),
      OpCase("dim missing").in(random(dt, {3, 5}, 89))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3}), HostTensor(HAL_DTYPE_INT64, {3})}, {"dim"}),
  };
  if (is_float(dt)) {
    HostTensor x = with_nan(dt, "", {}).input(0);
    cases.push_back(OpCase("NaN propagates").in(x).attr(Attr::i("dim", 1)));
    append(cases, special_cases(dt, true));
  }
  return cases;
}
std::vector<HostTensor> max_min_ref(const OpCase& c, bool max) {
  const HostTensor& x = c.input(0);
  std::vector<int64_t> dims = {c.attr_int("dim", 0)};
  Groups g = group(x, reduced_dims(x.rank(), dims), c.attr_bool("keepdim", false));
  return {fold(g, x.dtype, [max](const std::vector<double>& v) { return extreme(v, max); }),
          fold(g, HAL_DTYPE_INT64, [max](const std::vector<double>& v) { return static_cast<double>(arg_extreme(v, max)); })};
}
std::vector<HostTensor> max_ref(const OpCase& c) { return max_min_ref(c, true); }
std::vector<HostTensor> min_ref(const OpCase& c) { return max_min_ref(c, false); }
HAL_CONFORMANCE_SUITE(max, max_cases, max_ref);
HAL_CONFORMANCE_SUITE(min, max_cases, min_ref);

// ---- argmax, argmin -------------------------------------------------------------------

std::vector<OpCase> arg_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("[3,5] flattened").in(random(dt, {3, 5}, 90)),
      OpCase("[3,5] flattened keepdim").in(random(dt, {3, 5}, 91)).attr(Attr::b("keepdim", true)),
      OpCase("[3,5] dim [1]").in(random(dt, {3, 5}, 92)).attr(Attr::ints("dim", {1})),
      OpCase("[2,3,4] dim [0] keepdim").in(random(dt, {2, 3, 4}, 93)).attr(Attr::ints("dim", {0}))
          .attr(Attr::b("keepdim", true)),
      OpCase("[17,33] dim [0] (columns)").in(random(dt, {17, 33}, 94)).attr(Attr::ints("dim", {0})),
      OpCase("[5,300] dim [-1]").in(random(dt, {5, 300}, 95)).attr(Attr::ints("dim", {-1})),
      OpCase("0-d").in(random(dt, {}, 96)),
      OpCase("zero-size [0,4] dim [1]").in(random(dt, {0, 4}, 97)).attr(Attr::ints("dim", {1})),
      OpCase("empty, flattened").in(random(dt, {0, 4}, 98))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(HAL_DTYPE_INT64, {})}, {"empty"}),
      OpCase("empty reduced dim").in(random(dt, {0, 4}, 99)).attr(Attr::ints("dim", {0}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(HAL_DTYPE_INT64, {4})}, {"dim 0", "size 0"}),
      OpCase("two dims").in(random(dt, {3, 5}, 100)).attr(Attr::ints("dim", {0, 1}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(HAL_DTYPE_INT64, {})}, {"dim", "at most one"}),
      OpCase("dim out of range").in(random(dt, {3, 5}, 101)).attr(Attr::ints("dim", {5}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(HAL_DTYPE_INT64, {3})}, {"dim", "5"}),
  };
  if (is_float(dt)) {
    cases.push_back(with_nan(dt, "NaN is the extreme", {1}));
    cases.push_back(with_nan(dt, "NaN, flattened", {}));
    append(cases, special_cases(dt));
    cases.push_back(OpCase("NaN and infinities, flattened").in(specials(dt)));
  }
  return cases;
}
std::vector<HostTensor> arg_ref(const OpCase& c, bool max) {
  const HostTensor& x = c.input(0);
  std::vector<int64_t> dims = c.attr_ints("dim", {});
  bool keepdim = c.attr_bool("keepdim", false);
  Groups g = group(x, reduced_dims(x.rank(), dims), keepdim);
  return {fold(g, HAL_DTYPE_INT64, [max](const std::vector<double>& v) { return static_cast<double>(arg_extreme(v, max)); })};
}
std::vector<HostTensor> argmax_ref(const OpCase& c) { return arg_ref(c, true); }
std::vector<HostTensor> argmin_ref(const OpCase& c) { return arg_ref(c, false); }
HAL_CONFORMANCE_SUITE(argmax, arg_cases, argmax_ref);
HAL_CONFORMANCE_SUITE(argmin, arg_cases, argmin_ref);

// ---- var, std ---------------------------------------------------------------------------

std::vector<OpCase> var_cases(hal_dtype_e dt) {
  auto cases = reduce_cases(dt, dt, true);
  cases.push_back(OpCase("correction 0").in(random(dt, {3, 5}, 110)).attr(Attr::ints("dim", {1}))
                      .attr(Attr::i("correction", 0)));
  cases.push_back(OpCase("correction 2").in(random(dt, {4, 6}, 111)).attr(Attr::ints("dim", {0}))
                      .attr(Attr::i("correction", 2)));
  cases.push_back(OpCase("one element").in(random(dt, {3, 1}, 112)).attr(Attr::ints("dim", {1})));
  cases.push_back(OpCase("offset values").in(random(dt, {4, 50}, 113, 100.0, 101.0)).attr(Attr::ints("dim", {1}))
                      .tol(dt == HAL_DTYPE_FLOAT32 ? 4.0 : 1.0));
  if (is_float(dt)) {
    append(cases, special_cases(dt));
    // Squares (and sums of squares) beyond float16's range; PyTorch
    // accumulates float16 in float.
    cases.push_back(OpCase("squares beyond float16's range").in(random(dt, {3, 20}, 115, 300.0, 700.0))
                        .attr(Attr::ints("dim", {1})));
  }
  cases.push_back(OpCase("correction as float").in(random(dt, {3, 5}, 114)).attr(Attr::f("correction", 1.0))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {})}, {"correction", "int"}));
  return cases;
}
double var_of(const std::vector<double>& v, double correction) {
  double n = static_cast<double>(v.size());
  if (v.empty()) return kNaN;
  double mean = sum_of(v) / n, m2 = 0;
  for (double x : v) m2 += (x - mean) * (x - mean);
  return m2 / std::max(0.0, n - correction);
}
std::vector<HostTensor> var_ref(const OpCase& c) {
  double corr = static_cast<double>(c.attr_int("correction", 1));
  return {fold(group(c), c.input(0).dtype, [corr](const std::vector<double>& v) { return var_of(v, corr); })};
}
std::vector<HostTensor> std_ref(const OpCase& c) {
  double corr = static_cast<double>(c.attr_int("correction", 1));
  return {fold(group(c), c.input(0).dtype, [corr](const std::vector<double>& v) { return std::sqrt(var_of(v, corr)); })};
}
HAL_CONFORMANCE_SUITE(var, var_cases, var_ref);
HAL_CONFORMANCE_SUITE(std, var_cases, std_ref);

// ---- norm --------------------------------------------------------------------------------

std::vector<OpCase> norm_cases(hal_dtype_e dt) {
  auto cases = reduce_cases(dt, dt, true);
  for (double p : {1.0, 0.0, 3.0, -1.5, 0.5, kInf, -kInf}) {
    std::string name = "p = " + std::to_string(p);
    cases.push_back(OpCase(name + " dim [1]").in(random_nonzero(dt, {3, 7}, 120)).attr(Attr::ints("dim", {1}))
                        .attr(Attr::f("p", p)));
    cases.push_back(OpCase(name + " all dims").in(random_nonzero(dt, {4, 5}, 121)).attr(Attr::f("p", p)));
  }
  if (is_float(dt)) {
    for (double p : {2.0, 1.0, 0.0, 3.0, -1.5, kInf, -kInf}) {
      OpCase c = special_cases(dt)[0];
      c.name += ", p = " + std::to_string(p);
      cases.push_back(c.attr(Attr::f("p", p)));
    }
    // PyTorch accumulates float16 in float: |x|^p beyond float16's range is fine.
    for (double p : {2.0, 3.0})
      cases.push_back(OpCase("powers beyond float16's range, p = " + std::to_string(p))
                          .in(random(dt, {3, 20}, 124, 300.0, 700.0)).attr(Attr::ints("dim", {1})).attr(Attr::f("p", p)));
  }
  cases.push_back(OpCase("p = 0 with zeros").in(HostTensor(dt, {2, 3}, {0, 1, 0, 0, 0, 0})).attr(Attr::ints("dim", {1}))
                      .attr(Attr::f("p", 0.0)));
  cases.push_back(OpCase("p = inf, empty dim").in(random(dt, {0, 4}, 122)).attr(Attr::ints("dim", {0}))
                      .attr(Attr::f("p", kInf))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4})}, {"dim 0", "size 0"}));
  cases.push_back(OpCase("p = -1, empty dim").in(random(dt, {3, 0}, 123)).attr(Attr::ints("dim", {1}))
                      .attr(Attr::f("p", -1.0))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"dim 1", "size 0"}));
  return cases;
}
std::vector<HostTensor> norm_ref(const OpCase& c) {
  double p = c.attr_float("p", 2.0);
  return {fold(group(c), c.input(0).dtype, [p](const std::vector<double>& v) {
    if (std::isinf(p)) {  // max or min of |x|; NaN propagates (PyTorch)
      double r = p > 0 ? 0.0 : kInf;
      for (double x : v)
        r = std::isnan(x) || std::isnan(r) ? kNaN : p > 0 ? std::max(r, std::abs(x)) : std::min(r, std::abs(x));
      return r;
    }
    double s = 0;
    for (double x : v) s += p == 0 ? (x != 0 ? 1.0 : 0.0) : std::pow(std::abs(x), p);
    return p == 0 ? s : std::pow(s, 1.0 / p);
  })};
}
HAL_CONFORMANCE_SUITE(norm, norm_cases, norm_ref);

// ---- logsumexp --------------------------------------------------------------------------

std::vector<OpCase> logsumexp_cases(hal_dtype_e dt) {
  hal_dtype_e out = is_float(dt) ? dt : HAL_DTYPE_FLOAT32;
  auto cases = reduce_cases(dt, out, true, true);
  cases.push_back(OpCase("dim missing").in(random(dt, {3, 5}, 130))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(out, {})}, {"dim"}));
  if (is_float(dt)) {
    cases.push_back(OpCase("large values").in(random(dt, {3, 9}, 131, 80.0, 100.0)).attr(Attr::ints("dim", {1})));
    cases.push_back(OpCase("infinities").in(HostTensor(dt, {3, 2}, {-kInf, -kInf, kInf, 1, -kInf, 2}))
                        .attr(Attr::ints("dim", {1})));
    append(cases, special_cases(dt));
    // e^x overflows or underflows for every x of a row unless the maximum
    // is subtracted (values multiples of 8: exact in float16).
    HostTensor big(dt, {2, 8});
    for (int64_t j = 0; j < 8; ++j) {
      big.at({0, j}) = round_to(dt, j < 2 ? 1e4 : j < 4 ? -1e4 : 8.0 * j);
      big.at({1, j}) = round_to(dt, -1e4 - 8.0 * j);
    }
    cases.push_back(OpCase("magnitudes 1e4").in(big).attr(Attr::ints("dim", {1})));
  }
  return cases;
}
std::vector<HostTensor> logsumexp_ref(const OpCase& c) {
  hal_dtype_e dt = c.input(0).dtype;
  // PyTorch: the maximum (NaN if any) is subtracted unless it is infinite,
  // so a NaN gives NaN, +inf gives +inf and an all -inf group -inf.
  return {fold(group(c), is_float(dt) ? dt : HAL_DTYPE_FLOAT32, [](const std::vector<double>& v) {
    double m = -kInf;
    for (double x : v) m = std::isnan(x) || std::isnan(m) ? kNaN : std::max(m, x);
    if (std::isinf(m)) return m;
    double s = 0;
    for (double x : v) s += std::exp(x - m);
    return m + std::log(s);
  })};
}
HAL_CONFORMANCE_SUITE(logsumexp, logsumexp_cases, logsumexp_ref);

// ---- any, all --------------------------------------------------------------------------

std::vector<OpCase> any_cases(hal_dtype_e dt) {
  // Values in [-1, 1): integers are often 0, so both answers occur.
  auto cases = reduce_cases(dt, HAL_DTYPE_BOOL, true, false, -1.0, 1.0);
  cases.push_back(OpCase("all zero").in(full(dt, {4, 300}, 0)).attr(Attr::ints("dim", {1})));
  cases.push_back(OpCase("all one").in(full(dt, {4, 300}, 1)).attr(Attr::ints("dim", {1})));
  HostTensor sparse = full(dt, {3, 1000}, 0);
  sparse.values[999] = 1;
  sparse.values[1500] = 1;
  cases.push_back(OpCase("one non-zero per row").in(sparse).attr(Attr::ints("dim", {1})));
  return cases;
}
std::vector<HostTensor> any_ref(const OpCase& c) {
  return {fold(group(c), HAL_DTYPE_BOOL, [](const std::vector<double>& v) {
    return std::any_of(v.begin(), v.end(), [](double x) { return x != 0; }) ? 1.0 : 0.0;
  })};
}
std::vector<HostTensor> all_ref(const OpCase& c) {
  return {fold(group(c), HAL_DTYPE_BOOL, [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return x != 0; }) ? 1.0 : 0.0;
  })};
}
HAL_CONFORMANCE_SUITE(any, any_cases, any_ref);
HAL_CONFORMANCE_SUITE(all, any_cases, all_ref);

// ---- cumsum, cumprod --------------------------------------------------------------------

std::vector<OpCase> scan_cases(hal_dtype_e dt, double lo, double hi) {
  hal_dtype_e out = is_float(dt) ? dt : HAL_DTYPE_INT64;
  std::vector<OpCase> cases = {
      OpCase("[3,5] dim 1").in(random(dt, {3, 5}, 140, lo, hi)).attr(Attr::i("dim", 1)),
      OpCase("[3,5] dim 0").in(random(dt, {3, 5}, 141, lo, hi)).attr(Attr::i("dim", 0)),
      OpCase("[2,3,4] dim -2").in(random(dt, {2, 3, 4}, 142, lo, hi)).attr(Attr::i("dim", -2)),
      OpCase("[6,40] dim 0 (columns)").in(random(dt, {6, 40}, 143, lo, hi)).attr(Attr::i("dim", 0)),
      OpCase("[4,30] dim 1").in(random(dt, {4, 30}, 144, lo, hi)).attr(Attr::i("dim", 1)),
      OpCase("0-d dim 0").in(random(dt, {}, 145, lo, hi)).attr(Attr::i("dim", 0)),
      OpCase("zero-size [0,4] dim 0").in(random(dt, {0, 4}, 146, lo, hi)).attr(Attr::i("dim", 0)),
      OpCase("zero-size [0,4] dim 1").in(random(dt, {0, 4}, 147, lo, hi)).attr(Attr::i("dim", 1)),
      OpCase("dtype float64").in(random(dt, {3, 5}, 148, lo, hi)).attr(Attr::i("dim", 1))
          .attr(Attr::dtype("dtype", HAL_DTYPE_FLOAT64)),
      OpCase("dim out of range").in(random(dt, {3, 5}, 149)).attr(Attr::i("dim", 2))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(out, {3, 5})}, {"dim", "2"}),
      OpCase("dim missing").in(random(dt, {3, 5}, 150))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(out, {3, 5})}, {"dim"}),
  };
  if (is_float(dt)) append(cases, special_cases(dt, true));
  return cases;
}
std::vector<OpCase> cumsum_cases(hal_dtype_e dt) {
  auto cases = scan_cases(dt, -2.0, 2.0);
  // PyTorch accumulates float16 in float: a running sum may leave float16's
  // range (inf in the output) and come back.
  if (is_float(dt))
    cases.push_back(OpCase("running sums beyond float16's range").in(beyond_float16(dt)).attr(Attr::i("dim", 1)));
  return cases;
}
std::vector<OpCase> cumprod_cases(hal_dtype_e dt) {
  // Small factors keep products exact (uint8 would wrap -1 to 255).
  return is_float(dt) ? scan_cases(dt, 0.5, 1.5) : scan_cases(dt, dt == HAL_DTYPE_UINT8 ? 0.0 : -1.0, 2.0);
}
std::vector<HostTensor> scan_ref(const OpCase& c, bool prod) {
  const HostTensor& x = c.input(0);
  HostTensor out(int64_rule(c), x.shape);
  int64_t dim = c.attr_int("dim", 0);
  int d = x.rank() == 0 ? -1 : static_cast<int>(dim < 0 ? dim + x.rank() : dim);
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> idx = unravel(i, x.shape);
    double acc = prod ? 1 : 0;
    int64_t upto = d < 0 ? 0 : idx[static_cast<size_t>(d)];
    for (int64_t j = 0; j <= upto; ++j) {
      if (d >= 0) idx[static_cast<size_t>(d)] = j;
      double v = x.at(idx);
      acc = prod ? acc * v : acc + v;
    }
    out.values[static_cast<size_t>(i)] = acc;
  }
  return {out};
}
std::vector<HostTensor> cumsum_ref(const OpCase& c) { return scan_ref(c, false); }
std::vector<HostTensor> cumprod_ref(const OpCase& c) { return scan_ref(c, true); }
HAL_CONFORMANCE_SUITE(cumsum, cumsum_cases, cumsum_ref);
HAL_CONFORMANCE_SUITE(cumprod, cumprod_cases, cumprod_ref);

}  // namespace
}  // namespace hal::conformance
