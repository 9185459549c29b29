#include "server/core/request_args.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/protocol.h"
#include "common/value_encoding.h"
#include "common/wire.h"

namespace ps {
namespace {

// The keys of a request: its ranges, or its packed key list (viewed in place
// when aligned, else copied into *storage), or the list kept in `cache`
// under its signature (held by *cached).
template <typename Request>
absl::StatusOr<KeySpec> KeysOf(const Request& header, const SegmentedBytes& key_list,
                               KeyListCache* cache, std::string* flat,
                               std::vector<uint64_t>* storage, KeyListCache::List* cached) {
  const uint64_t signature = header.key_list_signature();
  if (signature != 0 && header.ranges_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat("request for table '", header.table(),
                                                   "' has both ranges and a key_list_signature"));
  }
  if (!key_list.empty()) {
    if (header.ranges_size() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("request for table '", header.table(), "' has both ranges and key_list"));
    }
    auto keys = DecodeArray<uint64_t>(key_list.Flatten(flat), storage, "key_list");
    if (!keys.ok()) return keys.status();
    if (signature != 0) {
      const uint64_t actual = KeyListSignature(keys->data(), keys->size());
      if (actual != signature) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request for table '", header.table(), "': key_list_signature ", signature,
            " does not match its key list of ", keys->size(), " keys (signature ", actual, ")"));
      }
      if (cache != nullptr) cache->Put(header.worker_id(), signature, *keys);
    }
    return KeySpec::List(*keys);
  }
  if (signature != 0) {
    *cached = cache != nullptr ? cache->Get(header.worker_id(), signature) : nullptr;
    if (*cached == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          kKeyListNotCached, ": request for table '", header.table(), "' from worker ",
          header.worker_id(), " names key list signature ", signature,
          ", which this server does not hold (evicted, or the server restarted); nothing was "
          "applied: send the list again"));
    }
    return KeySpec::List(**cached);
  }
  if (header.ranges_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("request for table '", header.table(),
                                                   "' names no keys (ranges or key_list)"));
  }
  std::vector<KeySpec::Range> ranges;
  ranges.reserve(header.ranges_size());
  for (const proto::KeyRange& r : header.ranges()) ranges.push_back({r.begin(), r.end()});
  return KeySpec::Ranges(std::move(ranges));
}

}  // namespace

absl::Status DecodePush(const proto::PushRequest& header, const SegmentedBytes& key_list,
                        const SegmentedBytes& values, KeyListCache* cache, PushArgs* out) {
  out->header = header;
  out->header.clear_key_list();
  out->header.clear_values();
  out->clock_only = header.ranges_size() == 0 && key_list.empty() && values.empty() &&
                    header.key_list_signature() == 0;
  if (out->clock_only) return absl::OkStatus();
  absl::StatusOr<KeySpec> keys =
      KeysOf(header, key_list, cache, &out->flat_keys, &out->key_storage, &out->cached_keys);
  if (!keys.ok()) return keys.status();
  out->keys = *std::move(keys);
  const proto::ValueEncoding encoding = header.value_encoding();
  if (encoding != proto::VALUES_F32) {
    const std::string what = absl::StrCat("push to table '", header.table(), "'");
    if (absl::Status s = CheckValueEncoding(encoding, what); !s.ok()) return s;
    if (values.size() % 2 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " has ", values.size(), " bytes of 16-bit values, not a multiple of 2"));
    }
    const size_t n = values.size() / 2;
    out->gathered_values.reset(new float[n]);
    DecodeValues(encoding, values.Flatten(&out->flat_values).data(), n, out->gathered_values.get());
    out->values = absl::Span<const float>(out->gathered_values.get(), n);
    return absl::OkStatus();
  }
  if (values.pieces().size() > 1) {
    // Gathered once, straight from gRPC's pieces (no zero-fill, no view
    // of a temporary).
    if (values.size() % sizeof(float) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("push values for table '", header.table(),
                                                     "' has ", values.size(),
                                                     " bytes, not a multiple of 4"));
    }
    const size_t n = values.size() / sizeof(float);
    out->gathered_values.reset(new float[n]);
    values.CopyOut(0, values.size(), reinterpret_cast<char*>(out->gathered_values.get()));
    out->values = absl::Span<const float>(out->gathered_values.get(), n);
    return absl::OkStatus();
  }
  auto decoded = DecodeArray<float>(values.Flatten(&out->flat_values), &out->value_storage,
                                    absl::StrCat("push values for table '", header.table(), "'"));
  if (!decoded.ok()) return decoded.status();
  out->values = *decoded;
  return absl::OkStatus();
}

absl::Status DecodePush(const proto::PushRequest& request, KeyListCache* cache, PushArgs* out) {
  // The views must point at bytes that outlive the call: *out's storage.
  out->flat_keys = request.key_list();
  out->flat_values = request.values();
  proto::PushRequest header = request;
  header.clear_key_list();
  header.clear_values();
  return DecodePush(header, SegmentedBytes::Of(out->flat_keys),
                    SegmentedBytes::Of(out->flat_values), cache, out);
}

absl::Status DecodePull(const proto::PullRequest& header, const SegmentedBytes& key_list,
                        KeyListCache* cache, PullArgs* out) {
  out->header = header;
  out->header.clear_key_list();
  out->clock_only =
      header.ranges_size() == 0 && key_list.empty() && header.key_list_signature() == 0;
  if (out->clock_only) return absl::OkStatus();
  absl::StatusOr<KeySpec> keys =
      KeysOf(header, key_list, cache, &out->flat_keys, &out->key_storage, &out->cached_keys);
  if (!keys.ok()) return keys.status();
  out->keys = *std::move(keys);
  return absl::OkStatus();
}

absl::Status DecodePull(const proto::PullRequest& request, KeyListCache* cache, PullArgs* out) {
  out->flat_keys = request.key_list();
  proto::PullRequest header = request;
  header.clear_key_list();
  return DecodePull(header, SegmentedBytes::Of(out->flat_keys), cache, out);
}

}  // namespace ps
