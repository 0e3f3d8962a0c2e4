// HAL C++ SDK, kernel helpers: the catalog's counter-based random numbers
// (Philox4x32-10, Salmon et al., SC'11), so every plugin produces the same
// values for the same (seed, offset). The mapping from (seed, offset, element)
// to a value is specified in sdk/catalog/ops/random.toml; this header is that
// specification in code. Header-only, no intrinsics; its core (the rounds and
// which words feed which element) is portable C that device kernels compile
// from kPortableSource, so host and device plugins share one definition.
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

typedef uint32_t hal_philox_u32;
typedef uint64_t hal_philox_u64;

// The stream and its element mapping in portable C: the code inside
// HAL_PHILOX_PORTABLE(...) is valid C++17 and OpenCL C (C99 with the two
// typedefs above; kOpenClTypedefs gives them to OpenCL C). It is compiled
// here for host code and kept as text in kPortableSource for device
// compilers, so the CPU plugin and device plugins (the OpenCL plugin's
// kernels) use one definition of which words feed which element.
#define HAL_PHILOX_PORTABLE(...) \
  __VA_ARGS__                    \
  inline constexpr const char kPortableSource[] = #__VA_ARGS__;

HAL_PHILOX_PORTABLE(
    /* Philox4x32-10 of N counters at once, in place: counter B is (C0[B],
       C1[B], C2[B], C3[B]), the key (K0, K1). */
    static inline void hal_philox_rounds(int n, hal_philox_u32* c0, hal_philox_u32* c1, hal_philox_u32* c2,
                                         hal_philox_u32* c3, hal_philox_u32 k0, hal_philox_u32 k1) {
      for (int round = 0; round < 10; ++round) {
        for (int b = 0; b < n; ++b) {
          hal_philox_u64 p0 = (hal_philox_u64)0xD2511F53u * c0[b], p1 = (hal_philox_u64)0xCD9E8D57u * c2[b];
          hal_philox_u32 n0 = (hal_philox_u32)(p1 >> 32) ^ c1[b] ^ k0;
          hal_philox_u32 n2 = (hal_philox_u32)(p0 >> 32) ^ c3[b] ^ k1;
          c1[b] = (hal_philox_u32)p1;
          c3[b] = (hal_philox_u32)p0;
          c0[b] = n0;
          c2[b] = n2;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
    }

    /* Block BLOCK of stream (SEED, OFFSET), i.e. its words 4·BLOCK .. 4·BLOCK + 3,
       into W: counter OFFSET + BLOCK as (lo32, hi32, 0, 0), key (lo32, hi32) of SEED. */
    static inline void hal_philox_block(hal_philox_u64 seed, hal_philox_u64 offset, hal_philox_u64 block,
                                        hal_philox_u32* w) {
      hal_philox_u64 counter = offset + block;
      w[0] = (hal_philox_u32)counter;
      w[1] = (hal_philox_u32)(counter >> 32);
      w[2] = 0;
      w[3] = 0;
      hal_philox_rounds(1, w, w + 1, w + 2, w + 3, (hal_philox_u32)seed, (hal_philox_u32)(seed >> 32));
    }

    /* Element I takes words [I·W, I·W + W) of the stream, W = 2 when WIDE
       (float64), else 1. */
    static inline int hal_philox_words_per_element(int wide) { return wide ? 2 : 1; }

    /* The uniform in [0, 1) of an element from its words: the top BITS (<= 32)
       bits of its word HI, or (WIDE) the top 53 bits of HI:LO, its first word
       high; exact in double, never 1. */
    static inline double hal_philox_uniform(hal_philox_u32 hi, hal_philox_u32 lo, int wide, int bits) {
      if (wide) return (double)((((hal_philox_u64)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
      return (double)(hi >> (32 - bits)) * (1.0 / (double)((hal_philox_u64)1 << bits));
    }

    /* The uniforms of the elements whose words are block BLOCK's: U[k] is
       element E·BLOCK + k for k < E, E = 4 / words per element (returned). */
    static inline int hal_philox_block_uniforms(hal_philox_u64 seed, hal_philox_u64 offset, hal_philox_u64 block,
                                                int wide, int bits, double* u) {
      hal_philox_u32 w[4];
      hal_philox_block(seed, offset, block, w);
      int per = hal_philox_words_per_element(wide), e = 4 / per;
      for (int k = 0; k < e; ++k) u[k] = hal_philox_uniform(w[k * per], w[k * per + per - 1], wide, bits);
      return e;
    })

#undef HAL_PHILOX_PORTABLE

// OpenCL C typedefs kPortableSource needs (prepend them; the uniforms are
// double, so the program needs cl_khr_fp64).
inline constexpr const char kOpenClTypedefs[] = "typedef uint hal_philox_u32;\ntypedef ulong hal_philox_u64;\n";

using Block = std::array<uint32_t, 4>;

// Philox4x32-10 of the 128-bit counter CTR under the 64-bit key KEY.
inline Block philox4x32_10(Block ctr, std::array<uint32_t, 2> key) {
  hal_philox_rounds(1, &ctr[0], &ctr[1], &ctr[2], &ctr[3], key[0], key[1]);
  return ctr;
}

// Block COUNTER of stream SEED: counter (lo32, hi32, 0, 0), key (lo32, hi32).
inline Block block(uint64_t counter, uint64_t seed) {
  Block w;
  hal_philox_block(seed, counter, 0, w.data());
  return w;
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
      hal_philox_rounds(kBatch, c0, c1, c2, c3, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
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
inline double uniform_bits(uint32_t word, int bits) { return hal_philox_uniform(word, 0, 0, bits); }
// [0, 1) with 53 bits from two words (float64): HI's bits above LO's.
inline double uniform_53(uint32_t hi, uint32_t lo) { return hal_philox_uniform(hi, lo, 1, 53); }
// Bits of the uniform op's values per dtype (float64 uses uniform_53).
inline int uniform_bits_for(uint32_t dtype) {
  switch (dtype) {
    case HAL_DTYPE_FLOAT16: return 11;
    case HAL_DTYPE_BFLOAT16: return 8;
    default: return 24;
  }
}
// Words one element of DTYPE consumes: 2 for float64, else 1.
inline uint64_t words_per_element(uint32_t dtype) {
  return static_cast<uint64_t>(hal_philox_words_per_element(dtype == HAL_DTYPE_FLOAT64));
}

// Calls F(i, u) for the elements i in [BEGIN, END): u in [0, 1) from word i
// (BITS bits) or, when WIDE (float64), from words 2i (high) and 2i+1 (low).
template <class F>
inline void for_each_uniform(uint64_t seed, uint64_t offset, bool wide, int bits, uint64_t begin, uint64_t end,
                             F&& f) {
  const uint64_t per = static_cast<uint64_t>(hal_philox_words_per_element(wide));
  if (per == 1) {
    for_each_word(seed, offset, begin, end, [&](uint64_t w, uint32_t x) { f(w, hal_philox_uniform(x, 0, 0, bits)); });
    return;
  }
  uint32_t hi = 0;
  for_each_word(seed, offset, per * begin, per * end, [&](uint64_t w, uint32_t x) {
    if (w % per == 0) hi = x;
    else f(w / per, hal_philox_uniform(hi, x, 1, 53));
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
