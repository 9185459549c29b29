// AlignedVector: a std::vector whose data starts on a 64-byte boundary (a
// cache line, and the widest vector register). Vectorized loops (Eigen's,
// the optimizer's) treat a buffer's unaligned head apart from its body, so
// where a buffer lands in memory can change the order of a sum and so the
// last bits of a result. With buffers aligned, the same inputs give the
// same bits in every process and thread: what a bit-identical BSP run
// (ps_worker --bsp_reduce) rests on.
#ifndef PS_COMMON_ALIGNED_VECTOR_H_
#define PS_COMMON_ALIGNED_VECTOR_H_

#include <cstddef>
#include <new>
#include <vector>

namespace ps {

inline constexpr std::size_t kVectorAlignment = 64;

template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kVectorAlignment)));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(kVectorAlignment)); }
  template <typename U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const AlignedAllocator<U>&) const {
    return false;
  }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace ps

#endif  // PS_COMMON_ALIGNED_VECTOR_H_
