// hal-conformance: the "index" ops — cases and double-precision references.
// References walk every output element with plain multi-index loops.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

using Shape = std::vector<int64_t>;
constexpr hal_dtype_e kI64 = HAL_DTYPE_INT64;
constexpr hal_dtype_e kI32 = HAL_DTYPE_INT32;
constexpr hal_status_code_e kBad = HAL_STATUS_INVALID_ARGUMENT;
constexpr hal_status_code_e kRange = HAL_STATUS_OUT_OF_RANGE;

HostTensor ints(hal_dtype_e dt, Shape shape, std::vector<double> v) { return HostTensor(dt, std::move(shape), std::move(v)); }

// A dim attribute value wrapped into [0, rank) (0-d counts as rank 1).
int wrap_dim(int64_t dim, int rank) {
  int r = std::max(rank, 1);
  return static_cast<int>(dim < 0 ? dim + r : dim);
}

// Index of SHAPE with values in [0, N) that are distinct along DIM for every
// other position (no two positions scatter to one element).
HostTensor distinct_index(hal_dtype_e dt, Shape shape, int dim, int64_t n, uint64_t seed) {
  HostTensor t(dt, shape);
  for (int64_t p = 0; p < t.numel(); ++p) {
    Shape at = unravel(p, t.shape);
    int64_t j = t.rank() == 0 ? 0 : at[dim];
    int64_t col = 0;
    for (int d = 0; d < t.rank(); ++d)
      if (d != dim) col = col * 7 + at[d];
    t.values[p] = static_cast<double>((j + col * 3 + static_cast<int64_t>(seed)) % n);
  }
  return t;
}

// The element of T at IDX where a 0-d T is seen as [1].
double at_or_scalar(const HostTensor& t, const Shape& idx) { return t.rank() == 0 ? t.values[0] : t.at(idx); }

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// ---- gather ---------------------------------------------------------------------

std::vector<OpCase> gather_cases(hal_dtype_e dt) {
  return {
      OpCase("dim 1 [3,4] <- [3,2]").in(random(dt, {3, 4}, 1)).in(random(kI64, {3, 2}, 2, 0, 4)).attr(Attr::i("dim", 1)),
      OpCase("dim 0 int32 [4,5] <- [2,3]").in(random(dt, {4, 5}, 3)).in(random(kI32, {2, 3}, 4, 0, 4)).attr(Attr::i("dim", 0)),
      OpCase("dim -1 3-d").in(random(dt, {2, 3, 5}, 5)).in(random(kI64, {2, 2, 7}, 6, 0, 5)).attr(Attr::i("dim", -1)),
      OpCase("dim 1 3-d").in(random(dt, {2, 3, 5}, 7)).in(random(kI64, {2, 4, 5}, 8, 0, 3)).attr(Attr::i("dim", 1)),
      OpCase("0-d").in(scalar(dt, 1.0)).in(scalar(kI64, 0)).attr(Attr::i("dim", 0)),
      OpCase("zero-size index").in(random(dt, {3, 4}, 9)).in(HostTensor(kI64, {3, 0})).attr(Attr::i("dim", 1)),
      OpCase("zero-size self").in(HostTensor(dt, {0, 4})).in(HostTensor(kI64, {0, 2})).attr(Attr::i("dim", 1)),
      OpCase("index out of range").in(random(dt, {2, 3}, 10)).in(ints(kI64, {2, 2}, {0, 1, 3, 0})).attr(Attr::i("dim", 1))
          .error(kRange, {HostTensor(dt, {2, 2})}, {"gather", "'index'", "3", "position 2"}),
      OpCase("negative index").in(random(dt, {2, 3}, 10)).in(ints(kI64, {2, 2}, {0, -1, 1, 0})).attr(Attr::i("dim", 0))
          .error(kRange, {HostTensor(dt, {2, 2})}, {"gather", "'index'", "-1"}),
      OpCase("index larger than self").in(random(dt, {2, 3}, 11)).in(HostTensor(kI64, {3, 1})).attr(Attr::i("dim", 1))
          .error(kBad, {HostTensor(dt, {3, 1})}, {"gather", "'index'", "[3, 1]"}),
      OpCase("rank mismatch").in(random(dt, {2, 3}, 11)).in(HostTensor(kI64, {2})).attr(Attr::i("dim", 1))
          .error(kBad, {HostTensor(dt, {2})}, {"gather", "'index'", "rank"}),
      OpCase("dim out of range").in(random(dt, {2, 3}, 12)).in(HostTensor(kI64, {2, 3})).attr(Attr::i("dim", -3))
          .error(kBad, {HostTensor(dt, {2, 3})}, {"gather", "'dim'", "-3"}),
      OpCase("float index").in(random(dt, {2, 3}, 12)).in(HostTensor(HAL_DTYPE_FLOAT32, {2, 3})).attr(Attr::i("dim", 0))
          .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(dt, {2, 3})}, {"gather", "'index'", "float32"}),
  };
}

