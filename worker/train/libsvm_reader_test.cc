#include "worker/train/libsvm_reader.h"

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Writes `text` to TEST_TMPDIR/name as is.
std::string WritePlain(const std::string& name, const std::string& text) {
  const std::string path = TestTmpDir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  EXPECT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
  EXPECT_EQ(std::fclose(f), 0);
  return path;
}

// Writes `text` gzip-compressed to TEST_TMPDIR/name.
std::string WriteGzip(const std::string& name, const std::string& text) {
  const std::string path = TestTmpDir() + "/" + name;
  gzFile f = gzopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return path;
  if (!text.empty()) {
    EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
              static_cast<int>(text.size()));
  }
  EXPECT_EQ(gzclose(f), Z_OK);
  return path;
}

std::string ReadBytes(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

std::unique_ptr<LibsvmReader> OpenOrDie(const std::string& path,
                                        const LibsvmOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<LibsvmReader>> reader = LibsvmReader::Open(path, options);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? std::move(*reader) : nullptr;
}

// Every example of the file, or the first error.
absl::StatusOr<std::vector<SparseExample>> ReadAll(LibsvmReader& reader) {
  std::vector<SparseExample> all;
  SparseExample ex;
  for (;;) {
    absl::StatusOr<bool> got = reader.Next(&ex);
    if (!got.ok()) return got.status();
    if (!*got) return all;
    all.push_back(ex);
  }
}

absl::StatusOr<std::vector<SparseExample>> ReadText(const std::string& name,
                                                    const std::string& text,
                                                    const LibsvmOptions& options = {}) {
  const std::string path = WritePlain(name, text);
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path, options);
  if (reader == nullptr) return absl::InternalError("open failed");
  return ReadAll(*reader);
}

// The error of reading a one-line file holding `line`.
absl::Status LineError(const std::string& name, const std::string& line) {
  absl::StatusOr<std::vector<SparseExample>> all = ReadText(name, line + "\n");
  EXPECT_FALSE(all.ok()) << "'" << line << "' was accepted";
  return all.status();
}

TEST(LibsvmReaderTest, ReadsLabelsQidAndFeatures) {
  absl::StatusOr<std::vector<SparseExample>> all =
      ReadText("basic.svm", "1 3:0.5 10:1\n0 qid:7 2:-2.5e1\n-1 1:1\n+1\n");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  const std::vector<SparseExample>& e = *all;
  EXPECT_EQ(e[0].label, 1.0f);
  EXPECT_FALSE(e[0].has_qid);
  EXPECT_THAT(e[0].indices, ElementsAre(3u, 10u));
  EXPECT_THAT(e[0].values, ElementsAre(0.5f, 1.0f));
  EXPECT_EQ(e[1].label, 0.0f);
  EXPECT_TRUE(e[1].has_qid);
  EXPECT_EQ(e[1].qid, 7u);
  EXPECT_THAT(e[1].indices, ElementsAre(2u));
  EXPECT_THAT(e[1].values, ElementsAre(-25.0f));
  EXPECT_EQ(e[2].label, 0.0f);  // -1
  EXPECT_EQ(e[3].label, 1.0f);  // +1, no features
  EXPECT_TRUE(e[3].indices.empty());
}

TEST(LibsvmReaderTest, ReadsFieldIndexValueLines) {
  absl::StatusOr<std::vector<SparseExample>> all =
      ReadText("ffm.svm",
               "1 0:3:0.5 7:10:1 65535:18446744073709551615:-2\n"
               "0 qid:4 2:5:1\n"
               "1 3:0.5\n"  // lines may differ in form; this one has no fields
               "0 1:1:1\t\t2:2:2  # comment 3:3:3\r\n"
               "1\n");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 5u);
  const std::vector<SparseExample>& e = *all;
  EXPECT_THAT(e[0].fields, ElementsAre(0, 7, 65535));
  EXPECT_THAT(e[0].indices, ElementsAre(3u, 10u, UINT64_MAX));
  EXPECT_THAT(e[0].values, ElementsAre(0.5f, 1.0f, -2.0f));
  EXPECT_EQ(e[0].field(2), 65535u);
  EXPECT_EQ(e[0].line, 1);
  EXPECT_TRUE(e[1].has_qid);
  EXPECT_THAT(e[1].fields, ElementsAre(2));
  EXPECT_THAT(e[1].indices, ElementsAre(5u));
  // index:value: no fields, and every feature reads as field 0.
  EXPECT_TRUE(e[2].fields.empty());
  EXPECT_THAT(e[2].indices, ElementsAre(3u));
  EXPECT_EQ(e[2].field(0), 0u);
  EXPECT_THAT(e[3].fields, ElementsAre(1, 2));  // CRLF, tabs, a comment
  EXPECT_THAT(e[3].values, ElementsAre(1.0f, 2.0f));
  EXPECT_EQ(e[3].line, 4);
  EXPECT_TRUE(e[4].fields.empty());
  EXPECT_TRUE(e[4].indices.empty());
}

