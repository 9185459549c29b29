#include "worker/client/push_report.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/client/call_runner.h"

namespace ps {

namespace {

PushPartReport::Outcome OutcomeOf(const absl::Status& status) {
  if (status.ok()) return PushPartReport::Outcome::kApplied;
  // Without an answer the request may have been applied; a server's error
  // means nothing of it was.
  return IsRetryable(status) ? PushPartReport::Outcome::kUnknown
                             : PushPartReport::Outcome::kNotApplied;
}

// "<first error>. Of this push's 3 parts, applied: ...; not applied: ...;
// no answer (may have been applied): ..."
absl::Status WithPartList(const absl::Status& first_error, const PushReport& report,
                          const Transport& transport) {
  std::vector<std::string> applied, refused, unknown;
  for (const PushPartReport& p : report.parts) {
    std::string item = absl::StrCat(transport.ServerName(p.server), " ", p.keys);
    switch (p.outcome) {
      case PushPartReport::Outcome::kApplied:
        applied.push_back(std::move(item));
        break;
      case PushPartReport::Outcome::kNotApplied:
        refused.push_back(absl::StrCat(item, " (", absl::StatusCodeToString(p.status.code()), ")"));
        break;
      case PushPartReport::Outcome::kUnknown:
        unknown.push_back(absl::StrCat(item, " (", absl::StatusCodeToString(p.status.code()), ")"));
        break;
    }
  }
  auto list = [](const std::vector<std::string>& items) {
    return items.empty() ? std::string("none") : absl::StrJoin(items, "; ");
  };
  std::string message =
      absl::StrCat(first_error.message(), ". Of this push's ", report.parts.size(),
                   " parts, applied: ", list(applied), ". Not applied: ", list(refused));
  if (!unknown.empty()) {
    absl::StrAppend(&message, ". No answer (may have been applied): ", list(unknown));
  }
  return absl::Status(first_error.code(), message);
}

}  // namespace

PushPartReport ReportPart(const Part& part, const absl::Status& status) {
  PushPartReport r;
  r.server = part.server;
  r.table = part.table;
  r.op = part.op;
  r.keys = DescribeKeys(part);
  r.outcome = OutcomeOf(status);
  r.status = status;
  return r;
}

absl::Status PushOutcome(absl::Span<const Part> parts, absl::Span<const absl::Status> status,
                         const Transport& transport, PushReport* report) {
  const absl::Status first_error = CallRunner::FirstError(status);
  PushReport local;
  PushReport* out = report != nullptr ? report : &local;
  if (report != nullptr || (!first_error.ok() && parts.size() > 1)) {
    out->parts.clear();
    for (size_t i = 0; i < parts.size(); ++i) out->parts.push_back(ReportPart(parts[i], status[i]));
  }
  if (first_error.ok() || parts.size() == 1) return first_error;
  return WithPartList(first_error, *out, transport);
}

}  // namespace ps
