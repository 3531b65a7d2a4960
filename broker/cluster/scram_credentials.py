"""SCRAM credentials (KIP-554): what AlterUserScramCredentials stores and DescribeUserScramCredentials
reports, rule for rule as Kafka's ScramControlManager.alterCredentials and ScramImage.describe.

Kafka keeps them in the metadata log whether or not a SASL listener exists (admin tools provision
users before SASL is switched on); so do we, in the cluster metadata. Like Kafka, only the salt, the
StoredKey, the ServerKey and the iteration count are kept, never the salted password.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from protocol.messages import ApiMessage

# ScramMechanism.type -> (name, hash); both have minIterations 4096.
MECHANISMS = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # ScramControlManager.MAX_ITERATIONS

Credentials = dict[str, dict[int, "ScramCredential"]]  # user -> mechanism type -> credential
AlterResult = tuple[str, int, str | None]  # user, error code, error message
DescribeResult = tuple[str, int, str | None, list[tuple[int, int]]]  # ... and [(mechanism, iterations)]


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def derive(mechanism: int, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    """ScramFormatter: StoredKey = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted, "Server Key")."""
    algo = MECHANISMS[mechanism][1]
    client_key = hmac.new(salted_password, b"Client Key", algo).digest()
    return ScramCredential(salt, hashlib.new(algo, client_key).digest(),
                           hmac.new(salted_password, b"Server Key", algo).digest(), iterations)


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def alter(current: Mapping[str, Mapping[int, ScramCredential]], deletions: Iterable[ApiMessage],
          upsertions: Iterable[ApiMessage]) -> tuple[Credentials, list[AlterResult]]:
    """Apply a request's ``deletions`` (name, mechanism) and ``upsertions`` (name, mechanism,
    iterations, salt, salted_password); return the new credentials and one result per user.

    A user named twice in one request (in either list) gets DUPLICATE_RESOURCE and none of its
    changes apply; every other user's valid change applies, as the controller's atomic batch does.
    """
    to_delete: dict[str, ApiMessage] = {}
    to_upsert: dict[str, ApiMessage] = {}
    errors: dict[str, tuple[int, str]] = {}
    duplicate = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for d in deletions:
        if d.name in errors:
            continue
        if to_delete.pop(d.name, None) is not None:
            errors[d.name] = duplicate
            continue
        error = _check_name_and_mechanism(d.name, d.mechanism)
        if error is None and d.mechanism not in current.get(d.name, {}):
            error = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        if error is None:
            to_delete[d.name] = d
        else:
            errors[d.name] = error
    for u in upsertions:
        if u.name in errors:
            continue
        if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
            errors[u.name] = duplicate
            continue
        error = _check_name_and_mechanism(u.name, u.mechanism)
        if error is None and u.iterations < MIN_ITERATIONS:
            error = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        elif error is None and u.iterations > MAX_ITERATIONS:
            error = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if error is None:
            to_upsert[u.name] = u
        else:
            errors[u.name] = error

    updated: Credentials = {user: dict(by_mechanism) for user, by_mechanism in current.items()}
    results: list[AlterResult] = []
    for name, d in to_delete.items():
        del updated[name][d.mechanism]
        if not updated[name]:
            del updated[name]
        results.append((name, ErrorCode.NONE, None))
    for name, u in to_upsert.items():
        if not u.salted_password:  # Java's SecretKeySpec refuses an empty key: an unexpected error in Kafka
            results.append((name, ErrorCode.UNKNOWN_SERVER_ERROR, None))
            continue
        updated.setdefault(name, {})[u.mechanism] = derive(u.mechanism, bytes(u.salt), bytes(u.salted_password),
                                                           u.iterations)
        results.append((name, ErrorCode.NONE, None))
    results += [(name, code, message) for name, (code, message) in errors.items()]
    return updated, results


def describe(current: Mapping[str, Mapping[int, ScramCredential]], users: list[str] | None) -> list[DescribeResult]:
    """Every user when ``users`` is null or empty; a user asked for twice gets DUPLICATE_RESOURCE,
    an unknown one RESOURCE_NOT_FOUND (ScramImage.describe's messages)."""
    wanted: dict[str, bool] = {}  # name -> named more than once
    if not users:
        wanted = dict.fromkeys(current, False)
    else:
        for name in users:
            wanted[name] = name in wanted
    results: list[DescribeResult] = []
    for name, twice in wanted.items():
        if twice:
            results.append((name, ErrorCode.DUPLICATE_RESOURCE,
                            f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
                            []))
        elif name in current and current[name]:
            results.append((name, ErrorCode.NONE, "",  # never set by Kafka: the field's default, not null
                            [(m, c.iterations) for m, c in sorted(current[name].items())]))
        else:
            results.append((name, ErrorCode.RESOURCE_NOT_FOUND,
                            f"Attempt to describe a user credential that does not exist: {name}", []))
    return results