std::vector<HostTensor> gather_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  const HostTensor& index = c.input(1);
  int dim = wrap_dim(c.attr_int("dim", 0), self.rank());
  HostTensor out(self.dtype, index.shape);
  for (int64_t p = 0; p < out.numel(); ++p) {
    Shape at = unravel(p, index.shape);
    if (self.rank() == 0) {
      out.values[p] = self.values[0];
      continue;
    }
    at[dim] = static_cast<int64_t>(index.values[p]);
    out.values[p] = self.at(at);
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(gather, gather_cases, gather_ref);

// ---- index_select, embedding ----------------------------------------------------

std::vector<OpCase> index_select_cases(hal_dtype_e dt) {
  return {
      OpCase("dim 0 [4,5] repeats").in(random(dt, {4, 5}, 1)).in(ints(kI64, {5}, {3, 0, 3, 1, 2})).attr(Attr::i("dim", 0)),
      OpCase("dim 1 int32").in(random(dt, {4, 5}, 2)).in(ints(kI32, {3}, {4, 4, 0})).attr(Attr::i("dim", 1)),
      OpCase("dim -2 3-d").in(random(dt, {2, 6, 3}, 3)).in(random(kI64, {8}, 4, 0, 6)).attr(Attr::i("dim", -2)),
      OpCase("0-d index").in(random(dt, {3, 4}, 5)).in(scalar(kI64, 2)).attr(Attr::i("dim", 0)),
      OpCase("0-d self").in(scalar(dt, 1.0)).in(scalar(kI64, 0)).attr(Attr::i("dim", 0)),
      OpCase("zero-size index").in(random(dt, {3, 4}, 6)).in(HostTensor(kI64, {0})).attr(Attr::i("dim", 1)),
      OpCase("zero-size self").in(HostTensor(dt, {0, 4})).in(ints(kI64, {2}, {1, 3})).attr(Attr::i("dim", 1)),
      OpCase("index out of range").in(random(dt, {4, 5}, 7)).in(ints(kI64, {3}, {0, 4, 1})).attr(Attr::i("dim", 0))
          .error(kRange, {HostTensor(dt, {3, 5})}, {"index_select", "'index'", "4", "position 1"}),
      OpCase("negative index").in(random(dt, {4, 5}, 7)).in(ints(kI32, {2}, {-1, 1})).attr(Attr::i("dim", 1))
          .error(kRange, {HostTensor(dt, {4, 2})}, {"index_select", "'index'", "-1"}),
      OpCase("2-d index").in(random(dt, {4, 5}, 8)).in(HostTensor(kI64, {2, 1})).attr(Attr::i("dim", 0))
          .error(kBad, {HostTensor(dt, {2, 5})}, {"index_select", "'index'", "[2, 1]"}),
      OpCase("dim out of range").in(random(dt, {4, 5}, 8)).in(HostTensor(kI64, {2})).attr(Attr::i("dim", 2))
          .error(kBad, {HostTensor(dt, {4, 5})}, {"index_select", "'dim'", "2"}),
  };
}

std::vector<HostTensor> index_select_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  const HostTensor& index = c.input(1);
  int dim = wrap_dim(c.attr_int("dim", 0), self.rank());
  if (self.rank() == 0) return {HostTensor(self.dtype, {}, {self.values[0]})};
  Shape shape = self.shape;
  shape[dim] = index.numel();
  HostTensor out(self.dtype, shape);
  for (int64_t p = 0; p < out.numel(); ++p) {
    Shape at = unravel(p, shape);
    at[dim] = static_cast<int64_t>(index.values[at[dim]]);
    out.values[p] = self.at(at);
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(index_select, index_select_cases, index_select_ref);

std::vector<OpCase> embedding_cases(hal_dtype_e dt) {
  return {
      OpCase("[6,4] ids [2,3]").in(random(dt, {6, 4}, 1)).in(random(kI64, {2, 3}, 2, 0, 6)),
      OpCase("int32 ids, padding_idx").in(random(dt, {5, 3}, 3)).in(ints(kI32, {4}, {4, 0, 4, 2}))
          .attr(Attr::i("padding_idx", 4)),
      OpCase("0-d id").in(random(dt, {5, 3}, 4)).in(scalar(kI64, 3)),
      OpCase("zero-size ids").in(random(dt, {5, 3}, 5)).in(HostTensor(kI64, {2, 0})),
      OpCase("zero-size dim").in(HostTensor(dt, {5, 0})).in(ints(kI64, {2}, {1, 2})),
      OpCase("id out of range").in(random(dt, {5, 3}, 6)).in(ints(kI64, {3}, {0, 5, 1}))
          .error(kRange, {HostTensor(dt, {3, 3})}, {"embedding", "'indices'", "5", "position 1"}),
      OpCase("negative id").in(random(dt, {5, 3}, 6)).in(ints(kI32, {2}, {1, -2}))
          .error(kRange, {HostTensor(dt, {2, 3})}, {"embedding", "'indices'", "-2"}),
      OpCase("weight rank 1").in(random(dt, {5}, 7)).in(ints(kI64, {2}, {1, 2}))
          .error(kBad, {HostTensor(dt, {2, 1})}, {"embedding", "'weight'", "rank 2"}),
      OpCase("padding_idx too large").in(random(dt, {5, 3}, 8)).in(ints(kI64, {2}, {1, 2}))
          .attr(Attr::i("padding_idx", 5)).error(kBad, {HostTensor(dt, {2, 3})}, {"embedding", "'padding_idx'", "5"}),
  };
}

std::vector<HostTensor> embedding_ref(const OpCase& c) {
  const HostTensor& w = c.input(0);
  const HostTensor& ids = c.input(1);
  Shape shape = ids.shape;
  shape.push_back(w.shape[1]);
  HostTensor out(w.dtype, shape);
  for (int64_t p = 0; p < ids.numel(); ++p)
    for (int64_t d = 0; d < w.shape[1]; ++d)
      out.values[p * w.shape[1] + d] = w.at({static_cast<int64_t>(ids.values[p]), d});
  return {out};
}
HAL_CONFORMANCE_SUITE(embedding, embedding_cases, embedding_ref);

std::vector<OpCase> embedding_backward_cases(hal_dtype_e dt) {
  Attr num5 = Attr::i("num_weights", 5);
  return {
      OpCase("repeats").in(random(dt, {2, 3, 4}, 1)).in(random(kI64, {2, 3}, 2, 0, 5)).attr(num5),
      OpCase("padding_idx, scale_grad_by_freq").in(random(dt, {6, 3}, 3)).in(ints(kI32, {6}, {1, 4, 1, 1, 0, 4}))
          .attr(num5).attr(Attr::i("padding_idx", 4)).attr(Attr::b("scale_grad_by_freq", true)),
      OpCase("many repeats").in(random(dt, {40, 8}, 4)).in(random(kI64, {40}, 5, 0, 3)).attr(Attr::i("num_weights", 3))
          .tol(4.0),
      OpCase("0-d id").in(random(dt, {4}, 6)).in(scalar(kI64, 2)).attr(num5),
      OpCase("zero-size ids").in(HostTensor(dt, {0, 4})).in(HostTensor(kI64, {0})).attr(num5),
      OpCase("num_weights 0").in(HostTensor(dt, {0, 4})).in(HostTensor(kI64, {0})).attr(Attr::i("num_weights", 0)),
      OpCase("id out of range").in(random(dt, {3, 4}, 7)).in(ints(kI64, {3}, {0, 1, 5})).attr(num5)
          .error(kRange, {HostTensor(dt, {5, 4})}, {"embedding_backward", "'indices'", "5", "position 2"}),
      OpCase("missing num_weights").in(random(dt, {3, 4}, 7)).in(ints(kI64, {3}, {0, 1, 2}))
          .error(kBad, {HostTensor(dt, {5, 4})}, {"embedding_backward", "num_weights"}),
      OpCase("negative num_weights").in(random(dt, {3, 4}, 7)).in(ints(kI64, {3}, {0, 1, 2}))
          .attr(Attr::i("num_weights", -1)).error(kBad, {HostTensor(dt, {0, 4})}, {"embedding_backward", "'num_weights'", "-1"}),
      OpCase("grad shape mismatch").in(random(dt, {4, 4}, 8)).in(ints(kI64, {3}, {0, 1, 2})).attr(num5)
          .error(kBad, {HostTensor(dt, {5, 4})}, {"embedding_backward", "'grad_output'", "[4, 4]"}),
  };
}

std::vector<HostTensor> embedding_backward_ref(const OpCase& c) {
  const HostTensor& g = c.input(0);
  const HostTensor& ids = c.input(1);
  int64_t num = c.attr_int("num_weights", 0);
  int64_t pad = c.attr_int("padding_idx", -1);
  bool scale = c.attr_bool("scale_grad_by_freq", false);
  int64_t D = g.shape.back();
  HostTensor out(g.dtype, {num, D});
  std::vector<double> freq(static_cast<size_t>(num), 0.0);
  for (double v : ids.values) freq[static_cast<size_t>(v)] += 1;
  for (int64_t p = 0; p < ids.numel(); ++p) {
    int64_t w = static_cast<int64_t>(ids.values[p]);
    if (w == pad) continue;
    for (int64_t d = 0; d < D; ++d) out.values[w * D + d] += g.values[p * D + d] / (scale ? freq[w] : 1.0);
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(embedding_backward, embedding_backward_cases, embedding_backward_ref);

// ---- scatter, scatter_add --------------------------------------------------------

// Cases shared by scatter and scatter_add; DUPLICATES lets targets repeat.
std::vector<OpCase> scatter_like_cases(const std::string& op, hal_dtype_e dt, bool duplicates) {
  auto index = [&](Shape shape, int dim, int64_t n, uint64_t seed, hal_dtype_e it = kI64) {
    return duplicates ? random(it, std::move(shape), seed, 0, static_cast<double>(n))
                      : distinct_index(it, std::move(shape), dim, n, seed);
  };
  hal_dtype_e other = dt == kI64 ? HAL_DTYPE_FLOAT32 : kI64;
  return {
      OpCase("dim 0 [3,4], src larger").in(random(dt, {3, 4}, 1)).in(index({2, 4}, 0, 3, 2)).in(random(dt, {2, 5}, 3))
          .attr(Attr::i("dim", 0)),
      OpCase("dim 1 int32").in(random(dt, {3, 5}, 4)).in(index({2, 3}, 1, 5, 5, kI32)).in(random(dt, {3, 3}, 6))
          .attr(Attr::i("dim", 1)),
      OpCase("dim -1 3-d").in(random(dt, {2, 3, 4}, 7)).in(index({2, 2, 4}, 2, 4, 8)).in(random(dt, {2, 3, 4}, 9))
          .attr(Attr::i("dim", -1)),
      OpCase("dim 1 3-d").in(random(dt, {2, 4, 3}, 10)).in(index({2, 3, 3}, 1, 4, 11)).in(random(dt, {2, 3, 3}, 12))
          .attr(Attr::i("dim", 1)),
      OpCase("0-d").in(scalar(dt, 1.0)).in(scalar(kI64, 0)).in(scalar(dt, -1.0)).attr(Attr::i("dim", 0)),
      OpCase("zero-size index").in(random(dt, {3, 4}, 13)).in(HostTensor(kI64, {0, 4})).in(random(dt, {2, 4}, 14))
          .attr(Attr::i("dim", 0)),
      OpCase("index out of range").in(random(dt, {3, 4}, 15)).in(ints(kI64, {1, 2}, {0, 3})).in(random(dt, {1, 2}, 16))
          .attr(Attr::i("dim", 0)).error(kRange, {HostTensor(dt, {3, 4})}, {op, "'index'", "3", "position 1"}),
      OpCase("negative index").in(random(dt, {3, 4}, 15)).in(ints(kI32, {1, 2}, {-1, 0})).in(random(dt, {1, 2}, 16))
          .attr(Attr::i("dim", 1)).error(kRange, {HostTensor(dt, {3, 4})}, {op, "'index'", "-1"}),
      OpCase("index larger than src").in(random(dt, {3, 4}, 17)).in(HostTensor(kI64, {2, 3})).in(random(dt, {2, 2}, 18))
          .attr(Attr::i("dim", 0)).error(kBad, {HostTensor(dt, {3, 4})}, {op, "'index'", "'src'", "[2, 2]"}),
      OpCase("index larger than self").in(random(dt, {3, 4}, 17)).in(HostTensor(kI64, {4, 1})).in(random(dt, {4, 4}, 18))
          .attr(Attr::i("dim", 1)).error(kBad, {HostTensor(dt, {3, 4})}, {op, "'index'", "'self'", "[4, 1]"}),
      OpCase("src dtype differs").in(random(dt, {3, 4}, 19)).in(HostTensor(kI64, {1, 4})).in(random(other, {1, 4}, 20))
          .attr(Attr::i("dim", 0)).error(kBad, {HostTensor(dt, {3, 4})}, {op, "'src'", dtype_str(other)}),
      OpCase("dim out of range").in(random(dt, {3, 4}, 21)).in(HostTensor(kI64, {1, 4})).in(random(dt, {1, 4}, 22))
          .attr(Attr::i("dim", 2)).error(kBad, {HostTensor(dt, {3, 4})}, {op, "'dim'", "2"}),
  };
}

template <bool kAdd>
std::vector<HostTensor> scatter_like_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  const HostTensor& index = c.input(1);
  const HostTensor& src = c.input(2);
  int dim = wrap_dim(c.attr_int("dim", 0), self.rank());
  HostTensor out = self;
  for (int64_t p = 0; p < index.numel(); ++p) {
    Shape at = unravel(p, index.shape);
    double v = at_or_scalar(src, at);
    double& target = self.rank() == 0 ? out.values[0] : (at[dim] = static_cast<int64_t>(index.values[p]), out.at(at));
    target = kAdd ? target + v : v;
  }
  return {out};
}

std::vector<OpCase> scatter_cases(hal_dtype_e dt) { return scatter_like_cases("scatter", dt, false); }
HAL_CONFORMANCE_SUITE(scatter, scatter_cases, scatter_like_ref<false>);
std::vector<OpCase> scatter_add_cases(hal_dtype_e dt) { return scatter_like_cases("scatter_add", dt, true); }
HAL_CONFORMANCE_SUITE(scatter_add, scatter_add_cases, scatter_like_ref<true>);

// ---- index_put ----------------------------------------------------------------------

// K index rows over the first K dims of SELF_SHAPE, B positions, all distinct
// (half of them negative, counted from the end).
HostTensor distinct_positions(const Shape& self_shape, int k, Shape b, uint64_t seed) {
  int64_t total = 1;
  for (int d = 0; d < k; ++d) total *= self_shape[d];
  Shape shape{k};
  shape.insert(shape.end(), b.begin(), b.end());
  HostTensor out(kI64, shape);
  int64_t count = out.numel() / k;
  HostTensor perm = permutation(kI64, total, seed);
  for (int64_t p = 0; p < count; ++p) {
    int64_t flat = static_cast<int64_t>(perm.values[p]);
    for (int d = k - 1; d >= 0; --d) {
      int64_t v = flat % self_shape[d];
      flat /= self_shape[d];
      out.values[d * count + p] = static_cast<double>((p % 2) ? v - self_shape[d] : v);
    }
  }
  return out;
}

std::vector<OpCase> index_put_cases(hal_dtype_e dt) {
  Attr acc = Attr::b("accumulate", true);
  return {
      OpCase("K=1 rows").in(random(dt, {5, 3}, 1)).in(distinct_positions({5, 3}, 1, {3}, 2)).in(random(dt, {3, 3}, 3)),
      OpCase("K=1 broadcast values").in(random(dt, {5, 3}, 4)).in(distinct_positions({5, 3}, 1, {2}, 5))
          .in(random(dt, {3}, 6)),
      OpCase("K=2 points [2,2]").in(random(dt, {4, 3}, 7)).in(distinct_positions({4, 3}, 2, {2, 2}, 8))
          .in(random(dt, {2, 2}, 9)),
      OpCase("K=2 of 3-d, 0-d value").in(random(dt, {3, 4, 2}, 10)).in(distinct_positions({3, 4, 2}, 2, {3}, 11))
          .in(scalar(dt, 1.0)),
      OpCase("K=1 of 3-d, values [1,2]").in(random(dt, {3, 4, 2}, 12)).in(distinct_positions({3, 4, 2}, 1, {2}, 13))
          .in(random(dt, {1, 2}, 14)),
      OpCase("accumulate repeats").in(random(dt, {4, 3}, 15)).in(ints(kI64, {1, 5}, {1, 3, 1, -3, 0}))
          .in(random(dt, {5, 3}, 16)).attr(acc),
      OpCase("accumulate K=2").in(random(dt, {4, 3}, 17)).in(ints(kI64, {2, 4}, {2, 2, 0, -2, 1, 1, 0, -2}))
          .in(random(dt, {4}, 18)).attr(acc),
      OpCase("zero-size B").in(random(dt, {4, 3}, 19)).in(HostTensor(kI64, {1, 0})).in(HostTensor(dt, {0, 3})),
      OpCase("index out of range").in(random(dt, {4, 3}, 20)).in(ints(kI64, {2, 2}, {0, 1, 2, 3}))
          .in(scalar(dt, 1.0)).error(kRange, {HostTensor(dt, {4, 3})}, {"index_put", "'indices'", "3", "position 3"}),
      OpCase("negative out of range").in(random(dt, {4, 3}, 20)).in(ints(kI64, {1, 2}, {-5, 0}))
          .in(scalar(dt, 1.0)).error(kRange, {HostTensor(dt, {4, 3})}, {"index_put", "'indices'", "-5", "[-4, 4)"}),
      OpCase("K larger than rank").in(random(dt, {4, 3}, 21)).in(HostTensor(kI64, {3, 1})).in(scalar(dt, 1.0))
          .error(kBad, {HostTensor(dt, {4, 3})}, {"index_put", "'indices'", "[3, 1]"}),
      OpCase("0-d self").in(scalar(dt, 1.0)).in(HostTensor(kI64, {1, 1})).in(scalar(dt, 1.0))
          .error(kBad, {HostTensor(dt, {})}, {"index_put", "'indices'"}),
      OpCase("values do not broadcast").in(random(dt, {4, 3}, 22)).in(HostTensor(kI64, {1, 2})).in(random(dt, {3, 3}, 23))
          .error(kBad, {HostTensor(dt, {4, 3})}, {"index_put", "'values'", "[3, 3]", "[2, 3]"}),
      OpCase("int32 indices").in(random(dt, {4, 3}, 24)).in(HostTensor(kI32, {1, 2})).in(scalar(dt, 1.0))
          .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(dt, {4, 3})}, {"index_put", "'indices'", "int32"}),
  };
}

std::vector<HostTensor> index_put_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  const HostTensor& indices = c.input(1);
  const HostTensor& values = c.input(2);
  bool accumulate = c.attr_bool("accumulate", false);
  int k = static_cast<int>(indices.shape[0]);
  Shape b(indices.shape.begin() + 1, indices.shape.end());
  Shape rest(self.shape.begin() + k, self.shape.end());
  int64_t nb = HostTensor::count(b), nrest = HostTensor::count(rest);
  HostTensor out = self;
  for (int64_t p = 0; p < nb; ++p) {
    Shape target;
    for (int d = 0; d < k; ++d) {
      int64_t v = static_cast<int64_t>(indices.values[d * nb + p]);
      target.push_back(v < 0 ? v + self.shape[d] : v);
    }
    Shape bidx = unravel(p, b);
    for (int64_t s = 0; s < nrest; ++s) {
      Shape ridx = unravel(s, rest);
      Shape full = bidx, pos = target;
      full.insert(full.end(), ridx.begin(), ridx.end());
      pos.insert(pos.end(), ridx.begin(), ridx.end());
      double v = broadcast_at(values, full);
      out.at(pos) = accumulate ? out.at(pos) + v : v;
    }
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(index_put, index_put_cases, index_put_ref);

// ---- masked_fill --------------------------------------------------------------------

std::vector<OpCase> masked_fill_cases(hal_dtype_e dt) {
  constexpr hal_dtype_e kB = HAL_DTYPE_BOOL;
  Attr value = is_float(dt) ? Attr::f("value", -1.5) : Attr::i("value", dt == kB ? 1 : 3);
  return {
      OpCase("same shape").in(random(dt, {3, 4}, 1)).in(random(kB, {3, 4}, 2)).attr(value),
      OpCase("mask [4]").in(random(dt, {3, 4}, 3)).in(random(kB, {4}, 4)).attr(value),
      OpCase("mask [3,1]").in(random(dt, {3, 4}, 5)).in(random(kB, {3, 1}, 6)).attr(value),
      OpCase("self broadcast").in(random(dt, {4}, 7)).in(random(kB, {3, 4}, 8)).attr(value),
      OpCase("integer value").in(random(dt, {5}, 9)).in(random(kB, {5}, 10)).attr(Attr::i("value", 0)),
      OpCase("0-d").in(scalar(dt, 1.0)).in(scalar(kB, 1)).attr(value),
      OpCase("0-d mask").in(random(dt, {2, 3}, 11)).in(scalar(kB, 1)).attr(value),
      OpCase("zero-size").in(HostTensor(dt, {0, 4})).in(random(kB, {4}, 12)).attr(value),
      OpCase("mask not bool").in(random(dt, {3, 4}, 13)).in(random(HAL_DTYPE_UINT8, {3, 4}, 14)).attr(value)
          .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(dt, {3, 4})}, {"masked_fill", "'mask'", "uint8"}),
      OpCase("mask does not broadcast").in(random(dt, {3, 4}, 15)).in(random(kB, {3}, 16)).attr(value)
          .error(kBad, {HostTensor(dt, {3, 4})}, {"masked_fill", "'mask'", "[3]"}),
      OpCase("missing value").in(random(dt, {3, 4}, 17)).in(random(kB, {3, 4}, 18))
          .error(kBad, {HostTensor(dt, {3, 4})}, {"masked_fill", "value"}),
      OpCase("value not a scalar").in(random(dt, {3, 4}, 17)).in(random(kB, {3, 4}, 18)).attr(Attr::s("value", "x"))
          .error(kBad, {HostTensor(dt, {3, 4})}, {"masked_fill", "value"}),
  };
}

