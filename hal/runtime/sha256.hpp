// libhal internal: SHA-256 (OpenSSL) of bytes, and digests as hex (the
// loader's plugin pins, graph hashes and checksums, the compile cache keys).
#ifndef HAL_RUNTIME_SHA256_HPP_
#define HAL_RUNTIME_SHA256_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hal::detail {

// The 32-byte SHA-256 of DATA[0, SIZE). Thread-safe.
std::array<uint8_t, 32> sha256(const void* data, size_t size);
// DIGEST as lowercase hex.
std::string hex(const uint8_t* digest, size_t size);
// hex(sha256(DATA, SIZE)).
std::string sha256_hex(const void* data, size_t size);

}  // namespace hal::detail

#endif  // HAL_RUNTIME_SHA256_HPP_
