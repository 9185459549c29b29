// Where a replicated cluster keeps its records in etcd (proto/membership.proto
// says what each holds), and their JSON encoding. Pure functions.
#ifndef PS_COMMON_CLUSTER_KEYS_H_
#define PS_COMMON_CLUSTER_KEYS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"

namespace ps {

// "/paramserver/<cluster>/": every record of the cluster is under it.
inline std::string ClusterPrefix(const std::string& cluster) {
  return absl::StrCat("/paramserver/", cluster, "/");
}
inline std::string RingKey(const std::string& cluster) { return ClusterPrefix(cluster) + "ring"; }
inline std::string MemberKey(const std::string& cluster, uint32_t server) {
  return absl::StrCat(ClusterPrefix(cluster), "members/", server);
}
inline std::string SyncedKey(const std::string& cluster, int shard, uint32_t server) {
  return absl::StrCat(ClusterPrefix(cluster), "synced/", shard, "/", server);
}
inline std::string StuckKey(const std::string& cluster, int shard, uint32_t server) {
  return absl::StrCat(ClusterPrefix(cluster), "stuck/", shard, "/", server);
}
inline std::string ReturningKey(const std::string& cluster, uint32_t server) {
  return absl::StrCat(ClusterPrefix(cluster), "returning/", server);
}
// Operator requests (ps_admin): drain a server, or let it take shards.
inline std::string DrainKey(const std::string& cluster, uint32_t server) {
  return absl::StrCat(ClusterPrefix(cluster), "draining/", server);
}
inline std::string AddKey(const std::string& cluster, uint32_t server) {
  return absl::StrCat(ClusterPrefix(cluster), "adding/", server);
}

inline std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out);
  return out;
}
// INVALID_ARGUMENT naming the key when the value is not the record's JSON.
inline absl::Status FromJson(const std::string& key, const std::string& json,
                             google::protobuf::Message* message) {
  auto status = google::protobuf::util::JsonStringToMessage(json, message);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd key ", key, " does not hold a ", message->GetTypeName(), ": ", status.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_KEYS_H_
