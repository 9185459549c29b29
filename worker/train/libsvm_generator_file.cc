// GenerateLibsvmFile: a LibsvmGenerator's examples written to a file (plain
// or gzip) by several threads in chunks, in order, with the planted model's
// statistics in a sidecar (libsvm_generator.h).
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/train/auc.h"
#include "worker/train/libsvm_generator.h"

namespace ps {

namespace {

// -log P(label | p), clamped so that a confident wrong prediction costs a
// large but finite amount.
double LogLoss(double p, float label) {
  constexpr double kMin = 1e-15;
  const double q = label > 0 ? p : 1.0 - p;
  return -std::log(std::max(q, kMin));
}

// Examples per unit of work. Fixed (not derived from the thread count) so
// that the per-chunk floating-point sums, and thus the sidecar, do not
// depend on the number of threads.
constexpr int64_t kChunkExamples = 4096;

// The LibSVM output: plain (stdio) or gzip. Level 1, because on this text
// (random-looking 19-digit ids) the default level 6 is ~4x slower for files
// only ~20% smaller.
class OutputFile {
 public:
  ~OutputFile() {
    if (plain_ != nullptr) std::fclose(plain_);
    if (gz_ != nullptr) gzclose(gz_);
  }

  absl::Status Open(const std::string& path, bool gzip) {
    path_ = path;
    if (gzip) {
      gz_ = gzopen(path.c_str(), "wb1");
      if (gz_ != nullptr) gzbuffer(gz_, 1 << 20);
    } else {
      plain_ = std::fopen(path.c_str(), "wb");
    }
    if (gz_ == nullptr && plain_ == nullptr) {
      return absl::InternalError(
          absl::StrCat(path, ": cannot create (", std::strerror(errno), ")"));
    }
    return absl::OkStatus();
  }

  absl::Status Write(const std::string& data) {
    if (data.empty()) return absl::OkStatus();
    bool ok;
    if (gz_ != nullptr) {
      ok = gzwrite(gz_, data.data(), static_cast<unsigned>(data.size())) ==
           static_cast<int>(data.size());
    } else {
      ok = std::fwrite(data.data(), 1, data.size(), plain_) == data.size();
    }
    if (!ok) return WriteError();
    return absl::OkStatus();
  }

  absl::Status Close() {
    bool ok = true;
    if (gz_ != nullptr) ok = gzclose(gz_) == Z_OK;
    if (plain_ != nullptr) ok = std::fclose(plain_) == 0;
    gz_ = nullptr;
    plain_ = nullptr;
    if (!ok) return WriteError();
    return absl::OkStatus();
  }

 private:
  absl::Status WriteError() const {
    return absl::InternalError(
        absl::StrCat(path_, ": write failed (", std::strerror(errno), "); is the disk full?"));
  }

  std::string path_;
  std::FILE* plain_ = nullptr;
  gzFile gz_ = nullptr;
};

// A bitset of feature ranks shared by the generating threads.
class RankSet {
 public:
  explicit RankSet(uint64_t n) : words_((n + 64) / 64), bits_(new std::atomic<uint64_t>[words_]) {
    for (uint64_t w = 0; w < words_; ++w) bits_[w].store(0, std::memory_order_relaxed);
  }

  void Insert(uint64_t r) {
    std::atomic<uint64_t>& word = bits_[r / 64];
    const uint64_t bit = uint64_t{1} << (r % 64);
    // Frequent ranks are set already: skip the locked read-modify-write.
    if ((word.load(std::memory_order_relaxed) & bit) == 0) {
      word.fetch_or(bit, std::memory_order_relaxed);
    }
  }

  int64_t Count() const {
    int64_t n = 0;
    for (uint64_t w = 0; w < words_; ++w) {
      n += __builtin_popcountll(bits_[w].load(std::memory_order_relaxed));
    }
    return n;
  }

