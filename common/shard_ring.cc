#include "common/shard_ring.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"

namespace ps {
namespace {

bool Contains(const google::protobuf::RepeatedField<uint32_t>& list, uint32_t server) {
  return std::find(list.begin(), list.end(), server) != list.end();
}

void Erase(google::protobuf::RepeatedField<uint32_t>* list, uint32_t server) {
  auto it = std::find(list->begin(), list->end(), server);
  if (it != list->end()) list->erase(it);
}

// Chains (servers and joining) each server is in.
std::map<uint32_t, int> Loads(const proto::RingRecord& ring,
                              const std::map<uint32_t, proto::MemberRecord>& live) {
  std::map<uint32_t, int> load;
  for (const auto& [id, member] : live) load[id] = 0;
  for (const proto::ShardChain& chain : ring.shards()) {
    for (uint32_t s : chain.servers()) ++load[s];
    for (uint32_t s : chain.joining()) ++load[s];
  }
  return load;
}

}  // namespace

absl::StatusOr<ShardRing> ShardRing::FromRecord(proto::RingRecord record) {
  if (record.shards_size() == 0) return absl::InvalidArgumentError("ring record has no shards");
  if (record.replicas() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ring record version ", record.version(),
                                                   " has replicas ", record.replicas(),
                                                   "; need >= 1"));
  }
  for (int i = 0; i < record.shards_size(); ++i) {
    std::set<uint32_t> seen;
    const proto::ShardChain& chain = record.shards(i);
    for (auto list : {&chain.servers(), &chain.joining()}) {
      for (uint32_t s : *list) {
        if (!seen.insert(s).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ring version ", record.version(), ": shard ", i, " names server ", s, " twice"));
        }
        if (!record.members().contains(s)) {
          return absl::InvalidArgumentError(absl::StrCat("ring version ", record.version(),
                                                         ": shard ", i, " names server ", s,
                                                         ", which has no member entry (address)"));
        }
      }
    }
  }
  return ShardRing(std::move(record));
}

absl::StatusOr<ShardRing> ShardRing::Initial(int num_shards, int replicas,
                                             const std::map<uint32_t, proto::MemberRecord>& members,
                                             bool restore) {
  // Servers beyond the shards' number get none (as the first ring always
  // was: one shard a server at most).
  const int n = std::min(static_cast<int>(members.size()), num_shards);
  if (num_shards < 1 || replicas < 1 || n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ring needs shards >= 1, replicas >= 1 and a server; got ", num_shards,
                     " shards, replicas ", replicas, ", ", members.size(), " servers"));
  }
  proto::RingRecord record;
  record.set_version(1);
  record.set_replicas(replicas);
  for (int i = 0; i < n; ++i) {
    auto it = members.find(i);
    if (it == members.end()) {
      return absl::InvalidArgumentError(absl::StrCat("the first ring needs servers 0..", n - 1,
                                                     "; server ", i, " has not registered"));
    }
    (*record.mutable_members())[i] = it->second;
  }
  const int r = std::min(replicas, n);
  for (int i = 0; i < num_shards; ++i) {
    proto::ShardChain* chain = record.add_shards();
    for (int k = 0; k < r; ++k) {
      // From a checkpoint, only the primary loads it; the others copy it
      // from the primary and join, as any new copy does (a chain's servers
      // always hold a complete copy).
      if (restore && k > 0) {
        chain->add_joining((i + k) % n);
      } else {
        chain->add_servers((i + k) % n);
      }
    }
    if (restore) chain->set_restored_at(1);
  }
  return ShardRing(std::move(record));
}

std::optional<uint32_t> ShardRing::Primary(int shard) const {
  if (shard < 0 || shard >= num_shards()) return std::nullopt;
  const proto::ShardChain& chain = record_.shards(shard);
  if (chain.servers().empty()) return std::nullopt;
  return chain.servers(0);
}

std::optional<uint32_t> ShardRing::Successor(int shard, uint32_t server) const {
  if (shard < 0 || shard >= num_shards()) return std::nullopt;
  const proto::ShardChain& chain = record_.shards(shard);
  std::vector<uint32_t> order(chain.servers().begin(), chain.servers().end());
  order.insert(order.end(), chain.joining().begin(), chain.joining().end());
  // Joining servers copy from the tail, one after another.
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    if (order[i] == server) return order[i + 1];
  }
  return std::nullopt;
}

bool ShardRing::Holds(int shard, uint32_t server) const {
  if (shard < 0 || shard >= num_shards()) return false;
  const proto::ShardChain& chain = record_.shards(shard);
  return Contains(chain.servers(), server) || Contains(chain.joining(), server);
}

