// hal-conformance: the "data" ops — cases and double-precision references.
// copy and fill write an output whose dtype (fill: and shape) the caller
// chooses; their cases name it at the end of the case name
// (" -> int32[2,3]") and the reference reads it back from there.
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

const hal_dtype_e kAll[] = {HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16, HAL_DTYPE_FLOAT64,
                            HAL_DTYPE_INT8,    HAL_DTYPE_UINT8,   HAL_DTYPE_INT16,    HAL_DTYPE_INT32,
                            HAL_DTYPE_INT64,   HAL_DTYPE_BOOL};

uint64_t mask_of(bool (*pred)(hal_dtype_e)) {
  uint64_t m = 0;
  for (hal_dtype_e d : kAll)
    if (pred(d)) m |= HAL_DTYPE_BIT(d);
  return m;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// " -> int32[2,3]": the output a copy/fill case asks for.
std::string target(hal_dtype_e dt, const std::vector<int64_t>& shape) {
  return std::string(" -> ") + dtype_str(dt) + shape_str(shape);
}
HostTensor target_of(const OpCase& c) {
  std::string spec = c.name.substr(c.name.rfind(" -> ") + 4);
  size_t bracket = spec.find('[');
  hal_dtype_e dt = HAL_DTYPE_INVALID;
  for (hal_dtype_e d : kAll)
    if (spec.compare(0, bracket, dtype_str(d)) == 0) dt = d;
  std::vector<int64_t> shape;
  std::stringstream in(spec.substr(bracket + 1));
  int64_t v;
  while (in >> v) {
    shape.push_back(v);
    char sep;
    in >> sep;
  }
  return HostTensor(dt, shape);
}

// Calls F(idx) for every multi-index of SHAPE, row-major.
void for_each(const std::vector<int64_t>& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  int64_t n = HostTensor::count(shape);
  for (int64_t i = 0; i < n; ++i) f(unravel(i, shape));
}

HostTensor like(const HostTensor& t) { return HostTensor(t.dtype, t.shape); }

int wrap(int64_t dim, size_t rank) { return static_cast<int>(dim < 0 ? dim + static_cast<int64_t>(std::max<size_t>(rank, 1)) : dim); }

bool integral_attr(const OpCase& c, const std::string& name) {
  for (const hal::Attr& a : c.attrs)
    if (a.name() == name) return a.c_attr().type == HAL_ATTR_TYPE_INT;
  return true;  // the catalog defaults (start 0, step 1) are integers
}

// ---- copy -----------------------------------------------------------------------------

std::vector<OpCase> copy_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("same" + target(dt, {3, 4})).in(random(dt, {3, 4}, 1)),
      OpCase("broadcast [4]" + target(dt, {3, 4})).in(random(dt, {4}, 2)),
      OpCase("broadcast [3,1]" + target(dt, {2, 3, 5})).in(random(dt, {3, 1}, 3)),
      OpCase("0-d" + target(dt, {})).in(random(dt, {}, 4)),
      OpCase("0-d broadcast" + target(dt, {2, 3})).in(random(dt, {}, 5)),
      OpCase("zero-size" + target(dt, {0, 4})).in(random(dt, {0, 4}, 6)),
      OpCase("no broadcast").in(random(dt, {2, 3}, 7))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3, 2})}, {"copy", "'self'", "[2, 3]", "[3, 2]"}),
  };
  for (hal_dtype_e to : kAll) {
    if (to == dt) continue;
    cases.push_back(OpCase("cast" + target(to, {4, 5})).in(random(dt, {4, 5}, 10 + to, -300, 300)));
  }
  if (is_float(dt)) {
    HostTensor special(dt, {4}, {std::nan(""), -0.0, 0.75, -0.75});
    cases.push_back(OpCase("nan to int" + target(HAL_DTYPE_INT32, {4})).in(special));
    cases.push_back(OpCase("nan to bool" + target(HAL_DTYPE_BOOL, {4})).in(special));
  }
  return cases;
}

std::vector<HostTensor> copy_ref(const OpCase& c) {
  HostTensor out = target_of(c);
  for_each(out.shape, [&](const std::vector<int64_t>& i) { out.at(i) = broadcast_at(c.input(0), i); });
  return {out};
}
HAL_CONFORMANCE_SUITE(copy, copy_cases, copy_ref);
HAL_CONFORMANCE_FREE_OUTPUTS(copy, false, true);  // any dtype; the shape must take self's broadcast

