#include "common/peer_security.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace ps {

namespace {

// The PEM file given by `flag`.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": not a PEM file"));
  }
  return text.str();
}

absl::Status CheckPair(const TlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert and --tls_key go together; got --tls_cert=", files.cert,
                     " --tls_key=", files.key));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientTlsCredentials(
    const TlsFiles& files) {
  if (files.ca.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs --tls_ca (the CA that signed the servers' certificates)");
  }
  if (absl::Status s = CheckPair(files); !s.ok()) return s;
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> ca = ReadPem(files.ca, "--tls_ca");
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *std::move(ca);
  if (!files.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(files.cert, "--tls_cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(files.key, "--tls_key");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerTlsCredentials(
    const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty() || files.ca.empty()) {
    return absl::InvalidArgumentError(
        "a TLS server needs --tls_cert, --tls_key and --tls_ca (the CA it verifies its clients' "
        "and the other servers' certificates with)");
  }
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  absl::StatusOr<std::string> cert = ReadPem(files.cert, "--tls_cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(files.key, "--tls_key");
  if (!key.ok()) return key.status();
  options.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  absl::StatusOr<std::string> ca = ReadPem(files.ca, "--tls_ca");
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *std::move(ca);
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::InvalidArgumentError(absl::StrCat("--token_file=", path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.empty() || token.find_first_of(" \t\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token_file=", path, ": expected one token on one line"));
  }
  return token;
}

absl::StatusOr<PeerSecurity> PeerSecurityFromFiles(const TlsFiles& files,
                                                   const std::string& token_file) {
  PeerSecurity security;
  if (files.enabled()) {
    auto credentials = ClientTlsCredentials(files);
    if (!credentials.ok()) return credentials.status();
    security.credentials = *std::move(credentials);
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(token_file);
    if (!token.ok()) return token.status();
    security.token = *std::move(token);
  }
  return security;
}

}  // namespace ps
