// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected; as in iSCSI, ext4
// metadata and LevelDB): the x86-64 SSE4.2 and AArch64 CRC32 instructions
// when the CPU has them (chosen once, at first use), else a table.
// Thread-safe.
#ifndef PS_COMMON_CRC32C_H_
#define PS_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace ps {

// The CRC-32C of n bytes at p, continuing `crc` (the CRC of the bytes
// before them; 0 for none): Crc32c(b, m, Crc32c(a, n)) is the CRC of a's n
// bytes followed by b's m.
uint32_t Crc32c(const char* p, size_t n, uint32_t crc = 0);

namespace crc32c_internal {
// The two ways, for tests that compare them (Hardware: false when the CPU
// lacks the instruction, and *crc is unchanged).
uint32_t Portable(const char* p, size_t n, uint32_t crc);
bool Hardware(const char* p, size_t n, uint32_t* crc);
}  // namespace crc32c_internal

}  // namespace ps

#endif  // PS_COMMON_CRC32C_H_
