"""A small stdio MCP server for tests, standard library only (it runs with the sandbox's python3).

Newline-delimited JSON-RPC: `initialize` (echoing the client's protocol version), `tools/list`
and `tools/call`. Its tools:

- `lookup(key)`: "ticket <key>: the greeting must say v2" (what an issue tracker would answer);
- `environment()`: its environment as JSON;
- `calls()`: the tools called so far, in order (the allowlist tests read it);
- `reach(target)`: tries `host:port` directly, and through `HTTPS_PROXY` when set, and says what happened;
- `sleep(seconds)`: answers after that long; `broken()`: answers a JSON-RPC error; `crash()`: exits;
- `delete_everything()`: what a repository would never want offered.
"""

import json
import os
import socket
import sys
import threading
import time
import urllib.parse

CALLS = []
TOOLS = {
    "lookup": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    "environment": {"type": "object", "properties": {}},
    "calls": {"type": "object", "properties": {}},
    "reach": {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]},
    "sleep": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    "broken": {"type": "object", "properties": {}},
    "crash": {"type": "object", "properties": {}},
    "delete_everything": {"type": "object", "properties": {}},
}


def reach(target):
    host, _, port = target.rpartition(":")
    said = []
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        said.append("direct: connected")
    except OSError as exc:
        said.append(f"direct: {exc}")
    proxy = os.environ.get("HTTPS_PROXY")
    if proxy:
        parts = urllib.parse.urlsplit(proxy)
        try:
            with socket.create_connection((parts.hostname, parts.port), timeout=5) as conn:
                conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
                said.append("proxy: " + conn.recv(200).decode(errors="replace").split("\r\n")[0])
        except OSError as exc:
            said.append(f"proxy: {exc}")
    else:
        said.append("proxy: none")
    return "; ".join(said)


def call(name, args):
    CALLS.append(name)
    if name == "lookup":
        return f"ticket {args['key']}: the greeting must say v2"
    if name == "environment":
        return json.dumps(dict(os.environ))
    if name == "calls":
        return json.dumps(CALLS)
    if name == "reach":
        return reach(args["target"])
    if name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        return "slept"
    if name == "broken":
        raise RuntimeError("the tracker is down")
    if name == "crash":
        os._exit(3)
    return "deleted everything"


def answer(message):
    method, ident = message.get("method"), message.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "test-tracker", "version": "1"},
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {"name": n, "description": f"The {n} tool.", "inputSchema": s} for n, s in TOOLS.items()
            ]
        }
    elif method == "tools/call":
        try:
            text = call(message["params"]["name"], message["params"].get("arguments") or {})
        except RuntimeError as exc:
            return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32000, "message": str(exc)}}
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    elif ident is None:
        return None  # a notification
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


WRITING = threading.Lock()


def serve(message):
    reply = answer(message)
    if reply is not None:
        with WRITING:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


for line in sys.stdin:
    if line.strip():
        message = json.loads(line)
        # Each call in its own thread, like a server that answers concurrently: a slow one holds up no other.
        threading.Thread(target=serve, args=(message,), daemon=True).start()
