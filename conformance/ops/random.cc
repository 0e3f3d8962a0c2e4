// hal-conformance: the "random" ops — cases and double-precision references.
// The references re-derive the catalog's (seed, offset) -> value mapping
// (sdk/catalog/ops/random.toml) from its text, independently of the SDK's
// philox.hpp, so a plugin must reproduce the exact streams; large cases also
// check the statistics.
#include <cmath>
#include <cstdint>
#include <string>

#include "op_suite.hpp"

namespace hal::conformance {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
// uniform and normal have no input to take dtypes from: every floating dtype.
constexpr uint64_t kFloats = HAL_DTYPE_BIT(HAL_DTYPE_FLOAT32) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT16) |
                             HAL_DTYPE_BIT(HAL_DTYPE_BFLOAT16) | HAL_DTYPE_BIT(HAL_DTYPE_FLOAT64);

// The Philox4x32-10 stream of (seed, offset): word(n) is word n of it.
class PhiloxWords {
 public:
  PhiloxWords(int64_t seed, int64_t offset) : seed_(static_cast<uint64_t>(seed)), offset_(static_cast<uint64_t>(offset)) {}

  uint32_t word(uint64_t n) {
    uint64_t counter = offset_ + n / 4;
    if (!cached_ || counter != counter_) {
      compute(counter);
      counter_ = counter;
      cached_ = true;
    }
    return out_[n % 4];
  }

 private:
  void compute(uint64_t counter) {
    uint32_t x[4] = {uint32_t(counter & 0xffffffffu), uint32_t(counter >> 32), 0, 0};
    uint32_t key[2] = {uint32_t(seed_ & 0xffffffffu), uint32_t(seed_ >> 32)};
    for (int r = 0; r < 10; ++r) {
      if (r > 0) {
        key[0] += 0x9E3779B9u;
        key[1] += 0xBB67AE85u;
      }
      uint64_t a = uint64_t(x[0]) * 0xD2511F53u;
      uint64_t b = uint64_t(x[2]) * 0xCD9E8D57u;
      uint32_t y[4] = {uint32_t(b >> 32) ^ x[1] ^ key[0], uint32_t(b), uint32_t(a >> 32) ^ x[3] ^ key[1], uint32_t(a)};
      for (int i = 0; i < 4; ++i) x[i] = y[i];
    }
    for (int i = 0; i < 4; ++i) out_[i] = x[i];
  }

  uint64_t seed_, offset_;
  bool cached_ = false;
  uint64_t counter_ = 0;
  uint32_t out_[4] = {};
};

// Uniform [0, 1) of element i: BITS bits of word i, or for float64 53 bits
// of words 2i (high) and 2i + 1 (low).
double element_uniform(PhiloxWords& w, int64_t i, hal_dtype_e dt, int bits) {
  if (dt == HAL_DTYPE_FLOAT64) {
    uint64_t hi = w.word(2 * uint64_t(i)), lo = w.word(2 * uint64_t(i) + 1);
    return std::ldexp(double(((hi << 32) | lo) >> 11), -53);
  }
  return std::ldexp(double(w.word(uint64_t(i)) >> (32 - bits)), -bits);
}
int uniform_op_bits(hal_dtype_e dt) { return dt == HAL_DTYPE_FLOAT16 ? 11 : dt == HAL_DTYPE_BFLOAT16 ? 8 : 24; }

// ---- statistics ----------------------------------------------------------------

