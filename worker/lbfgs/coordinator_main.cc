// ps_lbfgs: the coordinator of Sandblaster L-BFGS (docs/guide/lbfgs.md).
//
//   ps_lbfgs --servers=h0:p0,h1:p1 --listen=127.0.0.1:0 --port_file=F
//            --table=lbfgs_w --sparse --l2=1e-4 --portions=16
//   ps_worker --algorithm=lbfgs --coordinator=127.0.0.1:$(cat F) --servers=...
//            --train_data=train.libsvm --worker_index=i       (one per worker)
//
// Creates the OPT_LBFGS table (weights 0), serves the workers their data
// portions, and drives L-BFGS on the servers with vector ops: only scalars
// travel between it and the servers. Prints one line per iteration and a
// RESULT line; --curve_csv writes the curve.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_spec.h"
#include "common/connection_flags.h"
#include "common/grpc_channels.h"
#include "common/peer_security.h"
#include "common/port_file.h"
#include "common/random_id.h"
#include "common/table_def.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "worker/client/ps_client.h"
#include "worker/lbfgs/coordinator_service.h"
#include "worker/lbfgs/lbfgs_driver.h"
#include "worker/lbfgs/portion_objective.h"
#include "worker/lbfgs/portion_scheduler.h"
#include "worker/lbfgs/server_vector_space.h"

ABSL_FLAG(std::string, servers, "", "cluster spec: comma-separated host:port of every server");
ABSL_FLAG(std::string, listen, "127.0.0.1:0", "where workers reach the coordinator (port 0: any)");
ABSL_FLAG(std::string, port_file, "", "if set, write the bound port to this file");
ABSL_FLAG(std::string, table, "lbfgs_w", "the weight table (OPT_LBFGS), created if absent");
ABSL_FLAG(bool, sparse, true,
          "sparse table (any feature index; rows created by the first gradient) or dense "
          "(--num_keys)");
ABSL_FLAG(uint64_t, num_keys, 0,
          "dense table: keys [0, num_keys), above the largest feature index (+ 1 for --bias, "
          "whose key is the last)");
ABSL_FLAG(int, num_buckets, 1024, "sparse table: slices");
ABSL_FLAG(bool, bias, true,
          "give every example a constant feature 1 (the model's bias, regularized as the other "
          "weights) at key 2^64 - 1, or a dense table's last key");
ABSL_FLAG(int, memory, 10, "history pairs m of L-BFGS (1 to 64)");
ABSL_FLAG(double, l2, 1e-4, "l2 regularization: f = mean logistic loss + l2/2 ||w||^2");
ABSL_FLAG(int, max_iterations, 100, "L-BFGS iterations at most");
ABSL_FLAG(double, gtol, 1e-5, "stop when ||gradient||_2 <= gtol");
ABSL_FLAG(double, ftol, 2.2e-9,
          "stop when the relative decrease of f, (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1), is <= "
          "ftol (scipy's factr * eps)");
ABSL_FLAG(int, portions, 16,
          "data portions per evaluation (more than workers: fast ones take more)");
ABSL_FLAG(int, backup_after_ms, 500,
          "a portion running this long, with none left to hand out, gets a backup copy");
ABSL_FLAG(int, evaluation_timeout_seconds, 600,
          "an evaluation not done by then fails the job (are the workers running?)");
ABSL_FLAG(std::string, curve_csv, "",
          "if set, write iteration,seconds,f,loss,grad_norm,evaluations,coordinator_bytes");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "ps_lbfgs: %s\n", message.c_str());
  return 1;
}

