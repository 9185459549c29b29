#include "deploy/bench/local_param_client.h"

#include <algorithm>

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
    const uint64_t run = (op.end - op.begin) * def->width();
    if (op.rows == 0 || op.out.size() != run * op.rows) {
      return absl::InvalidArgumentError("pull output span does not match the range and width");
    }
    for (uint64_t r = 0; r < op.rows; ++r) {  // a strided op: run after run
      const uint64_t first = op.begin + r * op.stride;
      float* out = op.out.data() + r * run;
      auto version = store_.Pull(op.table, KeySpec::Single(first, first + op.end - op.begin),
                                 [out](size_t) { return reinterpret_cast<char*>(out); });
      if (!version.ok()) return version.status();
      if (versions != nullptr) (*versions)[i] = std::max((*versions)[i], *version);
    }
  }
  return absl::OkStatus();
}

absl::Status LocalParamClient::Push(absl::Span<const PushRange> ops, uint64_t, Versions* versions) {
  if (versions != nullptr) versions->assign(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const PushRange& op = ops[i];
    const uint64_t keys = op.end - op.begin;
    const uint64_t run = op.rows == 0 ? 0 : op.grads.size() / op.rows;
    for (uint64_t r = 0; r < op.rows; ++r) {  // a strided op: run after run
      const uint64_t first = op.begin + r * op.stride;
      auto result = store_.Push(
          op.table, KeySpec::Single(first, first + keys), op.grads.subspan(r * run, run), 0,
          [] { return absl::StatusOr<bool>(true); }, {nullptr, op.layer_norms});
      if (!result.ok()) return result.status();
      if (versions != nullptr) (*versions)[i] = result->version;
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
