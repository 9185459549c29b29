#include "worker/train/libsvm_generator.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Domain separators: the ids, the weights and the examples use independent
// hashes of the seed.
constexpr uint64_t kIdDomain = 0x6c696273766d6964ULL;       // "libsvmid"
constexpr uint64_t kWeightDomain = 0x6c696273766d7774ULL;   // "libsvmwt"
constexpr uint64_t kExampleDomain = 0x6c696273766d6578ULL;  // "libsvmex"
constexpr uint64_t kFieldDomain = 0x6c696273766d6664ULL;    // "libsvmfd"

// Ranks whose weights are precomputed: with s = 1.1 over 10^7 features the
// top 2^16 ranks take ~85% of all draws, in 256 KiB.
constexpr uint64_t kHeadWeightRanks = uint64_t{1} << 16;

// Above this mean, Poisson counts use a normal approximation: the
// sequential-search inversion below costs O(mean) and e^-mean underflows
// near 745.
constexpr double kMaxExactPoissonMean = 500;

// (e^t - 1) / t and log(1 + t) / t, continuous at t = 0 (where a direct
// evaluation would divide 0 by 0): they keep H and HInverse accurate for
// exponents near 1.
double Expm1OverX(double t) { return std::abs(t) > 1e-8 ? std::expm1(t) / t : 1 + t / 2; }
double Log1pOverX(double t) { return std::abs(t) > 1e-8 ? std::log1p(t) / t : 1 - t / 2; }

// Poisson(mean) by inversion: the smallest x with CDF(x) >= u.
int64_t Poisson(double mean, SplitMix64& rng) {
  if (mean <= 0) return 0;
  if (mean > kMaxExactPoissonMean) {
    // Box-Muller; Uniform01 < 1, so 1 - u is in (0, 1] and the log finite.
    const double u1 = 1.0 - rng.Uniform01();
    const double u2 = rng.Uniform01();
    const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
    return std::max<int64_t>(0, std::llround(mean + std::sqrt(mean) * z));
  }
  const double u = rng.Uniform01();
  double p = std::exp(-mean);
  double cdf = p;
  int64_t x = 0;
  // The cap stops the search should rounding keep the CDF just below u.
  const int64_t cap = static_cast<int64_t>(10 * mean) + 100;
  while (u > cdf && x < cap) {
    ++x;
    p *= mean / static_cast<double>(x);
    cdf += p;
  }
  return x;
}

// Undoes x ^= x >> shift: each round fixes `shift` more of the high bits.
uint64_t UndoXorShift(uint64_t y, int shift) {
  uint64_t x = y;
  for (int fixed = shift; fixed < 64; fixed += shift) x = y ^ (x >> shift);
  return x;
}

// The inverse of Mix64 (common/hash.h): its steps undone in reverse order,
// each multiplication by the constant's inverse mod 2^64.
uint64_t UnMix64(uint64_t x) {
  x = UndoXorShift(x, 31);
  x *= 0x319642b2d24d8ec3ULL;  // 0x94d049bb133111eb^-1
  x = UndoXorShift(x, 27);
  x *= 0x96de1b173f119089ULL;  // 0xbf58476d1ce4e5b9^-1
  x = UndoXorShift(x, 30);
  return x - 0x9e3779b97f4a7c15ULL;
}

double Sigmoid(double z) {
  // Both branches avoid exp overflow for large |z|.
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

absl::Status CheckFinite(const char* name, double v) {
  if (std::isfinite(v)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name, " is ", v, "; expected a finite number"));
}

}  // namespace

// --- ZipfSampler ---
//
// Rejection-inversion: with h(x) = x^-s and H its integral, each rank k >= 2
// owns [H(k - 1/2), H(k + 1/2)] on the H axis, of length >= h(k) because h is
// convex; rank 1 owns [H(3/2) - h(1), H(3/2)], of length exactly h(1). A
// uniform y over the union is mapped back to x = H^-1(y) and rounded to k;
// it is accepted when it falls in the top h(k) of k's interval, so each k is
// accepted with probability proportional to h(k). The squeeze accepts most
// samples by comparing x with k, without evaluating H: every x in
// [k - squeeze, k + 1/2] lies in k's accepted part (the width is smallest at
// k = 2, where the squeeze is computed). ZipfSampler runs this only for
// the ranks beyond its alias table (see the header).

