"""Language tags of corpora (``de=FILE``): the ISO 639-1 check, scripts written without spaces, and how a
vocabulary budget is shared across languages."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from staticsem.errors import InputError

# ISO 639-1, the two-letter codes (184)
ISO_639_1 = frozenset(
    """aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv
    dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig
    ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh
    mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru
    rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug
    uk ur uz ve vi vo wa wo xh yi yo za zh zu""".split()  # noqa: SIM905
)
# languages whose text runs words together: their words are the teacher's subword pieces (``subword``)
SPACELESS = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "dz"})
SPLITS = ("equal", "corpus")
_SUBTAG = re.compile(r"[-_][A-Za-z0-9]+$")


def base_language(tag: str) -> str:
    """The ISO 639-1 code of a tag (``pt-BR`` → ``pt``)."""
    return _SUBTAG.sub("", tag).lower()


def check_languages(tags: Sequence[str]) -> None:
    """Raise ``InputError`` for a tag that is not an ISO 639-1 code (with an optional region or script)."""
    for tag in tags:
        if base_language(tag) not in ISO_639_1:
            raise InputError(
                f"corpus tag {tag!r} is not a language code (ISO 639-1, e.g. de, zh or pt-BR: LANG=FILE)"
            )


def needs_subword(tags: Sequence[str]) -> bool:
    """Whether one of the languages ``tags`` is written without spaces between words."""
    return any(base_language(tag) in SPACELESS for tag in tags)


def apportion(total: int, weights: Mapping[str, float]) -> dict[str, int]:
    """``total`` split in proportion to ``weights`` (largest remainders: the parts add up to ``total``)."""
    if not sum(weights.values()):
        weights = dict.fromkeys(weights, 1.0)
    whole = sum(weights.values())
    exact = {key: total * weight / whole for key, weight in weights.items()}
    parts = {key: int(value) for key, value in exact.items()}
    order = list(exact)
    by_remainder = sorted(order, key=lambda key: (parts[key] - exact[key], order.index(key)))
    for key in by_remainder[: total - sum(parts.values())]:
        parts[key] += 1
    return parts


def share_vocabulary(total: int, sizes: Mapping[str, int], split: str) -> dict[str, int]:
    """Words each language gets of ``total``: the same count (``equal``), or in proportion to its corpus
    ``sizes`` (``corpus``, lines); each at least 1, together ``total``."""
    if split not in SPLITS:
        raise InputError(f"--vocab-split must be one of {', '.join(SPLITS)}, got {split!r}")
    if total < len(sizes):
        raise InputError(f"--vocab-size {total} leaves a language no word ({len(sizes)} languages)")
    weights = {lang: 1.0 if split == "equal" else float(max(size, 1)) for lang, size in sizes.items()}
    shares = apportion(total, weights)
    for lang in [lang for lang, share in shares.items() if share == 0]:  # each language at least one word
        shares[max(shares, key=shares.__getitem__)] -= 1
        shares[lang] = 1
    return shares


def hand_over(
    parts: Mapping[str, int],
    usable: Mapping[str, int],
    weights: Mapping[str, float],
    first: str | None = None,
) -> dict[str, int]:
    """``parts`` capped at what each can use (``usable``); what that leaves goes to the others up to their
    ``usable``: to ``first`` first (where given), then in proportion to ``weights`` (largest remainders),
    round after round, until none is left or none has room. The parts never add up to more than before."""
    kept = {key: min(part, usable[key]) for key, part in parts.items()}
    spare = sum(parts.values()) - sum(kept.values())
    if first is not None and first in kept and spare:
        moved = min(spare, usable[first] - kept[first])
        kept[first] += moved
        spare -= moved
    while spare:
        open_ = {key: weights[key] for key in kept if usable[key] > kept[key] and weights[key] > 0}
        if not open_:
            break
        moved = 0
        for key, given in apportion(spare, open_).items():
            taken = min(given, usable[key] - kept[key])
            kept[key] += taken
            moved += taken
        if not moved:
            break
        spare -= moved
    return kept
