"""The extraction pipeline (``teachers.batches``, ``stages.passes``, ``stages.extract``): batches made ready
ahead tokenise as the teacher's own tokenizer does, the per-word reduction on the teacher's device sums each
occurrence once, worker processes and a thread give the same sums to the bit, a GPU's out-of-memory halves
the batch, and the plans (``stages.plans``: stage 1's and X2Static's contexts').

The device path is tested here on the CPU through the same functions (the device is a parameter); the meta
device checks that nothing the reduction or the training reads is left behind on the host."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from fakes import FakeTeacher, tiny_swe, write_corpus
from staticsem.distillation.stages.contexts import chunk_arrays, group_contexts
from staticsem.distillation.stages.extract import extract
from staticsem.distillation.stages.kd import Distillation, Regression
from staticsem.distillation.stages.passes import reduce_batch, zero_sums
from staticsem.distillation.stages.plans import length_batches, plan_batches, plan_key, token_batches
from staticsem.distillation.teachers import teacher as teacher_module
from staticsem.distillation.teachers.batches import Prepared, trim_offsets
from staticsem.distillation.teachers.teacher import Teacher
from staticsem.distillation.workers import Pool
from staticsem.text import WordSplitter

TEXTS = [
    "The cat sat on the mat.",
    "A dog, a kitten and a puppy ran in the rain!",
    "Tax law: the court judge said no.",
    "Zebra café naïve résumé — x",
    "  leading   spaces and\ttabs ",
    " ".join(["guitar song"] * 60),  # longer than the tiny teacher's 64 tokens: truncated
]


@pytest.fixture(scope="module")
def teachers(tiny_teacher: Path) -> dict[str, Teacher]:
    """The tiny teacher on torch, and with a prompt."""
    return {
        "plain": Teacher(str(tiny_teacher), backend="torch"),
        "prompted": Teacher(str(tiny_teacher), backend="torch", prompt="query: "),
    }


def transformers_encoding(teacher: Teacher, texts: list[str]) -> dict[str, np.ndarray]:
    """What ``transformers`` gives for the teacher's call (the way the teacher tokenised before)."""
    prompted = [teacher.prompt + t for t in texts]
    batch = teacher.tokenizer(
        prompted,
        padding=True,
        truncation=True,
        max_length=teacher.max_length,
        return_tensors="np",
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    raw, prompt = batch.pop("offset_mapping").astype(np.int64), len(teacher.prompt)
    offsets = np.maximum(trim_offsets(prompted, raw) - prompt, 0)
    special = batch.pop("special_tokens_mask").astype(bool) | ((raw[..., 1] <= prompt) if prompt else False)
    own = batch["attention_mask"].astype(bool) & ~special  # the prompt's tokens: all their characters its
    return {**{k: np.asarray(v, np.int64) for k, v in batch.items()}, "own": own, "offsets": offsets}


@pytest.mark.parametrize("which", ["plain", "prompted"])
def test_batches_tokenise_as_the_teachers_own_tokenizer(teachers: dict[str, Teacher], which: str) -> None:
    teacher = teachers[which]
    want = transformers_encoding(teacher, TEXTS)
    got = teacher.encode(TEXTS)
    assert set(got.inputs) == set(want) - {"own", "offsets"}
    for name, value in got.inputs.items():
        np.testing.assert_array_equal(value, want[name], err_msg=name)
    np.testing.assert_array_equal(got.own, want["own"])
    np.testing.assert_array_equal(got.offsets, want["offsets"])
    assert got.inputs["input_ids"].shape[1] == teacher.max_length  # the long text is cut to the limit


@pytest.mark.slow
def test_batches_tokenise_as_the_packaged_teachers_tokenizer() -> None:
    """The claim on the real MiniLM's WordPiece (accents, CJK, long texts), prompted and not."""
    for prompt in (None, "query: "):
        teacher = Teacher(backend="torch", prompt=prompt)
        texts = [
            *TEXTS,
            "我喜欢猫，也喜欢狗。",
            "Ünïcödé ﬁ ligatures and ½ fractions",
            " ".join(["word"] * 400),
        ]
        want, got = transformers_encoding(teacher, texts), teacher.encode(texts)
        for name, value in got.inputs.items():
            np.testing.assert_array_equal(value, want[name], err_msg=name)
        np.testing.assert_array_equal(got.own, want["own"])
        np.testing.assert_array_equal(got.offsets, want["offsets"])


def reference_sums(states: np.ndarray, prepared: Prepared, words: int) -> tuple[np.ndarray, np.ndarray]:
    """Each occurrence's tokens averaged, each word's occurrences summed: one loop, slowly."""
    sums, counts = np.zeros((words, states.shape[-1])), np.zeros(words, np.int64)
    flat = states.reshape(-1, states.shape[-1])
    for occurrence, word in enumerate(prepared.words.tolist()):
        tokens = prepared.positions[prepared.occurrence_of == occurrence]
        sums[word] += flat[tokens].mean(axis=0)
        counts[word] += 1
    return sums, counts


def test_the_reduction_sums_each_occurrence_of_each_word_once(teachers: dict[str, Teacher]) -> None:
    teacher = teachers["plain"]
    vocab = ["the", "cat", "dog", "kitten", "a", "zebra", "cafe", "guitar", "song"]
    preparer = teacher.preparer(vocab, True, WordSplitter())
    prepared = preparer(TEXTS)
    assert len(prepared.words) > 20 and (np.bincount(prepared.occurrence_of) > 1).any()  # zebra: 5 pieces
    states, _ = teacher.run(prepared.inputs)
    sums, counts = zero_sums(len(vocab), teacher.hidden_size)
    located = (prepared.positions, prepared.occurrence_of, prepared.words)
    means = reduce_batch(states, torch.from_numpy(prepared.own), located, sums, counts)
    want_sums, want_counts = reference_sums(states.numpy(), prepared, len(vocab))
    np.testing.assert_allclose(sums.numpy(), want_sums, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(counts.numpy(), want_counts)
    own = prepared.own[..., None]
    np.testing.assert_allclose(means.numpy(), (states.numpy() * own).sum(1) / own.sum(1), rtol=1e-5)


def test_the_reduction_runs_on_the_states_device_alone(teachers: dict[str, Teacher]) -> None:
    """On the meta device (no data, but every op checks its operands' devices): a sum or an index left on
    the host is an error."""
    teacher = teachers["plain"]
    prepared = teacher.preparer(["the", "cat"], True, WordSplitter())(TEXTS[:2])
    states = torch.empty((*prepared.own.shape, teacher.hidden_size), device="meta")
    sums, counts = zero_sums(2, teacher.hidden_size, "meta")
    located = (prepared.positions, prepared.occurrence_of, prepared.words)
    means = reduce_batch(states, torch.from_numpy(prepared.own), located, sums, counts)
    assert means.device.type == "meta"
    host_sums, _ = zero_sums(2, teacher.hidden_size)
    with pytest.raises((RuntimeError, NotImplementedError)):
        reduce_batch(states, torch.from_numpy(prepared.own), located, host_sums, counts)


def tensors(objective: object) -> dict[str, torch.Tensor]:
    """Every tensor an objective holds (in its bags too)."""
    found = {}
    for name, value in vars(objective).items():
        if isinstance(value, torch.Tensor):
            found[name] = value
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            found.update({f"{name}.{k}": v for k, v in tensors(value).items()})
    return found


def test_training_data_moves_to_the_device_once(tiny_model) -> None:  # type: ignore[no-untyped-def]
    sentences = ["the cat sat", "a dog ran", "the king and the queen", "a happy man"] * 10
    targets = np.random.default_rng(0).normal(size=(len(sentences), 8)).astype(np.float32)
    for objective in (
        Distillation(tiny_model, sentences, targets, 0.05),
        Regression(tiny_model, sentences, np.ones((len(sentences), tiny_model.dim), np.float32)),
    ):
        objective.to("meta")
        held = tensors(objective)
        assert "targets" in held and any(name.endswith("ids") for name in held)
        assert {name: t.device.type for name, t in held.items()} == dict.fromkeys(held, "meta")


def test_workers_and_a_thread_make_the_same_batches_and_the_same_sums(
    teachers: dict[str, Teacher], tmp_path: Path
) -> None:
    teacher = teachers["plain"]
    corpus = write_corpus(tmp_path / "c.txt", count=300).read_text(encoding="utf-8").splitlines()
    vocab = ["the", "cat", "dog", "a", "tax", "law", "music", "song", "river", "water", "of", "and"]
    preparer = teacher.preparer(vocab, True, WordSplitter())
    here = preparer(corpus[:40], np.arange(40))
    with Pool(
        "staticsem.distillation.teachers.batches:job",
        preparer.params(),
        setup="staticsem.distillation.teachers.batches:setup",
        workers=2,
    ) as pool:
        from staticsem.distillation.teachers.batches import request

        texts = [*corpus[:38], "naïve café — 東京 ✓", ""]  # any text crosses whole
        here = preparer(texts, np.arange(40))
        [message] = list(pool.map([request(texts, np.arange(40))]))
    there = Prepared.from_message(message)
    for name in Prepared.ARRAYS:  # int32 through the pipe, int64 again on arrival
        np.testing.assert_array_equal(getattr(there, name), getattr(here, name), err_msg=name)
        assert getattr(there, name).dtype == getattr(here, name).dtype, name
    assert {k: (v.dtype, v.tolist()) for k, v in there.inputs.items()} == {
        k: (v.dtype, v.tolist()) for k, v in here.inputs.items()
    }
    one = extract(teacher, corpus, vocab, lowercase=True, batch_size=16, show_progress=False, workers=1)
    two = extract(teacher, corpus, vocab, lowercase=True, batch_size=16, show_progress=False, workers=2)
    np.testing.assert_array_equal(one.sums, two.sums)
    np.testing.assert_array_equal(one.embeddings, two.embeddings)
    np.testing.assert_array_equal(one.token_means, two.token_means)
    fake = FakeTeacher(teacher.subword_tokenizer)  # a teacher that tokenises in forward: the same reduction
    assert extract(fake, corpus, vocab, lowercase=True, show_progress=False).counts.sum() > 0


class Crowded(Teacher):
    """The tiny teacher on a GPU with room for ``room`` sentences a pass: more raise torch's out of memory."""

    room = 5

    def run(self, inputs, layer=None):  # type: ignore[no-untyped-def]
        if len(inputs["input_ids"]) > self.room:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super().run(inputs, layer)


def test_a_batch_out_of_gpu_memory_is_halved_and_retried(
    tiny_teacher: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = write_corpus(tmp_path / "c.txt", count=64).read_text(encoding="utf-8").splitlines()
    vocab = ["the", "cat", "dog", "a", "tax", "law", "music", "song", "of", "and"]
    crowded = Crowded(str(tiny_teacher), backend="torch")
    roomy = Teacher(str(tiny_teacher), backend="torch")
    with caplog.at_level(logging.WARNING, logger="staticsem.distillation.stages.passes"):
        got = extract(crowded, corpus, vocab, lowercase=True, batch_size=16, show_progress=False)
    assert "the GPU ran out of memory on a batch of 16 sentences: halving it and retrying" in caplog.text
    want = extract(roomy, corpus, vocab, lowercase=True, batch_size=4, show_progress=False)
    np.testing.assert_array_equal(got.counts, want.counts)
    np.testing.assert_allclose(got.sums, want.sums, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.embeddings, want.embeddings, rtol=1e-5, atol=1e-6)


def test_token_budget_plans_sort_by_tokens_and_keep_each_batch_within_the_budget() -> None:
    tokens = np.array([5, 30, 7, 7, 12, 100, 3, 9, 9, 9])
    plan = token_batches(tokens, budget=40)
    assert sorted(np.concatenate(plan).tolist()) == list(range(10))
    assert [tokens[b].max() * len(b) <= 40 or len(b) == 1 for b in plan] == [True] * len(plan)
    order = np.concatenate(plan)
    assert (np.diff(tokens[order]) >= 0).all()
    assert plan[-1].tolist() == [5]  # longer than the budget: alone
    texts = ["a b", "a", "a b c d"]
    assert [b.tolist() for b in plan_batches(object(), texts, 2)] == [
        b.tolist() for b in length_batches(texts, 2)
    ]


def test_cpu_plans_sort_by_the_teachers_token_count_not_by_characters(teachers: dict[str, Teacher]) -> None:
    """On the CPU (no token budget) a batch is ``batch_size`` sentences of like token counts: long words of
    few characters and short texts of many tokens do not share a batch, so less is padded."""
    teacher = teachers["plain"]
    # whole words of its vocabulary are one token each, unknown ones a token a letter
    texts = [
        "kitten puppy kitten puppy",
        "xqz vjk",
        "dog cat dog cat dog",
        "qzx jvk wx",
        "court judge money",
        "zq",
    ]
    tokens = teacher.token_counts(texts)
    plan = plan_batches(teacher, texts, 2)
    assert [len(b) for b in plan] == [2, 2, 2]
    order = np.concatenate(plan)
    assert sorted(order.tolist()) == list(range(len(texts)))
    assert (np.diff(tokens[order]) >= 0).all()

    def padded(batches: list[np.ndarray]) -> int:
        return sum(len(b) * int(tokens[b].max()) for b in batches)

    assert padded(plan) < padded(length_batches(texts, 2))
    assert plan_key(plan) != plan_key(length_batches(texts, 2))


def test_token_counts_parse_the_teachers_tokenizer_once(
    tiny_teacher: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plans count tokens at every chunk of X2Static's contexts and every eval encode: the tokenizer is
    made once per teacher (parsing mE5's takes 1.7 s), and the counts stay the teacher's own."""
    teacher = Teacher(str(tiny_teacher), backend="torch")
    made: list[int] = []
    real = type(teacher.spec).tokenizer

    def counting(spec: Any) -> Any:
        made.append(1)
        return real(spec)

    monkeypatch.setattr(type(teacher.spec), "tokenizer", counting)
    texts = ["dog cat dog cat dog", "xqz vjk", "zq"]
    first, second = teacher.token_counts(texts), teacher.token_counts(texts[::-1])
    assert len(made) == 1
    assert (
        first.tolist() == second[::-1].tolist() == [len(e.ids) for e in map(real(teacher.spec).encode, texts)]
    )


def test_x2static_contexts_read_by_token_count_and_land_on_their_sentences(
    teachers: dict[str, Teacher], monkeypatch: pytest.MonkeyPatch
) -> None:
    """X2Static's context passes take stage 1's plan (sorted by the teacher's token count, not characters);
    each sentence's context still lands on its own row, as if it were read alone."""
    teacher = teachers["plain"]
    # a batch's rows out of their order in the chunk ("kitten ..." has fewer tokens than "dog ...")
    texts = ["dog cat dog cat dog", "xqz vjk", "kitten puppy kitten puppy", "qzx jvk wx", "court judge", "zq"]
    read: list[list[str]] = []
    forward = teacher.forward

    def recording(batch: list[str], layer: int | None = None) -> Any:
        read.append(list(batch))
        return forward(batch, layer)

    monkeypatch.setattr(teacher, "forward", recording)
    chunk = [[text] for text in texts]
    got = chunk_arrays(teacher, chunk, {"dog": 0, "cat": 1}, True, 2)
    order = [text for batch in read for text in batch]
    assert sorted(order) == sorted(texts) and all(len(batch) == 2 for batch in read)
    tokens = teacher.token_counts(order)
    assert (np.diff(tokens) >= 0).all()
    assert read != [[texts[i] for i in b] for b in length_batches(texts, 2)]
    alone = np.concatenate([group_contexts(teacher, [group]) for group in chunk])
    np.testing.assert_allclose(got["contexts"].astype(np.float32), alone, atol=2e-3)


def test_a_partial_of_another_plan_is_not_resumed(
    teachers: dict[str, Teacher], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    teacher = teachers["plain"]
    corpus = write_corpus(tmp_path / "c.txt", count=80).read_text(encoding="utf-8").splitlines()
    vocab = ["the", "cat", "a", "of"]
    partial = tmp_path / "stage1.partial.safetensors"
    whole = extract(
        teacher, corpus, vocab, lowercase=True, batch_size=8, checkpoint=partial, show_progress=False
    )
    assert partial.is_file()
    with caplog.at_level(logging.WARNING, logger="staticsem.distillation.stages.extract"):
        other = extract(
            teacher, corpus, vocab, lowercase=True, batch_tokens=200, checkpoint=partial, show_progress=False
        )
    assert "made with other batches (another device): stage 1 starts over" in caplog.text
    np.testing.assert_array_equal(other.counts, whole.counts)
    assert plan_key(token_batches(teacher.token_counts(corpus), 200)) != plan_key(length_batches(corpus, 8))


@pytest.mark.parametrize("batch_size", [8, 5])
def test_a_periodic_partial_resumes_only_under_its_own_plan(
    subword_tokenizer: Any, tmp_path: Path, batch_size: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A run stopped after 3 batches of 8 saved a partial at each batch (``save_every=0``): a rerun under the
    same plan passes only the rest; under another plan (batches of 5) it starts over, so it equals a fresh
    run of that plan and reads every sentence."""
    corpus = write_corpus(tmp_path / "c.txt", count=80).read_text(encoding="utf-8").splitlines()
    vocab, partial = ["the", "cat", "a", "of", "music"], tmp_path / "stage1.partial.safetensors"
    options: dict[str, Any] = {"lowercase": True, "show_progress": False, "save_every": 0.0}
    with pytest.raises(KeyboardInterrupt):
        extract(
            FakeTeacher(subword_tokenizer, fail_after=3),
            corpus,
            vocab,
            batch_size=8,
            checkpoint=partial,
            **options,
        )
    assert int(load_file(str(partial))["done"][0]) == 3  # a periodic save, not the last
    teacher = FakeTeacher(subword_tokenizer)
    with caplog.at_level(logging.WARNING, logger="staticsem.distillation.stages.extract"):
        got = extract(teacher, corpus, vocab, batch_size=batch_size, checkpoint=partial, **options)
    fresh = extract(FakeTeacher(subword_tokenizer), corpus, vocab, batch_size=batch_size, **options)
    other = batch_size != 8
    assert teacher.sentences == (len(corpus) if other else len(corpus) - 3 * 8)
    assert ("stage 1 starts over" in caplog.text) == other
    np.testing.assert_array_equal(got.counts, fresh.counts)
    np.testing.assert_allclose(got.sums, fresh.sums, rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(got.embeddings, fresh.embeddings)


def test_the_plan_key_tells_apart_plans_that_differ_anywhere() -> None:
    """A partial is resumed only under its own plan: the key covers the whole order, not only its first
    sentences (it once hashed the first 256 sentence numbers), and the cut into batches."""
    order = np.arange(1000)
    late = order.copy()
    late[[900, 901]] = late[[901, 900]]  # the same batches' sizes; two sentences swapped near the end
    plan, swapped = [order[:500], order[500:]], [late[:500], late[500:]]
    assert plan_key(plan) == plan_key([order[:500].copy(), order[500:].copy()])
    assert plan_key(plan) != plan_key(swapped)
    assert plan_key(plan) != plan_key([order[:499], order[499:]])
    assert plan_key(plan) != plan_key([order[:500], order[500:999]])
    longer = np.arange(10_000)  # past any prefix the key might hash: two sentences swapped at the end
    moved = longer.copy()
    moved[[9_997, 9_998]] = moved[[9_998, 9_997]]
    assert plan_key([longer[:5_000], longer[5_000:]]) != plan_key([moved[:5_000], moved[5_000:]])


def test_ray_gpu_replicas_plan_by_the_token_budget_and_cpu_ones_record_what_they_run(
    subword_tokenizer: Tokenizer, tmp_path: Path
) -> None:
    """A pipeline on a Ray cluster with GPUs batches its passes by tokens (as a single process on a GPU
    does), its keys say so; CPU replicas run torch at fp32 whatever precision is asked, and say so."""
    from staticsem.distillation.methods.swe.pipeline import Pipeline
    from staticsem.scale.cluster import Placement
    from staticsem.scale.distill import RayScale

    def scale(gpus: float) -> RayScale:
        made = RayScale.__new__(RayScale)
        made.placement, made.build = Placement(1, 1.0, gpus, 1), None
        return made

    write_corpus(tmp_path / "corpus.txt", 50)
    settings = tiny_swe(tmp_path / "corpus.txt", fallback="prefix", teacher_backend="torch")
    teacher = FakeTeacher(subword_tokenizer)
    on_gpus = Pipeline(settings, tmp_path / "m", teacher=teacher, scale=scale(1.0), show_progress=False)  # type: ignore[arg-type]
    assert on_gpus.on_gpu and on_gpus.runtime.device == "ray-gpu"
    assert on_gpus.extraction()["batch_tokens"] == settings.batch_tokens
    assert (
        on_gpus.keys["extract"]
        != Pipeline(settings, tmp_path / "m", teacher=teacher, show_progress=False).keys["extract"]
    )  # type: ignore[arg-type]
    asked = scale(0.0).runtime("auto", "torch", "bf16")
    assert (asked.device, asked.backend, asked.precision) == ("ray", "torch", "fp32")


@pytest.mark.parametrize("chunk", [2, 3, 64])
def test_token_counts_past_the_first_chunk_are_each_text_s_own(
    teachers: dict[str, Teacher], monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """``token_counts`` tokenises ``COUNT_CHUNK`` texts at a time (8,192 in a build): made small, every
    text after the first chunk, the last partial chunk included, has the count the teacher's own tokenizer
    gives it (with the prompt and the special tokens, cut at the teacher's limit)."""
    monkeypatch.setattr(teacher_module, "COUNT_CHUNK", chunk)
    teacher = teachers["prompted"]
    texts = [*TEXTS, *(" ".join(["cat"] * n) for n in (1, 7, 3, 12, 2)), "music", ""]
    want = [
        len(
            teacher.tokenizer(teacher.prompt + t, truncation=True, max_length=teacher.max_length)["input_ids"]
        )
        for t in texts
    ]
    assert len(set(want)) > 6 and max(want) == teacher.max_length and len(texts) % chunk
    assert teacher.token_counts(texts).tolist() == want


# ---------------------------------------------------------------------------------------------- devices
def test_a_device_and_precision_that_cannot_run_are_refused_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    import staticsem
    from staticsem.cli import app
    from staticsem.distillation.teachers.device import resolve_runtime
    from staticsem.errors import InputError

    if not torch.cuda.is_available():
        with pytest.raises(InputError, match=r"^--device cuda: torch \S+ \(.*\) sees no CUDA device$"):
            resolve_runtime("cuda", "auto")
        corpus = write_corpus(tmp_path / "c.txt", count=50)
        result = CliRunner().invoke(
            app,
            ["distill", "swe", "--corpus", str(corpus), "--out", str(tmp_path / "m"), "--device", "cuda:1"],
        )
        assert result.exit_code != 0 and "--device cuda:1: torch" in str(result.output) + str(
            result.exception
        )
        assert not (tmp_path / "m").exists()
    with pytest.raises(InputError, match="--device takes auto, cpu, cuda, cuda:N; got 'gpu'"):
        resolve_runtime("gpu", "auto")
    with pytest.raises(
        InputError, match=r"--teacher-precision fp16: the onnx-int8 teacher backend runs at its own"
    ):
        staticsem.distill(
            "swe", corpus=[str(tmp_path / "c.txt")], out=tmp_path / "m", teacher_backend="onnx-int8",
            teacher_precision="fp16",
        )  # fmt: skip
    assert resolve_runtime("cpu", "auto").backend == "onnx-int8"  # the CPU's default
    assert (resolve_runtime("cpu", "auto", "bf16").backend, resolve_runtime("cpu", "torch").precision) == (
        "torch",
        "fp32",
    )
    assert resolve_runtime("ray-gpu", "auto").precision == "fp16"  # GPU replicas: torch at fp16


@pytest.mark.parametrize("method", ["swe", "token"])
def test_the_teacher_precision_asked_on_the_command_line_is_the_one_the_teacher_runs_at(
    tiny_teacher: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """``--teacher-precision bf16`` reaches the teacher that makes the passes (its weights are bf16 at every
    pass), not only config.json; the model card says where and how it ran."""
    from typer.testing import CliRunner

    from staticsem.cli import app
    from staticsem.io import card

    ran: list[torch.dtype] = []
    real = Teacher.run

    def recording(self: Teacher, inputs: Any, layer: int | None = None) -> Any:
        ran.append(next(self.transformer.parameters()).dtype)
        return real(self, inputs, layer)

    monkeypatch.setattr(Teacher, "run", recording)
    out = tmp_path / "m"
    args = ["distill", method, "--teacher", str(tiny_teacher), "--out", str(out), "--dtype", "float32"]
    args += ["--teacher-backend", "torch", "--teacher-precision", "bf16", "--device", "cpu"]
    if method == "swe":
        corpus = write_corpus(tmp_path / "c.txt", count=200)
        args += ["--corpus", str(corpus), "--stages", "extract", "--vocab-size", "30", "--min-count", "2"]
    else:
        args += ["--vocab-size", "40", "--dim", "8"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert ran and set(ran) == {torch.bfloat16}
    metadata = json.loads((out / "config.json").read_text())["metadata"]
    assert metadata["settings"]["teacher_precision"] == "bf16"
    assert "| teacher ran on | cpu, torch bf16 |" in card.render(out)


def test_a_teacher_saved_in_half_precision_runs_at_the_precision_asked(
    tmp_path: Path, tiny_teacher: Path
) -> None:
    """Hub folders often hold fp16 weights, which transformers loads as fp16: fp32 (and the ONNX backends,
    exported from fp32) must still run in fp32, and fp16/bf16 in theirs."""
    from sentence_transformers import SentenceTransformer

    half = tmp_path / "half"
    SentenceTransformer(str(tiny_teacher), device="cpu").to(torch.float16).save(str(half))
    dtypes = {p: Teacher(str(half), precision=p).transformer.dtype for p in ("fp32", "fp16", "bf16")}
    assert dtypes == {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    onnx = Teacher(str(half), backend="onnx", cache=tmp_path / "onnx")
    assert onnx.transformer.dtype == torch.float32
    states = onnx.forward(TEXTS[:3]).states
    assert states.dtype == torch.float32 and torch.isfinite(states).all()


def test_the_staging_buffers_are_reused_and_each_batch_arrives_whole() -> None:
    """A GPU teacher's inputs go through one reused (page-locked) buffer per input name, not a fresh pinned
    tensor per batch; what arrives is each batch's own copy, untouched by the batches after it. On the CPU
    through the same function (pinning off)."""
    from staticsem.distillation.teachers.teacher import Staging

    staging = Staging(torch.device("cpu"), pin=False)
    rng = np.random.default_rng(0)
    sent, batches = [], [rng.integers(0, 30_000, (b, t)) for b, t in ((64, 40), (32, 9), (300, 300), (5, 7))]
    for batch in batches:
        sent.append(staging.send("input_ids", batch))
        sent.append(staging.send("attention_mask", batch > 15_000))
    for number, batch in enumerate(batches):
        np.testing.assert_array_equal(sent[2 * number].numpy(), batch)
        np.testing.assert_array_equal(sent[2 * number + 1].numpy(), batch > 15_000)
    assert sent[0].dtype == torch.int64 and sent[1].dtype == torch.bool
    buffer = staging.buffers["input_ids"]
    assert buffer.numel() >= 300 * 300 * 8  # grown once for the largest batch, then kept
    staging.send("input_ids", batches[1])
    assert staging.buffers["input_ids"].data_ptr() == buffer.data_ptr()
