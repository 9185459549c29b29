#include "worker/train/libsvm_generator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/temp_dir.h"
#include "worker/train/auc.h"
#include "worker/train/libsvm_reader.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

std::string ReadBytes(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  if (f == nullptr) return out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

LibsvmGenerator CreateOrDie(const LibsvmGeneratorOptions& options) {
  absl::StatusOr<LibsvmGenerator> gen = LibsvmGenerator::Create(options);
  EXPECT_TRUE(gen.ok()) << gen.status();
  return std::move(*gen);
}

// P(k) of Zipf(n, s), normalised by direct summation.
double ZipfProbability(uint64_t k, uint64_t n, double s) {
  double total = 0;
  for (uint64_t j = 1; j <= n; ++j) total += std::pow(static_cast<double>(j), -s);
  return std::pow(static_cast<double>(k), -s) / total;
}

TEST(ZipfSamplerTest, MatchesProbabilities) {
  constexpr int kSamples = 2000000;
  constexpr uint64_t kN = 1000;
  // Head tables of none, some and all of the ranks: pure rejection-inversion,
  // the mix, and the table alone.
  for (uint32_t head : {0u, 10u, ZipfSampler::kDefaultHeadSize}) {
    for (double s : {0.6, 1.0, 1.1, 2.0}) {
      SCOPED_TRACE(absl::StrCat("head=", head, " s=", s));
      ZipfSampler zipf(kN, s, head);
      SplitMix64 rng(42);
      std::vector<int64_t> counts(kN + 1, 0);
      for (int i = 0; i < kSamples; ++i) {
        const uint64_t k = zipf.Sample(rng);
        ASSERT_GE(k, 1u);
        ASSERT_LE(k, kN);
        ++counts[k];
      }
      for (uint64_t k : {1, 2, 3, 4, 5, 10, 100, 1000}) {
        const double p = ZipfProbability(k, kN, s);
        const double expected = kSamples * p;
        const double sd = std::sqrt(kSamples * p * (1 - p));
        EXPECT_NEAR(counts[k], expected, 5 * sd + 1) << "k=" << k;
      }
    }
  }
}

TEST(ZipfSamplerTest, SmallAndHugeRanges) {
  SplitMix64 rng(1);
  ZipfSampler one(1, 1.1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.Sample(rng), 1u);
  // 10^15 ranks: no table, still in range, and the head is as likely as the
  // law says relative to rank 2.
  ZipfSampler huge(uint64_t{1000000000000000}, 1.1);
  int64_t ones = 0, twos = 0, beyond_billion = 0;
  for (int i = 0; i < 1000000; ++i) {
    const uint64_t k = huge.Sample(rng);
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, uint64_t{1000000000000000});
    ones += k == 1;
    twos += k == 2;
    beyond_billion += k > 1000000000;
  }
  EXPECT_NEAR(static_cast<double>(ones) / twos, std::pow(2.0, 1.1), 0.05);
  EXPECT_GT(beyond_billion, 0);
}

TEST(LibsvmGeneratorTest, ExampleIsDeterministicAndConsistent) {
  LibsvmGeneratorOptions options;
  options.num_features = 100000;
  LibsvmGenerator gen = CreateOrDie(options);
  GeneratedExample a, b;
  double features = 0;
  constexpr int kExamples = 20000;
  for (int i = 0; i < kExamples; ++i) {
    gen.Example(i, &a);
    gen.Example(i, &b);
    ASSERT_EQ(a.ids, b.ids);
    ASSERT_EQ(a.label, b.label);
    ASSERT_FALSE(a.ranks.empty());
    // Distinct ranks in range, ascending; ids are those ranks' ids, sorted.
    std::vector<uint64_t> ids;
    double logit = options.bias;
    for (size_t j = 0; j < a.ranks.size(); ++j) {
      ASSERT_GE(a.ranks[j], 1u);
      ASSERT_LE(a.ranks[j], options.num_features);
      if (j > 0) {
        ASSERT_LT(a.ranks[j - 1], a.ranks[j]);
      }
      ids.push_back(gen.FeatureId(a.ranks[j]));
      logit += gen.Weight(ids.back());
    }
    std::sort(ids.begin(), ids.end());
    ASSERT_EQ(a.ids, ids);
    ASSERT_DOUBLE_EQ(a.logit, logit);
    ASSERT_DOUBLE_EQ(a.probability, 1 / (1 + std::exp(-logit)));
    features += a.ids.size();
  }
  // 1 + Poisson(19) features.
  EXPECT_NEAR(features / kExamples, 20.0, 0.15);

  options.fixed_features_per_example = true;
  options.features_per_example = 7;
  LibsvmGenerator fixed = CreateOrDie(options);
  for (int i = 0; i < 100; ++i) {
    fixed.Example(i, &a);
    EXPECT_EQ(a.ids.size(), 7u);
  }
}