// Checks that output 0's sample mean and variance are within 6 standard
// errors of MEAN and VAR (FOURTH = the distribution's 4th central moment).
OpCase& with_moments(OpCase& c, double mean, double var, double fourth) {
  c.custom_check = [mean, var, fourth](const OpCase&, const std::vector<HostTensor>&,
                                       const std::vector<HostTensor>& actual) -> std::string {
    const std::vector<double>& v = actual.at(0).values;
    const double n = double(v.size());
    double m = 0, s = 0;
    for (double x : v) m += x;
    m /= n;
    for (double x : v) s += (x - m) * (x - m);
    s /= n;
    const double m_err = 6 * std::sqrt(var / n), v_err = 6 * std::sqrt(std::max(fourth - var * var, 1e-12) / n);
    if (std::abs(m - mean) > m_err + 1e-3 * std::abs(mean))
      return "sample mean " + std::to_string(m) + " is not within " + std::to_string(m_err) + " of " +
             std::to_string(mean);
    if (std::abs(s - var) > v_err + 1e-2 * var)
      return "sample variance " + std::to_string(s) + " is not within " + std::to_string(v_err) + " of " +
             std::to_string(var);
    return "";
  };
  return c.no_layouts();
}

// ---- uniform / normal ----------------------------------------------------------

OpCase sized(const std::string& name, hal_dtype_e dt, std::vector<int64_t> size, int64_t seed, int64_t offset) {
  OpCase c(name);
  c.attr(hal::Attr::ints("size", std::move(size)))
      .attr(hal::Attr::dtype("dtype", dt))
      .attr(hal::Attr::i("seed", seed))
      .attr(hal::Attr::i("offset", offset));
  return c;
}

// Cases uniform and normal share; A and B are (from, to) or (mean, std).
std::vector<OpCase> sized_cases(hal_dtype_e dt, const char* a, const char* b, double va, double vb) {
  std::vector<OpCase> cases = {
      sized("[3, 5]", dt, {3, 5}, 42, 3),
      sized("[2, 3, 7] with attrs", dt, {2, 3, 7}, 7, 0).attr(hal::Attr::f(a, va)).attr(hal::Attr::f(b, vb)),
      sized("0-d", dt, {}, 1, 0),
      sized("zero-size [0, 4]", dt, {0, 4}, 1, 0),
      sized("odd count [9]", dt, {9}, 5, 11),
      // seed with both key halves set, offset past 2^32 (the counter's high word)
      sized("seed -1, offset 2^32 + 5", dt, {4, 3}, -1, (int64_t{1} << 32) + 5),
  };
  const std::vector<int64_t> bad = {2, 2};
  cases.push_back(sized("negative size", dt, {2, -1}, 1, 0)
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, bad)}, {"'size'", "-1"}));
  cases.push_back(sized("negative offset", dt, {2, 2}, 1, -1)
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, bad)}, {"'offset'", "-1"}));
  OpCase no_seed("missing seed");
  no_seed.attr(hal::Attr::ints("size", bad)).attr(hal::Attr::dtype("dtype", dt));
  cases.push_back(no_seed.error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, bad)}, {"'seed'"}));
  cases.push_back(sized("integer dtype", HAL_DTYPE_INT32, bad, 1, 0)
                      .error(HAL_STATUS_UNSUPPORTED_DTYPE, {HostTensor(HAL_DTYPE_INT32, bad)}, {"'dtype'", "int32"}));
  return cases;
}

std::vector<OpCase> uniform_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = sized_cases(dt, "from", "to", -3.0, 5.0);
  OpCase stats = sized("statistics [200000] in [-1, 3)", dt, {200000}, 2024, 0);
  stats.attr(hal::Attr::f("from", -1.0)).attr(hal::Attr::f("to", 3.0));
  cases.push_back(with_moments(stats, 1.0, 16.0 / 12, 256.0 / 80));
  cases.push_back(sized("from > to", dt, {2, 2}, 1, 0)
                      .attr(hal::Attr::f("from", 2.0))
                      .attr(hal::Attr::f("to", 1.0))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 2})}, {"'from'", "'to'"}));
  return cases;
}

