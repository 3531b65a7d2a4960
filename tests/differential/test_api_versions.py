"""ApiVersions: what each broker advertises, and how it answers versions it does not know.

Every API we advertise must lie within Apache Kafka's range; the APIs the stock clients negotiate must
match Kafka's range exactly, except the documented caps below; and every API Kafka has that we do not
must be listed here with the reason (a deliberate gap, or a feature still being built).
"""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from tests.differential.harness import api_name, normalise
from tests.differential.wire import ConnectionClosed, decode_api_versions_v0

# APIs Apache Kafka 4.3 advertises that we deliberately do not implement, and why.
NOT_IMPLEMENTED = {
    38: "delegation tokens", 39: "delegation tokens", 40: "delegation tokens", 41: "delegation tokens",
    64: "no KRaft broker registration", 80: "no KRaft voters", 81: "no KRaft voters",
    34: "one log dir, no intra-broker moves",
    76: "share groups (KIP-932)", 77: "share groups", 78: "share groups", 79: "share groups",
    83: "share groups", 84: "share groups", 85: "share groups", 86: "share groups", 87: "share groups",
    90: "share groups", 91: "share groups", 92: "share groups",
    88: "streams groups (KIP-1071)", 89: "streams groups (KIP-1071)",
    # new in Apache Kafka 4.4.0 (seen when this suite is pointed at a 4.4.0 broker)
    93: "streams groups (KIP-1071): StreamsGroupTopologyDescriptionUpdate",
    94: "no KRaft controller quorum: UnregisterController",
}
# APIs still being built (none right now); once they land they are checked against Kafka's ranges.
PENDING: set[int] = set()

# The APIs the stock clients (Java, librdkafka, kafka-python, aiokafka, franz-go) negotiate.
CLIENT_CRITICAL = [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 23, 24, 25, 26, 28, 32, 37,
                   42, 44, 47, 60, 61, 65, 66]
# Deliberate caps below Kafka's max (none now: Produce v13 and OffsetCommit/OffsetFetch v10 name
# topics by id as Kafka's do). Java 4.1+ switches to topic ids as soon as they are advertised.
MAX_CAPS: dict[int, int] = {}
# Versions newer than the reference broker (4.3.1, the newest Kafka with kafka-tools on Maven Central)
# that Apache Kafka 4.4.0 and its Java client have, implemented from Kafka 4.4.0's specs and bytecode
# (tests/e2e/test_wire_errors.py and tests/e2e/test_groups.py check them): ApiVersions v5 (KIP-1242), which
# the 4.4 client sends first, DeleteGroups v3 (a per-group ErrorMessage) and TxnOffsetCommit v6 (topic
# ids, KIP-1319; tests/e2e/test_transactions_v2.py).
AHEAD_OF_REFERENCE = {18: 5, 28: 6, 42: 3}


def test_advertised_ranges_within_kafka(pair):
    k, o = pair.kafka.api_versions, pair.ours.api_versions
    outside = {api_name(key): (rng, k.get(key)) for key, rng in o.items()
               if key not in k or not (k[key][0] <= rng[0] <= rng[1] <= max(k[key][1], AHEAD_OF_REFERENCE.get(key, 0)))}
    assert outside == {}, f"advertised outside Kafka's range (ours, Kafka's): {outside}"


def test_kafka_apis_we_lack_are_documented(pair):
    missing = set(pair.kafka.api_versions) - set(pair.ours.api_versions)
    undocumented = sorted(missing - set(NOT_IMPLEMENTED) - PENDING)
    assert undocumented == [], f"Kafka advertises APIs we neither implement nor document: " \
                               f"{[(k, api_name(k)) for k in undocumented]}"
    print("\nKafka-only APIs: " + ", ".join(
        f"{api_name(k)}({k})" + ("" if k in NOT_IMPLEMENTED else " [pending]") for k in sorted(missing)))


@pytest.mark.parametrize("key", CLIENT_CRITICAL, ids=[api_name(k) for k in CLIENT_CRITICAL])
def test_client_critical_range(pair, request, key):
    pair.require(request, key)
    kmin, kmax = pair.kafka.api_versions[key]
    omin, omax = pair.ours.api_versions.get(key, (None, None))
    assert omin == kmin, f"{api_name(key)} min: ours {omin}, Kafka {kmin}"
    if key in MAX_CAPS:
        assert omax in (MAX_CAPS[key], kmax), f"{api_name(key)} max: ours {omax}, Kafka {kmax}, cap {MAX_CAPS[key]}"
    elif key in AHEAD_OF_REFERENCE and kmax < AHEAD_OF_REFERENCE[key]:
        assert omax == AHEAD_OF_REFERENCE[key], f"{api_name(key)} max: ours {omax}, Kafka 4.4 {AHEAD_OF_REFERENCE[key]}"
    else:
        assert omax == kmax, f"{api_name(key)} max: ours {omax}, Kafka {kmax}"


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_version(pair, version):
    def scenario(t):
        with t.client() as c:
            kw = dict(client_software_name="differential", client_software_version="1.0") if version >= 3 else {}
            r = c.send(ApiVersionsRequest[version](**kw), version)
        # The key list is compared by the range tests above; here: the error and the response shape.
        return r.error_code, r.throttle_time_ms if version >= 1 else None, bool(r.api_keys)

    k, o = pair.run(scenario)
    assert o == k