TEST(LibsvmGeneratorTest, IdsSpreadOverUint64AndWeightsAreNormal) {
  LibsvmGeneratorOptions options;
  options.seed = 5;
  options.weight_stddev = 0.3;
  LibsvmGenerator gen = CreateOrDie(options);
  constexpr int kIds = 200000;
  int64_t high = 0;
  double sum = 0, sum2 = 0;
  for (uint64_t r = 1; r <= kIds; ++r) {
    const uint64_t id = gen.FeatureId(r);
    high += id >> 63;
    const double w = gen.Weight(id);
    sum += w;
    sum2 += w * w;
  }
  EXPECT_NEAR(static_cast<double>(high) / kIds, 0.5, 0.01);
  EXPECT_NEAR(sum / kIds, 0.0, 0.005);
  EXPECT_NEAR(std::sqrt(sum2 / kIds), 0.3, 0.005);
  // Another seed gives other ids and weights.
  options.seed = 6;
  LibsvmGenerator other = CreateOrDie(options);
  EXPECT_NE(other.FeatureId(1), gen.FeatureId(1));
  EXPECT_NE(other.Weight(gen.FeatureId(1)), gen.Weight(gen.FeatureId(1)));
}

TEST(LibsvmGeneratorTest, FeatureRankInvertsFeatureId) {
  for (uint64_t seed : {1, 2, 99}) {
    LibsvmGeneratorOptions options;
    options.seed = seed;
    LibsvmGenerator gen = CreateOrDie(options);
    for (uint64_t r : {uint64_t{1}, uint64_t{2}, uint64_t{1000}, uint64_t{123456789},
                       uint64_t{1} << 40, ~uint64_t{0}}) {
      EXPECT_EQ(gen.FeatureRank(gen.FeatureId(r)), r) << "seed " << seed;
    }
    for (uint64_t r = 1; r <= 100000; ++r) ASSERT_EQ(gen.FeatureRank(gen.FeatureId(r)), r);
  }
}

// The spread of the planted weights by rank band: the same for all ranks by
// default, shrinking as (weight_shrink_rank / r)^exponent beyond the bend
// with the option.
TEST(LibsvmGeneratorTest, WeightsShrinkWithRankWhenAsked) {
  LibsvmGeneratorOptions options;
  options.seed = 9;
  options.num_features = 100000000;
  options.weight_stddev = 0.6;
  LibsvmGenerator flat = CreateOrDie(options);
  options.weight_shrink_rank = 1000;
  options.weight_shrink_exponent = 0.5;
  LibsvmGenerator shrunk = CreateOrDie(options);

  // RMS of the weights of ranks [first, first + n), and of what the options
  // say their spread is.
  constexpr uint64_t kBand = 40000;  // the RMS is then within ~0.4% (1 sd)
  auto rms = [&](const LibsvmGenerator& gen, uint64_t first, double* expected) {
    double sum2 = 0, want2 = 0;
    for (uint64_t r = first; r < first + kBand; ++r) {
      const double w = gen.Weight(gen.FeatureId(r));
      sum2 += w * w;
      want2 += gen.WeightStddev(r) * gen.WeightStddev(r);
    }
    *expected = std::sqrt(want2 / kBand);
    return std::sqrt(sum2 / kBand);
  };
  double expected;
  for (uint64_t first : {uint64_t{1}, uint64_t{100000}, uint64_t{10000000}}) {
    SCOPED_TRACE(absl::StrCat("ranks from ", first));
    EXPECT_NEAR(rms(flat, first, &expected), 0.6, 0.6 * 0.02);
    EXPECT_EQ(flat.WeightStddev(first), 0.6);
  }
  // Ranks 1..40000 straddle the bend at 1000; the two far bands are beyond it,
  // where the spread is 0.6 * sqrt(1000 / r): about 0.06 and 0.006.
  for (uint64_t first : {uint64_t{1}, uint64_t{100000}, uint64_t{10000000}}) {
    SCOPED_TRACE(absl::StrCat("ranks from ", first));
    const double got = rms(shrunk, first, &expected);
    EXPECT_NEAR(got, expected, expected * 0.02);
  }
  EXPECT_NEAR(shrunk.WeightStddev(100000), 0.06, 1e-12);
  EXPECT_NEAR(shrunk.WeightStddev(10000000), 0.006, 1e-12);
  EXPECT_EQ(shrunk.WeightStddev(1000), 0.6);  // not beyond the bend
  // A weight is the flat model's, scaled: the same draw, so the same sign,
  // and exactly the same up to the bend.
  for (uint64_t r : {uint64_t{1}, uint64_t{999}, uint64_t{1000}}) {
    EXPECT_EQ(shrunk.Weight(shrunk.FeatureId(r)), flat.Weight(flat.FeatureId(r))) << r;
  }
  for (uint64_t r : {uint64_t{1001}, uint64_t{50000}, uint64_t{90000000}}) {
    const double ratio = shrunk.Weight(shrunk.FeatureId(r)) / flat.Weight(flat.FeatureId(r));
    EXPECT_NEAR(ratio, std::sqrt(1000.0 / r), 1e-5) << r;
  }
  // A weight depends on (seed, rank) only: a generator for fewer examples,
  // or another first example, has the same model.
  options.num_examples = 10;
  options.first_example = 12345;
  LibsvmGenerator other = CreateOrDie(options);
  for (uint64_t r : {uint64_t{5}, uint64_t{5000}, uint64_t{5000000}}) {
    EXPECT_EQ(other.Weight(other.FeatureId(r)), shrunk.Weight(shrunk.FeatureId(r)));
  }
}

