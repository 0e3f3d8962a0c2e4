#include "tensor_proto.hpp"

#include <cstring>
#include <limits>

#include "external_data.hpp"
#include "hal/common/dtype.hpp"
#include "hal/common/op_schema.hpp"
#include "hal/runtime/error.hpp"

namespace hal::onnx {

namespace {
using TP = ::onnx::TensorProto;

struct DtypeRow {
  int32_t onnx;
  hal_dtype_e hal;
  const char* name;
};
constexpr DtypeRow kDtypes[] = {
    {TP::FLOAT, HAL_DTYPE_FLOAT32, "FLOAT"},        {TP::UINT8, HAL_DTYPE_UINT8, "UINT8"},
    {TP::INT8, HAL_DTYPE_INT8, "INT8"},             {TP::UINT16, HAL_DTYPE_UINT16, "UINT16"},
    {TP::INT16, HAL_DTYPE_INT16, "INT16"},          {TP::INT32, HAL_DTYPE_INT32, "INT32"},
    {TP::INT64, HAL_DTYPE_INT64, "INT64"},          {TP::STRING, HAL_DTYPE_INVALID, "STRING"},
    {TP::BOOL, HAL_DTYPE_BOOL, "BOOL"},             {TP::FLOAT16, HAL_DTYPE_FLOAT16, "FLOAT16"},
    {TP::DOUBLE, HAL_DTYPE_FLOAT64, "DOUBLE"},      {TP::UINT32, HAL_DTYPE_UINT32, "UINT32"},
    {TP::UINT64, HAL_DTYPE_UINT64, "UINT64"},       {TP::COMPLEX64, HAL_DTYPE_COMPLEX64, "COMPLEX64"},
    {TP::COMPLEX128, HAL_DTYPE_COMPLEX128, "COMPLEX128"}, {TP::BFLOAT16, HAL_DTYPE_BFLOAT16, "BFLOAT16"},
    // Newer than libonnx 1.12's enum: named only, for messages.
    {17, HAL_DTYPE_INVALID, "FLOAT8E4M3FN"},        {18, HAL_DTYPE_INVALID, "FLOAT8E4M3FNUZ"},
    {19, HAL_DTYPE_INVALID, "FLOAT8E5M2"},          {20, HAL_DTYPE_INVALID, "FLOAT8E5M2FNUZ"},
    {21, HAL_DTYPE_INVALID, "UINT4"},               {22, HAL_DTYPE_INVALID, "INT4"},
};
}  // namespace

hal_dtype_e dtype_from_onnx(int32_t elem_type) noexcept {
  for (const DtypeRow& r : kDtypes)
    if (r.onnx == elem_type) return r.hal;
  return HAL_DTYPE_INVALID;
}

int32_t dtype_to_onnx(hal_dtype_e dtype) noexcept {
  for (const DtypeRow& r : kDtypes)
    if (r.hal == dtype && dtype != HAL_DTYPE_INVALID) return r.onnx;
  return 0;
}

std::string onnx_dtype_name(int32_t elem_type) {
  for (const DtypeRow& r : kDtypes)
    if (r.onnx == elem_type) return r.name;
  return "type " + std::to_string(elem_type);
}

namespace detail {

std::string shape_text(const std::vector<int64_t>& shape) {
  return common::shape_string(shape.data(), static_cast<int>(shape.size()));
}

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": negative dim " + std::to_string(d));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": element count overflows int64");
    n *= d;
  }
  return n;
}

