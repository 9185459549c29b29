// Protobuf messages with large `bytes` fields, read and written without
// copying those fields through protobuf.
//
// On the wire a message is a sequence of fields in any order, so a message
// can be written as "the small fields, serialized by protobuf" followed by
// "field N, length, raw bytes" where the raw bytes are a slice that points at
// the caller's memory. Reading does the reverse: the small fields are copied
// into a header string (which parses as the same message type) and the large
// fields are returned as views into the received slices.
// Functions are thread-compatible; views live as long as the slices.
#ifndef PS_COMMON_RAW_MESSAGE_H_
#define PS_COMMON_RAW_MESSAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace ps {

// The bytes of one field, possibly split across several slices.
class SegmentedBytes {
 public:
  // The bytes as one piece, viewed in place (they must outlive the result).
  static SegmentedBytes Of(absl::string_view bytes) {
    SegmentedBytes out;
    out.Append(bytes);
    return out;
  }
  void Append(absl::string_view piece) {
    if (!piece.empty()) pieces_.push_back(piece);
    size_ += piece.size();
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::vector<absl::string_view>& pieces() const { return pieces_; }

  // Copies `n` bytes starting at byte `offset` into dst. Requires
  // offset + n <= size().
  void CopyOut(size_t offset, size_t n, char* dst) const;
  // Bytes [offset, offset + n) as views into the same pieces. Requires
  // offset + n <= size().
  SegmentedBytes Sub(size_t offset, size_t n) const;

  // Copies the bytes out in order, `n` at a time.
  class Reader {
   public:
    explicit Reader(const SegmentedBytes& bytes) : pieces_(bytes.pieces_) {}
    // Copies the next n bytes into dst. Requires n <= bytes left.
    void Read(size_t n, char* dst);
    // Passes over the next n bytes. Requires n <= bytes left.
    void Skip(size_t n);

   private:
    const std::vector<absl::string_view>& pieces_;
    size_t index_ = 0, offset_ = 0;
  };

  // The bytes as one contiguous view: in place when they are in one piece,
  // otherwise copied into *storage.
  absl::string_view Flatten(std::string* storage) const;

 private:
  std::vector<absl::string_view> pieces_;
  size_t size_ = 0;
};

// A received message split into its small fields (`header`, parseable as the
// message) and the large bytes fields asked for.
struct SplitFields {
  std::string header;
  std::vector<std::pair<int, SegmentedBytes>> raw;  // field number -> bytes

  // The raw field's bytes (empty if absent).
  const SegmentedBytes& Raw(int field) const;
};

// Splits the serialized message in `slices`. The raw fields' views point into
// `slices` (small slices keep their bytes inline), so `slices` must outlive
// `out`. Fields whose numbers are in
// `raw_fields` must be length-delimited; if one appears twice the last wins
// (as protobuf does for scalar bytes fields). Errors: INVALID_ARGUMENT for
// malformed wire data.
absl::Status SplitMessage(const std::vector<grpc::Slice>& slices, absl::Span<const int> raw_fields,
                          SplitFields* out);

// The bytes of `pieces` together.
uint64_t TotalSize(absl::Span<const absl::string_view> pieces);

// Builds `header` serialized, followed by bytes field `field` holding the
// concatenation of `pieces`. The pieces are referenced, not copied: each must
// stay valid and unchanged until `on_release(release_arg)` has been called
// once for it, which gRPC does when it no longer needs the bytes (after the
// call completes).
grpc::ByteBuffer BuildMessage(const google::protobuf::MessageLite& header, int field,
                              absl::Span<const absl::string_view> pieces, void (*on_release)(void*),
                              void* release_arg);

// Same, with the payload in an owned slice (e.g. one the caller filled).
grpc::ByteBuffer BuildMessage(const google::protobuf::MessageLite& header, int field,
                              grpc::Slice payload);

// Appends the tag and length of bytes field `field` of `length` bytes.
void AppendBytesFieldPrefix(int field, uint64_t length, std::string* out);

}  // namespace ps

#endif  // PS_COMMON_RAW_MESSAGE_H_
