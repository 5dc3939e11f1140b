"""The judge's wire: tensors read straight into their memory, every frame checked."""

import json
import multiprocessing as mp
import struct

import pytest
import torch

from autoprofiler_env.harness import wire


@pytest.mark.parametrize("duplex", [True, False])  # a socket pair, and a pipe
def test_tensors_round_trip_bit_for_bit(duplex):
    a, b = mp.Pipe(duplex=duplex)
    tensors = [torch.randn(3, 5), torch.zeros(0), torch.randn(2, 3, dtype=torch.complex128),
               torch.tensor([True, False, True]), torch.randn(7, dtype=torch.bfloat16),
               torch.arange(6, dtype=torch.int64).reshape(2, 3)[:, 1:]]  # not contiguous
    wire.send(b, {"ok": True, "n": 1}, tensors)
    header, got = wire.recv(a)
    assert header == {"ok": True, "n": 1}
    for sent, back in zip(tensors, got, strict=True):
        assert back.dtype == sent.dtype and back.shape == sent.shape
        assert torch.equal(back, sent)


def test_a_large_tensor_arrives_whole():
    a, b = mp.Pipe()
    sent = torch.randn(1 << 22)  # 16 MB: many reads
    import threading

    thread = threading.Thread(target=wire.send, args=(b, {}, [sent]))
    thread.start()
    _, (back,) = wire.recv(a)
    thread.join()
    assert torch.equal(back, sent)


def _frames(conn, header: dict, payload: bytes) -> None:
    conn.send_bytes(json.dumps(header).encode())
    conn.send_bytes(payload)


def test_a_frame_of_the_wrong_length_is_a_wire_error():
    a, b = mp.Pipe()
    _frames(b, {"tensors": [{"dtype": "float32", "shape": [4]}]}, b"\0" * 12)
    with pytest.raises(wire.WireError, match="needs 16 bytes, its frame has 12"):
        wire.recv(a)


def test_tensors_over_the_budget_are_refused_before_they_are_read():
    a, b = mp.Pipe()
    _frames(b, {"tensors": [{"dtype": "float32", "shape": [1 << 20]}]}, b"")
    with pytest.raises(wire.WireError, match="larger than the 1024 bytes allowed"):
        wire.recv(a, max_bytes=1024)


def test_a_connection_closed_inside_a_frame_is_end_of_file():
    a, b = mp.Pipe()
    b.send_bytes(json.dumps({"tensors": [{"dtype": "float32", "shape": [4]}]}).encode())
    b._send(struct.pack("!i", 16) + b"\0" * 8)  # half the bytes, then the other side is gone
    b.close()
    with pytest.raises(EOFError):
        wire.recv(a)


def test_the_long_frame_header_is_read_as_connection_writes_it():
    a, b = mp.Pipe()
    b.send_bytes(json.dumps({"tensors": [{"dtype": "float32", "shape": [4]}]}).encode())
    b._send(struct.pack("!iQ", -1, 16) + struct.pack("<4f", 1, 2, 3, 4))  # over 2 GiB: this form
    _, (back,) = wire.recv(a)
    assert back.tolist() == [1, 2, 3, 4]


def test_a_frame_that_stops_halfway_times_out_instead_of_holding_the_judge():
    import time

    a, b = mp.Pipe()
    b.send_bytes(json.dumps({"tensors": [{"dtype": "float32", "shape": [4]}]}).encode())
    b._send(struct.pack("!i", 16) + b"\0" * 8)  # half the bytes, and the sender stays
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="stopped after 8 of 16 bytes"):
        wire.recv(a, deadline=started + 0.5)
    assert time.monotonic() - started < 5


def test_a_header_over_the_limit_is_refused_before_it_is_read():
    a, b = mp.Pipe()
    b._send(struct.pack("!i", wire.MAX_HEADER_BYTES + 1))
    with pytest.raises(wire.WireError, match="header frame of"):
        wire.recv(a)


def test_the_judge_benchmark_judges_its_candidate(capsys):
    from experiments import bench_judge

    assert bench_judge.main(["--mb", "1", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "output 1 MB" in out and "verdict 0: correct" in out and "timing" in out


def test_a_threads_staging_buffers_follow_the_piece_size(monkeypatch):
    import threading

    monkeypatch.setattr(wire, "STAGE_BYTES", 1 << 10)
    small = wire._stage("cuda:0", 0)
    assert small.numel() == 1 << 10 and wire._stage("cuda:0", 0) is small  # kept
    monkeypatch.setattr(wire, "STAGE_BYTES", 1 << 12)
    assert wire._stage("cuda:0", 0).numel() == 1 << 12  # not a smaller buffer of before
    other = []
    thread = threading.Thread(target=lambda: other.append(wire._stage("cuda:0", 0)))
    thread.start()
    thread.join()
    assert other[0] is not wire._stage("cuda:0", 0)  # each thread its own
