#include "runtime/sha256.hpp"

#include <openssl/evp.h>

#include "hal/runtime/error.hpp"

namespace hal::detail {

std::array<uint8_t, 32> sha256(const void* data, size_t size) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  if (EVP_Digest(data, size, out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size())
    throw Error(HAL_STATUS_INTERNAL, "sha256: OpenSSL's EVP_Digest failed");
  return out;
}

std::string hex(const uint8_t* digest, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[digest[i] >> 4];
    out += kDigits[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex(const void* data, size_t size) {
  const auto digest = sha256(data, size);
  return hex(digest.data(), digest.size());
}

}  // namespace hal::detail