// The default model is the one written before weight_shrink_rank existed:
// these figures come from a file of the same options written then.
TEST(LibsvmGeneratorTest, DefaultModelIsUnchanged) {
  LibsvmGeneratorOptions options;
  options.seed = 7;
  options.num_examples = 20000;
  options.num_features = 100000;
  options.progress_seconds = 0;
  const std::string path = TestTmpDir() + "/golden.svm";
  absl::StatusOr<PlantedModelStats> stats = GenerateLibsvmFile(path, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->positives, 6956);
  EXPECT_EQ(stats->text_bytes, 8989280);
  EXPECT_EQ(stats->features_used, 45538);
  EXPECT_NEAR(stats->mean_probability, 0.347798, 1e-6);
  EXPECT_NEAR(stats->logloss, 0.480450, 1e-6);
  EXPECT_NEAR(stats->auc, 0.825304, 1e-6);
  const std::string sidecar = ReadBytes(PlantedModelPath(path));
  EXPECT_THAT(sidecar, HasSubstr("\nweight_shrink_rank=0\n"));
}

TEST(LibsvmGeneratorTest, SameOptionsGiveByteIdenticalFiles) {
  LibsvmGeneratorOptions options;
  options.num_examples = 10000;  // a few chunks, the last one partial
  options.num_features = 50000;
  options.seed = 11;
  const std::string a = TestTmpDir() + "/same-a.svm";
  const std::string b = TestTmpDir() + "/same-b.svm";
  absl::StatusOr<PlantedModelStats> sa = GenerateLibsvmFile(a, options);
  ASSERT_TRUE(sa.ok()) << sa.status();
  options.threads = 3;
  absl::StatusOr<PlantedModelStats> sb = GenerateLibsvmFile(b, options);
  ASSERT_TRUE(sb.ok()) << sb.status();
  const std::string bytes = ReadBytes(a);
  EXPECT_EQ(bytes.size(), static_cast<size_t>(sa->text_bytes));
  EXPECT_EQ(sa->file_bytes, sa->text_bytes);
  EXPECT_TRUE(bytes == ReadBytes(b)) << "files differ with 1 and 3 threads";
  // The sidecars differ only in the first line, which names the data file.
  const std::string sidecar_a = ReadBytes(PlantedModelPath(a));
  const std::string sidecar_b = ReadBytes(PlantedModelPath(b));
  EXPECT_EQ(sidecar_a.substr(sidecar_a.find('\n')), sidecar_b.substr(sidecar_b.find('\n')));
  EXPECT_EQ(sa->logloss, sb->logloss);
  EXPECT_EQ(sa->auc, sb->auc);
  EXPECT_EQ(sa->features_used, sb->features_used);

  // gzip by extension: the same text, compressed.
  const std::string gz = TestTmpDir() + "/same.svm.gz";
  absl::StatusOr<PlantedModelStats> sg = GenerateLibsvmFile(gz, options);
  ASSERT_TRUE(sg.ok()) << sg.status();
  EXPECT_EQ(sg->text_bytes, sa->text_bytes);
  EXPECT_LT(sg->file_bytes, sg->text_bytes);
  EXPECT_EQ(ReadBytes(gz).substr(0, 2), "\x1f\x8b");

  options.seed = 12;
  const std::string c = TestTmpDir() + "/same-c.svm";
  ASSERT_TRUE(GenerateLibsvmFile(c, options).ok());
  EXPECT_FALSE(bytes == ReadBytes(c));
}

