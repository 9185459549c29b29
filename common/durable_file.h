// Files written so that a crash leaves either the old file or the whole new
// one: written under "<name>.tmp", fsynced, renamed to the name, and the
// directory fsynced (checkpoint files, kept replication copies). And whole
// files read back.
#ifndef PS_COMMON_DURABLE_FILE_H_
#define PS_COMMON_DURABLE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// errno as a status naming what was done to `path`: NOT_FOUND for ENOENT,
// INTERNAL otherwise.
absl::Status ErrnoError(absl::string_view what, const std::string& path);

// All of `bytes` to `fd` (retrying short writes and EINTR); errors name `path`.
absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& path);

// fsync of directory `dir` (a rename or a new file in it made durable).
absl::Status SyncDir(const std::string& dir);

// `bytes` to dir/name by the protocol above; on an error the temporary file
// is removed and the old file, if any, stays.
absl::Status WriteFileDurably(const std::string& dir, const std::string& name,
                              absl::string_view bytes);

// The whole file at `path`.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace ps

#endif  // PS_COMMON_DURABLE_FILE_H_
