#include "server/core/round_reducer.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

bool IsPowerOfTwo(uint32_t n) { return n > 0 && (n & (n - 1)) == 0; }

uint32_t PartsOf(const proto::PushRequest& h) { return std::max<uint32_t>(1, h.round_parts()); }

bool SameRanges(const KeySpec& a, const KeySpec& b) {
  if (a.ranges.size() != b.ranges.size()) return false;
  for (size_t i = 0; i < a.ranges.size(); ++i) {
    if (a.ranges[i].begin != b.ranges[i].begin || a.ranges[i].end != b.ranges[i].end) {
      return false;
    }
  }
  return true;
}

// One group's values summed over the tree of blocks. Blocks are checked
// (CheckBlock) and disjoint.
std::vector<float> TreeSum(const std::vector<const RoundReducer::Held*>& pushes) {
  // Nodes by (level, index): a block of size 2^k at first = i * 2^k is (k, i).
  std::map<std::pair<int, uint64_t>, std::vector<float>> nodes;
  for (const RoundReducer::Held* held : pushes) {
    const proto::RoundBlock& b = held->args->header.reduce();
    int level = 0;
    while ((uint32_t{1} << level) < b.size()) ++level;
    const absl::Span<const float> v = held->args->values;
    nodes[{level, b.first() >> level}].assign(v.begin(), v.end());
  }
  // Level by level: siblings (2i, 2i + 1) add into their parent, left plus
  // right; a node without its sibling moves up unchanged.
  for (int level = 0; nodes.size() > 1; ++level) {
    std::map<std::pair<int, uint64_t>, std::vector<float>> next;
    for (auto it = nodes.begin(); it != nodes.end();) {
      const auto [node_level, index] = it->first;
      if (node_level != level) {
        next.insert(next.end(), std::move(*it));
        ++it;
        continue;
      }
      std::vector<float> value = std::move(it->second);
      ++it;
      if (index % 2 == 0 && it != nodes.end() && it->first == std::make_pair(level, index + 1)) {
        const std::vector<float>& right = it->second;
        for (size_t i = 0; i < value.size(); ++i) value[i] += right[i];
        ++it;
      }
      next[{level + 1, index / 2}] = std::move(value);
    }
    nodes = std::move(next);
  }
  return std::move(nodes.begin()->second);
}

}  // namespace

absl::Status RoundReducer::CheckBlock(const proto::PushRequest& header) {
  const proto::RoundBlock& b = header.reduce();
  if (!IsPowerOfTwo(b.size()) || b.first() % b.size() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("push to table '", header.table(), "' from worker ", header.worker_id(),
                     ": reduce block [", b.first(), ", +", b.size(),
                     ") must have a power-of-two size and start at a multiple of it"));
  }
  return absl::OkStatus();
}

absl::Status RoundReducer::CheckPush(const PushArgs& args, const proto::TableDef& def, bool bsp,
                                     bool replicated) {
  const std::string what = absl::StrCat("push to table '", def.name(), "' with reduce");
  if (!bsp) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": needs BSP (consistency BOUNDED, staleness 0)"));
  }
  if (replicated) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": BSP's reduction is not available on replicated servers yet"));
  }
  if (absl::Status s = CheckBlock(args.header); !s.ok()) return s;
  if (args.keys.is_list) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": needs key ranges, not a key list"));
  }
  if (def.kind() != proto::TABLE_DENSE || def.lars_eta() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": needs a dense table without LARS"));
  }
  return absl::OkStatus();
}

bool RoundReducer::CompleteFor(const Round& round, absl::Span<const uint32_t> live) {
  absl::flat_hash_map<uint32_t, std::pair<uint32_t, uint32_t>> parts;  // held, needed
  for (const Held& h : round.pushes) {
    auto& p = parts[h.args->header.worker_id()];
    ++p.first;
    p.second = PartsOf(h.args->header);
  }
  for (uint32_t w : live) {
    auto it = parts.find(w);
    if (it == parts.end() || it->second.first < it->second.second) return false;
  }
  return !round.pushes.empty();
}

