// Replays fuzz inputs through LLVMFuzzerTestOneInput without libFuzzer, so
// the seed corpora (and crash reproducers) run under the normal gcc build:
//   replay_main DIR_OR_FILE...
// Every regular file under each directory (recursively) is run once. Fails
// when an argument is missing, or a directory holds no file: an empty corpus
// would make the test pass without testing anything.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  // A copy in its own allocation, so out-of-bounds reads past the end are
  // caught by sanitizers as they would be under libFuzzer.
  std::vector<uint8_t> data(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  size_t total = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    std::error_code ec;
    if (std::filesystem::is_regular_file(arg, ec)) {
      if (!RunFile(arg)) return 1;
      ++total;
      continue;
    }
    if (!std::filesystem::is_directory(arg, ec)) {
      std::fprintf(stderr, "replay: %s is neither a file nor a directory\n", argv[i]);
      return 1;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(arg)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    if (files.empty()) {
      std::fprintf(stderr, "replay: directory %s holds no input\n", argv[i]);
      return 1;
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      if (!RunFile(f)) return 1;
    }
    std::printf("replay: %s: ran %zu inputs\n", argv[i], files.size());
    total += files.size();
  }
  std::printf("replay: ran %zu inputs in total\n", total);
  return 0;
}