TEST(LibsvmReaderTest, FieldErrorsNameLineAndColumn) {
  struct Case {
    std::string line;
    int column;
    std::string expected;
  };
  const std::vector<Case> cases = {
      // A line may not mix the two forms, in either order.
      {"1 1:2:1 3:1", 9,
       "expected field:index:value, got '3:1': the line's first feature has a field, and a line "
       "may not mix index:value and field:index:value"},
      {"1 3:1 4:5:1", 7,
       "expected index:value, got '4:5:1': the line's first feature has no field, and a line "
       "may not mix index:value and field:index:value"},
      {"1 1:2:1 3", 9, "expected field:index:value, got '3'"},
      {"1 65536:2:1", 3, "expected field:index:value with field <= 65535, got '65536:2:1'"},
      {"1 99999999999999999999:2:1", 3,
       "expected field:index:value with field <= 65535, got '99999999999999999999:2:1'"},
      {"1 x:2:1", 3, "expected field:index:value with an unsigned integer field, got 'x:2:1'"},
      {"1 :2:1", 3, "expected field:index:value with an unsigned integer field, got ':2:1'"},
      {"1 4::1", 5, "expected field:index:value with an unsigned integer index, got '4::1'"},
      {"1 4:x:1", 5, "expected field:index:value with an unsigned integer index, got '4:x:1'"},
      {"1 4:-2:1", 5, "expected field:index:value with an unsigned integer index, got '4:-2:1'"},
      {"1 4:18446744073709551616:1", 5,
       "expected field:index:value with index <= 18446744073709551615 (2^64-1), got "
       "'4:18446744073709551616:1'"},
      {"1 4:2:", 7, "expected field:index:value with a finite number as value, got '4:2:'"},
      {"1 4:2:abc", 7, "expected field:index:value with a finite number as value, got '4:2:abc'"},
      {"1 4:2:inf", 7, "expected field:index:value with a finite number as value, got '4:2:inf'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    const std::string name = "ffm-bad.svm";
    absl::StatusOr<std::vector<SparseExample>> all = ReadText(name, "1 1:1:1\n" + c.line + "\n");
    ASSERT_FALSE(all.ok()) << "accepted";
    EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(all.status().message()),
              absl::StrCat(TestTmpDir(), "/", name, ":2:", c.column, ": ", c.expected));
  }
  // Skipped and counted like any bad line.
  LibsvmOptions options;
  options.skip_bad_lines = true;
  absl::StatusOr<std::vector<SparseExample>> all =
      ReadText("ffm-skip.svm", "1 1:1:1\n0 1:1:1 2:1\n1 2:2:1\n", options);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_THAT((*all)[1].fields, ElementsAre(2));
  EXPECT_EQ((*all)[1].line, 3);
}

TEST(LibsvmReaderTest, LabelSpellings) {
  absl::StatusOr<std::vector<SparseExample>> all =
      ReadText("labels.svm", "0\n1\n-1\n+1\n0.0\n1.0\n-1.0\n1e0\n-0\n");
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<float> labels;
  for (const SparseExample& e : *all) labels.push_back(e.label);
  EXPECT_THAT(labels, ElementsAre(0, 1, 0, 1, 0, 1, 0, 1, 0));
}

