// CPU kernels of the "reduction" op group: reducers run by reduce_with
// (reduction_driver.hpp) and the two scans. Sums of floating types
// accumulate in double (lanes over 1024-element blocks, then the blocks);
// integers accumulate in 64 bits, wrapping like torch.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_kernel.hpp"
#include "vector_math.hpp"
#include "cpu_ops.hpp"
#include "reduction_driver.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
namespace rules = sdk::shape_rules;
using sdk::kernel::compute_t;
using sdk::kernel::dispatch;
using sdk::kernel::dispatch_float;
using sdk::kernel::ReduceIter;

template <class V>
bool is_nan(V x) {
  if constexpr (std::is_floating_point_v<V>) return x != x;
  else return false;
}

template <class T>
constexpr bool kFloating = std::is_floating_point_v<compute_t<T>>;
// Accumulator of sums and products: double for floating types, uint64 for
// integers (wraps around instead of overflowing).
template <class T>
using wide_t = std::conditional_t<kFloating<T>, double, uint64_t>;

template <class T, class A>
T to_out(A a) {
  if constexpr (std::is_same_v<T, bool>) return a != A(0);
  else if constexpr (kFloating<T>) return static_cast<T>(static_cast<compute_t<T>>(a));
  else return static_cast<T>(static_cast<int64_t>(a));
}

// Folds P[0..N) with OP in 16 independent lanes (vectorisable, short
// dependency chains), then combines the lanes with COMBINE.
template <class L, class T, class Op, class Combine>
L lane_fold(const T* p, int64_t n, L init, Op op, Combine combine) {
  constexpr int kLanes = 16;
  L lane[kLanes];
  for (int k = 0; k < kLanes; ++k) lane[k] = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] = op(lane[k], static_cast<L>(static_cast<compute_t<T>>(p[i + k])));
  for (; i < n; ++i) lane[0] = op(lane[0], static_cast<L>(static_cast<compute_t<T>>(p[i])));
  L s = lane[0];
  for (int k = 1; k < kLanes; ++k) s = combine(s, lane[k]);
  return s;
}

// Σ F(p[i]): blocks of 1024 folded in lanes of L, block sums added in A.
template <class A, class L, class T, class F>
A blocked_sum(const T* p, int64_t n, F f) {
  constexpr int64_t kBlock = 1024;
  A total = 0;
  auto add = [](L a, L b) { return a + b; };
  for (int64_t b = 0; b < n; b += kBlock)
    total += static_cast<A>(lane_fold<L>(p + b, std::min(kBlock, n - b), L(0), [&](L a, L x) { return a + f(x); }, add));
  return total;
}

// Lane type of sums: the accumulator's (double, uint64), so a float32 sum is
// accurate to its final rounding (PyTorch's cascade sum comes close to that;
// float lanes differed from it by ~70 ulp on a 200-term sum).
template <class T>
using lane_t = wide_t<T>;

// ---- sum, mean, prod ----------------------------------------------------------

template <class T>
struct SumR {
  using In = T;
  using Acc = wide_t<T>;
  T* out;
  bool mean;
  Acc init() const { return 0; }
  void step(Acc& a, compute_t<T> x, int64_t) const { a += static_cast<Acc>(x); }
  void merge(Acc& a, const Acc& b) const { a += b; }
  void run(Acc& a, const T* p, int64_t n, int64_t) const {
    a += blocked_sum<Acc, lane_t<T>>(p, n, [](lane_t<T> x) { return x; });
  }
  void write(const Acc& a, int64_t n, const int64_t* o) const {
    if constexpr (kFloating<T>) out[o[0]] = to_out<T>(mean ? a / static_cast<double>(n) : a);
    else out[o[0]] = to_out<T>(a);
  }
};

template <class T>
struct ProdR {
  using In = T;
  using Acc = wide_t<T>;
  T* out;
  Acc init() const { return 1; }
  void step(Acc& a, compute_t<T> x, int64_t) const { a *= static_cast<Acc>(x); }
  void merge(Acc& a, const Acc& b) const { a *= b; }
  void run(Acc& a, const T* p, int64_t n, int64_t) const {
    auto mul = [](Acc x, Acc y) { return x * y; };
    a *= lane_fold<Acc>(p, n, Acc(1), mul, mul);
  }
  void write(const Acc& a, int64_t, const int64_t* o) const { out[o[0]] = to_out<T>(a); }
};

