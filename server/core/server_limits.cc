#include "server/core/server_limits.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ps {
namespace {

// The number in the first line of `path`, or 0 when absent or "max".
uint64_t ReadLimit(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return 0;
  uint64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &v)) return 0;
  return v;
}

}  // namespace

uint64_t DefaultMemoryBudget(std::string* why) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t limit = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * page : uint64_t{1} << 32;
  std::string source = "physical memory";
  auto consider = [&](uint64_t v, const char* name) {
    // cgroup v1 reports "no limit" as a huge number.
    if (v > 0 && v < limit) {
      limit = v;
      source = name;
    }
  };
  consider(ReadLimit("/sys/fs/cgroup/memory.max"), "cgroup memory.max");
  consider(ReadLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes"), "cgroup memory limit");
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    consider(static_cast<uint64_t>(rl.rlim_cur), "RLIMIT_AS");
  }
  if (why != nullptr) *why = absl::StrCat("3/4 of ", source, " (", limit >> 20, " MiB)");
  return limit / 4 * 3;
}

absl::Status CheckRequestSize(const char* what, const std::string& table, uint64_t keys,
                              uint64_t bytes, const ServerLimits& limits) {
  if (keys > limits.max_keys_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of table '", table, "' names ", keys, " keys, over the limit of ",
        limits.max_keys_per_request, " per request (ps_server --max_keys_per_request)"));
  }
  if (bytes > limits.max_message_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " of ", keys, " keys of table '", table, "' is ", bytes,
                     " bytes, over this server's message limit of ", limits.max_message_bytes,
                     " bytes (ps_server --max_message_mb); split the request"));
  }
  return absl::OkStatus();
}

}  // namespace ps