TEST(LibsvmReaderTest, SkipsEmptyAndCommentLinesAndTrailingComments) {
  const std::string text =
      "# header comment\n"
      "\n"
      "1 1:1 # trailing comment 2:2\n"
      "   \t \n"
      "  # indented comment\n"
      "0 2:2#comment right after a value\n";
  const std::string path = WritePlain("comments.svm", text);
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path);
  absl::StatusOr<std::vector<SparseExample>> all = ReadAll(*reader);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_THAT((*all)[0].indices, ElementsAre(1u));
  EXPECT_THAT((*all)[1].indices, ElementsAre(2u));
  EXPECT_THAT((*all)[1].values, ElementsAre(2.0f));
  EXPECT_EQ(reader->lines_read(), 6);
  EXPECT_EQ(reader->examples_read(), 2);
  EXPECT_EQ(reader->bytes_read(), static_cast<int64_t>(text.size()));
}

TEST(LibsvmReaderTest, CrlfTrailingSpacesTabsAndNoFinalNewline) {
  absl::StatusOr<std::vector<SparseExample>> all =
      ReadText("crlf.svm", "1 1:1 2:0.5\r\n0\t3:1\t\t4:2  \t\r\n  1   5:1   \n0 6:1");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_THAT((*all)[0].values, ElementsAre(1.0f, 0.5f));
  EXPECT_THAT((*all)[1].indices, ElementsAre(3u, 4u));
  EXPECT_THAT((*all)[1].values, ElementsAre(1.0f, 2.0f));
  EXPECT_THAT((*all)[2].indices, ElementsAre(5u));
  EXPECT_THAT((*all)[3].indices, ElementsAre(6u));
}

TEST(LibsvmReaderTest, IndexZeroUnsortedAndDuplicatesKeptAsGiven) {
  absl::StatusOr<std::vector<SparseExample>> all = ReadText("order.svm", "1 9:1 0:2 4:3 9:4 0:5\n");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_THAT((*all)[0].indices, ElementsAre(9u, 0u, 4u, 9u, 0u));
  EXPECT_THAT((*all)[0].values, ElementsAre(1.0f, 2.0f, 3.0f, 4.0f, 5.0f));
}

