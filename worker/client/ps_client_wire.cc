// PsClient: traffic reduction on the wire (see ps_client.h): 16-bit values
// in push requests, and the resend of requests whose key lists a server no
// longer holds. Pushes themselves are in ps_client_push.cc.
#include <functional>
#include <string>
#include <utility>

#include "common/value_encoding.h"
#include "worker/client/ps_client.h"

namespace ps {

void PsClient::EncodePushValues(PushRequests* out) const {
  const proto::ValueEncoding encoding = options_.value_encoding;
  if (encoding == proto::VALUES_F32) return;
  out->encoded.resize(out->headers.size());
  for (size_t i = 0; i < out->headers.size(); ++i) {
    uint64_t count = 0;
    for (absl::string_view piece : out->pieces[i]) count += piece.size() / sizeof(float);
    std::string& encoded = out->encoded[i];
    encoded.resize(count * BytesPerValue(encoding));
    char* dst = encoded.data();
    for (absl::string_view piece : out->pieces[i]) {
      // The pieces view float arrays (the caller's gradients or gathered).
      const auto* values = reinterpret_cast<const float*>(piece.data());
      const size_t n = piece.size() / sizeof(float);
      EncodeValues(encoding, absl::MakeConstSpan(values, n), dst);
      dst += n * BytesPerValue(encoding);
    }
    out->pieces[i] = {encoded};
    out->headers[i].set_value_encoding(encoding);
  }
}

void PsClient::SendWithKeyLists(std::function<void(Transport::Done)> send,
                                std::function<bool(const absl::Status&)> missed,
                                std::function<bool()> restore, Transport::Done done) {
  Transport::Done first = [send, missed = std::move(missed), restore = std::move(restore),
                           done = std::move(done)](absl::Status status) mutable {
    // Nothing of a missed request was applied: sent again at once, with its
    // lists (no backoff: the server is there).
    if (missed(status) && restore()) {
      send(std::move(done));
      return;
    }
    done(std::move(status));
  };
  send(std::move(first));
}

}  // namespace ps
