// TableCache: the definitions of the tables a client created or looked up,
// by name, each kept with its slice layout (derived once, so that the key
// path does not derive it on every call). Owned by PsClient; it only
// remembers, it never asks a server. Thread-safe.
#ifndef PS_WORKER_CLIENT_TABLE_CACHE_H_
#define PS_WORKER_CLIENT_TABLE_CACHE_H_

#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/placement.h"
#include "proto/ps.pb.h"

namespace ps {

class TableCache {
 public:
  // The definition, or the layout, of `table` if it is known.
  std::optional<proto::TableDef> Definition(const std::string& table);
  std::optional<TableLayout> Layout(const std::string& table);
  // Remembers `def` as the definition of `table`, replacing any.
  void Add(const std::string& table, const proto::TableDef& def);

 private:
  struct Known {
    proto::TableDef def;
    TableLayout layout;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Known> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_TABLE_CACHE_H_
