#include "worker/train/auc.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ps {

AucAccumulator::AucAccumulator(int bins) : bins_(bins) {
  if (bins < 1) {
    std::fprintf(stderr, "AucAccumulator: need bins >= 1, got %d\n", bins);
    std::abort();
  }
  positive_.assign(bins, 0);
  negative_.assign(bins, 0);
}

void AucAccumulator::Merge(const AucAccumulator& other) {
  if (other.bins_ != bins_) {
    std::fprintf(stderr, "AucAccumulator::Merge: %d bins into %d bins\n", other.bins_, bins_);
    std::abort();
  }
  for (int b = 0; b < bins_; ++b) {
    positive_[b] += other.positive_[b];
    negative_[b] += other.negative_[b];
  }
  positives_ += other.positives_;
  negatives_ += other.negatives_;
}

double AucAccumulator::Auc() const {
  if (positives_ == 0 || negatives_ == 0) return std::nan("");
  // Walk the bins upwards: each positive beats every negative in a lower bin
  // and ties with those in its own. Sums in double: the pair count overflows
  // int64 beyond ~3e9 examples per class.
  double wins = 0;
  double negatives_below = 0;
  for (int b = 0; b < bins_; ++b) {
    const double pos = static_cast<double>(positive_[b]);
    const double neg = static_cast<double>(negative_[b]);
    wins += pos * (negatives_below + 0.5 * neg);
    negatives_below += neg;
  }
  return wins / (static_cast<double>(positives_) * static_cast<double>(negatives_));
}

void AucAccumulator::Clear() {
  std::fill(positive_.begin(), positive_.end(), 0);
  std::fill(negative_.begin(), negative_.end(), 0);
  positives_ = negatives_ = 0;
}

}  // namespace ps
