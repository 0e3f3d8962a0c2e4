// The SDK's kernel geometry helpers: contiguous strides, matrix and 4-D
// views, row / class layouts, index wrapping and float bits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "hal/sdk/kernel/bits.hpp"
#include "hal/sdk/kernel/matrix.hpp"
#include "hal/sdk/kernel/rows.hpp"
#include "hal/sdk/kernel/wrap.hpp"
#include "hal/sdk/op_schema.hpp"

namespace k = hal::sdk::kernel;
using hal::sdk::Tensor;

namespace {
Tensor shaped(const std::vector<int64_t>& shape) {
  Tensor t;
  t.defined = true;
  t.dtype = HAL_DTYPE_FLOAT32;
  t.set_shape(shape);
  return t;
}
}  // namespace

TEST_CASE("contiguous_strides are row-major and set_contiguous_strides writes them") {
  Tensor t = shaped({2, 3, 4});
  auto s = t.contiguous_strides();
  CHECK(s[0] == 12);
  CHECK(s[1] == 4);
  CHECK(s[2] == 1);
  CHECK(s[3] == 0);
  t.strides[0] = 99;
  t.set_contiguous_strides();
  CHECK(t.strides[0] == 12);
  CHECK(t.is_contiguous());
  Tensor scalar = shaped({});
  CHECK(scalar.contiguous_strides()[0] == 0);
  Tensor empty = shaped({0, 5});
  CHECK(empty.contiguous_strides()[0] == 5);
}

TEST_CASE("MatrixView::index honours offset, strides and a shared single matrix") {
  k::MatrixView m{3, 2, 4, 5, 20, 5, 1};
  CHECK(m.index(1, 2, 3) == 3 + 20 + 10 + 3);
  CHECK(m.t().index(1, 3, 2) == m.index(1, 2, 3));
  k::MatrixView one{0, 1, 4, 5, 20, 5, 1};
  CHECK(one.index(7, 1, 1) == 6);  // batch 1: BS ignored
  Tensor t = shaped({3, 4});
  t.set_contiguous_strides();
  CHECK(k::matrix_2d(t).index(0, 2, 1) == 9);
}

TEST_CASE("HostView4 addresses [N, C, H, W] over the tensor's data, adding N and H where missing") {
  std::vector<float> data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  Tensor t = shaped({2, 3, 4});  // unbatched [C, H, W]
  t.set_contiguous_strides();
  t.data = data.data();
  k::HostView4<float> v(t, false, 2);
  CHECK(v.size[0] == 1);
  CHECK(v.at(0, 1, 2, 3) == 12 + 8 + 3);
  k::HostView4<float> l(t, true, 1);  // conv1d [N, C, L]
  CHECK(l.size[2] == 1);
  CHECK(l.at(1, 2, 0, 3) == 12 + 8 + 3);
}

TEST_CASE("split_rows, nchw and class_layout fold dims as the ops define") {
  Tensor x = shaped({2, 3, 4, 5});
  k::Rows r = k::split_rows(x, 2);
  CHECK(r.m == 6);
  CHECK(r.d == 20);
  k::Nchw s = k::nchw(x);
  CHECK(s.n == 2);
  CHECK(s.c == 3);
  CHECK(s.hw == 20);
  k::ClassLayout l = k::class_layout(x);
  CHECK(l.positions() == 40);
  CHECK(l.at(21, 2) == 1 * 60 + 2 * 20 + 1);
  k::ClassLayout c = k::class_layout(shaped({7}));
  CHECK(c.c == 7);
  CHECK(c.positions() == 1);
}

TEST_CASE("wrap_dim and positive_mod wrap negatives into range") {
  CHECK(k::wrap_dim(-1, 3) == 2);
  CHECK(k::wrap_dim(1, 3) == 1);
  CHECK(k::wrap_dim(-1, 0) == 0);
  CHECK(k::positive_mod(-1, 5) == 4);
  CHECK(k::positive_mod(-10, 5) == 0);
  CHECK(k::positive_mod(12, 5) == 2);
}

TEST_CASE("float_bits and bits_float round-trip IEEE 754 patterns") {
  CHECK(k::float_bits(1.0f) == 0x3f800000u);
  CHECK(k::float_bits(-0.0f) == 0x80000000u);
  CHECK(k::bits_float(0x7f800000u) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(k::bits_float(0x7fc00000u)));
  CHECK(k::bits_float(k::float_bits(3.25f)) == 3.25f);
}
