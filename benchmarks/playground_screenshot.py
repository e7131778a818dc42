"""A screenshot of the playground in Debian's chromium (Playwright), with a real model and index.

Serves ``--model`` (default: the 30k × 256 token model of ``_common.build_staticsem``) with an index of
the first ``--documents`` Wikipedia sentences (built once into ``--models``), types sentences, looks up a
word's neighbours, searches the index, and saves the page to ``docs/assets/playground.png`` (the docs' Serving
page shows it).

    python benchmarks/playground_screenshot.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import _common as common

SENTENCES = [
    "A man is playing a guitar.",
    "Someone plays an acoustic guitar on stage.",
    "A woman is slicing an onion.",
    "The stock market fell sharply today.",
    "Shares dropped after the earnings report.",
]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
ARGS += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]


def build_index(model: Path, data: Path, dest: Path, count: int) -> Path:
    if (dest / "config.json").is_file():
        return dest
    from staticsem.search import Index

    sentences = common.read_sentences(data, count)
    docs = ({"id": f"enwiki-{i}", "text": s, "source": "enwiki 2015"} for i, s in enumerate(sentences))
    Index.build(model, docs, dest, show_progress=True).close()
    return dest


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--documents", type=int, default=20_000, help="Wikipedia sentences in the index")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--screenshot", type=Path, default=common.REPO / "docs/assets/playground.png")
    args = parser.parse_args()
    common.offline()
    model = args.model or common.build_staticsem(args.models, args.data)[1]
    index = build_index(
        model, args.data, args.models / f"index-{model.name}-{args.documents}", args.documents
    )
    cli = "from staticsem.cli import main; main()"
    command = [
        sys.executable,
        "-c",
        cli,
        "serve",
        str(model),
        "--index",
        str(index),
        "--port",
        str(args.port),
    ]
    server = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        time.sleep(4)
        drive(f"http://127.0.0.1:{args.port}/", args.screenshot)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    print(f"screenshot written to {args.screenshot}")


def drive(url: str, screenshot: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.goto(url)
        expect(page.locator("#model-info")).to_contain_text("dims")
        page.fill("#sentences", "\n".join(SENTENCES))
        page.click("#compare")
        expect(page.locator("#heatmap .cell")).to_have_count(len(SENTENCES) ** 2)
        page.fill("#word", "guitar")
        page.click("#lookup")
        expect(page.locator("#neighbors li")).to_have_count(10)
        page.fill("#query", "guitar music band")
        page.click("#search")
        expect(page.locator("#hits li.hit").first).to_be_visible()
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()


if __name__ == "__main__":
    main()
