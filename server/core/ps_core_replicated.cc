// PsCore under replication (ps_core.h): what a copy learns from its
// predecessor in the chain (ApplyForwarded: the log places each entry, and
// applying it and appending it are one hold of the order lock), the entry a
// primary forwards for a push of its own, and the barrier writers wait on
// before answering. The push path both share (Apply, ApplyLocked) is in
// ps_core.cc.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/table_def.h"
#include "server/core/ps_core.h"

namespace ps {

proto::ForwardEntry PsCore::ForwardEntryOf(const PushArgs& args,
                                           const SparseTable::Decisions& decisions) {
  proto::ForwardEntry entry;
  proto::PushRequest* p = entry.mutable_push();
  const proto::PushRequest& h = args.header;
  p->set_table(h.table());
  p->set_worker_id(h.worker_id());
  p->set_clock(h.clock());
  p->set_request_id(h.request_id());
  p->set_round_parts(h.round_parts());
  if (args.clock_only) return entry;
  // A copy scales a LARS table's gradient by the same ratio.
  if (h.has_layer_norms()) *p->mutable_layer_norms() = h.layer_norms();
  if (args.keys.is_list) {
    p->set_key_list(reinterpret_cast<const char*>(args.keys.keys.data()),
                    args.keys.keys.size() * sizeof(uint64_t));
  } else {
    for (const KeySpec::Range& r : args.keys.ranges) {
      proto::KeyRange* range = p->add_ranges();
      range->set_begin(r.begin);
      range->set_end(r.end);
    }
  }
  p->set_values(reinterpret_cast<const char*>(args.values.data()),
                args.values.size() * sizeof(float));
  if (!decisions.refused.empty() || !decisions.evicted.empty()) {
    proto::SparseDecisions* d = entry.mutable_decisions();
    d->mutable_refused()->Assign(decisions.refused.begin(), decisions.refused.end());
    d->mutable_evicted()->Assign(decisions.evicted.begin(), decisions.evicted.end());
  }
  return entry;
}

void PsCore::AfterReplicated(ReplicationLog::Done done) {
  if (log_ == nullptr) {
    done(absl::OkStatus());
  } else {
    log_->Barrier(std::move(done));
  }
}

void PsCore::RunOrdered(const std::function<void()>& fn) {
  absl::MutexLock lock(&order_mu_);
  fn();
}

absl::Status PsCore::CheckWritable() const {
  return log_ == nullptr ? absl::OkStatus() : log_->CheckWritable();
}

absl::Status PsCore::ApplyForwarded(const proto::ForwardEntry& entry, bool* refused) {
  *refused = false;
  if (log_ == nullptr) {
    return absl::FailedPreconditionError("forwarded entry on a core without replication");
  }
  PushArgs args;
  if (entry.has_heartbeat()) {
    // The primary took it; a copy whose view of the worker differs (its
    // lease was counted from a little later) keeps what it has. Taken
    // before the order lock: taking it may run parked calls, which take the
    // order lock themselves.
    (void)TakeHeartbeat(entry.heartbeat());
  } else if (entry.has_push()) {
    if (absl::Status s = DecodePush(entry.push(), nullptr, &args); !s.ok()) return s;
    if (absl::Status s = CheckPush(args); !s.ok()) return s;
  } else if (!entry.has_create_table() && !entry.has_epoch_start() && !entry.has_evict()) {
    return absl::InvalidArgumentError(
        "forwarded entry is neither a push, a table creation, a heartbeat, an eviction nor an "
        "epoch start");
  }
  // Whether the entry belongs here, applying it and appending it: one hold
  // of the order lock, under which the copy's role also changes.
  bool created = false;
  {
    absl::MutexLock order(&order_mu_);
    absl::StatusOr<bool> place = log_->Place(entry);
    if (!place.ok()) {
      *refused = true;
      return place.status();
    }
    if (!*place) return absl::OkStatus();  // this copy holds it already
    if (entry.has_create_table()) {
      absl::StatusOr<bool> made = store_.CreateTable(entry.create_table().table());
      if (!made.ok()) return made.status();
      created = *made;
    } else if (entry.has_evict()) {
      store_.EvictRows(entry.evict().table(),
                       absl::MakeConstSpan(entry.evict().keys().data(), entry.evict().keys_size()));
    } else if (entry.has_push()) {
      return ApplyLocked(args, &entry).status();  // appends the entry
    }
    log_->Append(entry);
  }
  if (created) {
    LogEvent(LogPrefix(),
             absl::StrCat("table created: ", TableDefSummary(entry.create_table().table())));
  }
  return absl::OkStatus();
}

}  // namespace ps
