#include "common/etcd_kv_store.h"

#include <httplib.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ps {
namespace {

using nlohmann::json;

constexpr char kCheckEtcd[] = "is etcd running? see --etcd";
// A watch is re-opened after this long, so that no single HTTP read timeout
// has to cover an unbounded deadline.
constexpr absl::Duration kMaxWatchSlice = absl::Minutes(10);
// Pause before re-opening a watch stream that etcd closed early.
constexpr absl::Duration kWatchRetryPause = absl::Milliseconds(50);

std::string B64(std::string_view bytes) { return absl::Base64Escape(ToAbsl(bytes)); }

// The gateway encodes int64 as JSON strings (and accepts them back); proto3
// omits zero values, so an absent field is 0.
std::string Int64Json(int64_t v) { return std::to_string(v); }

int64_t Int64Field(const json& obj, const char* field) {
  if (!obj.is_object()) return 0;
  auto it = obj.find(field);
  if (it == obj.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  int64_t v = 0;
  if (it->is_string() && absl::SimpleAtoi(it->get_ref<const std::string&>(), &v)) return v;
  return 0;
}

std::string StringField(const json& obj, const char* field) {
  if (!obj.is_object()) return "";
  auto it = obj.find(field);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

// obj[field] when it is an object; an empty object otherwise.
const json& ObjectField(const json& obj, const char* field) {
  static const json* const kEmpty = new json(json::object());
  if (!obj.is_object()) return *kEmpty;
  auto it = obj.find(field);
  return it != obj.end() && it->is_object() ? *it : *kEmpty;
}

bool BoolField(const json& obj, const char* field) {
  if (!obj.is_object()) return false;
  auto it = obj.find(field);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

void SetTimeout(absl::Duration d, time_t* sec, time_t* usec) {
  const int64_t us = std::max<int64_t>(absl::ToInt64Microseconds(d), 1000);
  *sec = static_cast<time_t>(us / 1000000);
  *usec = static_cast<time_t>(us % 1000000);
}

// What one POST got back. etcd's gateway sends error replies chunked and
// ends them with a trailer (Grpc-Trailer-Content-Type) that httplib 0.11
// cannot parse: it reports Error::Read although the status and the whole
// body arrived. So the reply is collected by the handlers, which run before
// httplib gives up, and `status` tells whether a response came at all.
struct Reply {
  int status = 0;  // 0: no response (connection or transport failure)
  httplib::Error error = httplib::Error::Success;
};

// POSTs `body` to host:port`path`; feeds the response body to `on_data`
// (returning false stops reading). `read_timeout` bounds each wait for bytes.
Reply Post(const std::string& host, int port, const char* path, std::string body,
           absl::Duration connect_timeout, absl::Duration read_timeout,
           std::function<bool(const char*, size_t)> on_data) {
  httplib::Client client(host, port);
  time_t sec, usec;
  SetTimeout(connect_timeout, &sec, &usec);
  client.set_connection_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  SetTimeout(read_timeout, &sec, &usec);
  client.set_read_timeout(sec, usec);
  Reply reply;
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = std::move(body);
  request.set_header("Content-Type", "application/json");
  request.response_handler = [&reply](const httplib::Response& response) {
    reply.status = response.status;
    return true;
  };
  request.content_receiver = [&on_data](const char* data, size_t n, uint64_t, uint64_t) {
    return on_data(data, n);
  };
  const httplib::Result result = client.send(request);
  reply.error = result.error();
  if (result) reply.status = result->status;
  return reply;
}

// The status for an error object of the gateway: unary calls answer
// {"code": N, "message": "..."}; streams send {"error": {"grpc_code": N,
// "message": "..."}} (older gateways: "code"). N is a gRPC code, which
// absl::StatusCode follows one to one.
absl::Status GatewayError(const std::string& where, const json& error, int http_status) {
  const json& nested = ObjectField(error, "error");
  const json& e = nested.empty() ? error : nested;
  int64_t code = Int64Field(e, "grpc_code");
  if (code == 0) code = Int64Field(e, "code");
  std::string message = StringField(e, "message");
  if (message.empty()) message = error.is_object() ? error.dump() : "(no message)";
  if (code <= 0 || code > 16) {
    code = http_status >= 502 && http_status <= 504
               ? static_cast<int64_t>(absl::StatusCode::kUnavailable)
               : static_cast<int64_t>(absl::StatusCode::kInternal);
  }
  std::string text = absl::StrCat(where, " failed: ", message);
  if (code == static_cast<int64_t>(absl::StatusCode::kUnavailable)) {
    absl::StrAppend(&text, " (etcd is stopping or has no leader); ", kCheckEtcd);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), text);
}

absl::Status TransportError(const std::string& where, httplib::Error error,
                            absl::Duration timeout) {
  if (error == httplib::Error::Read) {
    return absl::UnavailableError(absl::StrCat(where, " got no answer within ",
                                               absl::FormatDuration(timeout), "; ", kCheckEtcd));
  }
  return absl::UnavailableError(absl::StrCat(where, " could not reach etcd (httplib error: ",
                                             httplib::to_string(error), "); ", kCheckEtcd));
}

absl::Status Malformed(const std::string& where, absl::string_view what) {
  return absl::InternalError(absl::StrCat(where, " answered unexpectedly (", what,
                                          "); is the endpoint an etcd v3.4+ client URL?"));
}

absl::StatusOr<KvRange> ParseRange(const std::string& where, const json& resp) {
  KvRange range;
  range.revision = Int64Field(ObjectField(resp, "header"), "revision");
  auto kvs = resp.find("kvs");
  if (kvs != resp.end()) {
    if (!kvs->is_array()) return Malformed(where, "kvs is not an array");
    for (const json& kv : *kvs) {
      KvEntry entry;
      if (!absl::Base64Unescape(StringField(kv, "key"), &entry.key) ||
          !absl::Base64Unescape(StringField(kv, "value"), &entry.value)) {
        return Malformed(where, "a key or value is not base64");
      }
      entry.mod_revision = Int64Field(kv, "mod_revision");
      entry.lease = Int64Field(kv, "lease");
      range.entries.push_back(std::move(entry));
    }
  }
  std::sort(range.entries.begin(), range.entries.end(),
            [](const KvEntry& a, const KvEntry& b) { return a.key < b.key; });
  return range;
}

// Splits a /v3/watch stream into its newline-separated JSON messages and
// remembers what they said: a change (an event, or history compacted away,
// after which the caller must re-read anyway) or an error.
class WatchReader {
 public:
  explicit WatchReader(std::string where) : where_(std::move(where)) {}

  // Consumes bytes of the stream; false once the outcome is known.
  bool Feed(const char* data, size_t n) {
    buffer_.append(data, n);
    size_t newline;
    while (!done() && (newline = buffer_.find('\n')) != std::string::npos) {
      Handle(buffer_.substr(0, newline));
      buffer_.erase(0, newline + 1);
    }
    return !done();
  }
  // The stream ended: a last message may lack its newline.
  void Finish(int http_status) {
    http_status_ = http_status;
    if (!done() && buffer_.find_first_not_of(" \r\n") != std::string::npos) Handle(buffer_);
    buffer_.clear();
  }
  bool changed() const { return changed_; }
  const absl::Status& error() const { return error_; }

 private:
  bool done() const { return changed_ || !error_.ok(); }

  void Handle(const std::string& text) {
    const json msg = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (msg.is_discarded() || !msg.is_object()) {
      error_ = Malformed(where_, absl::StrCat("not JSON: ", text.substr(0, 200)));
      return;
    }
    auto result = msg.find("result");
    if (result == msg.end()) {
      error_ = GatewayError(where_, msg, http_status_);
      return;
    }
    auto events = result->find("events");
    if (events != result->end() && events->is_array() && !events->empty()) changed_ = true;
    if (Int64Field(*result, "compact_revision") > 0) changed_ = true;
    if (!changed_ && BoolField(*result, "canceled")) {
      error_ = absl::InternalError(absl::StrCat(
          where_, ": etcd canceled the watch: ", StringField(*result, "cancel_reason")));
    }
  }

  const std::string where_;
  std::string buffer_;
  int http_status_ = 200;
  bool changed_ = false;
  absl::Status error_;
};

}  // namespace

std::string EtcdPrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    const unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

EtcdKvStore::Target EtcdKvStore::ParseEndpoint(std::string_view endpoint) {
  Target t;
  absl::string_view rest = ToAbsl(endpoint);
  if (absl::StartsWith(rest, "http://")) rest.remove_prefix(7);
  t.endpoint = std::string(rest);
  const size_t colon = rest.rfind(':');
  if (rest.find("://") != absl::string_view::npos || colon == absl::string_view::npos ||
      colon == 0 || !absl::SimpleAtoi(rest.substr(colon + 1), &t.port) || t.port <= 0 ||
      t.port > 65535) {
    t.status = absl::InvalidArgumentError(absl::StrCat(
        "etcd endpoint '", ToAbsl(endpoint), "' is not host:port or http://host:port; see --etcd"));
    return t;
  }
  t.host = std::string(rest.substr(0, colon));
  return t;
}

EtcdKvStore::EtcdKvStore(EtcdOptions options)
    : options_(std::move(options)), target_(ParseEndpoint(options_.endpoint)) {}

absl::StatusOr<json> EtcdKvStore::Call(const char* path, const json& request) const {
  if (!target_.status.ok()) return target_.status;
  const std::string where = absl::StrCat("etcd at ", target_.endpoint, " (POST ", path, ")");
  std::string body;
  const Reply reply =
      Post(target_.host, target_.port, path, request.dump(), options_.request_timeout,
           options_.request_timeout, [&body](const char* data, size_t n) {
             body.append(data, n);
             return true;
           });
  if (reply.status == 0) return TransportError(where, reply.error, options_.request_timeout);
  json resp = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (resp.is_discarded() && reply.error != httplib::Error::Success) {
    return TransportError(where, reply.error, options_.request_timeout);  // cut off mid-body
  }
  if (reply.status != 200) return GatewayError(where, resp, reply.status);
  if (resp.is_discarded() || !resp.is_object()) {
    return Malformed(where, absl::StrCat("not a JSON object: ", body.substr(0, 200)));
  }
  return resp;
}

absl::StatusOr<int64_t> EtcdKvStore::GrantLease(absl::Duration ttl) {
  if (absl::Status s = CheckKvTtl(ttl); !s.ok()) return s;
  const int64_t seconds = absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)));
  absl::StatusOr<json> resp = Call("/v3/lease/grant", {{"TTL", Int64Json(seconds)}});
  if (!resp.ok()) return resp.status();
  const int64_t id = Int64Field(*resp, "ID");
  if (id == 0) {
    return absl::InternalError(absl::StrCat("etcd at ", target_.endpoint,
                                            " granted no lease: ", StringField(*resp, "error")));
  }
  return id;
}

