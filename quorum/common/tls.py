"""TLS and mutual TLS for every gRPC listener and channel, in Kafka's terms.

Kafka's keys, with PEM files instead of Java keystores (Kafka's own PEM keys
are `ssl.keystore.type=PEM`; librdkafka spells them as here):

    ssl.certificate.location   this process's certificate chain (PEM)
    ssl.key.location           its private key (PEM, unencrypted)
    ssl.ca.location            the CA bundle that peers' certificates must chain to
    ssl.client.auth            required | none (listeners only; `requested` is
                               refused: gRPC's Python API can require a client
                               certificate or not ask for one, never ask for an
                               optional one)

Whether a connection uses TLS is Kafka's `listener.security.protocol.map`
(controllers and brokers: ``CONTROLLER:SSL``). The files are read once, at
start-up, so a missing or unreadable one stops the process with the key named
instead of failing the first handshake. The principal of a call is Kafka's
default principal builder's: ``User:`` and the client certificate's subject
(``User:CN=broker-101``), or ``User:ANONYMOUS`` without one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

ANONYMOUS = "User:ANONYMOUS"
# gRPC metadata a broker sends when it forwards a Kafka client's admin request
# (KIP-590): the client's principal (UTF-8) and address. The controllers honour
# them only from a caller allowed CLUSTER_ACTION (quorum/server/access.py).
FORWARDED_PRINCIPAL = "kafka-forwarded-principal-bin"
FORWARDED_HOST = "kafka-forwarded-host"
PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL)
PROTOCOL_MAP_KEY = "listener.security.protocol.map"
CERT_KEY = "ssl.certificate.location"
KEY_KEY = "ssl.key.location"
CA_KEY = "ssl.ca.location"
CLIENT_AUTH_KEY = "ssl.client.auth"
SERVER_KEYS = (PROTOCOL_MAP_KEY, CERT_KEY, KEY_KEY, CA_KEY, CLIENT_AUTH_KEY)
CLIENT_KEYS = (PROTOCOL_MAP_KEY, CERT_KEY, KEY_KEY, CA_KEY)


class ClientAuth(enum.Enum):
    """Kafka's `ssl.client.auth`: whether a listener asks for client certificates."""

    REQUIRED = "required"
    REQUESTED = "requested"
    NONE = "none"


