// GrpcTransport against peers that fail in the ways a killed or stuck
// server does, over real loopback sockets.
#include "worker/client/grpc_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// A listening socket on 127.0.0.1 that never accepts: the kernel completes
// TCP handshakes and buffers what arrives until its buffers are full, and
// nothing is ever read or answered, as with a server that hangs.
class SilentPeer {
 public:
  SilentPeer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentPeer() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  // Stops listening: what the kernel buffered is dropped with the socket,
  // as when the server is killed.
  void Kill() {
    close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Speaks just enough HTTP/2 to make a gRPC client send freely: accepts one
// connection, grants a 1 GiB window for the connection and every stream,
// then never reads again, as a server that is stopped (SIGSTOP) or cut off
// by a partition that drops packets. What the client writes fills the
// kernel's buffers, and the rest stays in gRPC's write buffer.
class StuckHttp2Peer {
 public:
  StuckHttp2Peer() : listener_() {
    thread_ = std::thread([this] { Serve(); });
  }
  ~StuckHttp2Peer() {
    if (conn_ >= 0) close(conn_);
    thread_.join();
  }
  std::string address() const { return listener_.address(); }

 private:
  static void Append(std::string* out, uint32_t length, uint8_t type, uint8_t flags,
                     uint32_t stream, const std::string& payload) {
    out->push_back(static_cast<char>(length >> 16));
    out->push_back(static_cast<char>(length >> 8));
    out->push_back(static_cast<char>(length));
    out->push_back(static_cast<char>(type));
    out->push_back(static_cast<char>(flags));
    for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(stream >> shift));
    out->append(payload);
  }
  static std::string Be32(uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
  }
  void Serve() {
    conn_ = accept(listener_.fd(), nullptr, nullptr);
    if (conn_ < 0) return;
    char buf[4096];
    (void)!read(conn_, buf, sizeof(buf));  // the preface and the client's settings
    std::string frames;
    // SETTINGS: INITIAL_WINDOW_SIZE (4) = 2^30.
    Append(&frames, 6, 0x4, 0, 0, std::string("\x00\x04", 2) + Be32(1u << 30));
    Append(&frames, 0, 0x4, 0x1, 0, "");                      // SETTINGS ack
    Append(&frames, 4, 0x8, 0, 0, Be32((1u << 30) - 65535));  // connection WINDOW_UPDATE
    (void)!write(conn_, frames.data(), frames.size());
    // From here on nothing is read: the connection stays open and stuck.
  }

  SilentPeer listener_;
  int conn_ = -1;
  std::thread thread_;
};

// A push of `floats` values (in `pieces` equal pieces, sent from this
// object's memory) started on `transport` with `deadline`.
class PendingPush {
 public:
  PendingPush(GrpcTransport& transport, size_t floats, int pieces, absl::Duration deadline)
      : values_(floats, 1.0f) {
    const size_t bytes = floats * sizeof(float) / pieces;
    for (int i = 0; i < pieces; ++i) {
      pieces_.emplace_back(reinterpret_cast<const char*>(values_.data()) + i * bytes, bytes);
    }
    header_.set_table("t");
    transport.Push(0, header_, pieces_, absl::Now() + deadline, &reply_, [this](absl::Status s) {
      status_ = std::move(s);
      done_.Notify();
    });
  }
  // Whether the push's done ran within `timeout`.
  bool Done(absl::Duration timeout) { return done_.WaitForNotificationWithTimeout(timeout); }
  const absl::Status& status() const { return status_; }

 private:
  const std::vector<float> values_;
  std::vector<absl::string_view> pieces_;
  proto::PushRequest header_;
  proto::PushResponse reply_;
  absl::Notification done_;
  absl::Status status_;
};

// A peer that never takes the connection: the push ends at its deadline,
// its values (held by the call's stream) released with the call. 32 MiB:
// far more than the peer's socket buffers and HTTP/2 window take.
TEST(GrpcTransportTest, PushToAPeerThatStopsReadingFinishesAtItsDeadline) {
  SilentPeer peer;
  GrpcTransport transport({peer.address()});
  PendingPush push(transport, 8 << 20, 2, absl::Milliseconds(500));
  ASSERT_TRUE(push.Done(absl::Seconds(20))) << "the push's done never ran";
  EXPECT_EQ(push.status().code(), absl::StatusCode::kDeadlineExceeded) << push.status();
}

TEST(GrpcTransportTest, PushToAPeerKilledMidCallFinishes) {
  auto peer = std::make_unique<SilentPeer>();
  GrpcTransport transport({peer->address()});
  PendingPush push(transport, 8 << 20, 1, absl::Seconds(30));
  EXPECT_FALSE(push.Done(absl::Milliseconds(300))) << "the silent peer answered: " << push.status();
  peer->Kill();
  ASSERT_TRUE(push.Done(absl::Seconds(20))) << "the push's done never ran after its peer went away";
  EXPECT_EQ(push.status().code(), absl::StatusCode::kUnavailable) << push.status();
}

// A stuck server: the values the kernel did not take stay in gRPC's write
// buffer while the connection lives. The call ends at its deadline, but its
// done waits for them; before keepalive (common/grpc_channels.h) it waited
// until TCP gave up, many minutes. (64 MiB: sent zero-copy, see
// kCopiedPushBytes.)
TEST(GrpcTransportTest, PushToAStuckPeerFinishesAtItsDeadline) {
  StuckHttp2Peer peer;
  GrpcTransport transport({peer.address()});
  PendingPush push(transport, 16 << 20, 1, absl::Seconds(1));
  ASSERT_TRUE(push.Done(absl::Seconds(20))) << "the push's done never ran";
  EXPECT_EQ(push.status().code(), absl::StatusCode::kDeadlineExceeded) << push.status();
}

}  // namespace
}  // namespace ps
