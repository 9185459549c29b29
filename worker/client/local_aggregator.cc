#include "worker/client/local_aggregator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/optimizer/lars.h"

namespace ps {
class LocalAggregator::Member final : public ParamClient {
 public:
  Member(LocalAggregator& aggregator, int index) : aggregator_(aggregator), index_(index) {}

  absl::Status CreateTable(const proto::TableDef& def) override {
    return aggregator_.upstream_.CreateTable(def);
  }
  absl::Status Pull(absl::Span<const PullRange> ops, uint64_t clock, PullInfo* info) override {
    Call call;
    call.read_clock = clock;
    call.pull = ops;
    call.info = info;
    return aggregator_.Join(index_, call);
  }
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions) override {
    Call call;
    call.push_clock = clock;
    call.push = ops;
    call.versions = versions;
    return aggregator_.Join(index_, call);
  }
  absl::Status PushPull(absl::Span<const PushRange> push, absl::Span<const PullRange> pull,
                        uint64_t clock, PullInfo* info) override {
    if (absl::Status s = CheckPushPullOps(push, pull); !s.ok()) return s;
    Call call;
    call.push_clock = clock;
    call.read_clock = clock + 1;
    call.push = push;
    call.pull = pull;
    call.info = info;
    return aggregator_.Join(index_, call);
  }
  int num_servers() const override { return aggregator_.upstream_.num_servers(); }

 private:
  LocalAggregator& aggregator_;
  const int index_;
};

LocalAggregator::LocalAggregator(ParamClient& upstream, int members)
    : upstream_(upstream), active_(members, true), joined_(members) {
  for (int i = 0; i < members; ++i) members_.push_back(std::make_unique<Member>(*this, i));
}

LocalAggregator::~LocalAggregator() = default;

ParamClient& LocalAggregator::member(int i) { return *members_.at(i); }

int64_t LocalAggregator::values_pushed() const {
  absl::MutexLock lock(&mu_);
  return values_pushed_;
}

int64_t LocalAggregator::values_pulled() const {
  absl::MutexLock lock(&mu_);
  return values_pulled_;
}

int64_t LocalAggregator::upstream_calls() const {
  absl::MutexLock lock(&mu_);
  return upstream_calls_;
}

void LocalAggregator::Leave(int i) {
  absl::MutexLock lock(&mu_);
  if (!active_.at(i)) return;
  active_[i] = false;
  const int active = static_cast<int>(std::count(active_.begin(), active_.end(), true));
  if (joined_count_ > 0 && joined_count_ == active) RunRound();
}

absl::Status LocalAggregator::Join(int i, const Call& call) {
  absl::MutexLock lock(&mu_);
  if (!active_.at(i)) {
    return absl::FailedPreconditionError(
        absl::StrCat("local aggregator: member ", i, " called after it left"));
  }
  const uint64_t round = round_;
  joined_[i] = call;
  ++joined_count_;
  const int active = static_cast<int>(std::count(active_.begin(), active_.end(), true));
  if (joined_count_ == active) {
    RunRound();
  } else {
    auto done = [this, round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return round_ != round; };
    mu_.Await(absl::Condition(&done));
  }
  // The next round cannot run before this member joins it: the results of
  // this one stay until it has copied them.
  if (!status_.ok()) return status_;
  if (call.read_clock.has_value()) {
    for (size_t o = 0; o < call.pull.size(); ++o) {
      std::copy(pulled_[o].begin(), pulled_[o].end(), call.pull[o].out.begin());
    }
  }
  if (call.info != nullptr) *call.info = info_;
  if (call.versions != nullptr) *call.versions = versions_;
  return absl::OkStatus();
}

void LocalAggregator::RunRound() {
  // The round's calls, in member order (the sum's order).
  RoundCalls calls;
  for (const std::optional<Call>& c : joined_) {
    if (!c.has_value()) continue;
    if (c->push_clock.has_value()) calls.pushers.push_back(&*c);
    if (c->read_clock.has_value()) calls.readers.push_back(&*c);
  }
  status_ = CheckRound(calls);
  if (status_.ok()) status_ = UpstreamCall(calls);
  for (std::optional<Call>& c : joined_) c.reset();
  joined_count_ = 0;
  ++round_;
}

