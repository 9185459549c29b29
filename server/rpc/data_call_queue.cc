#include "server/rpc/data_call_queue.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace ps {
namespace {

// Call objects offered to the server at a time: clients' calls that arrive
// together are matched without waiting for the queue's thread.
constexpr int kCallsOffered = 64;

}  // namespace

void DataCall::Finish(const absl::Status& status, grpc::ByteBuffer reply) {
  if (status.ok()) {
    reply_.Swap(&reply);  // takes the slices without copying them
    stream_.WriteAndFinish(reply_, grpc::WriteOptions(), grpc::Status::OK, &finished_tag_);
  } else {
    stream_.Finish(ToGrpcStatus(status), &finished_tag_);
  }
  // Not a member touched from here on: the queue's thread may have deleted
  // the call already.
}

bool DataCall::ParseRequest(google::protobuf::MessageLite* message) {
  grpc::ByteBuffer bytes = request_;  // shares the slices
  grpc::ProtoBufferReader reader(&bytes);
  if (message->ParseFromZeroCopyStream(&reader)) return true;
  Finish(absl::InvalidArgumentError(
      absl::StrCat("malformed ", message->GetTypeName(), ": the request does not parse")));
  return false;
}

void DataCall::Reply(const absl::Status& status, const google::protobuf::MessageLite& reply) {
  if (!status.ok()) return Finish(status);
  grpc::Slice slice(reply.SerializeAsString());
  Finish(status, grpc::ByteBuffer(&slice, 1));
}

DataCallQueue::~DataCallQueue() { Stop(); }

void DataCallQueue::Register(grpc::ServerBuilder* builder) {
  builder->RegisterAsyncGenericService(&generic_);
  cq_ = builder->AddCompletionQueue();
}

void DataCallQueue::Start() {
  for (int i = 0; i < kCallsOffered; ++i) Request();
  thread_ = std::thread([this] { Run(); });
}

void DataCallQueue::Stop() {
  if (stopped_ || cq_ == nullptr) return;
  stopped_ = true;
  cq_->Shutdown();
  if (thread_.joinable()) {
    thread_.join();
  } else {
    Run();  // never started: drains the queue, as gRPC requires before destruction
  }
}

void DataCallQueue::Run() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) Step(static_cast<DataCall::Tag*>(tag), ok);
}

void DataCallQueue::Request() {
  auto* call = new DataCall();
  call->ctx_.AsyncNotifyWhenDone(&call->done_tag_);
  generic_.RequestCall(&call->ctx_, &call->stream_, cq_.get(), cq_.get(), &call->matched_tag_);
}

void DataCallQueue::Step(DataCall::Tag* tag, bool ok) {
  DataCall* call = tag->call;
  switch (tag->step) {
    case DataCall::Step::kMatched:
      if (!ok) {  // the server is shutting down; no call was matched
        delete call;
        return;
      }
      Request();  // the server is still running: this call was just matched
      call->stream_.Read(&call->request_, &call->read_tag_);
      return;
    case DataCall::Step::kRead:
      if (!ok) {
        call->Finish(absl::CancelledError("the call ended before its request arrived"));
        return;
      }
      if (auto it = handlers_.find(call->method()); it != handlers_.end()) {
        it->second(call);
      } else {
        call->Finish(absl::UnimplementedError(
            absl::StrCat("method ", call->method(), " is not served by this server")));
      }
      return;
    case DataCall::Step::kFinished:
      call->finished_ = true;
      break;
    case DataCall::Step::kDone:
      call->done_ = true;
      if (!call->finished_ && call->ctx_.IsCancelled() && call->on_cancel_) call->on_cancel_();
      break;
  }
  if (call->finished_ && call->done_) delete call;
}

}  // namespace ps
