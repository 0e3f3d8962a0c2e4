// OpRunner::launch's descriptor marshalling (hal/op/op.cc CArgs): calls whose
// tensors and attributes fit the inline storage and calls that need the heap
// reach the plugin whole and in order.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "hal/runtime/runtime.hpp"
#include "testing/test_util.hpp"

using hal::testing::load_only;

namespace {

// cat of N one-element float32 inputs holding 0..N-1 along dim 0.
std::vector<float> cat_of(const std::shared_ptr<hal::Device>& d, int n) {
  std::vector<hal::Buffer> buffers;
  std::vector<hal::TensorView> views;
  buffers.reserve(static_cast<size_t>(n) + 1);
  views.reserve(static_cast<size_t>(n) + 1);
  for (int i = 0; i < n; ++i) {
    const float v = static_cast<float>(i);
    buffers.push_back(d->allocate(sizeof(float)));
    buffers.back().copy_from_host(&v, sizeof v);
    views.emplace_back(buffers.back(), HAL_DTYPE_FLOAT32, std::vector<int64_t>{1});
  }
  buffers.push_back(d->allocate(sizeof(float) * static_cast<size_t>(n)));
  views.emplace_back(buffers.back(), HAL_DTYPE_FLOAT32, std::vector<int64_t>{n});
  std::vector<const hal::TensorView*> in;
  for (int i = 0; i < n; ++i) in.push_back(&views[static_cast<size_t>(i)]);
  hal::OpRunner(d, "cat").launch(in, {&views.back()}, {hal::Attr::i("dim", 0)});
  std::vector<float> out(static_cast<size_t>(n));
  buffers.back().copy_to_host(out.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace

TEST_CASE("op launch: calls with few and with many tensors reach the plugin whole and in order") {
  auto rt = load_only({HAL_TEST_CPU_PLUGIN});
  auto d = rt->device("cpu");
  for (int n : {1, 3, 7, 8, 12, 40}) {
    CAPTURE(n);
    std::vector<float> expect(static_cast<size_t>(n));
    std::iota(expect.begin(), expect.end(), 0.f);
    CHECK(cat_of(d, n) == expect);
  }
}
