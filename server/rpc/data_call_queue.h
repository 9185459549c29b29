// DataCallQueue: every call a server answers, served through gRPC's async
// generic API from one completion queue by one thread. That thread polls the sockets, reads
// a request, runs its handler and starts the reply, so a small call is not
// handed from gRPC's poller to a callback thread and back: with the
// callback API's two threads taking turns, half of a small call's server
// CPU went to waking them (docs/experiments/2026-11-27-small-call-costs.md;
// one thread per queue measured 2x the calls of the callback API on this
// machine, two threads on two queues lost the gain).
//
// A handler must not block: it finishes its call at once or later, from any
// thread (a parked pull, a write waiting for the chain's tail). Its
// OnCancel hook runs on the queue's thread when the client cancels or goes
// away before the call is finished.
//
// Lifecycle: Register before the server is built, Start after, Stop after
// the server's Shutdown (which needs the thread to finish the calls in
// flight). Thread-safe.
#ifndef PS_SERVER_RPC_DATA_CALL_QUEUE_H_
#define PS_SERVER_RPC_DATA_CALL_QUEUE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace ps {

class DataCall {
 public:
  const grpc::GenericServerContext& context() const { return ctx_; }
  // The method's full name ("/ps.proto.ParameterServer/Push").
  const std::string& method() const { return ctx_.method(); }
  const grpc::ByteBuffer& request() const { return request_; }

  // Ends the call with `status`, and `reply` when OK. Exactly once, from any
  // thread; the call may be deleted as soon as it returns.
  void Finish(const absl::Status& status, grpc::ByteBuffer reply = grpc::ByteBuffer());
  // Parses the request into `message`; when it does not parse, finishes the
  // call with INVALID_ARGUMENT and returns false.
  bool ParseRequest(google::protobuf::MessageLite* message);
  // Finish(status) with `reply` serialized when OK.
  void Reply(const absl::Status& status, const google::protobuf::MessageLite& reply);
  // `hook` runs on the queue's thread if the client cancels the call or goes
  // away before it is finished. Called on the queue's thread (by a handler).
  void OnCancel(std::function<void()> hook) { on_cancel_ = std::move(hook); }

 private:
  friend class DataCallQueue;
  enum class Step { kMatched, kRead, kFinished, kDone };
  struct Tag {
    DataCall* call;
    Step step;
  };
  DataCall() = default;

  grpc::GenericServerContext ctx_;
  grpc::GenericServerAsyncReaderWriter stream_{&ctx_};
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
  std::function<void()> on_cancel_;
  // Set on the queue's thread only; the call is deleted once both are.
  bool finished_ = false;  // Finish's completion came back
  bool done_ = false;      // gRPC's end-of-call notice came back
  Tag matched_tag_{this, Step::kMatched};
  Tag read_tag_{this, Step::kRead};
  Tag finished_tag_{this, Step::kFinished};
  Tag done_tag_{this, Step::kDone};
};

class DataCallQueue {
 public:
  using Handler = std::function<void(DataCall* call)>;
  DataCallQueue() = default;
  ~DataCallQueue();  // Stop()
  DataCallQueue(const DataCallQueue&) = delete;
  DataCallQueue& operator=(const DataCallQueue&) = delete;

  // `handler` serves the calls of `method` ("/package.Service/Method");
  // others are answered UNIMPLEMENTED. Before Start.
  void Handle(const std::string& method, Handler handler) {
    handlers_[method] = std::move(handler);
  }
  void Register(grpc::ServerBuilder* builder);
  void Start();
  void Stop();

 private:
  void Run();
  void Request();  // offers one more call object to the server
  void Step(DataCall::Tag* tag, bool ok);

  std::map<std::string, Handler> handlers_;  // read-only once started
  grpc::AsyncGenericService generic_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace ps

#endif  // PS_SERVER_RPC_DATA_CALL_QUEUE_H_
