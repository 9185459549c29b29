// Template definitions for common/wire.h. Include wire.h, not this file.
#ifndef PS_COMMON_WIRE_IMPL_H_
#define PS_COMMON_WIRE_IMPL_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {

template <typename T>
absl::StatusOr<absl::Span<const T>> DecodeArray(absl::string_view bytes, std::vector<T>* storage,
                                                absl::string_view what) {
  if (bytes.size() % sizeof(T) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", bytes.size(), " bytes, not a multiple of ", sizeof(T)));
  }
  const size_t n = bytes.size() / sizeof(T);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(T) == 0) {
    return absl::Span<const T>(reinterpret_cast<const T*>(bytes.data()), n);
  }
  storage->resize(n);
  if (n > 0) std::memcpy(storage->data(), bytes.data(), bytes.size());
  return absl::Span<const T>(*storage);
}

template <typename T>
absl::Status DecodeArrayInto(absl::string_view bytes, absl::Span<T> out, absl::string_view what) {
  if (bytes.size() != out.size() * sizeof(T)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", bytes.size(), " bytes, expected ",
                                                   out.size() * sizeof(T), " (", out.size(),
                                                   " values)"));
  }
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return absl::OkStatus();
}

}  // namespace ps

#endif  // PS_COMMON_WIRE_IMPL_H_
