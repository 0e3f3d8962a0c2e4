// The SDK's element-wise reductions (hal/sdk/collective/reduce.hpp): the
// bitwise ops of ABI 1.11 on every integer dtype and bool, against values
// worked out by hand, and the refusals of check_reduction.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "hal/sdk/collective/reduce.hpp"

namespace col = hal::sdk::collective;

namespace {

template <class T>
std::vector<T> reduce3(uint32_t dtype, uint32_t op, const std::vector<T>& a, const std::vector<T>& b,
                       const std::vector<T>& c) {
  std::vector<T> out(a.size());
  const void* in[3] = {a.data(), b.data(), c.data()};
  col::reduce(dtype, op, out.data(), in, 3, a.size());
  return out;
}

// The code and message check_reduction throws for (DTYPE, OP), or "" if it accepts them.
std::string refusal(uint32_t dtype, uint32_t op, uint32_t* code = nullptr) {
  try {
    col::check_reduction(dtype, op);
  } catch (const hal::sdk::Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("bitwise reductions of signed integers work on the two's-complement bits") {
  // 0b1100 = 12, -3 = ...11111101, 0b0110 = 6
  const std::vector<int8_t> a = {12, -3, -1, 0}, b = {10, 7, -128, 5}, c = {6, -3, 127, 0};
  CHECK(reduce3<int8_t>(HAL_DTYPE_INT8, HAL_REDUCE_BAND, a, b, c) == std::vector<int8_t>{0, 5, 0, 0});
  CHECK(reduce3<int8_t>(HAL_DTYPE_INT8, HAL_REDUCE_BOR, a, b, c) == std::vector<int8_t>{14, -1, -1, 5});
  // 12^10^6 = 0; -3^7^-3 = 7; -1^-128^127 = 0; 0^5^0 = 5
  CHECK(reduce3<int8_t>(HAL_DTYPE_INT8, HAL_REDUCE_BXOR, a, b, c) == std::vector<int8_t>{0, 7, 0, 5});
  const std::vector<int64_t> x = {INT64_MIN, -1}, y = {-1, 0x0F0F0F0F0F0F0F0F}, z = {INT64_MIN | 1, 0x00FF00FF00FF00FF};
  CHECK(reduce3<int64_t>(HAL_DTYPE_INT64, HAL_REDUCE_BAND, x, y, z) == std::vector<int64_t>{INT64_MIN, 0x000F000F000F000F});
  CHECK(reduce3<int64_t>(HAL_DTYPE_INT64, HAL_REDUCE_BOR, x, y, z) == std::vector<int64_t>{-1, -1});
  CHECK(reduce3<int64_t>(HAL_DTYPE_INT64, HAL_REDUCE_BXOR, x, y, z) ==
        std::vector<int64_t>{static_cast<int64_t>(0xFFFFFFFFFFFFFFFEull), static_cast<int64_t>(0xF00FF00FF00FF00Full)});
}

TEST_CASE("bitwise reductions of unsigned integers of every width") {
  const std::vector<uint16_t> a = {0xF0F0, 0xFFFF}, b = {0x0FF0, 0x8001}, c = {0x00F1, 0x0001};
  CHECK(reduce3<uint16_t>(HAL_DTYPE_UINT16, HAL_REDUCE_BAND, a, b, c) == std::vector<uint16_t>{0x00F0, 0x0001});
  CHECK(reduce3<uint16_t>(HAL_DTYPE_UINT16, HAL_REDUCE_BOR, a, b, c) == std::vector<uint16_t>{0xFFF1, 0xFFFF});
  CHECK(reduce3<uint16_t>(HAL_DTYPE_UINT16, HAL_REDUCE_BXOR, a, b, c) == std::vector<uint16_t>{0xFFF1, 0x7FFF});
  const std::vector<uint8_t> p = {0xAA}, q = {0x0F}, r = {0xFF};
  CHECK(reduce3<uint8_t>(HAL_DTYPE_UINT8, HAL_REDUCE_BXOR, p, q, r) == std::vector<uint8_t>{0x5A});
  const std::vector<uint32_t> s = {0x80000001u}, t = {0xFFFFFFFFu}, u = {0x00000003u};
  CHECK(reduce3<uint32_t>(HAL_DTYPE_UINT32, HAL_REDUCE_BAND, s, t, u) == std::vector<uint32_t>{1u});
  const std::vector<uint64_t> v = {1ull << 63}, w = {1}, k = {1ull << 63};
  CHECK(reduce3<uint64_t>(HAL_DTYPE_UINT64, HAL_REDUCE_BXOR, v, w, k) == std::vector<uint64_t>{1});
  CHECK(reduce3<uint64_t>(HAL_DTYPE_UINT64, HAL_REDUCE_BOR, v, w, k) == std::vector<uint64_t>{(1ull << 63) | 1});
  const std::vector<int16_t> m = {-2}, n = {3}, o = {-1};
  CHECK(reduce3<int16_t>(HAL_DTYPE_INT16, HAL_REDUCE_BAND, m, n, o) == std::vector<int16_t>{2});
  const std::vector<int32_t> i = {-1}, j = {-1}, l = {-1};
  CHECK(reduce3<int32_t>(HAL_DTYPE_INT32, HAL_REDUCE_BXOR, i, j, l) == std::vector<int32_t>{-1});
}

TEST_CASE("bitwise reductions of bool are logical and, or, xor") {
  const std::vector<uint8_t> a = {1, 1, 0, 1}, b = {1, 0, 0, 1}, c = {1, 1, 0, 0};
  // bool storage: one byte per element
  const auto run = [&](uint32_t op) { return reduce3<uint8_t>(HAL_DTYPE_BOOL, op, a, b, c); };
  CHECK(run(HAL_REDUCE_BAND) == std::vector<uint8_t>{1, 0, 0, 0});
  CHECK(run(HAL_REDUCE_BOR) == std::vector<uint8_t>{1, 1, 0, 1});
  CHECK(run(HAL_REDUCE_BXOR) == std::vector<uint8_t>{1, 0, 0, 0});
  // The other ops keep their meanings: SUM and MAX or, PROD and MIN and.
  CHECK(run(HAL_REDUCE_SUM) == std::vector<uint8_t>{1, 1, 0, 1});
  CHECK(run(HAL_REDUCE_MIN) == std::vector<uint8_t>{1, 0, 0, 0});
}

TEST_CASE("a bitwise reduction of the output in place over a block boundary") {
  std::vector<int32_t> a(1500), b(1500);
  for (int i = 0; i < 1500; ++i) a[i] = i * 2654435761u, b[i] = ~i;
  std::vector<int32_t> want(1500);
  for (int i = 0; i < 1500; ++i) want[i] = a[i] ^ b[i];
  const void* in[2] = {a.data(), b.data()};
  col::reduce(HAL_DTYPE_INT32, HAL_REDUCE_BXOR, a.data(), in, 2, a.size());
  CHECK(a == want);
}

TEST_CASE("a reduction written to a second output too (ALSO), in place on an input, over block boundaries") {
  // The host communicator's large allreduce reads its own slice from SEND and writes the result to its
  // slot (OUT) and to RECV (ALSO), which is SEND in place.
  for (uint32_t op : {HAL_REDUCE_SUM, HAL_REDUCE_AVG, HAL_REDUCE_MAX}) {
    std::vector<float> a(1300), b(1300), slot(1300, -1.f);
    for (int i = 0; i < 1300; ++i) a[i] = static_cast<float>(i % 17) - 8.f, b[i] = static_cast<float>(i % 5);
    std::vector<float> want(1300);
    for (int i = 0; i < 1300; ++i)
      want[i] = op == HAL_REDUCE_SUM ? a[i] + b[i] : op == HAL_REDUCE_AVG ? (a[i] + b[i]) / 2 : std::max(a[i], b[i]);
    const void* in[2] = {b.data(), a.data()};
    col::reduce(HAL_DTYPE_FLOAT32, op, slot.data(), in, 2, a.size(), a.data());
    CHECK(slot == want);
    CHECK(a == want);
  }
  std::vector<int64_t> x{1, 2, 3}, y{10, 20, 30}, out(3);
  const void* in[2] = {x.data(), y.data()};
  col::reduce(HAL_DTYPE_INT64, HAL_REDUCE_SUM, out.data(), in, 2, 3, nullptr);  // no second output
  CHECK(out == std::vector<int64_t>{11, 22, 33});
}

TEST_CASE("check_reduction refuses bitwise ops on floating and complex dtypes, naming op and dtype") {
  for (uint32_t op : {uint32_t{HAL_REDUCE_BAND}, uint32_t{HAL_REDUCE_BOR}, uint32_t{HAL_REDUCE_BXOR}}) {
    for (uint32_t d : {HAL_DTYPE_FLOAT32, HAL_DTYPE_FLOAT64, HAL_DTYPE_FLOAT16, HAL_DTYPE_BFLOAT16,
                       HAL_DTYPE_COMPLEX64, HAL_DTYPE_COMPLEX128}) {
      uint32_t code = 0;
      const std::string m = refusal(d, op, &code);
      CAPTURE(m);
      CHECK(code == HAL_STATUS_UNSUPPORTED_DTYPE);
      CHECK(m.find(col::reduce_op_name(op)) != std::string::npos);
      CHECK(m.find(hal::common::dtype_name(d)) != std::string::npos);
    }
    for (uint32_t d : {HAL_DTYPE_INT8, HAL_DTYPE_UINT8, HAL_DTYPE_INT16, HAL_DTYPE_UINT16, HAL_DTYPE_INT32,
                       HAL_DTYPE_UINT32, HAL_DTYPE_INT64, HAL_DTYPE_UINT64, HAL_DTYPE_BOOL})
      CHECK(refusal(d, op).empty());
  }
  uint32_t code = 0;
  CHECK(refusal(HAL_DTYPE_INT32, HAL_REDUCE_OP_COUNT_, &code).find("is not a hal_reduce_op_e") != std::string::npos);
  CHECK(code == HAL_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(col::reduce_op_name(HAL_REDUCE_BAND)) == "band");
  CHECK(std::string(col::reduce_op_name(HAL_REDUCE_BOR)) == "bor");
  CHECK(std::string(col::reduce_op_name(HAL_REDUCE_BXOR)) == "bxor");
  CHECK(std::string(col::reduce_op_name(HAL_REDUCE_OP_COUNT_)) == "unknown");
}