// ---- fill -----------------------------------------------------------------------------

std::vector<OpCase> fill_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("value 1" + target(dt, {3, 4})).attr(hal::Attr::i("value", 1)),
      OpCase("value 2.75" + target(dt, {2, 1, 3})).attr(hal::Attr::f("value", 2.75)),
      OpCase("0-d" + target(dt, {})).attr(hal::Attr::i("value", 0)),
      OpCase("zero-size" + target(dt, {2, 0})).attr(hal::Attr::f("value", 1.5)),
  };
  if (dt != HAL_DTYPE_UINT8 && dt != HAL_DTYPE_BOOL)
    cases.push_back(OpCase("value -3" + target(dt, {5})).attr(hal::Attr::i("value", -3)));
  if (dt == HAL_DTYPE_INT8 || dt == HAL_DTYPE_UINT8 || dt == HAL_DTYPE_INT16 || dt == HAL_DTYPE_INT32 ||
      dt == HAL_DTYPE_FLOAT16)
    cases.push_back(OpCase("overflow").attr(hal::Attr::f("value", 1e10))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"fill", "'value'", "overflow"}));
  if (dt == HAL_DTYPE_INT32)
    cases.push_back(OpCase("nan").attr(hal::Attr::f("value", std::nan("")))
                        .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"fill", "'value'"}));
  cases.push_back(OpCase("missing value").error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"fill", "'value'"}));
  return cases;
}

std::vector<HostTensor> fill_ref(const OpCase& c) {
  HostTensor out = target_of(c);
  for (double& v : out.values) v = c.attr_float("value", 0);
  return {out};
}
HAL_CONFORMANCE_SUITE(fill, fill_cases, fill_ref, mask_of([](hal_dtype_e) { return true; }));
HAL_CONFORMANCE_FREE_OUTPUTS(fill, true, true);

// ---- arange ---------------------------------------------------------------------------

std::vector<OpCase> arange_cases(hal_dtype_e dt) {
  auto d = hal::Attr::dtype("dtype", dt);
  std::vector<OpCase> cases = {
      OpCase("end 10").attr(hal::Attr::i("end", 10)).attr(d),
      OpCase("2 to -7 step -3").attr(hal::Attr::i("start", 2)).attr(hal::Attr::i("end", -7))
          .attr(hal::Attr::i("step", -3)).attr(d),
      OpCase("0.5 to 3 step 0.25").attr(hal::Attr::f("start", 0.5)).attr(hal::Attr::f("end", 3))
          .attr(hal::Attr::f("step", 0.25)).attr(d),
      OpCase("1 to 2 step 0.3").attr(hal::Attr::i("start", 1)).attr(hal::Attr::i("end", 2))
          .attr(hal::Attr::f("step", 0.3)).attr(d),
      OpCase("empty").attr(hal::Attr::i("start", 3)).attr(hal::Attr::i("end", 3)).attr(d),
      OpCase("step 0").attr(hal::Attr::i("end", 3)).attr(hal::Attr::i("step", 0)).attr(d)
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {1})}, {"arange", "'step'"}),
      OpCase("wrong size").attr(hal::Attr::i("end", 3)).attr(d)
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4})}, {"arange", "[4]", "[3]"}),
      OpCase("wrong direction").attr(hal::Attr::i("end", -3)).attr(d)
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"arange", "'step'", "-3"}),
  };
  if (dt == HAL_DTYPE_INT64) cases.push_back(OpCase("default dtype int64").attr(hal::Attr::i("end", 4)));
  if (dt == HAL_DTYPE_FLOAT32) cases.push_back(OpCase("default dtype float32").attr(hal::Attr::f("end", 2.5)));
  return cases;
}

std::vector<HostTensor> arange_ref(const OpCase& c) {
  double start = c.attr_float("start", 0), end = c.attr_float("end", 0), step = c.attr_float("step", 1);
  bool ints = integral_attr(c, "start") && integral_attr(c, "end") && integral_attr(c, "step");
  hal_dtype_e dt = c.attr_dtype("dtype", ints ? HAL_DTYPE_INT64 : HAL_DTYPE_FLOAT32);
  int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  HostTensor out(dt, {n});
  for (int64_t i = 0; i < n; ++i) out.values[i] = start + static_cast<double>(i) * step;
  return {out};
}
HAL_CONFORMANCE_SUITE(arange, arange_cases, arange_ref, mask_of([](hal_dtype_e d) { return d != HAL_DTYPE_BOOL; }));

