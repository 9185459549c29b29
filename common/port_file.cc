#include "common/port_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status WritePortFile(const std::string& path, int port, const char* flag) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out) return absl::InternalError(absl::StrCat(flag, "=", path, ": cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(flag, "=", path, ": cannot rename ", tmp));
  }
  return absl::OkStatus();
}

}  // namespace ps
