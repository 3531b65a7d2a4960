"""Message classes for API versions newer than kafka-python's specs.

kafka-python 3.0.12 carries Apache Kafka 4.3's JSON specs. Where Kafka 4.4 added a version a stock
client uses (ApiVersions v5, DeleteGroups v3, TxnOffsetCommit v6), the class here is kafka-python's generated class built from Kafka 4.4.0's own
spec (``protocol/schemas``, copied from kafka-clients-4.4.0.jar ``common/message``), keeping the
behaviour kafka-python adds to the class (ApiVersions: a v0 header, a v0 body on error).
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import api_versions as _api_versions

_SPECS = "protocol.schemas"


class ApiVersionsRequest(ApiMessage, load_json=_SPECS):
    """v5 (KIP-1242) adds ClusterId and NodeId: the node the client means to reach."""


class ApiVersionsResponse(_api_versions.ApiVersionsResponse, load_json=_SPECS):
    pass


class TxnOffsetCommitRequest(ApiMessage, load_json=_SPECS):
    """v6 (KIP-1319) names topics by id; GenerationId is now GenerationIdOrMemberEpoch."""


class TxnOffsetCommitResponse(ApiMessage, load_json=_SPECS):
    pass


class DeleteGroupsRequest(ApiMessage, load_json=_SPECS):
    """v3: the request is unchanged."""


class DeleteGroupsResponse(ApiMessage, load_json=_SPECS):
    """v3 adds an ErrorMessage per group."""


# kafka-python's clients look response classes up by API key; keep them on kafka-python's own.
from kafka.protocol.admin import groups as _groups  # noqa: E402
from kafka.protocol.api_header import ResponseClassRegistry  # noqa: E402
from kafka.protocol.producer import transaction as _transaction  # noqa: E402

ResponseClassRegistry.register_response_class(_api_versions.ApiVersionsResponse)
ResponseClassRegistry.register_response_class(_groups.DeleteGroupsResponse)
ResponseClassRegistry.register_response_class(_transaction.TxnOffsetCommitResponse)

__all__ = ["ApiVersionsRequest", "ApiVersionsResponse", "DeleteGroupsRequest", "DeleteGroupsResponse",
           "TxnOffsetCommitRequest", "TxnOffsetCommitResponse"]
