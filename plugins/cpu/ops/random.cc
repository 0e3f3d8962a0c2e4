// CPU kernels of the "random" op group: Philox4x32-10 streams mapped to
// values exactly as sdk/catalog/ops/random.toml specifies (the mapping lives
// in hal/sdk/kernel/philox.hpp). Element i of an output is a function of i
// alone, so chunks are generated in parallel and layouts do not matter.
#include <algorithm>
#include <cmath>

#include "cpu_kernel.hpp"
#include "cpu_ops.hpp"
#include "hal/sdk/kernel/philox.hpp"
#include "random_layout.hpp"

namespace hal::cpu {
namespace {

namespace op = sdk::op;
namespace philox = sdk::kernel::philox;
using sdk::kernel::compute_t;

constexpr int64_t kGrain = 16384;

uint64_t u64(int64_t v) { return static_cast<uint64_t>(v); }

void uniform_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  const uint64_t seed = u64(op::uniform::seed(c)), offset = u64(op::uniform::offset(c));
  const bool wide = out.dtype == HAL_DTYPE_FLOAT64;
  const int bits = philox::uniform_bits_for(out.dtype);
  sdk::kernel::dispatch_float(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const C lo = static_cast<C>(op::uniform::from(c)), hi = static_cast<C>(op::uniform::to(c));
    const C span = hi - lo;
    ContiguousOut<T> dst(out);
    T* p = dst.data();
    parallel_for(out.numel(), kGrain, [&](int64_t b, int64_t e) {
      philox::for_each_uniform(seed, offset, wide, bits, u64(b), u64(e),
                               [&](uint64_t i, double u) { p[i] = static_cast<T>(lo + span * static_cast<C>(u)); });
    });
    dst.finish();
  });
}
HAL_CPU_KERNEL(uniform_kernel, uniform_body)

// A when MASK is all ones, B when it is 0: a select without control flow,
// so the loops below vectorise.
inline float select(uint32_t mask, float a, float b) {
  return sdk::kernel::bits_float((sdk::kernel::float_bits(a) & mask) | (sdk::kernel::float_bits(b) & ~mask));
}

// ln(x) for normal x in (0, 1] (Cephes logf: ~1 ulp), branch-free.
inline float log_unit(float x) {
  uint32_t bits = sdk::kernel::float_bits(x);
  float e = static_cast<float>(static_cast<int32_t>((bits >> 23) & 0xffu) - 126);
  float m = sdk::kernel::bits_float((bits & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  const uint32_t small = 0u - static_cast<uint32_t>(m < 0.70710678f);
  e = select(small, e - 1.0f, e);
  m = select(small, m + m - 1.0f, m - 1.0f);
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z - 2.12194440e-4f * e - 0.5f * z;
  return m + y + 0.693359375f * e;
}

// sin and cos of 2π·u for u in [0, 1): octant j of 8u, reduced argument
// (π/4)(8u - j) in [-π/4, π/4] exactly up to one rounding, Cephes
// polynomials (~1 ulp), branch-free.
inline void sincos_turn(float u, float& s_out, float& c_out) {
  const float t = 8.0f * u;
  int32_t j = static_cast<int32_t>(t);
  j += j & 1;
  const float x = (t - static_cast<float>(j)) * 0.78539816339744831f;
  const float z = x * x;
  const float s = x + x * z * ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f);
  const float c = 1.0f - 0.5f * z + z * z * ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f);
  const uint32_t k = static_cast<uint32_t>(j >> 1) & 3u;  // angle = k·π/2 + x
  const uint32_t odd = 0u - (k & 1u);
  const float sk = select(odd, c, s), ck = select(odd, s, c);
  s_out = sdk::kernel::bits_float(sdk::kernel::float_bits(sk) ^ ((k & 2u) << 30));  // sign flips
  c_out = sdk::kernel::bits_float(sdk::kernel::float_bits(ck) ^ (((k + 1u) & 2u) << 30));
}