// The input in the output's dtype (a 'dtype' attribute, integer sums in
// int64): cast first, as torch does.
template <class Fn>
void on_output_dtype(const OpCall& c, Fn fn) {
  const Tensor& out = c.output(0);
  Tensor tmp;
  std::vector<unsigned char> storage;
  const Tensor& in = as_dtype(c.input(0), out.dtype, tmp, storage);
  fn(in, out);
}

void sum_body(const OpCall& c) {
  on_output_dtype(c, [&](const Tensor& in, const Tensor& out) {
    ReduceIter it(in, rules::reduce_mask(c), {&out});
    dispatch(out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_with(it, in.ptr<T>(), SumR<T>{out.ptr<T>(), false});
    });
  });
}
HAL_CPU_KERNEL(sum_kernel, sum_body)

void mean_body(const OpCall& c) {
  on_output_dtype(c, [&](const Tensor& in, const Tensor& out) {
    ReduceIter it(in, rules::reduce_mask(c), {&out});
    dispatch_float(out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_with(it, in.ptr<T>(), SumR<T>{out.ptr<T>(), true});
    });
  });
}
HAL_CPU_KERNEL(mean_kernel, mean_body)

void prod_body(const OpCall& c) {
  on_output_dtype(c, [&](const Tensor& in, const Tensor& out) {
    ReduceIter it(in, rules::reduce_mask(c), {&out});
    dispatch(out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_with(it, in.ptr<T>(), ProdR<T>{out.ptr<T>()});
    });
  });
}
HAL_CPU_KERNEL(prod_kernel, prod_body)

// ---- amax, amin, max, min, argmax, argmin -------------------------------------

// Whether X beats the current extreme A (NaN beats everything and stays).
template <bool kMax, class V>
bool beats(V x, V a) {
  if (is_nan(a)) return false;
  if (is_nan(x)) return true;
  if constexpr (kMax) return x > a;
  else return x < a;
}
// The running extreme: a NaN A stays (X > NaN is false), so no test of A is
// needed; both tests are evaluated (| not ||) so the select vectorises.
template <bool kMax, class V>
V pick(V a, V x) {
  if constexpr (kMax) return ((x > a) | is_nan(x)) ? x : a;
  else return ((x < a) | is_nan(x)) ? x : a;
}
// The maximum (kMax) or minimum of P[0..N) and INIT, NaN if any element
// is NaN: an OpenMP simd max/min reduction plus a NaN flag (vectorises,
// where a NaN-propagating select in lanes does not).
template <bool kMax, class L, class T>
L extreme_fold(const T* p, int64_t n, L init) {
  if constexpr (std::is_same_v<L, bool>) {
    auto f = [](L a, L x) { return pick<kMax>(a, x); };
    return f(init, lane_fold<L>(p, n, init, f, f));
  } else {
    L m = init;
    int nan = 0;
    if constexpr (kMax) {
#pragma omp simd reduction(max : m) reduction(| : nan)
      for (int64_t i = 0; i < n; ++i) {
        L x = static_cast<L>(static_cast<compute_t<T>>(p[i]));
        m = x > m ? x : m;
        nan |= is_nan(x);
      }
    } else {
#pragma omp simd reduction(min : m) reduction(| : nan)
      for (int64_t i = 0; i < n; ++i) {
        L x = static_cast<L>(static_cast<compute_t<T>>(p[i]));
        m = x < m ? x : m;
        nan |= is_nan(x);
      }
    }
    if constexpr (std::is_floating_point_v<L>) {
      if (nan) return std::numeric_limits<L>::quiet_NaN();
    }
    return m;
  }
}

template <bool kMax, class V>
V extreme_init() {
  if constexpr (std::is_same_v<V, bool>) return !kMax;
  else if constexpr (std::is_floating_point_v<V>)
    return kMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  else return kMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
}

template <bool kMax, class T>
struct ExtremeR {
  using In = T;
  using Acc = compute_t<T>;
  T* out;
  Acc init() const { return extreme_init<kMax, Acc>(); }
  void step(Acc& a, Acc x, int64_t) const { a = pick<kMax>(a, x); }
  void merge(Acc& a, const Acc& b) const { a = pick<kMax>(a, b); }
  void run(Acc& a, const T* p, int64_t n, int64_t) const { a = pick<kMax>(a, extreme_fold<kMax>(p, n, init())); }
  void write(const Acc& a, int64_t, const int64_t* o) const { out[o[0]] = static_cast<T>(a); }
};

