#include "npy.hpp"

#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "hal/common/dtype.hpp"
#include "hal/runtime/error.hpp"

namespace hal::onnx::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct Descr {
  const char* text;  // without the byte-order character
  hal_dtype_e dtype;
};
constexpr Descr kDescrs[] = {{"f4", HAL_DTYPE_FLOAT32}, {"f8", HAL_DTYPE_FLOAT64}, {"f2", HAL_DTYPE_FLOAT16},
                             {"i1", HAL_DTYPE_INT8},    {"u1", HAL_DTYPE_UINT8},   {"i2", HAL_DTYPE_INT16},
                             {"u2", HAL_DTYPE_UINT16},  {"i4", HAL_DTYPE_INT32},   {"u4", HAL_DTYPE_UINT32},
                             {"i8", HAL_DTYPE_INT64},   {"u8", HAL_DTYPE_UINT64},  {"b1", HAL_DTYPE_BOOL},
                             {"c8", HAL_DTYPE_COMPLEX64}, {"c16", HAL_DTYPE_COMPLEX128}};

[[noreturn]] void bad(const std::string& name, const std::string& why) {
  throw Error(HAL_STATUS_INVALID_ARGUMENT, "'" + name + "' is not a valid .npy file: " + why);
}

// A cursor over the header dict's text.
class Header {
 public:
  Header(const std::string& text, const std::string& name) : s_(text), name_(name) {}
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(name_, std::string("header: expected '") + c + "' at offset " + std::to_string(i_) + " in " + s_);
  }
  std::string quoted() {
    ws();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) bad(name_, "header: expected a string in " + s_);
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string::npos) bad(name_, "header: unterminated string");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }
  std::string word() {
    ws();
    size_t start = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    return s_.substr(start, i_ - start);
  }
  int64_t integer() {
    ws();
    size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (start == i_ || i_ - start > 18) bad(name_, "header: bad shape entry in " + s_);
    return std::stoll(s_.substr(start, i_ - start));
  }
  bool done() {
    ws();
    return i_ == s_.size();
  }

 private:
  const std::string& s_;
  const std::string& name_;
  size_t i_ = 0;
};

}  // namespace

HostTensor parse(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) bad(name, "no \\x93NUMPY magic");
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad(name, "truncated header length");
    for (int k = 3; k >= 0; --k) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[8 + k]);
    start = 12;
  } else {
    bad(name, "format version " + std::to_string(major) + " (only 1, 2, 3)");
  }
  if (header_len > bytes.size() - start) bad(name, "header length " + std::to_string(header_len) + " runs past the file");
  std::string text = bytes.substr(start, header_len);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.pop_back();
  Header h(text, name);
  HostTensor t;
  bool have_descr = false, have_order = false, have_shape = false;
  h.expect('{');
  while (!h.eat('}')) {
    std::string key = h.quoted();
    h.expect(':');
    if (key == "descr" && !have_descr) {
      std::string d = h.quoted();
      if (d.size() < 2) bad(name, "descr '" + d + "'");
      char order = d[0];
      std::string code = d.substr(1);
      bool one_byte = code == "i1" || code == "u1" || code == "b1";
      if (order == '>' || (order != '<' && order != '|' && order != '=') || (order == '|' && !one_byte))
        bad(name, "descr '" + d + "' (only little-endian)");
      for (const Descr& x : kDescrs)
        if (code == x.text) t.dtype = x.dtype;
      if (t.dtype == HAL_DTYPE_INVALID) bad(name, "descr '" + d + "' has no HAL dtype");
      have_descr = true;
    } else if (key == "fortran_order" && !have_order) {
      std::string w = h.word();
      if (w == "True") bad(name, "Fortran order (only C order)");
      if (w != "False") bad(name, "fortran_order '" + w + "'");
      have_order = true;
    } else if (key == "shape" && !have_shape) {
      h.expect('(');
      while (!h.eat(')')) {
        t.shape.push_back(h.integer());
        if (!h.eat(',')) {
          h.expect(')');
          break;
        }
      }
      have_shape = true;
    } else {
      bad(name, "header key '" + key + "' (unknown or repeated)");
    }
    if (!h.eat(',')) {
      h.expect('}');
      break;
    }
  }
  if (!h.done()) bad(name, "text after the header dict");
  if (!have_descr || !have_order || !have_shape) bad(name, "header lacks descr, fortran_order or shape");
  uint64_t n = common::dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d != 0 && n > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) bad(name, "shape too large");
    n *= static_cast<uint64_t>(d);
  }
  size_t data_at = start + header_len;
  if (bytes.size() - data_at != n)
    bad(name, "data is " + std::to_string(bytes.size() - data_at) + " bytes but the shape needs " + std::to_string(n));
  t.data.assign(bytes.begin() + static_cast<long>(data_at), bytes.end());
  return t;
}

HostTensor read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(HAL_STATUS_NOT_FOUND, "cannot open .npy file '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse(bytes, path);
}

std::string serialize(const HostTensor& t) {
  const char* code = nullptr;
  for (const Descr& x : kDescrs)
    if (x.dtype == t.dtype) code = x.text;
  if (!code) throw Error(HAL_STATUS_INVALID_ARGUMENT, std::string("dtype ") + common::dtype_name(t.dtype) + " has no .npy descr");
  std::ostringstream dict;
  bool one_byte = std::strlen(code) == 2 && code[1] == '1';
  dict << "{'descr': '" << (one_byte ? '|' : '<') << code << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape.size(); ++i) dict << t.shape[i] << (t.shape.size() == 1 || i + 1 < t.shape.size() ? "," : "") << (i + 1 < t.shape.size() ? " " : "");
  dict << "), }";
  std::string header = dict.str();
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

void write(const std::string& path, const HostTensor& t) {
  std::string bytes = serialize(t);
  std::ofstream out(path, std::ios::binary);
  if (!out || !out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw Error(HAL_STATUS_INVALID_ARGUMENT, "cannot write .npy file '" + path + "'");
}

}  // namespace hal::onnx::npy
