// Reproducible LibSVM data for sparse logistic regression with a planted
// (known) model, so that a trainer's AUC and log-loss can be compared with the
// best reachable ones.
//
// Example i (0-based) is a pure function of (options, i): it draws its
// feature count, then distinct feature popularity ranks from a Zipf law over
// [1, num_features], maps each rank to a 64-bit feature id with a keyed
// bijection (ids look like hashed feature ids spread over uint64), and draws
// its label from the planted model:
//
//   logit = bias + sum over the example's features of weight(id)
//   label ~ Bernoulli(sigmoid(logit)),  weight(id) ~ N(0, stddev(rank(id))^2)
//
// where weight(id) is a hash of (seed, id) scaled by stddev(rank), which is
// weight_stddev for every rank unless weight_shrink_rank is set (see
// LibsvmGeneratorOptions): a consumer that knows the options can recompute
// the model for any id without a table. Feature values are always 1 (binary
// features). With num_fields > 0 each feature id also has a field, a hash
// of (seed, id), and files are written libffm-style ("field:id:1"). Nothing
// is kept per feature, so num_features can be 10^8 or more; memory is O(features per example), plus
// a bitset of num_features bits when counting the distinct features used.
//
// LibsvmGenerator is immutable after Create and safe to use from many
// threads. GenerateLibsvmFile writes a data set and its planted-model sidecar.
#ifndef PS_WORKER_TRAIN_LIBSVM_GENERATOR_H_
#define PS_WORKER_TRAIN_LIBSVM_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/hash.h"
#include "worker/train/libsvm_reader.h"

namespace ps {

// SplitMix64: a small, fast pseudo-random stream whose output is fixed by
// its seed on every platform (unlike std::*_distribution).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    const uint64_t out = Mix64(state_);
    state_ += 0x9e3779b97f4a7c15ULL;
    return out;
  }
  // Uniform in [0, 1), 53 random bits.
  double Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Samples k in [1, n] with P(k) proportional to k^-exponent in O(1) expected
// time and memory independent of n: rejection-inversion (W. Hörmann and G.
// Derflinger, "Rejection-inversion to generate variates from monotone
// discrete distributions", ACM TOMACS 6(3), 1996), where the continuous hat
// x^-exponent is inverted in closed form. Because that inversion costs a
// log1p and an exp, the `head_size` most likely ranks (~80% of draws for
// s = 1.1 over 10^7 ranks) are served from an alias table instead, exactly: a hat sample that lands
// on the head is accepted with the probability rejection-inversion would give it, then its rank
// comes from the table. Immutable; thread-safe.
class ZipfSampler {
 public:
  static constexpr uint32_t kDefaultHeadSize = 1 << 14;  // 256 KiB of table

  // Requires n >= 1 and exponent > 0 (aborts otherwise). head_size 0 turns
  // the table off (tests compare both paths).
  ZipfSampler(uint64_t n, double exponent, uint32_t head_size = kDefaultHeadSize);

  uint64_t Sample(SplitMix64& rng) const;

  uint64_t n() const { return n_; }
  double exponent() const { return exponent_; }

 private:
  double H(double x) const;         // integral of t^-exponent from 1 to x
  double HInverse(double y) const;  // x with H(x) = y
  double h(double x) const;         // x^-exponent

  // Walker's alias table over ranks 1..size: slot i yields rank i + 1 with
  // probability `keep`, else rank alias + 1.
  struct AliasSlot {
    double keep;
    uint32_t alias;
  };

  uint64_t n_;
  double exponent_;
  double h_integral_x1_;  // H(1.5) - h(1): the low end of the hat on the H axis
  double hat_area_;       // H(n + 0.5) - h_integral_x1_: the hat's length
  double squeeze_;        // k - x below this accepts without evaluating H
  // The head: ranks 1..head_.size() take [0, head_hat_) of the hat, and
  // [0, head_mass_) of it is accepted (head_mass_ = sum of their k^-exponent).
  std::vector<AliasSlot> head_;
  double head_hat_ = 0;
  double head_mass_ = 0;
};

