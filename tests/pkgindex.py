"""A package index of our own on loopback (PEP 503 "simple" API) that counts its downloads.

Its wheels are built here: small packages from source text, and pure-Python distributions
repacked from this interpreter's site-packages (pytest and what it needs), so setup commands
install from a real index over HTTP without leaving the machine.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import re
import threading
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DROPPED_METADATA = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _write_wheel(out: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A wheel of `files` (archive path → bytes) with a fresh RECORD."""
    dist_info = next(p.split("/")[0] for p in files if p.split("/")[0].endswith(".dist-info"))
    wheel = out / f"{re.sub(r'[-.]+', '_', name)}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in sorted(files.items()):
            archive.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


def build_wheel(out: Path, name: str, version: str, modules: dict[str, str]) -> Path:
    """A pure-Python wheel of `modules` (path → source)."""
    dist_info = f"{re.sub(r'[-.]+', '_', name)}-{version}.dist-info"
    files = {path: text.encode() for path, text in modules.items()}
    files[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{dist_info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    return _write_wheel(out, name, version, files)


def repack_installed(out: Path, name: str) -> list[Path]:
    """Wheels of the installed pure-Python distribution `name` and what it requires here."""
    wheels: list[Path] = []
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = _normalise(todo.pop())
        if current in seen:
            continue
        seen.add(current)
        try:
            dist = importlib.metadata.distribution(current)
        except importlib.metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python: not installed, not needed
        files: dict[str, bytes] = {}
        for entry in dist.files or []:
            path = str(entry)
            if path.startswith("..") or "__pycache__" in path or path.endswith(".pyc"):
                continue
            if ".dist-info/" in path and path.split("/", 1)[1] in DROPPED_METADATA:
                continue
            files[path] = Path(str(entry.locate())).read_bytes()
        wheels.append(_write_wheel(out, dist.metadata["Name"], dist.version, files))
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                todo.append(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0])
    return wheels


class PackageIndex:
    """Serves `/simple/<project>/` and `/files/<wheel>` from a directory; counts file downloads."""

    def __init__(self, wheels: list[Path]) -> None:
        self.wheels = {w.name: w for w in wheels}
        self.downloads: Counter[str] = Counter()
        self.url = ""

    def project_of(self, wheel: str) -> str:
        return _normalise(wheel.split("-")[0])

    def metadata(self, wheel: str) -> bytes:
        with zipfile.ZipFile(self.wheels[wheel]) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            return archive.read(name)

    def page(self, project: str) -> bytes | None:
        links = []
        for name, path in sorted(self.wheels.items()):
            if self.project_of(name) != project:
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            # PEP 658, as PyPI: installers read the metadata without fetching the wheel.
            meta = f"sha256={hashlib.sha256(self.metadata(name)).hexdigest()}"
            links.append(
                f'<a href="/files/{name}#sha256={digest}" data-core-metadata="{meta}" '
                f'data-dist-info-metadata="{meta}">{name}</a>'
            )
        if not links:
            return None
        return ("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode()

    @contextmanager
    def serving(self) -> Iterator[PackageIndex]:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self.answer(head=True)

            def do_GET(self) -> None:
                self.answer(head=False)

            def answer(self, *, head: bool) -> None:
                parts = [p for p in self.path.split("?")[0].split("/") if p]
                body: bytes | None = None
                kind = "text/html"
                if len(parts) == 2 and parts[0] == "simple":
                    body = index.page(_normalise(parts[1]))
                elif len(parts) == 2 and parts[0] == "files" and parts[1].endswith(".whl.metadata"):
                    wheel = parts[1].removesuffix(".metadata")
                    if wheel in index.wheels:
                        body, kind = index.metadata(wheel), "text/plain"
                elif len(parts) == 2 and parts[0] == "files" and parts[1] in index.wheels:
                    body, kind = index.wheels[parts[1]].read_bytes(), "application/octet-stream"
                    if not head:
                        index.downloads[parts[1]] += 1
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                # As PyPI: files never change; project pages may (installers then ask again).
                cache = "max-age=365000000, immutable" if kind != "text/html" else "max-age=600"
                self.send_header("Cache-Control", cache)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


def downloads_of(index: PackageIndex, project: str) -> int:
    """How often any wheel of `project` was downloaded."""
    return sum(n for name, n in index.downloads.items() if index.project_of(name) == _normalise(project))
