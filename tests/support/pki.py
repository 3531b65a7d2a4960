"""Certificates for TLS tests, made on the spot: a CA, a broker certificate for 127.0.0.1 and
localhost, and client certificates, as PEM files and PKCS12 stores (Kafka's keystore types)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

PASSWORD = "test-secret"


@dataclass
class Identity:
    name: str
    key_pem: Path  # unencrypted PKCS8
    encrypted_key_pem: Path  # encrypted with PASSWORD
    cert_pem: Path  # the certificate, then the CA's
    p12: Path  # key and chain, PASSWORD
    subject: str  # RFC 2253, as Kafka sees it


@dataclass
class Pki:
    ca_pem: Path
    truststore_p12: Path
    broker: Identity
    clients: dict[str, Identity]


def _name(cn: str, org: str = "pykafka") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_pki(directory: Path, clients: tuple[str, ...] = ("client",)) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(_name("pykafka test CA")).issuer_name(_name("pykafka test CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .sign(ca_key, hashes.SHA256()))
    ca_pem = directory / "ca.pem"
    ca_pem.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    truststore = directory / "truststore.p12"
    truststore.write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca_cert, b"ca")], serialization.BestAvailableEncryption(PASSWORD.encode())))

    def issue(name: str, server: bool) -> Identity:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30)))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        key_pem = directory / f"{name}.key.pem"
        key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
        encrypted = directory / f"{name}.key.encrypted.pem"
        encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.BestAvailableEncryption(PASSWORD.encode())))
        cert_pem = directory / f"{name}.pem"
        cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM)
                             + ca_cert.public_bytes(serialization.Encoding.PEM))
        p12 = directory / f"{name}.p12"
        p12.write_bytes(pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, [ca_cert], serialization.BestAvailableEncryption(PASSWORD.encode())))
        return Identity(name, key_pem, encrypted, cert_pem, p12, cert.subject.rfc4514_string())

    return Pki(ca_pem, truststore, issue("broker", True), {c: issue(c, False) for c in clients})
