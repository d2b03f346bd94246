"""TLS for the receiver sockets from PEM files that every node has at the same path.

Peers already prove the context's secret to each other (the HMAC handshake); TLS adds
confidentiality and checks the peer's certificate chain against the trusted CAs. Host names are
not checked: Spark addresses executors by whatever host string they registered with (often an
IP), which a certificate rarely lists, and the secret, not the name, is what authenticates.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert_file: str
    key_file: str
    ca_file: str | None = None

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    @property
    def trusted_cas(self) -> str:
        """The CAs a client trusts: the CA file, else the certificate itself (self-signed)."""
        return self.ca_file or self.cert_file

    def client_context(self) -> ssl.SSLContext:
        return client_context(self.trusted_cas)


def client_context(ca_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False  # see the module docstring; the chain is still verified
    return context


def tls_files(cert_file: str | None, key_file: str | None, ca_file: str | None) -> TlsFiles | None:
    """The configured files, or None when TLS is off."""
    if cert_file is None or key_file is None:
        return None
    return TlsFiles(cert_file, key_file, ca_file)