void normal_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  const uint64_t seed = u64(op::normal::seed(c)), offset = u64(op::normal::offset(c));
  const bool wide = out.dtype == HAL_DTYPE_FLOAT64;
  const int64_t n = out.numel();
  sdk::kernel::dispatch_float(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const C mean = static_cast<C>(op::normal::mean(c)), sd = static_cast<C>(op::normal::std_(c));
    ContiguousOut<T> dst(out);
    T* p = dst.data();
    parallel_for((n + 1) / 2, kGrain / 2, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<C, double>) {
        double v0 = 0;
        philox::for_each_uniform(seed, offset, wide, 24, u64(2 * b), u64(2 * e), [&](uint64_t i, double v) {
          if (i % 2 == 0) {
            v0 = v;
            return;
          }
          double z0, z1;
          philox::box_muller(1.0 - v0, v, z0, z1);
          p[i - 1] = static_cast<T>(mean + sd * z0);
          if (static_cast<int64_t>(i) < n) p[i] = static_cast<T>(mean + sd * z1);
        });
      } else {
        // Uniforms of a chunk of pairs first, then Box-Muller over the
        // chunk in a loop the compiler vectorises.
        constexpr int64_t kChunk = 256;
        float u1[kChunk], u2[kChunk], z[2 * kChunk];
        for (int64_t j0 = b; j0 < e; j0 += kChunk) {
          const int64_t m = std::min(kChunk, e - j0);
          philox::for_each_uniform(seed, offset, false, 24, u64(2 * j0), u64(2 * (j0 + m)), [&](uint64_t i, double v) {
            const int64_t k = static_cast<int64_t>(i / 2) - j0;
            if (i % 2 == 0) u1[k] = static_cast<float>(1.0 - v);
            else u2[k] = static_cast<float>(v);
          });
#pragma omp simd
          for (int64_t k = 0; k < m; ++k) {
            u1[k] = -2.0f * log_unit(u1[k]);
            sincos_turn(u2[k], z[2 * k], z[2 * k + 1]);
          }
          // sqrt apart: its errno path keeps the loop above from vectorising.
          for (int64_t k = 0; k < m; ++k) {
            const float r = std::sqrt(u1[k]);
            const float cs = z[2 * k + 1], sn = z[2 * k];
            z[2 * k] = mean + sd * (r * cs);
            z[2 * k + 1] = mean + sd * (r * sn);
          }
          const int64_t first = 2 * j0, count = std::min(2 * m, n - first);
          for (int64_t k = 0; k < count; ++k) p[first + k] = static_cast<T>(z[k]);
        }
      }
    });
    dst.finish();
  });
}
HAL_CPU_KERNEL(normal_kernel, normal_body)

void bernoulli_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const uint64_t seed = u64(op::bernoulli::seed(c)), offset = u64(op::bernoulli::offset(c));
  const bool wide = out.dtype == HAL_DTYPE_FLOAT64;
  const int64_t n = self.numel();
  sdk::kernel::dispatch_float(self.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor tmp;
    std::vector<unsigned char> storage;
    const T* prob = contiguous_as<T>(self, self.dtype, tmp, storage);
    for (int64_t i = 0; i < n; ++i) {
      double v = static_cast<double>(static_cast<compute_t<T>>(prob[i]));
      if (!(v >= 0 && v <= 1))
        sdk::fail(HAL_STATUS_OUT_OF_RANGE, "bernoulli: probability ", v, " in 'self' at position ", i,
                  " is out of range [0, 1]");
    }
    ContiguousOut<T> dst(out);
    T* p = dst.data();
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
      philox::for_each_uniform(seed, offset, wide, 24, u64(b), u64(e), [&](uint64_t i, double v) {
        p[i] = static_cast<T>(v < static_cast<double>(static_cast<compute_t<T>>(prob[i])) ? 1.0f : 0.0f);
      });
    });
    dst.finish();
  });
}
HAL_CPU_KERNEL(bernoulli_kernel, bernoulli_body)

void dropout_body(const OpCall& c) {
  const Tensor& self = c.input(0);
  const Tensor& out = c.output(0);
  const Tensor& mask = c.output(1);
  const uint64_t seed = u64(op::dropout::seed(c)), offset = u64(op::dropout::offset(c));
  const double p = op::dropout::p(c);
  const bool train = op::dropout::train(c);
  const bool wide = out.dtype == HAL_DTYPE_FLOAT64;
  const int64_t n = self.numel();
  sdk::kernel::dispatch_float(self.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    Tensor tmp;
    std::vector<unsigned char> storage;
    const T* x = contiguous_as<T>(self, self.dtype, tmp, storage);
    ContiguousOut<T> dst(out);
    ContiguousOut<bool> keep_dst(mask);
    T* o = dst.data();
    bool* m = keep_dst.data();
    if (!train) {
      parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          o[i] = x[i];
          m[i] = true;
        }
      });
    } else {
      const double keep_below = 1.0 - p;
      const C scale = static_cast<C>(p >= 1.0 ? 0.0 : 1.0 / (1.0 - p));
      parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
        philox::for_each_uniform(seed, offset, wide, 24, u64(b), u64(e), [&](uint64_t i, double v) {
          bool keep = v < keep_below;
          m[i] = keep;
          o[i] = static_cast<T>(static_cast<C>(x[i]) * (keep ? scale : C(0)));
        });
      });
    }
    dst.finish();
    keep_dst.finish();
  });
}
HAL_CPU_KERNEL(dropout_kernel, dropout_body)

}  // namespace

void register_random_ops(sdk::OpRegistry& ops) {
  ops.add<op::uniform>(&uniform_kernel, sdk::kFloatDtypes);
  ops.add<op::normal>(&normal_kernel, sdk::kFloatDtypes);
  ops.add<op::bernoulli>(&bernoulli_kernel, sdk::kFloatDtypes);
  ops.add<op::dropout>(&dropout_kernel, sdk::kFloatDtypes);
}

}  // namespace hal::cpu
