"""SASL authentication on SASL_PLAINTEXT listeners: PLAIN and SCRAM-SHA-256/512, sans-IO.

A connection on a SASL listener may send only ApiVersions and SaslHandshake until it has
authenticated (anything else closes it, as Kafka's SaslServerAuthenticator does). SaslHandshake
picks a mechanism from ``sasl.enabled.mechanisms`` (per listener:
``listener.name.<listener>.sasl.enabled.mechanisms``); the tokens then come in SaslAuthenticate
requests (handshake v1) or as raw size-prefixed frames (handshake v0). A failed exchange answers
SASL_AUTHENTICATION_FAILED and closes the connection.

- PLAIN users and passwords come from the listener's JAAS config, as Kafka's
  PlainServerCallbackHandler reads them: ``listener.name.<listener>.plain.sasl.jaas.config`` =
  ``org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";``.
- SCRAM users are the credentials stored with AlterUserScramCredentials (RFC 5802/7677 exchange,
  Kafka's ScramSaslServer messages).

The authenticated principal (``User:<name>``) is what client quotas see.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping

from broker.cluster.scram_credentials import MECHANISMS, ScramCredential

SCRAM = {name: (mech_type, algo) for mech_type, (name, algo) in MECHANISMS.items()}
_JAAS_USER = re.compile(r'user_([^=\s]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class AuthenticationFailed(Exception):
    """The exchange failed: the message goes back in SaslAuthenticate, then the connection closes."""


def plain_users(jaas: str | None) -> dict[str, str]:
    """``user_<name>="<password>"`` options of a PlainLoginModule JAAS config."""
    return {m.group(1): m.group(2).replace('\\"', '"') for m in _JAAS_USER.finditer(jaas or "")}


class PlainServer:
    """RFC 4616: one token ``authzid NUL authcid NUL password``."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.complete = False
        self.user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        authzid, username, password = (p.decode("utf-8", "replace") for p in parts)
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.user, self.complete = username, True
        return b""


class ScramServer:
    """RFC 5802 server: client-first, server-first, client-final, server-final."""

    def __init__(self, mechanism: str, credential: Callable[[str, int], ScramCredential | None]) -> None:
        self.mech_type, self.algo = SCRAM[mechanism]
        self.mechanism = mechanism
        self.credential = credential
        self.complete = False
        self.user: str | None = None
        self._state = "first"
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._cred: ScramCredential | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed() from None
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise self._failed()

    def _failed(self) -> AuthenticationFailed:
        """Kafka's one message for every SCRAM failure: it does not tell an unknown user from a
        wrong password."""
        return AuthenticationFailed("Authentication failed during authentication due to invalid credentials with "
                                    f"SASL mechanism {self.mechanism}")

    def _first(self, message: str) -> bytes:
        gs2, _, bare = message.partition(",")
        authzid, _, bare = bare.partition(",")
        if gs2 not in ("n", "y") or not bare:
            raise self._failed()
        attrs = _attrs(bare)
        username = _unescape(attrs.get("n", ""))
        nonce = attrs.get("r", "")
        if not username or not nonce:
            raise self._failed()
        if authzid.startswith("a=") and _unescape(authzid[2:]) != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        cred = self.credential(username, self.mech_type)
        if cred is None:
            raise self._failed()
        self.user, self._cred = username, cred
        self._nonce = nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        without_proof, _, proof_part = message.rpartition(",p=")
        attrs = _attrs(without_proof)
        if not proof_part or attrs.get("r") != self._nonce:
            raise self._failed()
        cred = self._cred
        assert cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise self._failed() from None
        signature = hmac.new(cred.stored_key, auth_message, self.algo).digest()
        if len(proof) != len(signature):
            raise self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.algo, client_key).digest(), cred.stored_key):
            raise self._failed()
        server_signature = hmac.new(cred.server_key, auth_message, self.algo).digest()
        self._state, self.complete = "done", True
        return f"v={base64.b64encode(server_signature).decode()}".encode()


def _attrs(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if sep:
            out.setdefault(key, value)
    return out


def _unescape(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


class SaslSession:
    """One connection's authentication on a SASL listener."""

    def __init__(self, mechanisms: tuple[str, ...], users: Mapping[str, str],
                 credential: Callable[[str, int], ScramCredential | None]) -> None:
        self.mechanisms = mechanisms
        self.users = users
        self.credential = credential
        self.server: PlainServer | ScramServer | None = None
        self.raw_tokens = False  # handshake v0: tokens come as raw size-prefixed frames
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.close_after_response = False  # a failed handshake or exchange: answer, then close

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def start(self, mechanism: str, raw_tokens: bool) -> bool:
        if mechanism not in self.mechanisms:
            return False
        self.server = PlainServer(self.users) if mechanism == "PLAIN" else ScramServer(mechanism, self.credential)
        self.raw_tokens = raw_tokens
        return True

    def evaluate(self, token: bytes) -> bytes:
        if self.server is None:
            raise AuthenticationFailed("Unexpected SaslAuthenticate request: no SaslHandshake first")
        try:
            out = self.server.evaluate(token)
        except AuthenticationFailed:
            self.close_after_response = True
            raise
        if self.server.complete:
            self.principal = f"User:{self.server.user}"
            self.raw_tokens = False
        return out
