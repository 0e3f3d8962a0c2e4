// torch_hal random numbers: the PrivateUse1 generator and the random aten
// ops on the catalog's Philox ops (sdk/catalog/ops/random.toml).
//
// The generator is CUDA's Philox state: a seed and an offset. The offset
// counts 128-bit Philox blocks (the catalog's unit); every call reserves the
// blocks its elements use, so a result depends only on (seed, offset) and
// the same seed gives the same numbers (and dropout masks) on every plugin.
// The numbers differ from PyTorch's CPU generator, as CUDA's do.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/core/DistributionsHelper.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "backend.hpp"

namespace torch_hal {
namespace {

constexpr auto kHal = c10::DeviceType::PrivateUse1;

class HalGenerator final : public c10::GeneratorImpl {
 public:
  explicit HalGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kHal, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  static c10::DeviceType device_type() { return kHal; }

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    const uint64_t s = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(s);
    return s;
  }
  // Offsets count 128-bit Philox blocks.
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }

  // State: 16 bytes, seed then offset (host byte order), as CUDA's.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor t = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(t.data_ptr(), &seed_, 8);
    std::memcpy(static_cast<char*>(t.data_ptr()) + 8, &offset_, 8);
    return t.getIntrusivePtr();
  }
  void set_state(const c10::TensorImpl& state) override {
    at::detail::check_rng_state(state);
    TORCH_CHECK(state.numel() == static_cast<int64_t>(kStateBytes), "torch_hal: a hal RNG state is ", kStateBytes,
                " bytes (seed, offset), got ", state.numel());
    const auto* bytes = static_cast<const char*>(state.data());
    std::memcpy(&seed_, bytes, 8);
    std::memcpy(&offset_, bytes + 8, 8);
  }

  // The (seed, offset) for a call using WORDS 32-bit Philox words; advances
  // the offset past them. The caller holds mutex_.
  std::pair<int64_t, int64_t> reserve(uint64_t words) {
    const uint64_t offset = offset_;
    offset_ += (words + 3) / 4;
    return {static_cast<int64_t>(seed_), static_cast<int64_t>(offset)};  // the catalog takes seed bits as int
  }

 private:
  static constexpr size_t kStateBytes = 16;
  HalGenerator* clone_impl() const override {
    auto* g = new HalGenerator(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
};

struct Generators {
  std::mutex mu;
  bool created = false;
  std::vector<at::Generator> defaults;
  std::map<c10::DeviceIndex, uint64_t> pending;  // seeds given before creation (-1: all)
};

Generators& generators() {
  static auto* g = new Generators();  // leaked: generators may be used during exit
  return *g;
}

c10::DeviceIndex resolve(c10::DeviceIndex index) {
  if (index < 0) index = current_device();
  device(index);  // checks it
  return index;
}

void seed_locked(at::Generator gen, uint64_t seed) {  // a handle: copies share the state
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

// Reserves the Philox words of a call on GEN (default generator of DEV when
// GEN is absent): returns the seed and offset attributes to launch with.
std::vector<hal::Attr> philox_attrs(const std::optional<at::Generator>& gen, c10::DeviceIndex dev, uint64_t words) {
  auto* g = at::get_generator_or_default<HalGenerator>(gen, default_generator(dev));
  std::lock_guard<std::mutex> lock(g->mutex_);
  const auto [seed, offset] = g->reserve(words);
  return {hal::Attr::i("seed", seed), hal::Attr::i("offset", offset)};
}

// Words per element: 1, or 2 for float64 (53-bit uniforms).
uint64_t words_per_element(const at::Tensor& t) { return t.scalar_type() == at::kDouble ? 2 : 1; }

void check_floating(const at::Tensor& t, const char* op) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, " expects a floating point tensor, got ", t.scalar_type());
}

void run(const at::Tensor& like, const char* catalog, std::vector<const hal::TensorView*> ins,
         std::vector<const hal::TensorView*> outs, std::vector<hal::Attr> attrs) {
  const c10::DeviceIndex dev = like.device().index();
  try {
    launch(dev, catalog, ins, outs, attrs);
  } catch (const hal::Error& e) {
    TORCH_CHECK(false, "torch_hal: catalog op ", catalog, " on hal:", int(dev), " (", device(dev)->id(),
                ") failed: ", e.what());
  }
}

