// Host-side helpers of op_suite.hpp: dtype rounding, promotion, input
// generators and the suite registry. Independent of the SDK's kernels.
#include "op_suite.hpp"

#include <cstring>
#include <limits>
#include <random>

namespace hal::conformance {

std::optional<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

double broadcast_at(const HostTensor& t, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  size_t lead = idx.size() - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d) off = off * t.shape[d] + (t.shape[d] == 1 ? 0 : idx[lead + d]);
  return t.values[off];
}

bool is_float(hal_dtype_e dt) {
  return dt == HAL_DTYPE_FLOAT32 || dt == HAL_DTYPE_FLOAT64 || dt == HAL_DTYPE_FLOAT16 || dt == HAL_DTYPE_BFLOAT16;
}
bool is_int(hal_dtype_e dt) {
  return dt == HAL_DTYPE_INT8 || dt == HAL_DTYPE_UINT8 || dt == HAL_DTYPE_INT16 || dt == HAL_DTYPE_INT32 ||
         dt == HAL_DTYPE_INT64;
}

const char* dtype_str(hal_dtype_e dt) {
  switch (dt) {
    case HAL_DTYPE_FLOAT32: return "float32";
    case HAL_DTYPE_FLOAT16: return "float16";
    case HAL_DTYPE_BFLOAT16: return "bfloat16";
    case HAL_DTYPE_FLOAT64: return "float64";
    case HAL_DTYPE_INT8: return "int8";
    case HAL_DTYPE_UINT8: return "uint8";
    case HAL_DTYPE_INT16: return "int16";
    case HAL_DTYPE_INT32: return "int32";
    case HAL_DTYPE_INT64: return "int64";
    case HAL_DTYPE_BOOL: return "bool";
    default: return "unknown";
  }
}

hal_dtype_e promote(hal_dtype_e a, hal_dtype_e b) {
  if (a == b) return a;
  if (a == HAL_DTYPE_BOOL) return b;
  if (b == HAL_DTYPE_BOOL) return a;
  if (is_float(a) && is_float(b)) {
    if (a == HAL_DTYPE_FLOAT64 || b == HAL_DTYPE_FLOAT64) return HAL_DTYPE_FLOAT64;
    return HAL_DTYPE_FLOAT32;
  }
  if (is_float(a)) return a;
  if (is_float(b)) return b;
  // Both integers: the smallest signed type holding both ranges.
  auto bits = [](hal_dtype_e d) {
    switch (d) {
      case HAL_DTYPE_INT8: case HAL_DTYPE_UINT8: return 8;
      case HAL_DTYPE_INT16: return 16;
      case HAL_DTYPE_INT32: return 32;
      default: return 64;
    }
  };
  if ((a == HAL_DTYPE_UINT8) != (b == HAL_DTYPE_UINT8)) {
    hal_dtype_e other = a == HAL_DTYPE_UINT8 ? b : a;
    return other == HAL_DTYPE_INT8 ? HAL_DTYPE_INT16 : other;
  }
  return bits(a) >= bits(b) ? a : b;
}

namespace {

// Round-to-nearest-even of V to a float with MANT explicit mantissa bits and
// exponent range [EMIN, EMAX] (subnormals below EMIN), saturating to inf.
double round_float(double v, int mant, int emin, int emax) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  int e;
  std::frexp(v, &e);  // v = f * 2^e, 0.5 <= |f| < 1
  int exp = std::max(e - 1, emin);
  double ulp = std::ldexp(1.0, exp - mant);
  double r = std::nearbyint(v / ulp) * ulp;  // default rounding: nearest even
  double max = std::ldexp(2.0 - std::ldexp(1.0, -mant), emax);
  if (std::fabs(r) > max) return v > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  return r;
}

double wrap(double v, int bits, bool is_signed) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  double mod = std::ldexp(1.0, bits);
  if (bits == 64) return t;  // cases keep int64 inside +-2^53
  double r = std::fmod(t, mod);
  if (r < 0) r += mod;
  if (is_signed && r >= mod / 2) r -= mod;
  return r;
}

}  // namespace

double round_to(hal_dtype_e dt, double v) {
  switch (dt) {
    case HAL_DTYPE_FLOAT64: return v;
    case HAL_DTYPE_FLOAT32: return static_cast<double>(static_cast<float>(v));
    case HAL_DTYPE_FLOAT16: return round_float(v, 10, -14, 15);
    case HAL_DTYPE_BFLOAT16: return round_float(v, 7, -126, 127);
    case HAL_DTYPE_INT8: return wrap(v, 8, true);
    case HAL_DTYPE_UINT8: return wrap(v, 8, false);
    case HAL_DTYPE_INT16: return wrap(v, 16, true);
    case HAL_DTYPE_INT32: return wrap(v, 32, true);
    case HAL_DTYPE_INT64: return wrap(v, 64, true);
    case HAL_DTYPE_BOOL: return v != 0 ? 1.0 : 0.0;
    default: return v;
  }
}