// ---- cat, stack -----------------------------------------------------------------------

std::vector<OpCase> cat_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      OpCase("dim 0").in(random(dt, {2, 3}, 1)).in(random(dt, {1, 3}, 2)).in(random(dt, {4, 3}, 3)),
      OpCase("dim 1 with empty").in(random(dt, {2, 3}, 4)).in(random(dt, {2, 0}, 5)).in(random(dt, {2, 2}, 6))
          .attr(hal::Attr::i("dim", 1)),
      OpCase("dim -2 of 3-d").in(random(dt, {2, 1, 3}, 7)).in(random(dt, {2, 4, 3}, 8)).attr(hal::Attr::i("dim", -2)),
      OpCase("one input").in(random(dt, {5}, 9)),
      OpCase("all empty").in(random(dt, {0, 2}, 10)).in(random(dt, {0, 2}, 11)),
      OpCase("promotes bool").in(random(dt, {2, 2}, 12)).in(random(HAL_DTYPE_BOOL, {1, 2}, 13)),
      OpCase("sizes differ").in(random(dt, {2, 3}, 14)).in(random(dt, {2, 4}, 15))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4, 3})}, {"cat", "'tensors'[1]", "[2, 4]"}),
      OpCase("ranks differ").in(random(dt, {2, 3}, 16)).in(random(dt, {3}, 17))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3, 3})}, {"cat", "'tensors'[1]", "[3]"}),
      OpCase("0-d").in(random(dt, {}, 18)).in(random(dt, {}, 19))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2})}, {"cat", "'tensors'[0]", "0-d"}),
      OpCase("dim out of range").in(random(dt, {2, 3}, 20)).attr(hal::Attr::i("dim", 2))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"cat", "'dim'", "2"}),
  };
  if (is_float(dt)) cases.push_back(OpCase("promotes int32").in(random(dt, {3}, 21)).in(random(HAL_DTYPE_INT32, {2}, 22)));
  return cases;
}

hal_dtype_e promoted(const OpCase& c) {
  hal_dtype_e dt = c.input(0).dtype;
  for (size_t i = 1; i < c.inputs.size(); ++i) dt = promote(dt, c.input(i).dtype);
  return dt;
}

std::vector<HostTensor> cat_ref(const OpCase& c) {
  const HostTensor& first = c.input(0);
  int dim = wrap(c.attr_int("dim", 0), first.shape.size());
  std::vector<int64_t> shape = first.shape;
  for (size_t i = 1; i < c.inputs.size(); ++i) shape[dim] += c.input(i).shape[dim];
  HostTensor out(promoted(c), shape);
  for_each(shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j = idx;
    size_t k = 0;
    while (j[dim] >= c.input(k).shape[dim]) j[dim] -= c.input(k++).shape[dim];
    out.at(idx) = c.input(k).at(j);
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(cat, cat_cases, cat_ref);

std::vector<OpCase> stack_cases(hal_dtype_e dt) {
  auto three = [&](std::vector<int64_t> s, uint64_t seed) {
    return OpCase("").in(random(dt, s, seed)).in(random(dt, s, seed + 1)).in(random(dt, s, seed + 2));
  };
  std::vector<OpCase> cases;
  for (int64_t dim : {0, 1, 2, -1}) {
    OpCase c = three({2, 3}, 1 + dim);
    c.name = "dim " + std::to_string(dim);
    cases.push_back(c.attr(hal::Attr::i("dim", dim)));
  }
  OpCase scalars = three({}, 10);
  scalars.name = "0-d";
  cases.push_back(scalars);
  OpCase empty = three({0, 3}, 20);
  empty.name = "zero-size";
  cases.push_back(empty.attr(hal::Attr::i("dim", 1)));
  cases.push_back(OpCase("promotes bool").in(random(dt, {2}, 30)).in(random(HAL_DTYPE_BOOL, {2}, 31)));
  cases.push_back(OpCase("shapes differ").in(random(dt, {2, 3}, 40)).in(random(dt, {3, 2}, 41))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 2, 3})}, {"stack", "'tensors'[1]", "[3, 2]"}));
  cases.push_back(OpCase("dim out of range").in(random(dt, {2}, 42)).attr(hal::Attr::i("dim", 3))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {1, 2})}, {"stack", "'dim'", "3"}));
  return cases;
}

