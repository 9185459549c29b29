// ps_gen_libsvm: writes a reproducible LibSVM data set for sparse logistic
// regression with a planted model (worker/train/libsvm_generator.h).
//
//   ps_gen_libsvm --out=/data/train.svm.gz --examples=5000000 --features=100000000
//
// Writes --out (gzip when it ends in .gz or with --gzip) and
// --out.planted.txt (options, planted AUC and log-loss as key=value lines),
// prints progress to stderr every --progress_seconds, and ends with one
// machine-readable line on stdout:
//
//   RESULT examples=... features_used=... positives=... planted_auc=...
//          planted_logloss=... bytes=... seconds=... examples_per_second=...
//
// The same flags (except --threads and --progress_seconds) always give the
// same bytes.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/train/libsvm_generator.h"

ABSL_FLAG(std::string, out, "", "output path; gzip-compressed when it ends in .gz");
ABSL_FLAG(int64_t, examples, 1000000, "number of examples");
ABSL_FLAG(int64_t, first_example, 0,
          "index of the first example: a test set from the same planted model as a training "
          "set of N examples uses --first_example=N");
ABSL_FLAG(uint64_t, features, 10000000,
          "feature space size: popularity ranks 1..N, each mapped to a distinct 64-bit id");
ABSL_FLAG(double, features_per_example, 20,
          "mean (distinct) features per example: 1 + Poisson(k - 1), or k with "
          "--fixed_features_per_example");
ABSL_FLAG(bool, fixed_features_per_example, false, "every example has exactly round(k) features");
ABSL_FLAG(double, zipf_exponent, 1.1, "s in P(feature rank r) ~ r^-s");
ABSL_FLAG(double, weight_stddev, 0.4,
          "planted weights ~ N(0, weight_stddev^2) (shrunk for rare features with "
          "--weight_shrink_rank)");
ABSL_FLAG(double, weight_shrink_rank, 0,
          "> 0: the planted weight of feature rank r has spread weight_stddev * min(1, "
          "(weight_shrink_rank / r)^weight_shrink_exponent), so rare features carry less signal "
          "(0: the same spread for every feature)");
ABSL_FLAG(double, weight_shrink_exponent, 0.5, "see --weight_shrink_rank");
ABSL_FLAG(uint32_t, num_fields, 0,
          "> 0: give each feature id a field in [0, num_fields) (a hash of seed and id) and write "
          "libffm-style field:id:1 tokens (at most 65536 fields); the examples do not change");
ABSL_FLAG(double, bias, -1.0, "planted bias");
ABSL_FLAG(uint64_t, seed, 1, "seed of the ids, the planted weights and the examples");
ABSL_FLAG(bool, gzip, false, "gzip the output even if --out does not end in .gz");
ABSL_FLAG(int, threads, 0, "generating threads (0: one per core); does not change the output");
ABSL_FLAG(double, progress_seconds, 5, "seconds between progress lines on stderr (0: none)");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "ps_gen_libsvm: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Writes a reproducible LibSVM data set with a planted logistic model. See "
      "docs/guide/training.md.");
  absl::ParseCommandLine(argc, argv);

  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return Fail("--out is required (the LibSVM file to write)");

  ps::LibsvmGeneratorOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.num_examples = absl::GetFlag(FLAGS_examples);
  options.first_example = absl::GetFlag(FLAGS_first_example);
  options.num_features = absl::GetFlag(FLAGS_features);
  options.features_per_example = absl::GetFlag(FLAGS_features_per_example);
  options.fixed_features_per_example = absl::GetFlag(FLAGS_fixed_features_per_example);
  options.zipf_exponent = absl::GetFlag(FLAGS_zipf_exponent);
  options.weight_stddev = absl::GetFlag(FLAGS_weight_stddev);
  options.bias = absl::GetFlag(FLAGS_bias);
  options.weight_shrink_rank = absl::GetFlag(FLAGS_weight_shrink_rank);
  options.weight_shrink_exponent = absl::GetFlag(FLAGS_weight_shrink_exponent);
  options.num_fields = absl::GetFlag(FLAGS_num_fields);
  options.gzip = absl::GetFlag(FLAGS_gzip);
  options.threads = absl::GetFlag(FLAGS_threads);
  if (options.threads == 0) options.threads = std::max(1u, std::thread::hardware_concurrency());
  options.progress_seconds = absl::GetFlag(FLAGS_progress_seconds);
  const int64_t total = options.num_examples;
  options.progress = [total](const ps::LibsvmGeneratorOptions::Progress& p) {
    std::fprintf(stderr,
                 "ps_gen_libsvm: %lld of %lld examples (%.1f%%), %.1f MB of text, %.0f "
                 "examples/s\n",
                 static_cast<long long>(p.examples), static_cast<long long>(total),
                 total > 0 ? 100.0 * p.examples / total : 100.0, p.bytes / 1e6,
                 p.seconds > 0 ? p.examples / p.seconds : 0.0);
  };

  absl::StatusOr<ps::PlantedModelStats> stats = ps::GenerateLibsvmFile(out, options);
  if (absl::IsInvalidArgument(stats.status())) {
    // The library names its options; two of them are flags by other names.
    return Fail(absl::StrCat(stats.status().message(),
                             " (num_examples is --examples, num_features is --features)"));
  }
  if (!stats.ok()) return Fail(std::string(stats.status().message()));
  std::printf(
      "RESULT examples=%lld features_used=%lld positives=%lld positive_rate=%.4f "
      "planted_auc=%.4f planted_logloss=%.4f bytes=%lld text_bytes=%lld seconds=%.2f "
      "examples_per_second=%.0f out=%s planted=%s\n",
      static_cast<long long>(stats->examples), static_cast<long long>(stats->features_used),
      static_cast<long long>(stats->positives),
      stats->examples > 0 ? static_cast<double>(stats->positives) / stats->examples : 0.0,
      stats->auc, stats->logloss, static_cast<long long>(stats->file_bytes),
      static_cast<long long>(stats->text_bytes), stats->seconds,
      stats->seconds > 0 ? stats->examples / stats->seconds : 0.0, out.c_str(),
      ps::PlantedModelPath(out).c_str());
  return 0;
}