std::vector<HostTensor> masked_fill_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  const HostTensor& mask = c.input(1);
  double value = c.attr_float("value", 0.0);
  Shape shape = *broadcast_shape(self.shape, mask.shape);
  HostTensor out(self.dtype, shape);
  for (int64_t p = 0; p < out.numel(); ++p) {
    Shape at = unravel(p, shape);
    out.values[p] = broadcast_at(mask, at) != 0 ? value : broadcast_at(self, at);
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(masked_fill, masked_fill_cases, masked_fill_ref);

// ---- nonzero ----------------------------------------------------------------------------

// Values in {-1, 0, 1} in DT (many zeros).
HostTensor sparse(hal_dtype_e dt, Shape shape, uint64_t seed) {
  HostTensor t = random(kI64, std::move(shape), seed, -1, 2);
  t.dtype = dt;
  for (double& v : t.values) v = round_to(dt, v);
  return t;
}

// Only the first `count` rows of `out` are specified.
std::string nonzero_check(const OpCase&, const std::vector<HostTensor>& expected, const std::vector<HostTensor>& actual) {
  double n = expected[1].values[0];
  if (actual[1].values[0] != n)
    return "count is " + std::to_string(actual[1].values[0]) + ", expected " + std::to_string(n);
  int64_t cols = expected[0].shape[1];
  for (int64_t i = 0; i < static_cast<int64_t>(n) * cols; ++i)
    if (actual[0].values[i] != expected[0].values[i])
      return "out row " + std::to_string(i / std::max<int64_t>(cols, 1)) + " col " +
             std::to_string(i % std::max<int64_t>(cols, 1)) + " is " + std::to_string(actual[0].values[i]) +
             ", expected " + std::to_string(expected[0].values[i]);
  return "";
}

std::vector<OpCase> nonzero_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("2-d").in(sparse(dt, {3, 4}, 1)),
      OpCase("3-d").in(sparse(dt, {2, 3, 5}, 2)),
      OpCase("1-d all zero").in(HostTensor(dt, {6})),
      OpCase("all nonzero").in(full(dt, {2, 2}, 1.0)),
      OpCase("0-d nonzero").in(scalar(dt, 1.0)),
      OpCase("0-d zero").in(scalar(dt, 0.0)),
      OpCase("zero-size").in(HostTensor(dt, {0, 3})),
  };
  if (is_float(dt)) cases.push_back(OpCase("NaN and -0").in(HostTensor(dt, {4}, {NAN, -0.0, 0.0, 2.0})));
  for (OpCase& c : cases) c.custom_check = nonzero_check;
  return cases;
}