std::vector<HostTensor> uniform_ref(const OpCase& c) {
  hal_dtype_e dt = c.attr_dtype("dtype", HAL_DTYPE_FLOAT32);
  HostTensor out(dt, c.attr_ints("size", {}));
  PhiloxWords w(c.attr_int("seed", 0), c.attr_int("offset", 0));
  const double from = c.attr_float("from", 0.0), to = c.attr_float("to", 1.0);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.values[i] = from + (to - from) * element_uniform(w, i, dt, uniform_op_bits(dt));
  return {out};
}
HAL_CONFORMANCE_SUITE(uniform, uniform_cases, uniform_ref, kFloats);

std::vector<OpCase> normal_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = sized_cases(dt, "mean", "std", 1.5, 0.25);
  for (OpCase& c : cases) c.tol(4);  // log/cos/sin of the plugin's libm in float32
  OpCase stats = sized("statistics [200001] mean 2 std 3", dt, {200001}, 99, 1);
  stats.attr(hal::Attr::f("mean", 2.0)).attr(hal::Attr::f("std", 3.0));
  cases.push_back(with_moments(stats, 2.0, 9.0, 3 * 81.0));
  cases.push_back(sized("std < 0", dt, {2, 2}, 1, 0)
                      .attr(hal::Attr::f("std", -0.5))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2, 2})}, {"'std'", "-0.5"}));
  return cases;
}

std::vector<HostTensor> normal_ref(const OpCase& c) {
  hal_dtype_e dt = c.attr_dtype("dtype", HAL_DTYPE_FLOAT32);
  HostTensor out(dt, c.attr_ints("size", {}));
  PhiloxWords w(c.attr_int("seed", 0), c.attr_int("offset", 0));
  const double mean = c.attr_float("mean", 0.0), sd = c.attr_float("std", 1.0);
  for (int64_t j = 0; 2 * j < out.numel(); ++j) {
    double u1 = 1.0 - element_uniform(w, 2 * j, dt, 24), u2 = element_uniform(w, 2 * j + 1, dt, 24);
    double r = std::sqrt(-2.0 * std::log(u1));
    out.values[2 * j] = mean + sd * r * std::cos(kTwoPi * u2);
    if (2 * j + 1 < out.numel()) out.values[2 * j + 1] = mean + sd * r * std::sin(kTwoPi * u2);
  }
  return {out};
}
HAL_CONFORMANCE_SUITE(normal, normal_cases, normal_ref, kFloats);

// ---- bernoulli -------------------------------------------------------------------

OpCase seeded(const std::string& name, int64_t seed, int64_t offset) {
  OpCase c(name);
  c.attr(hal::Attr::i("seed", seed)).attr(hal::Attr::i("offset", offset));
  return c;
}

std::vector<OpCase> bernoulli_cases(hal_dtype_e dt) {
  HostTensor edges = iota(dt, {2, 4}, 0.0, 1.0 / 7);  // 0 ... 1 inclusive
  std::vector<OpCase> cases = {
      seeded("[4, 6]", 3, 0).in(random(dt, {4, 6}, 1, 0.0, 1.0)),
      seeded("0 and 1 exact", 8, 2).in(edges),
      seeded("0-d", 1, 0).in(scalar(dt, 0.5)),
      seeded("zero-size", 1, 0).in(random(dt, {3, 0}, 2, 0.0, 1.0)),
  };
  OpCase stats = seeded("statistics p = 0.25", 5, 0).in(full(dt, {100000}, 0.25));
  cases.push_back(with_moments(stats, 0.25, 0.25 * 0.75, 0.25 * 0.75 * (1 - 3 * 0.25 * 0.75)));
  HostTensor bad = random(dt, {2, 3}, 3, 0.0, 1.0);
  bad.values[4] = 1.5;
  cases.push_back(seeded("probability 1.5", 1, 0).in(bad).error(HAL_STATUS_OUT_OF_RANGE, {HostTensor(dt, {2, 3})},
                                                                 {"1.5", "'self'", "position 4"}));
  cases.push_back(OpCase("missing seed").in(random(dt, {2}, 4, 0.0, 1.0))
                      .error(HAL_STATUS_INVALID_ARGUMENT, {HostTensor(dt, {2})}, {"'seed'"}));
  return cases;
}

