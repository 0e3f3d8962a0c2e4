// CPU kernels of the "random" op group: Philox4x32-10 streams mapped to
// values exactly as sdk/catalog/ops/random.toml specifies (the mapping lives
// in hal/sdk/kernel/philox.hpp). Element i of an output is a function of i
// alone, so chunks are generated in parallel and layouts do not matter.
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

void normal_body(const OpCall& c) {
  const Tensor& out = c.output(0);
  const uint64_t seed = u64(op::normal::seed(c)), offset = u64(op::normal::offset(c));
  const bool wide = out.dtype == HAL_DTYPE_FLOAT64;
  const int64_t n = out.numel();
  sdk::kernel::dispatch_float(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const C mean = static_cast<C>(op::normal::mean(c)), sd = static_cast<C>(op::normal::std(c));
    ContiguousOut<T> dst(out);
    T* p = dst.data();
    parallel_for((n + 1) / 2, kGrain / 2, [&](int64_t b, int64_t e) {
      double v0 = 0;
      philox::for_each_uniform(seed, offset, wide, 24, u64(2 * b), u64(2 * e), [&](uint64_t i, double v) {
        if (i % 2 == 0) {
          v0 = v;
          return;
        }
        C z0, z1;
        philox::box_muller(static_cast<C>(1.0 - v0), static_cast<C>(v), z0, z1);
        p[i - 1] = static_cast<T>(mean + sd * z0);
        if (static_cast<int64_t>(i) < n) p[i] = static_cast<T>(mean + sd * z1);
      });
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