std::string ShardRing::Address(uint32_t server) const {
  auto it = record_.members().find(server);
  return it == record_.members().end() ? "" : it->second.address();
}

uint64_t ShardRing::Incarnation(uint32_t server) const {
  auto it = record_.members().find(server);
  return it == record_.members().end() ? 0 : it->second.incarnation();
}

std::string ShardRing::Describe() const {
  std::vector<std::string> parts;
  for (int i = 0; i < num_shards(); ++i) {
    const proto::ShardChain& chain = record_.shards(i);
    std::string part =
        absl::StrCat("shard ", i, ": ",
                     chain.servers().empty() ? "LOST" : absl::StrJoin(chain.servers(), " -> "));
    if (!chain.joining().empty()) {
      absl::StrAppend(&part, " (+", absl::StrJoin(chain.joining(), ","), " joining)");
    }
    if (chain.restored_at() > 0) {
      absl::StrAppend(&part, " [from checkpoint at v", chain.restored_at(), "]");
    }
    parts.push_back(std::move(part));
  }
  return absl::StrCat("ring v", version(), " r=", replicas(), ": ", absl::StrJoin(parts, "; "));
}

std::optional<proto::RingRecord> NextRing(const proto::RingRecord& current,
                                          const RingInputs& inputs) {
  proto::RingRecord next = current;
  const std::set<uint32_t> draining(inputs.draining.begin(), inputs.draining.end());
  auto alive = [&](uint32_t s) {
    auto it = inputs.live.find(s);
    auto known = current.members().find(s);
    return it != inputs.live.end() && known != current.members().end() &&
           it->second.incarnation() == known->second.incarnation();
  };
  // A server live under another incarnation restarted: its copies are gone.
  // One not live at all may come back with them (its lease lapsed in an
  // etcd stall, a pause, a partition from etcd).
  auto restarted = [&](uint32_t s) {
    auto it = inputs.live.find(s);
    auto known = current.members().find(s);
    return it != inputs.live.end() && (known == current.members().end() ||
                                       it->second.incarnation() != known->second.incarnation());
  };
  // 1. The dead (or restarted) leave every chain; the next in a chain
  // becomes primary. A chain none of whose servers is live keeps those that
  // may come back (it is unavailable, not lost, until one does).
  for (proto::ShardChain& chain : *next.mutable_shards()) {
    std::vector<uint32_t> keep, returnable;
    for (uint32_t s : chain.servers()) {
      if (alive(s)) keep.push_back(s);
      if (!restarted(s)) returnable.push_back(s);
    }
    if (keep.empty()) keep = returnable;
    chain.mutable_servers()->Assign(keep.begin(), keep.end());
    std::vector<uint32_t> joining;
    for (uint32_t s : chain.joining()) {
      if (alive(s)) joining.push_back(s);
    }
    chain.mutable_joining()->Assign(joining.begin(), joining.end());
  }
  // 1b. A server its predecessor cannot get to acknowledge leaves the chain.
  auto stuck = [&](int shard, uint32_t s) {
    auto it = inputs.stuck.find({shard, s});
    auto known = current.members().find(s);
    return it != inputs.stuck.end() && known != current.members().end() &&
           it->second == known->second.incarnation();
  };
  for (int i = 0; i < next.shards_size(); ++i) {
    proto::ShardChain* chain = next.mutable_shards(i);
    std::vector<uint32_t> joining;
    for (uint32_t s : chain->joining()) {
      if (!stuck(i, s)) joining.push_back(s);
    }
    chain->mutable_joining()->Assign(joining.begin(), joining.end());
    for (uint32_t s : std::vector<uint32_t>(chain->servers().begin(), chain->servers().end())) {
      int others = 0;
      for (uint32_t o : chain->servers()) others += o != s && alive(o) ? 1 : 0;
      if (stuck(i, s) && others > 0) Erase(chain->mutable_servers(), s);
    }
  }
  // 2. Finished copies join their chain's end.
  for (int i = 0; i < next.shards_size(); ++i) {
    proto::ShardChain* chain = next.mutable_shards(i);
    std::vector<uint32_t> still;
    for (uint32_t s : chain->joining()) {
      auto it = inputs.synced.find({i, s});
      if (it != inputs.synced.end() && it->second == current.members().at(s).incarnation() &&
          !chain->servers().empty() && alive(chain->servers(0))) {
        chain->add_servers(s);
      } else {
        still.push_back(s);
      }
    }
    chain->mutable_joining()->Assign(still.begin(), still.end());
  }
  const int r = static_cast<int>(current.replicas());
  int usable = 0;  // live servers that may hold shards
  for (const auto& [id, member] : inputs.live) {
    if (!draining.count(id)) ++usable;
  }
  const int want = std::min(r, usable);
  std::map<uint32_t, int> load = Loads(next, inputs.live);
  // 3. Draining servers, and servers beyond r after a rebalancing copy,
  // leave chains that no longer need them.
  for (proto::ShardChain& chain : *next.mutable_shards()) {
    auto staying = [&] {
      int n = 0;
      for (uint32_t s : chain.servers()) n += draining.count(s) ? 0 : 1;
      return n;
    };
    for (uint32_t d : std::vector<uint32_t>(chain.servers().begin(), chain.servers().end())) {
      if (draining.count(d) && staying() >= std::max(want, 1)) {
        Erase(chain.mutable_servers(), d);
        --load[d];
      }
    }
    while (staying() > r && chain.joining().empty()) {
      // The most loaded server but the newest member gives its copy up.
      uint32_t victim = chain.servers(0);
      for (int k = 0; k + 1 < chain.servers_size(); ++k) {
        if (load[chain.servers(k)] >= load[victim]) victim = chain.servers(k);
      }
      Erase(chain.mutable_servers(), victim);
      --load[victim];
    }
  }
  // 4. Chains short of r servers get a joining one.
  auto candidate = [&](int shard) -> std::optional<uint32_t> {
    const proto::ShardChain& chain = next.shards(shard);
    std::optional<uint32_t> best;
    for (const auto& [id, member] : inputs.live) {
      if (draining.count(id) || Contains(chain.servers(), id) || Contains(chain.joining(), id) ||
          inputs.stuck.count({shard, id})) {
        continue;
      }
      if (!best || load[id] < load[*best]) best = id;
    }
    return best;
  };
  for (int i = 0; i < next.shards_size(); ++i) {
    proto::ShardChain& chain = *next.mutable_shards(i);
    // Lost (every server of the chain restarted): with checkpoints, the
    // least loaded live servers become its chain and load the newest one.
    if (chain.servers().empty() && inputs.rebuild_lost) {
      // One server loads it; the others copy it from that one and join.
      chain.clear_joining();
      while (chain.servers_size() + chain.joining_size() < want) {
        std::optional<uint32_t> s = candidate(i);
        if (!s) break;
        if (chain.servers().empty()) {
          chain.add_servers(*s);
        } else {
          chain.add_joining(*s);
        }
        ++load[*s];
      }
      if (!chain.servers().empty()) chain.set_restored_at(current.version() + 1);
      continue;
    }
    // Lost, or waiting for its servers to come back: nothing to copy from.
    if (chain.servers().empty() || !alive(chain.servers(0))) continue;
    int have = chain.joining_size();
    for (uint32_t s : chain.servers()) have += draining.count(s) ? 0 : 1;
    while (have < want) {
      std::optional<uint32_t> s = candidate(i);
      if (!s) break;
      chain.add_joining(*s);
      ++load[*s];
      ++have;
    }
  }
  // 5. Added servers take shards from the most loaded servers.
  int total = 0;
  for (const auto& [id, n] : load) total += n;
  for (uint32_t a : inputs.adding) {
    if (!inputs.live.count(a) || draining.count(a)) continue;
    const int target = usable > 0 ? total / usable : 0;
    while (load[a] < target) {
      int best_shard = -1, best_load = -1;
      for (int i = 0; i < next.shards_size(); ++i) {
        const proto::ShardChain& chain = next.shards(i);
        if (chain.servers().empty() || !alive(chain.servers(0)) || !chain.joining().empty() ||
            Contains(chain.servers(), a) || inputs.stuck.count({i, a})) {
          continue;
        }
        for (uint32_t s : chain.servers()) {
          if (load[s] > best_load) best_load = load[s], best_shard = i;
        }
      }
      if (best_shard < 0 || best_load <= load[a] + 1) break;
      next.mutable_shards(best_shard)->add_joining(a);
      ++load[a];
    }
  }
  // Members: exactly the servers named in a chain, each with the
  // incarnation that holds its copies (a server kept while not live keeps
  // the one it had).
  next.clear_members();
  for (const proto::ShardChain& chain : next.shards()) {
    for (auto list : {&chain.servers(), &chain.joining()}) {
      for (uint32_t s : *list) {
        auto known = current.members().find(s);
        (*next.mutable_members())[s] =
            known != current.members().end() && !restarted(s) ? known->second : inputs.live.at(s);
      }
    }
  }
  next.set_version(current.version());
  if (google::protobuf::util::MessageDifferencer::Equals(next, current)) return std::nullopt;
  next.set_version(current.version() + 1);
  return next;
}

}  // namespace ps