std::vector<HostTensor> nonzero_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  HostTensor out(kI64, {self.numel(), self.rank()});
  int64_t n = 0;
  for (int64_t p = 0; p < self.numel(); ++p) {
    if (self.values[p] == 0) continue;  // NaN != 0: nonzero
    Shape at = unravel(p, self.shape);
    for (int d = 0; d < self.rank(); ++d) out.values[n * self.rank() + d] = static_cast<double>(at[d]);
    ++n;
  }
  return {out, HostTensor(kI64, {}, {static_cast<double>(n)})};
}
HAL_CONFORMANCE_SUITE(nonzero, nonzero_cases, nonzero_ref);

// ---- sort, argsort, topk ----------------------------------------------------------------

// Rows of SELF along DIM ordered stably (NaN largest); the first K of each
// as values and indices of shape self.shape with K at DIM.
std::vector<HostTensor> sorted_rows(const HostTensor& self, int dim, int64_t k, bool descending) {
  Shape s = self.rank() == 0 ? Shape{1} : self.shape;
  Shape out_shape = self.shape;
  if (self.rank() > 0) out_shape[dim] = k;
  HostTensor values(self.dtype, out_shape), indices(kI64, out_shape);
  Shape os = s;
  os[dim] = k;
  Shape row_shape = s;
  row_shape[dim] = 1;
  HostTensor flat(self.dtype, s, self.values);
  for (int64_t r = 0; r < HostTensor::count(row_shape); ++r) {
    Shape at = unravel(r, row_shape);
    std::vector<std::pair<double, int64_t>> row;
    for (int64_t j = 0; j < s[dim]; ++j) {
      at[dim] = j;
      row.emplace_back(flat.at(at), j);
    }
    std::stable_sort(row.begin(), row.end(), [descending](const auto& a, const auto& b) {
      bool an = std::isnan(a.first), bn = std::isnan(b.first);
      if (an || bn) return descending ? (an && !bn) : (!an && bn);
      return descending ? a.first > b.first : a.first < b.first;
    });
    for (int64_t j = 0; j < k; ++j) {
      at[dim] = j;
      int64_t off = HostTensor(kI64, os).offset(at);
      values.values[off] = row[j].first;
      indices.values[off] = static_cast<double>(row[j].second);
    }
  }
  return {values, indices};
}