absl::StatusOr<ps::proto::TableDef> TableFromFlags() {
  ps::proto::TableDef def;
  def.set_name(absl::GetFlag(FLAGS_table));
  def.set_width(1);
  def.set_optimizer(ps::proto::OPT_LBFGS);
  def.set_lbfgs_memory(static_cast<uint32_t>(absl::GetFlag(FLAGS_memory)));
  if (absl::GetFlag(FLAGS_sparse)) {
    def.set_kind(ps::proto::TABLE_SPARSE);
    def.set_num_buckets(static_cast<uint32_t>(absl::GetFlag(FLAGS_num_buckets)));
  } else {
    if (absl::GetFlag(FLAGS_num_keys) == 0) {
      return absl::InvalidArgumentError(
          "--sparse=false needs --num_keys (above the largest feature index of the data)");
    }
    def.set_num_keys(absl::GetFlag(FLAGS_num_keys));
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Sandblaster L-BFGS coordinator. See docs/guide/lbfgs.md.");
  absl::ParseCommandLine(argc, argv);
  const ps::ConnectionFlags connection = ps::GetConnectionFlags();
  if (absl::Status s = ps::SetPeerSecurityFromFlags(connection); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
  if (!spec.ok()) return Fail(absl::StrCat("--servers: ", spec.status().message()));
  const int portions = absl::GetFlag(FLAGS_portions);
  if (portions < 1 || portions > ps::lbfgs::kMaxPortions) {
    return Fail(
        absl::StrCat("--portions must be in [1, ", ps::lbfgs::kMaxPortions, "], got ", portions));
  }
  absl::StatusOr<ps::proto::TableDef> def = TableFromFlags();
  if (!def.ok()) return Fail(std::string(def.status().message()));

  ps::PsClientOptions client_options;
  client_options.servers = spec->servers;
  client_options.worker_id = 0xFFFFFF01u;
  auto client = ps::PsClient::Connect(client_options);
  if (!client.ok()) return Fail(std::string(client.status().message()));
  if (absl::Status s = (*client)->CreateTable(*def); !s.ok()) return Fail(std::string(s.message()));

  ps::lbfgs::SchedulerOptions scheduler_options;
  scheduler_options.backup_after = absl::Milliseconds(absl::GetFlag(FLAGS_backup_after_ms));
  ps::lbfgs::PortionScheduler scheduler(scheduler_options, ps::Clock::Real());
  ps::lbfgs::CoordinatorOptions service_options;
  service_options.table = def->name();
  service_options.num_portions = portions;
  service_options.has_bias = absl::GetFlag(FLAGS_bias);
  service_options.bias_key =
      def->kind() == ps::proto::TABLE_SPARSE ? ~uint64_t{0} : def->num_keys() - 1;
  // Drawn per run, above every worker index: the servers remember pushed
  // ids per worker id, and another job's (or an earlier run's) portion
  // pushes carry the same request ids.
  service_options.push_worker_id =
      0x80000000u | static_cast<uint32_t>(ps::RandomNonZeroId() & 0x7FFFFFFFu);
  ps::lbfgs::CoordinatorService service(service_options, &scheduler);

  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (connection.tls.enabled()) {
    auto tls = ps::ServerTlsCredentials(connection.tls);
    if (!tls.ok()) return Fail(std::string(tls.status().message()));
    credentials = *tls;
  }
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), credentials, &port);
  builder.RegisterService(&service);
  ps::AcceptPeerKeepalive(&builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return Fail(absl::StrCat("cannot listen on --listen=", absl::GetFlag(FLAGS_listen)));
  }
  std::printf("ps_lbfgs: listening on port %d, table %s\n", port,
              ps::TableDefSummary(*def).c_str());
  std::fflush(stdout);
  if (const std::string f = absl::GetFlag(FLAGS_port_file); !f.empty()) {
    if (absl::Status s = ps::WritePortFile(f, port, "--port_file"); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }

  ps::lbfgs::ServerVectorSpace space(client->get(), def->name(),
                                     static_cast<uint64_t>(absl::ToUnixMicros(absl::Now())) << 8);
  ps::lbfgs::PortionObjectiveOptions objective_options;
  objective_options.num_portions = portions;
  objective_options.l2 = absl::GetFlag(FLAGS_l2);
  objective_options.evaluation_timeout =
      absl::Seconds(absl::GetFlag(FLAGS_evaluation_timeout_seconds));
  ps::lbfgs::PortionObjective objective(objective_options, &space, &scheduler);
  ps::lbfgs::LbfgsOptions options;
  options.memory = absl::GetFlag(FLAGS_memory);
  options.max_iterations = absl::GetFlag(FLAGS_max_iterations);
  options.gtol = absl::GetFlag(FLAGS_gtol);
  options.ftol = absl::GetFlag(FLAGS_ftol);
  ps::lbfgs::LbfgsDriver driver(options, &space, &objective);

  FILE* curve = nullptr;
  if (const std::string f = absl::GetFlag(FLAGS_curve_csv); !f.empty()) {
    curve = std::fopen(f.c_str(), "w");
    if (curve == nullptr) return Fail(absl::StrCat("--curve_csv=", f, ": cannot write"));
    std::fprintf(curve, "iteration,seconds,f,loss,grad_norm,evaluations,coordinator_bytes\n");
  }
  const absl::Time start = absl::Now();
  uint64_t bytes_before = 0;
  auto progress = [&](const ps::lbfgs::IterationReport& r) {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    std::printf(
        "lbfgs iteration=%d f=%.10g loss=%.10g grad_norm=%.4g step=%.4g evaluations=%d "
        "backups=%d seconds=%.3f coordinator_bytes=%llu (+%llu)\n",
        r.iteration, r.f, objective.data_loss(), r.grad_norm, r.step, r.evaluations,
        objective.backups(), seconds, static_cast<unsigned long long>(space.bytes()),
        static_cast<unsigned long long>(space.bytes() - bytes_before));
    std::fflush(stdout);
    bytes_before = space.bytes();
    if (curve != nullptr) {
      std::fprintf(curve, "%d,%.4f,%.12g,%.12g,%.6g,%d,%llu\n", r.iteration, seconds, r.f,
                   objective.data_loss(), r.grad_norm, r.evaluations,
                   static_cast<unsigned long long>(space.bytes()));
      std::fflush(curve);
    }
  };
  absl::StatusOr<ps::lbfgs::LbfgsResult> result = driver.Run(progress);
  service.Finish(absl::Seconds(5));
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  if (curve != nullptr) std::fclose(curve);
  if (!result.ok()) return Fail(std::string(result.status().message()));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf(
      "RESULT lbfgs f=%.12g loss=%.12g grad_norm=%.6g iterations=%d evaluations=%d stop=%s "
      "seconds=%.3f coordinator_bytes=%llu coordinator_calls=%lld bytes_per_iteration=%.1f "
      "values=%llu examples=%llu backups=%d duplicates=%d\n",
      result->f, objective.data_loss(), result->grad_norm, result->iterations, result->evaluations,
      result->stop_reason.c_str(), seconds, static_cast<unsigned long long>(space.bytes()),
      static_cast<long long>(space.calls()),
      result->iterations > 0 ? static_cast<double>(space.bytes()) / result->iterations : 0.0,
      static_cast<unsigned long long>(space.values()),
      static_cast<unsigned long long>(objective.examples()), objective.backups(),
      objective.duplicates());
  for (const auto& [worker, n] : scheduler.PortionsByWorker()) {
    std::printf("RESULT lbfgs_worker worker=%u portions=%d\n", worker, n);
  }
  return 0;
}
