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
    if (chain.resumed_from() > 0) absl::StrAppend(&part, " [resumed from a kept copy]");
    parts.push_back(std::move(part));
  }
  return absl::StrCat("ring v", version(), " r=", replicas(), ": ", absl::StrJoin(parts, "; "));
}

namespace {

// NextRing's steps (shard_ring.h), in order, on `next_` (a copy of the
// current ring), sharing what they know of the servers and their loads.
class RingPlanner {
 public:
  RingPlanner(const proto::RingRecord& current, const RingInputs& inputs)
      : current_(current),
        inputs_(inputs),
        draining_(inputs.draining.begin(), inputs.draining.end()),
        next_(current) {}

  std::optional<proto::RingRecord> Plan() {
    DropDead();
    DropStuck();
    JoinFinishedCopies();
    int usable = 0;  // live servers that may hold shards
    for (const auto& [id, member] : inputs_.live) {
      if (!draining_.count(id)) ++usable;
    }
    const int want = std::min(static_cast<int>(current_.replicas()), usable);
    load_ = Loads(next_, inputs_.live);
    LeaveUnneeded(want);
    AddJoining(want);
    GiveToAdded(usable);
    SetMembers();
    next_.set_version(current_.version());
    if (google::protobuf::util::MessageDifferencer::Equals(next_, current_)) return std::nullopt;
    next_.set_version(current_.version() + 1);
    return next_;
  }

 private:
  // Live under the incarnation the ring names.
  bool Alive(uint32_t s) const {
    auto it = inputs_.live.find(s);
    auto known = current_.members().find(s);
    return it != inputs_.live.end() && known != current_.members().end() &&
           it->second.incarnation() == known->second.incarnation();
  }
  // A server live under another incarnation restarted: its copies are
  // gone. One not live at all may come back with them (its lease lapsed in
  // an etcd stall, a pause, a partition from etcd).
  bool Restarted(uint32_t s) const {
    auto it = inputs_.live.find(s);
    auto known = current_.members().find(s);
    return it != inputs_.live.end() && (known == current_.members().end() ||
                                        it->second.incarnation() != known->second.incarnation());
  }
  // Reported stuck in `shard` under the incarnation the ring names.
  bool Stuck(int shard, uint32_t s) const {
    auto it = inputs_.stuck.find({shard, s});
    auto known = current_.members().find(s);
    return it != inputs_.stuck.end() && known != current_.members().end() &&
           it->second == known->second.incarnation();
  }

  // Server s, back under a new incarnation, offers the copy of `shard` kept
  // by the incarnation the ring names for it (MemberRecord.kept).
  bool OffersNamedCopy(int shard, uint32_t s) const {
    auto it = inputs_.live.find(s);
    auto known = current_.members().find(s);
    if (it == inputs_.live.end() || known == current_.members().end()) return false;
    auto kept = it->second.kept().find(static_cast<uint32_t>(shard));
    return kept != it->second.kept().end() && kept->second == known->second.incarnation();
  }

  // 1. The dead (or restarted) leave every chain; the next in a chain
  // becomes primary. A chain none of whose servers is live keeps those that
  // may come back (it is unavailable, not lost, until one does), unless one
  // of them is back, restarted, with the copy its previous process kept:
  // that copy holds every acknowledged update (every server of a chain
  // does), and the chain resumes from it.
  void DropDead() {
    for (int i = 0; i < next_.shards_size(); ++i) {
      proto::ShardChain& chain = *next_.mutable_shards(i);
      std::vector<uint32_t> keep, returnable;
      for (uint32_t s : chain.servers()) {
        if (Alive(s)) keep.push_back(s);
        if (!Restarted(s)) returnable.push_back(s);
      }
      if (keep.empty()) {
        for (uint32_t s : chain.servers()) {
          if (!OffersNamedCopy(i, s)) continue;
          keep = {s};
          chain.set_resumed_from(current_.members().at(s).incarnation());
          chain.set_restored_at(0);
          break;
        }
      }
      if (keep.empty()) keep = returnable;
      chain.mutable_servers()->Assign(keep.begin(), keep.end());
      std::vector<uint32_t> joining;
      for (uint32_t s : chain.joining()) {
        if (Alive(s)) joining.push_back(s);
      }
      chain.mutable_joining()->Assign(joining.begin(), joining.end());
    }
  }