absl::Status EtcdKvStore::KeepAlive(int64_t lease) {
  // A one-message client stream: {"result": {"ID", "TTL"}}, TTL omitted (0)
  // when the lease is gone.
  absl::StatusOr<json> resp = Call("/v3/lease/keepalive", {{"ID", Int64Json(lease)}});
  if (!resp.ok()) return resp.status();
  auto result = resp->find("result");
  if (result == resp->end()) {
    return GatewayError(absl::StrCat("etcd at ", target_.endpoint, " (lease keepalive)"), *resp,
                        200);
  }
  if (Int64Field(*result, "TTL") <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd at ", target_.endpoint, ": lease ", lease,
                                            " has expired or was revoked; grant a new one"));
  }
  return absl::OkStatus();
}

absl::Status EtcdKvStore::RevokeLease(int64_t lease) {
  return Call("/v3/lease/revoke", {{"ID", Int64Json(lease)}}).status();
}

absl::StatusOr<KvRange> EtcdKvStore::Get(std::string_view key) {
  if (absl::Status s = CheckKvKey(key, "Get"); !s.ok()) return s;
  absl::StatusOr<json> resp = Call("/v3/kv/range", {{"key", B64(key)}});
  if (!resp.ok()) return resp.status();
  return ParseRange(absl::StrCat("etcd at ", target_.endpoint, " (range)"), *resp);
}

