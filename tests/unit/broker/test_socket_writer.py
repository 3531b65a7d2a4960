"""SocketWriter: bytes and file regions reach the socket whole and in order, after the transport's
own buffer, however small the peer's receive buffer; a file that ends early fails the write."""

from __future__ import annotations

import asyncio
import os
import socket
import threading

import pytest
import uvloop

from broker.net.socket_writer import ShortFileRegion, SocketWriter
from storage.log.file_region import FileRegion


class _Transport:
    """What SocketWriter asks of an asyncio transport: how much it still buffers."""

    def __init__(self, buffered: int) -> None:
        self.buffered = buffered

    def get_write_buffer_size(self) -> int:
        return self.buffered


def _reader(sock: socket.socket, want: int, out: bytearray) -> threading.Thread:
    def run() -> None:
        while len(out) < want:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out.extend(chunk)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture
def data_file(tmp_path):
    data = os.urandom(4 << 20)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield fd, data
    os.close(fd)


def test_regions_and_bytes_arrive_in_order_after_the_transport_drains(data_file):
    fd, data = data_file
    ours, peer = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    ours.setblocking(False)
    regions = [FileRegion(fd, 100, 3 << 20), FileRegion(fd, 0, 70000)]
    buffers = [b"head", regions[0], memoryview(b"-mid-"), bytearray(b"x" * 5000), regions[1], b"tail"]
    want = b"head" + data[100:100 + (3 << 20)] + b"-mid-" + b"x" * 5000 + data[:70000] + b"tail"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        transport = _Transport(buffered=10)  # earlier bytes still queued: the writer must wait
        writer = SocketWriter(loop, transport, ours.fileno())
        got = bytearray()
        reader = _reader(peer, len(want), got)
        done = writer.write(buffers)
        assert done is not None
        await asyncio.sleep(0.05)
        assert not got  # nothing jumped the transport's queue
        transport.buffered = 0
        await asyncio.wait_for(done, 30)
        await loop.run_in_executor(None, reader.join, 30)
        assert bytes(got) == want
        assert all(r.fd == -1 for r in regions)  # each region's descriptor released once sent
        writer.close()

    uvloop.run(main())
    ours.close()
    peer.close()


def test_a_region_past_the_end_of_its_file_fails_the_write(data_file):
    fd, data = data_file
    ours, peer = socket.socketpair()
    ours.setblocking(False)

    async def main() -> None:
        writer = SocketWriter(asyncio.get_running_loop(), _Transport(0), ours.fileno())
        with pytest.raises(ShortFileRegion):  # at once, or once the 10 bytes there are have gone
            done = writer.write([b"head", FileRegion(fd, len(data) - 10, 20)])
            await asyncio.wait_for(done, 10)
        writer.close()

    uvloop.run(main())
    ours.close()
    peer.close()


def test_close_while_waiting_fails_the_write_and_releases_the_regions(data_file):
    fd, _ = data_file
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    region = FileRegion(fd, 0, 1 << 20)

    async def main() -> None:
        writer = SocketWriter(asyncio.get_running_loop(), _Transport(1), ours.fileno())
        done = writer.write([b"head", region])
        writer.close()
        with pytest.raises(ConnectionResetError):
            await done
        assert region.fd == -1 and writer.fd == -1

    uvloop.run(main())
    ours.close()
    peer.close()


def test_a_file_sendfile_refuses_is_copied_instead(data_file, monkeypatch):
    fd, data = data_file
    ours, peer = socket.socketpair()
    ours.setblocking(False)

    def refuse(*_args):
        raise OSError(22, "Invalid argument")  # EINVAL: what sendfile says for files it cannot map

    monkeypatch.setattr(os, "sendfile", refuse)

    async def main() -> None:
        writer = SocketWriter(asyncio.get_running_loop(), _Transport(0), ours.fileno())
        got = bytearray()
        reader = _reader(peer, 4 + 100000, got)
        done = writer.write([b"head", FileRegion(fd, 5, 100000)])
        if done is not None:
            await asyncio.wait_for(done, 10)
        await asyncio.get_running_loop().run_in_executor(None, reader.join, 10)
        assert bytes(got) == b"head" + data[5:100005]
        writer.close()

    uvloop.run(main())
    ours.close()
    peer.close()
