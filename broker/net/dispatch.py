"""Frame -> handler -> encoded response, following Kafka's SocketServer/RequestChannel rules.

- An unknown API key, or a version outside what we implement, closes the connection (Kafka's
  ``parseRequestHeader`` throws and the processor closes), except ApiVersions: any version is
  accepted and an unsupported one gets a v0 body with UNSUPPORTED_VERSION (KIP-511).
- Responses use header v1 when the API version is flexible, else v0; ApiVersions always v0.
"""

from __future__ import annotations

import asyncio
import inspect
import struct
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import structlog

from broker.cluster.quotas import user_of
from broker.control.error_answers import CARRIED_OUT_SCOPED, SCOPED, error_answer, scoped_error_answer
from broker.control.faults import Fault
from broker.control.request_keys import request_keys
from broker.control.request_log import LoggedRequest, RequestLog
from broker.handlers.registry import HANDLERS, ApiSpec
from broker.inspect.live.recorder import TXN_APIS, PendingRequest
from broker.net.context import NO_RESPONSE, RawResponse, RequestContext
from broker.security.principal import ANONYMOUS
from protocol.headers import MalformedHeader, parse_request_header, peek_api, response_header
from protocol.messages import api_name
from protocol.nullability import null_violation

if TYPE_CHECKING:
    from broker.broker import Broker

log = structlog.get_logger(__name__)

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")


