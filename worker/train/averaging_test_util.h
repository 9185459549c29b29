// Test helper: an AveragingConfig whose local steps are plain SGD, the rule
// tests of averaging and EASGD compute their expected rounds with.
#ifndef PS_WORKER_TRAIN_AVERAGING_TEST_UTIL_H_
#define PS_WORKER_TRAIN_AVERAGING_TEST_UTIL_H_

#include "worker/train/averaging_trainer.h"

namespace ps {

inline AveragingConfig LocalSgdAveraging(Algorithm algorithm, int every, double alpha,
                                         float learning_rate) {
  AveragingConfig a;
  a.algorithm = algorithm;
  a.every = every;
  a.easgd_alpha = alpha;
  a.local_optimizer.set_optimizer(proto::OPT_SGD);
  a.local_optimizer.set_learning_rate(learning_rate);
  return a;
}

}  // namespace ps

#endif  // PS_WORKER_TRAIN_AVERAGING_TEST_UTIL_H_
