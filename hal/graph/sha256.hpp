// libhal internal: SHA-256 (OpenSSL) of bytes, as hex.
#ifndef HAL_GRAPH_SHA256_HPP_
#define HAL_GRAPH_SHA256_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hal::graph_detail {

// The 32-byte SHA-256 of DATA[0, SIZE). Thread-safe.
std::array<uint8_t, 32> sha256(const void* data, size_t size);
// DIGEST as lowercase hex.
std::string hex(const uint8_t* digest, size_t size);

}  // namespace hal::graph_detail

#endif  // HAL_GRAPH_SHA256_HPP_
