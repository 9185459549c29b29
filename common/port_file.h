// Port files: how a process tells its launcher which port it bound.
#ifndef PS_COMMON_PORT_FILE_H_
#define PS_COMMON_PORT_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace ps {

// Writes `port` and a newline to `path` atomically (a reader sees all or
// nothing), through a temporary name unique to this process, so that two
// processes writing one path do not collide. `flag` ("--port_file") names
// the path in errors (INTERNAL).
absl::Status WritePortFile(const std::string& path, int port, const char* flag);

}  // namespace ps

#endif  // PS_COMMON_PORT_FILE_H_
