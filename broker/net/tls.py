"""TLS for SSL and SASL_SSL listeners, configured with Kafka's settings (``DefaultSslEngineFactory``),
each one also per listener as ``listener.name.<listener>.ssl.*``:

- ``ssl.keystore.type`` PEM (``ssl.keystore.certificate.chain`` and ``ssl.keystore.key`` inline, or
  ``ssl.keystore.location``: a file with the key and the chain), PKCS12 (``ssl.keystore.location``,
  ``ssl.keystore.password``); ``ssl.key.password`` decrypts an encrypted key. JKS, Kafka's default,
  is Java's own format: convert it (``keytool -importkeystore -deststoretype PKCS12``);
- ``ssl.truststore.type`` PEM (``ssl.truststore.certificates`` inline or ``ssl.truststore.location``)
  or PKCS12; without one, the system's CAs, as the JVM's default truststore;
- ``ssl.client.auth`` none / requested / required;
- ``ssl.enabled.protocols`` (TLSv1.2,TLSv1.3) and ``ssl.cipher.suites`` (IANA names, as Java takes
  them; TLS 1.3's suites are OpenSSL's defaults);
- ``ssl.principal.mapping.rules`` (``broker.security.principal``) maps a client certificate's
  subject to the principal name.

Python's ``ssl`` takes certificates and keys from files only: what is inline or in a PKCS12 file
is written to a private temporary directory, loaded, and removed at once.

``cryptography`` is imported where a keystore or a client certificate is read: a broker without TLS
listeners does not pay for it at start-up (about 40 ms and 10 MB).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path
from typing import Any

from broker.config.broker_config import BrokerConfig

SSL_PROTOCOLS = ("SSL", "SASL_SSL")
_PROTOCOL_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
                      "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}

# IANA (Java) names of TLS 1.2 suites -> OpenSSL's names
IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
}
TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}


class TlsConfigError(ValueError):
    """A listener's TLS settings cannot be used: the message names the setting."""


def setting(config: BrokerConfig, listener: str, name: str) -> Any:
    """``listener.name.<listener>.<name>`` if set, else ``<name>`` (Kafka's listener prefix)."""
    value = config.get(f"listener.name.{listener.lower()}.{name}")
    return value if value not in (None, "") else config.get(name)


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"{what} {path}: {e.strerror or e}") from None


def _password(value: Any) -> bytes | None:
    return str(value).encode() if value not in (None, "") else None