 private:
  uint64_t words_;
  std::unique_ptr<std::atomic<uint64_t>[]> bits_;
};

// One chunk's text and sums, in example order.
struct Chunk {
  std::string text;
  int64_t examples = 0;
  int64_t positives = 0;
  int64_t feature_occurrences = 0;
  double probability_sum = 0;
  double logloss_sum = 0;
};

// Appends "label id:1 id:1 ...\n", or "label field:id:1 ..." when the
// example has fields.
void AppendExample(const GeneratedExample& ex, std::string* text) {
  constexpr size_t kMaxFeatureChars = 1 + 6 + 20 + 2;  // " " field ":" id ":1"
  const size_t old = text->size();
  text->resize(old + 2 + ex.ids.size() * kMaxFeatureChars);
  char* p = text->data() + old;
  char* const end = text->data() + text->size();
  *p++ = ex.label > 0 ? '1' : '0';
  for (size_t j = 0; j < ex.ids.size(); ++j) {
    *p++ = ' ';
    if (!ex.fields.empty()) {
      p = std::to_chars(p, end, ex.fields[j]).ptr;
      *p++ = ':';
    }
    p = std::to_chars(p, end, ex.ids[j]).ptr;
    *p++ = ':';
    *p++ = '1';
  }
  *p++ = '\n';
  text->resize(p - text->data());
}

// Generates examples [first, first + n) into *chunk.
void GenerateChunk(const LibsvmGenerator& gen, int64_t first, int64_t n, Chunk* chunk,
                   AucAccumulator* auc, RankSet* used) {
  chunk->text.clear();
  chunk->examples = n;
  chunk->positives = chunk->feature_occurrences = 0;
  chunk->probability_sum = chunk->logloss_sum = 0;
  GeneratedExample ex;
  for (int64_t i = first; i < first + n; ++i) {
    gen.Example(i, &ex);
    AppendExample(ex, &chunk->text);
    chunk->positives += ex.label > 0 ? 1 : 0;
    chunk->feature_occurrences += static_cast<int64_t>(ex.ids.size());
    chunk->probability_sum += ex.probability;
    chunk->logloss_sum += LogLoss(ex.probability, ex.label);
    auc->Add(ex.probability, ex.label);
    if (used != nullptr) {
      for (uint64_t r : ex.ranks) used->Insert(r);
    }
  }
}

// The shortest decimal that reads back as exactly v ("1.1", not
// "1.1000000000000001"), so the sidecar states the options as given.
std::string Shortest(double v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof(buf), v).ptr);
}

// Chunks generated together, one per thread.
struct Round {
  std::vector<Chunk> chunks;
  std::vector<std::thread> workers;
  int size = 0;  // chunks in use

  ~Round() { Join(); }  // an early return must not leave threads running
  void Join() {
    for (std::thread& t : workers) t.join();
    workers.clear();
  }
};

bool EndsWithGz(const std::string& path) { return absl::EndsWith(path, ".gz"); }

