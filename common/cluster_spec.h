// The list of server addresses a job runs with ("host:port,host:port,...").
// Server i of the list is shard i of the hash ring. Value type.
#ifndef PS_COMMON_CLUSTER_SPEC_H_
#define PS_COMMON_CLUSTER_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

struct ClusterSpec {
  std::vector<std::string> servers;

  // Parses a comma-separated list of host:port. Errors: INVALID_ARGUMENT
  // naming the entry and its position (empty list, missing host or port,
  // port not a number in 1..65535, duplicate address).
  static absl::StatusOr<ClusterSpec> Parse(absl::string_view spec);

  std::string ToString() const;
};

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_SPEC_H_
