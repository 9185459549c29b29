// Reading a file through a read-only mapping without dying of a page the
// kernel cannot read: the kernel signals SIGBUS for such a page (the disk
// failed, or the file was cut short under the mapping), which would kill
// the server with every row of its cache. CopyFromMapping catches it on
// its own thread and returns EIO instead (the log store's reads,
// server/store/log_segments.h). Thread-safe.
//
// CatchMappedReadFaults installs a SIGBUS handler for the process, once
// (SA_NODEFER, so
// that leaving it by siglongjmp leaves the signal unblocked and no system
// call is made a copy); a SIGBUS outside a copy goes to the handler there
// was before, or kills the process as it would have. A handler installed
// later for SIGBUS replaces this one.
#ifndef PS_SERVER_STORE_MAPPED_COPY_H_
#define PS_SERVER_STORE_MAPPED_COPY_H_

#include <cstddef>

namespace ps {

// Installs the handler (the first call; thread-safe); false when it could
// not be: files are then to be read without mappings.
bool CatchMappedReadFaults();

// Copies n bytes from src (inside a file mapping) to dst; 0, or EIO when a
// page of src could not be read (dst then holds some of the bytes).
// CatchMappedReadFaults must have returned true.
int CopyFromMapping(char* dst, const char* src, size_t n);

}  // namespace ps

#endif  // PS_SERVER_STORE_MAPPED_COPY_H_