// uniform / normal: inputs none, attributes size, dtype, two floats, seed, offset.
at::Tensor& fill_random(at::Tensor& self, const char* catalog, const char* a_name, double a, const char* b_name,
                        double b, uint64_t words, const std::optional<at::Generator>& gen) {
  if (self.numel() == 0) return self;
  std::vector<hal::Attr> attrs = philox_attrs(gen, self.device().index(), words);
  attrs.push_back(hal::Attr::ints("size", self.sizes().vec()));
  attrs.push_back(hal::Attr::dtype("dtype", to_hal_dtype(self.scalar_type())));
  attrs.push_back(hal::Attr::f(a_name, a));
  attrs.push_back(hal::Attr::f(b_name, b));
  const hal::TensorView out = view_of(self);
  run(self, catalog, {}, {&out}, std::move(attrs));
  return self;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  check_floating(self, "uniform_");
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  const auto n = static_cast<uint64_t>(self.numel());
  return fill_random(self, "uniform", "from", from, "to", to, n * words_per_element(self), gen);
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  check_floating(self, "normal_");
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  const auto n = static_cast<uint64_t>(self.numel());
  return fill_random(self, "normal", "mean", mean, "std", std, (n + (n & 1)) * words_per_element(self), gen);
}

// OUT = bernoulli(PROBS) (same shape); a non-floating OUT is written through
// a float32 temporary.
at::Tensor& bernoulli_from(at::Tensor& out, const at::Tensor& probs, const std::optional<at::Generator>& gen) {
  if (out.numel() == 0) return out;
  const bool direct = at::isFloatingType(out.scalar_type());
  const at::ScalarType compute = direct ? out.scalar_type() : at::kFloat;
  at::Tensor p = probs.to(out.device(), compute).expand(out.sizes());
  at::Tensor result = direct ? out : at::empty(out.sizes(), out.options().dtype(compute));
  std::vector<hal::Attr> attrs =
      philox_attrs(gen, out.device().index(), static_cast<uint64_t>(out.numel()) * words_per_element(result));
  const hal::TensorView in = view_of(p), res = view_of(result);
  run(out, "bernoulli", {&in}, {&res}, std::move(attrs));
  if (!direct) out.copy_(result);
  return out;
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  const at::ScalarType compute = at::isFloatingType(self.scalar_type()) ? self.scalar_type() : at::kFloat;
  return bernoulli_from(self, at::full({}, p, self.options().dtype(compute)), gen);
}

at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  TORCH_CHECK(p.is_privateuseone() || (p.is_cpu() && p.dim() == 0),
              "Expected all tensors to be on the same device, but found at least two devices, ", self.device(),
              " and ", p.device(), "! (aten::bernoulli_ argument p)");
  return bernoulli_from(self, p, gen);
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  check_floating(input, "dropout");
  TORCH_CHECK(0 <= p && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  at::Tensor out = at::empty_like(input);
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  if (input.numel() == 0) return {out, mask};
  const bool training = train.value_or(true);
  std::vector<hal::Attr> attrs;
  if (training)
    attrs = philox_attrs(std::nullopt, input.device().index(),
                         static_cast<uint64_t>(input.numel()) * words_per_element(input));
  else
    attrs = {hal::Attr::i("seed", 0)};  // consumes no random words
  attrs.push_back(hal::Attr::f("p", p));
  attrs.push_back(hal::Attr::b("train", training));
  const hal::TensorView in = view_of(input), o = view_of(out), m = view_of(mask);
  run(input, "dropout", {&in}, {&o, &m}, std::move(attrs));
  return {out, mask};
}

// As PyTorch's: grad·mask·scale, through the device's own mul.
at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  return grad * mask.to(grad.scalar_type()) * scale;
}

// Integers in [from, to): floor(range'·u) for a float64 uniform u in [0, 1),
// with range' the float64 just below to - from, so the product stays below
// it and truncates to at most to - from - 1; then + from, and converted to
// self's dtype by the device's copy. Exact while to - from <= 2^32 (the
// float64 has 20 or more bits below the point); wider ranges (int64's and
// float64's full range) use the CPU generator on the counted fallback.
constexpr int64_t kMaxDeviceRange = int64_t{1} << 32;

