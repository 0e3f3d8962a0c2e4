// The .npy reader/writer.
#include "npy.hpp"

#include <doctest/doctest.h>

#include <cstring>

#include "hal/runtime/error.hpp"

namespace hal::onnx {
namespace {

std::string header(const std::string& dict) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(h.size()));
  out.push_back(0);
  return out + h;
}

TEST_CASE("npy round trip keeps dtype, shape and bytes") {
  HostTensor t{HAL_DTYPE_INT32, {2, 3}, {}};
  for (int32_t i = 0; i < 6; ++i) t.data.insert(t.data.end(), reinterpret_cast<uint8_t*>(&i), reinterpret_cast<uint8_t*>(&i) + 4);
  HostTensor back = npy::parse(npy::serialize(t), "t.npy");
  CHECK(back.dtype == HAL_DTYPE_INT32);
  CHECK(back.shape == t.shape);
  CHECK(back.data == t.data);
  HostTensor scalar{HAL_DTYPE_FLOAT64, {}, std::vector<uint8_t>(8, 0)};
  CHECK(npy::parse(npy::serialize(scalar), "s.npy").shape.empty());
  HostTensor vec{HAL_DTYPE_BOOL, {3}, {1, 0, 1}};
  std::string bytes = npy::serialize(vec);
  CHECK(bytes.find("'descr': '|b1'") != std::string::npos);
  CHECK(bytes.find("'shape': (3,)") != std::string::npos);
  CHECK(bytes.size() % 64 == 3);  // header padded to 64 bytes, then 3 data bytes
  CHECK(npy::parse(header("{'shape': (2,), 'fortran_order': False, 'descr': '<f4', }") + std::string(8, '\0'), "x").shape ==
        std::vector<int64_t>{2});
}

TEST_CASE("malformed npy files are refused naming the file") {
  auto err = [](const std::string& bytes) {
    try {
      npy::parse(bytes, "bad.npy");
    } catch (const Error& e) {
      CHECK(e.code() == HAL_STATUS_INVALID_ARGUMENT);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string data8(8, '\0');
  CHECK(err("PK\x03\x04 not npy at all").find("'bad.npy' is not a valid .npy file: no \\x93NUMPY magic") == 0);
  CHECK(err(header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }") + data8).find("little-endian") != std::string::npos);
  CHECK(err(header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }") + data8).find("Fortran") != std::string::npos);
  CHECK(err(header("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }") + data8).find("no HAL dtype") != std::string::npos);
  CHECK(err(header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }") + data8).find("needs 12") != std::string::npos);
  CHECK(err(header("{'descr': '<f4', 'shape': (2,), }") + data8).find("lacks") != std::string::npos);
  CHECK(err(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}") + data8).find("'extra'") != std::string::npos);
  CHECK(err(header("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }") + data8).find("shape entry") != std::string::npos);
  std::string cut = header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
  CHECK(err(cut.substr(0, 40)).find("runs past the file") != std::string::npos);
  CHECK_THROWS_AS(npy::read("/nonexistent/x.npy"), Error);
}

}  // namespace
}  // namespace hal::onnx
