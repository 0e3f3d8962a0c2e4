// OpRunner::launch's descriptor marshalling (hal/op/op.cc CArgs): calls whose
// tensors and attributes fit the inline storage and calls that need the heap
// reach the plugin whole and in order.
#include <doctest/doctest.h>

#include <numeric>
#include <string>
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

TEST_CASE("op launch: TensorRef views launch like TensorViews, promote mixed inputs and are range-checked") {
  auto rt = load_only({HAL_TEST_CPU_PLUGIN});
  auto d = rt->device("cpu");
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<double> b = {10, 20, 30};
  hal::Buffer ba = d->allocate(sizeof(float) * a.size()), bb = d->allocate(sizeof(double) * b.size()),
              bo = d->allocate(sizeof(float) * 6), bd = d->allocate(sizeof(double) * 6);
  ba.copy_from_host(a.data(), sizeof(float) * a.size());
  bb.copy_from_host(b.data(), sizeof(double) * b.size());
  const int64_t shape_a[] = {2, 3}, shape_b[] = {3}, transposed[] = {3, 2}, strides_t[] = {1, 3};
  auto ref = [](const hal::Buffer& buf, hal_dtype_e dt, uint32_t rank, const int64_t* shape,
                const int64_t* strides = nullptr) {
    hal::TensorRef r;
    r.buffer = buf.handle();
    r.buffer_bytes = buf.size();
    r.dtype = dt;
    r.rank = rank;
    r.shape = shape;
    r.strides = strides;
    return r;
  };
  hal::OpRunner add(d, "add");

  SUBCASE("contiguous, broadcast, with an attribute") {
    hal::TensorRef x = ref(ba, HAL_DTYPE_FLOAT32, 2, shape_a), out = ref(bo, HAL_DTYPE_FLOAT32, 2, shape_a);
    const std::vector<float> three = {1, 1, 1};
    hal::Buffer bc = d->allocate(sizeof(float) * 3);
    bc.copy_from_host(three.data(), sizeof(float) * 3);
    hal::TensorRef y = ref(bc, HAL_DTYPE_FLOAT32, 1, shape_b);
    const hal::TensorRef* in[] = {&x, &y};
    const hal::TensorRef* outs[] = {&out};
    add.launch(in, 2, outs, 1, {hal::Attr::scalar("alpha", 2.0)});
    std::vector<float> got(6);
    bo.copy_to_host(got.data(), sizeof(float) * 6);
    CHECK(got == std::vector<float>{3, 4, 5, 6, 7, 8});
  }
  SUBCASE("strided input") {
    hal::TensorRef x = ref(ba, HAL_DTYPE_FLOAT32, 2, transposed, strides_t),
                   out = ref(bo, HAL_DTYPE_FLOAT32, 2, transposed);
    const hal::TensorRef* in[] = {&x, &x};
    const hal::TensorRef* outs[] = {&out};
    add.launch(in, 2, outs, 1, {});
    std::vector<float> got(6);
    bo.copy_to_host(got.data(), sizeof(float) * 6);
    CHECK(got == std::vector<float>{2, 8, 4, 10, 6, 12});
  }
  SUBCASE("mixed dtypes take the promoting path") {
    hal::TensorRef x = ref(ba, HAL_DTYPE_FLOAT32, 2, shape_a), y = ref(bb, HAL_DTYPE_FLOAT64, 1, shape_b),
                   out = ref(bd, HAL_DTYPE_FLOAT64, 2, shape_a);
    const hal::TensorRef* in[] = {&x, &y};
    const hal::TensorRef* outs[] = {&out};
    add.launch(in, 2, outs, 1, {});
    std::vector<double> got(6);
    bd.copy_to_host(got.data(), sizeof(double) * 6);
    CHECK(got == std::vector<double>{11, 22, 33, 14, 25, 36});
  }
  SUBCASE("a view past its buffer is OUT_OF_RANGE naming it, and nothing is written") {
    const std::vector<float> sentinel(6, -1.f);
    bo.copy_from_host(sentinel.data(), sizeof(float) * 6);
    const int64_t too_big[] = {4, 3};
    hal::TensorRef x = ref(ba, HAL_DTYPE_FLOAT32, 2, too_big), out = ref(bo, HAL_DTYPE_FLOAT32, 2, shape_a);
    const hal::TensorRef* in[] = {&x, &x};
    const hal::TensorRef* outs[] = {&out};
    try {
      add.launch(in, 2, outs, 1, {});
      FAIL("launch accepted a view past its buffer");
    } catch (const hal::Error& e) {
      CHECK(e.code() == HAL_STATUS_OUT_OF_RANGE);
      CHECK(std::string(e.what()).find("input 0 (shape [4, 3]") != std::string::npos);
    }
    std::vector<float> got(6);
    bo.copy_to_host(got.data(), sizeof(float) * 6);
    CHECK(got == sentinel);
  }
  SUBCASE("a rank without a shape is INVALID_ARGUMENT") {
    hal::TensorRef x = ref(ba, HAL_DTYPE_FLOAT32, 2, nullptr), out = ref(bo, HAL_DTYPE_FLOAT32, 2, shape_a);
    const hal::TensorRef* in[] = {&x, &x};
    const hal::TensorRef* outs[] = {&out};
    CHECK_THROWS_AS(add.launch(in, 2, outs, 1, {}), hal::Error);
  }
}