template <bool kMax>
void extreme_body(const OpCall& c) {
  const Tensor& in = c.input(0);
  const Tensor& out = c.output(0);
  ReduceIter it(in, rules::reduce_mask(c), {&out});
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_with(it, in.ptr<T>(), ExtremeR<kMax, T>{out.ptr<T>()});
  });
}
HAL_CPU_KERNEL(amax_kernel, extreme_body<true>)
HAL_CPU_KERNEL(amin_kernel, extreme_body<false>)

// The first extreme and its position. VALUES is null for argmax/argmin.
template <bool kMax, class T>
struct ArgR {
  using In = T;
  using V = compute_t<T>;
  struct Acc {
    V v{};
    int64_t pos = -1;
  };
  T* values;
  int64_t* indices;
  Acc init() const { return {}; }
  void step(Acc& a, V x, int64_t pos) const {
    if (a.pos < 0 || beats<kMax>(x, a.v)) a = {x, pos};
  }
  void merge(Acc& a, const Acc& b) const {
    if (b.pos >= 0 && (a.pos < 0 || beats<kMax>(b.v, a.v))) a = b;
  }
  // The extreme by a vectorised fold, then the first position holding it.
  void run(Acc& a, const T* p, int64_t n, int64_t pos0) const {
    if (n == 0) return;
    V best = extreme_fold<kMax>(p, n, static_cast<V>(p[0]));
    int64_t i = 0;
    if (is_nan(best)) {
      while (!is_nan(static_cast<V>(p[i]))) ++i;
    } else {
      while (static_cast<V>(p[i]) != best) ++i;
    }
    merge(a, Acc{best, pos0 + i});
  }
  void write(const Acc& a, int64_t, const int64_t* o) const {
    if (values != nullptr) {
      values[o[0]] = static_cast<T>(a.v);
      indices[o[1]] = a.pos;
    } else {
      indices[o[0]] = a.pos;
    }
  }
};

template <bool kMax>
void max_body(const OpCall& c) {
  const Tensor& in = c.input(0);
  const Tensor& values = c.output(0);
  const Tensor& indices = c.output(1);
  ReduceIter it(in, rules::one_dim_mask(c), {&values, &indices});
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_with(it, in.ptr<T>(), ArgR<kMax, T>{values.ptr<T>(), indices.ptr<int64_t>()});
  });
}
HAL_CPU_KERNEL(max_kernel, max_body<true>)
HAL_CPU_KERNEL(min_kernel, max_body<false>)

template <bool kMax>
void argmax_body(const OpCall& c) {
  const Tensor& in = c.input(0);
  const Tensor& out = c.output(0);
  ReduceIter it(in, rules::arg_mask(c), {&out});
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_with(it, in.ptr<T>(), ArgR<kMax, T>{nullptr, out.ptr<int64_t>()});
  });
}
HAL_CPU_KERNEL(argmax_kernel, argmax_body<true>)
HAL_CPU_KERNEL(argmin_kernel, argmax_body<false>)

// ---- var, std -----------------------------------------------------------------

// Count, mean and Σ(x - mean)² (Welford per element; a contiguous run
// takes two vectorised passes and is merged with Chan's formula).
struct Moments {
  double n = 0, mean = 0, m2 = 0;
};
inline void merge_moments(Moments& a, const Moments& b) {
  if (b.n == 0) return;
  if (a.n == 0) {
    a = b;
    return;
  }
  double n = a.n + b.n, d = b.mean - a.mean;
  a.mean += d * (b.n / n);
  a.m2 += b.m2 + d * d * (a.n * b.n / n);
  a.n = n;
}

template <class T>
struct VarR {
  using In = T;
  using Acc = Moments;
  T* out;
  double correction;
  bool take_sqrt;
  Acc init() const { return {}; }
  void step(Acc& a, compute_t<T> x, int64_t) const {
    a.n += 1;
    double d = x - a.mean;
    a.mean += d / a.n;
    a.m2 += d * (x - a.mean);
  }
  void merge(Acc& a, const Acc& b) const { merge_moments(a, b); }
  void run(Acc& a, const T* p, int64_t n, int64_t) const {
    using L = compute_t<T>;
    double mean = blocked_sum<double, L>(p, n, [](L x) { return x; }) / static_cast<double>(n);
    L m = static_cast<L>(mean);
    // Σ(x - m)² minus the correction for m not being exactly the mean.
    double dev = blocked_sum<double, L>(p, n, [m](L x) { return x - m; });
    double m2 = blocked_sum<double, L>(p, n, [m](L x) { return (x - m) * (x - m); }) - dev * dev / static_cast<double>(n);
    merge_moments(a, Moments{static_cast<double>(n), static_cast<double>(m) + dev / static_cast<double>(n), std::max(m2, 0.0)});
  }
  void write(const Acc& a, int64_t, const int64_t* o) const {
    double v = a.m2 / std::max(0.0, a.n - correction);
    out[o[0]] = to_out<T>(take_sqrt ? std::sqrt(v) : v);
  }
};

