"""Aligning a model's languages (``stages.align``): per-language maps onto the teacher's space, baked into
the rows."""

from __future__ import annotations

import numpy as np
import pytest

from staticsem import StaticModel
from staticsem.distillation.methods.swe.alignment import refine_rows
from staticsem.distillation.stages.align import (
    Affine,
    LanguageSample,
    align_rows,
    fit_language_maps,
    language_shares,
    shared_space,
)
from staticsem.distillation.stages.kd import KDSettings
from staticsem.errors import InputError

CONCEPTS, DIM, TEACHER_DIM = 30, 8, 12


def translated(seed: int = 0) -> tuple[StaticModel, dict[str, LanguageSample], list[tuple[str, str]]]:
    """Two languages naming the same concepts (``a3`` and ``b3``): language b's rows are a's turned,
    scaled and moved; the teacher embeds a sentence by its concepts alone, whatever the language."""
    rng = np.random.default_rng(seed)
    concepts = rng.normal(size=(CONCEPTS, DIM))
    turn = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0] * rng.uniform(0.5, 2.0, size=DIM)
    rows = np.vstack([concepts + 0.8, concepts @ turn - 1.5]).astype(np.float32)
    vocab = [f"a{i}" for i in range(CONCEPTS)] + [f"b{i}" for i in range(CONCEPTS)]
    model = StaticModel(vocab, rows)
    embed = rng.normal(size=(DIM, TEACHER_DIM))
    picks = [rng.choice(CONCEPTS, 4, replace=False) for _ in range(900)]
    targets = np.array([concepts[p].mean(axis=0) @ embed + 3.0 for p in picks])
    samples = {
        lang: LanguageSample([" ".join(f"{lang}{i}" for i in p) for p in picks[:600]], targets[:600])
        for lang in ("a", "b")
    }
    tests = [(" ".join(f"a{i}" for i in p), " ".join(f"b{i}" for i in p)) for p in picks[600:]]
    return model, samples, tests


def agreement(model: StaticModel, pairs: list[tuple[str, str]]) -> float:
    """Mean cosine of each sentence and its translation."""
    a = model.encode([x for x, _ in pairs])
    b = model.encode([y for _, y in pairs])
    return float((a * b).sum(axis=1).mean())


def matched(model: StaticModel, pairs: list[tuple[str, str]]) -> float:
    """Share of sentences whose nearest translation (by cosine) is their own."""
    a = model.encode([x for x, _ in pairs])
    b = model.encode([y for _, y in pairs])
    return float(np.mean((a @ b.T).argmax(axis=1) == np.arange(len(pairs))))


def test_aligned_rows_bring_translations_together() -> None:
    model, samples, tests = translated()
    maps = fit_language_maps(model, samples, components=0)  # the maps are exact here: nothing removed
    counts = {lang: {f"{lang}{i}": 10 for i in range(CONCEPTS)} for lang in ("a", "b")}
    aligned = align_rows(model, maps, language_shares(model.vocab, counts))
    before, after = agreement(model, tests), agreement(aligned, tests)
    assert before < 0.5 and after > 0.99, (before, after)
    assert aligned.dim == model.dim and aligned.vocab == model.vocab
    # the rows carry the maps: a language-a sentence encodes as its map of the unaligned mean
    sentence = tests[0][0]
    mapped = maps["a"](model.encode([sentence], normalize=False).astype(np.float64))
    np.testing.assert_allclose(
        aligned.encode([sentence]), mapped / np.linalg.norm(mapped), rtol=1e-4, atol=1e-5
    )


def test_the_refinement_reaches_word_errors_the_maps_cannot() -> None:
    model, samples, tests = translated()
    rng = np.random.default_rng(1)
    rows = model.vectors.copy()
    rows[CONCEPTS : CONCEPTS + 10] += rng.normal(scale=2.0, size=(10, DIM))  # ten b words off, each its way
    model = model.replace(vectors=rows)
    counts = {lang: {f"{lang}{i}": 10 for i in range(CONCEPTS)} for lang in ("a", "b")}
    space = shared_space(samples, DIM)
    maps = fit_language_maps(model, samples, 0, space)
    mapped = align_rows(model, maps, language_shares(model.vocab, counts))
    training = KDSettings(lr=0.05, batch_size=64, eval_every=10, patience=5, max_steps=600, dev_size=100)
    refined, stats = refine_rows(mapped, samples, space, training, False, components=0)
    before, after = matched(mapped, tests), matched(refined, tests)
    assert after > before + 0.1, (before, after)
    assert stats["dev_loss_best"] < 0.5 * stats["dev_loss_start"]
    assert stats["sentences"] == {"a": 600, "b": 600}
    assert refined.vocab == model.vocab


