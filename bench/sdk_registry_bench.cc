// The SDK's handle registry: every C entry of a plugin looks its handles up
// there before dereferencing them (an op launch: the device, the stream and
// one buffer per tensor). Measures one lookup with 1,000 live handles, from
// one thread and from two threads at once (two streams launching).
#include <benchmark/benchmark.h>

#include <vector>

#include "hal/sdk/detail/registry.hpp"

namespace {

namespace detail = hal::sdk::detail;

struct Handles {
  std::vector<int> objects = std::vector<int>(1000);
  Handles() {
    for (int& o : objects) detail::registry().add(&o, detail::Kind::kBuffer);
  }
};

Handles& handles() {
  static Handles h;
  return h;
}

void BM_RegistryLookup(benchmark::State& state) {
  Handles& h = handles();
  size_t i = static_cast<size_t>(state.thread_index()) * 7;
  for (auto _ : state) {
    int* p = detail::as<int>(&h.objects[i], detail::Kind::kBuffer, "buffer");
    benchmark::DoNotOptimize(p);
    i = (i + 13) % h.objects.size();
  }
}
BENCHMARK(BM_RegistryLookup)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
