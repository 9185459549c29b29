#include "fuzz/fuzz_util.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "google/protobuf/stubs/logging.h"

namespace ps_fuzz {

void Fail(const char* what) {
  std::fprintf(stderr, "FUZZ INVARIANT BROKEN: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

namespace {

// Protobuf logs every string field with invalid UTF-8 it parses: noise that
// slows fuzzing down. Kept with PS_FUZZ_VERBOSE.
const bool kQuietProtobuf = [] {
  if (std::getenv("PS_FUZZ_VERBOSE") == nullptr) google::protobuf::SetLogHandler(nullptr);
  return true;
}();

}  // namespace

void Note(const char* what, const absl::Status& status) {
  static const bool verbose = std::getenv("PS_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "  %s: %s\n", what, status.ToString().c_str());
}

void Note(const char* what, const std::string& detail) {
  static const bool verbose = std::getenv("PS_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "  %s: %s\n", what, detail.c_str());
}

namespace {

void RemoveScratch() {
  std::error_code ec;
  std::filesystem::remove_all(ScratchDir(), ec);
}

}  // namespace

const std::string& ScratchDir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    if (tmp == nullptr || *tmp == '\0') tmp = std::getenv("TMPDIR");
    if (tmp == nullptr || *tmp == '\0') tmp = "/tmp";
    std::string tmpl = std::string(tmp) + "/ps_fuzz.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) Fail("cannot create a scratch directory");
    auto* d = new std::string(tmpl);
    return d;
  }();
  static const bool registered = [] { return std::atexit(RemoveScratch) == 0; }();
  (void)registered;
  return *dir;
}

std::string WriteScratchFile(const std::string& name, absl::string_view bytes, bool gzip) {
  const std::string path = ScratchDir() + "/" + name;
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f == nullptr) Fail("cannot open the scratch file for gzip");
    if (!bytes.empty() && gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) !=
                              static_cast<int>(bytes.size())) {
      Fail("cannot gzip-write the scratch file");
    }
    if (gzclose(f) != Z_OK) Fail("cannot close the gzip scratch file");
    return path;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) Fail("cannot open the scratch file");
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    Fail("cannot write the scratch file");
  }
  if (std::fclose(f) != 0) Fail("cannot close the scratch file");
  return path;
}

}  // namespace ps_fuzz