std::vector<HostTensor> bernoulli_ref(const OpCase& c) {
  const HostTensor& p = c.input(0);
  HostTensor out(p.dtype, p.shape);
  PhiloxWords w(c.attr_int("seed", 0), c.attr_int("offset", 0));
  for (int64_t i = 0; i < p.numel(); ++i) out.values[i] = element_uniform(w, i, p.dtype, 24) < p.values[i] ? 1 : 0;
  return {out};
}
HAL_CONFORMANCE_SUITE(bernoulli, bernoulli_cases, bernoulli_ref);

// ---- dropout ----------------------------------------------------------------------

std::vector<OpCase> dropout_cases(hal_dtype_e dt) {
  std::vector<OpCase> cases = {
      seeded("p = 0.3 [5, 7]", 10, 4).in(random(dt, {5, 7}, 1)).attr(hal::Attr::f("p", 0.3)),
      seeded("default p [33]", 11, 0).in(random(dt, {33}, 2)),
      seeded("p = 0", 12, 0).in(random(dt, {4, 4}, 3)).attr(hal::Attr::f("p", 0.0)),
      seeded("p = 1", 13, 0).in(random(dt, {4, 4}, 4)).attr(hal::Attr::f("p", 1.0)),
      seeded("train = false", 14, 0).in(random(dt, {3, 5}, 5)).attr(hal::Attr::b("train", false)),
      seeded("0-d", 15, 0).in(scalar(dt, 1.25)).attr(hal::Attr::f("p", 0.5)),
      seeded("zero-size", 16, 0).in(random(dt, {0, 3}, 6)),
  };
  OpCase stats = seeded("statistics p = 0.2", 17, 0).in(full(dt, {100000}, 1.0)).attr(hal::Attr::f("p", 0.2));
  // out is 1.25 with probability 0.8, else 0.
  cases.push_back(with_moments(stats, 1.0, 0.25, 0.25 * (1 - 3 * 0.2 * 0.8) / (0.2 * 0.8) * 0.25));
  std::vector<HostTensor> outs = {HostTensor(dt, {2, 2}), HostTensor(HAL_DTYPE_BOOL, {2, 2})};
  cases.push_back(seeded("p = 1.5", 1, 0).in(random(dt, {2, 2}, 7)).attr(hal::Attr::f("p", 1.5))
                      .error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'p'", "1.5"}));
  cases.push_back(seeded("p = -0.25", 1, 0).in(random(dt, {2, 2}, 8)).attr(hal::Attr::f("p", -0.25))
                      .error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'p'", "-0.25"}));
  cases.push_back(seeded("p of type string", 1, 0).in(random(dt, {2, 2}, 9)).attr(hal::Attr::s("p", "half"))
                      .error(HAL_STATUS_INVALID_ARGUMENT, outs, {"'p'"}));
  return cases;
}

std::vector<HostTensor> dropout_ref(const OpCase& c) {
  const HostTensor& x = c.input(0);
  HostTensor out(x.dtype, x.shape), mask(HAL_DTYPE_BOOL, x.shape);
  const double p = c.attr_float("p", 0.5);
  const bool train = c.attr_bool("train", true);
  PhiloxWords w(c.attr_int("seed", 0), c.attr_int("offset", 0));
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool keep = !train || element_uniform(w, i, x.dtype, 24) < 1.0 - p;
    mask.values[i] = keep ? 1 : 0;
    out.values[i] = !train ? x.values[i] : keep ? x.values[i] / (1.0 - p) : 0.0;
  }
  return {out, mask};
}
HAL_CONFORMANCE_SUITE(dropout, dropout_cases, dropout_ref);

}  // namespace
}  // namespace hal::conformance
