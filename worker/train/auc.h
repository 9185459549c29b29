// AucAccumulator: streaming ROC AUC of binary predictions in O(bins) memory,
// for evaluating a model on more examples than fit in memory (the planted
// model of the LibSVM generator, training and test passes).
// Thread-compatible: use one accumulator per thread and Merge() them.
//
// Probabilities are counted in `bins` equal-width bins over [0, 1] per class,
// and a positive and a negative in the same bin are treated as tied (the pair
// counts 1/2). The result is exact unless a bin holds a positive and a
// negative with different probabilities, and off by at most half the fraction
// of positive/negative pairs that share a bin: with the default 10^5 bins and
// predictions spread over [0, 1], ~1e-5 to 1e-4 (more when the predictions
// crowd into a few bins, e.g. a nearly constant model).
#ifndef PS_WORKER_TRAIN_AUC_H_
#define PS_WORKER_TRAIN_AUC_H_

#include <cstdint>
#include <vector>

namespace ps {

inline constexpr int kDefaultAucBins = 100000;

class AucAccumulator {
 public:
  // Requires bins >= 1 (aborts otherwise).
  explicit AucAccumulator(int bins = kDefaultAucBins);

  // Counts one example: `prob` is the predicted probability of the positive
  // class (clamped to [0, 1]; NaN counts as 0), `label` > 0 means positive
  // (so 0/1 and -1/+1 labels both work).
  void Add(double prob, float label) {
    double scaled = prob * bins_;
    if (!(scaled > 0)) scaled = 0;  // also catches NaN
    const int64_t bin = scaled >= bins_ ? bins_ - 1 : static_cast<int64_t>(scaled);
    if (label > 0) {
      ++positive_[bin];
      ++positives_;
    } else {
      ++negative_[bin];
      ++negatives_;
    }
  }

  // Adds other's counts to this one. Requires the same number of bins
  // (aborts otherwise).
  void Merge(const AucAccumulator& other);

  // The probability that a random positive is ranked above a random negative
  // (ties count 1/2), in [0, 1]; NaN when either class has no examples, since
  // there is then no pair to rank.
  double Auc() const;

  int64_t count() const { return positives_ + negatives_; }
  int64_t positives() const { return positives_; }
  int64_t negatives() const { return negatives_; }
  int bins() const { return bins_; }

  void Clear();

 private:
  int bins_;
  std::vector<int64_t> positive_;  // per bin
  std::vector<int64_t> negative_;  // per bin
  int64_t positives_ = 0;
  int64_t negatives_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_AUC_H_
