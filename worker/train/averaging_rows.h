// AveragingRows: model averaging and EASGD (worker/train/averaging_trainer.h)
// for the rows of one table that a sparse model's trainer reads and writes
// by key (RowIo). The table's center lives on the servers (optimizer
// AveragingTableOptimizer(): a push of g moves a row by -g); this worker
// keeps a local copy of the rows it uses and trains it with the local
// optimizer, and talks to the servers at most twice per round of `every`
// steps (a round ends at every `every`-th Push, and at Flush):
//
//   Pull     rows held locally are read from the copy; the others are
//            pulled from the center (the first pull of a row in a round)
//            and kept, with the value pulled.
//   Push     applies the local optimizer to the rows (one step).
//   round    average: pushes (pulled - local) / N for every row held and
//   end      forgets them all: the center moves by (local - pulled) / N.
//            easgd: pulls the center c of every row held, moves each row
//            by e = alpha (local - c) toward it and pushes -e (the center
//            moves by e); keeps the rows used this round for the next one
//            and forgets the others (their copy restarts from the center).
//
// Reads and writes by key take no part in the servers' clocks: with sparse
// models every setting is asynchronous. A dense table works too, its keys
// being [0, num_keys) (the embedding MLP's dense layers). Not thread-safe.
#ifndef PS_WORKER_TRAIN_AVERAGING_ROWS_H_
#define PS_WORKER_TRAIN_AVERAGING_ROWS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/optimizer/optimizer.h"
#include "worker/client/ps_client.h"
#include "worker/train/averaging_trainer.h"
#include "worker/train/row_io.h"

namespace ps {

class AveragingRows : public RowIo {
 public:
  // `client` must outlive this. Errors: those of ValidateAveragingConfig's
  // checks of every, easgd_alpha and the local optimizer.
  static absl::StatusOr<std::unique_ptr<AveragingRows>> Create(PsClient& client, std::string table,
                                                               uint32_t width,
                                                               const AveragingConfig& averaging,
                                                               int num_workers);

  absl::Status Pull(absl::Span<const uint64_t> keys, uint64_t step, absl::Span<float> out) override;
  absl::Status Push(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
                    uint64_t clock) override;
  // Ends the current round if it has steps.
  absl::Status Flush(uint64_t clock) override;
  int64_t keys_pulled() const override { return keys_pulled_; }
  int64_t keys_pushed() const override { return keys_pushed_; }

  // Rounds sent, and rows held now.
  int64_t rounds() const { return rounds_; }
  size_t rows_held() const { return rows_.size(); }

 private:
  struct Row {
    size_t at;          // its floats: values_[at * width_], state_[at * width_ * spv]
    bool used = false;  // pushed in the current round
  };
  AveragingRows(PsClient& client, std::string table, uint32_t width,
                const AveragingConfig& averaging, int num_workers,
                std::unique_ptr<Optimizer> optimizer);
  absl::Status EndRound(uint64_t clock);
  // Keeps only the rows of `keep` (in order), compacting the arrays.
  void Retain(const std::vector<uint64_t>& keep);
  float* Values(const Row& row) { return values_.data() + row.at * width_; }

  PsClient& client_;
  const std::string table_;
  const uint32_t width_;
  const AveragingConfig averaging_;
  const int num_workers_;
  const std::unique_ptr<Optimizer> optimizer_;
  const size_t state_per_row_;
  absl::flat_hash_map<uint64_t, Row> rows_;
  std::vector<uint64_t> keys_;  // of rows_, by `at`
  // Per row, by `at`: its values, the values pulled (average), its
  // optimizer state.
  std::vector<float> values_, pulled_, state_;
  int steps_in_round_ = 0;
  int64_t local_steps_ = 0, rounds_ = 0;
  int64_t keys_pulled_ = 0, keys_pushed_ = 0;
  std::vector<uint64_t> missing_;
  std::vector<float> fetched_, send_;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_AVERAGING_ROWS_H_
