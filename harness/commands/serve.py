"""`chaos serve`'s request handler: the store, read only, to this machine only.

It answers GET and HEAD on 127.0.0.1 (the caller binds it there), and serves a path only
if its realpath lies inside the store's realpath and it is a regular file or a directory:
a link out of the store (`store/x -> /`), a FIFO or a device is a 404, as is anything
missing. The check is made on the path and again on the opened file (harness/core/safefile.py),
so a link swapped in between is caught. Links inside the store (store/latest) are
followed. A request whose Host header is not 127.0.0.1:PORT or localhost:PORT is refused
with 400: a web page cannot reach the store by pointing its own name at 127.0.0.1 (DNS
rebinding). The index page ("/", "/index.html") is rendered fresh from the store
(results/index.py), so it shows every run, including those made since the last write.
Every answer says `X-Content-Type-Options: nosniff` and carries the reports' CSP.
"""

from __future__ import annotations

import http.server
import io
import os
import sys
import urllib.parse
from http import HTTPStatus

from harness.core.errors import BadArgument
from harness.core.safefile import inside, open_inside

# The reports' own policy (results/report.py): inline style and script, data: images, nothing fetched.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


class StoreHandler(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler confined to `directory` (the store); see the module docstring.
    Must not serve a file it has not opened through open_inside."""

    def __init__(self, *args, directory: str, **kwargs):
        super().__init__(*args, directory=directory, **kwargs)

    def end_headers(self) -> None:
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        super().end_headers()

    def _host_ok(self) -> bool:
        port = self.server.server_address[1]
        host = (self.headers.get("Host") or "").strip().lower()
        return host in (f"127.0.0.1:{port}", f"localhost:{port}")

    def send_head(self):
        if not self._host_ok():
            port = self.server.server_address[1]
            self.send_error(HTTPStatus.BAD_REQUEST, f"Host must be 127.0.0.1:{port} or localhost:{port}")
            return None
        url = urllib.parse.urlsplit(self.path).path
        if url in ("/", "/index.html"):
            return self._index()
        path = self.translate_path(self.path)
        try:
            real = inside(self.directory, path)
        except BadArgument:
            return self._not_found()
        if os.path.isdir(real):
            if not url.endswith("/"):
                self.send_response(HTTPStatus.MOVED_PERMANENTLY)
                self.send_header("Location", url + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            index = os.path.join(path, "index.html")
            if not os.path.lexists(index):
                return self.list_directory(str(real))
            path = index
        try:
            f = open_inside(self.directory, path)
        except (BadArgument, OSError):
            return self._not_found()
        try:
            fs = os.fstat(f.fileno())
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-type", self.guess_type(path))
            self.send_header("Content-Length", str(fs.st_size))
            self.send_header("Last-Modified", self.date_time_string(fs.st_mtime))
            self.end_headers()
            return f
        except BaseException:
            f.close()
            raise

    def _not_found(self):
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")
        return None

    def _index(self):
        from results.index import render_index

        body = render_index(self.directory).encode("utf-8")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        return io.BytesIO(body)

    def log_message(self, format: str, *args) -> None:
        # A request line is the client's bytes: escape control characters before they reach a terminal.
        text = (format % args).encode("ascii", "backslashreplace").decode("ascii")
        text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
        sys.stderr.write(f"{self.address_string()} - [{self.log_date_time_string()}] {text}\n")


def serve_store(store: str, port: int) -> http.server.ThreadingHTTPServer:
    """A server for `store` bound to 127.0.0.1:`port` (OSError as bind raises it); the caller serves it."""
    import functools

    handler = functools.partial(StoreHandler, directory=os.path.realpath(store))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    httpd.daemon_threads = True
    return httpd


__all__ = ["StoreHandler", "serve_store", "CSP"]
