// EtcdTestServer: a real single-member etcd (/usr/bin/etcd) run as a child
// process for tests, on free loopback ports, with its data and its log
// (etcd.log) in one directory. Restart() brings it back on the same ports
// and data, so written keys survive.
//
// Ownership: the object owns the child; the destructor kills it (and
// removes the directory if Start created it). The child is also killed if
// the thread that started it exits (PR_SET_PDEATHSIG), so a crashed test
// leaves no etcd behind: start it from the test's main thread.
// Not thread-safe: drive one instance from one thread.
#ifndef PS_COMMON_ETCD_TEST_SERVER_H_
#define PS_COMMON_ETCD_TEST_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ps {

// A TCP socket bound to a free port on 127.0.0.1 but not listening: while it
// is held, connections to the port are refused and no other process can
// take the port. Closed on destruction.
class BoundLoopbackPort {
 public:
  static absl::StatusOr<std::unique_ptr<BoundLoopbackPort>> Bind();
  BoundLoopbackPort(const BoundLoopbackPort&) = delete;
  BoundLoopbackPort& operator=(const BoundLoopbackPort&) = delete;
  ~BoundLoopbackPort();
  int port() const { return port_; }

 private:
  BoundLoopbackPort(int fd, int port) : fd_(fd), port_(port) {}
  const int fd_;
  const int port_;
};

class EtcdTestServer {
 public:
  // Starts etcd with its data under `dir` (created if missing), or under a
  // fresh directory in $TEST_TMPDIR (else /tmp) when `dir` is empty, and
  // waits until it answers (at most 20 s). Errors: INTERNAL when it cannot
  // be started, DEADLINE_EXCEEDED when it does not answer; both name the
  // log file to read.
  static absl::StatusOr<std::unique_ptr<EtcdTestServer>> Start(std::string dir = "");

  EtcdTestServer(const EtcdTestServer&) = delete;
  EtcdTestServer& operator=(const EtcdTestServer&) = delete;
  ~EtcdTestServer();

  // "127.0.0.1:PORT", the client URL without its scheme.
  std::string endpoint() const;
  const std::string& dir() const { return dir_; }
  std::string log_path() const { return dir_ + "/etcd.log"; }

  // SIGTERM, then SIGKILL if etcd has not exited after 5 s. No-op when
  // stopped already.
  void Stop();
  // Stop(), then start again on the same ports and data directory, and wait
  // until it answers (errors as Start).
  absl::Status Restart();

  // Compacts etcd's history up to `revision` (for testing watchers of
  // forgotten history).
  absl::Status Compact(int64_t revision);

 private:
  EtcdTestServer(std::string dir, int client_port, int peer_port);
  // Forks and execs etcd, then waits until /health answers.
  absl::Status Launch();

  const std::string dir_;
  const int client_port_;
  const int peer_port_;
  bool owns_dir_ = false;  // remove dir_ on destruction
  pid_t pid_ = -1;
};

}  // namespace ps

#endif  // PS_COMMON_ETCD_TEST_SERVER_H_