@pytest.mark.parametrize("version", [6, 99, 32767])
def test_api_versions_unknown_version(pair, version):
    """KIP-511: an ApiVersions version the broker does not know is answered with a v0 body: error 35
    (UNSUPPORTED_VERSION) and the single entry ApiVersions 0-<max>, so the client can retry at the max.
    Kafka parses such a request's header as v2 (the newest, flexible header), so it is sent that way."""
    body = b"\x0dpykafka-test\x041.0\x00"  # compact strings + empty tagged fields (the v3+ body shape)

    def scenario(t):
        with t.client() as c:
            raw = c.send_raw(18, version, body, flexible_header=True)
        return normalise(decode_api_versions_v0(raw))

    k, o = pair.run(scenario)
    kafka_max = pair.kafka.api_versions[18][1]
    assert k == {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": kafka_max}]}
    k["api_keys"][0]["max_version"] = max(kafka_max, AHEAD_OF_REFERENCE[18])
    assert o == k


def test_api_versions_unknown_version_then_retry(pair):
    """After the v0 error answer the connection stays usable: the client retries at the max version."""
    def scenario(t):
        with t.client() as c:
            raw = c.send_raw(18, 9, b"\x0dpykafka-test\x041.0\x00", flexible_header=True)
            first = decode_api_versions_v0(raw).error_code
            r = c.send(ApiVersionsRequest[4](client_software_name="pykafka-test", client_software_version="1.0"), 4)
        return first, r.error_code

    k, o = pair.run(scenario)
    assert k == (35, 0)
    assert o == k


@pytest.mark.parametrize("name,version", [("bad name!", "1.0"), ("ok", "-bad"), ("", "1.0")])
def test_api_versions_invalid_client_software(pair, name, version):
    """v3+: ClientSoftwareName/Version must match [a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?; Kafka
    answers INVALID_REQUEST (42) with an empty key list in the v3 layout. Compared byte for byte
    (kafka-python's decoder reads an error answer as a v0 body, so it cannot decode this one)."""
    def compact(s: str) -> bytes:
        b = s.encode()
        return bytes([len(b) + 1]) + b

    body = compact(name) + compact(version) + b"\x00"

    def scenario(t):
        with t.client() as c:
            return c.send_raw(18, 3, body, flexible_header=True).hex()

    k, o = pair.run(scenario)
    assert k == "002a010000000000"  # error 42, ApiKeys [], throttle 0, no tags
    assert o == k


def test_unsupported_version_of_other_api_closes_connection(pair):
    """Any other API at a version the broker does not serve (here Metadata v99): Kafka closes the
    connection without answering (SocketServer.parseRequestHeader)."""
    def scenario(t):
        with t.client() as c:
            try:
                c.send_raw(3, 99, b"\x00\x00\x00\x00\x00", flexible_header=True)
            except ConnectionClosed:
                return "closed"
            return "answered"

    k, o = pair.run(scenario)
    assert k == "closed"
    assert o == k


def test_transaction_version_feature_consistent(pair):
    """Kafka 4.3 finalizes transaction.version=2 (TV2). Whatever we finalize must be backed by the
    versions TV2 clients then use (protocol-facts 2.3): FinalizedFeaturesEpoch >= 0 (else Java ignores
    the features), Produce >= 12, EndTxn >= 5, TxnOffsetCommit >= 5. Not finalizing it is legal:
    clients then use transactions V1 (AddPartitionsToTxn/AddOffsetsToTxn), which Kafka also serves."""
    def features(t):
        with t.client() as c:
            r = c.send(ApiVersionsRequest[4](client_software_name="differential", client_software_version="1.0"), 4)
        fin = {f.name: f.max_version_level for f in (r.finalized_features or [])}
        return r.finalized_features_epoch, fin

    k_epoch, k_fin = features(pair.kafka)
    assert k_epoch >= 0 and k_fin.get("transaction.version") == 2
    o_epoch, o_fin = features(pair.ours)
    print(f"\nfinalized features: Kafka {k_fin} (epoch {k_epoch}); ours {o_fin} (epoch {o_epoch})")
    if o_fin.get("transaction.version", 0) >= 2:
        o = pair.ours.api_versions
        assert o_epoch >= 0
        assert o.get(0, (0, 0))[1] >= 12 and o.get(26, (0, 0))[1] >= 5 and o.get(28, (0, 0))[1] >= 5, o


def test_api_versions_response_header_is_v0(pair):
    """KIP-511: the ApiVersions v3+ response keeps header v0 (no tagged-field byte after the correlation id)."""
    def scenario(t):
        with t.client() as c:
            raw = c.send_raw(18, 3, b"\x0dpykafka-test\x041.0\x00", flexible_header=True)
        (error_code,) = struct.unpack_from(">h", raw, 0)
        return error_code

    k, o = pair.run(scenario)
    assert k == 0
    assert o == k
