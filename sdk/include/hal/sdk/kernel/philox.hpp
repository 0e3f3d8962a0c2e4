// HAL C++ SDK, kernel helpers: the catalog's counter-based random numbers
// (Philox4x32-10, Salmon et al., SC'11), so every plugin produces the same
// values for the same (seed, offset). The mapping from (seed, offset, element)
// to a value is specified in sdk/catalog/ops/random.toml; this header is that
// specification in code. Header-only host code, no intrinsics.
//
//   The stream of 32-bit words of (seed, offset): word W is lane W % 4 of
//   philox4x32_10(counter = offset + W / 4, key = seed), where the 64-bit
//   counter fills counter words 0 (low half) and 1 (high half), counter
//   words 2 and 3 are 0, and key = (low, high) halves of seed.
#ifndef HAL_SDK_KERNEL_PHILOX_HPP_
#define HAL_SDK_KERNEL_PHILOX_HPP_

#include <array>
#include <cmath>
#include <cstdint>

#include "hal/hal.h"

namespace hal::sdk::kernel::philox {

using Block = std::array<uint32_t, 4>;

// Philox4x32-10 of the 128-bit counter CTR under the 64-bit key KEY.
inline Block philox4x32_10(Block ctr, std::array<uint32_t, 2> key) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// Block COUNTER of stream SEED: counter (lo32, hi32, 0, 0), key (lo32, hi32).
inline Block block(uint64_t counter, uint64_t seed) {
  return philox4x32_10({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// Calls F(w, word) for the words w in [BEGIN, END) of stream (SEED, OFFSET),
// in order, computing each block once (8 blocks at a time where it can, so
// the rounds vectorise).
template <class F>
inline void for_each_word(uint64_t seed, uint64_t offset, uint64_t begin, uint64_t end, F&& f) {
  constexpr int kBatch = 8;
  uint64_t w = begin;
  while (w < end) {
    if (w % 4 == 0 && end - w >= 4 * kBatch) {
      uint32_t c0[kBatch], c1[kBatch], c2[kBatch], c3[kBatch];
      for (int b = 0; b < kBatch; ++b) {
        uint64_t counter = offset + w / 4 + static_cast<uint64_t>(b);
        c0[b] = static_cast<uint32_t>(counter);
        c1[b] = static_cast<uint32_t>(counter >> 32);
        c2[b] = c3[b] = 0;
      }
      uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
      for (int round = 0; round < 10; ++round) {
        for (int b = 0; b < kBatch; ++b) {
          uint64_t p0 = uint64_t{0xD2511F53u} * c0[b], p1 = uint64_t{0xCD9E8D57u} * c2[b];
          uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[b] ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[b] ^ k1;
          c1[b] = static_cast<uint32_t>(p1);
          c3[b] = static_cast<uint32_t>(p0);
          c0[b] = n0;
          c2[b] = n2;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
      for (int b = 0; b < kBatch; ++b, w += 4) {
        f(w, c0[b]);
        f(w + 1, c1[b]);
        f(w + 2, c2[b]);
        f(w + 3, c3[b]);
      }
      continue;
    }
    Block blk = block(offset + w / 4, seed);
    for (uint64_t lane = w % 4; lane < 4 && w < end; ++lane, ++w) f(w, blk[lane]);
  }
}

// [0, 1) from the top BITS (<= 32) bits of a word: 24 for float32, 11 for
// float16, 8 for bfloat16 (exactly representable, so never rounds up to 1).
inline double uniform_bits(uint32_t word, int bits) {
  return static_cast<double>(word >> (32 - bits)) * std::ldexp(1.0, -bits);
}
// [0, 1) with 53 bits from two words (float64): HI's bits above LO's.
inline double uniform_53(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((uint64_t{hi} << 32) | lo) >> 11) * 0x1p-53;
}
// Bits of the uniform op's values per dtype (float64 uses uniform_53).
inline int uniform_bits_for(uint32_t dtype) {
  switch (dtype) {
    case HAL_DTYPE_FLOAT16: return 11;
    case HAL_DTYPE_BFLOAT16: return 8;
    default: return 24;
  }
}
// Words one element of DTYPE consumes: 2 for float64, else 1.
inline uint64_t words_per_element(uint32_t dtype) { return dtype == HAL_DTYPE_FLOAT64 ? 2 : 1; }

// Calls F(i, u) for the elements i in [BEGIN, END): u in [0, 1) from word i
// (BITS bits) or, when WIDE (float64), from words 2i (high) and 2i+1 (low).
template <class F>
inline void for_each_uniform(uint64_t seed, uint64_t offset, bool wide, int bits, uint64_t begin, uint64_t end,
                             F&& f) {
  if (!wide) {
    const double scale = std::ldexp(1.0, -bits);
    const int shift = 32 - bits;
    for_each_word(seed, offset, begin, end,
                  [&](uint64_t w, uint32_t x) { f(w, static_cast<double>(x >> shift) * scale); });
    return;
  }
  uint32_t hi = 0;
  for_each_word(seed, offset, 2 * begin, 2 * end, [&](uint64_t w, uint32_t x) {
    if (w % 2 == 0) hi = x;
    else f(w / 2, uniform_53(hi, x));
  });
}

// Box-Muller of one pair: U1 in (0, 1], U2 in [0, 1) -> two standard normals.
template <class T>
inline void box_muller(T u1, T u2, T& z0, T& z1) {
  T r = std::sqrt(T(-2) * std::log(u1));
  T theta = T(6.283185307179586) * u2;
  z0 = r * std::cos(theta);
  z1 = r * std::sin(theta);
}

}  // namespace hal::sdk::kernel::philox

#endif  // HAL_SDK_KERNEL_PHILOX_HPP_