absl::StatusOr<KvRange> EtcdKvStore::GetPrefix(std::string_view prefix) {
  const std::string first = prefix.empty() ? std::string(1, '\0') : std::string(prefix);
  absl::StatusOr<json> resp =
      Call("/v3/kv/range", {{"key", B64(first)}, {"range_end", B64(EtcdPrefixEnd(prefix))}});
  if (!resp.ok()) return resp.status();
  return ParseRange(absl::StrCat("etcd at ", target_.endpoint, " (range)"), *resp);
}

absl::StatusOr<int64_t> EtcdKvStore::Put(std::string_view key, std::string_view value,
                                         int64_t lease) {
  if (absl::Status s = CheckKvKey(key, "Put"); !s.ok()) return s;
  absl::StatusOr<json> resp =
      Call("/v3/kv/put", {{"key", B64(key)}, {"value", B64(value)}, {"lease", Int64Json(lease)}});
  if (!resp.ok()) return resp.status();
  return Int64Field(ObjectField(*resp, "header"), "revision");
}

absl::Status EtcdKvStore::Delete(std::string_view key) {
  if (absl::Status s = CheckKvKey(key, "Delete"); !s.ok()) return s;
  return Call("/v3/kv/deleterange", {{"key", B64(key)}}).status();
}

absl::StatusOr<bool> EtcdKvStore::Txn(const std::vector<KvCompare>& compares,
                                      const std::vector<KvOp>& ops) {
  if (absl::Status s = CheckKvTxn(compares, ops); !s.ok()) return s;
  json request = {{"compare", json::array()}, {"success", json::array()}};
  for (const KvCompare& c : compares) {
    request["compare"].push_back({{"key", B64(c.key)},
                                  {"target", "MOD"},
                                  {"result", "EQUAL"},
                                  {"mod_revision", Int64Json(c.mod_revision)}});
  }
  for (const KvOp& op : ops) {
    if (op.kind == KvOp::kPut) {
      request["success"].push_back(
          {{"request_put",
            {{"key", B64(op.key)}, {"value", B64(op.value)}, {"lease", Int64Json(op.lease)}}}});
    } else {
      request["success"].push_back({{"request_delete_range", {{"key", B64(op.key)}}}});
    }
  }
  absl::StatusOr<json> resp = Call("/v3/kv/txn", request);
  if (!resp.ok()) return resp.status();
  return BoolField(*resp, "succeeded");
}