// For results whose index order among equal values (or, unsorted, whose
// order at all) is unspecified: each row's indices are distinct, point at
// the reported values, and give the expected values (as a multiset when
// UNORDERED).
std::string check_selection(const OpCase& c, const std::vector<HostTensor>& expected,
                            const std::vector<HostTensor>& actual, bool unordered) {
  const HostTensor& self = c.input(0);
  bool has_values = actual.size() == 2;
  const HostTensor& idx = actual.back();
  const HostTensor& want = expected.front();  // expected values (or indices for argsort)
  int dim = wrap_dim(c.attr_int("dim", -1), self.rank());
  Shape s = self.rank() == 0 ? Shape{1} : self.shape;
  Shape os = idx.rank() == 0 ? Shape{1} : idx.shape;
  HostTensor flat(self.dtype, s, self.values);
  Shape row_shape = os;
  row_shape[dim] = 1;
  for (int64_t r = 0; r < HostTensor::count(row_shape); ++r) {
    Shape at = unravel(r, row_shape);
    std::vector<double> got, exp;
    std::vector<int64_t> seen;
    for (int64_t j = 0; j < os[dim]; ++j) {
      at[dim] = j;
      int64_t off = HostTensor(kI64, os).offset(at);
      int64_t i = static_cast<int64_t>(idx.values[off]);
      if (i < 0 || i >= s[dim] || std::find(seen.begin(), seen.end(), i) != seen.end())
        return "row " + std::to_string(r) + ": index " + std::to_string(i) + " is out of range or repeated";
      seen.push_back(i);
      Shape src = at;
      src[dim] = i;
      double v = flat.at(src);
      if (has_values && !same_value(actual[0].values[off], v))
        return "row " + std::to_string(r) + ": values[" + std::to_string(j) + "] = " +
               std::to_string(actual[0].values[off]) + " but self at its index " + std::to_string(i) + " is " +
               std::to_string(v);
      got.push_back(v);
      if (has_values) {
        exp.push_back(want.values[off]);
      } else {
        Shape e = at;
        e[dim] = static_cast<int64_t>(want.values[off]);
        exp.push_back(flat.at(e));
      }
    }
    if (unordered) {
      auto key = [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : a < b; };
      std::sort(got.begin(), got.end(), key);
      std::sort(exp.begin(), exp.end(), key);
    }
    for (size_t j = 0; j < got.size(); ++j)
      if (!same_value(got[j], exp[j]))
        return "row " + std::to_string(r) + ": element " + std::to_string(j) + " is " + std::to_string(got[j]) +
               ", expected " + std::to_string(exp[j]);
  }
  return "";
}