std::vector<HostTensor> stack_ref(const OpCase& c) {
  const HostTensor& first = c.input(0);
  int dim = wrap(c.attr_int("dim", 0), first.shape.size() + 1);
  std::vector<int64_t> shape = first.shape;
  shape.insert(shape.begin() + dim, static_cast<int64_t>(c.inputs.size()));
  HostTensor out(promoted(c), shape);
  for_each(shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j = idx;
    j.erase(j.begin() + dim);
    out.at(idx) = c.input(static_cast<size_t>(idx[dim])).at(j);
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(stack, stack_cases, stack_ref);

// ---- split ----------------------------------------------------------------------------

std::vector<OpCase> split_cases(hal_dtype_e dt) {
  return {
      OpCase("split_size 2").in(random(dt, {5, 3}, 1)).attr(hal::Attr::i("split_size", 2)),
      OpCase("sizes dim 1").in(random(dt, {2, 3}, 2)).attr(hal::Attr::ints("sizes", {1, 0, 2})).attr(hal::Attr::i("dim", 1)),
      OpCase("one chunk").in(random(dt, {2, 3}, 3)).attr(hal::Attr::i("split_size", 3)).attr(hal::Attr::i("dim", -1)),
      OpCase("zero-size").in(random(dt, {0, 2}, 4)).attr(hal::Attr::i("split_size", 0)),
      OpCase("sizes do not sum").in(random(dt, {4}, 5)).attr(hal::Attr::ints("sizes", {1, 2}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {1}), HostTensor(dt, {2})}, {"split", "'sizes'", "4"}),
      OpCase("output count").in(random(dt, {4}, 6)).attr(hal::Attr::i("split_size", 1))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {1}), HostTensor(dt, {1})}, {"split", "4 chunks", "2 outputs"}),
      OpCase("neither attribute").in(random(dt, {4}, 7))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4})}, {"split", "'split_size'", "'sizes'"}),
  };
}

std::vector<HostTensor> split_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  int dim = wrap(c.attr_int("dim", 0), self.shape.size());
  int64_t n = self.shape[dim], size = c.attr_int("split_size", -1);
  std::vector<int64_t> sizes = c.attr_ints("sizes", {});
  if (size == 0) sizes = {0};
  for (int64_t b = 0; size > 0 && b < n; b += size) sizes.push_back(std::min(size, n - b));
  std::vector<HostTensor> outs;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> shape = self.shape;
    shape[dim] = s;
    HostTensor out(self.dtype, shape);
    for_each(shape, [&](const std::vector<int64_t>& idx) {
      std::vector<int64_t> j = idx;
      j[dim] += offset;
      out.at(idx) = self.at(j);
    });
    outs.push_back(out);
    offset += s;
  }
  return outs;
}
HAL_CONFORMANCE_SUITE(split, split_cases, split_ref);

// ---- pad ------------------------------------------------------------------------------

