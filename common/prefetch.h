// Prefetching a cache line at any address, in a way no compiler drops.
//
// GCC 12 deletes some __builtin_prefetch calls outright: one guarded by an
// `if` whose block loads members (`if (!slots_.empty())
// __builtin_prefetch(&slots_[i])` compiles to nothing), and one whose
// address is a 128-bit product of a mixed hash (LogRowIndex's home slot),
// guarded or not. Found reading tier_bench's code, where the map and index
// prefetches of the tiered path were missing. The instruction is written
// out instead (an asm volatile is never removed); a prefetch never faults,
// so callers issue it unconditionally, from an empty table's null base
// too, with the address formed as an integer.
#ifndef PS_COMMON_PREFETCH_H_
#define PS_COMMON_PREFETCH_H_

#include <cstddef>
#include <cstdint>

namespace ps {

// Starts loading the line at base + offset for reading.
inline void PrefetchAt(const void* base, size_t offset) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(base) + offset;
#if defined(__x86_64__)
  asm volatile("prefetcht0 (%0)" : : "r"(at));
#elif defined(__aarch64__)
  asm volatile("prfm pldl1keep, [%0]" : : "r"(at));
#else
  __builtin_prefetch(reinterpret_cast<const void*>(at));
#endif
}

}  // namespace ps

#endif  // PS_COMMON_PREFETCH_H_