HostTensor random(hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed, double lo, double hi) {
  HostTensor t(dt, std::move(shape));
  std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ull + 17);
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& v : t.values) {
    if (dt == HAL_DTYPE_BOOL) v = (gen() >> 11) & 1;
    else if (is_int(dt)) v = round_to(dt, std::floor(u(gen)));
    else v = round_to(dt, u(gen));
  }
  return t;
}

HostTensor random_nonzero(hal_dtype_e dt, std::vector<int64_t> shape, uint64_t seed, double min_abs, double hi) {
  HostTensor t = random(dt, std::move(shape), seed, min_abs, hi);
  std::mt19937_64 gen(seed + 99);
  for (double& v : t.values) {
    if (is_int(dt) && v == 0) v = 1;
    if (dt != HAL_DTYPE_UINT8 && dt != HAL_DTYPE_BOOL && (gen() & 1)) v = -v;
  }
  return t;
}

HostTensor full(hal_dtype_e dt, std::vector<int64_t> shape, double v) {
  HostTensor t(dt, std::move(shape));
  for (double& x : t.values) x = round_to(dt, v);
  return t;
}

HostTensor iota(hal_dtype_e dt, std::vector<int64_t> shape, double start, double step) {
  HostTensor t(dt, std::move(shape));
  for (size_t i = 0; i < t.values.size(); ++i) t.values[i] = round_to(dt, start + step * static_cast<double>(i));
  return t;
}

HostTensor permutation(hal_dtype_e dt, int64_t n, uint64_t seed) {
  HostTensor t = iota(dt, {n});
  std::mt19937_64 gen(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(t.values[i], t.values[gen() % static_cast<uint64_t>(i + 1)]);
  return t;
}

// ---- OpCase attribute look-up --------------------------------------------------

namespace {
const hal_attr_t* find_attr(const std::vector<hal::Attr>& attrs, const std::string& name, hal_attr_t& storage) {
  for (const hal::Attr& a : attrs)
    if (a.name() == name) {
      storage = a.c_attr();
      return &storage;
    }
  return nullptr;
}
}  // namespace

int64_t OpCase::attr_int(const std::string& name, int64_t def) const {
  hal_attr_t s;
  const hal_attr_t* a = find_attr(attrs, name, s);
  if (a == nullptr) return def;
  return a->type == HAL_ATTR_TYPE_FLOAT ? static_cast<int64_t>(a->value.f) : a->value.i;
}
double OpCase::attr_float(const std::string& name, double def) const {
  hal_attr_t s;
  const hal_attr_t* a = find_attr(attrs, name, s);
  if (a == nullptr) return def;
  return a->type == HAL_ATTR_TYPE_FLOAT ? a->value.f : static_cast<double>(a->value.i);
}
bool OpCase::attr_bool(const std::string& name, bool def) const { return attr_int(name, def ? 1 : 0) != 0; }
std::string OpCase::attr_string(const std::string& name, const std::string& def) const {
  hal_attr_t s;
  const hal_attr_t* a = find_attr(attrs, name, s);
  return a == nullptr || a->type != HAL_ATTR_TYPE_STRING ? def : std::string(a->value.s);
}
std::vector<int64_t> OpCase::attr_ints(const std::string& name, const std::vector<int64_t>& def) const {
  hal_attr_t s;
  const hal_attr_t* a = find_attr(attrs, name, s);
  if (a == nullptr || a->type != HAL_ATTR_TYPE_INTS) return def;
  return std::vector<int64_t>(a->value.ints, a->value.ints + a->count);
}
hal_dtype_e OpCase::attr_dtype(const std::string& name, hal_dtype_e def) const {
  hal_attr_t s;
  const hal_attr_t* a = find_attr(attrs, name, s);
  return a == nullptr ? def : static_cast<hal_dtype_e>(a->value.i);
}

// ---- registry --------------------------------------------------------------------

namespace {
std::vector<OpSuite>& registry() {
  static std::vector<OpSuite> suites;
  return suites;
}
}  // namespace

bool register_suite(OpSuite suite) {
  registry().push_back(std::move(suite));
  return true;
}
const std::vector<OpSuite>& suites() { return registry(); }

namespace {
std::vector<std::pair<std::string, FreeOutputs>>& free_registry() {
  static std::vector<std::pair<std::string, FreeOutputs>> ops;
  return ops;
}
}  // namespace

bool register_free_outputs(const std::string& op, FreeOutputs free) {
  free_registry().emplace_back(op, free);
  return true;
}
FreeOutputs free_outputs(const std::string& op) {
  for (const auto& [name, free] : free_registry())
    if (name == op) return free;
  return {};
}

}  // namespace hal::conformance