std::vector<OpCase> pad_cases(hal_dtype_e dt) {
  auto pads = [](std::vector<int64_t> p) { return hal::Attr::ints("pad", std::move(p)); };
  auto mode = [](const char* m) { return hal::Attr::s("mode", m); };
  return {
      OpCase("constant last dim").in(random(dt, {2, 3}, 1)).attr(pads({1, 2})),
      OpCase("constant 3 dims value 1.5").in(random(dt, {2, 3, 4}, 2)).attr(pads({1, 0, 2, 1, 1, 1}))
          .attr(hal::Attr::f("value", 1.5)),
      OpCase("constant crop").in(random(dt, {3, 4}, 3)).attr(pads({-1, 1, 0, -2})),
      OpCase("reflect").in(random(dt, {3, 4}, 4)).attr(pads({2, 3, 1, 2})).attr(mode("reflect")),
      OpCase("reflect 1 dim of 3").in(random(dt, {2, 2, 5}, 5)).attr(pads({4, 1})).attr(mode("reflect")),
      OpCase("replicate").in(random(dt, {2, 3, 4}, 6)).attr(pads({1, 1, 2, 0})).attr(mode("replicate")),
      OpCase("0-d").in(random(dt, {}, 7)).attr(pads({})),
      OpCase("zero-size rows").in(random(dt, {0, 3}, 8)).attr(pads({1, 1})),
      OpCase("zero-size padded dim").in(random(dt, {2, 0}, 9)).attr(pads({1, 1})).attr(hal::Attr::i("value", 1)),
      OpCase("reflect too far").in(random(dt, {2, 3}, 10)).attr(pads({3, 0})).attr(mode("reflect"))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 6})}, {"pad", "'pad'", "(3, 0)"}),
      OpCase("odd length").in(random(dt, {2, 3}, 11)).attr(pads({1, 1, 1}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3, 5})}, {"pad", "'pad'", "[1, 1, 1]"}),
      OpCase("negative size").in(random(dt, {2, 3}, 12)).attr(pads({-2, -2}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 1})}, {"pad", "'pad'", "negative"}),
  };
}

std::vector<HostTensor> pad_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  std::vector<int64_t> p = c.attr_ints("pad", {});
  std::string mode = c.attr_string("mode", "constant");
  double value = c.attr_float("value", 0);
  std::vector<int64_t> left(self.shape.size(), 0), shape = self.shape;
  for (size_t k = 0; k < p.size() / 2; ++k) {
    size_t d = self.shape.size() - 1 - k;
    left[d] = p[2 * k];
    shape[d] += p[2 * k] + p[2 * k + 1];
  }
  HostTensor out(self.dtype, shape);
  for_each(shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j(idx.size());
    bool inside = true;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t x = idx[d] - left[d], n = self.shape[d];
      if (mode == "reflect") x = x < 0 ? -x : x >= n ? 2 * (n - 1) - x : x;
      if (mode == "replicate") x = std::min(std::max<int64_t>(x, 0), n - 1);
      inside = inside && x >= 0 && x < n;
      j[d] = x;
    }
    out.at(idx) = inside ? self.at(j) : value;
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(pad, pad_cases, pad_ref);

// ---- flip, roll, repeat ---------------------------------------------------------------

std::vector<OpCase> flip_cases(hal_dtype_e dt) {
  auto dims = [](std::vector<int64_t> d) { return hal::Attr::ints("dims", std::move(d)); };
  return {
      OpCase("dim 0").in(random(dt, {2, 3, 4}, 1)).attr(dims({0})),
      OpCase("dims 1 2").in(random(dt, {2, 3, 4}, 2)).attr(dims({1, 2})),
      OpCase("last").in(random(dt, {3, 5}, 3)).attr(dims({-1})),
      OpCase("all").in(random(dt, {3, 5}, 4)).attr(dims({0, 1})),
      OpCase("none").in(random(dt, {4}, 5)).attr(dims({})),
      OpCase("0-d").in(random(dt, {}, 6)).attr(dims({0})),
      OpCase("zero-size").in(random(dt, {0, 3}, 7)).attr(dims({1})),
      OpCase("twice").in(random(dt, {2, 3}, 8)).attr(dims({1, -1}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"flip", "'dims'", "twice"}),
      OpCase("out of range").in(random(dt, {2, 3}, 9)).attr(dims({2}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"flip", "'dims'", "2"}),
  };
}

