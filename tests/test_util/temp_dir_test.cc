#include "tests/test_util/temp_dir.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace ps {
namespace {

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

TEST(TempDirTest, EachCallGetsAnEmptyDirectoryOfItsOwnUnderTestTmpDir) {
  const std::string a = MakeTestDir("same"), b = MakeTestDir("same");
  EXPECT_NE(a, b);
  for (const std::string& dir : {a, b}) {
    EXPECT_TRUE(StartsWith(dir, TestTmpDir() + "/same.")) << dir;
    EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir;
  }
}

TEST(TempDirTest, RootsAreFreshPathsWithNothingThereYet) {
  const std::string a = TestRoot("root"), b = TestRoot("root");
  EXPECT_NE(a, b);
  for (const std::string& root : {a, b}) {
    EXPECT_TRUE(StartsWith(root, TestTmpDir() + "/root.")) << root;
    EXPECT_NE(::access(root.c_str(), F_OK), 0) << root << " exists";
    EXPECT_TRUE(std::filesystem::create_directory(root)) << root;
  }
}

}  // namespace
}  // namespace ps
