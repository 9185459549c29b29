// grpc_threads_bench: what gRPC's threading costs a small call, outside this
// project's code. Unary calls of --request_bytes (a PushBatch of four 1K-float
// pushes is about 16 KB) answered with 64 bytes, --inflight of them kept
// outstanding, between two processes over loopback.
//
//   grpc_threads_bench --role=server --api=callback|queue|queue_health|two_queues
//     prints its port, then on stdin: "start" marks the start of a measured
//     run, "end" prints "server_cpu_us=..." (CPU per call since "start").
//   grpc_threads_bench --role=client --target=127.0.0.1:PORT --api=callback|queue
//     --inflight=16 --seconds=3
//     prints "calls_per_s=... client_cpu_us=...".
//
// The server's APIs: callback (a callback generic service: gRPC's callback
// threads run the handler), queue (the async generic API on one completion
// queue served by one thread), queue_health (the same, plus gRPC's default
// health service, which adds the callback threads back), two_queues (two
// completion queues, one thread each). The client's: callback (the generic
// stub's callback call) or queue (one completion queue and this thread).
// deploy/bench/grpc_threads.sh runs the grid;
// docs/experiments/2026-11-27-grpc-threads.md has the figures.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "common/process_cpu.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, role, "", "server or client");
ABSL_FLAG(std::string, api, "callback",
          "server: callback, queue, queue_health or two_queues; client: callback or queue");
ABSL_FLAG(std::string, target, "", "client: the server's host:port");
ABSL_FLAG(int, inflight, 16, "client: calls kept outstanding");
ABSL_FLAG(double, seconds, 3, "client: how long to call");
ABSL_FLAG(int, request_bytes, 16384, "client: bytes per request");

namespace {

using ps::ProcessCpuSeconds;

constexpr char kMethod[] = "/bench.Threads/Call";
constexpr int kReplyBytes = 64;

grpc::ByteBuffer Bytes(size_t n) {
  grpc::Slice slice(std::string(n, 'x'));
  return grpc::ByteBuffer(&slice, 1);
}

std::atomic<long> served{0};

// --- server: callback API -------------------------------------------------------
class CallbackReactor : public grpc::ServerGenericBidiReactor {
 public:
  CallbackReactor() { StartRead(&request_); }
  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);
    reply_ = Bytes(kReplyBytes);
    ++served;
    StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer request_, reply_;
};

class CallbackService : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new CallbackReactor;
  }
};

// --- server: one completion queue, one thread ----------------------------------------
struct QueueCall {
  grpc::GenericServerContext ctx;
  grpc::GenericServerAsyncReaderWriter stream{&ctx};
  grpc::ByteBuffer request, reply;
  int step = 0;  // 0 matched, 1 read, 2 finished
};

void Offer(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq) {
  auto* call = new QueueCall;
  service->RequestCall(&call->ctx, &call->stream, cq, cq, call);
}

void ServeQueue(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq) {
  for (int i = 0; i < 32; ++i) Offer(service, cq);
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) {
    auto* call = static_cast<QueueCall*>(tag);
    if (call->step == 0 && ok) {
      Offer(service, cq);
      call->step = 1;
      call->stream.Read(&call->request, call);
    } else if (call->step == 1 && ok) {
      call->reply = Bytes(kReplyBytes);
      ++served;
      call->step = 2;
      call->stream.WriteAndFinish(call->reply, grpc::WriteOptions(), grpc::Status::OK, call);
    } else if (call->step == 1) {
      call->step = 2;
      call->stream.Finish(grpc::Status::CANCELLED, call);
    } else {
      delete call;
    }
  }
}