  // 1b. A server its predecessor cannot get to acknowledge leaves the chain.
  void DropStuck() {
    for (int i = 0; i < next_.shards_size(); ++i) {
      proto::ShardChain* chain = next_.mutable_shards(i);
      std::vector<uint32_t> joining;
      for (uint32_t s : chain->joining()) {
        if (!Stuck(i, s)) joining.push_back(s);
      }
      chain->mutable_joining()->Assign(joining.begin(), joining.end());
      for (uint32_t s : std::vector<uint32_t>(chain->servers().begin(), chain->servers().end())) {
        int others = 0;
        for (uint32_t o : chain->servers()) others += o != s && Alive(o) ? 1 : 0;
        if (Stuck(i, s) && others > 0) Erase(chain->mutable_servers(), s);
      }
    }
  }

  // 2. Finished copies join their chain's end.
  void JoinFinishedCopies() {
    for (int i = 0; i < next_.shards_size(); ++i) {
      proto::ShardChain* chain = next_.mutable_shards(i);
      std::vector<uint32_t> still;
      for (uint32_t s : chain->joining()) {
        auto it = inputs_.synced.find({i, s});
        if (it != inputs_.synced.end() && it->second == current_.members().at(s).incarnation() &&
            !chain->servers().empty() && Alive(chain->servers(0))) {
          chain->add_servers(s);
        } else {
          still.push_back(s);
        }
      }
      chain->mutable_joining()->Assign(still.begin(), still.end());
    }
  }

  // 3. Draining servers, and servers beyond r after a rebalancing copy,
  // leave chains that no longer need them.
  void LeaveUnneeded(int want) {
    const int r = static_cast<int>(current_.replicas());
    for (proto::ShardChain& chain : *next_.mutable_shards()) {
      auto staying = [&] {
        int n = 0;
        for (uint32_t s : chain.servers()) n += draining_.count(s) ? 0 : 1;
        return n;
      };
      for (uint32_t d : std::vector<uint32_t>(chain.servers().begin(), chain.servers().end())) {
        if (draining_.count(d) && staying() >= std::max(want, 1)) {
          Erase(chain.mutable_servers(), d);
          --load_[d];
        }
      }
      while (staying() > r && chain.joining().empty()) {
        // The most loaded server but the newest member gives its copy up.
        uint32_t victim = chain.servers(0);
        for (int k = 0; k + 1 < chain.servers_size(); ++k) {
          if (load_[chain.servers(k)] >= load_[victim]) victim = chain.servers(k);
        }
        Erase(chain.mutable_servers(), victim);
        --load_[victim];
      }
    }
  }

  // The live, non-draining server holding the fewest shards that could
  // join `shard`'s chain (lowest id on ties).
  std::optional<uint32_t> Candidate(int shard) {
    const proto::ShardChain& chain = next_.shards(shard);
    std::optional<uint32_t> best;
    bool best_returns = false;
    for (const auto& [id, member] : inputs_.live) {
      if (draining_.count(id) || Contains(chain.servers(), id) || Contains(chain.joining(), id) ||
          inputs_.stuck.count({shard, id})) {
        continue;
      }
      // A server back with its kept copy of the shard goes first.
      const bool returns = inputs_.returning.count({shard, id}) > 0;
      if (!best || (returns && !best_returns) ||
          (returns == best_returns && load_[id] < load_[*best])) {
        best = id;
        best_returns = returns;
      }
    }
    return best;
  }