TEST(LibsvmGeneratorTest, FileMatchesExamplesThroughTheReader) {
  LibsvmGeneratorOptions options;
  options.num_examples = 3000;
  options.num_features = 1000000;
  options.seed = 3;
  const std::string path = TestTmpDir() + "/roundtrip.svm.gz";
  absl::StatusOr<PlantedModelStats> stats = GenerateLibsvmFile(path, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  LibsvmGenerator gen = CreateOrDie(options);

  absl::StatusOr<std::unique_ptr<LibsvmReader>> reader = LibsvmReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  SparseExample ex;
  GeneratedExample want;
  AucAccumulator auc;
  int64_t positives = 0;
  for (int64_t i = 0; i < options.num_examples; ++i) {
    absl::StatusOr<bool> got = (*reader)->Next(&ex);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(*got) << "file ends at example " << i;
    gen.Example(i, &want);
    ASSERT_EQ(ex.label, want.label) << i;
    ASSERT_EQ(ex.indices, want.ids) << i;
    ASSERT_EQ(ex.values, std::vector<float>(want.ids.size(), 1.0f));
    positives += ex.label > 0;
    auc.Add(want.probability, ex.label);
  }
  absl::StatusOr<bool> more = (*reader)->Next(&ex);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
  EXPECT_EQ(stats->examples, options.num_examples);
  EXPECT_EQ(stats->positives, positives);
  EXPECT_DOUBLE_EQ(stats->auc, auc.Auc());

  const std::string sidecar = ReadBytes(PlantedModelPath(path));
  EXPECT_THAT(sidecar, HasSubstr(absl::StrCat("\nexamples=", options.num_examples, "\n")));
  EXPECT_THAT(sidecar, HasSubstr(absl::StrCat("\npositives=", positives, "\n")));
  EXPECT_THAT(sidecar, HasSubstr(absl::StrFormat("\nplanted_auc=%.6f\n", stats->auc)));
  EXPECT_THAT(sidecar, HasSubstr("\nseed=3\n"));
}

TEST(LibsvmGeneratorTest, FieldsAreAFunctionOfTheIdWrittenLibffmStyle) {
  LibsvmGeneratorOptions options;
  options.num_examples = 3000;
  options.num_features = 100000;
  options.seed = 4;
  const std::string plain = TestTmpDir() + "/no-fields.svm";
  absl::StatusOr<PlantedModelStats> plain_stats = GenerateLibsvmFile(plain, options);
  ASSERT_TRUE(plain_stats.ok()) << plain_stats.status();
  options.num_fields = 5;
  const std::string ffm = TestTmpDir() + "/fields.svm.gz";
  absl::StatusOr<PlantedModelStats> ffm_stats = GenerateLibsvmFile(ffm, options);
  ASSERT_TRUE(ffm_stats.ok()) << ffm_stats.status();
  EXPECT_EQ(ffm_stats->auc, plain_stats->auc);
  EXPECT_GT(ffm_stats->text_bytes, plain_stats->text_bytes);
  EXPECT_THAT(ReadBytes(PlantedModelPath(ffm)), HasSubstr("\nnum_fields=5\n"));
  LibsvmGenerator gen = CreateOrDie(options);

  // The same examples in both files; the fields are the generator's.
  absl::StatusOr<std::unique_ptr<LibsvmReader>> a = LibsvmReader::Open(plain);
  absl::StatusOr<std::unique_ptr<LibsvmReader>> b = LibsvmReader::Open(ffm);
  ASSERT_TRUE(a.ok() && b.ok());
  SparseExample ea, eb;
  GeneratedExample want;
  for (int64_t i = 0; i < options.num_examples; ++i) {
    ASSERT_TRUE(*(*a)->Next(&ea));
    absl::StatusOr<bool> got = (*b)->Next(&eb);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(*got);
    gen.Example(i, &want);
    ASSERT_EQ(ea.label, eb.label) << i;
    ASSERT_EQ(ea.indices, eb.indices) << i;
    ASSERT_TRUE(ea.fields.empty());
    ASSERT_EQ(eb.fields, want.fields) << i;
    for (size_t j = 0; j < eb.indices.size(); ++j) {
      ASSERT_EQ(eb.fields[j], gen.FeatureField(eb.indices[j]));
    }
  }
  // Each field gets about a fifth of the ids.
  std::vector<int> per_field(options.num_fields, 0);
  constexpr int kIds = 50000;
  for (uint64_t r = 1; r <= kIds; ++r) {
    const uint32_t f = gen.FeatureField(gen.FeatureId(r));
    ASSERT_LT(f, options.num_fields);
    ++per_field[f];
  }
  for (int n : per_field) EXPECT_NEAR(n, kIds / 5, 5 * std::sqrt(kIds * 0.2 * 0.8));
}

// Counts how often feature ids occur in the file, by reading it back.
std::map<uint64_t, int64_t> CountIds(const std::string& path) {
  std::map<uint64_t, int64_t> counts;
  absl::StatusOr<std::unique_ptr<LibsvmReader>> reader = LibsvmReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return counts;
  SparseExample ex;
  for (;;) {
    absl::StatusOr<bool> got = (*reader)->Next(&ex);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !*got) return counts;
    for (uint64_t id : ex.indices) ++counts[id];
  }
}