template <bool kSqrt>
void var_body(const OpCall& c) {
  const Tensor& in = c.input(0);
  const Tensor& out = c.output(0);
  ReduceIter it(in, rules::reduce_mask(c), {&out});
  double correction = static_cast<double>(rules::attr_named(c, "correction").as_int());
  dispatch_float(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_with(it, in.ptr<T>(), VarR<T>{out.ptr<T>(), correction, kSqrt});
  });
}
HAL_CPU_KERNEL(var_kernel, var_body<false>)
HAL_CPU_KERNEL(std_kernel, var_body<true>)

// ---- norm -----------------------------------------------------------------------

enum class NormKind { kTwo, kOne, kZero, kInf, kNegInf, kGeneral };

template <NormKind kKind, class T>
struct NormR {
  using In = T;
  using Acc = double;
  using L = compute_t<T>;
  T* out;
  double p;
  static constexpr bool kExtreme = kKind == NormKind::kInf || kKind == NormKind::kNegInf;
  Acc init() const { return kKind == NormKind::kNegInf ? std::numeric_limits<double>::infinity() : 0.0; }
  // |x|^p for the summing kinds.
  L term(L x) const {
    if constexpr (kKind == NormKind::kTwo) return x * x;
    else if constexpr (kKind == NormKind::kOne) return std::abs(x);
    else if constexpr (kKind == NormKind::kZero) return x != L(0) ? L(1) : L(0);
    else return static_cast<L>(std::pow(std::abs(x), static_cast<L>(p)));
  }
  void step(Acc& a, L x, int64_t) const {
    if constexpr (kExtreme) a = pick<kKind == NormKind::kInf>(a, static_cast<double>(std::abs(x)));
    else a += term(x);
  }
  void merge(Acc& a, const Acc& b) const {
    if constexpr (kExtreme) a = pick<kKind == NormKind::kInf>(a, b);
    else a += b;
  }
  void run(Acc& a, const T* p_in, int64_t n, int64_t) const {
    if constexpr (kExtreme) {
      auto f = [](L x, L y) { return pick<kKind == NormKind::kInf>(x, std::abs(y)); };
      auto g = [](L x, L y) { return pick<kKind == NormKind::kInf>(x, y); };
      merge(a, static_cast<double>(lane_fold<L>(p_in, n, static_cast<L>(init()), f, g)));
    } else {
      a += blocked_sum<double, L>(p_in, n, [this](L x) { return term(x); });
    }
  }
  void write(const Acc& a, int64_t, const int64_t* o) const {
    double r = a;
    if constexpr (kKind == NormKind::kTwo) r = std::sqrt(a);
    else if constexpr (kKind == NormKind::kGeneral) r = std::pow(a, 1.0 / p);
    out[o[0]] = to_out<T>(r);
  }
};

void norm_body(const OpCall& c) {
  const Tensor& in = c.input(0);
  const Tensor& out = c.output(0);
  ReduceIter it(in, rules::reduce_mask(c), {&out});
  double p = op::norm::p(c);
  dispatch_float(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto go = [&](auto kind) { reduce_with(it, in.ptr<T>(), NormR<decltype(kind)::value, T>{out.ptr<T>(), p}); };
    if (p == 2) go(std::integral_constant<NormKind, NormKind::kTwo>{});
    else if (p == 1) go(std::integral_constant<NormKind, NormKind::kOne>{});
    else if (p == 0) go(std::integral_constant<NormKind, NormKind::kZero>{});
    else if (std::isinf(p) && p > 0) go(std::integral_constant<NormKind, NormKind::kInf>{});
    else if (std::isinf(p)) go(std::integral_constant<NormKind, NormKind::kNegInf>{});
    else go(std::integral_constant<NormKind, NormKind::kGeneral>{});
  });
}
HAL_CPU_KERNEL(norm_kernel, norm_body)

// ---- logsumexp --------------------------------------------------------------------

// e^X for X <= 0 (x - max in logsumexp): the vectorisable float exp.
inline float exp_nonpositive(float x) { return vmath::exp(x); }
template <class L>
L exp_nonpositive(L x) {
  return std::exp(x);
}

