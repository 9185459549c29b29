#include "common/raw_message.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// Reads bytes sequentially across a list of slices.
class Cursor {
 public:
  explicit Cursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { Skip0(); }

  bool done() const { return index_ >= slices_.size(); }

  bool ReadByte(uint8_t* b) {
    if (done()) return false;
    *b = slices_[index_].begin()[offset_];
    Advance(1);
    return true;
  }

  // Appends the varint's bytes to *raw (if set) and decodes it.
  bool ReadVarint(uint64_t* value, std::string* raw) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      if (raw != nullptr) raw->push_back(static_cast<char>(b));
      *value |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }

  // Takes the next n bytes as views.
  bool Take(uint64_t n, SegmentedBytes* out) {
    while (n > 0) {
      if (done()) return false;
      const grpc::Slice& s = slices_[index_];
      const size_t k = std::min<uint64_t>(n, s.size() - offset_);
      out->Append(absl::string_view(reinterpret_cast<const char*>(s.begin()) + offset_, k));
      Advance(k);
      n -= k;
    }
    return true;
  }

  // Appends the next n bytes to *out.
  bool Copy(uint64_t n, std::string* out) {
    SegmentedBytes piece;
    if (!Take(n, &piece)) return false;
    for (absl::string_view p : piece.pieces()) out->append(p.data(), p.size());
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    Skip0();
  }
  void Skip0() {
    while (index_ < slices_.size() && offset_ >= slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed message: ", what));
}

}  // namespace

void SegmentedBytes::CopyOut(size_t offset, size_t n, char* dst) const {
  for (absl::string_view p : pieces_) {
    if (n == 0) return;
    if (offset >= p.size()) {
      offset -= p.size();
      continue;
    }
    const size_t k = std::min(n, p.size() - offset);
    std::memcpy(dst, p.data() + offset, k);
    dst += k;
    n -= k;
    offset = 0;
  }
}