absl::Status LocalAggregator::CheckRound(const RoundCalls& calls) {
  for (const Call* c : calls.pushers) {
    const Call& first = *calls.pushers.front();
    if (*c->push_clock != *first.push_clock || !SameOpKeys(c->push, first.push)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "local aggregator: members out of step: pushes at clocks ", *first.push_clock, " and ",
          *c->push_clock, " (or of different tables or keys) in one round"));
    }
  }
  for (const Call* c : calls.readers) {
    const Call& first = *calls.readers.front();
    if (*c->read_clock != *first.read_clock || !SameOpKeys(c->pull, first.pull)) {
      return absl::InvalidArgumentError(
          absl::StrCat("local aggregator: members out of step: reads at clocks ", *first.read_clock,
                       " and ", *c->read_clock, " (or of different tables or keys) in one round"));
    }
  }
  if (!calls.pushers.empty() && !calls.readers.empty()) {
    const Call& pusher = *calls.pushers.front();
    const Call& reader = *calls.readers.front();
    if (*reader.read_clock != *pusher.push_clock + 1 || !SameOpKeys(pusher.push, reader.pull)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "local aggregator: members out of step: a push at clock ", *pusher.push_clock,
          " and a read at clock ", *reader.read_clock, " in one round"));
    }
  }
  return absl::OkStatus();
}

void LocalAggregator::SumPushes(const std::vector<const Call*>& pushers) {
  const Call* first = pushers.front();
  const size_t num_ops = first->push.size();
  sum_.resize(num_ops);
  norms_.resize(num_ops);
  std::vector<std::vector<float>> nodes(pushers.size());
  for (size_t o = 0; o < num_ops; ++o) {
    // A pairwise tree over the members: ((g0 + g1) + (g2 + g3)) ...
    for (size_t k = 0; k < pushers.size(); ++k) {
      const absl::Span<const float> g = pushers[k]->push[o].grads;
      nodes[k].assign(g.begin(), g.end());
    }
    for (size_t stride = 1; stride < nodes.size(); stride *= 2) {
      for (size_t k = 0; k + stride < nodes.size(); k += 2 * stride) {
        std::vector<float>& a = nodes[k];
        const std::vector<float>& b = nodes[k + stride];
        for (size_t v = 0; v < a.size(); ++v) a[v] += b[v];
      }
    }
    sum_[o] = std::move(nodes[0]);
    PushRange op = first->push[o];
    op.grads = sum_[o];
    if (op.layer_norms != nullptr) {
      // The members read the same parameters; the gradient is the sum's.
      norms_[o].set_weight(op.layer_norms->weight());
      norms_[o].set_gradient(LayerNormsOf({}, sum_[o]).gradient());
      op.layer_norms = &norms_[o];
    }
    push_ops_.push_back(std::move(op));
  }
}

absl::Status LocalAggregator::UpstreamCall(const RoundCalls& calls) {
  const Call* pusher = calls.pushers.empty() ? nullptr : calls.pushers.front();
  const Call* reader = calls.readers.empty() ? nullptr : calls.readers.front();
  push_ops_.clear();
  pull_ops_.clear();
  if (pusher != nullptr) SumPushes(calls.pushers);
  if (reader != nullptr) {
    pulled_.resize(reader->pull.size());
    for (size_t o = 0; o < reader->pull.size(); ++o) {
      pulled_[o].resize(reader->pull[o].out.size());
      PullRange op = reader->pull[o];
      op.out = absl::MakeSpan(pulled_[o]);
      pull_ops_.push_back(std::move(op));
    }
  }
  info_ = PullInfo();
  versions_.clear();
  ++upstream_calls_;
  absl::Status s;
  if (pusher != nullptr && reader != nullptr) {
    s = upstream_.PushPull(push_ops_, pull_ops_, *pusher->push_clock, &info_);
    versions_ = info_.versions;
  } else if (pusher != nullptr) {
    s = upstream_.Push(push_ops_, *pusher->push_clock, &versions_);
  } else if (reader != nullptr) {
    s = upstream_.Pull(pull_ops_, *reader->read_clock, &info_);
  } else {
    return absl::InternalError("local aggregator: a round with neither a push nor a read");
  }
  if (!s.ok()) return s;
  for (const PushRange& op : push_ops_) values_pushed_ += static_cast<int64_t>(op.grads.size());
  for (const PullRange& op : pull_ops_) values_pulled_ += static_cast<int64_t>(op.out.size());
  return absl::OkStatus();
}

}  // namespace ps