# A request body larger than this, for an API without a fast codec, is decoded off the event loop.
DECODE_OFF_LOOP_BYTES = 256 * 1024
# Not counted against request_percentage: what a client needs to learn how to talk to us at all.
QUOTA_EXEMPT = frozenset({18, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate


class CloseConnection(Exception):
    """The request cannot be answered; Kafka closes the connection."""


class Encoded:
    """Frame-ready output: a list of buffers whose first element is the size prefix; ``regions``
    when some are FileRegions rather than bytes. A fault rule may hold it ``delay`` seconds or
    ``drop`` it (the connection then goes silent)."""

    __slots__ = ("buffers", "delay", "drop", "regions")

    def __init__(self, buffers: list, regions: bool = False) -> None:
        self.buffers = buffers
        self.regions = regions
        self.delay = 0.0
        self.drop = False


def _flexible(spec: ApiSpec, version: int) -> bool:
    return spec.request_cls.flexible_version_q(version)


def encode_response(api_key: int, version: int, correlation_id: int, response: Any) -> Encoded | None:
    if response is NO_RESPONSE or response is None:
        return None
    spec = HANDLERS[api_key]
    flexible = api_key != API_VERSIONS_KEY and _flexible(spec, version)
    header = response_header(correlation_id, flexible)
    if isinstance(response, RawResponse):
        return Encoded([_SIZE.pack(len(header) + response.size), header, *response.buffers], response.regions)
    body = response.encode(version=version)
    return Encoded([_SIZE.pack(len(header) + len(body)), header, body])


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.metrics = broker.metrics
        self.controls = broker.controls
        # the inspector's timeline: transactional requests only, and only while the page is on
        self.recorder = broker.txn_recorder

    def handle(
        self, frame: bytes | bytearray, client_host: str, local_host: str, connection_id: str, listener: str,
        principal: str = ANONYMOUS,
    ) -> Encoded | None | Awaitable[Encoded | None]:
        """Process one request frame. Raises CloseConnection for what Kafka drops."""
        try:
            api_key, version = peek_api(frame)
        except MalformedHeader as e:
            raise CloseConnection(str(e)) from None
        spec = HANDLERS.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {api_key}")
        controls = self.controls
        restricted = controls.engaged and controls.restricted
        if api_key == API_VERSIONS_KEY and not (spec.accepts(version)
                                                and (not restricted or controls.accepts(api_key, version))):
            if len(frame) < 8:  # no correlation id to answer with: Kafka cannot parse the header either
                raise CloseConnection("request header too short")
            return self._unsupported_api_versions(frame, version)
        if not spec.accepts(version):
            raise CloseConnection(f"unsupported version {version} of API key {api_key}")
        if restricted and not controls.accepts(api_key, version):
            raise CloseConnection(f"version {version} of API key {api_key} is not served (control endpoint: "
                                  "emulated release or API range)")
        try:
            header = parse_request_header(frame, _flexible(spec, version))
        except MalformedHeader as e:
            raise CloseConnection(f"malformed request header: {e}") from None
        body = memoryview(frame)[header.body_offset:]
        if spec.decode is None and len(body) > DECODE_OFF_LOOP_BYTES:
            return self._decode_off_loop(spec, body, version, header, api_key, client_host, local_host,
                                         connection_id, listener, principal)
        request = self._decode(spec, body, version)
        return self._handle(spec, request, api_key, version, header, client_host, local_host, connection_id,
                            listener, principal)

    @staticmethod
    def _decode(spec: ApiSpec, body: memoryview, version: int) -> Any:
        try:
            request = spec.decode(body, version) if spec.decode else spec.request_cls.decode(body, version=version)
        except Exception as e:  # noqa: BLE001 - any decode failure is a malformed request
            raise CloseConnection(f"malformed {spec.request_cls.name} v{version}: {e!r}") from None
        if spec.decode is None:
            field = null_violation(request, spec.request_cls.fields, version)
            if field is not None:
                raise CloseConnection(f"non-nullable field {field} of {spec.request_cls.name} v{version} "
                                      "was serialized as null")
        return request

    async def _decode_off_loop(self, spec: ApiSpec, body: memoryview, version: int, header: Any, api_key: int,
                               client_host: str, local_host: str, connection_id: str,
                               listener: str, principal: str) -> Encoded | None:
        """A large request decoded by kafka-python's generic decoder (a megabyte can hold a million
        group ids) is decoded in a worker thread, then handled on the loop as any other."""
        request = await asyncio.to_thread(self._decode, spec, body, version)
        result = self._handle(spec, request, api_key, version, header, client_host, local_host, connection_id,
                              listener, principal)
        return await result if inspect.isawaitable(result) else result

    def _handle(self, spec: ApiSpec, request: Any, api_key: int, version: int, header: Any, client_host: str,
                local_host: str, connection_id: str, listener: str,
                principal: str) -> Encoded | None | Awaitable[Encoded | None]:
        ctx = RequestContext(
            self.broker, api_key, version, header.correlation_id, header.client_id, client_host, local_host,
            connection_id, listener, principal,
        )
        traced = None
        if self.recorder is not None and api_key in TXN_APIS:
            traced = self.recorder.request(self.broker.node_id, api_key, version, header.client_id, request)
        if self.controls.engaged:  # fault rules, the request log: the control endpoint's path
            return self._controlled(spec, request, ctx, traced)
        started = time.perf_counter()
        result = spec.handler(ctx, request) if traced is None else self._traced(spec, ctx, request, traced)
        elapsed = time.perf_counter() - started
        if inspect.isawaitable(result):
            return self._finish_async(ctx, result, started, elapsed)
        self.metrics.request_done(api_key, version, elapsed)
        if self.broker.quotas.enforcing_requests:
            self._request_quota(ctx, result, elapsed)
        return encode_response(api_key, version, header.correlation_id, result)

    def _traced(self, spec: ApiSpec, ctx: RequestContext, request: Any, traced: PendingRequest) -> Any:
        """The handler's answer, shown to the inspector's recorder when it is there."""
        result = spec.handler(ctx, request)
        if inspect.isawaitable(result):
            return self._traced_async(result, traced)
        traced.answered(result)
        return result

    @staticmethod
    async def _traced_async(result: Awaitable[Any], traced: PendingRequest) -> Any:
        response = await result
        traced.answered(response)
        return response

    async def _finish_async(self, ctx: RequestContext, result: Awaitable[Any], started: float,
                            busy: float) -> Encoded | None:
        response = await result
        self.metrics.request_done(ctx.api_key, ctx.api_version, time.perf_counter() - started)
        if self.broker.quotas.enforcing_requests:  # the time it held the loop before waiting, not the wait
            self._request_quota(ctx, response, busy)
        return encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response)

    def _request_quota(self, ctx: RequestContext, response: Any, seconds: float) -> None:
        """request_percentage (ClientRequestQuotaManager): the request's time in percent-seconds; a
        client over its quota is muted for the throttle time, which the answer carries when it has
        the field (Produce and Fetch carry their byte-rate throttle)."""
        if ctx.api_key in QUOTA_EXEMPT:
            return
        quotas = self.broker.quotas
        throttle = quotas.record("request_percentage", ctx.client_id, seconds * 100,
                                 user=user_of(ctx.principal))
        if throttle <= 0:
            return
        quotas.mute(ctx.connection_id, max(throttle, int((quotas.muted_until.get(ctx.connection_id, 0)
                                                          - self.broker.wire_clock.monotonic()) * 1000)))
        if response is not None and not isinstance(response, RawResponse) and hasattr(response, "throttle_time_ms"):
            try:
                response.throttle_time_ms = max(response.throttle_time_ms or 0, throttle)
            except AttributeError:
                pass

    # --- the control endpoint's path: fault rules and the request log -------------------------------

    def _controlled(self, spec: ApiSpec, request: Any, ctx: RequestContext,
                    traced: PendingRequest | None = None) -> Encoded | None | Awaitable[Encoded | None]:
        controls, broker = self.controls, self.broker
        faults = controls.faults
        keys = request_keys(ctx.api_key, request, broker.metadata.name_of) \
            if controls.logging or faults.need_keys else None
        entry = controls.requests.record(broker.clock.now_ms(), broker.node_id, ctx.connection_id, ctx.client_id,
                                         ctx.client_host, ctx.principal, ctx.api_key, ctx.api_version,
                                         ctx.correlation_id, keys) if controls.logging else None
        picked = faults.pick(broker.node_id, ctx.api_key, ctx.client_id, keys) if faults.rules else None
        fault, scope = None, None
        if picked is not None:
            fault, rule = picked
            log.info("fault applied", api=api_name(ctx.api_key), broker=broker.node_id, client_id=ctx.client_id,
                     **fault.to_json())
            if entry is not None:
                entry.fault = fault.action if fault.action != "error" else f"error {fault.error.name}"
            if traced is not None:  # the timeline shows the fault; an answer not carried out has its error
                traced.event.data["fault"] = fault.action if fault.action != "error" else f"error {fault.error.name}"
                if fault.action == "error":
                    traced.event.data["error"] = fault.error.name
            if fault.action == "error" and rule.topic is not None and ctx.api_key in SCOPED:
                scope = (rule.topic, rule.partition)
            if not fault.apply and not (scope is not None and ctx.api_key in CARRIED_OUT_SCOPED):
                # an error answer or a close instead of carrying the request out
                if fault.action == "close":
                    self._closed(entry, "fault rule: connection closed instead of answering")
                return self._controlled_answer(ctx, request, None, fault, entry, scope)
        started = time.perf_counter()
        result = spec.handler(ctx, request) if traced is None else self._traced(spec, ctx, request, traced)
        busy = time.perf_counter() - started
        if inspect.isawaitable(result):
            return self._controlled_async(ctx, request, result, started, busy, fault, entry, scope)
        self.metrics.request_done(ctx.api_key, ctx.api_version, busy)
        if broker.quotas.enforcing_requests:
            self._request_quota(ctx, result, busy)
        return self._controlled_answer(ctx, request, result, fault, entry, scope)

    async def _controlled_async(self, ctx: RequestContext, request: Any, result: Awaitable[Any], started: float,
                                busy: float, fault: Fault | None, entry: LoggedRequest | None,
                                scope: tuple[str, int | None] | None) -> Encoded | None:
        try:
            response = await result
        except BaseException:
            self._closed(entry, None)
            raise
        self.metrics.request_done(ctx.api_key, ctx.api_version, time.perf_counter() - started)
        if self.broker.quotas.enforcing_requests:
            self._request_quota(ctx, response, busy)
        return self._controlled_answer(ctx, request, response, fault, entry, scope)

    def _controlled_answer(self, ctx: RequestContext, request: Any, response: Any, fault: Fault | None,
                           entry: LoggedRequest | None, scope: tuple[str, int | None] | None = None) -> Encoded | None:
        """The answer as the fault rule has it: Kafka's error answer, a close, held or lost."""
        if fault is not None:
            if fault.action == "close":
                self._closed(entry, "fault rule: connection closed after carrying the request out")
            if fault.action == "error" and scope is not None:
                response = scoped_error_answer(ctx.api_key, ctx.api_version, request, response, fault.error, *scope,
                                               namer=self.broker.metadata.name_of)
            elif fault.action == "error":
                response = error_answer(ctx.api_key, ctx.api_version, request, fault.error,
                                        self.broker.metadata.name_of)
                if response is NO_RESPONSE:  # acks=0: Kafka closes the connection of a failed produce
                    self._closed(entry, f"fault rule: acks=0 produce failed with {fault.error.name}")
        if entry is not None:
            RequestLog.answered(entry, response, "dropped" if fault is not None and fault.action == "drop"
                                else "answered")
        encoded = encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response)
        if encoded is not None:
            rtt_ms = self.controls.faults.rtt_ms.get(self.broker.node_id, 0)
            encoded.delay = (rtt_ms + (fault.delay_ms if fault is not None else 0)) / 1000
            encoded.drop = fault is not None and fault.action == "drop"
        return encoded

    @staticmethod
    def _closed(entry: LoggedRequest | None, reason: str | None) -> None:
        if entry is not None:
            RequestLog.answered(entry, None, "closed")
        if reason is not None:
            raise CloseConnection(reason)

    def _unsupported_api_versions(self, frame: bytes | bytearray, version: int) -> Encoded:
        """KIP-511: answer a v0 body with UNSUPPORTED_VERSION and our ApiVersions range."""
        correlation_id = struct.unpack_from(">i", frame, 4)[0]
        spec = HANDLERS[API_VERSIONS_KEY]
        top = spec.max_version
        if self.controls.engaged and self.controls.restricted:
            top = next((hi for key, _, hi in self.controls.advertised([(API_VERSIONS_KEY, 0, top)])), 0)
        resp = spec.response_cls[0](
            error_code=35,
            api_keys=[spec.response_cls.ApiVersion(api_key=API_VERSIONS_KEY, min_version=0, max_version=top)],
        )
        body = resp.encode(version=0)
        header = response_header(correlation_id, False)
        self.metrics.request_done(API_VERSIONS_KEY, version, 0.0)
        return Encoded([_SIZE.pack(len(header) + len(body)), header, body])
