"""An npm registry of our own on loopback, for corepack: pnpm and yarn stand-ins, over http or https.

Corepack downloads a package manager from the npm registry (`COREPACK_NPM_REGISTRY`): it reads
the package's metadata (`/<name>`, `/<name>/<version>`, `/<name>/latest`), fetches the tarball
and checks its sha512 integrity. The managers served here are stand-ins (tests never reach the
network): a small Node program per manager that records its install and runs package.json's
scripts with `sh`, as pnpm and yarn do, each script finding `node_modules/.bin` first on PATH.

`tls=True` serves https with a certificate of a CA made for the test (`ca_file`): a network that
inspects TLS, whose CA Node trusts only through `NODE_EXTRA_CA_CERTS`.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import io
import ipaddress
import json
import ssl
import tarfile
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MANAGER = """\
#!/usr/bin/env node
"use strict";
// A stand-in for NAME VERSION (Plan Cascade's tests): installs nothing, runs package.json's scripts.
const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const [first, ...rest] = process.argv.slice(2);
if (first === "--version" || first === "-v") {
  console.log("VERSION");
  process.exit(0);
}
if (first === "install") {
  fs.mkdirSync("node_modules/.bin", { recursive: true });
  fs.writeFileSync("node_modules/.installed", `NAME VERSION install ${rest.join(" ")}\\n`);
  console.log(`NAME VERSION: install ${rest.join(" ")}`);
  process.exit(0);
}
const script = first === "run" ? rest[0] : first;
const scripts = JSON.parse(fs.readFileSync("package.json", "utf8")).scripts || {};
if (typeof scripts[script] !== "string") {
  console.error(`NAME VERSION: no script ${script}`);
  process.exit(1);
}
const env = { ...process.env, PATH: path.resolve("node_modules/.bin") + ":" + process.env.PATH };
const done = spawnSync("sh", ["-c", scripts[script]], { stdio: "inherit", env });
process.exit(done.status === null ? 1 : done.status);
"""
BINS = {
    "pnpm": {"pnpm": "bin/pnpm.cjs", "pnpx": "bin/pnpx.cjs"},
    "yarn": {"yarn": "bin/yarn.js", "yarnpkg": "bin/yarn.js"},
}
"""Where corepack looks for each manager's programs in its tarball (its own table of them)."""


def manager_tarball(name: str, version: str) -> bytes:
    """The npm tarball of the stand-in for `name` `version`."""
    program = MANAGER.replace("NAME", name).replace("VERSION", version).encode()
    files = {
        "package/package.json": json.dumps({"name": name, "version": version, "bin": BINS[name]}).encode()
    }
    for bin_path in set(BINS[name].values()):
        files[f"package/{bin_path}"] = program
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def make_ca(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA (its certificate in `folder/ca.pem`) and a server context for 127.0.0.1 signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Inspecting proxy CA (tests)")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(*[False] * 5, True, True, False, False), critical=True
        )  # cert and CRL sign
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    ca_file = folder / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = folder / "server.pem"
    chain.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    return ca_file, context


class NpmRegistry:
    """Serves the stand-ins' metadata and tarballs; counts tarball downloads."""

    def __init__(self, managers: dict[str, str]) -> None:
        self.tarballs = {
            name: (version, manager_tarball(name, version)) for name, version in managers.items()
        }
        self.downloads: Counter[str] = Counter()
        self.url = ""
        self.ca_file: Path | None = None

    def version_doc(self, name: str) -> dict[str, object]:
        version, data = self.tarballs[name]
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
        dist = {
            "tarball": f"{self.url}/{name}/-/{name}-{version}.tgz",
            "integrity": integrity,
            "shasum": hashlib.sha1(data).hexdigest(),  # noqa: S324 - npm's field
            "signatures": [],
        }
        return {"name": name, "version": version, "bin": BINS[name], "dist": dist}

    def answer(self, path: str) -> tuple[bytes, str] | None:
        parts = [p for p in path.split("?")[0].split("/") if p]
        if not parts or parts[0] not in self.tarballs:
            return None
        name = parts[0]
        version, data = self.tarballs[name]
        if len(parts) == 1:
            doc = {
                "name": name,
                "dist-tags": {"latest": version},
                "versions": {version: self.version_doc(name)},
            }
            return json.dumps(doc).encode(), "application/json"
        if len(parts) == 2 and parts[1] in (version, "latest"):
            return json.dumps(self.version_doc(name)).encode(), "application/json"
        if len(parts) == 3 and parts[1] == "-" and parts[2] == f"{name}-{version}.tgz":
            self.downloads[name] += 1
            return data, "application/octet-stream"
        return None

    @contextmanager
    def serving(self, *, tls_folder: Path | None = None) -> Iterator[NpmRegistry]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                found = registry.answer(self.path)
                if found is None:
                    self.send_error(404)
                    return
                body, kind = found
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls_folder is not None:
            self.ca_file, context = make_ca(tls_folder)
            server.socket = context.wrap_socket(server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