void SegmentedBytes::Reader::Skip(size_t n) {
  while (n > 0 && index_ < pieces_.size()) {
    const size_t k = std::min(n, pieces_[index_].size() - offset_);
    n -= k;
    offset_ += k;
    if (offset_ == pieces_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }
}

SegmentedBytes SegmentedBytes::Sub(size_t offset, size_t n) const {
  SegmentedBytes out;
  for (absl::string_view p : pieces_) {
    if (n == 0) break;
    if (offset >= p.size()) {
      offset -= p.size();
      continue;
    }
    const size_t k = std::min(n, p.size() - offset);
    out.Append(p.substr(offset, k));
    n -= k;
    offset = 0;
  }
  return out;
}

void SegmentedBytes::Reader::Read(size_t n, char* dst) {
  while (n > 0 && index_ < pieces_.size()) {
    const absl::string_view p = pieces_[index_];
    const size_t k = std::min(n, p.size() - offset_);
    std::memcpy(dst, p.data() + offset_, k);
    dst += k;
    n -= k;
    offset_ += k;
    if (offset_ == p.size()) {
      ++index_;
      offset_ = 0;
    }
  }
}

absl::string_view SegmentedBytes::Flatten(std::string* storage) const {
  if (pieces_.size() == 1) return pieces_[0];
  storage->resize(size_);
  if (size_ > 0) CopyOut(0, size_, &(*storage)[0]);
  return *storage;
}

const SegmentedBytes& SplitFields::Raw(int field) const {
  static const SegmentedBytes* const kEmpty = new SegmentedBytes();
  for (const auto& [number, bytes] : raw) {
    if (number == field) return bytes;
  }
  return *kEmpty;
}

absl::Status SplitMessage(const std::vector<grpc::Slice>& slices, absl::Span<const int> raw_fields,
                          SplitFields* out) {
  out->header.clear();
  out->raw.clear();
  Cursor cursor(slices);
  while (!cursor.done()) {
    std::string tag_bytes;
    uint64_t tag = 0;
    if (!cursor.ReadVarint(&tag, &tag_bytes)) return Malformed("truncated tag");
    const int field = static_cast<int>(tag >> 3), wire_type = static_cast<int>(tag & 7);
    if (field == 0) return Malformed("field number 0");
    const bool raw = std::find(raw_fields.begin(), raw_fields.end(), field) != raw_fields.end();
    if (raw) {
      if (wire_type != kLengthDelimited) {
        return Malformed(absl::StrCat("field ", field, " is not length-delimited"));
      }
      uint64_t length = 0;
      if (!cursor.ReadVarint(&length, nullptr)) return Malformed("truncated length");
      SegmentedBytes bytes;
      if (!cursor.Take(length, &bytes)) {
        return Malformed(absl::StrCat("field ", field, " is cut short"));
      }
      auto it = std::find_if(out->raw.begin(), out->raw.end(),
                             [field](const auto& e) { return e.first == field; });
      if (it != out->raw.end()) {
        it->second = std::move(bytes);
      } else {
        out->raw.emplace_back(field, std::move(bytes));
      }
      continue;
    }
    out->header += tag_bytes;
    switch (wire_type) {
      case kVarint: {
        uint64_t v;
        if (!cursor.ReadVarint(&v, &out->header)) return Malformed("truncated varint");
        break;
      }
      case kFixed64:
        if (!cursor.Copy(8, &out->header)) return Malformed("truncated fixed64");
        break;
      case kFixed32:
        if (!cursor.Copy(4, &out->header)) return Malformed("truncated fixed32");
        break;
      case kLengthDelimited: {
        uint64_t length = 0;
        if (!cursor.ReadVarint(&length, &out->header)) return Malformed("truncated length");
        if (!cursor.Copy(length, &out->header)) {
          return Malformed(absl::StrCat("field ", field, " is cut short"));
        }
        break;
      }
      default:
        return Malformed(absl::StrCat("unsupported wire type ", wire_type));
    }
  }
  return absl::OkStatus();
}

void AppendBytesFieldPrefix(int field, uint64_t length, std::string* out) {
  uint64_t tag = (static_cast<uint64_t>(field) << 3) | kLengthDelimited;
  for (uint64_t v : {tag, length}) {
    while (v >= 0x80) {
      out->push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out->push_back(static_cast<char>(v));
  }
}

namespace {

// The header and the payload field's tag and length, serialized straight
// into one slice gRPC owns (a key list in the header is copied once, not
// through a string first).
grpc::Slice SerializedHeader(const google::protobuf::MessageLite& header, int field,
                             uint64_t payload_size) {
  std::string prefix;
  AppendBytesFieldPrefix(field, payload_size, &prefix);
  const size_t header_bytes = header.ByteSizeLong();
  grpc::Slice slice(header_bytes + prefix.size());
  uint8_t* out = const_cast<uint8_t*>(slice.begin());
  header.SerializeWithCachedSizesToArray(out);
  std::copy(prefix.begin(), prefix.end(), out + header_bytes);
  return slice;
}

}  // namespace

uint64_t TotalSize(absl::Span<const absl::string_view> pieces) {
  uint64_t total = 0;
  for (absl::string_view p : pieces) total += p.size();
  return total;
}

grpc::ByteBuffer BuildMessage(const google::protobuf::MessageLite& header, int field,
                              absl::Span<const absl::string_view> pieces, void (*on_release)(void*),
                              void* release_arg) {
  const uint64_t total = TotalSize(pieces);
  std::vector<grpc::Slice> slices;
  slices.reserve(pieces.size() + 1);
  slices.emplace_back(SerializedHeader(header, field, total));
  for (absl::string_view p : pieces) {
    if (p.empty()) {
      on_release(release_arg);
      continue;
    }
    slices.emplace_back(const_cast<char*>(p.data()), p.size(), on_release, release_arg);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer BuildMessage(const google::protobuf::MessageLite& header, int field,
                              grpc::Slice payload) {
  grpc::Slice slices[2] = {SerializedHeader(header, field, payload.size()), std::move(payload)};
  return grpc::ByteBuffer(slices, slices[1].size() > 0 ? 2 : 1);
}

}  // namespace ps
