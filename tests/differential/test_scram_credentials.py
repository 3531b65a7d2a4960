"""SCRAM credentials (KIP-554) without a SASL listener: Kafka stores and describes them anyway (admin
tools provision users first), so AlterUserScramCredentials / DescribeUserScramCredentials must give
the same results and messages on both, error cases included."""

from __future__ import annotations

import hashlib
import os
import time

from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

from tests.differential.harness import build, unique

SHA256, SHA512, UNKNOWN_MECHANISM = 1, 2, 3


def _upsert(name: str, mechanism: int, iterations: int) -> dict:
    salt = os.urandom(16)
    algo = "sha512" if mechanism == SHA512 else "sha256"
    salted = hashlib.pbkdf2_hmac(algo, b"secret", salt, max(iterations, 1))
    return dict(name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


def _alter(c, deletions: list[tuple[str, int]], upsertions: list[dict]) -> list[tuple]:
    req = build(AlterUserScramCredentialsRequest, 0,
                deletions=[dict(name=n, mechanism=m) for n, m in deletions], upsertions=upsertions)
    return sorted((r.user, r.error_code, r.error_message) for r in c.send(req, 0).results)


def _describe(c, users: list[str] | None, prefix: str) -> list[tuple]:
    req = build(DescribeUserScramCredentialsRequest, 0,
                users=None if users is None else [dict(name=u) for u in users])
    r = c.send(req, 0)
    return (r.error_code, r.error_message), sorted((x.user, x.error_code, x.error_message, sorted((i.mechanism, i.iterations) for i in x.credential_infos))
                  for x in r.results if x.user.startswith(prefix))


def _until(ready, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_alter_and_describe_scram_credentials(pair, request):
    pair.require(request, (50, 0), (51, 0))
    p = unique("scram") + "-"
    alice, bob, carol, dave, erin, frank, ghost = (p + n for n in ("alice", "bob", "carol", "dave", "erin", "frank",
                                                                  "ghost"))

    def scenario(t):
        with t.client() as c:
            first = _alter(c, [(ghost, SHA256)], [
                _upsert(alice, SHA256, 8192), _upsert(bob, SHA512, 4096), _upsert(carol, SHA256, 100),
                _upsert(dave, SHA256, 20000), _upsert(erin, UNKNOWN_MECHANISM, 4096), _upsert("", SHA256, 4096),
                _upsert(frank, SHA256, 4096), _upsert(frank, SHA512, 4096)])
            # Kafka's broker learns the alteration from its metadata log a moment after answering
            _until(lambda: len(_describe(c, None, p)[1]) == 2)
            described = _describe(c, [alice, bob, ghost, alice], p)
            everyone = _describe(c, None, p)
            second = _alter(c, [(alice, SHA256), (bob, UNKNOWN_MECHANISM)], [_upsert(carol, SHA512, 5000)])
            third = _alter(c, [], [_upsert(bob, SHA256, 5000), _upsert(bob, SHA256, 4096)])
            fourth = _alter(c, [], [_upsert(bob, SHA256, 6000)])
            _until(lambda: [(u, e) for u, e, _, _ in _describe(c, None, p)[1]] == [(bob, 0), (carol, 0)]
                   and (SHA256, 6000) in _describe(c, [bob], p)[1][0][3])
            after = _describe(c, [alice, bob, carol], p)
            return first, described, everyone, second, third, fourth, after

    k, o = pair.run(scenario)
    first, described, everyone, second, third, fourth, after = k
    assert dict((u, e) for u, e, _ in first) == {
        alice: 0, bob: 0, carol: 93, dave: 93, erin: 33, "": 93, frank: 92, ghost: 91}
    assert [(u, e) for u, e, _, _ in described[1]] == [(alice, 92), (bob, 0), (ghost, 91)]
    assert everyone[1] == [(alice, 0, "", [(SHA256, 8192)]), (bob, 0, "", [(SHA512, 4096)])]
    assert after[1] == [(alice, 91, f"Attempt to describe a user credential that does not exist: {alice}", []),
                        (bob, 0, "", [(SHA256, 6000), (SHA512, 4096)]), (carol, 0, "", [(SHA512, 5000)])]
    assert o == k
