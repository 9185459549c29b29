// KeySpec: the keys of one request, as a server reads them off the wire: one
// or more ranges [begin, end) (values for each range in order) or an explicit
// list. A view: an explicit list points into the request's own buffer (or the
// server's key-list cache), which must outlive it.
#ifndef PS_COMMON_KEY_SPEC_H_
#define PS_COMMON_KEY_SPEC_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace ps {

struct KeySpec {
  struct Range {
    uint64_t begin;
    uint64_t end;
  };
  bool is_list = false;
  std::vector<Range> ranges;
  absl::Span<const uint64_t> keys;

  static KeySpec Single(uint64_t begin, uint64_t end) { return {false, {{begin, end}}, {}}; }
  static KeySpec Ranges(std::vector<Range> ranges) { return {false, std::move(ranges), {}}; }
  static KeySpec List(absl::Span<const uint64_t> keys) { return {true, {}, keys}; }
  // Number of keys (reversed ranges count as empty; validation rejects them).
  uint64_t size() const {
    if (is_list) return keys.size();
    uint64_t n = 0;
    for (const Range& r : ranges) n += r.end > r.begin ? r.end - r.begin : 0;
    return n;
  }
};

}  // namespace ps

#endif  // PS_COMMON_KEY_SPEC_H_