def test_a_word_of_several_languages_takes_their_maps_by_its_share_of_each() -> None:
    counts = {"en": {"a": 3, "man": 1}, "de": {"man": 1, "die": 3}}
    shares = language_shares(["man", "die", "a", "zzz"], counts)
    np.testing.assert_allclose(shares, [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    maps = {"en": Affine(np.eye(2), np.zeros(2)), "de": Affine(-np.eye(2), np.ones(2))}
    model = StaticModel(["man", "die", "a", "zzz"], np.array([[1, 2], [1, 2], [1, 2], [3, 4]], np.float32))
    aligned = align_rows(model, maps, shares)
    np.testing.assert_allclose(aligned.vectors, [[0.5, 0.5], [0, -1], [1, 2], [0.5, 0.5]])


def test_a_language_with_too_few_sentences_cannot_fit_a_map() -> None:
    model, samples, _ = translated()
    few = LanguageSample(samples["b"].sentences[:5], samples["b"].targets[:5])
    with pytest.raises(InputError, match="b: 5 sentences .* cannot fit a map of 8 dimensions"):
        fit_language_maps(model, {"a": samples["a"], "b": few})


def test_a_word_shares_languages_by_relative_frequency_not_raw_counts() -> None:
    """German's corpus is 100 times English's: "man" is as frequent in both (a quarter of each), so it takes
    both maps equally; by raw counts German's would swamp it."""
    counts = {"en": {"a": 3, "man": 1}, "de": {"man": 100, "die": 300}}
    shares = language_shares(["man", "die", "a"], counts)
    np.testing.assert_allclose(shares, [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]])


def test_subword_pieces_take_the_mean_of_the_languages_maps(subword_tokenizer) -> None:  # type: ignore[no-untyped-def]
    from staticsem.distillation.stages.align import mean_map
    from staticsem.pieces import PieceTable

    rng = np.random.default_rng(3)
    model = StaticModel(
        ["man", "die"], rng.normal(size=(2, 4)).astype(np.float32), tokenizer=subword_tokenizer
    )
    rows = rng.normal(size=(subword_tokenizer.get_vocab_size(), 4)).astype(np.float32)
    model = model.with_pieces(PieceTable(rows, subword_tokenizer, 0.5))
    maps = {
        "en": Affine(rng.normal(size=(4, 4)), rng.normal(size=4)),
        "de": Affine(rng.normal(size=(4, 4)), rng.normal(size=4)),
    }
    aligned = align_rows(model, maps, language_shares(model.vocab, {"en": {"man": 1}, "de": {"die": 1}}))
    assert aligned.pieces is not None
    np.testing.assert_allclose(aligned.pieces.vectors, mean_map(maps)(rows.astype(np.float64)), rtol=1e-5)
    assert not np.allclose(aligned.pieces.vectors, maps["en"](rows.astype(np.float64)), atol=1e-3)


def test_the_refinements_targets_are_centred_per_language_without_their_top_directions() -> None:
    from staticsem.distillation.stages.align import shared_targets

    _, samples, _ = translated()
    space = shared_space(samples, DIM)
    shifted = samples["a"].targets + 5.0 * np.random.default_rng(4).normal(size=TEACHER_DIM)  # its own offset
    targets = shared_targets(space, shifted, components=2)
    np.testing.assert_allclose(targets.mean(axis=0), 0.0, atol=1e-4)
    singular = np.linalg.svd(targets, compute_uv=False)
    assert singular[-2:].max() < 1e-3 * singular[0] < singular[-3]  # exactly two removed: rank DIM - 2


def test_each_map_leaves_its_languages_sentences_centred_without_their_top_directions() -> None:
    model, samples, _ = translated()
    maps = fit_language_maps(model, samples, components=2)
    for language, sample in samples.items():
        mapped = maps[language](model.encode(list(sample.sentences), normalize=False).astype(np.float64))
        np.testing.assert_allclose(mapped.mean(axis=0), 0.0, atol=1e-6)
        singular = np.linalg.svd(mapped, compute_uv=False)
        # step 1 removed two directions of the sentences, step 3 two more of the mapped ones: rank DIM - 4
        assert singular[-4:].max() < 1e-6 * singular[0] < singular[-5], language


def _pieces_language(
    model: StaticModel, samples: dict[str, LanguageSample]
) -> tuple[StaticModel, LanguageSample]:
    """``model`` with subword pieces ``q0``… naming the same concepts as its words, turned otherwise than
    either language (a language without words of its own, read from pieces alone), and a sample of it."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from staticsem.pieces import PieceTable

    rng = np.random.default_rng(11)
    names = ["[UNK]", *(f"q{i}" for i in range(CONCEPTS))]
    tokenizer = Tokenizer(models.WordPiece({n: i for i, n in enumerate(names)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    concepts = np.asarray(model.vectors[:CONCEPTS], dtype=np.float64) - 0.8
    turn = np.linalg.qr(rng.normal(size=(DIM, DIM)))[0] * rng.uniform(0.5, 2.0, size=DIM)
    pieces = np.vstack([np.zeros((1, DIM)), concepts @ turn + 2.0]).astype(np.float32)
    with_pieces = StaticModel(model.vocab, model.vectors, tokenizer=tokenizer).with_pieces(
        PieceTable(pieces, tokenizer, 0.0)
    )
    a = samples["a"]
    return with_pieces, LanguageSample([s.replace("a", "q") for s in a.sentences], a.targets)


def test_the_pieces_own_map_reads_a_language_without_words_as_its_translations() -> None:
    from staticsem.distillation.stages.align import fit_piece_map

    plain, samples, tests = translated()
    model, spoken = _pieces_language(plain, samples)
    space = shared_space({**samples, "q": spoken}, DIM)
    maps = fit_language_maps(model, samples, components=0, space=space)  # exact maps: nothing removed
    counts = {lang: {f"{lang}{i}": 10 for i in range(CONCEPTS)} for lang in ("a", "b")}
    shares = language_shares(model.vocab, counts)
    piece_map = fit_piece_map(model, {"q": spoken}, space, components=0)
    fitted = align_rows(model, maps, shares, piece_map)
    assert fitted.pieces is not None and model.pieces is not None
    np.testing.assert_allclose(
        fitted.pieces.vectors, piece_map(model.pieces.vectors.astype(np.float64)), rtol=1e-4
    )
    mean = align_rows(model, maps, shares)
    pairs = [(a, a.replace("a", "q")) for a, _ in tests]
    assert matched(fitted, pairs) > 0.95 > matched(mean, pairs) + 0.2
    assert agreement(fitted, pairs) > agreement(mean, pairs) + 0.2
    # the words keep their languages' maps, a word no language counted the mean map, pieces or not
    np.testing.assert_array_equal(fitted.vectors, mean.vectors)
    uncounted = {lang: {w: n for w, n in c.items() if w not in ("a0", "b5")} for lang, c in counts.items()}
    partial = language_shares(model.vocab, uncounted)
    np.testing.assert_array_equal(
        align_rows(model, maps, partial, piece_map).vectors, align_rows(model, maps, partial).vectors
    )


def test_reading_from_pieces_alone_ignores_the_words_own_rows() -> None:
    from staticsem.distillation.stages.align import pieces_only

    plain, samples, _ = translated()
    model, _ = _pieces_language(plain, samples)
    assert model.pieces is not None
    rows = np.vstack([model.vectors, np.full((1, DIM), 9.0, dtype=np.float32)])
    both = StaticModel([*model.vocab, "q1"], rows, tokenizer=model.tokenizer).with_pieces(model.pieces)
    assert np.allclose(both.encode(["q1"], normalize=False), 9.0)  # its own row, read as a word
    reader = pieces_only(both)
    np.testing.assert_allclose(reader.encode(["q1"], normalize=False)[0], model.pieces.vectors[2], rtol=1e-6)
    np.testing.assert_allclose(
        reader.encode(["q1 q2"], normalize=False)[0], model.pieces.vectors[[2, 3]].mean(axis=0), rtol=1e-5
    )


def test_the_pieces_map_is_fitted_on_every_languages_sample_together() -> None:
    from staticsem.distillation.stages.align import fit_piece_map, fitted_map, pieces_only

    plain, samples, _ = translated()
    model, spoken = _pieces_language(plain, samples)
    half = len(spoken.sentences) // 2
    parts = {
        "q": LanguageSample(spoken.sentences[:half], spoken.targets[:half]),
        "r": LanguageSample(spoken.sentences[half:], spoken.targets[half:]),
    }
    space = shared_space(parts, DIM)
    x = pieces_only(model).encode(list(spoken.sentences), normalize=False).astype(np.float64)
    y = space.transform(spoken.targets / np.linalg.norm(spoken.targets, axis=1, keepdims=True))
    for components in (0, 2):
        found, whole = fit_piece_map(model, parts, space, components), fitted_map(x, y, components)
        np.testing.assert_allclose(found.matrix, whole.matrix, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(found.offset, whole.offset, rtol=1e-6, atol=1e-8)


def test_a_model_without_pieces_has_no_piece_map_to_fit() -> None:
    from staticsem.distillation.stages.align import fit_piece_map

    model, samples, _ = translated()
    with pytest.raises(InputError, match="no subword pieces"):
        fit_piece_map(model, samples, shared_space(samples, DIM))