absl::Status WriteSidecar(const std::string& data_path, const LibsvmGeneratorOptions& o,
                          const PlantedModelStats& s) {
  const std::string path = PlantedModelPath(data_path);
  std::string text = absl::StrCat(
      "# Planted logistic model of ", data_path,
      " (worker/train/libsvm_generator.h): label ~ Bernoulli(sigmoid(bias + sum of "
      "weight(id))), weight(id) ~ N(0, stddev(rank)^2), stddev(rank) = weight_stddev * min(1, "
      "(weight_shrink_rank / rank)^weight_shrink_exponent) when weight_shrink_rank > 0.\n"
      "# planted_auc and planted_logloss are the best a model can expect on this data; "
      "planted_auc comes from a 10^5-bin histogram (accurate to ~1e-4).\n");
  absl::StrAppend(
      &text, "seed=", o.seed, "\nfirst_example=", o.first_example, "\nexamples=", o.num_examples,
      "\nfeatures=", o.num_features, "\nfeatures_per_example=", Shortest(o.features_per_example),
      "\nfixed_features_per_example=", o.fixed_features_per_example ? 1 : 0,
      "\nzipf_exponent=", Shortest(o.zipf_exponent), "\nweight_stddev=", Shortest(o.weight_stddev),
      "\nbias=", Shortest(o.bias), "\nweight_shrink_rank=", Shortest(o.weight_shrink_rank),
      "\nweight_shrink_exponent=", Shortest(o.weight_shrink_exponent),
      "\nnum_fields=", o.num_fields, "\n");
  absl::StrAppendFormat(&text,
                        "positives=%d\npositive_rate=%.6f\nmean_probability=%.6f\n"
                        "feature_occurrences=%d\nfeatures_used=%d\nplanted_auc=%.6f\n"
                        "planted_logloss=%.6f\ntext_bytes=%d\nfile_bytes=%d\n",
                        s.positives,
                        s.examples > 0 ? static_cast<double>(s.positives) / s.examples : 0.0,
                        s.mean_probability, s.feature_occurrences, s.features_used, s.auc,
                        s.logloss, s.text_bytes, s.file_bytes);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat(path, ": cannot create (", std::strerror(errno), ")"));
  }
  const bool wrote = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !wrote) {
    return absl::InternalError(absl::StrCat(path, ": write failed (", std::strerror(errno), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string PlantedModelPath(const std::string& data_path) { return data_path + ".planted.txt"; }

absl::StatusOr<PlantedModelStats> GenerateLibsvmFile(const std::string& path,
                                                     const LibsvmGeneratorOptions& options) {
  absl::StatusOr<LibsvmGenerator> gen = LibsvmGenerator::Create(options);
  if (!gen.ok()) return gen.status();
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  auto elapsed = [start] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  OutputFile out;
  absl::Status s = out.Open(path, options.gzip || EndsWithGz(path));
  if (!s.ok()) return s;

  const int threads = options.threads;
  std::unique_ptr<RankSet> used;
  if (options.count_features_used && options.num_features <= kMaxCountedFeatures) {
    used = std::make_unique<RankSet>(options.num_features);
  }
  // Worker t of every round adds to aucs[t]; one round generates at a time.
  std::vector<AucAccumulator> aucs(threads);
  PlantedModelStats stats;
  double probability_sum = 0, logloss_sum = 0;
  double last_progress = 0;

  // Rounds of `threads` consecutive chunks, one per worker thread. While a
  // round is being generated, this thread writes the previous one (writing
  // is a fifth of the work), then sums its chunks in order.
  Round rounds[2];
  for (Round& r : rounds) r.chunks.resize(threads);
  int64_t next = options.first_example;
  const int64_t end = options.first_example + options.num_examples;
  auto launch = [&](Round& round) {
    round.workers.clear();
    round.size = 0;
    for (; round.size < threads && next < end; ++round.size) {
      const int64_t n = std::min(kChunkExamples, end - next);
      round.workers.emplace_back(GenerateChunk, std::cref(*gen), next, n, &round.chunks[round.size],
                                 &aucs[round.size], used.get());
      next += n;
    }
  };
  launch(rounds[0]);
  for (int cur = 0; rounds[cur].size > 0; cur ^= 1) {
    Round& round = rounds[cur];
    round.Join();
    launch(rounds[cur ^ 1]);
    for (int c = 0; c < round.size; ++c) {
      const Chunk& chunk = round.chunks[c];
      s = out.Write(chunk.text);
      if (!s.ok()) return s;
      stats.examples += chunk.examples;
      stats.positives += chunk.positives;
      stats.feature_occurrences += chunk.feature_occurrences;
      stats.text_bytes += static_cast<int64_t>(chunk.text.size());
      probability_sum += chunk.probability_sum;
      logloss_sum += chunk.logloss_sum;
    }
    round.size = 0;
    if (options.progress && options.progress_seconds > 0 &&
        elapsed() - last_progress >= options.progress_seconds) {
      last_progress = elapsed();
      options.progress({stats.examples, stats.text_bytes, last_progress});
    }
  }
  s = out.Close();
  if (!s.ok()) return s;

  for (int t = 1; t < threads; ++t) aucs[0].Merge(aucs[t]);
  if (stats.examples > 0) {
    stats.mean_probability = probability_sum / static_cast<double>(stats.examples);
    stats.logloss = logloss_sum / static_cast<double>(stats.examples);
  }
  stats.auc = aucs[0].Auc();
  if (used != nullptr) stats.features_used = used->Count();
  struct stat st;
  if (stat(path.c_str(), &st) == 0) stats.file_bytes = static_cast<int64_t>(st.st_size);
  stats.seconds = elapsed();
  s = WriteSidecar(path, options, stats);
  if (!s.ok()) return s;
  return stats;
}

}  // namespace ps
