"""Scale-out on a local Ray cluster: the same models and encodings as one process, lost replicas, resume."""

from __future__ import annotations

import functools
import gzip
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from safetensors.numpy import load_file
from tokenizers import Tokenizer
from typer.testing import CliRunner

import staticsem
from fakes import (
    CountingTeacher,
    FakeTeacher,
    fake_replica,
    missing_teacher,
    passes,
    slow_first_split,
    write_corpus,
)
from staticsem.cli import app
from staticsem.distillation.corpus.sampling import count_words
from staticsem.distillation.methods.swe.pipeline import Pipeline, SWESettings
from staticsem.distillation.methods.x2static.run import X2StaticRun, X2StaticSettings
from staticsem.distillation.stages.extract import extract
from staticsem.distillation.stages.kd import KDSettings
from staticsem.distillation.stages.plans import plan_key, token_batches
from staticsem.errors import InputError
from staticsem.scale import connect, require_ray
from staticsem.scale.distill import RayScale
from staticsem.scale.encode import encode_files

SWE = {
    "vocab_size": 40,
    "min_count": 2,
    "sentences_per_word": 40,
    "batch_size": 8,
    "pca_sentences": 1000,
    "remove_top": 1,
    "dim": 6,
    "kd": KDSettings(batch_size=32, eval_every=10, max_steps=60, dev_size=100),
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A two-CPU Ray cluster for this module; workers import ``fakes`` from tests/."""
    path = os.pathsep.join([str(Path(__file__).parent), *filter(None, [os.environ.get("PYTHONPATH")])])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


@pytest.fixture(scope="module")
def reference(corpus: Path, subword_tokenizer: Tokenizer) -> Path:
    """The single-process SWE build (its work folder holds stage 1)."""
    out = corpus.parent / "single"
    Pipeline(_swe(corpus), out, teacher=FakeTeacher(subword_tokenizer), show_progress=False).run("float32")  # type: ignore[arg-type]
    return out


def _swe(corpus: Path) -> SWESettings:
    return SWESettings(corpus=(str(corpus),), **SWE)  # type: ignore[arg-type]


def _scale(tokenizer: Tokenizer, **teacher: object) -> RayScale:
    build = functools.partial(fake_replica, tokenizer, **teacher)
    return RayScale("auto", 2, build=build, shard_sentences=32, count_shard=300, show_progress=False)


def _swe_on_ray(
    corpus: Path, out: Path, scale: RayScale, tokenizer: Tokenizer, **options: object
) -> Pipeline:
    pipeline = Pipeline(
        _swe(corpus),
        out,
        teacher=FakeTeacher(tokenizer),  # type: ignore[arg-type]
        scale=scale,
        show_progress=False,
        **options,  # type: ignore[arg-type]
    )
    pipeline.run("float32")
    return pipeline


def assert_same_build(reference: Path, out: Path) -> None:
    """Same vocabulary, counts and sentences; stage 1, teacher targets and model within float rounding."""
    single, scaled = (p.parent / f".{p.name}.work" for p in (reference, out))
    for step in ("vocab", "select"):
        first, second = (json.loads((w / f"{step}.json").read_text()) for w in (single, scaled))
        assert (
            first["words"] == second["words"]
            if step == "vocab"
            else first["sentences"] == second["sentences"]
        )
    assert (
        json.loads((single / "vocab.json").read_text())["counts"]
        == json.loads((scaled / "vocab.json").read_text())["counts"]
    )
    one, two = staticsem.load(single / "stage1"), staticsem.load(scaled / "stage1")
    assert one.vocab == two.vocab
    np.testing.assert_allclose(one.vectors, two.vectors, rtol=1e-5, atol=1e-6)
    for key, tolerance in (("embeddings", 1e-6), ("token_means", 2e-3)):  # token means: float16
        targets = [load_file(str(w / "stage1.safetensors"))[key] for w in (single, scaled)]
        np.testing.assert_allclose(*targets, atol=tolerance)
    first_model, second_model = staticsem.load(reference), staticsem.load(out)
    assert first_model.vocab == second_model.vocab
    np.testing.assert_allclose(first_model.vectors, second_model.vectors, rtol=1e-4, atol=1e-5)


def test_swe_on_ray_equals_the_single_process_build(
    cluster: None, corpus: Path, reference: Path, subword_tokenizer: Tokenizer
) -> None:
    log = corpus.parent / "equal.log"
    with _scale(subword_tokenizer, log=log) as scale:
        pipeline = _swe_on_ray(corpus, corpus.parent / "ray", scale, subword_tokenizer)
    assert_same_build(reference, corpus.parent / "ray")
    starts, sentences = passes(log)
    # stage 1, the default short KD targets and their edited copies, all on the replicas
    records = pipeline.records
    counts = [records[step]["teacher_passes"] for step in ("extract", "targets", "edits")]
    assert min(counts) > 0 and starts == 2 and sentences == sum(counts)  # one start a replica
    assert not list(pipeline.work.folder.glob("*.shards"))  # shard files are gone once merged


def test_word_counts_add_up_in_stream_order(cluster: None) -> None:
    """Ties among the top words keep the stream's first-seen order, as ``count_words`` gives them."""
    sentences = [f"w{i % 7} w{(i * 3) % 11} Common" for i in range(400)]
    single, total = count_words(sentences, True, False)
    scale = RayScale("auto", 1, count_shard=7, show_progress=False)
    counts, scaled_total = scale.count_words(iter(sentences), True, False)
    assert (counts, scaled_total) == (single, total)
    assert counts.most_common() == single.most_common() and list(counts) == list(single)


def test_word_counts_are_merged_in_shard_order_when_a_later_shard_finishes_first(cluster: None) -> None:
    """The first shard sleeps (``slow_first_split``), so later shards are done before it: merged in
    completion order, "beta" would come before "alpha" among the tied counts."""
    others = [f"beta alpha w{i % 5}" if i % 2 else f"w{i % 5} gamma" for i in range(1, 60)]
    sentences = ["w_slow alpha", *others, "beta"]
    single, total = count_words(sentences, True, False, slow_first_split)
    assert single["alpha"] == single["beta"] and list(single)[:3] == ["w_slow", "alpha", "beta"]
    scale = RayScale("auto", 1, count_shard=5, show_progress=False)
    counts, scaled_total = scale.count_words(iter(sentences), True, False, slow_first_split)
    assert (counts, scaled_total) == (single, total)
    assert list(counts) == list(single) and counts.most_common() == single.most_common()


def test_x2static_on_ray_equals_the_single_process_build(
    cluster: None, corpus: Path, subword_tokenizer: Tokenizer
) -> None:
    settings = X2StaticSettings(
        corpus=(str(corpus),),
        vocab_size=40,
        min_count=2,
        teacher_batch=16,
        chunk_sentences=200,
        batch_size=64,
    )
    single = X2StaticRun(settings, corpus.parent / "x2-single", teacher=FakeTeacher(subword_tokenizer))  # type: ignore[arg-type]
    one = single.run("float32")
    with _scale(subword_tokenizer) as scale:
        two = X2StaticRun(
            settings,
            corpus.parent / "x2-ray",
            teacher=FakeTeacher(subword_tokenizer),  # type: ignore[arg-type]
            scale=scale,
            show_progress=False,
        ).run("float32")
    assert one.vocab == two.vocab and one.metadata["teacher_passes"] == two.metadata["teacher_passes"]
    np.testing.assert_allclose(one.vectors, two.vectors, rtol=1e-4, atol=1e-5)


def test_the_replicas_read_the_single_process_plan_under_a_token_budget(
    cluster: None, corpus: Path, subword_tokenizer: Tokenizer, tmp_path: Path
) -> None:
    """With a token budget (a GPU's), the batches the replicas read are the single process's (its plan:
    token counts cut at the budget, not ``batch_size`` sentences), the partial carries that plan's key, and
    the sums are the single process's."""
    sentences = corpus.read_text(encoding="utf-8").splitlines()[:300]
    vocab = ["the", "cat", "dog", "a", "tax", "law", "music", "song", "river", "of"]
    options: dict[str, Any] = {
        "lowercase": True,
        "batch_size": 16,
        "batch_tokens": 90,
        "show_progress": False,
    }
    teacher = CountingTeacher(subword_tokenizer)
    single = extract(teacher, sentences, vocab, **options)
    plan = token_batches(teacher.token_counts(sentences), 90)
    assert {len(b) for b in plan} != {16} and teacher.sentences == 300
    log, partial = tmp_path / "plan.log", tmp_path / "stage1.partial.safetensors"
    build = functools.partial(fake_replica, subword_tokenizer, log=log)
    with RayScale("auto", 1, build=build, shard_sentences=64, show_progress=False) as scale:
        scaled = scale.extract(teacher, sentences, vocab, checkpoint=partial, **options)
    sizes = [int(line) for line in log.read_text().split() if line != "start"]
    assert sorted(sizes) == sorted(len(b) for b in plan)
    assert load_file(str(partial))["plan"].tobytes().decode() == plan_key(plan)
    np.testing.assert_array_equal(scaled.counts, single.counts)
    np.testing.assert_allclose(scaled.sums, single.sums, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(scaled.embeddings, single.embeddings, atol=1e-6)


def test_a_replica_killed_mid_extraction_costs_only_its_shard(
    cluster: None, corpus: Path, reference: Path, subword_tokenizer: Tokenizer
) -> None:
    log, out = corpus.parent / "kill.log", corpus.parent / "killed"
    shards = corpus.parent / f".{out.name}.work"
    killed: list[float] = []

    def kill_when_the_first_shard_is_in(scale: RayScale) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(shards.glob("*.shards/chunk-*")):
            time.sleep(0.01)
        ray.kill(scale.replicas[0], no_restart=False)
        killed.append(time.monotonic())

    with _scale(subword_tokenizer, log=log, delay=0.03) as scale:
        watcher = threading.Thread(target=kill_when_the_first_shard_is_in, args=(scale,))
        watcher.start()
        pipeline = _swe_on_ray(corpus, out, scale, subword_tokenizer, save_every=1e9)
        finished = time.monotonic()
        watcher.join()
    assert killed and killed[0] < finished
    starts, sentences = passes(log)
    assert starts == 3  # the killed replica was restarted once
    assert sentences >= pipeline.records["extract"]["teacher_passes"]
    assert_same_build(reference, out)


def test_a_rerun_after_an_interrupt_reuses_the_finished_shards(
    cluster: None, corpus: Path, reference: Path, subword_tokenizer: Tokenizer
) -> None:
    out = corpus.parent / "resumed"
    with _scale(subword_tokenizer, fail_after=9, error=RuntimeError) as scale, pytest.raises(RuntimeError):
        _swe_on_ray(corpus, out, scale, subword_tokenizer, save_every=1e9)
    [folder] = (corpus.parent / f".{out.name}.work").glob("*.shards")
    finished = sum(len(load_file(str(p))["embeddings"]) for p in folder.glob("chunk-*.safetensors"))
    assert finished > 0
    log = corpus.parent / "resumed.log"
    with _scale(subword_tokenizer, log=log) as scale:
        pipeline = _swe_on_ray(corpus, out, scale, subword_tokenizer)
    total = sum(pipeline.records[step]["teacher_passes"] for step in ("extract", "targets", "edits"))
    assert passes(log)[1] == total - finished  # only the unfinished shards went through the teacher again
    assert_same_build(reference, out)


def test_clear_errors(cluster: None, monkeypatch: pytest.MonkeyPatch, subword_tokenizer: Tokenizer) -> None:
    with pytest.raises(InputError, match="cannot reach the Ray cluster at 127.0.0.1:9"):
        connect("127.0.0.1:9")
    with pytest.raises(InputError, match="Ray address must be"):
        connect("nowhere")
    with pytest.raises(InputError, match=r"cannot load the teacher .*ImportError: No module named 'gt_all"):
        RayScale("auto", 1, build=missing_teacher).pool()
    with pytest.raises(InputError, match="ray-workers must be positive"):
        RayScale("auto", 0)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InputError, match=r"pip install 'staticsem\[ray\]'"):
        require_ray()


LINES = ["The cat sat on the mat.", "", "un happy house", "Paris, France!", "zzz unknown"]
RECORDS = ["a dog ran", "the king and the queen", "ünïcode"]
WORDS_IN = ["cat", "dog", "king", "queen", "house", "man", "woman"]
LONG = [f"{WORDS_IN[i % 7]} {WORDS_IN[(i // 7) % 7]}" for i in range(8200)]  # two Parquet batches


@pytest.fixture()
def inputs(tmp_path: Path) -> Path:
    """Every input format, ids to number by line / row: text, gzip text, JSON lines (a blank line
    between records), gzip JSON lines, and Parquet (with a null text, and one file over a batch)."""
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("\n".join(LINES * 3) + "\n", encoding="utf-8")
    with gzip.open(folder / "d.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(reversed(LINES)) + "\n")
    records = [json.dumps({"text": t, "key": f"k{i}"}) for i, t in enumerate(RECORDS)]
    (folder / "sub" / "b.jsonl").write_text(
        records[0] + "\n\n" + "\n".join(records[1:]) + "\n", encoding="utf-8"
    )
    with gzip.open(folder / "sub" / "e.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(reversed(records)) + "\n")
    pq.write_table(
        pa.table({"text": ["a woman", "the man ran", None], "key": ["p1", "p2", "p3"]}), folder / "c.parquet"
    )
    pq.write_table(pa.table({"text": LONG}), folder / "f.parquet", row_group_size=3000)
    return folder


def expected_texts() -> dict[str, str]:
    """Each row's id (file:line or file:row, from 1) and text, written out from the inputs above."""
    rows = {f"a.txt:{n}": t for n, t in enumerate(LINES * 3, start=1)}
    rows |= {f"d.txt.gz:{n}": t for n, t in enumerate(reversed(LINES), start=1)}
    rows |= {"sub/b.jsonl:1": RECORDS[0], "sub/b.jsonl:3": RECORDS[1], "sub/b.jsonl:4": RECORDS[2]}
    rows |= {f"sub/e.jsonl.gz:{n}": t for n, t in enumerate(reversed(RECORDS), start=1)}
    rows |= {"c.parquet:1": "a woman", "c.parquet:2": "the man ran", "c.parquet:3": ""}
    return rows | {f"f.parquet:{n}": t for n, t in enumerate(LONG, start=1)}


def _rows(folder: Path) -> dict[str, np.ndarray]:
    table = pq.read_table(folder, columns=["id", "vector"])
    vectors = np.array(table.column("vector").to_pylist(), np.float32)
    return dict(zip(table.column("id").to_pylist(), vectors, strict=True))


def test_encode_on_ray_equals_the_single_process_encode(
    cluster: None, inputs: Path, saved_model: Path, tmp_path: Path
) -> None:
    pattern = str(inputs / "**" / "*.*")
    expected = expected_texts()
    assert encode_files(saved_model, pattern, tmp_path / "here", show_progress=False) == len(expected)
    result = CliRunner().invoke(
        app, ["encode", str(saved_model), "-i", pattern, "-o", str(tmp_path / "ray"), "--ray", "auto"]
    )
    assert result.exit_code == 0, result.output
    model = staticsem.load(saved_model)
    want = model.encode(list(expected.values()))
    assert len(set(map(bytes, want))) > 20  # neighbouring rows differ: an id one off would show
    for rows in (_rows(tmp_path / "here"), _rows(tmp_path / "ray")):
        assert sorted(rows) == sorted(expected)  # every format numbered from 1, by line or row
        np.testing.assert_array_equal(np.stack([rows[key] for key in expected]), want)
        assert not rows["a.txt:2"].any() and not rows["c.parquet:3"].any()  # empty text: a zero row
    encode_files(saved_model, str(inputs / "c.parquet"), tmp_path / "keyed", id_field="key", ray="auto")
    assert sorted(_rows(tmp_path / "keyed")) == ["p1", "p2", "p3"]


def test_encode_reports_bad_inputs(saved_model: Path, tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"text": "a cat"}\n{"body": "no text"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2: no string field 'text'"):
        encode_files(saved_model, str(tmp_path / "bad.jsonl"), tmp_path / "out", show_progress=False)
    assert not (tmp_path / "out").exists()
    with pytest.raises(InputError, match="no input file matches"):
        encode_files(saved_model, str(tmp_path / "*.txt"), tmp_path / "out")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(InputError, match="input must be one of"):
        encode_files(saved_model, str(tmp_path / "x.csv"), tmp_path / "out")


def test_ase_with_a_real_teacher_on_ray(cluster: None, corpus: Path, tiny_teacher: Path) -> None:
    """A real teacher (the tiny BERT, from its folder) on two replicas gives the single-process stage-1 table
    (via the CLI): the replicas run the same extraction code (``extract_shard``)."""
    common = [
        "distill",
        "--method",
        "ase",
        "--teacher",
        str(tiny_teacher),
        "--corpus",
        str(corpus),
        "--vocab-size",
        "30",
        "--dtype",
        "float32",
    ]
    runner = CliRunner()
    single = runner.invoke(app, [*common, "--out", str(corpus.parent / "ase-single")])
    assert single.exit_code == 0, single.output
    scaled = runner.invoke(
        app, [*common, "--out", str(corpus.parent / "ase-ray"), "--ray", "auto", "--ray-workers", "2"]
    )
    assert scaled.exit_code == 0, scaled.output
    one, two = staticsem.load(corpus.parent / "ase-single"), staticsem.load(corpus.parent / "ase-ray")
    assert one.vocab == two.vocab
    np.testing.assert_allclose(one.vectors, two.vectors, rtol=1e-4, atol=1e-5)
