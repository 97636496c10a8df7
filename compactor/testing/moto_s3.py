"""``moto_server`` with S3's conditional writes made atomic, as the tests' and benches' S3.

S3 (and MinIO) decide a conditional write (``If-Match`` / ``If-None-Match``) atomically with
the write: of two writers that read the same etag, one wins and the other gets 412. moto 5's
``put_object`` checks the condition and then writes, with no lock between (its threaded server
runs the two requests at once), so under load both can pass the check and one write silently
replaces the other. Seen twice at load 8-12 (session 17): a CAS counter that lost increments
and a session log whose eight racing writers ended at version 393 of 400 with every append
answered as done - moto's race, not the log's (nothing lost on a local store, which locks).

This runs moto's own WSGI application and request handler as ``moto_server`` does, with one
change: requests that write (PUT, POST, DELETE) run one at a time, so a condition is checked
and acted on with no other write between. Reads stay concurrent. Arguments: ``-H HOST -p PORT``.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

_WRITES = frozenset({"PUT", "POST", "DELETE"})


class WritesOneAtATime:
    """WSGI middleware: a writing request runs (and its response body is made) under one lock."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in _WRITES:
            return self.app(environ, start_response)
        with self._lock:
            body = self.app(environ, start_response)
            try:
                return [b"".join(body)]
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m compactor.testing.moto_s3", description=__doc__.split("\n\n")[0])
    p.add_argument("-H", "--host", default="127.0.0.1")
    p.add_argument("-p", "--port", type=int, default=5000)
    args = p.parse_args(argv)
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(args.host, args.port, WritesOneAtATime(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
