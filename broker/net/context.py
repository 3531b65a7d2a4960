"""What a handler knows about the request it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.security.acls import java_host

if TYPE_CHECKING:
    from broker.services import Services


@dataclass(slots=True)
class RequestContext:
    broker: Services
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    local_host: str
    connection_id: str
    listener: str
    principal: str = "User:ANONYMOUS"  # Kafka's KafkaPrincipal: the SASL user, the TLS subject, or ANONYMOUS

    @property
    def client_ip(self) -> str:
        """The client's address as ACL hosts name it (Java's text form of the peer IP)."""
        return java_host(self.client_host.rpartition(":")[0] or self.client_host)


@dataclass(slots=True)
class RawResponse:
    """A response body already encoded by a fast path, as a list of buffers (no copies);
    ``regions`` when some are FileRegions (Fetch), which the connection sends with sendfile."""

    buffers: list
    size: int
    regions: bool = False
    # what the fast path encoded (Produce's and Fetch's results), for the request log's error codes
    source: object = None


class NoResponse:
    """acks=0 Produce: Kafka sends nothing back."""


NO_RESPONSE = NoResponse()
