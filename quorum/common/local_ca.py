"""A throw-away certificate authority for local clusters and tests.

`quorum.launcher --tls` and the TLS tests need a CA and one certificate per
controller, broker and operator, valid for the loopback addresses the processes
dial. Production clusters bring certificates from their own CA (cert-manager on
Kubernetes); nothing here is meant for them.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID_DAYS = 365
_LOOPBACK_NAMES = ("localhost",)
_LOOPBACK_IPS = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class IssuedFiles:
    """Where one certificate, its key and the CA bundle were written."""

    certificate: Path
    key: Path
    ca: Path


class LocalCa:
    """An EC P-256 CA that issues certificates usable both as server and client
    (a controller serves and dials its peers with the same one)."""

    def __init__(self, common_name: str = "kraft-quorum local CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = _now()
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )

    def ca_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        dns_names: tuple[str, ...] = _LOOPBACK_NAMES,
        ip_addresses: tuple[str, ...] = _LOOPBACK_IPS,
    ) -> tuple[bytes, bytes]:
        """(certificate PEM, key PEM) for subject ``CN=common_name``, valid for the
        given names (the loopback ones by default)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ip_addresses]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem

    def write_ca(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "ca.pem"
        path.write_bytes(self.ca_pem())
        return path

    def write(self, directory: Path, name: str, common_name: str | None = None) -> IssuedFiles:
        """Issue ``CN=common_name`` (default `name`) and write `name`.pem,
        `name`.key (mode 0600) and ca.pem into `directory`."""
        cert, key = self.issue(common_name or name)
        ca = self.write_ca(directory)
        cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
        cert_path.write_bytes(cert)
        key_path.touch(mode=0o600, exist_ok=True)
        key_path.write_bytes(key)
        return IssuedFiles(cert_path, key_path, ca)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


__all__ = ["IssuedFiles", "LocalCa"]
