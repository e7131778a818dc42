"""What an SWE run over several languages adds to the one-language steps: each language's share of the
vocabulary, the checks made before any teacher pass (the teacher's tokenizer reads every language, the
work folder belongs to these languages, every language has sentences), and short sentences per language."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from staticsem.distillation.corpus.languages import apportion, base_language, share_vocabulary
from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences
from staticsem.errors import InputError
from staticsem.io.atomic import atomic_file

LANGUAGES_FILE = "languages.json"  # the languages a work folder's build is for
# a tokenizer reads a language when a sample of its corpus has at most 1 % unknown tokens and at most this
# many tokens a character: multilingual-e5-small 0.23-0.29 on Latin, Arabic, Vietnamese text and 0.55-0.67
# on Chinese, Japanese, Korean; all-MiniLM-L6-v2 (English WordPiece) 0.67-1.30 and 1.9-2.9 there
TOKENS_PER_CHAR = {"dense": 1.0, "spaced": 0.5}
DENSE = frozenset({"zh", "ja", "ko", "th", "lo", "km", "my", "bo", "dz"})
SAMPLE = 200  # sentences per language for the tokenizer check


def vocabulary_shares(settings: Any, sources: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Words each language gets of ``settings.vocab_size`` by ``settings.vocab_split`` (``corpus``:
    in proportion to the lines of its corpus files)."""
    sizes = {lang: 1 for lang in sources}
    if settings.vocab_split == "corpus":
        sizes = {lang: sum(_lines(source) for source in files) for lang, files in sources.items()}
    return share_vocabulary(settings.vocab_size, sizes, settings.vocab_split)


def _lines(source: str) -> int:
    """Lines of a corpus file (``.gz`` read through)."""
    path = Path(source)
    if not path.is_file():
        raise InputError(f"{source}: corpus file is missing")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return sum(1 for _ in handle)


def claim_work(folder: Path, languages: Sequence[str]) -> None:
    """Mark ``folder`` as the work of a build in ``languages``; refuse one made for other languages."""
    path = folder / LANGUAGES_FILE
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8")).get("languages")
        if before != list(languages):
            raise InputError(
                f"{folder} holds a build in {','.join(before or [])}, not {','.join(languages)}: give "
                "another --out or --work-dir (or delete that folder to start afresh)"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps({"languages": list(languages)}), encoding="utf-8")


def check_coverage(tokenizer: Tokenizer, samples: Mapping[str, Sequence[str]], teacher: str) -> None:
    """Raise ``InputError`` when ``tokenizer`` (the teacher's) does not read one of the languages: too many
    unknown tokens, or too many tokens a character, in a sample of its sentences."""
    tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy without padding or truncation
    tokenizer.no_padding()
    tokenizer.no_truncation()
    unknown_token = getattr(tokenizer.model, "unk_token", None)
    unknown = tokenizer.token_to_id(unknown_token) if unknown_token else None
    for lang, sentences in samples.items():
        encoded = tokenizer.encode_batch(list(sentences), add_special_tokens=False)
        tokens = sum(len(e.ids) for e in encoded)
        chars = sum(len(s) for s in sentences)
        unknowns = sum(e.ids.count(unknown) for e in encoded) if unknown is not None else 0
        limit = TOKENS_PER_CHAR["dense" if base_language(lang) in DENSE else "spaced"]
        if tokens and (unknowns > 0.01 * tokens or tokens > limit * chars):
            raise InputError(
                f"teacher {teacher!r} has no multilingual tokenizer: it reads {lang} as {tokens / chars:.2f} "
                f"tokens a character, {100 * unknowns / tokens:.1f} % unknown (at most {limit} and 1 %)"
            )


def corpus_sample(sources: Sequence[str], options: CorpusOptions, count: int = SAMPLE) -> list[str]:
    """The first ``count`` sentences of ``sources`` within ``options``."""
    return list(itertools.islice(iter_sentences(sources, options), count))


def short_counts(total: int, chosen: Mapping[str, int]) -> dict[str, int]:
    """``total`` short sentences shared by the languages in proportion to their ``chosen`` sentences."""
    return apportion(total, {lang: float(n) for lang, n in chosen.items()})