def _pem_key_and_chain(config: BrokerConfig, listener: str) -> tuple[bytes, bytes] | None:
    """(unencrypted key PEM, certificate chain PEM) of the listener's keystore, or None."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    kind = str(setting(config, listener, "ssl.keystore.type") or "JKS").upper()
    location = setting(config, listener, "ssl.keystore.location")
    chain, key = setting(config, listener, "ssl.keystore.certificate.chain"), setting(config, listener, "ssl.keystore.key")
    key_password = _password(setting(config, listener, "ssl.key.password"))
    if chain or key:
        if not (chain and key):
            raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key are set together")
        if kind != "PEM":
            raise TlsConfigError("inline ssl.keystore.certificate.chain/ssl.keystore.key need ssl.keystore.type=PEM")
        return _unencrypted_key(str(key).encode(), key_password), str(chain).encode()
    if not location:
        return None
    data = _read(str(location), "ssl.keystore.location")
    if kind == "PEM":
        return _unencrypted_key(data, key_password), _certificates_pem(data, "ssl.keystore.location")
    if kind == "PKCS12":
        store_password = _password(setting(config, listener, "ssl.keystore.password"))
        try:
            private_key, cert, extra = pkcs12.load_key_and_certificates(data, store_password)
        except ValueError as e:
            raise TlsConfigError(f"ssl.keystore.location {location}: cannot open the PKCS12 keystore ({e})") from None
        if private_key is None or cert is None:
            raise TlsConfigError(f"ssl.keystore.location {location}: the keystore holds no key and certificate")
        key_pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption())
        chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *(extra or [])])
        return key_pem, chain_pem
    raise TlsConfigError(f"ssl.keystore.type {kind} is not supported here: use PEM or PKCS12 (convert a JKS "
                         "keystore with keytool -importkeystore -deststoretype PKCS12)")


def _unencrypted_key(pem: bytes, password: bytes | None) -> bytes:
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(pem, password)
    except (ValueError, TypeError) as e:
        raise TlsConfigError(f"the keystore's private key cannot be read ({e}); ssl.key.password decrypts an "
                             "encrypted key") from None
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _certificates_pem(data: bytes, what: str) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as e:
        raise TlsConfigError(f"{what}: no PEM certificate ({e})") from None
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def _trusted_pem(config: BrokerConfig, listener: str) -> bytes | None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    kind = str(setting(config, listener, "ssl.truststore.type") or "JKS").upper()
    inline = setting(config, listener, "ssl.truststore.certificates")
    location = setting(config, listener, "ssl.truststore.location")
    if inline:
        if kind != "PEM":
            raise TlsConfigError("inline ssl.truststore.certificates need ssl.truststore.type=PEM")
        return _certificates_pem(str(inline).encode(), "ssl.truststore.certificates")
    if not location:
        return None
    data = _read(str(location), "ssl.truststore.location")
    if kind == "PEM":
        return _certificates_pem(data, "ssl.truststore.location")
    if kind == "PKCS12":
        try:
            loaded = pkcs12.load_pkcs12(data, _password(setting(config, listener, "ssl.truststore.password")))
        except ValueError as e:
            raise TlsConfigError(f"ssl.truststore.location {location}: cannot open the PKCS12 truststore ({e})") from None
        certs = [c.certificate for c in loaded.additional_certs] + ([loaded.cert.certificate] if loaded.cert else [])
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    raise TlsConfigError(f"ssl.truststore.type {kind} is not supported here: use PEM or PKCS12")


def _load_chain(context: ssl.SSLContext, key_pem: bytes, chain_pem: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="pykafka-tls-") as tmp:
        os.chmod(tmp, 0o700)
        cert_file, key_file = Path(tmp) / "chain.pem", Path(tmp) / "key.pem"
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        cert_file.write_bytes(chain_pem)
        try:
            context.load_cert_chain(str(cert_file), str(key_file))
        except ssl.SSLError as e:
            raise TlsConfigError(f"the keystore's key does not match its certificate ({e})") from None


def _protocols(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> None:
    enabled = [p.strip() for p in str(setting(config, listener, "ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",")
               if p.strip()]
    versions = []
    for name in enabled:
        if name not in _PROTOCOL_VERSIONS:
            raise TlsConfigError(f"ssl.enabled.protocols: unknown protocol {name} (TLSv1.2, TLSv1.3)")
        versions.append(_PROTOCOL_VERSIONS[name])
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)
    suites = [s.strip() for s in str(setting(config, listener, "ssl.cipher.suites") or "").split(",") if s.strip()]
    tls12 = []
    for suite in suites:
        if suite in TLS13_SUITES:
            continue
        if suite not in IANA_TO_OPENSSL:
            raise TlsConfigError(f"ssl.cipher.suites: unknown or unsupported suite {suite}")
        tls12.append(IANA_TO_OPENSSL[suite])
    if tls12:
        context.set_ciphers(":".join(tls12))


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    keys = _pem_key_and_chain(config, listener)
    if keys is None:
        raise TlsConfigError(f"listener {listener}: a TLS listener needs a keystore (ssl.keystore.location, or "
                             "ssl.keystore.type=PEM with ssl.keystore.certificate.chain and ssl.keystore.key)")
    _load_chain(context, *keys)
    _protocols(context, config, listener)
    auth = str(setting(config, listener, "ssl.client.auth") or "none").lower()
    modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
    if auth not in modes:
        raise TlsConfigError(f"ssl.client.auth must be none, requested or required, not {auth!r}")
    context.verify_mode = modes[auth]
    if auth != "none":
        trusted = _trusted_pem(config, listener)
        if trusted is not None:
            context.load_verify_locations(cadata=trusted.decode())
        else:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """A broker's own connection to another broker's TLS listener (the inter-broker listener):
    the listener's truststore to check the other, its keystore to be checked in turn."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # ssl.endpoint.identification.algorithm between brokers of one process
    trusted = _trusted_pem(config, listener)
    if trusted is not None:
        context.load_verify_locations(cadata=trusted.decode())
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    keys = _pem_key_and_chain(config, listener)
    if keys is not None:
        _load_chain(context, *keys)
    _protocols(context, config, listener)
    return context


def peer_subject(ssl_object: Any) -> str | None:
    """The client certificate's subject as Java's X500Principal.getName() writes it (RFC 2253),
    or None without a certificate."""
    from cryptography import x509

    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return None
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def check_listeners(config: BrokerConfig) -> None:
    """Build every TLS listener's context once, so that a keystore that cannot be read stops the
    start with the setting named (TlsConfigError); the inter-broker listener is PLAINTEXT or SSL."""
    protocols = config.listener_security_protocols()
    for name, _host, _port in config.listeners():
        if protocols.get(name) in SSL_PROTOCOLS:
            server_context(config, name)
    inter = config.get("inter.broker.listener.name") or (config.listeners()[0][0] if config.listeners() else None)
    if int(config.get("cluster.brokers") or 1) > 1 and inter and protocols.get(str(inter)) not in ("PLAINTEXT", "SSL"):
        raise TlsConfigError(f"the inter-broker listener {inter} must be PLAINTEXT or SSL (brokers of this process "
                             "do not authenticate to each other with SASL); set inter.broker.listener.name")
