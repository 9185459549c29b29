#include "server/store/mapped_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <cerrno>
#include <cstring>

namespace ps {
namespace {

// Where a copy on this thread resumes after a SIGBUS; null outside copies.
thread_local sigjmp_buf* t_landing = nullptr;
struct sigaction g_before;  // the handler there was

void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* landing = t_landing) {
    t_landing = nullptr;
    siglongjmp(*landing, 1);
  }
  // Not a copy's: the earlier handler, else the default action (the
  // faulting access runs again and the process dies of it).
  if ((g_before.sa_flags & SA_SIGINFO) != 0 && g_before.sa_sigaction != nullptr) {
    g_before.sa_sigaction(sig, info, context);
    return;
  }
  if ((g_before.sa_flags & SA_SIGINFO) == 0 && g_before.sa_handler != SIG_DFL &&
      g_before.sa_handler != SIG_IGN) {
    g_before.sa_handler(sig);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &dfl, nullptr);
}

bool Install() {
  struct sigaction on {};
  on.sa_sigaction = OnSigbus;
  on.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&on.sa_mask);
  return sigaction(SIGBUS, &on, &g_before) == 0;
}

}  // namespace

bool CatchMappedReadFaults() {
  static const bool installed = Install();
  return installed;
}

__attribute__((noinline)) int CopyFromMapping(char* dst, const char* src, size_t n) {
  sigjmp_buf landing;
  t_landing = &landing;
  if (sigsetjmp(landing, /*savemask=*/0) != 0) {
    t_landing = nullptr;  // (the handler cleared it already)
    return EIO;
  }
  std::memcpy(dst, src, n);
  t_landing = nullptr;
  return 0;
}

}  // namespace ps
