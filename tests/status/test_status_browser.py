"""The status page in a real headless Chromium against the real `plan-cascade serve` process.

The test writes the server's SQLite database as the server's own workers would, while the
page is open, and watches the page follow without reloading.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.plan.state import PlanState, PlanStatus, StoryStatus, new_plan, update_story
from bot.testing.server_process import running_server
from tests.status.browser import GitHubWeb, chromium, insert_rows, require_browser
from tests.status.seed import running_plan, three_story_prd, write_plan_sqlite
from tests.support import WEBHOOK_SECRET, rsa_private_key_pem

pytestmark = pytest.mark.e2e
TOKEN = "browser-status-token-0123456789"
HOSTILE_TITLE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> ping @octocat'


@dataclass
class Site:
    url: str
    db: Path
    web: GitHubWeb


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def _hostile_plan(now: datetime) -> PlanState:
    """A plan whose issue title is a script, a broken image and a mention."""
    return new_plan(
        repo="octo-org/web", issue=3, prd=three_story_prd(HOSTILE_TITLE), at=now - timedelta(minutes=5)
    )


def _seed(site: Site, now: datetime) -> PlanState:
    """A running plan (whose PR link leads to the loopback GitHub), and a realistic neighbourhood."""
    plan = running_plan("octo-org/shop", 12, title="Greetings for every customer", at=now)
    batch = plan.batches[0].model_copy(update={"pr_url": f"{site.web.url}/octo-org/shop/pull/7"})
    plan = plan.model_copy(update={"batches": [batch, *plan.batches[1:]]})
    write_plan_sqlite(str(site.db), plan)
    write_plan_sqlite(str(site.db), _hostile_plan(now))
    done = running_plan("acme/api", 41, title="Paginate the orders endpoint", at=now - timedelta(hours=3))
    for sid in done.stories:
        done = update_story(done, sid, status=StoryStatus.PASSED, attempts=1, cost_usd=0.61)
    write_plan_sqlite(str(site.db), done.model_copy(update={"status": PlanStatus.COMPLETED}))
    job = {
        "kind": "webhook", "payload": "{}", "body": None, "max_attempts": 5, "locked_by": None,
        "lease_until": None, "created_at": _iso(now - timedelta(minutes=9)), "updated_at": _iso(now),
    }  # fmt: skip
    insert_rows(site.db, "deliveries", [
        {"id": f"d-{n}", "event": "issues", "action": "labeled", "target": "octo-org/shop#12",
         "outcome": "accepted", "received_at": _iso(now - timedelta(minutes=n))}
        for n in range(1, 4)
    ])  # fmt: skip
    insert_rows(site.db, "jobs", [
        {**job, "group_key": "acme/api#40", "status": "dead", "attempts": 5, "delivery_id": "d-3",
         "run_after": _iso(now), "last_error": "GitHubError: 502 Bad Gateway from GitHub"},
        {**job, "group_key": "octo-org/web#3", "status": "queued", "attempts": 0, "delivery_id": None,
         "run_after": _iso(now), "last_error": None, "kind": "poll_approvals"},
    ])  # fmt: skip
    return plan


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    require_browser()
    with GitHubWeb() as web:
        env = {"PLAN_CASCADE_STATUS_TOKEN": TOKEN}
        with running_server(
            tmp_path,
            api_url=f"{web.url}/api/v3",
            webhook_secret=WEBHOOK_SECRET,
            private_key_pem=rsa_private_key_pem(),
            extra_env=env,
            serve_args=["--no-workers"],
        ) as (url, _proc):
            yield Site(url, tmp_path / "data" / "plan-cascade.db", web)


def _wait(driver: Any, predicate: Any, timeout: float = 15) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: predicate(d))


def _sign_in(driver: Any, site: Site, token: str = TOKEN, path: str = "/status") -> None:
    from selenium.webdriver.common.by import By

    driver.get(site.url + path)
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "sign-in").click()
    # The form's answer has come (signed in, or refused): a `get` now would not cut it off.
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#content, #login-error"))


def _viewport(driver: Any, width: int, height: int, *, mobile: bool = False) -> None:
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def _fresh(read: Any) -> Any:
    """`read()` again when the page swapped the element out between finding and reading it."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(20):
        try:
            return read()
        except StaleElementReferenceException:
            continue
    return read()


