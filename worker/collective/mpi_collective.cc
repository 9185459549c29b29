#include "worker/collective/mpi_collective.h"

#include <climits>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#ifndef PS_NO_MPI
#include "mpi.h"

namespace ps {

struct MpiCollective::Comm {
  MPI_Comm comm;
};

namespace {

std::string MpiMessage(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return absl::StrCat("MPI error ", code);
  return std::string(text, static_cast<size_t>(length));
}

absl::Status Check(int code, int rank, absl::string_view what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("rank ", rank, ": ", what, " failed: ", MpiMessage(code)));
}

absl::Status CheckCount(size_t n, int rank, absl::string_view what) {
  if (n <= static_cast<size_t>(INT_MAX)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("rank ", rank, ": ", what, " of ", n, " values: at most ", INT_MAX, " a call"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiCollective>> MpiCollective::Start(int* argc, char*** argv) {
  int started = 0;
  MPI_Initialized(&started);
  if (started != 0) return absl::FailedPreconditionError("MPI was started already");
  int provided = 0;
  if (int code = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided); code != MPI_SUCCESS) {
    return absl::FailedPreconditionError(absl::StrCat("MPI_Init failed: ", MpiMessage(code),
                                                      " (is the process under mpirun or srun?)"));
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::unique_ptr<MpiCollective>(
      new MpiCollective(std::make_unique<Comm>(Comm{MPI_COMM_WORLD}), true));
}

void MpiCollective::AbortJob(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; in case it does
}

MpiCollective::MpiCollective(std::unique_ptr<Comm> comm, bool world)
    : comm_(std::move(comm)), world_(world) {
  MPI_Comm_rank(comm_->comm, &rank_);
  MPI_Comm_size(comm_->comm, &size_);
}

MpiCollective::~MpiCollective() {
  if (world_) {
    MPI_Finalize();
  } else {
    MPI_Comm_free(&comm_->comm);
  }
}

absl::StatusOr<std::unique_ptr<Collective>> MpiCollective::Split(int color, int key) {
  if (color < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": Split with color ", color, ": colors are >= 0"));
  }
  MPI_Comm part;
  if (absl::Status s =
          Check(MPI_Comm_split(comm_->comm, color, key, &part), rank_, "MPI_Comm_split");
      !s.ok()) {
    return s;
  }
  MPI_Comm_set_errhandler(part, MPI_ERRORS_RETURN);
  return std::unique_ptr<Collective>(new MpiCollective(std::make_unique<Comm>(Comm{part}), false));
}

absl::Status MpiCollective::AllreduceSum(absl::Span<float> data) {
  if (absl::Status s = CheckCount(data.size(), rank_, "AllreduceSum"); !s.ok()) return s;
  return Check(MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                             MPI_SUM, comm_->comm),
               rank_, "MPI_Allreduce");
}

absl::Status MpiCollective::Allgather(absl::Span<const float> in, absl::Span<float> out) {
  if (absl::Status s = CheckCount(out.size(), rank_, "Allgather"); !s.ok()) return s;
  if (out.size() != in.size() * static_cast<size_t>(size_)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": Allgather of ", in.size(),
                                                   " values into ", out.size(), ": want ", size_,
                                                   " times ", in.size()));
  }
  return Check(MPI_Allgather(in.data(), static_cast<int>(in.size()), MPI_FLOAT, out.data(),
                             static_cast<int>(in.size()), MPI_FLOAT, comm_->comm),
               rank_, "MPI_Allgather");
}

absl::Status MpiCollective::Broadcast(absl::Span<float> data, int root) {
  if (absl::Status s = CheckCount(data.size(), rank_, "Broadcast"); !s.ok()) return s;
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": Broadcast from rank ", root, " of ", size_));
  }
  return Check(MPI_Bcast(data.data(), static_cast<int>(data.size()), MPI_FLOAT, root, comm_->comm),
               rank_, "MPI_Bcast");
}

}  // namespace ps

#else  // PS_NO_MPI: built without Open MPI

namespace ps {

struct MpiCollective::Comm {};

absl::StatusOr<std::unique_ptr<MpiCollective>> MpiCollective::Start(int*, char***) {
  return absl::FailedPreconditionError(
      "this binary was built without Open MPI (libopenmpi-dev was not installed when Bazel "
      "read the system libraries): install it with deploy/setup.sh --mpi and build again "
      "(deploy/local_cluster.sh --model_partitions or --dense_sync does both)");
}

void MpiCollective::AbortJob(int code) { std::_Exit(code); }

MpiCollective::MpiCollective(std::unique_ptr<Comm> comm, bool world)
    : comm_(std::move(comm)), world_(world) {}

MpiCollective::~MpiCollective() = default;

absl::StatusOr<std::unique_ptr<Collective>> MpiCollective::Split(int, int) {
  return absl::UnimplementedError("built without Open MPI");
}
absl::Status MpiCollective::AllreduceSum(absl::Span<float>) {
  return absl::UnimplementedError("built without Open MPI");
}
absl::Status MpiCollective::Allgather(absl::Span<const float>, absl::Span<float>) {
  return absl::UnimplementedError("built without Open MPI");
}
absl::Status MpiCollective::Broadcast(absl::Span<float>, int) {
  return absl::UnimplementedError("built without Open MPI");
}

}  // namespace ps

#endif  // PS_NO_MPI