ZipfSampler::ZipfSampler(uint64_t n, double exponent, uint32_t head_size)
    : n_(n), exponent_(exponent) {
  if (n < 1 || !(exponent > 0)) {
    std::fprintf(stderr, "ZipfSampler: need n >= 1 and exponent > 0, got n=%llu exponent=%g\n",
                 static_cast<unsigned long long>(n), exponent);
    std::abort();
  }
  h_integral_x1_ = H(1.5) - 1.0;
  hat_area_ = H(static_cast<double>(n) + 0.5) - h_integral_x1_;
  squeeze_ = 2.0 - HInverse(H(2.5) - h(2.0));

  const uint32_t head = static_cast<uint32_t>(std::min<uint64_t>(n, head_size));
  if (head == 0) return;
  head_hat_ = H(head + 0.5) - h_integral_x1_;
  // Vose's construction: scale the probabilities to mean 1, then pair each
  // slot below 1 with one above 1 that tops it up.
  std::vector<double> weight(head);
  for (uint32_t k = 1; k <= head; ++k) {
    weight[k - 1] = h(k);
    head_mass_ += weight[k - 1];
  }
  head_.resize(head);
  std::vector<uint32_t> small, large;
  for (uint32_t i = 0; i < head; ++i) {
    weight[i] *= head / head_mass_;
    (weight[i] < 1.0 ? small : large).push_back(i);
  }
  while (!small.empty() && !large.empty()) {
    const uint32_t lo = small.back(), hi = large.back();
    small.pop_back();
    head_[lo] = {weight[lo], hi};
    weight[hi] -= 1.0 - weight[lo];
    if (weight[hi] < 1.0) {
      large.pop_back();
      small.push_back(hi);
    }
  }
  // What is left is 1 up to rounding.
  for (uint32_t i : small) head_[i] = {1.0, i};
  for (uint32_t i : large) head_[i] = {1.0, i};
}

double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return log_x * Expm1OverX((1.0 - exponent_) * log_x);
}

double ZipfSampler::HInverse(double y) const {
  return std::exp(y * Log1pOverX((1.0 - exponent_) * y));
}

double ZipfSampler::h(double x) const { return std::exp(-exponent_ * std::log(x)); }

uint64_t ZipfSampler::Sample(SplitMix64& rng) const {
  const double max_k = static_cast<double>(n_);
  const double min_tail_k = static_cast<double>(head_.size() + 1);
  const uint32_t last_head_slot = head_.empty() ? 0 : static_cast<uint32_t>(head_.size() - 1);
  for (;;) {
    // u is the position on the hat, measured from its low end.
    const double u = rng.Uniform01() * hat_area_;
    if (u < head_hat_) {
      // Rejection-inversion accepts this part of the head's hat with
      // probability head_mass_ / head_hat_ and then yields rank k with
      // probability k^-exponent / head_mass_: the table does the latter.
      if (u >= head_mass_) continue;
      const double v = u / head_mass_ * static_cast<double>(head_.size());
      // The min guards against v rounding up to the table size.
      const uint32_t slot = std::min(static_cast<uint32_t>(v), last_head_slot);
      const AliasSlot& a = head_[slot];
      return (v - slot < a.keep ? slot : a.alias) + 1;
    }
    const double y = h_integral_x1_ + u;
    const double x = HInverse(y);
    // Rounding and the clamp guard against x a hair outside the tail's
    // [head + 0.5, n + 0.5].
    const double k = std::min(max_k, std::max(min_tail_k, std::floor(x + 0.5)));
    if (k - x <= squeeze_ || y >= H(k + 0.5) - h(k)) return static_cast<uint64_t>(k);
  }
}

// --- LibsvmGenerator ---

absl::StatusOr<LibsvmGenerator> LibsvmGenerator::Create(const LibsvmGeneratorOptions& options) {
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"features_per_example", options.features_per_example},
        {"zipf_exponent", options.zipf_exponent},
        {"weight_stddev", options.weight_stddev},
        {"bias", options.bias},
        {"weight_shrink_rank", options.weight_shrink_rank},
        {"weight_shrink_exponent", options.weight_shrink_exponent}}) {
    absl::Status s = CheckFinite(name, value);
    if (!s.ok()) return s;
  }
  if (options.first_example < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_example is ", options.first_example, "; expected >= 0"));
  }
  if (options.num_examples < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_examples is ", options.num_examples, "; expected >= 0"));
  }
  if (options.num_features < 1) {
    return absl::InvalidArgumentError("num_features is 0; expected >= 1");
  }
  if (options.features_per_example < 1 ||
      options.features_per_example > static_cast<double>(options.num_features)) {
    return absl::InvalidArgumentError(
        absl::StrCat("features_per_example is ", options.features_per_example, "; expected in [1, ",
                     options.num_features, "] (num_features: an example's features are distinct)"));
  }
  if (!(options.zipf_exponent > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("zipf_exponent is ", options.zipf_exponent, "; expected > 0"));
  }
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"weight_stddev", options.weight_stddev},
        {"weight_shrink_rank", options.weight_shrink_rank},
        {"weight_shrink_exponent", options.weight_shrink_exponent}}) {
    if (value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, " is ", value, "; expected >= 0"));
    }
  }
  if (options.num_fields > kMaxLibsvmField + 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_fields is ", options.num_fields,
                                                   "; expected at most ", kMaxLibsvmField + 1,
                                                   " (fields are 0..", kMaxLibsvmField, ")"));
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads is ", options.threads, "; expected >= 1"));
  }
  return LibsvmGenerator(options);
}

