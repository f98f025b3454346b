"""``laya serve`` against hostile or unusual HTTP clients: a real server process on a free loopback
port, the shipped model, real sockets (``http.client`` or raw bytes), no mocks, no timing
assertions."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import uuid
import zlib
from urllib.parse import urlsplit

import pytest

pytest.importorskip("aiohttp", reason="laya serve needs the 'serve' extra (aiohttp)")

from laya_serve.loadtest import start_server  # noqa: E402

# as a person types them on the command line: upper case, a trailing slash, a default port
ALLOW = ["HTTP://LocalHost:5173/", "http://127.0.0.1:80"]
READ_TIMEOUT = 1.0  # --read-timeout: seconds for a request's body to arrive after its headers


@pytest.fixture(scope="module")
def server():
    args = [a for o in ALLOW for a in ("--allow-origin", o)] + ["--read-timeout", str(READ_TIMEOUT)]
    proc, url = start_server(args)
    u = urlsplit(url)
    yield u.hostname, u.port
    proc.terminate()
    proc.wait(10)


def call(server, path, body=None, method="POST", headers=None, raw: bytes | None = None, host: str | None = None):
    """``(status, body (JSON if it is JSON), headers)``; ``host``: the Host header to send."""
    conn = http.client.HTTPConnection(*server, timeout=120)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.putrequest(method, path, skip_host=host is not None, skip_accept_encoding=True)
    if host is not None:
        conn.putheader("Host", host)
    for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
        conn.putheader(k, v)
    conn.putheader("Content-Length", str(len(data or b"")))
    conn.endheaders(data)
    r = conn.getresponse()
    out = r.read()
    conn.close()
    try:
        out = json.loads(out)
    except ValueError:
        pass
    return r.status, out, {k.lower(): v for k, v in r.getheaders()}


def raw_request(server, data: bytes) -> bytes:
    """Send ``data`` as is and read until the server closes the connection."""
    with socket.create_connection(server, timeout=60) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def in_flight(server) -> int:
    return call(server, "/health", method="GET")[1]["in_flight"]


def wait_for(pred, what: str, deadline_s: float = 120.0) -> None:
    end = time.monotonic() + deadline_s
    while not pred():
        assert time.monotonic() < end, f"never: {what}"
        time.sleep(0.02)


# --------------------------------------------------------------------------- disconnects
def test_a_request_whose_client_hung_up_is_never_computed(server):
    """A client that gives up (closes its connection) while its request waits for the engine
    must not cost the engine its generation: every other client would wait behind it (16
    candidates of 256 tokens are seconds). Its KV cache would hold the abandoned prompt had it
    run, so the same prompt asked again afterwards would prefill nothing."""
    heavy = {"prompt": "import os\n", "n": 16, "max_tokens": 256, "temperature": 1.0, "seed": 1}
    busy: list = []
    threads = [threading.Thread(target=lambda: busy.append(call(server, "/complete", heavy)[0]))
               for _ in range(2)]
    for t in threads:
        t.start()
    wait_for(lambda: in_flight(server) == 2, "two heavy requests in flight")
    prompt = f"# {uuid.uuid4().hex}\nquokka_{uuid.uuid4().hex[:8]} = zebra_"
    body = json.dumps({"prompt": prompt, "max_tokens": 8}).encode()
    s = socket.create_connection(server, timeout=60)
    s.sendall(b"POST /complete HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    wait_for(lambda: in_flight(server) == 3, "the third request waiting for the engine")
    s.close()  # the client gives up
    wait_for(lambda: in_flight(server) <= 2, "the abandoned request dropped")
    status, d, _ = call(server, "/complete", {"prompt": prompt, "max_tokens": 1})
    for t in threads:
        t.join(300)
    assert busy == [200, 200]
    assert status == 200
    # computed afresh: nothing of it was in a KV cache (the abandoned request never ran)
    assert d["prefilled_tokens"] >= d["usage"]["prompt_tokens"] - 1, d


# --------------------------------------------------------------------------- bodies
@pytest.mark.parametrize("encoding, raw", [("gzip", b"this is not gzip"), ("deflate", b"nor deflate"),
                                           ("gzip", zlib.compress(b'{"prompt": "x"}')[:5])])
def test_a_body_that_does_not_decompress_is_400_not_500(server, encoding, raw):
    status, d, _ = call(server, "/v1/completions", raw=raw, headers={"Content-Encoding": encoding})
    assert status == 400, d
    assert encoding in d["error"]["message"] and d["error"]["type"] == "invalid_request_error"


def test_a_compressed_body_is_read(server):
    import gzip

    raw = gzip.compress(json.dumps({"prompt": "import os\nos.pa", "max_tokens": 1}).encode())
    status, d, _ = call(server, "/complete", raw=raw, headers={"Content-Encoding": "gzip"})
    assert status == 200 and d["choices"][0]["text"]


# --------------------------------------------------------------------------- DNS rebinding
@pytest.mark.parametrize("host", ["evil.example@localhost", "evil.example@127.0.0.1:8899",
                                  "localhost:8899@evil.example", "localhost.evil.example", "127.0.0.1.evil.example",
                                  "localhost:notaport", "[::1]x", ""])
def test_host_header_naming_another_host_is_refused(server, host):
    status, d, _ = call(server, "/health", method="GET", host=host)
    assert status == 403 and d["error"]["type"] == "forbidden", (host, d)


def test_absolute_form_target_does_not_override_the_host_header(server):
    """``GET http://localhost/health`` with ``Host: evil.example``: the Host header is what a
    rebound browser page sends, and the one checked."""
    status, d, _ = call(server, "http://localhost/health", method="GET", host="evil.example")
    assert status == 403, d


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8899", "127.0.0.1:1", "[::1]:8899", "[::1]"])
def test_loopback_host_headers_are_served(server, host):
    assert call(server, "/health", method="GET", host=host)[0] == 200


def test_http_1_0_without_host_is_served(server):
    out = raw_request(server, b"GET /health HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.0 200") or out.startswith(b"HTTP/1.1 200"), out[:200]


# --------------------------------------------------------------------------- origins
@pytest.mark.parametrize("origin", ["http://localhost:5173", "http://127.0.0.1"])
def test_allowed_origins_match_as_browsers_write_them(server, origin):
    """``--allow-origin HTTP://LocalHost:5173/`` and ``http://127.0.0.1:80`` name the origins a
    browser sends as ``http://localhost:5173`` and ``http://127.0.0.1``."""
    status, d, h = call(server, "/complete", {"prompt": "x = ", "max_tokens": 1}, headers={"Origin": origin})
    assert status == 200, d
    assert h["access-control-allow-origin"] == origin  # echoed as sent: browsers compare exactly