at::Tensor& random_range(at::Tensor& self, int64_t from, int64_t to, const std::optional<at::Generator>& gen) {
  TORCH_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", to);
  if (self.numel() == 0) return self;
  const uint64_t range = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  if (range > static_cast<uint64_t>(kMaxDeviceRange)) {
    count_fallback("aten::random_", "a range of " + std::to_string(range) + " values is wider than 2^32");
    self.copy_(at::empty(self.sizes(), self.options().device(at::kCPU)).random_(from, to));
    return self;
  }
  const c10::DeviceIndex dev = self.device().index();
  at::Tensor u = at::empty(self.sizes(), self.options().dtype(at::kDouble));
  std::vector<hal::Attr> attrs = philox_attrs(gen, dev, 2 * static_cast<uint64_t>(self.numel()));
  attrs.push_back(hal::Attr::ints("size", self.sizes().vec()));
  attrs.push_back(hal::Attr::dtype("dtype", HAL_DTYPE_FLOAT64));
  attrs.push_back(hal::Attr::f("from", 0.0));
  attrs.push_back(hal::Attr::f("to", std::nextafter(static_cast<double>(range), 0.0)));
  const hal::TensorView uv = view_of(u);
  run(self, "uniform", {}, {&uv}, std::move(attrs));
  at::Tensor k = at::empty(self.sizes(), self.options().dtype(at::kLong));
  k.copy_(u);  // truncation = floor here (non-negative)
  if (from != 0) {
    const at::Tensor offset = at::full({}, from, k.options());
    const hal::TensorView kv = view_of(k), ov = view_of(offset);
    run(self, "add", {&kv, &ov}, {&kv}, {});
  }
  self.copy_(k);
  return self;
}

// The largest value random_ draws without bounds: 2^digits for floating
// dtypes (every integer up to it is exact), the type's maximum for integers.
int64_t random_max(at::ScalarType type) {
  switch (type) {
    case at::kBool: return 1;
    case at::kFloat: return int64_t{1} << 24;
    case at::kHalf: return int64_t{1} << 11;
    case at::kBFloat16: return int64_t{1} << 8;
    case at::kDouble: return int64_t{1} << 53;
    default:
      TORCH_CHECK(at::isIntegralType(type, /*includeBool=*/false), "random_ is not implemented for ", type);
      return AT_DISPATCH_INTEGRAL_TYPES(type, "random_max", [] { return int64_t(std::numeric_limits<scalar_t>::max()); });
  }
}

at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> gen) {
  if (to) return random_range(self, from, *to, gen);
  const int64_t max = random_max(self.scalar_type());
  if (max == std::numeric_limits<int64_t>::max()) {  // [from, 2^63 - 1]: to would overflow
    count_fallback("aten::random_", "the full int64 range");
    self.copy_(at::empty(self.sizes(), self.options().device(at::kCPU)).random_(from, std::optional<int64_t>()));
    return self;
  }
  return random_range(self, from, max + 1, gen);
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_range(self, 0, to, gen);
}

at::Tensor& random_all(at::Tensor& self, std::optional<at::Generator> gen) { return random_from(self, 0, std::nullopt, gen); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("random_", random_all);
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
}

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  index = resolve(index);
  Generators& g = generators();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!g.created) {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      g.defaults.push_back(at::make_generator<HalGenerator>(i));
      auto it = g.pending.find(i);
      if (it == g.pending.end()) it = g.pending.find(-1);
      if (it != g.pending.end()) seed_locked(g.defaults.back(), it->second);
    }
    g.created = true;
  }
  return g.defaults[index];
}

at::Generator new_generator(c10::DeviceIndex index) { return at::make_generator<HalGenerator>(resolve(index)); }

void manual_seed(c10::DeviceIndex index, uint64_t seed) {
  Generators& g = generators();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (!g.created) {
      if (index < 0) g.pending.clear();
      g.pending[index] = seed;
      return;
    }
  }
  if (index >= 0) {
    seed_locked(default_generator(index), seed);
    return;
  }
  for (c10::DeviceIndex i = 0; i < device_count(); ++i) seed_locked(default_generator(i), seed);
}

}  // namespace torch_hal
