#include "tests/test_util/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ps {

std::string TestTmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

std::string MakeTestDir(absl::string_view name) {
  std::string dir = absl::StrCat(TestTmpDir(), "/", name, ".XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    ADD_FAILURE() << "cannot create a directory " << dir << ": " << std::strerror(errno)
                  << "; is TEST_TMPDIR (" << TestTmpDir() << ") writable?";
  }
  return dir;
}

std::string TestRoot(absl::string_view name) { return MakeTestDir(name) + "/root"; }

}  // namespace ps