std::vector<HostTensor> flip_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  std::vector<bool> flipped(self.shape.size(), false);
  for (int64_t d : c.attr_ints("dims", {}))
    if (!self.shape.empty()) flipped[wrap(d, self.shape.size())] = true;
  HostTensor out = like(self);
  for_each(self.shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j = idx;
    for (size_t d = 0; d < j.size(); ++d)
      if (flipped[d]) j[d] = self.shape[d] - 1 - j[d];
    out.at(idx) = self.at(j);
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(flip, flip_cases, flip_ref);

// ---- reshape, permute ----------------------------------------------------------------

std::vector<OpCase> reshape_cases(hal_dtype_e dt) {
  auto shape = [](std::vector<int64_t> s) { return hal::Attr::ints("shape", std::move(s)); };
  const hal::Attr copy = hal::Attr::b("copy_zeros", true);
  return {
      OpCase("split a dim").in(random(dt, {2, 6}, 1)).attr(shape({2, 2, 3})),
      OpCase("merge dims").in(random(dt, {2, 3, 4}, 2)).attr(shape({6, 4})),
      OpCase("inferred").in(random(dt, {2, 3, 4}, 3)).attr(shape({-1, 2, 2})),
      OpCase("flatten").in(random(dt, {3, 1, 5}, 4)).attr(shape({-1})),
      OpCase("to 0-d").in(random(dt, {1, 1}, 5)).attr(shape({})),
      OpCase("from 0-d").in(random(dt, {}, 6)).attr(shape({1, 1, 1})),
      OpCase("zero-size").in(random(dt, {0, 3}, 7)).attr(shape({3, 0})),
      OpCase("wrong count").in(random(dt, {2, 3}, 8)).attr(shape({4, 2}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {4, 2})}, {"reshape", "[2, 3]", "[4, 2]"}),
      OpCase("two inferred").in(random(dt, {2, 3}, 9)).attr(shape({-1, -1}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"reshape", "more than one -1"}),
      OpCase("copy_zeros").in(random(dt, {2, 3, 4}, 10)).attr(shape({0, 0, 2, -1})).attr(copy),
      OpCase("copy_zeros, 0 self dim").in(random(dt, {0, 3}, 11)).attr(shape({0, 3, -1})).attr(copy)
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {0, 3, 1})}, {"reshape", "[0, 3, -1]"}),
      OpCase("copy_zeros past self's rank").in(random(dt, {2, 3}, 12)).attr(shape({6, 1, 0})).attr(copy)
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {6, 1, 1})}, {"reshape", "copies dim 2", "rank 2"}),
      OpCase("zero is a size without copy_zeros").in(random(dt, {0, 3}, 13)).attr(shape({3, 0})),
  };
}

std::vector<HostTensor> reshape_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  std::vector<int64_t> shape = c.attr_ints("shape", {});
  if (c.attr_bool("copy_zeros", false))
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] == 0) shape[i] = self.shape[i];
  int64_t known = 1;
  for (int64_t d : shape) known *= d == -1 ? 1 : d;
  for (int64_t& d : shape)
    if (d == -1) d = self.numel() / known;
  return {HostTensor(self.dtype, shape, self.values)};  // row-major order kept
}
HAL_CONFORMANCE_SUITE(reshape, reshape_cases, reshape_ref);

std::vector<OpCase> permute_cases(hal_dtype_e dt) {
  auto dims = [](std::vector<int64_t> d) { return hal::Attr::ints("dims", std::move(d)); };
  return {
      OpCase("transpose").in(random(dt, {3, 5}, 1)).attr(dims({1, 0})),
      OpCase("heads").in(random(dt, {2, 3, 4, 5}, 2)).attr(dims({0, 2, 1, 3})),
      OpCase("rotate").in(random(dt, {2, 3, 4}, 3)).attr(dims({2, 0, 1})),
      OpCase("negative").in(random(dt, {2, 3, 4}, 4)).attr(dims({-1, 0, -2})),
      OpCase("identity").in(random(dt, {4, 2}, 5)).attr(dims({0, 1})),
      OpCase("0-d").in(random(dt, {}, 6)).attr(dims({})),
      OpCase("zero-size").in(random(dt, {0, 3}, 7)).attr(dims({1, 0})),
      OpCase("repeated").in(random(dt, {2, 3}, 8)).attr(dims({0, 0}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 2})}, {"permute", "'dims'", "twice"}),
      OpCase("too few").in(random(dt, {2, 3}, 9)).attr(dims({1}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"permute", "'dims'", "rank 2"}),
  };
}

std::vector<HostTensor> permute_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  std::vector<int64_t> dims = c.attr_ints("dims", {});
  std::vector<int64_t> shape;
  for (int64_t& d : dims) {
    d = wrap(d, self.shape.size());
    shape.push_back(self.shape[d]);
  }
  HostTensor out(self.dtype, shape);
  for_each(shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) j[dims[i]] = idx[i];
    out.at(idx) = self.at(j);
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(permute, permute_cases, permute_ref);