struct LibsvmGeneratorOptions {
  uint64_t seed = 1;
  int64_t num_examples = 1000000;
  // GenerateLibsvmFile writes examples first_example .. first_example +
  // num_examples - 1: a test set from the same planted model as a training
  // set is the same options with first_example past the training examples.
  int64_t first_example = 0;
  // Feature space size F: ranks (and thus distinct feature ids) 1..F.
  uint64_t num_features = 10000000;
  // Mean number of (distinct) features per example, k >= 1: an example has
  // 1 + Poisson(k - 1) features (normal approximation above k = 500), or
  // round(k) when fixed_features_per_example; never more than F.
  double features_per_example = 20;
  bool fixed_features_per_example = false;
  // s > 0 in P(rank r) ~ r^-s. The ranks of one example are distinct: each
  // is drawn again while it repeats one already drawn, so the most frequent
  // features appear in at most every example and the law holds exactly for
  // features far rarer than 1/k.
  double zipf_exponent = 1.1;
  // The planted model: weight(id) ~ N(0, stddev(rank)^2), plus bias.
  double weight_stddev = 0.4;
  double bias = -1.0;
  // > 0: rare features carry less signal, as in real click data. The
  // spread of a weight shrinks with its feature's rank r:
  //   stddev(r) = weight_stddev * min(1, (weight_shrink_rank / r)^weight_shrink_exponent)
  // 0 (the default): every weight has the spread weight_stddev. Either way a
  // weight depends on (seed, rank) only, never on num_examples, so a test
  // set written separately (first_example) has the same model. Why: with
  // one spread for all, most of the signal of a large feature space sits in
  // features seen a few times in millions of examples, which no learner can
  // estimate, so the planted AUC is far out of reach; with an exponent of
  // 0.5 a weight's variance falls as 1/r, about as fast as the feature's
  // frequency (r^-zipf_exponent).
  double weight_shrink_rank = 0;
  double weight_shrink_exponent = 0.5;
  // > 0: feature id has the field FeatureField(id) in [0, num_fields), a
  // hash of (seed, id) (so each field has its own power-law share of the
  // features), and GenerateLibsvmFile writes "field:id:1" tokens (libffm,
  // worker/train/libsvm_reader.h); at most kMaxLibsvmField + 1. 0: no
  // fields, "id:1". The examples (ids and labels) do not depend on it: the
  // same options with and without fields give the same data.
  uint32_t num_fields = 0;

  // GenerateLibsvmFile only:
  // Write gzip (level 1) even when the path does not end in ".gz".
  bool gzip = false;
  // Threads generating examples; the file does not depend on it.
  int threads = 1;
  // Count the distinct features used (a bitset of F bits; skipped when F >
  // kMaxCountedFeatures).
  bool count_features_used = true;
  // Calls `progress` about every progress_seconds (never when null).
  double progress_seconds = 5;
  struct Progress {
    int64_t examples = 0;  // written so far
    int64_t bytes = 0;     // of text, before compression
    double seconds = 0;    // since the start
  };
  std::function<void(const Progress&)> progress;
};

// Above this many features, GenerateLibsvmFile does not count the distinct
// features used (the bitset would take more than 128 MiB).
inline constexpr uint64_t kMaxCountedFeatures = uint64_t{1} << 30;

// One generated example.
struct GeneratedExample {
  float label = 0;         // 0 or 1
  double logit = 0;        // bias + sum of the features' planted weights
  double probability = 0;  // sigmoid(logit), the chance that label is 1
  // The popularity ranks of the features (1 = most frequent), ascending,
  // and their feature ids, sorted separately (ascending, as LibSVM files
  // list them): ids[j] is in general not FeatureId(ranks[j]).
  std::vector<uint64_t> ranks;
  std::vector<uint64_t> ids;
  // With num_fields > 0, fields[j] = FeatureField(ids[j]); else empty.
  std::vector<uint16_t> fields;
};

