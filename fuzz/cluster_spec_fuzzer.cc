// Fuzzes ClusterSpec::Parse (common/cluster_spec.h). Input: the spec text.
// A parsed spec must print (ToString) to a spec that parses to the same list.
#include <cstddef>
#include <cstdint>

#include "common/cluster_spec.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > ps_fuzz::kMaxInputBytes) return 0;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ps::ClusterSpec> spec = ps::ClusterSpec::Parse(text);
  ps_fuzz::Note("ClusterSpec::Parse", spec.status());
  if (!spec.ok()) return 0;
  FUZZ_CHECK(!spec->servers.empty());
  absl::StatusOr<ps::ClusterSpec> again = ps::ClusterSpec::Parse(spec->ToString());
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->servers == spec->servers);
  return 0;
}
