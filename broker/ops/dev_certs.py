"""``python -m broker.ops.dev_certs``: certificates for trying TLS locally (a compose file's one-shot
service, or by hand): a private CA, the broker's keystore and client certificates, in the formats
Kafka's settings and the stock clients take. Not for production: the CA key is written beside the
certificates.

    python -m broker.ops.dev_certs --dir certs --host kafka --host localhost --client admin --client alice

writes ``ca.pem`` (the truststore: ``ssl.truststore.type=PEM``, librdkafka's ``ssl.ca.location``),
``broker.p12`` (``ssl.keystore.type=PKCS12``), ``broker.pem`` + ``broker.key.pem``, and per client
``<name>.pem``, ``<name>.key.pem`` and ``<name>.p12`` (subject ``CN=<name>``). The stores'
password is ``--password`` (default ``changeit``). Files already there are kept, so a restart
does not replace the certificates clients trust; ``--force`` makes new ones.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

VALID_DAYS = 825


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pykafka-broker dev"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: Path, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _issue(ca_key: CertificateIssuerPrivateKeyTypes, ca_cert: x509.Certificate, cn: str,
           hosts: list[str] | None) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=VALID_DAYS)))
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def make(directory: Path, hosts: list[str], clients: list[str], password: str, force: bool = False) -> list[Path]:
    """Write what is missing (everything with ``force``); returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem, ca_key_pem = directory / "ca.pem", directory / "ca.key.pem"
    written: list[Path] = []
    if force or not (ca_pem.exists() and ca_key_pem.exists()):
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (x509.CertificateBuilder().subject_name(_name("pykafka-broker dev CA"))
                   .issuer_name(_name("pykafka-broker dev CA")).public_key(ca_key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .sign(ca_key, hashes.SHA256()))
        _write(ca_key_pem, _pem_key(ca_key), private=True)
        _write(ca_pem, ca_cert.public_bytes(serialization.Encoding.PEM))
        written += [ca_pem, ca_key_pem]
        force = True  # everything issued by the old CA is replaced
    ca_cert = x509.load_pem_x509_certificate(ca_pem.read_bytes())
    loaded = serialization.load_pem_private_key(ca_key_pem.read_bytes(), None)
    assert isinstance(loaded, ec.EllipticCurvePrivateKey)
    for cn, names in [("broker", hosts), *((c, None) for c in clients)]:
        p12 = directory / f"{cn}.p12"
        if p12.exists() and not force:
            continue
        key, cert = _issue(loaded, ca_cert, cn, names)
        chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
        _write(directory / f"{cn}.key.pem", _pem_key(key), private=True)
        _write(directory / f"{cn}.pem", chain)
        _write(p12, pkcs12.serialize_key_and_certificates(
            cn.encode(), key, cert, [ca_cert], serialization.BestAvailableEncryption(password.encode())), private=True)
        written += [directory / f"{cn}.key.pem", directory / f"{cn}.pem", p12]
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m broker.ops.dev_certs", description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default="certs", help="where to write them (default: ./certs)")
    p.add_argument("--host", action="append", default=[], help="a name or address clients reach the broker by "
                                                               "(repeatable; default localhost and 127.0.0.1)")
    p.add_argument("--client", action="append", default=[], help="a client certificate's CN (repeatable)")
    p.add_argument("--password", default="changeit", help="the PKCS12 stores' password")
    p.add_argument("--owner", help="UID:GID to give the files (a container writing for another user)")
    p.add_argument("--force", action="store_true", help="replace what is there")
    args = p.parse_args(argv)
    directory = Path(args.dir)
    written = make(directory, args.host or ["localhost", "127.0.0.1"], args.client, args.password, args.force)
    if args.owner:
        uid, _, gid = args.owner.partition(":")
        for path in [directory, *directory.iterdir()]:
            os.chown(path, int(uid), int(gid or uid))
    for path in written:
        print(f"dev_certs: wrote {path}")
    if not written:
        print(f"dev_certs: {directory} already has them (--force makes new ones)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
