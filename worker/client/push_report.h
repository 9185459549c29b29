// Push reports: what became of each part (request to one server) of a push,
// and the error of a push that failed part-way, which lists the parts that
// were applied, refused, or may have been.
//
// Plain data and free functions without state; thread-compatible.
#ifndef PS_WORKER_CLIENT_PUSH_REPORT_H_
#define PS_WORKER_CLIENT_PUSH_REPORT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/client/planner.h"
#include "worker/client/transport.h"

namespace ps {

// What became of each part (request to one server) of a push.
struct PushPartReport {
  enum class Outcome {
    kApplied,     // the server acknowledged it (possibly as a duplicate)
    kNotApplied,  // the server refused it (nothing of it was applied)
    kUnknown,     // no answer after every attempt: it may have been applied
  };
  int server = 0;
  std::string table;
  size_t op = 0;     // index of the op in the caller's list (0 for PushKeys)
  std::string keys;  // "table 't' keys [0, 64)" or "table 't' 12 keys"
  Outcome outcome = Outcome::kUnknown;
  absl::Status status;  // OK when applied
  bool applied() const { return outcome == Outcome::kApplied; }
};
struct PushReport {
  std::vector<PushPartReport> parts;
};

// The report of a part whose final status (after every attempt) is `status`.
PushPartReport ReportPart(const Part& part, const absl::Status& status);

// The outcome of a push of `parts` whose final statuses are `status` (one
// per part): OK, or the first error; for a push of several parts, with the
// first error's code and its message followed by "Of this push's 3 parts,
// applied: ...; not applied: ...; no answer (may have been applied): ..."
// (servers named by `transport`). `report`, if given, is replaced by one
// entry per part.
absl::Status PushOutcome(absl::Span<const Part> parts, absl::Span<const absl::Status> status,
                         const Transport& transport, PushReport* report);

}  // namespace ps

#endif  // PS_WORKER_CLIENT_PUSH_REPORT_H_
