"""The built site opens from disk: headless Chromium loads site/index.html over file://, follows a
link to a tutorial, and finds pages with the search box, fetching nothing from the network.

Chromium is driven through the DevTools protocol over a pipe (`--remote-debugging-pipe`: JSON
messages ended by NUL on its file descriptors 3 and 4), so no port is opened."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} not installed (apt-get install chromium; .ci/run does)"),
]


class Page:
    """One Chromium tab, driven by DevTools commands."""

    def __init__(self, profile: Path) -> None:
        # bash, not sh: the pipes' descriptors may have two digits, which dash cannot redirect.
        to_chromium, self._in = os.pipe()
        self._out, from_chromium = os.pipe()
        command = (f"exec {CHROMIUM} --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                   "--disable-background-networking --disable-component-update --disable-sync "
                   f"--user-data-dir={profile} --remote-debugging-pipe about:blank 3<&{to_chromium} 4>&{from_chromium}")
        self.process = subprocess.Popen(["bash", "-c", command], pass_fds=(to_chromium, from_chromium),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chromium)
        os.close(from_chromium)
        self._buffer = b""
        self._id = 0
        self.events: list[dict] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Network.enable", session=self.session)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}, **({"sessionId": session} if session else {})}
        os.write(self._in, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._id:
                assert "error" not in reply, f"{method}: {reply['error']}"
                return reply["result"]
            self.events.append(reply)

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._out], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "Chromium did not answer within a minute"
            chunk = os.read(self._out, 1 << 16)
            assert chunk, "Chromium closed its pipe"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def run(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, self.session)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str):
        """The expression's value once it is truthy; polled, since pages load and search runs
        asynchronously (a minute at most: a slow machine is not a failure)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            value = self.run(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"{what}: not within a minute")

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, self.session)

    def requested(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        os.write(self._in, json.dumps({"id": 0, "method": "Browser.close", "params": {}}).encode() + b"\0")
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._in)
        os.close(self._out)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "--site-dir", str(out)], cwd=ROOT, check=True,
                   env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    return out


@pytest.fixture
def page(tmp_path):
    p = Page(tmp_path / "chromium-profile")
    yield p
    p.close()


LOADED = "document.readyState === 'complete' && document.querySelector('article h1')?.textContent"


def test_the_site_opens_from_disk_and_its_links_name_pages(site, page):
    page.open((site / "index.html").as_uri())
    assert page.wait_for(LOADED, "the home page").startswith("kraftlab")
    link = page.run("document.querySelector('article a[href*=\"first-scenario\"]').href")
    assert link == (site / "tutorials" / "first-scenario.html").as_uri()  # a file, not a folder
    page.run("document.querySelector('article a[href*=\"first-scenario\"]').click()")
    heading = page.wait_for(f"location.href.startsWith({json.dumps(link)}) && {LOADED}", "the tutorial after the click")
    assert heading.startswith("Your first scenario")
    offsite = [u for u in page.requested() if not u.startswith(("file:", "data:", "blob:", "about:"))]
    assert offsite == [], f"the site fetched from the network: {offsite}"


def test_search_works_from_disk(site, page):
    page.open((site / "tutorials" / "reading-a-run.html").as_uri())
    page.wait_for(LOADED, "the page")
    page.run("document.querySelector('input[data-md-component=search-query]').focus()")
    page.send("Input.insertText", {"text": "Eligible Leader Replicas"}, page.session)
    meta = page.wait_for("(m => m && /\\d+ matching/.test(m.textContent) && m.textContent.trim())"
                         "(document.querySelector('.md-search-result__meta'))", "search results")
    assert int(meta.split()[0]) > 0, meta
    found = page.run("[...document.querySelectorAll('.md-search-result__item a')].map(a => a.href)")
    assert found and all(u.startswith(site.as_uri() + "/") and ".html" in u for u in found), found
    offsite = [u for u in page.requested() if not u.startswith(("file:", "data:", "blob:", "about:"))]
    assert offsite == [], f"the site fetched from the network: {offsite}"
