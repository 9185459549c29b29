#include "common/etcd_test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ps {
namespace {

constexpr char kEtcdBinary[] = "/usr/bin/etcd";
constexpr absl::Duration kReadyTimeout = absl::Seconds(20);
constexpr absl::Duration kStopGrace = absl::Seconds(5);
constexpr absl::Duration kPoll = absl::Milliseconds(50);
// Tries with fresh ports when etcd cannot bind the ones picked (another
// process took them between the probe and etcd's bind).
constexpr int kStartAttempts = 3;

absl::Status ErrnoError(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// A port that was free on 127.0.0.1 a moment ago (the kernel's pick for a
// port-0 bind).
absl::StatusOr<int> FreeLoopbackPort() {
  absl::StatusOr<std::unique_ptr<BoundLoopbackPort>> bound = BoundLoopbackPort::Bind();
  if (!bound.ok()) return bound.status();
  return (*bound)->port();
}

// Whether the process has exited (reaped); fills *status.
bool Reaped(pid_t pid, int* status) { return waitpid(pid, status, WNOHANG) == pid; }

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status));
  return "stopped";
}

std::string TestTmpBase() {
  const char* base = std::getenv("TEST_TMPDIR");
  return base != nullptr && *base != '\0' ? base : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<BoundLoopbackPort>> BoundLoopbackPort::Bind() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    absl::Status s = ErrnoError("binding a port-0 socket on 127.0.0.1");
    close(fd);
    return s;
  }
  return std::unique_ptr<BoundLoopbackPort>(new BoundLoopbackPort(fd, ntohs(addr.sin_port)));
}

BoundLoopbackPort::~BoundLoopbackPort() { close(fd_); }

absl::StatusOr<std::unique_ptr<EtcdTestServer>> EtcdTestServer::Start(std::string dir) {
  bool owns_dir = false;
  if (dir.empty()) {
    const std::string base = TestTmpBase();
    std::string pattern = absl::StrCat(base.empty() ? "/tmp" : base, "/etcd.XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) return ErrnoError(absl::StrCat("mkdtemp ", pattern));
    dir = pattern;
    owns_dir = base.empty();  // $TEST_TMPDIR is left to bazel (and to readers of the log)
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("creating ", dir, ": ", ec.message()));
  }
  absl::Status last;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    absl::StatusOr<int> client_port = FreeLoopbackPort();
    absl::StatusOr<int> peer_port = FreeLoopbackPort();
    if (!client_port.ok()) return client_port.status();
    if (!peer_port.ok()) return peer_port.status();
    if (*client_port == *peer_port) continue;
    std::unique_ptr<EtcdTestServer> server(new EtcdTestServer(dir, *client_port, *peer_port));
    last = server->Launch();
    if (last.ok()) {
      server->owns_dir_ = owns_dir;  // only the server that is kept removes it
      return server;
    }
    server->Stop();
    // A failed first start may have initialised data for the old ports.
    std::error_code ec;
    std::filesystem::remove_all(dir + "/data", ec);
  }
  return last;
}

EtcdTestServer::EtcdTestServer(std::string dir, int client_port, int peer_port)
    : dir_(std::move(dir)), client_port_(client_port), peer_port_(peer_port) {}

EtcdTestServer::~EtcdTestServer() {
  Stop();
  if (owns_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string EtcdTestServer::endpoint() const { return absl::StrCat("127.0.0.1:", client_port_); }

absl::Status EtcdTestServer::Launch() {
  const std::string client_url = absl::StrCat("http://127.0.0.1:", client_port_);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> args = {kEtcdBinary,
                                   "--name=default",
                                   absl::StrCat("--data-dir=", dir_, "/data"),
                                   "--listen-client-urls=" + client_url,
                                   "--advertise-client-urls=" + client_url,
                                   "--listen-peer-urls=" + peer_url,
                                   "--initial-advertise-peer-urls=" + peer_url,
                                   "--initial-cluster=default=" + peer_url,
                                   "--logger=zap",
                                   "--log-outputs=stderr"};
  // Everything the child needs is prepared before fork(): after it, only
  // async-signal-safe calls.
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoError(absl::StrCat("opening ", log_path()));
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    close(log_fd);
    return ErrnoError("opening /dev/null");
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);  // the parent died before prctl
    dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  close(null_fd);
  if (pid < 0) return ErrnoError("fork");
  pid_ = pid;

  const absl::Time give_up = absl::Now() + kReadyTimeout;
  while (true) {
    int status = 0;
    if (Reaped(pid_, &status)) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat(kEtcdBinary, " ", DescribeExit(status),
                                              " while starting on ", endpoint(), "; see ",
                                              log_path()));
    }
    httplib::Client client("127.0.0.1", client_port_);
    client.set_connection_timeout(1, 0);
    client.set_read_timeout(1, 0);
    httplib::Result health = client.Get("/health");
    if (health && health->status == 200 && absl::StrContains(health->body, "\"true\"")) {
      return absl::OkStatus();
    }
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat("etcd on ", endpoint(), " did not become healthy within ",
                       absl::FormatDuration(kReadyTimeout), "; see ", log_path()));
    }
    absl::SleepFor(kPoll);
  }
}

void EtcdTestServer::Stop() {
  if (pid_ <= 0) return;
  int status = 0;
  kill(pid_, SIGTERM);
  const absl::Time give_up = absl::Now() + kStopGrace;
  while (!Reaped(pid_, &status)) {
    if (absl::Now() > give_up) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  pid_ = -1;
}

absl::Status EtcdTestServer::Restart() {
  Stop();
  return Launch();
}

absl::Status EtcdTestServer::Compact(int64_t revision) {
  httplib::Client client("127.0.0.1", client_port_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  const std::string body = absl::StrCat(R"({"revision":")", revision, R"(","physical":true})");
  httplib::Result result = client.Post("/v3/kv/compaction", body, "application/json");
  if (!result) {
    return absl::UnavailableError(
        absl::StrCat("compacting etcd on ", endpoint(), ": ", httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    return absl::InternalError(
        absl::StrCat("compacting etcd on ", endpoint(), " to ", revision, ": ", result->body));
  }
  return absl::OkStatus();
}

}  // namespace ps