// Running maximum M and Σ exp(x - M) of the finite elements, with flags for
// NaN and +inf (which decide the result alone).
struct LseAcc {
  double m = -std::numeric_limits<double>::infinity();
  double s = 0;
  bool nan = false, inf = false;
};
inline void merge_lse(LseAcc& a, const LseAcc& b) {
  a.nan = a.nan || b.nan;
  a.inf = a.inf || b.inf;
  if (b.s == 0) return;
  if (a.s == 0) {
    a.m = b.m;
    a.s = b.s;
  } else if (b.m > a.m) {
    a.s = a.s * std::exp(a.m - b.m) + b.s;
    a.m = b.m;
  } else {
    a.s += b.s * std::exp(b.m - a.m);
  }
}

template <class T>
struct LseR {
  using In = T;
  using Acc = LseAcc;
  using L = compute_t<T>;
  T* out;
  Acc init() const { return {}; }
  void step(Acc& a, L x, int64_t) const {
    LseAcc b;
    if (is_nan(x)) b.nan = true;
    else if (std::isinf(x)) b.inf = x > 0;
    else b = {static_cast<double>(x), 1.0, false, false};
    merge_lse(a, b);
  }
  void merge(Acc& a, const Acc& b) const { merge_lse(a, b); }
  void run(Acc& a, const T* p, int64_t n, int64_t) const {
    auto f = [](L x, L y) { return pick<true>(x, y); };
    L m = lane_fold<L>(p, n, -std::numeric_limits<L>::infinity(), f, f);
    LseAcc b;
    if (is_nan(m)) b.nan = true;
    else if (std::isinf(m)) b.inf = m > 0;  // all -inf: nothing to add
    else b = {static_cast<double>(m), blocked_sum<double, L>(p, n, [m](L x) { return exp_nonpositive(x - m); }), false, false};
    merge_lse(a, b);
  }
  void write(const Acc& a, int64_t, const int64_t* o) const {
    double r = a.nan ? std::numeric_limits<double>::quiet_NaN()
               : a.inf ? std::numeric_limits<double>::infinity()
               : a.s == 0 ? -std::numeric_limits<double>::infinity()
                          : a.m + std::log(a.s);
    out[o[0]] = to_out<T>(r);
  }
};

void logsumexp_body(const OpCall& c) {
  on_output_dtype(c, [&](const Tensor& in, const Tensor& out) {
    ReduceIter it(in, rules::reduce_mask(c), {&out});
    dispatch_float(out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_with(it, in.ptr<T>(), LseR<T>{out.ptr<T>()});
    });
  });
}
HAL_CPU_KERNEL(logsumexp_kernel, logsumexp_body)

// ---- any, all -------------------------------------------------------------------

template <bool kAny, class T>
struct AnyR {
  using In = T;
  using Acc = bool;
  bool* out;
  Acc init() const { return !kAny; }
  void step(Acc& a, compute_t<T> x, int64_t) const {
    if constexpr (kAny) a = a || x != compute_t<T>(0);
    else a = a && x != compute_t<T>(0);
  }
  void merge(Acc& a, const Acc& b) const { a = kAny ? (a || b) : (a && b); }
  // Blocks of vectorised tests, stopping once the answer is known.
  void run(Acc& a, const T* p, int64_t n, int64_t) const {
    constexpr int64_t kBlock = 256;
    for (int64_t b = 0; b < n && a == !kAny; b += kBlock) {
      int64_t m = std::min(kBlock, n - b);
      int hits = 0;
      for (int64_t i = 0; i < m; ++i) hits += static_cast<compute_t<T>>(p[b + i]) != compute_t<T>(0);
      a = kAny ? hits > 0 : hits == m;
    }
  }
  void write(const Acc& a, int64_t, const int64_t* o) const { out[o[0]] = a; }
};

template <bool kAny>
void any_body(const OpCall& c) {
  const Tensor& in = c.input(0);
  const Tensor& out = c.output(0);
  ReduceIter it(in, rules::reduce_mask(c), {&out});
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reduce_with(it, in.ptr<T>(), AnyR<kAny, T>{out.ptr<bool>()});
  });
}
HAL_CPU_KERNEL(any_kernel, any_body<true>)
HAL_CPU_KERNEL(all_kernel, any_body<false>)

// ---- cumsum, cumprod --------------------------------------------------------------