TEST(LibsvmReaderTest, IndicesUpTo2To64Minus1) {
  absl::StatusOr<std::vector<SparseExample>> all =
      ReadText("big.svm", "1 9223372036854775809:1 18446744073709551615:1 007:1\n");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT((*all)[0].indices,
              ElementsAre(uint64_t{9223372036854775809u}, UINT64_MAX, uint64_t{7}));

  absl::Status s = LineError("too-big.svm", "1 5:1 18446744073709551616:1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith(TestTmpDir() + "/too-big.svm:1:7: expected index:value"));
  EXPECT_THAT(s.message(), HasSubstr("index <= 18446744073709551615"));
  EXPECT_THAT(s.message(), HasSubstr("got '18446744073709551616:1'"));

  // Past 19 digits each digit is checked, leading zeros included.
  all = ReadText("zeros.svm",
                 "1 0000000000000000000000007:1 000000018446744073709551615:1 "
                 "10000000000000000000:1\n");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT((*all)[0].indices,
              ElementsAre(uint64_t{7}, UINT64_MAX, uint64_t{10000000000000000000u}));
  s = LineError("zeros-too-big.svm", "1 0000000018446744073709551616:1");
  EXPECT_THAT(s.message(), HasSubstr("index <= 18446744073709551615"));
  s = LineError("twenty-nines.svm", "1 99999999999999999999:1");
  EXPECT_THAT(s.message(), HasSubstr("index <= 18446744073709551615"));
}

TEST(LibsvmReaderTest, ValueSpellings) {
  absl::StatusOr<std::vector<SparseExample>> all =
      ReadText("values.svm", "1 1:+2 2:.5 3:-0 4:1e-3 5:10 6:1.0 7:1e-60\n");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT((*all)[0].values, ElementsAre(2.0f, 0.5f, 0.0f, 1e-3f, 10.0f, 1.0f, 0.0f));
}

TEST(LibsvmReaderTest, QidParsing) {
  absl::StatusOr<std::vector<SparseExample>> all =
      ReadText("qid.svm", "1 qid:0 1:1\n0 qid:18446744073709551615\n1 2:1\n");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE((*all)[0].has_qid);
  EXPECT_EQ((*all)[0].qid, 0u);
  EXPECT_THAT((*all)[0].indices, ElementsAre(1u));
  EXPECT_EQ((*all)[1].qid, UINT64_MAX);
  EXPECT_FALSE((*all)[2].has_qid);

  absl::Status s = LineError("qid-empty.svm", "1 qid: 1:1");
  EXPECT_THAT(std::string(s.message()),
              StartsWith(TestTmpDir() + "/qid-empty.svm:1:3: expected qid:N"));
  EXPECT_THAT(s.message(), HasSubstr("got 'qid:'"));
  s = LineError("qid-late.svm", "1 1:1 qid:3");
  EXPECT_THAT(std::string(s.message()),
              StartsWith(TestTmpDir() + "/qid-late.svm:1:7: expected index:value"));
  EXPECT_THAT(s.message(), HasSubstr("qid:N must directly follow the label"));
  s = LineError("qid-bad.svm", "1 qid:x");
  EXPECT_THAT(std::string(s.message()),
              StartsWith(TestTmpDir() + "/qid-bad.svm:1:3: expected qid:N"));
}

// Each malformed token, with the column the message must point at and what
// it must say.
TEST(LibsvmReaderTest, BadTokensNameFileLineColumnAndExpectation) {
  struct Case {
    std::string line;
    int column;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"1 3:abc", 5, "expected index:value with a finite number as value, got '3:abc'"},
      {"1 x:1", 3, "expected index:value with an unsigned integer index, got 'x:1'"},
      {"1 2:1 3", 7, "expected index:value, got '3'"},
      {"1 3:", 5, "expected index:value with a finite number as value, got '3:'"},
      {"1 :1", 3, "expected index:value with an unsigned integer index, got ':1'"},
      {"1 -3:1", 3, "expected index:value with an unsigned integer index, got '-3:1'"},
      {"1 3:nan", 5, "expected index:value with a finite number as value, got '3:nan'"},
      {"1 3:1e99", 5, "expected index:value with a finite number as value, got '3:1e99'"},
      {"1 3:1:2:4", 7, "expected field:index:value with a finite number as value, got '3:1:2:4'"},
      {"1  \t 3:0x10", 8, "expected index:value with a finite number as value, got '3:0x10'"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string name = absl::StrCat("bad-token-", i, ".svm");
    // A good line first, so the bad one is line 2.
    absl::StatusOr<std::vector<SparseExample>> all = ReadText(name, "0 1:1\n" + c.line + "\n");
    ASSERT_FALSE(all.ok()) << c.line;
    EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(all.status().message()),
              absl::StrCat(TestTmpDir(), "/", name, ":2:", c.column, ": ", c.expected))
        << c.line;
  }
}

TEST(LibsvmReaderTest, MissingAndBadLabels) {
  absl::Status s = LineError("no-label.svm", "3:1 4:1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), TestTmpDir() +
                             "/no-label.svm:1:1: expected a label (0, 1, -1 or +1) "
                             "first, got '3:1'; is the label missing?");
  for (const char* label : {"2", "0.5", "yes", "-2", "1x", "+-1", "inf"}) {
    s = LineError("bad-label.svm", absl::StrCat("  ", label, " 1:1"));
    EXPECT_EQ(s.message(), absl::StrCat(TestTmpDir(),
                                        "/bad-label.svm:1:3: expected a label (0, 1, "
                                        "-1 or +1), got '",
                                        label, "'"));
  }
}

TEST(LibsvmReaderTest, ErrorIsStickyUntilRewind) {
  const std::string path = WritePlain("sticky.svm", "1 1:1\n1 bad\n0 2:1\n");
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path);
  SparseExample ex;
  ASSERT_TRUE(*reader->Next(&ex));
  absl::StatusOr<bool> got = reader->Next(&ex);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), StartsWith(path + ":2:3: "));
  EXPECT_EQ(reader->Next(&ex).status(), got.status());
  ASSERT_TRUE(reader->Rewind().ok());
  got = reader->Next(&ex);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got);
}

