"""A follower's fetcher: Kafka's ReplicaFetcherThread and AbstractFetcherThread, as one asyncio
task per leader broker.

It sends the leader Fetch requests with this broker's replica id (v12: topic names, the last
fetched epoch of each partition) over the leader's inter-broker listener, appends what comes back
as a follower (the leader's offsets, epochs and producer state kept), takes the leader's high
watermark, and truncates where the leader says the logs diverge (KIP-320's diverging epoch), so
a follower that led an epoch nobody else saw drops what was never committed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from broker.net.inter_broker_client import InterBrokerClient
from protocol import records as rec
from protocol.errors import ErrorCode
from protocol.messages import request_class

if TYPE_CHECKING:
    from broker.services import Services

log = structlog.get_logger(__name__)

FETCH_VERSION = 12  # names topics, carries the replica id and last fetched epoch, answers diverging epochs
BACKOFF_S = 0.1  # replica.fetch.backoff.ms after an error (Kafka's default 1000 ms; a local cluster is quicker)


@dataclass(slots=True)
class FetchState:
    topic: str
    partition: int
    leader_epoch: int  # the epoch this broker knows the leader by (current_leader_epoch)
    delayed_until: float = 0.0  # after a partition error, wait before fetching it again


class ReplicaFetcher:
    def __init__(self, broker: Services, leader_id: int, host: str, port: int) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self.client = InterBrokerClient(host, port, client_id=f"broker-{broker.node_id}-fetcher-{leader_id}",
                                        tls=broker.replication.inter_broker_tls())
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def add(self, topic: str, partition: int, leader_epoch: int) -> None:
        self.partitions[(topic, partition)] = FetchState(topic, partition, leader_epoch)
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, topic: str, partition: int) -> None:
        self.partitions.pop((topic, partition), None)

    async def stop(self) -> None:
        # The loop also ends on its own once it sees no partitions: a cancellation that
        # asyncio.wait_for swallows (its inner read finishing at the same moment) cannot keep it going.
        self.partitions.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task], timeout=5)
        self.client.close()

    # --- the loop -------------------------------------------------------------------------------

    async def _run(self) -> None:
        while self.partitions:
            try:
                if not await self._fetch_once():
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), BACKOFF_S)
                    except TimeoutError:
                        pass
            except asyncio.CancelledError:
                raise
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
                log.info("replica fetch failed; retrying", leader=self.leader_id, error=str(e) or type(e).__name__)
                await asyncio.sleep(BACKOFF_S)
                endpoint = self.broker.replication.endpoint_of(self.leader_id)
                if endpoint is not None:  # a leader that came back listens on its new port
                    self.client.retarget(*endpoint)
            except Exception:  # noqa: BLE001 - a bug must not end replication silently
                log.exception("replica fetcher failed; retrying", leader=self.leader_id)
                await asyncio.sleep(BACKOFF_S)

    def _request(self, now: float) -> Any | None:
        Fetch = request_class(1)
        config = self.broker.config
        topics: dict[str, list[Any]] = {}
        for state in self.partitions.values():
            if state.delayed_until > now:
                continue
            plog = self.broker.log_manager.get(state.topic, state.partition)
            if plog is None:
                continue
            last_epoch = plog.epoch_cache.latest_epoch
            topics.setdefault(state.topic, []).append(Fetch.FetchTopic.FetchPartition(
                partition=state.partition, current_leader_epoch=state.leader_epoch,
                fetch_offset=plog.log_end_offset, last_fetched_epoch=last_epoch if last_epoch is not None else -1,
                log_start_offset=plog.log_start_offset,
                partition_max_bytes=int(config.get("replica.fetch.max.bytes"))))
        if not topics:
            return None
        return Fetch(
            replica_id=self.broker.node_id, max_wait_ms=int(config.get("replica.fetch.wait.max.ms")),
            min_bytes=int(config.get("replica.fetch.min.bytes")),
            max_bytes=int(config.get("replica.fetch.response.max.bytes")), isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=[Fetch.FetchTopic(topic=name, partitions=parts) for name, parts in topics.items()],
            forgotten_topics_data=[], rack_id="")

    async def _fetch_once(self) -> bool:
        """One Fetch round trip; True if anything was appended or truncated."""
        request = self._request(asyncio.get_running_loop().time())
        if request is None:
            return False
        response = await self.client.send(request, FETCH_VERSION)
        if response.error_code:
            log.info("replica fetch refused", leader=self.leader_id, error=ErrorCode(response.error_code).name)
            return False
        progress = False
        for t in response.responses:
            for p in t.partitions:
                if self._process(t.topic, p):
                    progress = True
        return progress

    def _process(self, topic: str, p: Any) -> bool:
        key = (topic, p.partition_index)
        state = self.partitions.get(key)
        plog = self.broker.log_manager.get(*key)
        if state is None or plog is None:
            return False
        error = ErrorCode(p.error_code)
        if error != ErrorCode.NONE:
            if error == ErrorCode.OFFSET_OUT_OF_RANGE and p.log_start_offset > plog.log_end_offset:
                plog.truncate_fully_and_start_at(p.log_start_offset)  # the leader deleted what we lack
                return True
            # NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH: the metadata is
            # about to move this partition (or has); try again after a pause
            state.delayed_until = asyncio.get_running_loop().time() + BACKOFF_S
            return False
        diverging = getattr(p, "diverging_epoch", None)
        if diverging is not None and diverging.epoch >= 0 and diverging.end_offset >= 0:
            target = min(diverging.end_offset, plog.log_end_offset)
            log.info("follower truncating to the leader's epoch end", topic=topic, partition=p.partition_index,
                     epoch=diverging.epoch, offset=target)
            plog.truncate_to(target)
            plog.update_follower_high_watermark(p.high_watermark)
            return True
        records = p.records
        appended = False
        if records:
            buf = bytearray(records)
            batches = rec.validate_batches(buf)
            if batches and batches[-1].base_offset + batches[-1].last_offset_delta >= plog.log_end_offset:
                skip = [b for b in batches if b.base_offset < plog.log_end_offset]
                if skip:  # a batch we already hold (a retried fetch): keep the rest
                    start = skip[-1].position + skip[-1].size
                    buf = buf[start:]
                    batches = rec.validate_batches(buf)
                if batches:
                    plog.append_as_follower(buf, batches)
                    appended = True
        hw_before = plog.high_watermark
        plog.update_follower_high_watermark(p.high_watermark)
        if appended or plog.high_watermark != hw_before:  # consumers reading this follower (KIP-392)
            self.broker.replica_manager.wake(topic, p.partition_index)
        return appended
