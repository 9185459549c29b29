// One-line event logging to stderr: "<UTC time> <who>: <message>".
// Thread-safe (one write per line).
#ifndef PS_COMMON_LOG_H_
#define PS_COMMON_LOG_H_

#include "absl/strings/string_view.h"

namespace ps {

void LogEvent(absl::string_view who, absl::string_view message);

}  // namespace ps

#endif  // PS_COMMON_LOG_H_