absl::StatusOr<bool> EtcdKvStore::WaitForChange(std::string_view prefix, int64_t after_revision,
                                                absl::Time deadline) {
  if (!target_.status.ok()) return target_.status;
  const std::string where = absl::StrCat("etcd at ", target_.endpoint, " (POST /v3/watch)");
  const std::string first = prefix.empty() ? std::string(1, '\0') : std::string(prefix);
  const json create = {{"create_request",
                        {{"key", B64(first)},
                         {"range_end", B64(EtcdPrefixEnd(prefix))},
                         {"start_revision", Int64Json(std::max<int64_t>(after_revision, 0) + 1)}}}};
  const std::string body = create.dump();
  // History arrives shortly after the watch is created (see the header).
  const absl::Time end = std::max(deadline, absl::Now() + kMinWatchWindow);
  while (true) {
    const absl::Duration window = std::min(end - absl::Now(), kMaxWatchSlice);
    if (window <= absl::ZeroDuration()) return false;
    // The read timeout bounds each wait for bytes; the stream is idle until
    // an event arrives, so it ends the watch at `end` (or the slice).
    WatchReader reader(where);
    const Reply reply =
        Post(target_.host, target_.port, "/v3/watch", body, options_.request_timeout, window,
             [&reader, end](const char* data, size_t n) {
               return reader.Feed(data, n) && absl::Now() < end;
             });
    reader.Finish(reply.status);
    if (reader.changed()) return true;
    if (!reader.error().ok()) return reader.error();
    if (reply.status == 0 && reply.error != httplib::Error::Read) {
      return TransportError(where, reply.error, options_.request_timeout);
    }
    if (reply.status != 0 && reply.status != 200) {
      return GatewayError(where, json::object(), reply.status);
    }
    // Timed out, stopped at `end`, or etcd ended the stream early (e.g. it
    // is shutting down): the next round returns false or reconnects.
    if (absl::Now() < end) absl::SleepFor(kWatchRetryPause);
  }
}

}  // namespace ps
