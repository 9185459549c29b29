#include "worker/client/grpc_transport.h"

#include <atomic>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_channels.h"
#include "common/grpc_status.h"
#include "common/protocol.h"
#include "common/raw_message.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ps {

namespace {

// Pushes of at most this many bytes of values are copied into a slice gRPC
// owns; larger ones are sent from the caller's memory. tests/soak_test
// showed why: with attempts cut short by their deadline, gRPC 1.51 kept a
// reference to a zero-copy push's values now and then after the call had
// ended, so the push's done (which waits for every reference to go) never
// ran and the caller hung (2 of 4 threads within 20 s; none in 3 runs
// with every push copied). A copy of 1 MiB took 19 us here (cache-warm
// memcpy, 2-core VM); its cost on the data path is not measured yet.
constexpr size_t kCopiedPushBytes = size_t{1} << 20;

grpc::ByteBuffer SerializeToBuffer(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

GrpcTransport::GrpcTransport(std::vector<std::string> addresses, Clock* clock,
                             std::shared_ptr<const PeerSecurity> security)
    : addresses_(std::move(addresses)), clock_(clock), security_(std::move(security)) {
  queue_thread_ = std::thread([this] { RunQueue(); });
}

GrpcTransport::GrpcTransport(std::shared_ptr<const ShardDirectory> directory, Clock* clock,
                             std::shared_ptr<const PeerSecurity> security)
    : directory_(std::move(directory)), clock_(clock), security_(std::move(security)) {
  queue_thread_ = std::thread([this] { RunQueue(); });
}

GrpcTransport::~GrpcTransport() {
  {
    // Calls still in flight end now (CANCELLED) instead of at their
    // deadline, which may be none.
    absl::MutexLock lock(&live_mu_);
    for (grpc::ClientContext* context : live_) context->TryCancel();
  }
  queue_.Shutdown();
  queue_thread_.join();
}

struct GrpcTransport::QueuedCall {
  std::shared_ptr<grpc::ClientContext> context;
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  std::function<void(const grpc::Status&, const grpc::ByteBuffer&)> on_done;
};

void GrpcTransport::StartQueued(
    Stubs* stubs, std::shared_ptr<grpc::ClientContext> context, const std::string& method,
    const grpc::ByteBuffer& request,
    std::function<void(const grpc::Status&, const grpc::ByteBuffer&)> on_done) {
  auto* call = new QueuedCall;
  call->context = std::move(context);
  call->on_done = std::move(on_done);
  {
    absl::MutexLock lock(&live_mu_);
    live_.insert(call->context.get());
  }
  call->reader = stubs->generic->PrepareUnaryCall(call->context.get(), method, request, &queue_);
  call->reader->StartCall();
  call->reader->Finish(&call->response, &call->status, call);
}

void GrpcTransport::RunQueue() {
  void* tag = nullptr;
  bool ok = false;
  while (queue_.Next(&tag, &ok)) {
    std::unique_ptr<QueuedCall> call(static_cast<QueuedCall*>(tag));
    {
      absl::MutexLock lock(&live_mu_);
      live_.erase(call->context.get());
    }
    call->on_done(call->status, call->response);
  }
}

namespace {
std::string MethodPath(const char* name) {
  return absl::StrCat("/", proto::ParameterServer::service_full_name(), "/", name);
}
}  // namespace

template <typename Reply>
void GrpcTransport::TypedQueued(int server, std::shared_ptr<grpc::ClientContext> context,
                                const char* method, const google::protobuf::MessageLite& request,
                                Reply* reply, Done done) {
  Stubs* stubs = StubsFor(server);
  if (stubs == nullptr) return NoPrimary(server, done);
  StartQueued(stubs, std::move(context), MethodPath(method), SerializeToBuffer(request),
              [reply, done = std::move(done)](const grpc::Status& s, const grpc::ByteBuffer& r) {
                absl::Status status = FromGrpcStatus(s);
                if (status.ok()) {
                  grpc::Slice flat;
                  if (!r.DumpToSingleSlice(&flat).ok() ||
                      !reply->ParseFromArray(flat.begin(), static_cast<int>(flat.size()))) {
                    status = absl::InternalError(
                        absl::StrCat("reply of ", reply->GetTypeName(), " does not parse"));
                  }
                }
                done(std::move(status));
              });
}

GrpcTransport::Stubs* GrpcTransport::StubsFor(int server) const {
  const std::string address = directory_ ? directory_->PrimaryAddress(server) : addresses_[server];
  if (address.empty()) return nullptr;
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Stubs>& stubs = stubs_[address];
  if (stubs == nullptr) {
    std::shared_ptr<grpc::Channel> channel = NewPeerChannel(address, security_.get());
    stubs = std::make_unique<Stubs>();
    stubs->generic = std::make_unique<grpc::GenericStub>(channel);
  }
  return stubs.get();
}

void GrpcTransport::NoPrimary(int server, const Done& done) const {
  done(absl::UnavailableError(absl::StrCat(ServerName(server), " has no primary now")));
}

std::string GrpcTransport::ServerName(int server) const {
  if (directory_) return directory_->Describe(server);
  return absl::StrCat("server ", server, " (", addresses_[server], ")");
}

std::shared_ptr<grpc::ClientContext> GrpcTransport::NewContext(int server,
                                                               absl::Time deadline) const {
  auto context = std::make_shared<grpc::ClientContext>();
  if (deadline != absl::InfiniteFuture()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + (deadline - clock_->Now())));
  }
  context->AddMetadata(kShardMetadataKey, absl::StrCat(server));
  return context;
}