TEST(LibsvmReaderTest, SkipBadLinesCountsAndKeepsFirstMessages) {
  std::string text;
  for (int i = 0; i < 20; ++i) {
    absl::StrAppend(&text, "1 ", i, ":1\n");
    absl::StrAppend(&text, "1 ", i, ":oops\n");
  }
  const std::string path = WritePlain("skip.svm", text);
  LibsvmOptions options;
  options.skip_bad_lines = true;
  options.max_bad_line_messages = 3;
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path, options);
  absl::StatusOr<std::vector<SparseExample>> all = ReadAll(*reader);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 20u);
  EXPECT_THAT((*all)[19].indices, ElementsAre(19u));
  EXPECT_EQ(reader->bad_lines(), 20);
  EXPECT_EQ(reader->lines_read(), 40);
  ASSERT_EQ(reader->bad_line_messages().size(), 3u);
  EXPECT_EQ(reader->bad_line_messages()[0],
            path + ":2:5: expected index:value with a finite number as value, got '0:oops'");
  EXPECT_THAT(reader->bad_line_messages()[2], StartsWith(path + ":6:5: "));
}

TEST(LibsvmReaderTest, ReadsGzipInput) {
  const std::string text = "1 1:1 2:0.25\n0 3:1\n";
  const std::string path = WriteGzip("small.svm.gz", text);
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path);
  EXPECT_TRUE(reader->is_gzip());
  absl::StatusOr<std::vector<SparseExample>> all = ReadAll(*reader);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_THAT((*all)[0].values, ElementsAre(1.0f, 0.25f));
  EXPECT_EQ(reader->bytes_read(), static_cast<int64_t>(text.size()));

  // Detection is by content, not by name.
  const std::string plain = WritePlain("plain-named.gz", text);
  reader = OpenOrDie(plain);
  EXPECT_FALSE(reader->is_gzip());
  all = ReadAll(*reader);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 2u);
}

// Lines of varied length, many of them longer than the block.
std::string ManyLines(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, i % 2, (i % 5 == 0 ? " qid:" : ""), (i % 5 == 0 ? "9 " : ""));
    for (int j = 0; j <= i % 7; ++j) absl::StrAppend(&text, " ", i * 10 + j, ":", j, ".5");
    text += i % 3 == 0 ? "\r\n" : "\n";
    if (i % 11 == 0) text += "# comment spanning blocks\n\n";
  }
  return text;
}

void ExpectManyLines(const std::vector<SparseExample>& all, int n) {
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const SparseExample& e = all[i];
    EXPECT_EQ(e.label, static_cast<float>(i % 2)) << i;
    EXPECT_EQ(e.has_qid, i % 5 == 0) << i;
    ASSERT_EQ(e.indices.size(), static_cast<size_t>(i % 7 + 1)) << i;
    for (int j = 0; j <= i % 7; ++j) {
      EXPECT_EQ(e.indices[j], static_cast<uint64_t>(i * 10 + j));
      EXPECT_EQ(e.values[j], j + 0.5f);
    }
  }
}

TEST(LibsvmReaderTest, LinesSpanningTinyBlocks) {
  const int n = 300;
  const std::string text = ManyLines(n);
  LibsvmOptions options;
  options.block_size = 7;
  for (bool gzip : {false, true}) {
    const std::string path =
        gzip ? WriteGzip("blocks.svm.gz", text) : WritePlain("blocks.svm", text);
    std::unique_ptr<LibsvmReader> reader = OpenOrDie(path, options);
    absl::StatusOr<std::vector<SparseExample>> all = ReadAll(*reader);
    ASSERT_TRUE(all.ok()) << all.status();
    ExpectManyLines(*all, n);
    EXPECT_EQ(reader->bytes_read(), static_cast<int64_t>(text.size()));
  }
}

