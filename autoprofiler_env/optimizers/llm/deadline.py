"""One deadline for a whole HTTP request: :func:`_opener` is urllib's default opener with
every blocking step of a request bounded by what is left of one :class:`_Deadline`."""

from __future__ import annotations

import functools
import http.client
import io
import math
import socket
import time
import urllib.request

# A socket's timeout bounds each call alone: a server that sends one byte a second never trips
# it. So every blocking step of a request (the connect, a TLS handshake, each send, each read
# of the status line, the headers and the body) waits at most what is left of one deadline,
# and a step that starts with nothing left raises TimeoutError.


class _Deadline:
    """``seconds`` from now (None: none), on the monotonic clock; counts the bytes received."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.at = math.inf if seconds is None else self.started + seconds
        self.received = 0

    def left(self) -> float | None:
        """The seconds left, for a socket's timeout (None: no deadline).

        Raises:
            TimeoutError: none are left.
        """
        if self.at == math.inf:
            return None
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"timed out: the request's {self.seconds:g} s are spent")
        return left

    def spent(self) -> bool:
        return time.monotonic() >= self.at

    def waited(self) -> float:
        return time.monotonic() - self.started


class _DeadlineSocket:
    """A connected socket (plain or TLS) whose every send and receive waits at most until the
    deadline. Anything else goes to the socket itself. Like ``socket.makefile``, ``close``
    leaves the socket open while a file made from it is (urllib closes the connection's
    socket before the body is read)."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        self._sock = sock
        self._deadline = deadline
        self._files = 0
        self._closed = False

    def __getattr__(self, name: str):
        return getattr(self._sock, name)

    def _arm(self) -> None:
        self._sock.settimeout(self._deadline.left())

    def recv_into(self, *args, **kwargs) -> int:
        self._arm()
        n = self._sock.recv_into(*args, **kwargs)
        self._deadline.received += n
        return n

    def recv(self, *args, **kwargs) -> bytes:
        self._arm()
        data = self._sock.recv(*args, **kwargs)
        self._deadline.received += len(data)
        return data

    def send(self, data, *args) -> int:
        self._arm()
        return self._sock.send(data, *args)

    def sendall(self, data, *args) -> None:
        # send() by send(): sendall's own timeout would let a slow reader stretch one call
        with memoryview(data) as view, view.cast("B") as octets:
            sent = 0
            while sent < len(octets):
                sent += self.send(octets[sent:], *args)

    def makefile(self, mode: str = "rb", *args, **kwargs) -> io.BufferedReader:
        if mode != "rb":
            raise ValueError(f"a deadline socket reads only (mode {mode!r})")
        self._files += 1
        return io.BufferedReader(_DeadlineReader(self))

    def _file_closed(self) -> None:
        self._files -= 1
        if self._closed and self._files <= 0:
            self._sock.close()

    def close(self) -> None:
        self._closed = True
        if self._files <= 0:
            self._sock.close()


class _DeadlineReader(io.RawIOBase):
    """The raw stream under ``_DeadlineSocket.makefile``: each read is one bounded receive."""

    def __init__(self, sock: _DeadlineSocket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        return self._sock.recv_into(buffer)

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._sock._file_closed()


class _DeadlineConnection:
    """Mixed into http.client's connections: the connect and a TLS handshake wait at most what
    is left of the deadline, and the connected socket is a :class:`_DeadlineSocket`."""

    def __init__(self, *args, deadline: _Deadline, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline
        create = self._create_connection

        def create_connection(address, timeout=None, source_address=None, *more, **kw):
            sock = create(address, self._deadline.left(), source_address, *more, **kw)
            try:  # a TLS handshake that follows is bounded by the socket's timeout as a whole
                sock.settimeout(self._deadline.left())
            except BaseException:
                sock.close()
                raise
            return sock

        self._create_connection = create_connection

    def connect(self) -> None:
        super().connect()
        self.sock = _DeadlineSocket(self.sock, self._deadline)


class _DeadlineHTTPConnection(_DeadlineConnection, http.client.HTTPConnection):
    pass


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class, req, **kwargs):
        return super().do_open(functools.partial(_DeadlineHTTPConnection,
                                                 deadline=self._deadline), req, **kwargs)


_HANDLERS: list[type] = [_DeadlineHTTPHandler]

if hasattr(http.client, "HTTPSConnection") and hasattr(urllib.request, "HTTPSHandler"):
    class _DeadlineHTTPSConnection(_DeadlineConnection, http.client.HTTPSConnection):
        pass

    class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
        def __init__(self, deadline: _Deadline) -> None:
            super().__init__()
            self._deadline = deadline

        def do_open(self, http_class, req, **kwargs):
            return super().do_open(functools.partial(_DeadlineHTTPSConnection,
                                                     deadline=self._deadline), req, **kwargs)

    _HANDLERS.append(_DeadlineHTTPSHandler)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: the request carries the API key, which goes to the configured
    endpoint only (urllib would send it on to wherever a redirect points, another host
    included). The 3xx comes back as an HTTPError, which names where it pointed."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """urllib's default opener (proxies, errors), its HTTP(S) bound by ``deadline``, and no
    redirect followed (:class:`_NoRedirect`)."""
    return urllib.request.build_opener(_NoRedirect,
                                       *(handler(deadline) for handler in _HANDLERS))
