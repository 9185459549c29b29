#include "worker/lbfgs/server_vector_space.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ps::lbfgs {
namespace {

proto::VectorOp::Kind KindOf(VecOp::Kind kind) {
  switch (kind) {
    case VecOp::kDot:
      return proto::VectorOp::DOT;
    case VecOp::kAxpy:
      return proto::VectorOp::AXPY;
    case VecOp::kScale:
      return proto::VectorOp::SCALE;
    case VecOp::kCopy:
      return proto::VectorOp::COPY;
  }
  return proto::VectorOp::DOT;
}

}  // namespace

ServerVectorSpace::ServerVectorSpace(PsClient* client, std::string table, uint64_t first_request_id)
    : client_(client), table_(std::move(table)), next_id_(first_request_id) {}

absl::StatusOr<std::vector<double>> ServerVectorSpace::Run(const std::vector<VecOp>& ops) {
  std::vector<proto::VectorOp> wire(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].dst < 0 || ops[i].src < 0) {
      return absl::InvalidArgumentError(absl::StrCat("vector op ", i, " names a negative vector (",
                                                     ops[i].dst, ", ", ops[i].src, ")"));
    }
    wire[i].set_kind(KindOf(ops[i].kind));
    wire[i].set_dst(static_cast<uint32_t>(ops[i].dst));
    wire[i].set_src(static_cast<uint32_t>(ops[i].src));
    wire[i].set_alpha(ops[i].alpha);
  }
  absl::StatusOr<PsClient::VectorOpsTotals> totals =
      client_->VectorOps(table_, wire, next_id_++, clock_);
  if (!totals.ok()) return totals.status();
  ++calls_;
  bytes_ += totals->bytes;
  values_ = totals->values;
  return std::move(totals->sums);
}

}  // namespace ps::lbfgs