  // 4. Chains short of r servers get a joining one.
  void AddJoining(int want) {
    for (int i = 0; i < next_.shards_size(); ++i) {
      proto::ShardChain& chain = *next_.mutable_shards(i);
      // Lost (every server of the chain restarted): with checkpoints, the
      // least loaded live servers become its chain and load the newest one.
      if (chain.servers().empty() && inputs_.rebuild_lost) {
        Rebuild(i, want);
        continue;
      }
      // Lost, or waiting for its servers to come back: nothing to copy from.
      if (chain.servers().empty() || !Alive(chain.servers(0))) continue;
      int have = chain.joining_size();
      for (uint32_t s : chain.servers()) have += draining_.count(s) ? 0 : 1;
      // A server away that kept its copy of the shard on disk keeps its
      // place while it may come back (its grace period).
      for (auto r = inputs_.returning.lower_bound({i, 0});
           r != inputs_.returning.end() && r->first == i; ++r) {
        if (!inputs_.live.count(r->second) && !Contains(chain.servers(), r->second) &&
            !Contains(chain.joining(), r->second)) {
          ++have;
        }
      }
      while (have < want) {
        std::optional<uint32_t> s = Candidate(i);
        if (!s) break;
        chain.add_joining(*s);
        ++load_[*s];
        ++have;
      }
    }
  }

  // A lost chain, rebuilt: one server loads the newest checkpoint; the
  // others copy it from that one and join.
  void Rebuild(int shard, int want) {
    proto::ShardChain& chain = *next_.mutable_shards(shard);
    chain.clear_joining();
    while (chain.servers_size() + chain.joining_size() < want) {
      std::optional<uint32_t> s = Candidate(shard);
      if (!s) break;
      if (chain.servers().empty()) {
        chain.add_servers(*s);
      } else {
        chain.add_joining(*s);
      }
      ++load_[*s];
    }
    if (!chain.servers().empty()) {
      chain.set_restored_at(current_.version() + 1);
      chain.set_resumed_from(0);
    }
  }

  // 5. Added servers take shards from the most loaded servers.
  void GiveToAdded(int usable) {
    int total = 0;
    for (const auto& [id, n] : load_) total += n;
    for (uint32_t a : inputs_.adding) {
      if (!inputs_.live.count(a) || draining_.count(a)) continue;
      const int target = usable > 0 ? total / usable : 0;
      while (load_[a] < target) {
        int best_shard = -1, best_load = -1;
        for (int i = 0; i < next_.shards_size(); ++i) {
          const proto::ShardChain& chain = next_.shards(i);
          if (chain.servers().empty() || !Alive(chain.servers(0)) || !chain.joining().empty() ||
              Contains(chain.servers(), a) || inputs_.stuck.count({i, a})) {
            continue;
          }
          for (uint32_t s : chain.servers()) {
            if (load_[s] > best_load) best_load = load_[s], best_shard = i;
          }
        }
        if (best_shard < 0 || best_load <= load_[a] + 1) break;
        next_.mutable_shards(best_shard)->add_joining(a);
        ++load_[a];
      }
    }
  }

  // Members: exactly the servers named in a chain, each with the
  // incarnation that holds its copies (a server kept while not live keeps
  // the one it had).
  void SetMembers() {
    next_.clear_members();
    for (const proto::ShardChain& chain : next_.shards()) {
      for (auto list : {&chain.servers(), &chain.joining()}) {
        for (uint32_t s : *list) {
          auto known = current_.members().find(s);
          proto::MemberRecord& member = (*next_.mutable_members())[s];
          member = known != current_.members().end() && !Restarted(s) ? known->second
                                                                      : inputs_.live.at(s);
          member.clear_kept();  // for NextRing only
        }
      }
    }
  }

  const proto::RingRecord& current_;
  const RingInputs& inputs_;
  const std::set<uint32_t> draining_;
  proto::RingRecord next_;
  std::map<uint32_t, int> load_;  // chains each server is in (step 3 on)
};

}  // namespace

std::optional<proto::RingRecord> NextRing(const proto::RingRecord& current,
                                          const RingInputs& inputs) {
  return RingPlanner(current, inputs).Plan();
}

}  // namespace ps