std::string check_ties(const OpCase& c, const std::vector<HostTensor>& e, const std::vector<HostTensor>& a) {
  return check_selection(c, e, a, false);
}
std::string check_unordered(const OpCase& c, const std::vector<HostTensor>& e, const std::vector<HostTensor>& a) {
  return check_selection(c, e, a, true);
}

// Distinct values (no ties): a permutation of 0..n-1 in DT, shaped SHAPE.
HostTensor distinct(hal_dtype_e dt, Shape shape, uint64_t seed) {
  HostTensor p = permutation(dt, HostTensor::count(shape), seed);
  return HostTensor(dt, std::move(shape), p.values);
}

// Cases of sort and argsort; unstable cases with ties use check_ties.
std::vector<OpCase> sort_like_cases(const std::string& op, hal_dtype_e dt) {
  Attr stable = Attr::b("stable", true);
  std::vector<OpCase> cases;
  if (dt != HAL_DTYPE_BOOL) {
    cases.push_back(OpCase("[4,6]").in(distinct(dt, {4, 6}, 1)));
    cases.push_back(OpCase("descending").in(distinct(dt, {3, 7}, 2)).attr(Attr::b("descending", true)));
    cases.push_back(OpCase("dim 0").in(distinct(dt, {5, 3}, 3)).attr(Attr::i("dim", 0)));
    cases.push_back(OpCase("dim 1 of 3-d").in(distinct(dt, {2, 5, 3}, 4)).attr(Attr::i("dim", 1)));
    cases.push_back(OpCase("long rows").in(distinct(dt, {2, 100}, 5)));
  }
  cases.push_back(OpCase("stable ties").in(random(dt, {3, 9}, 6, 0, 3)).attr(stable));
  cases.push_back(OpCase("stable ties descending dim 0").in(random(dt, {8, 3}, 7, 0, 3)).attr(stable)
                      .attr(Attr::b("descending", true)).attr(Attr::i("dim", 0)));
  OpCase ties("unstable ties");
  ties.in(random(dt, {3, 9}, 8, 0, 3)).custom_check = check_ties;
  cases.push_back(ties);
  if (is_float(dt)) {
    cases.push_back(OpCase("NaN, stable").in(HostTensor(dt, {6}, {2.0, NAN, -1.0, NAN, 0.5, -3.0})).attr(stable));
    cases.push_back(OpCase("NaN descending, stable").in(HostTensor(dt, {6}, {2.0, NAN, -1.0, NAN, 0.5, -3.0}))
                        .attr(stable).attr(Attr::b("descending", true)));
  }
  cases.push_back(OpCase("0-d").in(scalar(dt, 1.0)));
  cases.push_back(OpCase("zero-size rows").in(HostTensor(dt, {0, 4})));
  cases.push_back(OpCase("zero-length dim").in(HostTensor(dt, {3, 0})));
  Shape outs{2, 3};
  std::vector<HostTensor> err_out = op == "sort" ? std::vector<HostTensor>{HostTensor(dt, outs), HostTensor(kI64, outs)}
                                                  : std::vector<HostTensor>{HostTensor(kI64, outs)};
  cases.push_back(OpCase("dim out of range").in(random(dt, outs, 9)).attr(Attr::i("dim", 2)).error(kBad, err_out, {op, "'dim'", "2"}));
  cases.push_back(OpCase("dim not an int").in(random(dt, outs, 9)).attr(Attr::f("dim", 1.0)).error(kBad, err_out, {op, "dim"}));
  return cases;
}