namespace {

// Copies the typed field's COUNT values into OUT's elements, each narrowed
// (or bit-cast for 16-bit floats, which int32_data holds as bits) to T.
template <class T, class Field>
void narrow_into(const Field& field, std::vector<uint8_t>& out) {
  for (int i = 0; i < field.size(); ++i) {
    T v = static_cast<T>(field.Get(i));
    std::memcpy(out.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

HostTensor tensor_from_proto(const TP& tensor, const std::string& external_root, const std::string& what) {
  HostTensor t;
  t.dtype = dtype_from_onnx(tensor.data_type());
  if (t.dtype == HAL_DTYPE_INVALID)
    throw Error(HAL_STATUS_INVALID_ARGUMENT,
                what + ": data type " + onnx_dtype_name(tensor.data_type()) + " has no HAL dtype");
  t.shape.assign(tensor.dims().begin(), tensor.dims().end());
  int64_t numel = checked_numel(t.shape, what);
  size_t elem = common::dtype_size(t.dtype);
  if (static_cast<uint64_t>(numel) > std::numeric_limits<uint64_t>::max() / elem)
    throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": byte size overflows");
  uint64_t bytes = static_cast<uint64_t>(numel) * elem;
  auto size_mismatch = [&](const std::string& field, uint64_t got, const char* unit) {
    throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": " + field + " holds " + std::to_string(got) + " " + unit +
                                                 " but shape " + shape_text(t.shape) + " of " +
                                                 onnx_dtype_name(tensor.data_type()) + " needs " +
                                                 std::to_string(unit[0] == 'b' ? bytes : static_cast<uint64_t>(numel)));
  };

  if (tensor.data_location() == TP::EXTERNAL) {
    std::string location;
    uint64_t offset = 0;
    std::optional<uint64_t> length;
    for (const auto& kv : tensor.external_data()) {
      auto parse = [&](const std::string& v) -> uint64_t {
        try {
          size_t used = 0;
          unsigned long long x = std::stoull(v, &used);
          if (used == v.size() && !v.empty() && v[0] != '-') return x;
        } catch (const std::exception&) {
        }
        throw Error(HAL_STATUS_INVALID_ARGUMENT,
                    what + ": external data '" + kv.key() + "' is not a byte count: '" + v + "'");
      };
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = parse(kv.value());
      else if (kv.key() == "length") length = parse(kv.value());
    }
    std::string name = tensor.name().empty() ? what : tensor.name();
    t.data = read_external_data(external_root, location, offset, length, name);
    if (t.data.size() != bytes) size_mismatch("external data", t.data.size(), "bytes");
    return t;
  }
  if (tensor.has_raw_data()) {
    const std::string& raw = tensor.raw_data();
    if (raw.size() != bytes) size_mismatch("raw_data", raw.size(), "bytes");
    t.data.assign(raw.begin(), raw.end());
    return t;
  }
  auto check_count = [&](const std::string& field, int count, int64_t per_element) {
    if (static_cast<uint64_t>(count) != static_cast<uint64_t>(numel) * static_cast<uint64_t>(per_element))
      size_mismatch(field, static_cast<uint64_t>(count), "values");
    t.data.assign(bytes, 0);  // after the check: the count bounds the allocation
  };
  switch (tensor.data_type()) {
    case TP::FLOAT:
    case TP::COMPLEX64:
      check_count("float_data", tensor.float_data_size(), tensor.data_type() == TP::FLOAT ? 1 : 2);
      narrow_into<float>(tensor.float_data(), t.data);
      break;
    case TP::DOUBLE:
    case TP::COMPLEX128:
      check_count("double_data", tensor.double_data_size(), tensor.data_type() == TP::DOUBLE ? 1 : 2);
      narrow_into<double>(tensor.double_data(), t.data);
      break;
    case TP::INT64:
      check_count("int64_data", tensor.int64_data_size(), 1);
      narrow_into<int64_t>(tensor.int64_data(), t.data);
      break;
    case TP::UINT32:
    case TP::UINT64:
      check_count("uint64_data", tensor.uint64_data_size(), 1);
      if (tensor.data_type() == TP::UINT32) narrow_into<uint32_t>(tensor.uint64_data(), t.data);
      else narrow_into<uint64_t>(tensor.uint64_data(), t.data);
      break;
    case TP::INT32: check_count("int32_data", tensor.int32_data_size(), 1); narrow_into<int32_t>(tensor.int32_data(), t.data); break;
    case TP::INT16: check_count("int32_data", tensor.int32_data_size(), 1); narrow_into<int16_t>(tensor.int32_data(), t.data); break;
    case TP::INT8: check_count("int32_data", tensor.int32_data_size(), 1); narrow_into<int8_t>(tensor.int32_data(), t.data); break;
    case TP::UINT8: check_count("int32_data", tensor.int32_data_size(), 1); narrow_into<uint8_t>(tensor.int32_data(), t.data); break;
    case TP::BOOL: check_count("int32_data", tensor.int32_data_size(), 1); narrow_into<uint8_t>(tensor.int32_data(), t.data); break;
    case TP::UINT16:
    case TP::FLOAT16:
    case TP::BFLOAT16:  // int32_data holds the 16 bits
      check_count("int32_data", tensor.int32_data_size(), 1);
      narrow_into<uint16_t>(tensor.int32_data(), t.data);
      break;
    default:
      throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": data type " + onnx_dtype_name(tensor.data_type()) +
                                                   " has no typed field HAL reads");
  }
  if (tensor.data_type() == TP::BOOL)
    for (uint8_t& b : t.data) b = b != 0;
  return t;
}

}  // namespace detail
}  // namespace hal::onnx
