// Decoded data-path requests, as the server core takes them: the small
// fields in their proto header, the keys as a KeySpec and the values as a
// span. Whoever decodes them (the gRPC adapter from raw bytes, a PushBatch
// entry, an in-memory test transport) fills one of these; the views point
// into the request's own bytes or into the storage fields here, so an object
// is not moved once decoded. Thread-compatible.
#ifndef PS_SERVER_CORE_REQUEST_ARGS_H_
#define PS_SERVER_CORE_REQUEST_ARGS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/key_spec.h"
#include "common/raw_message.h"
#include "proto/ps.pb.h"
#include "server/core/key_list_cache.h"

namespace ps {

struct PushArgs {
  proto::PushRequest header;  // key_list and values are not used: see keys, values
  bool clock_only = false;    // neither keys nor values: only advances the clock
  KeySpec keys;
  absl::Span<const float> values;
  // Storage for keys and values that were not aligned or not contiguous.
  std::string flat_keys, flat_values;
  std::vector<uint64_t> key_storage;
  std::vector<float> value_storage;
  // Values that arrived in several pieces or 16-bit, gathered (and decoded).
  std::unique_ptr<float[]> gathered_values;
  KeyListCache::List cached_keys;  // the kept list that `keys` views
};

struct PullArgs {
  proto::PullRequest header;  // key_list is not used: see keys
  // No keys: only marks the table read at the clock (after the consistency
  // mode's wait), for a worker that reads none of the table's keys on this
  // server but takes part in its rounds (a model partition).
  bool clock_only = false;
  KeySpec keys;
  std::string flat_keys;
  std::vector<uint64_t> key_storage;
  KeyListCache::List cached_keys;
};

// Decodes a push whose key list and values are given apart from the header
// (the raw path), or inside it (pass header.key_list() and header.values()
// as one-piece SegmentedBytes). With a key_list_signature, the list is
// checked against it and kept in `cache`, or, absent, taken from `cache`
// (which may be null: nothing kept). 16-bit values are decoded to float32.
// Errors: INVALID_ARGUMENT naming the table for both ranges and a key list
// (or signature), no keys, ragged key or value bytes, a signature that does
// not match its list, an unknown value encoding; FAILED_PRECONDITION
// starting with kKeyListNotCached for a signature the cache does not hold.
absl::Status DecodePush(const proto::PushRequest& header, const SegmentedBytes& key_list,
                        const SegmentedBytes& values, KeyListCache* cache, PushArgs* out);
// The same for a push whose bytes are all in the proto.
absl::Status DecodePush(const proto::PushRequest& request, KeyListCache* cache, PushArgs* out);

// Decodes a pull's keys; a pull of no keys (no ranges, list or signature)
// is clock-only. Errors as for DecodePush.
absl::Status DecodePull(const proto::PullRequest& header, const SegmentedBytes& key_list,
                        KeyListCache* cache, PullArgs* out);
absl::Status DecodePull(const proto::PullRequest& request, KeyListCache* cache, PullArgs* out);

}  // namespace ps

#endif  // PS_SERVER_CORE_REQUEST_ARGS_H_