std::vector<HostTensor> sort_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  int dim = wrap_dim(c.attr_int("dim", -1), self.rank());
  return sorted_rows(self, dim, self.rank() == 0 ? 1 : self.shape[dim], c.attr_bool("descending", false));
}
std::vector<HostTensor> argsort_ref(const OpCase& c) { return {sort_ref(c)[1]}; }

std::vector<OpCase> sort_cases(hal_dtype_e dt) { return sort_like_cases("sort", dt); }
HAL_CONFORMANCE_SUITE(sort, sort_cases, sort_ref);
std::vector<OpCase> argsort_cases(hal_dtype_e dt) { return sort_like_cases("argsort", dt); }
HAL_CONFORMANCE_SUITE(argsort, argsort_cases, argsort_ref);

std::vector<OpCase> topk_cases(hal_dtype_e dt) {
  auto k = [](int64_t v) { return Attr::i("k", v); };
  std::vector<OpCase> cases = {
      OpCase("k 3 of [3,8]").in(distinct(dt, {3, 8}, 1)).attr(k(3)),
      OpCase("smallest").in(distinct(dt, {3, 8}, 2)).attr(k(3)).attr(Attr::b("largest", false)),
      OpCase("dim 0").in(distinct(dt, {6, 4}, 3)).attr(k(2)).attr(Attr::i("dim", 0)),
      OpCase("dim 1 of 3-d").in(distinct(dt, {2, 6, 3}, 4)).attr(k(4)).attr(Attr::i("dim", 1)),
      OpCase("k = n").in(distinct(dt, {2, 5}, 5)).attr(k(5)),
      OpCase("k = 0").in(distinct(dt, {2, 5}, 6)).attr(k(0)),
      OpCase("long rows").in(distinct(dt, {2, 100}, 7)).attr(k(10)),
      OpCase("small k, long row").in(distinct(dt, {1, 256}, 12)).attr(k(8)),
      OpCase("small k along dim 0").in(distinct(dt, {128, 2}, 13)).attr(k(4)).attr(Attr::i("dim", 0))
          .attr(Attr::b("largest", false)),
      OpCase("0-d").in(scalar(dt, 1.0)).attr(k(1)),
      OpCase("zero-size rows").in(HostTensor(dt, {0, 5})).attr(k(2)),
  };
  OpCase unsorted("unsorted");
  unsorted.in(distinct(dt, {3, 8}, 8)).attr(k(4)).attr(Attr::b("sorted", false)).custom_check = check_unordered;
  cases.push_back(unsorted);
  OpCase unsorted_small("unsorted small k");
  unsorted_small.in(distinct(dt, {2, 128}, 14)).attr(k(4)).attr(Attr::b("sorted", false)).custom_check = check_unordered;
  cases.push_back(unsorted_small);
  OpCase ties("ties");
  ties.in(random(dt, {3, 9}, 9, 0, 3)).attr(k(4)).custom_check = check_ties;
  cases.push_back(ties);
  if (is_float(dt)) {
    OpCase nan("NaN largest");
    nan.in(HostTensor(dt, {6}, {2.0, NAN, -1.0, NAN, 0.5, -3.0})).attr(k(3)).custom_check = check_ties;
    cases.push_back(nan);
  }
  Shape s{2, 5};
  auto err_out = [&](int64_t kk) { return std::vector<HostTensor>{HostTensor(dt, {2, kk}), HostTensor(kI64, {2, kk})}; };
  cases.push_back(OpCase("k > size").in(random(dt, s, 10)).attr(k(6)).error(kBad, err_out(6), {"topk", "'k'", "6"}));
  cases.push_back(OpCase("k < 0").in(random(dt, s, 10)).attr(k(-1)).error(kBad, err_out(1), {"topk", "'k'", "-1"}));
  cases.push_back(OpCase("missing k").in(random(dt, s, 10)).error(kBad, err_out(1), {"topk", "k"}));
  cases.push_back(OpCase("dim out of range").in(random(dt, s, 10)).attr(k(1)).attr(Attr::i("dim", -3))
                      .error(kBad, err_out(1), {"topk", "'dim'", "-3"}));
  return cases;
}

std::vector<HostTensor> topk_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  int dim = wrap_dim(c.attr_int("dim", -1), self.rank());
  return sorted_rows(self, dim, c.attr_int("k", 0), c.attr_bool("largest", true));
}
HAL_CONFORMANCE_SUITE(topk, topk_cases, topk_ref);

}  // namespace
}  // namespace hal::conformance