TEST(LibsvmGeneratorTest, FeatureFrequenciesFollowThePowerLaw) {
  // One feature per example, so no rank is redrawn and the file's
  // frequencies are the Zipf law's: f(1) / f(100) = 100^s.
  LibsvmGeneratorOptions options;
  options.num_examples = 400000;
  options.num_features = 1000000;
  options.features_per_example = 1;
  options.fixed_features_per_example = true;
  options.zipf_exponent = 1.1;
  options.threads = 2;
  const std::string path = TestTmpDir() + "/zipf.svm";
  absl::StatusOr<PlantedModelStats> stats = GenerateLibsvmFile(path, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  LibsvmGenerator gen = CreateOrDie(options);
  std::map<uint64_t, int64_t> counts = CountIds(path);
  EXPECT_EQ(static_cast<int64_t>(counts.size()), stats->features_used);
  const double f1 = counts[gen.FeatureId(1)];
  const double f100 = counts[gen.FeatureId(100)];
  // f100 is ~310 (sd ~6%); 25% is > 4 sd.
  EXPECT_NEAR(f1 / f100 / std::pow(100.0, 1.1), 1.0, 0.25) << f1 << " / " << f100;
  // The most frequent id is rank 1's.
  const auto most =
      std::max_element(counts.begin(), counts.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_EQ(most->first, gen.FeatureId(1));

  // With 20 features per example the head saturates (rank 1 is in most
  // examples), but the law still holds among rarer ranks: f(100) / f(1000)
  // = 10^s.
  options.num_examples = 100000;
  options.features_per_example = 20;
  options.fixed_features_per_example = false;
  const std::string path20 = TestTmpDir() + "/zipf20.svm";
  stats = GenerateLibsvmFile(path20, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  counts = CountIds(path20);
  double f100_20 = 0, f1000_20 = 0;
  // Sums over neighbouring ranks for less noise: ranks 100..109 vs 1000..1099
  // (ten times as many ranks, each about 10^-s as frequent).
  for (uint64_t r = 100; r < 110; ++r) f100_20 += counts[gen.FeatureId(r)];
  for (uint64_t r = 1000; r < 1100; ++r) f1000_20 += counts[gen.FeatureId(r)];
  double num = 0, den = 0;
  for (uint64_t r = 100; r < 110; ++r) num += std::pow(static_cast<double>(r), -1.1);
  for (uint64_t r = 1000; r < 1100; ++r) den += std::pow(static_cast<double>(r), -1.1);
  const double expected_ratio = num / den;
  EXPECT_NEAR(f100_20 / f1000_20 / expected_ratio, 1.0, 0.1) << f100_20 << " / " << f1000_20;
  EXPECT_GT(counts[gen.FeatureId(1)], options.num_examples / 2);
}

TEST(LibsvmGeneratorTest, PlantedModelIsInformativeAndCalibrated) {
  LibsvmGeneratorOptions options;  // default model
  options.num_examples = 100000;
  options.num_features = 1000000;
  options.threads = 2;
  const std::string path = TestTmpDir() + "/planted.svm";
  absl::StatusOr<PlantedModelStats> stats = GenerateLibsvmFile(path, options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  const double n = static_cast<double>(stats->examples);
  const double rate = stats->positives / n;
  EXPECT_GT(stats->auc, 0.7);
  EXPECT_LT(stats->auc, 0.95);
  EXPECT_GT(rate, 0.05);
  EXPECT_LT(rate, 0.95);
  // Labels are drawn from the planted probabilities: the positive rate is
  // their mean, up to binomial noise.
  EXPECT_NEAR(rate, stats->mean_probability, 4 * std::sqrt(rate * (1 - rate) / n));
  // The planted model beats predicting the base rate.
  const double base_logloss = -(rate * std::log(rate) + (1 - rate) * std::log(1 - rate));
  EXPECT_LT(stats->logloss, base_logloss);
  EXPECT_GT(stats->features_used, 100000);
  EXPECT_LE(stats->features_used, static_cast<int64_t>(options.num_features));
  EXPECT_NEAR(static_cast<double>(stats->feature_occurrences) / n, 20.0, 0.1);
}

TEST(LibsvmGeneratorTest, ProgressIsReported) {
  LibsvmGeneratorOptions options;
  options.num_examples = 20000;
  options.num_features = 10000;
  options.progress_seconds = 1e-9;  // after every round
  std::vector<int64_t> seen;
  options.progress = [&seen](const LibsvmGeneratorOptions::Progress& p) {
    seen.push_back(p.examples);
    EXPECT_GT(p.bytes, 0);
  };
  ASSERT_TRUE(GenerateLibsvmFile(TestTmpDir() + "/progress.svm", options).ok());
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(seen.back(), options.num_examples);
}

TEST(LibsvmGeneratorTest, RejectsBadOptions) {
  struct Case {
    void (*mutate)(LibsvmGeneratorOptions&);
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](LibsvmGeneratorOptions& o) { o.num_examples = -1; }, "num_examples is -1"},
      {[](LibsvmGeneratorOptions& o) { o.num_features = 0; }, "num_features is 0"},
      {[](LibsvmGeneratorOptions& o) { o.features_per_example = 0.5; }, "features_per_example"},
      {[](LibsvmGeneratorOptions& o) {
         o.num_features = 10;
         o.features_per_example = 11;
       },
       "expected in [1, 10]"},
      {[](LibsvmGeneratorOptions& o) { o.zipf_exponent = 0; }, "zipf_exponent is 0"},
      {[](LibsvmGeneratorOptions& o) { o.weight_stddev = -1; }, "weight_stddev is -1"},
      {[](LibsvmGeneratorOptions& o) { o.weight_shrink_rank = -5; }, "weight_shrink_rank is -5"},
      {[](LibsvmGeneratorOptions& o) { o.weight_shrink_exponent = -0.5; },
       "weight_shrink_exponent is -0.5"},
      {[](LibsvmGeneratorOptions& o) { o.weight_shrink_rank = INFINITY; },
       "weight_shrink_rank is inf"},
      {[](LibsvmGeneratorOptions& o) { o.bias = NAN; }, "bias is nan"},
      {[](LibsvmGeneratorOptions& o) { o.threads = 0; }, "threads is 0"},
      {[](LibsvmGeneratorOptions& o) { o.num_fields = 65537; },
       "num_fields is 65537; expected at most 65536"},
  };
  for (const Case& c : cases) {
    LibsvmGeneratorOptions options;
    c.mutate(options);
    absl::StatusOr<LibsvmGenerator> gen = LibsvmGenerator::Create(options);
    EXPECT_EQ(gen.status().code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(std::string(gen.status().message()), HasSubstr(c.expected));
  }
  absl::StatusOr<PlantedModelStats> stats =
      GenerateLibsvmFile(TestTmpDir() + "/no-such-dir/x.svm", LibsvmGeneratorOptions{});
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(stats.status().message()), HasSubstr("no-such-dir/x.svm: cannot create"));
}

}  // namespace
}  // namespace ps
