"""HTTPS for the metrics listener (`/metrics`, `/healthz`, `/readyz`).

`metrics.listener=https://host:port` serves the page over TLS with the
process's own certificate and key (`ssl.certificate.location`,
`ssl.key.location`, the same files its gRPC listener or channels use), so a
cluster that encrypts its calls does not hand out its metrics in the clear.
`metrics.listener.ssl.client.auth` is Kafka's `ssl.client.auth` for this one
listener (as Kafka's `listener.name.<name>.ssl.client.auth` overrides a
listener's): `required` makes every scraper present a certificate that chains
to `ssl.ca.location` (Prometheus's `tls_config` cert_file/key_file),
`requested` verifies one if it is offered, `none` (default) asks for none.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from quorum.common.channels import ListenerError
from quorum.common.tls import CA_KEY, CERT_KEY, KEY_KEY, ClientAuth, TlsConfigError, TlsSettings

LISTENER_KEY = "metrics.listener"
CLIENT_AUTH_KEY = "metrics.listener.ssl.client.auth"
_VERIFY = {
    ClientAuth.NONE: ssl.CERT_NONE,
    ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
    ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
}


@dataclass(frozen=True)
class MetricsTls:
    """Where the metrics listener's certificate, key and trusted CAs are."""

    certificate_location: str
    key_location: str
    ca_location: str
    client_auth: ClientAuth = ClientAuth.NONE

    def server_context(self) -> ssl.SSLContext:
        """A TLS 1.2+ server context; the files are read now, so a bad one stops
        the process at start-up."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.certificate_location, self.key_location)
            context.verify_mode = _VERIFY[self.client_auth]
            if self.client_auth is not ClientAuth.NONE:
                context.load_verify_locations(cafile=self.ca_location)
        except OSError as err:  # ssl.SSLError too: a key that does not match, ...
            raise ListenerError(
                f"cannot serve {LISTENER_KEY} over https with {self.certificate_location} "
                f"and {self.key_location}: {err}"
            ) from err
        return context


def is_https(raw_listener: str) -> bool:
    return raw_listener.strip().lower().startswith("https://")


def metrics_tls_from(props: Mapping[str, str], tls: TlsSettings | None) -> MetricsTls | None:
    """The metrics listener's TLS from a properties file (None: plain HTTP).

    `tls` is the process's own TLS settings, whose certificate an https
    listener serves with; a client-auth setting beside an http listener is
    refused, as ssl.* keys beside a PLAINTEXT gRPC listener are."""
    raw_auth = props.get(CLIENT_AUTH_KEY, "").strip()
    if not is_https(props.get(LISTENER_KEY, "")):
        if raw_auth:
            raise TlsConfigError(
                CLIENT_AUTH_KEY,
                f"{CLIENT_AUTH_KEY} is set but {LISTENER_KEY} is not https://host:port",
            )
        return None
    try:
        client_auth = ClientAuth((raw_auth or ClientAuth.NONE.value).lower())
    except ValueError:
        raise TlsConfigError(
            CLIENT_AUTH_KEY,
            f"{CLIENT_AUTH_KEY} must be required, requested or none, got {raw_auth!r}",
        ) from None
    if tls is None or not tls.certificate_location or not tls.key_location:
        raise TlsConfigError(
            LISTENER_KEY,
            f"{LISTENER_KEY}=https://... serves with this process's certificate: set "
            f"{CERT_KEY} and {KEY_KEY} (with listener.security.protocol.map "
            "CONTROLLER:SSL)",
        )
    if client_auth is not ClientAuth.NONE and not tls.ca_location:
        raise TlsConfigError(
            CLIENT_AUTH_KEY, f"{CLIENT_AUTH_KEY}={client_auth.value} needs {CA_KEY}"
        )
    return MetricsTls(tls.certificate_location, tls.key_location, tls.ca_location, client_auth)


__all__ = ["CLIENT_AUTH_KEY", "MetricsTls", "is_https", "metrics_tls_from"]