def _text(driver: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    def read() -> str:
        found = driver.find_elements(By.CSS_SELECTOR, css)
        return str(found[0].text) if found else ""

    return str(_fresh(read))


def _next_swap(driver: Any) -> None:
    """Wait until the live refresh has put a new copy of the page's content in place."""
    driver.execute_script("window.__content = document.getElementById('content')")
    swapped = "return document.getElementById('content') !== window.__content"
    _wait(driver, lambda d: d.execute_script(swapped))


def test_signed_in_the_page_follows_a_story_from_running_to_passed_without_reloading(site: Site) -> None:
    now = datetime.now(UTC)
    plan = _seed(site, now)
    with chromium() as driver:
        _sign_in(driver, site)
        row = 'tr[data-plan="octo-org/shop#12"]'
        _wait(driver, lambda d: "Greetings for every customer" in _text(d, row))
        assert "1/3 passed" in _text(driver, row) and "1 running" in _text(driver, row)
        _viewport(driver, 1280, 900)
        shot = os.environ.get("STATUS_PAGE_SCREENSHOT") or str(site.db.parent / "status-page.png")
        driver.save_screenshot(shot)
        _viewport(driver, 390, 844, mobile=True)  # a phone: the page itself never scrolls sideways
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")

        driver.get(site.url + "/status/plans/octo-org/shop/12")
        story = 'tr[data-story="STORY-002"] [data-field="status"]'
        assert _text(driver, story) == "running"
        driver.execute_script("window.__sameDocument = 'still here'")
        passed = update_story(plan, "STORY-002", status=StoryStatus.PASSED, attempts=1, cost_usd=0.3)
        write_plan_sqlite(str(site.db), passed.model_copy(update={"version": plan.version + 1}))
        _wait(driver, lambda d: _text(d, story) == "passed")
        assert driver.execute_script("return window.__sameDocument") == "still here", "the page reloaded"
        assert "updated" in _text(driver, "#live")


def test_a_plan_page_links_its_pull_request_on_github(site: Site) -> None:
    from selenium.webdriver.common.by import By

    _seed(site, datetime.now(UTC))
    with chromium() as driver:
        _sign_in(driver, site)
        title = 'tr[data-plan="octo-org/shop#12"] a.title'
        _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, title))
        _fresh(lambda: driver.find_element(By.CSS_SELECTOR, title).click())
        _wait(driver, lambda d: d.current_url.endswith("/status/plans/octo-org/shop/12"))
        assert _text(driver, "#plan-title") == "Greetings for every customer"
        checks = 'tr[data-story="STORY-001"] a.check'
        href = _fresh(lambda: driver.find_element(By.CSS_SELECTOR, checks).get_attribute("href"))
        assert href == f"{site.web.url}/octo-org/shop/runs/9001"
        _fresh(lambda: driver.find_element(By.CSS_SELECTOR, "a.pr[data-pr='7']").click())
        _wait(driver, lambda d: _text(d, "#where") == "/octo-org/shop/pull/7")
    (headers,) = [h for path, h in site.web.requests if path == "/octo-org/shop/pull/7"]
    assert "referer" not in headers, "the status page's address must not leak to GitHub"


def test_a_wrong_or_missing_token_sees_nothing(site: Site) -> None:
    _seed(site, datetime.now(UTC))
    for path in ("/status", "/status.json", "/status/plans/octo-org/shop/12"):
        for headers in ({}, {"authorization": "Bearer not-the-token-0123456789"}):
            resp = httpx.get(site.url + path, headers=headers, timeout=10)
            assert resp.status_code == 401, (path, headers)
            assert "Greetings" not in resp.text and "octo-org/web" not in resp.text
    with chromium() as driver:
        _sign_in(driver, site, token="not-the-token-0123456789")
        _wait(driver, lambda d: _text(d, "#login-error"))
        body = _text(driver, "body")
        assert "Greetings" not in body and "octo-org" not in body and "$" not in body
        driver.get(site.url + "/status.json")
        assert json.loads(_text(driver, "body")) == {
            "message": "sign in: send Authorization: Bearer <PLAN_CASCADE_STATUS_TOKEN>"
        }
        assert driver.get_cookies() == []


def test_an_issue_title_with_a_script_and_mentions_renders_as_text(site: Site) -> None:
    from selenium.webdriver.common.by import By

    now = datetime.now(UTC)
    _seed(site, now)
    with chromium() as driver:
        _sign_in(driver, site)
        row = 'tr[data-plan="octo-org/web#3"] a.title'
        _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, row))
        assert _text(driver, row) == HOSTILE_TITLE
        driver.get(site.url + "/status/plans/octo-org/web/3")
        assert _text(driver, "#plan-title") == HOSTILE_TITLE

        def scripts() -> list[Any]:
            return list(
                driver.find_element(By.ID, "plan-title").find_elements(By.CSS_SELECTOR, "script, img")
            )

        assert _fresh(scripts) == []
        assert driver.execute_script("return window.__pwned === undefined")
        hostile = _hostile_plan(now)
        running = update_story(hostile, "STORY-001", status=StoryStatus.RUNNING, attempts=1)
        write_plan_sqlite(str(site.db), running.model_copy(update={"version": hostile.version + 1}))
        _next_swap(driver)  # the plan changed: the page swaps in a new copy, and it is text too
        assert _text(driver, 'tr[data-story="STORY-001"] [data-field="status"]') == "running"
        assert _text(driver, "#plan-title") == HOSTILE_TITLE
        assert driver.execute_script("return window.__pwned === undefined")
        assert _fresh(scripts) == []


def test_a_refresh_that_changes_nothing_leaves_the_page_as_it_is(site: Site) -> None:
    # Last active three days and a half hour ago: "3 d 0 h ago" reads the same for half an hour.
    at = datetime.now(UTC) - timedelta(days=3, minutes=30)
    write_plan_sqlite(str(site.db), running_plan("octo-org/quiet", 5, title="Nothing moves", at=at))
    with chromium() as driver:
        _sign_in(driver, site)
        driver.get(site.url + "/status/plans/octo-org/quiet/5")
        assert _text(driver, 'tr[data-story="STORY-002"] [data-field="status"]') == "running"
        before = driver.execute_script(
            "window.__content = document.getElementById('content'); return window.__content.innerHTML"
        )
        driver.execute_script("document.getElementById('live').textContent = 'live'")
        checked = "return document.getElementById('live').getAttribute('data-checked')"
        _wait(driver, lambda d: d.execute_script(checked))  # a refresh answered, with the same plan
        assert _text(driver, "#live") == "live", "an unchanged refresh was announced as an update"
        same = "return document.getElementById('content') === window.__content"
        if not driver.execute_script(same):
            after = driver.execute_script("return document.getElementById('content').innerHTML")
            changed = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            pytest.fail("an unchanged answer replaced the page's content:\n" + "\n".join(changed))