@pytest.mark.parametrize("origin", ["null", "http://localhost:5174", "https://localhost:5173", "http://127.0.0.1:8080",
                                    "http://localhost.evil.example:5173", "file://"])
def test_other_origins_are_still_refused(server, origin):
    status, d, h = call(server, "/complete", {"prompt": "x = ", "max_tokens": 1}, headers={"Origin": origin})
    assert status == 403, (origin, d)
    assert "access-control-allow-origin" not in h


def test_preflight_allows_the_headers_an_openai_client_sends(server):
    """The OpenAI JavaScript client sends ``Authorization`` and ``x-stainless-*`` headers: a
    preflight from an allowed origin must allow the headers it asks for."""
    asked = "authorization, content-type, x-stainless-os, x-laya-client"
    status, _, h = call(server, "/v1/completions", method="OPTIONS", headers={
        "Origin": "http://localhost:5173", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": asked})
    assert status == 204
    allowed = {x.strip().lower() for x in h["access-control-allow-headers"].split(",")}
    assert allowed >= {x.strip() for x in asked.split(",")}
    assert "POST" in h["access-control-allow-methods"]
    assert h["access-control-allow-origin"] == "http://localhost:5173"


@pytest.mark.parametrize("path", ["/v1/models", "/health"])
def test_preflight_of_the_get_routes(server, path):
    status, _, h = call(server, path, method="OPTIONS", headers={
        "Origin": "http://localhost:5173", "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization"})
    assert status == 204
    assert "GET" in h["access-control-allow-methods"]
    assert "authorization" in h["access-control-allow-headers"].lower()
    status, _, h = call(server, path, method="OPTIONS", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    assert status == 403 and "access-control-allow-origin" not in h


# --------------------------------------------------------------------------- Expect: 100-continue
def _first_status_line(server, headers: bytes) -> bytes:
    with socket.create_connection(server, timeout=60) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\n" + headers + b"Expect: 100-continue\r\n\r\n")
        out = b""
        while b"\r\n" not in out and (chunk := s.recv(4096)):
            out += chunk
    return out.split(b"\r\n", 1)[0]


@pytest.mark.parametrize("headers, status", [
    (b"Host: localhost\r\nContent-Length: 50000000\r\n", b"413"),  # curl would upload 50 MB first
    (b"Host: evil.example\r\nContent-Length: 20\r\n", b"403"),
    (b"Host: localhost\r\nOrigin: https://evil.example\r\nContent-Length: 20\r\n", b"403"),
])
def test_expect_100_continue_is_refused_before_the_body_is_sent(server, headers, status):
    line = _first_status_line(server, headers)
    assert line.startswith(b"HTTP/1.1 " + status), line


def test_expect_100_continue_then_the_body(server):
    body = json.dumps({"prompt": "import os\nos.pa", "max_tokens": 1}).encode()
    with socket.create_connection(server, timeout=60) as s:
        s.sendall(b"POST /complete HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                  b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(body))
        out = b""
        while b"\r\n\r\n" not in out:
            out += s.recv(4096)
        assert out.startswith(b"HTTP/1.1 100"), out
        s.sendall(body)
        while chunk := s.recv(65536):
            out += chunk
    assert b"HTTP/1.1 200" in out and b'"choices"' in out


def test_an_unknown_expectation_is_a_json_417(server):
    """Errors are JSON: an ``Expect`` other than 100-continue got aiohttp's plain-text 417."""
    with socket.create_connection(server, timeout=60) as s:
        s.sendall(b"POST /complete HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                  b"Content-Length: 2\r\nExpect: teapot\r\n\r\n")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 417"), head
    assert json.loads(body)["error"]["code"] == 417


# --------------------------------------------------------------------------- half-closed, stalled, slow
def post(body: dict, path: bytes = b"/complete", close: bool = False) -> bytes:
    data = json.dumps(body).encode()
    return (b"POST " + path + b" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + (b"Connection: close\r\n" if close else b"") + b"Content-Length: %d\r\n\r\n" % len(data) + data)


def read_to_close(s: socket.socket, timeout: float = 60.0) -> bytes:
    """Everything the server sends until it closes; a server that keeps the connection open past
    ``timeout`` fails the test (``socket.timeout``) rather than hanging it."""
    s.settimeout(timeout)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def answers(out: bytes) -> list[tuple[int, dict]]:
    """The final answers (status, JSON body) in a raw byte stream of responses; 1xx skipped."""
    found = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status < 200:
            out = rest
            continue
        n = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")))
        found.append((status, json.loads(rest[:n])))
        out = rest[n:]
    return found


def test_a_half_request_then_end_of_input_is_closed(server):
    with socket.create_connection(server, timeout=60) as s:
        s.sendall(b"POST /complete HTTP/1.1\r\nHost: local")
        s.shutdown(socket.SHUT_WR)
        assert read_to_close(s, 10) == b""


def test_a_stalled_body_is_a_408_after_the_read_timeout(server):
    """A Content-Length above what the client sends, and then silence: the handler (and its
    connection) waited for the rest forever."""
    with socket.create_connection(server, timeout=60) as s:
        s.sendall(b"POST /complete HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
        s.settimeout(READ_TIMEOUT + 20)
        out = s.recv(65536)
        # then it is closed after laya_serve.app.LINGER_S (2 s), not aiohttp's default 10 s
        assert read_to_close(s, 7.0) == b""
    [(status, d)] = answers(out)
    assert status == 408 and d["error"]["code"] == 408, d
    wait_for(lambda: in_flight(server) == 0, "the stalled request let go", 10)


def test_a_client_gone_mid_generation_frees_the_engine(server):
    """A client that closes its socket while its long generation runs: its handler is cancelled
    (``handler_cancellation``) and the generation stops; the next client is answered at once
    rather than after the 16 x 256 tokens."""
    heavy = {"prompt": "import os\n", "n": 16, "max_tokens": 256, "temperature": 1.0, "seed": 3}
    s = socket.create_connection(server, timeout=60)
    s.sendall(post(heavy))
    wait_for(lambda: in_flight(server) == 1, "the heavy request in flight", 10)
    time.sleep(0.3)  # generating
    s.close()
    wait_for(lambda: in_flight(server) == 0, "the gone client's request dropped", 10)
    t = time.monotonic()
    assert call(server, "/complete", {"prompt": "x = ", "max_tokens": 1})[0] == 200
    assert time.monotonic() - t < 30  # a generous bound: the whole generation takes minutes here


def test_malformed_requests_are_one_warning_line_not_tracebacks():
    """A request aiohttp cannot parse (a negative ``Content-Length``, a header line over 8 KB) or a
    body it cannot decode (``Content-Encoding: gzip`` on text) is answered 400, but was logged at
    ERROR with a traceback each (five for these three): any local process could fill the log."""
    log: list[str] = []
    proc, url = start_server(log=log)
    try:
        u = urlsplit(url)
        body = b'{"prompt": "x"}'
        for data in (b"POST /complete HTTP/1.1\r\nHost: localhost\r\nContent-Encoding: gzip\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body,
                     b"POST /complete HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n",
                     b"POST /complete HTTP/1.1\r\nHost: localhost\r\nX-A: " + b"a" * 9000 + b"\r\n\r\n"):
            assert b" 400 " in raw_request((u.hostname, u.port), data).split(b"\r\n", 1)[0]
        proc.terminate()
        proc.wait(30)
        proc.log_reader.join(30)
    finally:
        proc.kill()
        proc.wait()
    err = "".join(log)
    assert "Traceback" not in err and " ERROR " not in err, err
    assert err.count("client error") == 3, err
