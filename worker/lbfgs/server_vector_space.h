// ServerVectorSpace: the vectors of an OPT_LBFGS table on the parameter
// servers, as the L-BFGS driver sees them (VectorSpace): each Run is one
// VectorOps call to every server (PsClient::VectorOps), with a new request id
// (its retries keep it), stamped with the current evaluation as its clock.
// Counts the bytes it exchanges with the servers. Not thread-safe (the
// driver calls it from one thread); the client is not owned.
#ifndef PS_WORKER_LBFGS_SERVER_VECTOR_SPACE_H_
#define PS_WORKER_LBFGS_SERVER_VECTOR_SPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/client/ps_client.h"
#include "worker/lbfgs/vector_space.h"

namespace ps::lbfgs {

class ServerVectorSpace final : public VectorSpace {
 public:
  // `first_request_id`: the id of the first Run (then + 1 each), distinct
  // from the previous coordinator's on the same table.
  ServerVectorSpace(PsClient* client, std::string table, uint64_t first_request_id);

  // As VectorSpace::Run. Errors: PsClient::VectorOps's, naming the server.
  absl::StatusOr<std::vector<double>> Run(const std::vector<VecOp>& ops) override;

  // The clock the next Runs carry (the evaluation in progress).
  void set_clock(uint64_t clock) { clock_ = clock; }
  uint64_t bytes() const { return bytes_; }    // exchanged with the servers so far
  int64_t calls() const { return calls_; }     // Run calls so far
  uint64_t values() const { return values_; }  // values the last Run ran over (all servers)

 private:
  PsClient* const client_;
  const std::string table_;
  uint64_t next_id_;
  uint64_t clock_ = 0;
  uint64_t bytes_ = 0;
  int64_t calls_ = 0;
  uint64_t values_ = 0;
};

}  // namespace ps::lbfgs

#endif  // PS_WORKER_LBFGS_SERVER_VECTOR_SPACE_H_
