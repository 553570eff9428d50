#!/usr/bin/env python3
"""gRPC peer: the official RdfStreamService spoken by grpcio (gRPC's C core), a third
gRPC implementation beside tonic (ours) and grpc-java (bench/jvm-grpc).

Published frames are sent as the bytes of IN.jelly (malformed ones too); received ones
are parsed by pyjelly's protobuf classes (``pyjelly.jelly.rdf_pb2``). This tool moves
frames; ``pyjelly_peer.py`` encodes and decodes the RDF on either side.

  publish   ADDR TOPIC IN.jelly [--gzip]
            sends the delimited frames of IN.jelly as one PublishRdf call;
            stdout: items=N first=F last=L frames=K (the server's response metadata)
  subscribe ADDR TOPIC OUT.jelly N [--from FROM] [--gzip] [--requested-small]
            takes N frames of SubscribeRdf (then cancels) and writes them delimited;
            stderr: offsets=o1,o2,... (each frame's ``offset`` metadata entry)

A refused call exits 3 with ``code=<NAME> details=<text>`` on stderr.
"""

from __future__ import annotations

import argparse
import sys

import grpc
from pyjelly.jelly import rdf_pb2

SERVICE = "/eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService/"


def varint_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError(f"bad length prefix at byte {pos}")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def read_frames(path: str) -> list[bytes]:
    """The messages of a delimited stream, as bytes (sent as they are: bad ones too)."""
    data = open(path, "rb").read()
    frames = []
    pos = 0
    while pos < len(data):
        size, pos = read_varint(data, pos)
        frames.append(data[pos : pos + size])
        pos += size
    return frames


def channel(addr: str, gzip: bool) -> grpc.Channel:
    comp = grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression
    return grpc.insecure_channel(addr, compression=comp)


def publish_call(ch: grpc.Channel, topic: str, frames: list[bytes]):
    call = ch.stream_unary(
        SERVICE + "PublishRdf",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    return call.with_call(iter(frames), metadata=[("x-jelly-topic", topic)], timeout=60)


def cmd_publish(a: argparse.Namespace) -> None:
    frames = read_frames(a.input)
    with channel(a.addr, a.gzip) as ch:
        _, call = publish_call(ch, a.topic, frames)
        md = dict(call.initial_metadata() or ())
        md.update(dict(call.trailing_metadata() or ()))
    print(
        f"items={md.get('x-jelly-items')} first={md.get('x-jelly-first-offset')} "
        f"last={md.get('x-jelly-last-offset')} frames={len(frames)}"
    )


def subscribe_request(topic: str, small: bool) -> bytes:
    # RdfStreamSubscribe (grpc.proto): topic = 1, requested_options = 2. pyjelly ships
    # grpc.proto but not its generated module, so the two fields are written here.
    body = b"\x0a" + varint_bytes(len(topic.encode())) + topic.encode()
    if small:
        # The physical type must equal the topic's (the tests' topics hold quads).
        o = rdf_pb2.RdfStreamOptions(
            physical_type=rdf_pb2.PHYSICAL_STREAM_TYPE_QUADS,
            max_name_table_size=16,
            max_prefix_table_size=4,
            max_datatype_table_size=2,
        )
        ob = o.SerializeToString()
        body += b"\x12" + varint_bytes(len(ob)) + ob
    return body


def cmd_subscribe(a: argparse.Namespace) -> None:
    md = [("x-jelly-from", a.from_)]
    offsets = []
    # grpcio offers gzip in grpc-accept-encoding by itself: the server may compress.
    with channel(a.addr, a.gzip) as ch, open(a.output, "wb") as out:
        call = ch.unary_stream(
            SERVICE + "SubscribeRdf",
            request_serializer=lambda b: b,
            response_deserializer=rdf_pb2.RdfStreamFrame.FromString,
        )
        stream = call(subscribe_request(a.topic, a.requested_small), metadata=md, timeout=60)
        for frame in stream:
            b = frame.SerializeToString()
            out.write(varint_bytes(len(b)) + b)
            # Every frame of the topic's stream carries its item's offset (a map entry).
            if "offset" in frame.metadata:
                offsets.append(frame.metadata["offset"].decode())
            if len(offsets) >= a.n:
                stream.cancel()
                break
    print(f"offsets={','.join(offsets)}", file=sys.stderr)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("publish")
    pp.add_argument("addr")
    pp.add_argument("topic")
    pp.add_argument("input")
    pp.add_argument("--gzip", action="store_true")
    pp.set_defaults(fn=cmd_publish)
    ps = sub.add_parser("subscribe")
    ps.add_argument("addr")
    ps.add_argument("topic")
    ps.add_argument("output")
    ps.add_argument("n", type=int)
    ps.add_argument("--from", dest="from_", default="earliest")
    ps.add_argument("--gzip", action="store_true")
    ps.add_argument("--requested-small", action="store_true")
    ps.set_defaults(fn=cmd_subscribe)
    a = p.parse_args()
    try:
        a.fn(a)
    except grpc.RpcError as e:
        print(f"code={e.code().name} details={e.details()}", file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
