#include "worker/client/table_cache.h"

#include <utility>

#include "common/table_layout.h"

namespace ps {

std::optional<proto::TableDef> TableCache::Definition(const std::string& table) {
  absl::MutexLock lock(&mu_);
  auto it = tables_.find(table);
  if (it == tables_.end()) return std::nullopt;
  return it->second.def;
}

std::optional<TableLayout> TableCache::Layout(const std::string& table) {
  absl::MutexLock lock(&mu_);
  auto it = tables_.find(table);
  if (it == tables_.end()) return std::nullopt;
  return it->second.layout;
}

void TableCache::Add(const std::string& table, const proto::TableDef& def) {
  Known known{def, LayoutOf(def)};
  absl::MutexLock lock(&mu_);
  tables_[table] = std::move(known);
}

}  // namespace ps