std::vector<OpCase> roll_cases(hal_dtype_e dt) {
  auto shifts = [](std::vector<int64_t> s) { return hal::Attr::ints("shifts", std::move(s)); };
  auto dims = [](std::vector<int64_t> d) { return hal::Attr::ints("dims", std::move(d)); };
  return {
      OpCase("flattened").in(random(dt, {3, 4}, 1)).attr(shifts({5})),
      OpCase("flattened negative").in(random(dt, {3, 4}, 2)).attr(shifts({-13})),
      OpCase("dim 1").in(random(dt, {3, 4}, 3)).attr(shifts({1})).attr(dims({1})),
      OpCase("two dims").in(random(dt, {3, 4, 2}, 4)).attr(shifts({-1, 2})).attr(dims({0, -2})),
      OpCase("same dim twice").in(random(dt, {5}, 5)).attr(shifts({2, 4})).attr(dims({0, 0})),
      OpCase("0-d").in(random(dt, {}, 6)).attr(shifts({3})),
      OpCase("zero-size").in(random(dt, {0, 3}, 7)).attr(shifts({1})).attr(dims({1})),
      OpCase("count mismatch").in(random(dt, {3}, 8)).attr(shifts({1, 2})).attr(dims({0}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"roll", "'shifts'", "[1, 2]"}),
      OpCase("dim out of range").in(random(dt, {3}, 9)).attr(shifts({1})).attr(dims({1}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {"roll", "'dims'", "1"}),
  };
}

int64_t mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

std::vector<HostTensor> roll_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  std::vector<int64_t> shifts = c.attr_ints("shifts", {}), dims = c.attr_ints("dims", {});
  HostTensor out = like(self);
  int64_t n = self.numel();
  if (n == 0) return {out};
  if (dims.empty()) {
    for (int64_t i = 0; i < n; ++i) out.values[mod(i + shifts[0], n)] = self.values[i];
    return {out};
  }
  std::vector<int64_t> shift(self.shape.size(), 0);
  for (size_t k = 0; k < dims.size(); ++k) shift[wrap(dims[k], self.shape.size())] += shifts[k];
  for_each(self.shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j = idx;
    for (size_t d = 0; d < j.size(); ++d) j[d] = mod(j[d] + shift[d], self.shape[d]);
    out.at(j) = self.at(idx);
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(roll, roll_cases, roll_ref);

std::vector<OpCase> repeat_cases(hal_dtype_e dt) {
  auto reps = [](std::vector<int64_t> r) { return hal::Attr::ints("repeats", std::move(r)); };
  return {
      OpCase("2x2").in(random(dt, {2, 3}, 1)).attr(reps({2, 2})),
      OpCase("new dims").in(random(dt, {3}, 2)).attr(reps({2, 1, 3})),
      OpCase("ones").in(random(dt, {2, 3}, 3)).attr(reps({1, 1})),
      OpCase("size-1 dim").in(random(dt, {1, 3, 1}, 4)).attr(reps({3, 1, 2})),
      OpCase("5 dims").in(random(dt, {2, 1, 2, 1, 2}, 5)).attr(reps({2, 2, 1, 3, 2})),
      OpCase("5 dims all repeated").in(random(dt, {2, 3, 2, 2, 2}, 11)).attr(reps({2, 1, 2, 3, 2})),
      OpCase("0-d").in(random(dt, {}, 6)).attr(reps({3})),
      OpCase("zero repeats").in(random(dt, {2, 3}, 7)).attr(reps({0, 2})),
      OpCase("zero-size").in(random(dt, {0, 3}, 8)).attr(reps({2, 2})),
      OpCase("too few").in(random(dt, {2, 3}, 9)).attr(reps({2}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 6})}, {"repeat", "'repeats'", "[2]"}),
      OpCase("negative").in(random(dt, {2, 3}, 10)).attr(reps({1, -2}))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 3})}, {"repeat", "'repeats'", "-2"}),
  };
}