std::optional<RoundReducer::Round> RoundReducer::Add(const PushArgs* args, absl::Time deadline,
                                                     Done done, absl::Span<const uint32_t> live) {
  const proto::PushRequest& h = args->header;
  absl::MutexLock lock(&mu_);
  const RoundKey key{h.table(), h.clock()};
  Round& round = rounds_[key];
  round.table = h.table();
  round.clock = h.clock();
  auto same = std::find_if(round.pushes.begin(), round.pushes.end(), [&h](const Held& held) {
    return h.request_id() != 0 && held.args->header.worker_id() == h.worker_id() &&
           held.args->header.request_id() == h.request_id();
  });
  if (same != round.pushes.end()) {
    same->dones.push_back(std::move(done));  // a retry of a held push
  } else {
    round.pushes.push_back(Held{args, {}, deadline});
    round.pushes.back().dones.push_back(std::move(done));
  }
  if (!CompleteFor(round, live)) return std::nullopt;
  Round complete = std::move(round);
  rounds_.erase(key);
  return complete;
}

std::vector<RoundReducer::Round> RoundReducer::Tick(absl::Span<const uint32_t> live,
                                                    absl::Time now) {
  std::vector<Done> expired;
  std::vector<Round> complete;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = rounds_.begin(); it != rounds_.end();) {
      Round& round = it->second;
      auto late = std::stable_partition(round.pushes.begin(), round.pushes.end(),
                                        [now](const Held& h) { return h.deadline > now; });
      for (auto l = late; l != round.pushes.end(); ++l) {
        for (Done& d : l->dones) expired.push_back(std::move(d));
      }
      round.pushes.erase(late, round.pushes.end());
      if (round.pushes.empty()) {
        it = rounds_.erase(it);
      } else if (CompleteFor(round, live)) {
        complete.push_back(std::move(round));
        it = rounds_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Done& d : expired) {
    d(absl::DeadlineExceededError(
        "BSP reduce: the round's pushes of every live worker did not all arrive before the "
        "deadline"));
  }
  return complete;
}

void RoundReducer::FailAll(const absl::Status& status) {
  std::vector<Done> dones;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, round] : rounds_) {
      for (Held& h : round.pushes) {
        for (Done& d : h.dones) dones.push_back(std::move(d));
      }
    }
    rounds_.clear();
  }
  for (Done& d : dones) d(status);
}

size_t RoundReducer::held() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [key, round] : rounds_) n += round.pushes.size();
  return n;
}

absl::StatusOr<std::vector<RoundReducer::Sum>> RoundReducer::SumRound(const Round& round) {
  std::vector<Sum> sums;
  for (const Held& held : round.pushes) {
    if (held.args->clock_only) continue;
    auto group = std::find_if(sums.begin(), sums.end(), [&held](const Sum& s) {
      return SameRanges(s.keys, held.args->keys);
    });
    if (group == sums.end()) {
      sums.push_back(Sum{held.args->keys, {}, {}});
      group = sums.end() - 1;
    }
    group->pushes.push_back(&held);
  }
  for (Sum& sum : sums) {
    // Disjoint blocks of equal-length pushes.
    std::vector<std::pair<uint32_t, uint32_t>> blocks;  // first, end
    const size_t length = sum.pushes.front()->args->values.size();
    for (const Held* h : sum.pushes) {
      const proto::RoundBlock& b = h->args->header.reduce();
      blocks.emplace_back(b.first(), b.first() + b.size());
      if (h->args->values.size() != length) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table '", round.table, "' round ", round.clock, ": pushes of the same keys with ",
            length, " and ", h->args->values.size(), " values"));
      }
    }
    std::sort(blocks.begin(), blocks.end());
    for (size_t i = 1; i < blocks.size(); ++i) {
      if (blocks[i].first < blocks[i - 1].second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table '", round.table, "' round ", round.clock, ": reduce blocks [",
            blocks[i - 1].first, ", ", blocks[i - 1].second, ") and [", blocks[i].first, ", ",
            blocks[i].second, ") overlap (two workers claim the same logical workers)"));
      }
    }
    sum.values = TreeSum(sum.pushes);
  }
  return sums;
}

}  // namespace ps
