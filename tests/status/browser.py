"""A real headless Chromium for the status page's tests, the real `plan-cascade serve` behind it,
and a stand-in for GitHub's web pages on loopback (links on the page lead there)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# Chromium may only resolve loopback: whatever it tries beyond this machine fails at once.
QUIET_FLAGS = (
    "--headless=new",
    "--no-sandbox",  # we run as root in CI; the page under test is our own
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
    "--window-size=1280,900",
)


def find_browser() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are installed and selenium imports, else None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None
    browser = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def require_browser() -> tuple[str, str]:
    """The browser and its driver; skipped where they are absent, but in CI (`CI` set) a failure."""
    found = find_browser()
    if found is None:
        message = "chromium, chromedriver or selenium is missing (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must run the browser tests")
        pytest.skip(message)
    return found


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium driven by selenium through Debian's chromedriver (no Selenium Manager)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = require_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in QUIET_FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()


class GitHubWeb:
    """GitHub's web pages on loopback: every path answers a page naming it; requests are kept."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                body = f"<!doctype html><title>GitHub {self.path}</title><h1 id='where'>{self.path}</h1>"
                data = body.encode()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> GitHubWeb:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def insert_rows(db_path: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """Rows written with the stdlib's sqlite3, as another process of the server would."""
    with sqlite3.connect(db_path, timeout=30) as conn:
        for row in rows:
            columns = ", ".join(row)
            marks = ", ".join(f":{k}" for k in row)
            conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", row)  # noqa: S608