std::vector<HostTensor> repeat_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  std::vector<int64_t> r = c.attr_ints("repeats", {});
  size_t lead = r.size() - self.shape.size();
  std::vector<int64_t> in_shape(lead, 1);
  in_shape.insert(in_shape.end(), self.shape.begin(), self.shape.end());
  std::vector<int64_t> shape(r.size());
  for (size_t i = 0; i < r.size(); ++i) shape[i] = in_shape[i] * r[i];
  HostTensor out(self.dtype, shape);
  for_each(shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j;
    for (size_t d = lead; d < idx.size(); ++d) j.push_back(idx[d] % in_shape[d]);
    out.at(idx) = self.at(j);
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(repeat, repeat_cases, repeat_ref);

// ---- tril, triu -----------------------------------------------------------------------

std::vector<OpCase> triangle_cases(hal_dtype_e dt, const char* op) {
  auto diag = [](int64_t d) { return hal::Attr::i("diagonal", d); };
  return {
      OpCase("square").in(random(dt, {4, 4}, 1)),
      OpCase("wide diagonal 1").in(random(dt, {3, 5}, 2)).attr(diag(1)),
      OpCase("tall diagonal -1").in(random(dt, {5, 3}, 3)).attr(diag(-1)),
      OpCase("batched").in(random(dt, {2, 3, 4, 3}, 4)).attr(diag(0)),
      OpCase("far diagonal").in(random(dt, {3, 3}, 5)).attr(diag(-7)),
      OpCase("zero-size").in(random(dt, {2, 0, 3}, 6)),
      OpCase("rank 1").in(random(dt, {3}, 7)).error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {3})}, {op, "'self'", "[3]"}),
  };
}

template <bool kLower>
std::vector<HostTensor> triangle_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  int64_t diag = c.attr_int("diagonal", 0);
  HostTensor out = like(self);
  for_each(self.shape, [&](const std::vector<int64_t>& idx) {
    int64_t i = idx[idx.size() - 2], j = idx[idx.size() - 1];
    bool keep = kLower ? j - i <= diag : j - i >= diag;
    out.at(idx) = keep ? self.at(idx) : 0.0;
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(tril, [](hal_dtype_e dt) { return triangle_cases(dt, "tril"); }, triangle_ref<true>);
HAL_CONFORMANCE_SUITE(triu, [](hal_dtype_e dt) { return triangle_cases(dt, "triu"); }, triangle_ref<false>);

// ---- one_hot --------------------------------------------------------------------------

std::vector<OpCase> one_hot_cases(hal_dtype_e dt) {
  auto classes = [](int64_t n) { return hal::Attr::i("num_classes", n); };
  return {
      OpCase("1-d").in(random(dt, {6}, 1, 0, 4)).attr(classes(4)),
      OpCase("2-d").in(random(dt, {2, 3}, 2, 0, 5)).attr(classes(5)),
      OpCase("0-d").in(scalar(dt, 2)).attr(classes(3)),
      OpCase("zero-size").in(random(dt, {0}, 3)).attr(classes(3)),
      OpCase("zero classes").in(random(dt, {0, 2}, 4)).attr(classes(0)),
      OpCase("class too large").in(HostTensor(dt, {3}, {0, 1, 3})).attr(classes(3))
          .error(HAL_STATUS_OUT_OF_RANGE, {HostTensor(HAL_DTYPE_INT64, {3, 3})}, {"one_hot", "3", "position 2"}),
      OpCase("negative class").in(HostTensor(dt, {2}, {-1, 0})).attr(classes(3))
          .error(HAL_STATUS_OUT_OF_RANGE, {HostTensor(HAL_DTYPE_INT64, {2, 3})}, {"one_hot", "-1", "position 0"}),
      OpCase("num_classes -1").in(random(dt, {2}, 5, 0, 2)).attr(classes(-1))
          .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(HAL_DTYPE_INT64, {2, 2})}, {"one_hot", "'num_classes'", "-1"}),
  };
}

std::vector<HostTensor> one_hot_ref(const OpCase& c) {
  const HostTensor& self = c.input(0);
  int64_t n = c.attr_int("num_classes", 0);
  std::vector<int64_t> shape = self.shape;
  shape.push_back(n);
  HostTensor out(HAL_DTYPE_INT64, shape);
  for_each(shape, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> j(idx.begin(), idx.end() - 1);
    out.at(idx) = self.at(j) == static_cast<double>(idx.back()) ? 1.0 : 0.0;
  });
  return {out};
}
HAL_CONFORMANCE_SUITE(one_hot, one_hot_cases, one_hot_ref);

}  // namespace
}  // namespace hal::conformance
