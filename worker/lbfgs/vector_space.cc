#include "worker/lbfgs/vector_space.h"

#include "absl/strings/str_cat.h"

namespace ps {
namespace lbfgs {

const char* KindName(VecOp::Kind kind) {
  switch (kind) {
    case VecOp::kDot:
      return "kDot";
    case VecOp::kAxpy:
      return "kAxpy";
    case VecOp::kScale:
      return "kScale";
    case VecOp::kCopy:
      return "kCopy";
  }
  return "unknown";
}

absl::Status ValidateOps(const std::vector<VecOp>& ops, int num_vectors) {
  auto bad = [num_vectors](int v) { return v < 0 || v >= num_vectors; };
  for (size_t i = 0; i < ops.size(); ++i) {
    const VecOp& op = ops[i];
    switch (op.kind) {
      case VecOp::kDot:
      case VecOp::kAxpy:
      case VecOp::kScale:
      case VecOp::kCopy:
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("vector op ", i, " has unknown kind ", static_cast<int>(op.kind)));
    }
    const bool reads_src = op.kind != VecOp::kScale;
    int v;
    if (bad(op.dst)) {
      v = op.dst;
    } else if (reads_src && bad(op.src)) {
      v = op.src;
    } else {
      continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("vector op ", i, " (", KindName(op.kind), ", dst ", op.dst, ", src ", op.src,
                     ") names vector ", v, ", but the space has vectors 0..", num_vectors - 1,
                     "; was it made for a smaller L-BFGS memory?"));
  }
  return absl::OkStatus();
}

double ApplyOp(const VecOp& op, double* const* vecs, size_t n) {
  double* dst = vecs[op.dst];
  const double* src = vecs[op.src];
  switch (op.kind) {
    case VecOp::kDot: {
      double sum = 0;
      for (size_t i = 0; i < n; ++i) sum += dst[i] * src[i];
      return sum;
    }
    case VecOp::kAxpy:
      for (size_t i = 0; i < n; ++i) dst[i] += op.alpha * src[i];
      return 0;
    case VecOp::kScale:
      if (op.alpha == 0) {
        for (size_t i = 0; i < n; ++i) dst[i] = 0;
      } else {
        for (size_t i = 0; i < n; ++i) dst[i] *= op.alpha;
      }
      return 0;
    case VecOp::kCopy:
      if (dst != src) {
        for (size_t i = 0; i < n; ++i) dst[i] = src[i];
      }
      return 0;
  }
  return 0;
}

MemoryVectorSpace::MemoryVectorSpace(int memory, size_t n)
    : n_(n), vecs_(NumVectors(memory), std::vector<double>(n, 0.0)) {}

absl::StatusOr<std::vector<double>> MemoryVectorSpace::Run(const std::vector<VecOp>& ops) {
  if (absl::Status s = ValidateOps(ops, num_vectors()); !s.ok()) return s;
  std::vector<double*> data(vecs_.size());
  for (size_t v = 0; v < vecs_.size(); ++v) {
    if (vecs_[v].size() != n_) {
      return absl::FailedPreconditionError(absl::StrCat("vector ", v, " was resized to ",
                                                        vecs_[v].size(), " elements; the space ",
                                                        "has ", n_, " (a test bug)"));
    }
    data[v] = vecs_[v].data();
  }
  // The ops are element-wise, so applying them one after another over whole vectors gives
  // what applying them in order to each element gives.
  std::vector<double> dots;
  for (const VecOp& op : ops) {
    const double partial = ApplyOp(op, data.data(), n_);
    if (op.kind == VecOp::kDot) dots.push_back(partial);
  }
  ++runs_;
  ops_ += static_cast<int64_t>(ops.size());
  return dots;
}

}  // namespace lbfgs
}  // namespace ps
