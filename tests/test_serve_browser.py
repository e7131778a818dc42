"""The playground in a real browser: Debian's chromium driven by Playwright against a live server.

Skips where chromium is missing (scripts/setup.sh installs it where apt works). Set
STATICSEM_SCREENSHOT=path.png to keep a screenshot of the page after the checks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright
import pytest

import staticsem
from servers import Server, running
from staticsem.search import Index

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"no browser: {CHROMIUM} is missing (apt-get install chromium)"
)
SENTENCES = ["the cat sat on the mat", "a dog ran", "the king and the queen", "Paris france"]
DOCS = [
    {"id": "d1", "text": "the cat sat on the mat", "topic": "pets"},
    {"id": "d2", "text": "the king and the queen of france", "topic": "royals"},
    {"id": "d3", "text": "a happy dog ran to the house", "topic": "pets"},
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    yield context.new_page()
    context.close()


def open_playground(page, server: Server) -> list[str]:  # type: ignore[no-untyped-def]
    """Load the page; return the list that collects every URL it requests."""
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{server.url}/")
    playwright.expect(page.locator("#model-info")).to_contain_text("dims")
    return requested


def screenshot(page) -> None:  # type: ignore[no-untyped-def]
    target = os.environ.get("STATICSEM_SCREENSHOT")
    if target:
        page.screenshot(path=target, full_page=True)


def test_heat_map_and_neighbours(page, saved_model: Path) -> None:  # type: ignore[no-untyped-def]
    model = staticsem.load(saved_model)
    with running([str(saved_model)]) as server:
        requested = open_playground(page, server)
        page.fill("#sentences", "\n".join(SENTENCES))
        page.click("#compare")
        cells = page.locator("#heatmap .cell")
        playwright.expect(cells).to_have_count(len(SENTENCES) ** 2)
        scores = [float(s) for s in cells.evaluate_all("cells => cells.map(c => c.dataset.score)")]
        expected = model.encode(SENTENCES) @ model.encode(SENTENCES).T
        assert scores == pytest.approx(expected.ravel().tolist(), abs=1e-3)

        page.fill("#word", "king")
        page.press("#word", "Enter")
        items = page.locator("#neighbors li")
        playwright.expect(items).to_have_count(10)
        assert items.first.inner_text().startswith(model.most_similar("king", 1)[0][0])

        page.fill("#word", "zzzz")
        page.click("#lookup")
        playwright.expect(page.locator("#neighbors-error")).to_contain_text("not in the vocabulary")
        playwright.expect(page.locator("#search")).to_be_disabled()  # no index served
    assert requested and all(url.startswith(server.url) for url in requested)  # nothing from outside


def test_search_shows_hits(page, saved_model: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    index = Index.build(saved_model, DOCS, tmp_path / "index")
    index.close()
    with running([str(saved_model), "--index", str(tmp_path / "index")]) as server:
        open_playground(page, server)
        playwright.expect(page.locator("#search-hint")).to_contain_text("3 documents")
        page.fill("#query", "king queen")
        page.select_option("#mode", "bm25")
        page.click("#search")
        hits = page.locator("#hits li.hit")
        playwright.expect(hits.first).to_contain_text("the king and the queen of france")
        playwright.expect(hits.first).to_contain_text("topic: royals")
        page.fill("#sentences", "\n".join(SENTENCES))
        page.click("#compare")
        playwright.expect(page.locator("#heatmap .cell")).to_have_count(len(SENTENCES) ** 2)
        page.fill("#word", "queen")
        page.click("#lookup")
        playwright.expect(page.locator("#neighbors li")).to_have_count(10)
        screenshot(page)