TEST(LibsvmReaderTest, NextBatchAndRewindForEpochs) {
  const int n = 50;
  const std::string path = WriteGzip("epochs.svm.gz", ManyLines(n));
  LibsvmOptions options;
  options.block_size = 13;
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path, options);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<SparseExample> all, batch;
    for (;;) {
      absl::Status s = reader->NextBatch(8, &batch);
      ASSERT_TRUE(s.ok()) << s;
      if (batch.empty()) break;
      EXPECT_LE(batch.size(), 8u);
      all.insert(all.end(), batch.begin(), batch.end());
    }
    ExpectManyLines(all, n);
    EXPECT_EQ(reader->examples_read(), n);
    ASSERT_TRUE(reader->Rewind().ok());
    EXPECT_EQ(reader->examples_read(), 0);
    EXPECT_EQ(reader->lines_read(), 0);
  }
}

TEST(LibsvmReaderTest, NextBatchReturnsExamplesBeforeAnError) {
  const std::string path = WritePlain("batch-error.svm", "1 1:1\n0 2:1\n1 3\n0 4:1\n");
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path);
  std::vector<SparseExample> batch(5);
  absl::Status s = reader->NextBatch(10, &batch);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith(path + ":3:3: expected index:value, got '3'"));
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_THAT(batch[1].indices, ElementsAre(2u));
}

TEST(LibsvmReaderTest, EmptyFileHasNoExamples) {
  for (bool gzip : {false, true}) {
    const std::string path = gzip ? WriteGzip("empty.svm.gz", "") : WritePlain("empty.svm", "");
    std::unique_ptr<LibsvmReader> reader = OpenOrDie(path);
    SparseExample ex;
    absl::StatusOr<bool> got = reader->Next(&ex);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE(*got);
  }
}

TEST(LibsvmReaderTest, ConcatenatedGzipMembers) {
  const std::string a = ReadBytes(WriteGzip("part-a.gz", "1 1:1\n"));
  const std::string b = ReadBytes(WriteGzip("part-b.gz", "0 2:1\n"));
  const std::string path = WritePlain("joined.svm.gz", a + b);
  LibsvmOptions options;
  options.block_size = 5;
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path, options);
  absl::StatusOr<std::vector<SparseExample>> all = ReadAll(*reader);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_THAT((*all)[1].indices, ElementsAre(2u));
}

TEST(LibsvmReaderTest, TruncatedAndCorruptGzipAreDataLoss) {
  std::string text;
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&text, i % 2, " ", i, ":1 ", i * 7, ":0.5\n");
  const std::string whole = ReadBytes(WriteGzip("whole.svm.gz", text));

  const std::string cut = WritePlain("cut.svm.gz", whole.substr(0, whole.size() / 2));
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(cut);
  absl::StatusOr<std::vector<SparseExample>> all = ReadAll(*reader);
  EXPECT_EQ(all.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(all.status().message()), StartsWith(cut + ": truncated gzip stream"));

  std::string damaged = whole;
  for (size_t i = 20; i < 60; ++i) damaged[i] = static_cast<char>(0xff);
  const std::string bad = WritePlain("damaged.svm.gz", damaged);
  reader = OpenOrDie(bad);
  all = ReadAll(*reader);
  EXPECT_EQ(all.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(all.status().message()), StartsWith(bad + ": corrupt gzip data"));
}

TEST(LibsvmReaderTest, OpenErrors) {
  const std::string missing = TestTmpDir() + "/no-such-file.svm";
  absl::StatusOr<std::unique_ptr<LibsvmReader>> reader = LibsvmReader::Open(missing);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(reader.status().message()), StartsWith(missing + ": cannot open ("));

  reader = LibsvmReader::Open(TestTmpDir());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(reader.status().message(), HasSubstr("is a directory"));

  LibsvmOptions options;
  options.block_size = 0;
  reader = LibsvmReader::Open(WritePlain("zero-block.svm", "1\n"), options);
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LibsvmReaderTest, OverlongLineIsRejected) {
  const std::string path = WritePlain("long-line.svm", "1 1:1\n1" + std::string(100, ' ') + "\n");
  LibsvmOptions options;
  options.block_size = 16;
  options.max_line_bytes = 64;
  options.skip_bad_lines = true;
  std::unique_ptr<LibsvmReader> reader = OpenOrDie(path, options);
  absl::StatusOr<std::vector<SparseExample>> all = ReadAll(*reader);
  EXPECT_EQ(all.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(all.status().message()),
              StartsWith(path + ":2: line is longer than 64 bytes"));
}

}  // namespace
}  // namespace ps