int Server() {
  const std::string api = absl::GetFlag(FLAGS_api);
  if (api != "callback" && api != "queue" && api != "queue_health" && api != "two_queues") {
    std::fprintf(stderr,
                 "grpc_threads_bench: --api=%s: want callback, queue, queue_health or "
                 "two_queues for a server\n",
                 api.c_str());
    return 2;
  }
  if (api == "queue_health") grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  CallbackService callback;
  grpc::AsyncGenericService generic;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
  if (api == "callback") {
    builder.RegisterCallbackGenericService(&callback);
  } else {
    builder.RegisterAsyncGenericService(&generic);
    for (int i = 0; i < (api == "two_queues" ? 2 : 1); ++i) {
      queues.push_back(builder.AddCompletionQueue());
    }
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  std::vector<std::thread> threads;
  for (auto& cq : queues) threads.emplace_back([&generic, &cq] { ServeQueue(&generic, cq.get()); });
  std::printf("%d\n", port);
  std::fflush(stdout);
  double cpu_start = 0;
  long served_start = 0;
  for (std::string line; std::getline(std::cin, line);) {
    if (line == "start") {
      cpu_start = ProcessCpuSeconds();
      served_start = served;
    } else if (line == "end") {
      const long calls = served - served_start;
      std::printf("server_cpu_us=%.1f\n",
                  calls ? (ProcessCpuSeconds() - cpu_start) * 1e6 / calls : 0.0);
      std::fflush(stdout);
    }
  }
  server->Shutdown();
  for (auto& cq : queues) cq->Shutdown();
  for (std::thread& t : threads) t.join();
  return 0;
}

// --- client ---------------------------------------------------------------------------
struct ClientCall {
  grpc::ClientContext ctx;
  grpc::ByteBuffer reply;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
};

int Client() {
  const std::string api = absl::GetFlag(FLAGS_api);
  if (api != "callback" && api != "queue") {
    std::fprintf(stderr, "grpc_threads_bench: --api=%s: want callback or queue for a client\n",
                 api.c_str());
    return 2;
  }
  auto channel =
      grpc::CreateChannel(absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  const grpc::ByteBuffer request = Bytes(absl::GetFlag(FLAGS_request_bytes));
  const auto start = std::chrono::steady_clock::now();
  const auto stop = start + std::chrono::duration<double>(absl::GetFlag(FLAGS_seconds));
  const double cpu_start = ProcessCpuSeconds();
  long calls = 0;
  bool failed = false;
  if (api == "callback") {
    absl::Mutex mu;
    int live = 0;
    std::function<void()> issue = [&] {
      auto* call = new ClientCall;
      stub.UnaryCall(&call->ctx, kMethod, grpc::StubOptions(), &request, &call->reply,
                     [&, call](grpc::Status status) {
                       delete call;
                       bool again;
                       {
                         absl::MutexLock lock(&mu);
                         failed |= !status.ok();
                         ++calls;
                         again = !failed && std::chrono::steady_clock::now() < stop;
                         if (!again) --live;
                       }
                       if (again) issue();
                     });
    };
    {
      absl::MutexLock lock(&mu);
      live = absl::GetFlag(FLAGS_inflight);
    }
    for (int i = 0; i < absl::GetFlag(FLAGS_inflight); ++i) issue();
    absl::MutexLock lock(&mu);
    auto all_back = [&live]() { return live == 0; };
    mu.Await(absl::Condition(&all_back));
  } else {
    grpc::CompletionQueue cq;
    auto issue = [&] {
      auto* call = new ClientCall;
      call->reader = stub.PrepareUnaryCall(&call->ctx, kMethod, request, &cq);
      call->reader->StartCall();
      call->reader->Finish(&call->reply, &call->status, call);
    };
    int live = absl::GetFlag(FLAGS_inflight);
    for (int i = 0; i < live; ++i) issue();
    void* tag = nullptr;
    bool ok = false;
    while (live > 0 && cq.Next(&tag, &ok)) {
      auto* call = static_cast<ClientCall*>(tag);
      failed |= !call->status.ok();
      delete call;
      ++calls;
      if (!failed && std::chrono::steady_clock::now() < stop) {
        issue();
      } else {
        --live;
      }
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  if (failed) {
    std::fprintf(stderr, "grpc_threads_bench: a call to %s failed\n",
                 absl::GetFlag(FLAGS_target).c_str());
    return 1;
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("calls_per_s=%.0f client_cpu_us=%.1f\n", calls / elapsed,
              (ProcessCpuSeconds() - cpu_start) * 1e6 / calls);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string role = absl::GetFlag(FLAGS_role);
  if (role == "server") return Server();
  if (role == "client") return Client();
  std::fprintf(stderr, "grpc_threads_bench: --role=%s: want server or client\n", role.c_str());
  return 2;
}
