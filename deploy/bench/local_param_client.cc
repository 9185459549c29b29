#include "deploy/bench/local_param_client.h"

namespace ps {

absl::Status LocalParamClient::CreateTable(const proto::TableDef& def) {
  return store_.CreateTable(def).status();
}

absl::Status LocalParamClient::Pull(absl::Span<const PullRange> ops, uint64_t clock,
                                    PullInfo* info) {
  Versions* versions = info != nullptr ? &info->versions : nullptr;
  if (info != nullptr) {
    info->versions.assign(ops.size(), 0);
    info->params_clock = clock;  // one process: always current
    info->waited = absl::ZeroDuration();
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const PullRange& op = ops[i];
    auto def = store_.GetTableDef(op.table);
    if (!def.ok()) return def.status();
    if (op.out.size() != (op.end - op.begin) * def->width()) {
      return absl::InvalidArgumentError("pull output span does not match the range and width");
    }
    auto version = store_.Pull(op.table, KeySpec::Single(op.begin, op.end), [&op](size_t bytes) {
      (void)bytes;  // == op.out.size() * sizeof(float), checked above
      return reinterpret_cast<char*>(op.out.data());
    });
    if (!version.ok()) return version.status();
    if (versions != nullptr) (*versions)[i] = *version;
  }
  return absl::OkStatus();
}

absl::Status LocalParamClient::Push(absl::Span<const PushRange> ops, uint64_t, Versions* versions) {
  if (versions != nullptr) versions->assign(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const PushRange& op = ops[i];
    auto result = store_.Push(op.table, KeySpec::Single(op.begin, op.end), op.grads, 0,
                              [] { return absl::StatusOr<bool>(true); }, {nullptr, op.layer_norms});
    if (!result.ok()) return result.status();
    if (versions != nullptr) (*versions)[i] = result->version;
  }
  return absl::OkStatus();
}

}  // namespace ps