// OUT = running sum/product of IN along DIM, accumulated in wide_t. Lines
// along DIM run on their own; when the innermost dim is contiguous and not
// DIM, a tile of lines advances together (vectorised over the tile).
template <bool kProd, class T>
void scan_lines(const Tensor& in, const Tensor& out, int dim) {
  using A = wide_t<T>;
  const T* src = in.ptr<T>();
  T* dst = out.ptr<T>();
  const int64_t len = in.rank == 0 ? 1 : in.shape[dim];
  const int64_t si = in.rank == 0 ? 0 : in.strides[dim], so = in.rank == 0 ? 0 : out.strides[dim];
  ReduceIter it(in, in.rank == 0 ? 0u : 1u << dim, {&out});
  const int64_t lines = it.out_numel();
  if (lines == 0 || len == 0) return;
  auto combine = [](A a, A x) { return kProd ? a * x : a + x; };
  const A identity = kProd ? A(1) : A(0);
  const int64_t width = it.kept_inner_size();
  if (it.kept_rank() > 0 && it.kept_inner_in_stride() == 1 && it.kept_inner_out_stride(0) == 1 && width >= 8) {
    constexpr int64_t kTile = 64;
    const int64_t tiles = (width + kTile - 1) / kTile, rows = lines / width;
    parallel_for(rows * tiles, std::max<int64_t>(1, 65536 / (len * kTile)), [&](int64_t b, int64_t e) {
      A acc[kTile];
      for (int64_t w = b; w < e; ++w) {
        const int64_t j0 = (w % tiles) * kTile, m = std::min(kTile, width - j0);
        int64_t in_off = 0, out_off[sdk::kernel::kMaxReduceOutputs] = {};
        it.offsets((w / tiles) * width + j0, in_off, out_off);
        for (int64_t j = 0; j < m; ++j) acc[j] = identity;
        for (int64_t i = 0; i < len; ++i) {
          const T* s = src + in_off + i * si;
          T* d = dst + out_off[0] + i * so;
          for (int64_t j = 0; j < m; ++j) {
            acc[j] = combine(acc[j], static_cast<A>(static_cast<compute_t<T>>(s[j])));
            d[j] = to_out<T>(acc[j]);
          }
        }
      }
    });
    return;
  }
  parallel_for(lines, std::max<int64_t>(1, 32768 / len), [&](int64_t b, int64_t e) {
    for (int64_t l = b; l < e; ++l) {
      int64_t in_off = 0, out_off[sdk::kernel::kMaxReduceOutputs] = {};
      it.offsets(l, in_off, out_off);
      A acc = identity;
      for (int64_t i = 0; i < len; ++i) {
        acc = combine(acc, static_cast<A>(static_cast<compute_t<T>>(src[in_off + i * si])));
        dst[out_off[0] + i * so] = to_out<T>(acc);
      }
    }
  });
}

template <bool kProd>
void scan_body(const OpCall& c) {
  on_output_dtype(c, [&](const Tensor& in, const Tensor& out) {
    int dim = sdk::shape_rules::normalize_dim(c, "dim", rules::attr_named(c, "dim").as_int(), in.rank);
    dispatch(out.dtype, [&](auto tag) { scan_lines<kProd, typename decltype(tag)::type>(in, out, dim); });
  });
}
HAL_CPU_KERNEL(cumsum_kernel, scan_body<false>)
HAL_CPU_KERNEL(cumprod_kernel, scan_body<true>)

}  // namespace

void register_reduction_ops(sdk::OpRegistry& ops) {
  ops.add<op::sum>(&sum_kernel);
  ops.add<op::mean>(&mean_kernel);
  ops.add<op::prod>(&prod_kernel);
  ops.add<op::amax>(&amax_kernel);
  ops.add<op::amin>(&amin_kernel);
  ops.add<op::max>(&max_kernel);
  ops.add<op::min>(&min_kernel);
  ops.add<op::argmax>(&argmax_kernel);
  ops.add<op::argmin>(&argmin_kernel);
  ops.add<op::var>(&var_kernel, sdk::kFloatDtypes);
  ops.add<op::std_>(&std_kernel, sdk::kFloatDtypes);
  ops.add<op::norm>(&norm_kernel, sdk::kFloatDtypes);
  ops.add<op::logsumexp>(&logsumexp_kernel);
  ops.add<op::any>(&any_kernel);
  ops.add<op::all>(&all_kernel);
  ops.add<op::cumsum>(&cumsum_kernel);
  ops.add<op::cumprod>(&cumprod_kernel);
}

}  // namespace hal::cpu