// Lifecycle of a push: the state is created in Push and then owned by
// `pending`, a count of the events still to come: one per value piece
// (gRPC calls ReleasePushPiece when it drops the piece) plus one for the
// RPC's completion. Whichever event brings the count to zero takes the state
// back into a unique_ptr, destroys it (context and buffers) and then runs
// `done`: so done runs once the caller's gradients are no longer referenced,
// and nothing of the call is left afterwards.
struct GrpcTransport::PushState {
  std::shared_ptr<grpc::ClientContext> context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  std::function<absl::Status(const grpc::ByteBuffer&)> decode;
  Done done;
  absl::Status status;
  std::atomic<int> pending{0};
};

void GrpcTransport::ReleasePushPiece(void* state) { FinishPush(static_cast<PushState*>(state)); }

void GrpcTransport::FinishPush(PushState* state) {
  if (state->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::unique_ptr<PushState> owned(state);
  Done done = std::move(owned->done);
  absl::Status status = std::move(owned->status);
  owned.reset();
  done(std::move(status));
}

void GrpcTransport::StartPush(int server, const std::string& method,
                              const google::protobuf::MessageLite& header, int field,
                              absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                              std::function<absl::Status(const grpc::ByteBuffer&)> decode,
                              Done done) {
  Stubs* stubs = StubsFor(server);
  if (stubs == nullptr) return NoPrimary(server, done);
  auto owned = std::make_unique<PushState>();
  owned->context = NewContext(server, deadline);
  owned->decode = std::move(decode);
  owned->done = std::move(done);
  const size_t bytes = TotalSize(value_pieces);
  PushState* state;
  if (bytes <= kCopiedPushBytes) {
    // Copied into one slice gRPC owns: done waits for the call only.
    grpc::Slice payload(bytes);
    char* out = reinterpret_cast<char*>(const_cast<uint8_t*>(payload.begin()));
    for (absl::string_view piece : value_pieces) {
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
    owned->pending.store(1);
    state = owned.release();  // owned by `pending` from here on
    state->request = BuildMessage(header, field, std::move(payload));
  } else {
    // Set before BuildMessage, which releases empty pieces at once.
    owned->pending.store(static_cast<int>(value_pieces.size()) + 1);
    state = owned.release();  // owned by `pending` from here on
    state->request = BuildMessage(header, field, value_pieces, &ReleasePushPiece, state);
  }
  StartQueued(stubs, state->context, method, state->request,
              [state](const grpc::Status& s, const grpc::ByteBuffer& response) {
                state->status = FromGrpcStatus(s);
                if (state->status.ok()) state->status = state->decode(response);
                // Our own references to the pieces; gRPC drops its own when done.
                state->request.Clear();
                FinishPush(state);
              });
}

namespace {

// Splits a reply into its header and its values (bytes field `field`),
// handed to `consume`.
absl::Status DecodeValuesReply(const grpc::ByteBuffer& response, int field,
                               google::protobuf::MessageLite* header,
                               const Transport::ConsumeValues& consume) {
  std::vector<grpc::Slice> slices;
  SplitFields fields;
  if (!response.Dump(&slices).ok()) return absl::InternalError("reply could not be read");
  if (absl::Status split = SplitMessage(slices, {field}, &fields); !split.ok()) {
    return absl::InternalError(absl::StrCat("reply: ", split.message()));
  }
  if (!header->ParseFromString(fields.header)) return absl::InternalError("reply does not parse");
  return consume(fields.Raw(field));
}

}  // namespace

void GrpcTransport::Push(int server, const proto::PushRequest& header,
                         absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                         proto::PushResponse* reply, Done done) {
  StartPush(
      server, PushMethodPath(), header, kPushValuesField, value_pieces, deadline,
      [reply](const grpc::ByteBuffer& response) {
        grpc::Slice flat;
        if (!response.DumpToSingleSlice(&flat).ok() ||
            !reply->ParseFromArray(flat.begin(), static_cast<int>(flat.size()))) {
          return absl::InternalError("push reply does not parse");
        }
        return absl::OkStatus();
      },
      std::move(done));
}

void GrpcTransport::PushPull(int server, const proto::PushPullRequest& header,
                             absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                             proto::PushPullResponse* reply_header, ConsumeValues consume_values,
                             Done done) {
  StartPush(
      server, PushPullMethodPath(), header, kPushPullValuesField, value_pieces, deadline,
      [reply_header, consume = std::move(consume_values)](const grpc::ByteBuffer& response) {
        return DecodeValuesReply(response, kPushPullReplyValuesField, reply_header, consume);
      },
      std::move(done));
}

void GrpcTransport::Pull(int server, const proto::PullRequest& request, absl::Time deadline,
                         proto::PullResponse* reply_header, ConsumeValues consume_values,
                         Done done) {
  struct PullState {
    std::shared_ptr<grpc::ClientContext> context;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
  };
  Stubs* stubs = StubsFor(server);
  if (stubs == nullptr) return NoPrimary(server, done);
  auto state = std::make_shared<PullState>();
  state->context = NewContext(server, deadline);
  state->request = SerializeToBuffer(request);
  PullState* s = state.get();
  StartQueued(
      stubs, s->context, PullMethodPath(), s->request,
      [state = std::move(state), reply_header, consume = std::move(consume_values),
       done = std::move(done)](const grpc::Status& grpc_status, const grpc::ByteBuffer& response) {
        absl::Status status = FromGrpcStatus(grpc_status);
        if (status.ok()) {
          status = DecodeValuesReply(response, kPullReplyValuesField, reply_header, consume);
        }
        done(std::move(status));
      });
}

void GrpcTransport::PushBatch(int server, const proto::PushBatchRequest& request,
                              absl::Time deadline, proto::PushBatchResponse* reply, Done done) {
  TypedQueued(server, NewContext(server, deadline), "PushBatch", request, reply, std::move(done));
}

void GrpcTransport::CreateTable(int server, const proto::CreateTableRequest& request,
                                absl::Time deadline, proto::CreateTableResponse* reply, Done done) {
  TypedQueued(server, NewContext(server, deadline), "CreateTable", request, reply, std::move(done));
}

void GrpcTransport::Info(int server, const proto::InfoRequest& request, absl::Time deadline,
                         bool wait_for_ready, proto::InfoResponse* reply, Done done) {
  std::shared_ptr<grpc::ClientContext> context = NewContext(server, deadline);
  context->set_wait_for_ready(wait_for_ready);
  TypedQueued(server, std::move(context), "Info", request, reply, std::move(done));
}

void GrpcTransport::Heartbeat(int server, const proto::HeartbeatRequest& request,
                              absl::Time deadline, proto::HeartbeatResponse* reply, Done done) {
  TypedQueued(server, NewContext(server, deadline), "Heartbeat", request, reply, std::move(done));
}

void GrpcTransport::VectorOps(int server, const proto::VectorOpsRequest& request,
                              absl::Time deadline, proto::VectorOpsResponse* reply, Done done) {
  TypedQueued(server, NewContext(server, deadline), "VectorOps", request, reply, std::move(done));
}

void GrpcTransport::ReportProgress(int server, const proto::ReportProgressRequest& request,
                                   absl::Time deadline, proto::ReportProgressResponse* reply,
                                   Done done) {
  TypedQueued(server, NewContext(server, deadline), "ReportProgress", request, reply,
              std::move(done));
}

void GrpcTransport::Stats(int server, const proto::StatsRequest& request, absl::Time deadline,
                          proto::StatsResponse* reply, Done done) {
  TypedQueued(server, NewContext(server, deadline), "Stats", request, reply, std::move(done));
}

}  // namespace ps