class TlsConfigError(Exception):
    """A TLS setting is missing, contradictory or names a file that cannot be read.

    `key` is the property to fix; config modules turn this into their ConfigError."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message if key in message else f"{key}: {message}")
        self.key = key


@dataclass(frozen=True, kw_only=True)
class TlsSettings:
    """One process's certificate, key and trusted CAs, read from their files.

    The same settings serve its listener (`server_credentials`) and its own
    calls (`channel_credentials`): a controller dials its peers with the
    certificate it serves with, so it is one principal either way."""

    certificate_chain: bytes | None
    private_key: bytes | None
    ca: bytes | None
    client_auth: ClientAuth = ClientAuth.NONE
    certificate_location: str = ""
    key_location: str = ""
    ca_location: str = ""

    def properties(self, listener_name: str = "CONTROLLER") -> dict[str, str]:
        """The keys that give these settings back (the effective configuration)."""
        return {
            PROTOCOL_MAP_KEY: f"{listener_name}:{SSL}",
            CERT_KEY: self.certificate_location,
            KEY_KEY: self.key_location,
            CA_KEY: self.ca_location,
            CLIENT_AUTH_KEY: self.client_auth.value,
        }

    def server_credentials(self) -> grpc.ServerCredentials:
        if self.certificate_chain is None or self.private_key is None:
            raise TlsConfigError(CERT_KEY, "a TLS listener needs a certificate and its key")
        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.ca if self.client_auth is not ClientAuth.NONE else None,
            require_client_auth=self.client_auth is ClientAuth.REQUIRED,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )


def security_protocol(props: Mapping[str, str], listener_name: str = "CONTROLLER") -> str:
    """The protocol `listener.security.protocol.map` gives the controller listener
    (PLAINTEXT when the key is absent, as Kafka's default map does)."""
    raw = props.get(PROTOCOL_MAP_KEY, "")
    found: dict[str, str] = {}
    for entry in (e.strip() for e in raw.split(",") if e.strip()):
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise TlsConfigError(
                PROTOCOL_MAP_KEY,
                f"{PROTOCOL_MAP_KEY} entry {entry!r} is not NAME:PLAINTEXT or NAME:SSL "
                "(SASL is not supported)",
            )
        if name in found:
            raise TlsConfigError(PROTOCOL_MAP_KEY, f"{PROTOCOL_MAP_KEY} maps {name} twice")
        found[name] = protocol
    if found and listener_name not in found:
        raise TlsConfigError(
            PROTOCOL_MAP_KEY, f"{PROTOCOL_MAP_KEY} does not map the {listener_name} listener"
        )
    return found.get(listener_name, PLAINTEXT)


def tls_from_properties(
    props: Mapping[str, str], *, server: bool, listener_name: str = "CONTROLLER"
) -> TlsSettings | None:
    """The TLS settings a properties file asks for, or None for plaintext.

    `server`: the process also listens with them (a controller), so it needs its
    own certificate, and `ssl.client.auth` applies. ssl.* keys beside a
    PLAINTEXT listener are refused: an operator who set them meant TLS, and
    silently ignoring them would leave the cluster in the clear."""
    protocol = security_protocol(props, listener_name)
    given = [k for k in (CERT_KEY, KEY_KEY, CA_KEY, CLIENT_AUTH_KEY) if props.get(k, "")]
    if protocol == PLAINTEXT:
        if given:
            raise TlsConfigError(
                given[0],
                f"{given[0]} is set but {PROTOCOL_MAP_KEY} maps {listener_name} to PLAINTEXT; "
                f"set {PROTOCOL_MAP_KEY}={listener_name}:SSL to use TLS",
            )
        return None
    raw_auth = props.get(CLIENT_AUTH_KEY, "") or ClientAuth.NONE.value
    try:
        client_auth = ClientAuth(raw_auth.strip().lower())
    except ValueError:
        raise TlsConfigError(
            CLIENT_AUTH_KEY, f"{CLIENT_AUTH_KEY} must be required or none, got {raw_auth!r}"
        ) from None
    if client_auth is ClientAuth.REQUESTED:
        raise TlsConfigError(
            CLIENT_AUTH_KEY,
            f"{CLIENT_AUTH_KEY}=requested is not supported: gRPC's Python server can require "
            "a client certificate or not ask for one, not ask for an optional one; "
            "use required (mTLS) or none",
        )
    if not server and props.get(CLIENT_AUTH_KEY, ""):
        raise TlsConfigError(CLIENT_AUTH_KEY, f"{CLIENT_AUTH_KEY} applies to listeners only")
    cert = _read_pem(props, CERT_KEY, required=server)
    key = _read_pem(props, KEY_KEY, required=server or cert is not None)
    if key is not None and cert is None:
        raise TlsConfigError(CERT_KEY, f"{KEY_KEY} is set without {CERT_KEY}")
    ca = _read_pem(props, CA_KEY, required=client_auth is not ClientAuth.NONE or not server)
    return TlsSettings(
        certificate_chain=cert,
        private_key=key,
        ca=ca,
        client_auth=client_auth,
        certificate_location=props.get(CERT_KEY, "").strip(),
        key_location=props.get(KEY_KEY, "").strip(),
        ca_location=props.get(CA_KEY, "").strip(),
    )


def plaintext_properties(listener_name: str = "CONTROLLER") -> dict[str, str]:
    """The same keys for a plaintext listener, so the effective configuration
    lists every key either way."""
    return {
        PROTOCOL_MAP_KEY: f"{listener_name}:{PLAINTEXT}",
        CERT_KEY: "",
        KEY_KEY: "",
        CA_KEY: "",
        CLIENT_AUTH_KEY: "",
    }


def client_tls(
    ca_location: str | None, certificate_location: str | None, key_location: str | None
) -> TlsSettings | None:
    """A tool's TLS settings from its flags: TLS when a CA is given, and mTLS
    when a certificate and key are given too."""
    props = {
        CA_KEY: ca_location or "",
        CERT_KEY: certificate_location or "",
        KEY_KEY: key_location or "",
    }
    if not any(props.values()):
        return None
    return tls_from_properties({**props, PROTOCOL_MAP_KEY: "CONTROLLER:SSL"}, server=False)


def _read_pem(props: Mapping[str, str], key: str, *, required: bool) -> bytes | None:
    location = props.get(key, "").strip()
    if not location:
        if required:
            raise TlsConfigError(key, f"{key} is required with TLS")
        return None
    try:
        data = Path(location).read_bytes()
    except OSError as err:
        raise TlsConfigError(key, f"{key}: cannot read {location}: {err.strerror}") from err
    if b"-----BEGIN " not in data:
        raise TlsConfigError(key, f"{key}: {location} is not a PEM file")
    return data


def principal_of(context: Any) -> str:
    """Kafka's default principal: ``User:`` and the verified client certificate's
    subject; ``User:ANONYMOUS`` for plaintext or TLS without a client certificate."""
    try:
        auth = context.auth_context()
    except Exception:  # a context without a transport (never on a real call)
        return ANONYMOUS
    subject = auth.get("x509_subject")
    if subject:
        return "User:" + subject[0].decode("utf-8", "replace")
    common_name = auth.get("x509_common_name")
    if common_name:
        return "User:CN=" + common_name[0].decode("utf-8", "replace")
    return ANONYMOUS


def peer_host(context: Any) -> str:
    """The client's address without its port (``ipv4:127.0.0.1:5000`` -> ``127.0.0.1``),
    which ACLs' `host` field matches."""
    peer = str(context.peer() or "")
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]").replace("%5B", "").replace("%5D", "")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    return peer


__all__ = [
    "ANONYMOUS",
    "CLIENT_KEYS",
    "FORWARDED_HOST",
    "FORWARDED_PRINCIPAL",
    "SERVER_KEYS",
    "ClientAuth",
    "TlsConfigError",
    "TlsSettings",
    "client_tls",
    "peer_host",
    "plaintext_properties",
    "principal_of",
    "security_protocol",
    "tls_from_properties",
]
