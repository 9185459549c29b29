// mpi_collective_check: run under mpirun by mpi_collective_test.sh. Every
// rank checks AllreduceSum, Allgather and Broadcast against the values it
// can compute by hand, then again in the groups of a Split by rank parity,
// and prints "rank R of N: OK" (or what differed, and exits 1). --die_rank=R: rank R kills itself
// (SIGKILL) after the first operation, while the others wait in the second.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "worker/collective/mpi_collective.h"

ABSL_FLAG(int, die_rank, -1, "this rank kills itself after the first operation (-1: none)");
ABSL_FLAG(int, values, 1000, "values per operation");

namespace {

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto mpi = ps::MpiCollective::Start(&argc, &argv);
  if (!mpi.ok()) {
    std::fprintf(stderr, "%s\n", std::string(mpi.status().message()).c_str());
    return 2;
  }
  absl::ParseCommandLine(argc, argv);
  ps::Collective& c = **mpi;
  const int rank = c.rank(), size = c.size();
  const int n = absl::GetFlag(FLAGS_values);
  // Rank r holds r * 1000 + i: the sum over ranks is 1000 * size (size - 1) / 2 + size * i,
  // exact in float for these sizes.
  std::vector<float> data(n);
  for (int i = 0; i < n; ++i) data[i] = static_cast<float>(rank * 1000 + i);
  if (absl::Status s = c.AllreduceSum(absl::MakeSpan(data)); !s.ok()) {
    return Fail(rank, std::string(s.message()));
  }
  for (int i = 0; i < n; ++i) {
    const float want = static_cast<float>(1000 * size * (size - 1) / 2 + size * i);
    if (data[i] != want) {
      return Fail(rank, "AllreduceSum: value " + std::to_string(i) + " is " +
                            std::to_string(data[i]) + ", want " + std::to_string(want));
    }
  }
  if (rank == absl::GetFlag(FLAGS_die_rank)) std::raise(SIGKILL);
  std::vector<float> mine(n, static_cast<float>(rank + 1)), all(static_cast<size_t>(n) * size);
  if (absl::Status s = c.Allgather(mine, absl::MakeSpan(all)); !s.ok()) {
    return Fail(rank, std::string(s.message()));
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] != static_cast<float>(i / n + 1)) return Fail(rank, "Allgather: wrong value");
  }
  std::vector<float> b(n, rank == size - 1 ? 7.5f : -1.0f);
  if (absl::Status s = c.Broadcast(absl::MakeSpan(b), size - 1); !s.ok()) {
    return Fail(rank, std::string(s.message()));
  }
  for (float v : b) {
    if (v != 7.5f) return Fail(rank, "Broadcast: wrong value");
  }
  // Even and odd ranks, each group ranked by descending old rank.
  auto half = c.Split(rank % 2, -rank);
  if (!half.ok()) return Fail(rank, std::string(half.status().message()));
  int members = 0, sum = 0, new_rank = 0;
  for (int r = rank % 2; r < size; r += 2) {
    ++members;
    sum += r;
    if (r > rank) ++new_rank;
  }
  if ((*half)->size() != members || (*half)->rank() != new_rank) {
    return Fail(rank, "Split: rank " + std::to_string((*half)->rank()) + " of " +
                          std::to_string((*half)->size()) + ", want " + std::to_string(new_rank) +
                          " of " + std::to_string(members));
  }
  std::vector<float> part = {static_cast<float>(rank)};
  if (absl::Status s = (*half)->AllreduceSum(absl::MakeSpan(part)); !s.ok()) {
    return Fail(rank, std::string(s.message()));
  }
  if (part[0] != static_cast<float>(sum)) return Fail(rank, "Split: wrong sum in the group");
  half->reset();
  std::printf("rank %d of %d: OK\n", rank, size);
  return 0;
}
