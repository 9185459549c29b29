// Push reports: each part's outcome follows from its final status, and the
// error of a push that failed part-way lists what became of every part.
#include "worker/client/push_report.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/client/fake_transport.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using Outcome = PushPartReport::Outcome;

Part DensePart(int server, size_t op, uint64_t begin, uint64_t end) {
  Part part;
  part.server = server;
  part.op = op;
  part.table = "t";
  part.width = 1;
  part.ranges = {{begin, end, 0}};
  return part;
}

TEST(PushReportTest, AnAnswerDecidesTheOutcomeAndNoAnswerLeavesItUnknown) {
  const Part part = DensePart(1, 2, 0, 4);
  const PushPartReport applied = ReportPart(part, absl::OkStatus());
  EXPECT_EQ(applied.outcome, Outcome::kApplied);
  EXPECT_TRUE(applied.applied());
  EXPECT_EQ(applied.server, 1);
  EXPECT_EQ(applied.op, 2u);
  EXPECT_EQ(applied.table, "t");
  EXPECT_EQ(applied.keys, "table 't' keys [0, 4)");
  EXPECT_EQ(ReportPart(part, absl::FailedPreconditionError("not owner")).outcome,
            Outcome::kNotApplied);
  for (const absl::Status& lost :
       {absl::UnavailableError("down"), absl::DeadlineExceededError("late"),
        absl::CancelledError("stopping")}) {
    const PushPartReport r = ReportPart(part, lost);
    EXPECT_EQ(r.outcome, Outcome::kUnknown) << lost;
    EXPECT_FALSE(r.applied());
    EXPECT_EQ(r.status, lost);
  }
}

TEST(PushReportTest, APushOfOnePartFailsWithThatPartsError) {
  FakeTransport transport(2);
  const std::vector<Part> parts = {DensePart(0, 0, 0, 4)};
  const absl::Status refused = absl::InvalidArgumentError("server 0 (fake): Push: NaN");
  EXPECT_EQ(PushOutcome(parts, {refused}, transport, nullptr), refused);
  PushReport report;
  report.parts.resize(5);  // replaced
  EXPECT_EQ(PushOutcome(parts, {refused}, transport, &report), refused);
  ASSERT_EQ(report.parts.size(), 1u);
  EXPECT_EQ(report.parts[0].outcome, Outcome::kNotApplied);
}

TEST(PushReportTest, APushThatFailedPartWayListsEveryPart) {
  FakeTransport transport(3);
  const std::vector<Part> parts = {DensePart(0, 0, 0, 4), DensePart(1, 0, 4, 8),
                                   DensePart(2, 0, 8, 12)};
  const std::vector<absl::Status> status = {
      absl::OkStatus(), absl::FailedPreconditionError("not owner"), absl::UnavailableError("down")};
  PushReport report;
  const absl::Status s = PushOutcome(parts, status, transport, &report);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << "the first error's code";
  EXPECT_EQ(s.message(),
            "not owner. Of this push's 3 parts, applied: server 0 (fake) table 't' keys [0, 4). "
            "Not applied: server 1 (fake) table 't' keys [4, 8) (FAILED_PRECONDITION). "
            "No answer (may have been applied): server 2 (fake) table 't' keys [8, 12) "
            "(UNAVAILABLE)");
  ASSERT_EQ(report.parts.size(), 3u);
  EXPECT_EQ(report.parts[0].outcome, Outcome::kApplied);
  EXPECT_EQ(report.parts[1].outcome, Outcome::kNotApplied);
  EXPECT_EQ(report.parts[2].outcome, Outcome::kUnknown);
  // Without a report, the same error.
  EXPECT_EQ(PushOutcome(parts, status, transport, nullptr), s);
}

TEST(PushReportTest, ASuccessfulPushReportsEveryPartApplied) {
  FakeTransport transport(2);
  const std::vector<Part> parts = {DensePart(0, 0, 0, 4), DensePart(1, 1, 0, 2)};
  PushReport report;
  EXPECT_TRUE(PushOutcome(parts, {absl::OkStatus(), absl::OkStatus()}, transport, &report).ok());
  ASSERT_EQ(report.parts.size(), 2u);
  EXPECT_TRUE(report.parts[0].applied());
  EXPECT_TRUE(report.parts[1].applied());
  EXPECT_EQ(report.parts[1].op, 1u);
}

}  // namespace
}  // namespace ps
