#include "common/cluster_spec.h"

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ps {

absl::StatusOr<ClusterSpec> ClusterSpec::Parse(absl::string_view spec) {
  ClusterSpec result;
  if (absl::StripAsciiWhitespace(spec).empty()) {
    return absl::InvalidArgumentError("cluster spec is empty: expected host:port[,host:port...]");
  }
  absl::flat_hash_set<std::string> seen;
  int position = 0;
  for (absl::string_view entry : absl::StrSplit(spec, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const size_t colon = entry.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster spec entry ", position, " '", entry, "': expected host:port"));
    }
    int port = 0;
    if (!absl::SimpleAtoi(entry.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("cluster spec entry ", position, " '", entry,
                                                     "': port must be a number in 1..65535"));
    }
    std::string address(entry);
    if (!seen.insert(address).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster spec entry ", position, " '", entry, "' appears twice"));
    }
    result.servers.push_back(std::move(address));
    ++position;
  }
  return result;
}

std::string ClusterSpec::ToString() const { return absl::StrJoin(servers, ","); }

}  // namespace ps
