#include "worker/train/averaging_rows.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<std::unique_ptr<AveragingRows>> AveragingRows::Create(
    PsClient& client, std::string table, uint32_t width, const AveragingConfig& averaging,
    int num_workers) {
  if (absl::Status s = ValidateAveragingConfig(averaging, TrainerConfig()); !s.ok()) return s;
  if (width == 0 || num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("averaging table '", table, "': width ", width,
                                                   " and num_workers ", num_workers,
                                                   " must be >= 1"));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(averaging.local_optimizer);
  if (!optimizer.ok()) return optimizer.status();
  return std::unique_ptr<AveragingRows>(new AveragingRows(
      client, std::move(table), width, averaging, num_workers, *std::move(optimizer)));
}

AveragingRows::AveragingRows(PsClient& client, std::string table, uint32_t width,
                             const AveragingConfig& averaging, int num_workers,
                             std::unique_ptr<Optimizer> optimizer)
    : client_(client),
      table_(std::move(table)),
      width_(width),
      averaging_(averaging),
      num_workers_(num_workers),
      optimizer_(std::move(optimizer)),
      state_per_row_(static_cast<size_t>(width) * optimizer_->state_per_value()) {}

absl::Status AveragingRows::Pull(absl::Span<const uint64_t> keys, uint64_t /*step*/,
                                 absl::Span<float> out) {
  missing_.clear();
  for (uint64_t key : keys) {
    if (!rows_.contains(key)) missing_.push_back(key);
  }
  if (!missing_.empty()) {
    fetched_.resize(missing_.size() * width_);
    if (absl::Status s = client_.PullKeys(table_, missing_, width_, absl::MakeSpan(fetched_));
        !s.ok()) {
      return s;
    }
    keys_pulled_ += static_cast<int64_t>(missing_.size());
    for (size_t j = 0; j < missing_.size(); ++j) {
      const size_t at = keys_.size();
      rows_[missing_[j]] = Row{at};
      keys_.push_back(missing_[j]);
      const float* row = fetched_.data() + j * width_;
      values_.insert(values_.end(), row, row + width_);
      // Averaging's round end needs the center as first pulled; EASGD's
      // pulls the center again.
      if (averaging_.algorithm == Algorithm::kAverage)
        pulled_.insert(pulled_.end(), row, row + width_);
      state_.resize(state_.size() + state_per_row_);
      optimizer_->InitState(state_.data() + at * state_per_row_, state_per_row_);
    }
  }
  for (size_t j = 0; j < keys.size(); ++j) {
    const float* row = Values(rows_.at(keys[j]));
    std::copy(row, row + width_, out.data() + j * width_);
  }
  return absl::OkStatus();
}

absl::Status AveragingRows::Push(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
                                 uint64_t clock) {
  for (size_t j = 0; j < keys.size(); ++j) {
    auto it = rows_.find(keys[j]);
    if (it == rows_.end()) {
      return absl::FailedPreconditionError(absl::StrCat("averaging table '", table_, "': key ",
                                                        keys[j], " pushed without being pulled"));
    }
    Row& row = it->second;
    row.used = true;
    optimizer_->Apply(Values(row),
                      state_per_row_ > 0 ? state_.data() + row.at * state_per_row_ : nullptr,
                      grads.data() + j * width_, 1, width_, static_cast<uint64_t>(local_steps_));
  }
  ++local_steps_;
  if (++steps_in_round_ < averaging_.every) return absl::OkStatus();
  return EndRound(clock);
}

absl::Status AveragingRows::Flush(uint64_t clock) {
  if (steps_in_round_ == 0) return absl::OkStatus();
  return EndRound(clock);
}

absl::Status AveragingRows::EndRound(uint64_t clock) {
  steps_in_round_ = 0;
  ++rounds_;
  if (keys_.empty()) return absl::OkStatus();
  send_.resize(values_.size());
  if (averaging_.algorithm == Algorithm::kEasgd) {
    // The center now, for every row held.
    fetched_.resize(values_.size());
    if (absl::Status s = client_.PullKeys(table_, keys_, width_, absl::MakeSpan(fetched_));
        !s.ok()) {
      return s;
    }
    keys_pulled_ += static_cast<int64_t>(keys_.size());
  }
  EndRoundValues(averaging_, num_workers_,
                 averaging_.algorithm == Algorithm::kAverage ? pulled_ : fetched_,
                 absl::MakeSpan(values_), absl::MakeSpan(send_));
  if (absl::Status s = client_.PushKeys(table_, keys_, width_, send_, clock); !s.ok()) return s;
  keys_pushed_ += static_cast<int64_t>(keys_.size());
  std::vector<uint64_t> keep;
  if (averaging_.algorithm == Algorithm::kEasgd) {
    for (uint64_t key : keys_) {
      if (rows_.at(key).used) keep.push_back(key);
    }
  }
  Retain(keep);
  return absl::OkStatus();
}

void AveragingRows::Retain(const std::vector<uint64_t>& keep) {
  std::vector<float> values, state;
  values.reserve(keep.size() * width_);
  state.reserve(keep.size() * state_per_row_);
  absl::flat_hash_map<uint64_t, Row> rows;
  for (size_t at = 0; at < keep.size(); ++at) {
    const Row& old = rows_.at(keep[at]);
    const float* v = values_.data() + old.at * width_;
    values.insert(values.end(), v, v + width_);
    const float* st = state_.data() + old.at * state_per_row_;
    state.insert(state.end(), st, st + state_per_row_);
    rows[keep[at]] = Row{at};
  }
  rows_ = std::move(rows);
  keys_ = keep;
  values_ = std::move(values);
  pulled_.clear();  // averaging keeps no row past its round's end
  state_ = std::move(state);
}

}  // namespace ps
