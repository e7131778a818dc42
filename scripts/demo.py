"""What ``make demo`` runs: distil an SWE model from the packaged all-MiniLM-L6-v2 on the embedded dictionary
corpus (WordNet + GCIDE) with small settings, then show what it does: its facts, sentence similarities,
nearest words and an analogy. Without that corpus (no apt-get), the corpus-free token method is used.

Every ``staticsem`` command runs in this one process (``staticsem.cli.app``), shown as the line a shell
would take: ten separate commands would each import the package and load the model again.

    python scripts/demo.py [MODEL] [-- DISTILL OPTION...]   # MODEL: models/demo (or $MODEL)
"""

from __future__ import annotations

import logging
import os
import shlex
import sys

# The full recipe made small enough to build in about a minute on 2 cores, yet still find queen for
# man : king :: woman, happiness and joyful beside happy and brewing beside coffee (each setting's cost:
# docs/distillation.md, "What make demo runs").
SMALL = [
    *("--corpus", "embedded", "--vocab-size", "10000", "--sentences-per-word", "4"),
    *("--kd-short", "6000", "--kd-max-steps", "1000"),
]
PAIRS = [
    ("A man is playing a guitar.", "A person plays an instrument."),
    ("A man is playing a guitar.", "The stock market fell sharply today."),
    ("The cat sleeps on the sofa.", "A kitten naps on the couch."),
    ("The cat sleeps on the sofa.", "Parliament passed the new budget."),
]
WORDS = ("king", "paris", "coffee", "happy")
ANALOGY = ("man", "king", "woman")


def staticsem(*args: str) -> None:
    """Run ``staticsem ARGS`` here, after the line a shell would take; stop the demo on a failure."""
    from staticsem.cli import app

    print(f"$ staticsem {shlex.join(args)}", flush=True)
    code = app(list(args), prog_name="staticsem", standalone_mode=False)
    if code:
        sys.exit(code)


def build(model: str, options: list[str]) -> None:
    """Distil the demo's model with SWE and ``options``, and say what they shrank."""
    staticsem("distill", "swe", "--out", model, *options)
    print(shrunk(model, options))


def shrunk(model: str, options: list[str]) -> str:
    """What ``options`` changed from the full recipe (its defaults), read from the model's record."""
    import staticsem as library
    from staticsem.cli_info import changes_text, settings_changes

    metadata = library.load(model).metadata
    changed, chosen = settings_changes(metadata["method"], metadata["settings"])
    flags = {
        option.split("=")[0] for option in options if option.startswith("--")
    }  # --flag, --flag=, --no-flag
    given = [change for change in changed + chosen if flags & {f"--{change[0]}", f"--no-{change[0]}"}]
    return f"The demo shrank the full recipe (its defaults in brackets): {changes_text(given, True)}."


def show(model: str, words: tuple[str, ...] = WORDS, analogy: tuple[str, ...] = ANALOGY) -> None:
    """The model's facts, then what it does: similarities, neighbours, an analogy."""
    import staticsem as library

    staticsem("info", model)
    loaded = library.load(model)
    print("Sentence similarities (cosine of mean word vectors, as `staticsem similarity MODEL A B` gives):")
    for a, b in PAIRS:
        print(f"  {loaded.similarity(a, b):.4f}  {a:<38} {b:<38}")
    for word in words:
        staticsem("neighbors", model, word, "-k", "5")
    staticsem("analogy", model, *analogy, "-k", "3")


def main(argv: list[str]) -> None:
    """``demo.py [MODEL] [-- DISTILL OPTION...]`` (the options replace ``SMALL``)."""
    from staticsem.distillation.corpus.embedded import available

    options = argv[argv.index("--") + 1 :] if "--" in argv else []
    given = argv[: argv.index("--")] if "--" in argv else argv
    model = given[0] if given else os.environ.get("MODEL", "models/demo")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    if options or available():
        build(model, options or SMALL)
    else:
        print(
            "The embedded corpus (Debian's wordnet-base and dict-gcide) is not installed: the corpus-free "
            "token method instead."
        )
        staticsem("distill", "token", "--out", model)
    show(model)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main(sys.argv[1:])
