// Directories for a test's files, under $TEST_TMPDIR (which Bazel creates
// empty for each test and deletes afterwards; /tmp when run outside Bazel).
// Every call gets a directory of its own, so tests, shards and repeated runs
// never meet. Nothing is removed here: Bazel cleans $TEST_TMPDIR. Test-only;
// thread-safe.
#ifndef PS_TESTS_TEST_UTIL_TEMP_DIR_H_
#define PS_TESTS_TEST_UTIL_TEMP_DIR_H_

#include <string>

#include "absl/strings/string_view.h"

namespace ps {

// $TEST_TMPDIR, or /tmp when it is unset or empty.
std::string TestTmpDir();

// A fresh, empty directory <TestTmpDir()>/<name>.XXXXXX (mkdtemp), unique
// per call. When it cannot be created the test fails (ADD_FAILURE) and the
// path is returned anyway.
std::string MakeTestDir(absl::string_view name);

// A path nothing is at yet, for code that creates its own directory (a
// checkpoint root): <MakeTestDir(name)>/root. Unique per call.
std::string TestRoot(absl::string_view name);

}  // namespace ps

#endif  // PS_TESTS_TEST_UTIL_TEMP_DIR_H_
