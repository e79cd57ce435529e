"""What the egress proxy costs an agent's model calls: requests/s through it beside direct, on loopback.

    .venv/bin/python bench/egress.py [--seconds 3] [--rounds 3] [--concurrency 8]

The path an external agent's model call takes from a server that is not root (as root the proxy
listens in the sandbox's own network namespace: no forwarder), all of it real: the client (the
agent) connects to the forwarder that runs inside its sandbox (`bot.network.forwarder`, here
started by the same shell line as there: perl's when the PATH has perl, else Python's;
`--forwarder python3` takes Python's; listening on a loopback port as on the sandbox's
`127.0.0.1:3128`), which relays to the proxy's Unix socket; the proxy (`EgressProxy`, in this
process's event loop as in the server's, with the agent's allowlist naming the "model API" by
address and port) checks the destination and connects to it. The model API is a small HTTP/1.1
server on loopback (its own process) answering each `POST /v1/messages` (2 KB of prompt) with 1
KB of JSON at once; the client is another process, `--concurrency` connections at a time.

Three ways a client calls, each timed through the proxy and directly:
- **tunnel, keep-alive** — what an https client does (Claude Code, Codex): one `CONNECT`, then
  every request through the tunnel;
- **tunnel per request** — a client that opens a new connection (and `CONNECT`) for each call;
- **plain http** — `POST http://…` through the proxy, one request per connection (a model
  served over http, e.g. Ollama); directly, a new connection per request too.

A real model call takes seconds; what matters is what the proxy adds per call (the p50
latencies) and that it is not the bottleneck. Each mode runs `--seconds` per round, the modes
alternating, `--rounds` rounds; the medians are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.network.forwarder import PYTHON, PYTHON_START, forwarder_command  # noqa: E402
from bot.network.proxy import EgressProxy  # noqa: E402
from bot.network.rules import Allowlist, parse_egress  # noqa: E402

PROMPT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]}).encode()
ANSWER = json.dumps({"content": [{"type": "text", "text": "y" * 1000}]}).encode()
MODES = ("tunnel keep-alive", "tunnel per request", "plain http")


# -- the model API (its own process) -----------------------------------------------------------
async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = _length(head)
            await reader.readexactly(length)
            close = b"connection: close" in head.lower()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(ANSWER)}\r\n".encode()
                + (b"Connection: close\r\n" if close else b"")
                + b"\r\n"
                + ANSWER
            )
            await writer.drain()
            if close:
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


async def serve_model(port_file: Path) -> None:
    server = await asyncio.start_server(_answer, "127.0.0.1", 0, backlog=1024)
    port_file.write_text(str(server.sockets[0].getsockname()[1]))
    async with server:
        await server.serve_forever()


# -- the client (its own process) --------------------------------------------------------------
async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> None:
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    await reader.readexactly(_length(head))


async def _worker(mode: str, target: tuple[int, int | None], deadline: float, times: list[float]) -> None:
    model, proxy = target
    port = proxy or model
    via = proxy is not None
    request_line = (
        f"POST http://127.0.0.1:{model}/v1/messages HTTP/1.1\r\n"
        if via and mode == "plain http"
        else "POST /v1/messages HTTP/1.1\r\n"
    )
    close = "" if mode == "tunnel keep-alive" else "Connection: close\r\n"
    request = (
        f"{request_line}Host: 127.0.0.1:{model}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(PROMPT)}\r\n{close}\r\n"
    ).encode() + PROMPT
    while time.monotonic() < deadline:
        started = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            if via and mode != "plain http":
                writer.write(f"CONNECT 127.0.0.1:{model} HTTP/1.1\r\n\r\n".encode())
                answer = await reader.readuntil(b"\r\n\r\n")
                assert answer.startswith(b"HTTP/1.1 200"), answer
            while True:
                await _call(reader, writer, request)
                times.append(time.monotonic() - started)
                started = time.monotonic()
                if mode != "tunnel keep-alive" or time.monotonic() >= deadline:
                    break
        finally:
            writer.close()


async def run_client(mode: str, model: int, proxy: int | None, seconds: float, concurrency: int) -> None:
    times: list[float] = []
    deadline = time.monotonic() + seconds
    began = time.monotonic()
    await asyncio.gather(*(_worker(mode, (model, proxy), deadline, times) for _ in range(concurrency)))
    took = time.monotonic() - began
    print(json.dumps({"rps": len(times) / took, "p50_ms": statistics.median(times) * 1000}))


# -- the bench ---------------------------------------------------------------------------------
def _child(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


async def measure(mode: str, model: int, proxy: int | None, args: argparse.Namespace) -> dict[str, float]:
    cmd = _child("--client", mode, str(model), str(proxy or 0), str(args.seconds), str(args.concurrency))
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=subprocess.PIPE)
    out, _ = await proc.communicate()
    assert proc.returncode == 0, out
    return json.loads(out)  # type: ignore[no-any-return]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-egress-"))
    port_file = work / "model.port"
    model_proc = subprocess.Popen(_child("--model", str(port_file)))
    forwarder = None
    try:
        while not port_file.exists() or not port_file.read_text():
            await asyncio.sleep(0.05)
        model = int(port_file.read_text())
        rules = Allowlist(
            parse_egress(f"127.0.0.1:{model}"), who="agent", setting="PLAN_CASCADE_AGENT_EGRESS"
        )
        async with EgressProxy(work / "proxy.sock", rules, bodies=True, idle_timeout=600) as proxy:
            port = _free_port()
            line = forwarder_command(work, port)
            if args.forwarder == "python3":
                sock = shlex.quote(str(work / "proxy.sock"))
                line = f"{PYTHON_START} -c {shlex.quote(PYTHON)} {sock} {port}"
            forwarder = subprocess.Popen(["/bin/bash", "-c", line])
            forwarder.wait(timeout=10)  # it forks and serves in the background
            results: dict[tuple[str, bool], list[dict[str, float]]] = {}
            for _ in range(args.rounds):
                for mode in MODES:
                    for via in (False, True):
                        found = await measure(mode, model, port if via else None, args)
                        results.setdefault((mode, via), []).append(found)
            assert proxy.blocked.total == 0, "the proxy refused none of the model calls"
        print(f"{args.concurrency} connections, {args.seconds:g} s per mode, median of {args.rounds} rounds")
        columns = f"{'direct req/s':>14}{'proxy req/s':>14}{'ratio':>8}{'p50 direct':>12}{'p50 proxy':>11}"
        print(f"{'mode':<22}{columns}")
        for mode in MODES:
            direct = [r["rps"] for r in results[(mode, False)]]
            routed = [r["rps"] for r in results[(mode, True)]]
            d_lat = statistics.median(r["p50_ms"] for r in results[(mode, False)])
            p_lat = statistics.median(r["p50_ms"] for r in results[(mode, True)])
            d, p = statistics.median(direct), statistics.median(routed)
            print(f"{mode:<22}{d:>14,.0f}{p:>14,.0f}{p / d:>8.0%}{d_lat:>10.2f}ms{p_lat:>9.2f}ms")
        return 0
    finally:
        model_proc.kill()
        _stop_forwarder(work / "proxy.sock")
        model_proc.wait()


def _stop_forwarder(sock: Path) -> None:
    """The forwarder detached itself (as in the sandbox, where it dies with the sandbox): find it
    by its command line, which names this run's own temporary folder, and stop it by its pid."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(sock).encode() in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGTERM)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--model"]:
        asyncio.run(serve_model(Path(sys.argv[2])))
    elif sys.argv[1:2] == ["--client"]:
        mode, model, proxy, seconds, concurrency = sys.argv[2:7]
        asyncio.run(run_client(mode, int(model), int(proxy) or None, float(seconds), int(concurrency)))
    else:
        parser = argparse.ArgumentParser(
            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        parser.add_argument("--seconds", type=float, default=3.0)
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--forwarder", choices=("line", "python3"), default="line")
        parser.add_argument("--concurrency", type=int, default=8)
        sys.exit(asyncio.run(main(parser.parse_args())))
    os._exit(0)