class LibsvmGenerator {
 public:
  // INVALID_ARGUMENT, naming the option, when num_examples < 0,
  // num_features < 1, features_per_example is not in [1, num_features],
  // zipf_exponent <= 0, weight_stddev, weight_shrink_rank or
  // weight_shrink_exponent < 0, num_fields > kMaxLibsvmField + 1, an option
  // is not finite, or threads < 1.
  static absl::StatusOr<LibsvmGenerator> Create(const LibsvmGeneratorOptions& options);

  // Example i of the data set, into *out (its vectors are reused). Requires
  // 0 <= i; the same i gives the same example on every call and thread.
  void Example(int64_t i, GeneratedExample* out) const;

  // The feature id of popularity rank r (a bijection of uint64 keyed by the
  // seed, so distinct ranks have distinct ids).
  uint64_t FeatureId(uint64_t rank) const { return Mix64(rank ^ id_key_); }
  // The rank whose id is `id`: FeatureRank(FeatureId(r)) == r. For an id
  // that is no feature's the result lies outside [1, num_features].
  uint64_t FeatureRank(uint64_t id) const;

  // The planted weight of feature `id`.
  float Weight(uint64_t id) const;
  // The spread of the planted weight of rank r (weight_stddev, shrunk for
  // ranks beyond weight_shrink_rank when that is set).
  double WeightStddev(uint64_t rank) const;

  // The field of feature `id`, in [0, num_fields); 0 when num_fields is 0.
  uint32_t FeatureField(uint64_t id) const;

  const LibsvmGeneratorOptions& options() const { return options_; }

 private:
  explicit LibsvmGenerator(const LibsvmGeneratorOptions& options);
  // Weight(FeatureId(rank)), from a table for the most frequent ranks.
  float RankWeight(uint64_t rank) const;
  // Weight(id) given its rank, which the callers know already.
  float PlantedWeight(uint64_t id, uint64_t rank) const;

  LibsvmGeneratorOptions options_;
  ZipfSampler zipf_;
  uint64_t id_key_;
  uint64_t weight_key_;
  uint64_t example_key_;
  uint64_t field_key_;
  // RankWeight of ranks 1..head_weights_.size(): most draws hit this table,
  // which saves a log, a sqrt and a cos per feature.
  std::vector<float> head_weights_;
};

// What GenerateLibsvmFile wrote, and how well the planted model does on it.
struct PlantedModelStats {
  int64_t examples = 0;
  int64_t positives = 0;
  int64_t feature_occurrences = 0;  // sum over examples of their features
  // Distinct feature ids in the file; -1 when not counted.
  int64_t features_used = -1;
  // Mean sigmoid(logit): the positive rate the planted model expects.
  double mean_probability = 0;
  // The planted model's AUC on the generated labels: the best AUC any model
  // can expect on this data. From a 10^5-bin histogram (AucAccumulator):
  // accurate to ~1e-4.
  double auc = 0;
  // Its mean log-loss (nats per example): the best expected log-loss.
  double logloss = 0;
  int64_t text_bytes = 0;  // LibSVM text written, before compression
  int64_t file_bytes = 0;  // size of the file on disk
  double seconds = 0;
};

// Where GenerateLibsvmFile puts the planted-model summary of `data_path`.
std::string PlantedModelPath(const std::string& data_path);

// Writes examples 0..num_examples-1 to `path` in LibSVM format ("1 id:1
// id:1 ...", labels 0/1, ids ascending; "1 field:id:1 ..." with
// num_fields > 0), gzip-compressed when the path ends
// in ".gz" or options.gzip, streaming (memory does not grow with
// num_examples), then writes the stats and options as key=value lines to
// PlantedModelPath(path). Same options => byte-identical files, whatever
// options.threads. Errors: those of LibsvmGenerator::Create, plus INTERNAL
// (naming the path) when a file cannot be written.
absl::StatusOr<PlantedModelStats> GenerateLibsvmFile(const std::string& path,
                                                     const LibsvmGeneratorOptions& options);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_LIBSVM_GENERATOR_H_
