#include "worker/collective/local_collective.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {
class LocalGroup::Seat final : public Collective {
 public:
  Seat(LocalGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  absl::Status AllreduceSum(absl::Span<float> data) override {
    return group_->Run(rank_, absl::StrCat("AllreduceSum of ", data.size()),
                       {data.data(), data.data(), data.size()}, &Sum, 0);
  }
  absl::Status Allgather(absl::Span<const float> in, absl::Span<float> out) override {
    if (out.size() != in.size() * static_cast<size_t>(size())) {
      return absl::InvalidArgumentError(absl::StrCat("Allgather of ", in.size(), " values into ",
                                                     out.size(), ": want ", size(), " times ",
                                                     in.size()));
    }
    return group_->Run(rank_, absl::StrCat("Allgather of ", in.size()),
                       {in.data(), out.data(), in.size()}, &Gather, 0);
  }
  absl::Status Broadcast(absl::Span<float> data, int root) override {
    if (root < 0 || root >= size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Broadcast from rank ", root, " of a group of ", size()));
    }
    return group_->Run(rank_, absl::StrCat("Broadcast of ", data.size(), " from ", root),
                       {data.data(), data.data(), data.size()}, &Copy, root);
  }

  absl::StatusOr<std::unique_ptr<Collective>> Split(int color, int key) override {
    constexpr int kLimit = 1 << 24;  // exact in a float
    if (color < 0 || color >= kLimit || key <= -kLimit || key >= kLimit) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": Split(color ", color, ", key ", key, "): out of range"));
    }
    const std::vector<float> mine = {static_cast<float>(color), static_cast<float>(key)};
    std::vector<float> all(2 * static_cast<size_t>(size()));
    if (absl::Status s = Allgather(mine, absl::MakeSpan(all)); !s.ok()) return s;
    // The members of my color, by (key, rank).
    std::vector<std::tuple<float, int>> same;
    for (int r = 0; r < size(); ++r) {
      if (all[2 * r] == mine[0]) same.emplace_back(all[2 * r + 1], r);
    }
    std::sort(same.begin(), same.end());
    const int new_rank = static_cast<int>(
        std::find(same.begin(), same.end(), std::make_tuple(mine[1], rank_)) - same.begin());
    std::shared_ptr<LocalGroup> group =
        group_->Subgroup(splits_++, color, static_cast<int>(same.size()));
    return std::unique_ptr<Collective>(new InSubgroup(std::move(group), new_rank));
  }

 private:
  // Rank order, so that every member gets the same bits.
  static void Sum(const std::vector<Arrival>& a, int) {
    std::vector<float> sum(a[0].in, a[0].in + a[0].n);
    for (size_t r = 1; r < a.size(); ++r) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += a[r].in[i];
    }
    for (const Arrival& m : a) std::memcpy(m.out, sum.data(), sum.size() * sizeof(float));
  }
  static void Gather(const std::vector<Arrival>& a, int) {
    for (const Arrival& m : a) {
      for (size_t r = 0; r < a.size(); ++r) {
        std::memcpy(m.out + r * a[r].n, a[r].in, a[r].n * sizeof(float));
      }
    }
  }
  static void Copy(const std::vector<Arrival>& a, int root) {
    for (size_t r = 0; r < a.size(); ++r) {
      if (static_cast<int>(r) != root) {
        std::memcpy(a[r].out, a[root].in, a[root].n * sizeof(float));
      }
    }
  }

  // A member's Collective in a subgroup, which it keeps alive.
  class InSubgroup final : public Collective {
   public:
    InSubgroup(std::shared_ptr<LocalGroup> group, int rank)
        : group_(std::move(group)), member_(group_->Member(rank)) {}
    int rank() const override { return member_->rank(); }
    int size() const override { return member_->size(); }
    absl::Status AllreduceSum(absl::Span<float> data) override {
      return member_->AllreduceSum(data);
    }
    absl::Status Allgather(absl::Span<const float> in, absl::Span<float> out) override {
      return member_->Allgather(in, out);
    }
    absl::Status Broadcast(absl::Span<float> data, int root) override {
      return member_->Broadcast(data, root);
    }
    absl::StatusOr<std::unique_ptr<Collective>> Split(int color, int key) override {
      return member_->Split(color, key);
    }

   private:
    const std::shared_ptr<LocalGroup> group_;
    Collective* const member_;
  };

  LocalGroup* const group_;
  const int rank_;
  uint64_t splits_ = 0;  // Splits made by this member: the same count on every member
};

LocalGroup::LocalGroup(int size, absl::Duration timeout)
    : size_(size), timeout_(timeout), arrivals_(size), arrived_(size, false) {
  for (int r = 0; r < size; ++r) members_.push_back(std::make_unique<Seat>(this, r));
}

LocalGroup::~LocalGroup() = default;

Collective* LocalGroup::Member(int rank) { return members_[rank].get(); }

std::shared_ptr<LocalGroup> LocalGroup::Subgroup(uint64_t split, int color, int size) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<LocalGroup>& group = subgroups_[{split, color}];
  if (group == nullptr) group = std::make_shared<LocalGroup>(size, timeout_);
  return group;
}

absl::Status LocalGroup::Run(int rank, const std::string& what, const Arrival& mine, Reduce reduce,
                             int root) {
  absl::MutexLock lock(&mu_);
  if (!broken_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, ": the group is broken: ", broken_));
  }
  if (count_ == 0) {
    what_ = what;
  } else if (what_ != what) {
    broken_ = absl::StrCat("rank ", rank, " called ", what, " while others called ", what_);
    return absl::InvalidArgumentError(broken_);
  }
  arrivals_[rank] = mine;
  arrived_[rank] = true;
  ++count_;
  const uint64_t op = done_;
  if (count_ == size_) {
    reduce(arrivals_, root);
    count_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    ++done_;
    return absl::OkStatus();
  }
  auto over = [this, op]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ != op || !broken_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&over), timeout_)) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!arrived_[r]) missing.push_back(r);
    }
    broken_ = absl::StrCat(what, ": rank(s) ", absl::StrJoin(missing, ", "),
                           " did not come within ", absl::FormatDuration(timeout_));
    return absl::DeadlineExceededError(absl::StrCat("rank ", rank, ": ", broken_));
  }
  if (done_ == op) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, ": the group is broken: ", broken_));
  }
  return absl::OkStatus();
}

}  // namespace ps
