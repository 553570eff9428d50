# -*- coding: utf-8 -*-
"""One Ztreamy 0.5 stream for bench/ztreamy/compare.py (Python 2.7).

    .venv/bin/python server.py [--host 127.0.0.1] [--port 0] [--path /events]
                               [--buffer SECONDS]

It is what `python -m ztreamy.server` does (one `ztreamy.Stream` with
allow_publish=True in a `ztreamy.StreamServer`), except that it binds to one
address only (StreamServer.start() listens on every interface) and, with
--port 0, on a free port. When listening it prints one line on stdout:

    ztreamy: listening on http://127.0.0.1:PORT/events (buffering_time=...)

Endpoints (see ztreamy/server.py): POST PATH/publish (Content-Type
application/ztreamy-event, a body of serialized events), GET PATH/stream
(long-lived; deflate only when Accept-Encoding asks for it), PATH/priority,
PATH/compressed, PATH/long-polling.

--buffer: the stream's buffering_time. Ztreamy's default (Stream(...,
buffering_time=None) and `python -m ztreamy.server` without --buffer) is no
buffering: each published batch is dispatched to the subscribers inside the
publish request. With --buffer S, events are gathered and dispatched every S
seconds by a tornado PeriodicCallback (priority clients still get them at once).
"""
from __future__ import print_function

import argparse
import logging
import signal
import sys

import tornado.ioloop
import tornado.netutil

import ztreamy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--host', default='127.0.0.1')
    ap.add_argument('--port', type=int, default=0)
    ap.add_argument('--path', default='/events')
    ap.add_argument('--buffer', type=float, default=None,
                    help='buffering time in seconds (default: none, as in ztreamy)')
    ap.add_argument('--log-level', default='WARNING')
    args = ap.parse_args()
    logging.basicConfig(level=getattr(logging, args.log_level.upper()))

    buffering_time = None
    if args.buffer is not None and args.buffer > 0:
        buffering_time = args.buffer * 1000.0   # ztreamy takes milliseconds
    server = ztreamy.StreamServer(args.port)
    stream = ztreamy.Stream(args.path, allow_publish=True,
                            buffering_time=buffering_time)
    server.add_stream(stream)

    # StreamServer.start() without its listen(port) on all interfaces.
    sockets = tornado.netutil.bind_sockets(args.port, address=args.host)
    port = sockets[0].getsockname()[1]
    server._register_handlers()
    server.http_server.add_sockets(sockets)
    for s in server.streams:
        s.start()
    server._started = True

    def stop(*_):
        server.ioloop.add_callback_from_signal(server.ioloop.stop)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    import pkg_resources
    print('ztreamy: listening on http://%s:%d%s (buffering_time=%s ms, '
          'ztreamy %s, tornado %s, python %s)'
          % (args.host, port, stream.path, buffering_time,
             pkg_resources.get_distribution('ztreamy').version,
             tornado.version, sys.version.split()[0]), file=sys.stdout)
    sys.stdout.flush()
    server.ioloop.start()
    server.stop()


if __name__ == '__main__':
    main()
