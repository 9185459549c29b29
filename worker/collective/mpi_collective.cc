#include "worker/collective/mpi_collective.h"

#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "mpi.h"

namespace ps {
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
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiCollective>(new MpiCollective(rank, size));
}

MpiCollective::~MpiCollective() { MPI_Finalize(); }

absl::Status MpiCollective::AllreduceSum(absl::Span<float> data) {
  if (absl::Status s = CheckCount(data.size(), rank_, "AllreduceSum"); !s.ok()) return s;
  return Check(MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                             MPI_SUM, MPI_COMM_WORLD),
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
                             static_cast<int>(in.size()), MPI_FLOAT, MPI_COMM_WORLD),
               rank_, "MPI_Allgather");
}

absl::Status MpiCollective::Broadcast(absl::Span<float> data, int root) {
  if (absl::Status s = CheckCount(data.size(), rank_, "Broadcast"); !s.ok()) return s;
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": Broadcast from rank ", root, " of ", size_));
  }
  return Check(
      MPI_Bcast(data.data(), static_cast<int>(data.size()), MPI_FLOAT, root, MPI_COMM_WORLD), rank_,
      "MPI_Bcast");
}

}  // namespace ps