LibsvmGenerator::LibsvmGenerator(const LibsvmGeneratorOptions& options)
    : options_(options),
      zipf_(options.num_features, options.zipf_exponent),
      id_key_(Mix64(options.seed ^ kIdDomain)),
      weight_key_(Mix64(options.seed ^ kWeightDomain)),
      example_key_(Mix64(options.seed ^ kExampleDomain)),
      field_key_(Mix64(options.seed ^ kFieldDomain)) {
  // Cheap to fill (a few ms), so done even for small runs.
  const uint64_t head = std::min(options.num_features, kHeadWeightRanks);
  head_weights_.resize(head);
  for (uint64_t r = 1; r <= head; ++r) head_weights_[r - 1] = PlantedWeight(FeatureId(r), r);
}

uint64_t LibsvmGenerator::FeatureRank(uint64_t id) const { return UnMix64(id) ^ id_key_; }

double LibsvmGenerator::WeightStddev(uint64_t rank) const {
  const double r0 = options_.weight_shrink_rank;
  const double r = static_cast<double>(rank);
  // Off, or not beyond the bend: exactly weight_stddev, so that data written
  // without the option keep their bytes.
  if (r0 <= 0 || r <= r0) return options_.weight_stddev;
  return options_.weight_stddev * std::pow(r0 / r, options_.weight_shrink_exponent);
}

uint32_t LibsvmGenerator::FeatureField(uint64_t id) const {
  if (options_.num_fields == 0) return 0;
  return static_cast<uint32_t>(HashCombine(field_key_, id) % options_.num_fields);
}

float LibsvmGenerator::Weight(uint64_t id) const { return PlantedWeight(id, FeatureRank(id)); }

float LibsvmGenerator::PlantedWeight(uint64_t id, uint64_t rank) const {
  // Two uniforms from a hash of (seed, id), then Box-Muller. 1 - u is in
  // (0, 1], so its log is finite.
  const uint64_t h = HashCombine(weight_key_, id);
  const double u1 = 1.0 - static_cast<double>(Mix64(h) >> 11) * 0x1.0p-53;
  const double u2 = static_cast<double>(Mix64(h ^ kWeightDomain) >> 11) * 0x1.0p-53;
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
  return static_cast<float>(WeightStddev(rank) * z);
}

float LibsvmGenerator::RankWeight(uint64_t rank) const {
  if (rank <= head_weights_.size()) return head_weights_[rank - 1];
  return PlantedWeight(FeatureId(rank), rank);
}

void LibsvmGenerator::Example(int64_t i, GeneratedExample* out) const {
  SplitMix64 rng(HashCombine(example_key_, static_cast<uint64_t>(i)));
  const double k = options_.features_per_example;
  int64_t count = options_.fixed_features_per_example ? std::llround(k) : 1 + Poisson(k - 1, rng);
  count = std::min<int64_t>(
      count, static_cast<int64_t>(std::min<uint64_t>(options_.num_features, INT64_MAX)));

  // Distinct ranks: a draw that repeats an earlier one is drawn again (the
  // sorted vector doubles as the membership test).
  std::vector<uint64_t>& ranks = out->ranks;
  ranks.clear();
  while (static_cast<int64_t>(ranks.size()) < count) {
    const uint64_t r = zipf_.Sample(rng);
    auto it = std::lower_bound(ranks.begin(), ranks.end(), r);
    if (it == ranks.end() || *it != r) ranks.insert(it, r);
  }

  double logit = options_.bias;
  out->ids.resize(ranks.size());
  for (size_t j = 0; j < ranks.size(); ++j) {
    out->ids[j] = FeatureId(ranks[j]);
    logit += RankWeight(ranks[j]);
  }
  std::sort(out->ids.begin(), out->ids.end());
  out->fields.clear();
  if (options_.num_fields > 0) {
    for (uint64_t id : out->ids) out->fields.push_back(static_cast<uint16_t>(FeatureField(id)));
  }
  out->logit = logit;
  out->probability = Sigmoid(logit);
  out->label = rng.Uniform01() < out->probability ? 1.0f : 0.0f;
}

}  // namespace ps
