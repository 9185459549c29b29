// Stable 64-bit hashing shared by servers and workers.
//
// Placement must agree across processes, builds and machines, so these
// functions never depend on absl::Hash (which is seeded per process).
#ifndef PS_COMMON_HASH_H_
#define PS_COMMON_HASH_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace ps {

// SplitMix64's finalizer, in place, on a uint64_t or on each lane of a
// vector of them (the compiler's vector extension; by reference, so that
// no vector is passed by value): one body for Mix64 and Mix64Many.
template <typename T>
inline void Mix64InPlace(T& x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
}

// SplitMix64 finalizer: a bijective mix with good avalanche.
inline uint64_t Mix64(uint64_t x) {
  Mix64InPlace(x);
  return x;
}

// out[i] = Mix64(in[i]) for n keys (in and out may be the same array),
// eight at a time (one 512-bit multiply per step on AVX-512; plain code
// elsewhere): equal to Mix64, bit for bit, on every machine.
inline void Mix64Many(const uint64_t* in, uint64_t* out, size_t n) {
  using Lanes = uint64_t __attribute__((vector_size(64)));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Lanes x;
    __builtin_memcpy(&x, in + i, sizeof x);
    Mix64InPlace(x);
    __builtin_memcpy(out + i, &x, sizeof x);
  }
  for (; i < n; ++i) out[i] = Mix64(in[i]);
}

// FNV-1a over the bytes, then Mix64.
inline uint64_t HashString(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix64(h);
}

// Combines two hashes (order matters).
inline uint64_t HashCombine(uint64_t a, uint64_t b) {
  return Mix64(a ^ (Mix64(b) + 0x632be59bd9b4e019ULL + (a << 6) + (a >> 2)));
}

// The signature of a key list for key-list caching (PsClient and the
// servers compute it alike): a hash of the count and of every key in order,
// never 0 (0 means "no signature" on the wire).
inline uint64_t KeyListSignature(const uint64_t* keys, size_t n) {
  uint64_t h = Mix64(n ^ 0x6b65796c69737473ULL);  // "keylists"
  for (size_t i = 0; i < n; ++i) h = Mix64(h ^ keys[i]) + i;
  return h == 0 ? 1 : h;
}

}  // namespace ps

#endif  // PS_COMMON_HASH_H_
