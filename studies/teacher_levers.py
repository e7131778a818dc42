"""What a wider teacher needs from the SWE settings: teacher-dependent levers, one work folder (issue 33).

1. **One extraction** per teacher (``--teacher``, default the packaged all-MiniLM-L6-v2): the SWE steps up
   to stage 1 (``staticsem.distill("swe", stages=("extract",))``: ``--vocab-size`` words,
   ``--sentences-per-word`` sentences each, ``--corpus``, the ``--backend`` teacher), into ``--work``;
   reused when its key matches.
   Stage 1 keeps the chosen sentences, their teacher embeddings (the KD targets: the teacher's own pooling,
   no prompt) and the stage-1 table.
2. ``--layers 6,8,10``: **one more teacher pass** over the same sentences that gathers the word states of
   several hidden layers at once (its own int8 ONNX export with one output per layer; 0 = embeddings, the
   teacher's layer count = last). Stage-1 tables per layer go to ``WORK/layers.safetensors``; the KD
   targets stay the last layer's sentence embeddings.
3. **Runs**, each re-doing only the cheap steps from the cached stage 1: sentence PCA/ABTT, then KD, then the
   score. A run is ``name=value`` settings joined by ``+`` (``default``: the pipeline's own settings):

   - ``dim=D``, ``remove_top=K`` (the PCA step; K defaults to the teacher width / 100, D to 256);
   - ``layer=L`` (stage 1 from layer L of step 2; ``layer=11-12``: the mean of layers 11 and 12);
   - ``kd=false`` (stage 2 only: what KD adds);
   - any ``KDSettings`` field (``tau``, ``lr``, ``patience``, ``dev_size``, ``eval_every``, ``batch_size``,
     ``seed``, ``group_share``, ``average``, ...).

   Every run records STS (STS-B dev, SICK-R trial, SICK-R train; Spearman ×100 and their mean, as
   ``swe_quality.py``), the word-similarity mean, the KD steps, the step of the best dev loss, the dev-loss
   curve (every ``eval_every`` steps) with the mean training loss over the same windows, and seconds.
4. The teacher's own STS (its int8 ONNX embeddings of the evaluation sentences, cached in ``WORK/onnx``) and
   the geometry that a width-dependent default could key on: the scale of the stage-1/stage-2 tables
   (the size of an Adam step relative to them), the variance the top components hold, and how spread the
   KD targets' in-batch cosines are (the effective number of neighbours of softmax(S / τ) per τ).

Results of several invocations (teachers, run batches) are merged into ``--output`` under the teacher's
``--label``. Only Wikipedia text is read (the corpus); the evaluation sets are read for scoring only.

Run (each teacher pass and KD batch under the machine's lock)::

    flock /tmp/heavy.lock python studies/teacher_levers.py --teacher ../teachers/mpnet --label mpnet \
        --work /tmp/tl-mpnet.work --output studies/results/teacher_levers.json
    flock /tmp/heavy.lock python studies/teacher_levers.py --label minilm --work /tmp/tl-minilm.work \
        --runs default,kd=false --output studies/results/teacher_levers.json
    flock /tmp/heavy.lock python studies/teacher_levers.py --teacher ../teachers/mpnet --label mpnet \
        --work /tmp/tl-mpnet.work --layers 6,8,10,11,12 --runs layer=10,layer=11 --output ...
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

import _benchmarks  # benchmarks/ on the path (_common, teacher_backends); parse_run
import _common as common
from _benchmarks import STS_FILES

RUNS = (  # most telling first: results are saved after every run
    "default,kd=false,lr=0.0003,lr=0.003,patience=20,tau=0.1,tau=0.02,"
    "dim=384,dim=512,dim=768+remove_top=0,remove_top=0,remove_top=4,remove_top=16,"
    "dev_size=500,seed=1"
)
TAUS = (0.02, 0.05, 0.1)


# ---------------------------------------------------------------------------- step 1: one extraction
def extract_once(args: Any) -> dict[str, Any]:
    """Run (or reuse) the SWE steps up to stage 1 into ``args.work``; their records."""
    import staticsem

    started = time.perf_counter()
    staticsem.distill(
        "swe",
        teacher=args.teacher,
        corpus=[str(args.corpus)],
        out=args.work / "stage1-model",
        work_dir=args.work,
        vocab_size=args.vocab_size,
        sentences_per_word=args.sentences_per_word,
        stages=("extract",),
        teacher_backend=args.backend,
        dtype="float32",
    )
    records = {
        step: {k: v for k, v in json.loads((args.work / f"{step}.json").read_text()).items() if k != "key"}
        for step in ("vocab", "select", "extract")
    }
    return {
        "wall_seconds_this_call": round(time.perf_counter() - started, 1),
        "vocab_seconds": records["vocab"].get("seconds"),
        "select_seconds": records["select"].get("seconds"),
        "extract_seconds": records["extract"].get("seconds"),
        "sentences": len(records["select"]["sentences"]),
        "lowercase": records["vocab"].get("lowercase"),
        **{k: records["extract"][k] for k in ("teacher_passes", "words_seen", "teacher_dim")},
    }


# ---------------------------------------------------------------------------- step 2: several layers
def layer_graph(transformer: Any, names: list[str], layers: list[int]) -> Any:
    """The transformer returning the hidden states ``layers`` (one output each)."""
    import torch

    class Layers(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = transformer

        def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            output = self.model(**dict(zip(names, inputs, strict=True)), output_hidden_states=True)
            return tuple(output.hidden_states[layer] for layer in layers)

    return Layers().eval()


def layer_session(teacher: Any, layers: list[int], cache: Path) -> tuple[Any, list[str]]:
    """An int8 ONNX Runtime session of the teacher with one output per layer (exported once, cached)."""
    import onnxruntime
    import torch

    from staticsem.distillation.teachers.onnx import (
        OPSET,
        OnnxTransformer,
        _eager_attention,
        _probe_inputs,
        _quiet_export,
    )

    probe = _probe_inputs(teacher.tokenizer)
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in probe]
    path = cache / f"layers-int8-{'-'.join(map(str, layers))}.onnx"
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        plain = cache / "layers-plain.onnx"
        outputs = [f"layer{layer}" for layer in layers]
        axes = {name: {0: "batch", 1: "tokens"} for name in (*names, *outputs)}
        graph = layer_graph(teacher.transformer, names, layers)
        with _eager_attention(teacher.transformer), torch.no_grad(), _quiet_export():
            torch.onnx.export(
                graph,
                tuple(probe[n] for n in names),
                str(plain),
                input_names=names,
                output_names=outputs,
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
            OnnxTransformer._quantize(plain, path)
        plain.unlink()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = os.cpu_count() or 1, 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]), names


def extract_layers(args: Any, layers: list[int]) -> dict[str, Any]:
    """One teacher pass over the chosen sentences gathering the stage-1 word states of every layer in
    ``layers``; writes ``WORK/layers.safetensors`` (one table per layer, rows as stage 1's)."""
    import torch
    from tqdm import tqdm

    import staticsem
    from staticsem.distillation.methods.swe.settings import SWESettings
    from staticsem.distillation.stages.extract import _occurrences, length_batches
    from staticsem.distillation.teachers.teacher import Teacher, trim_offsets
    from staticsem.io.atomic import save_tensors
    from staticsem.text import WordSplitter

    work = args.work
    vocab = json.loads((work / "vocab.json").read_text())
    sentences = json.loads((work / "select.json").read_text())["sentences"]
    words, lowercase = vocab["words"], vocab["lowercase"]
    index = {w: i for i, w in enumerate(words)}
    teacher = Teacher(args.teacher, backend="torch")
    teacher.check_layer(max(layers))
    started = time.perf_counter()
    session, names = layer_session(teacher, layers, work / "onnx")
    export_seconds = time.perf_counter() - started
    width, splitter = teacher.hidden_size, WordSplitter()
    sums = [torch.zeros(len(words), width) for _ in layers]
    counts = torch.zeros(len(words), dtype=torch.int64)
    started = time.perf_counter()
    for chosen in tqdm(length_batches(sentences, SWESettings.batch_size), "layer passes", mininterval=5):
        texts = [sentences[i] for i in chosen]
        batch = teacher.tokenizer(
            texts,
            padding=True,
            truncation=True,
            max_length=teacher.max_length,
            return_tensors="pt",
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
        )
        offsets = trim_offsets(texts, batch.pop("offset_mapping"))
        own = batch["attention_mask"].bool() & ~batch.pop("special_tokens_mask").bool()
        outputs = session.run(None, {n: batch[n].numpy().astype(np.int64) for n in names})
        positions, occurrence_of, found = _occurrences(
            texts, offsets.numpy(), own.numpy(), index, lowercase, splitter
        )
        if not len(found):
            continue
        where, owner = torch.from_numpy(positions), torch.from_numpy(occurrence_of)
        pieces = torch.bincount(owner, minlength=len(found)).clamp(min=1)[:, None]
        ids = torch.from_numpy(found)
        for total, states in zip(sums, outputs, strict=True):
            flat = torch.from_numpy(states).reshape(-1, width)[where]
            total.index_add_(0, ids, torch.zeros(len(found), width).index_add_(0, owner, flat) / pieces)
        counts += torch.bincount(ids, minlength=len(words))
    seconds = time.perf_counter() - started
    stage1 = staticsem.load(work / "stage1")
    seen = np.flatnonzero(counts.numpy() > 0)
    if [words[i] for i in seen] != list(stage1.vocab):
        raise SystemExit("the layer pass saw other words than stage 1: not the same sentences or vocabulary")
    tables = {
        f"layer{layer}": (s[seen] / counts[seen, None]).numpy() for layer, s in zip(layers, sums, strict=True)
    }
    save_tensors(work / "layers.safetensors", tables)
    check = {}
    if teacher.num_layers in layers:  # the last layer again: how close to the pipeline's own stage 1
        mine = tables[f"layer{teacher.num_layers}"]
        theirs = np.asarray(stage1.vectors, dtype=np.float32)
        cos = np.einsum("ij,ij->i", mine, theirs) / (
            np.linalg.norm(mine, axis=1) * np.linalg.norm(theirs, axis=1)
        )
        check = {"last_layer_cosine_to_stage1_min": float(cos.min()), "mean": float(cos.mean())}
    return {
        **check,
        "layers": layers,
        "export_seconds": round(export_seconds, 1),
        "pass_seconds": round(seconds, 1),
        "sentences_per_second": round(len(sentences) / seconds, 1),
    }


# ---------------------------------------------------------------------------- step 3: runs
def parse_run(spec: str) -> dict[str, Any]:
    """``dim=384+tau=0.1`` → {"dim": 384, "tau": 0.1}; ``default`` → {}."""
    return _benchmarks.parse_run(spec, {"dim": int, "remove_top": int, "layer": str, "kd": bool})


def stage1_table(work: Path, layer: str | None) -> Any:
    """The stage-1 model, or (``layer``: ``L`` or ``L1-L2``) its table from layer(s) of step 2."""
    from safetensors.numpy import load_file

    import staticsem
    from staticsem.model import StaticModel

    stage1 = staticsem.load(work / "stage1")
    if layer is None:
        return stage1
    path = work / "layers.safetensors"
    if not path.is_file():
        raise SystemExit(f"run with layer={layer} needs --layers first ({path} is missing)")
    tables = load_file(str(path))
    vectors = np.mean([tables[f"layer{int(part)}"] for part in layer.split("-")], axis=0)
    return StaticModel(
        stage1.vocab,
        vectors,
        tokenizer=stage1.tokenizer,
        metadata=stage1.metadata,
        splitter=stage1.splitter.name,
    )


def make_recorded(base: Any) -> Any:
    """A ``Distillation`` that keeps its dev losses (one per evaluation) and training losses."""

    class Recorded(base):  # type: ignore[misc, valid-type]
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            self.dev: list[float] = []
            self.train: list[float] = []

        def loss(self, table: Any, rows: np.ndarray, sparse: bool) -> Any:
            value = super().loss(table, rows, sparse)
            self.train.append(float(value.item()))
            return value

        def batch_losses(self, table: Any, batches: Any) -> list[float]:
            values = super().batch_losses(table, batches)
            self.dev.append(float(np.mean(values)))
            return values

    return Recorded


def table_scale(vectors: np.ndarray) -> dict[str, float]:
    """RMS coordinate and mean row norm of a table (Adam moves every touched coordinate by about lr)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    return {
        "rms": float(np.sqrt(np.mean(vectors**2))),
        "row_norm": float(np.linalg.norm(vectors, axis=1).mean()),
    }


def target_geometry(targets: np.ndarray, rng: np.random.Generator, batch: int = 128) -> dict[str, Any]:
    """Cosines between random target pairs (raw and centred as KD uses them) and, per τ, the effective
    number of in-batch neighbours exp(entropy) of the centred targets' softmax(S / τ)."""
    raw = targets / np.linalg.norm(targets, axis=1, keepdims=True)
    centred = targets - targets.mean(axis=0)
    centred /= np.linalg.norm(centred, axis=1, keepdims=True)
    out: dict[str, Any] = {}
    for name, unit in (("raw", raw), ("centred", centred)):
        a, b = rng.integers(len(unit), size=(2, 20_000))
        cos = np.einsum("ij,ij->i", unit[a], unit[b])[a != b]
        out[f"cos_{name}_mean"], out[f"cos_{name}_std"] = float(cos.mean()), float(cos.std())
    for tau in TAUS:
        spread = []
        for _ in range(20):
            rows = centred[rng.choice(len(centred), batch, replace=False)]
            logits = rows @ rows.T / tau
            np.fill_diagonal(logits, -np.inf)
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            entropy = -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=1)
            spread.append(np.exp(entropy).mean())
        out[f"neighbours_tau{tau}"] = float(np.mean(spread))
    return out


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument("--teacher", default=None, help="teacher folder [the packaged all-MiniLM-L6-v2]")
    parser.add_argument("--label", default=None, help="name of the teacher in the results [folder name]")
    parser.add_argument("--work", type=Path, required=True, help="work folder (made by the first run)")
    parser.add_argument(
        "--corpus", type=Path, default=None, help="[DATA/corpus/enwiki2015-sentences-00.txt.gz]"
    )
    parser.add_argument("--vocab-size", type=int, default=20_000)
    parser.add_argument("--sentences-per-word", type=int, default=5)
    parser.add_argument("--backend", default="onnx-int8", help="teacher backend of the extraction")
    parser.add_argument("--layers", default="", help="gather these layers' word states in one more pass")
    parser.add_argument("--runs", default=RUNS, help="comma-separated runs (see above); '' for none")
    parser.add_argument("--no-teacher-sts", action="store_true", help="skip the teacher's own STS")
    parser.add_argument(
        "--markdown", action="store_true", help="print the README tables of --output's results and stop"
    )
    args = parser.parse_args()
    if args.markdown:
        return markdown(json.loads(args.output.read_text()))
    common.offline()
    args.corpus = args.corpus or args.data / "corpus" / "enwiki2015-sentences-00.txt.gz"
    label = args.label or (Path(args.teacher).name if args.teacher else "all-MiniLM-L6-v2")
    from safetensors.numpy import load_file

    from kd_ceiling import teacher_embeddings
    from staticsem.distillation.methods.swe.settings import SWESettings
    from staticsem.distillation.stages.abtt import default_remove_top, sentence_pca
    from staticsem.distillation.stages.kd import Distillation, KDSettings, train_table
    from staticsem.eval.sts import STS
    from staticsem.eval.wordsim import WordSimilarity

    saved: dict[str, Any] = {"benchmark": "teacher_levers", "teachers": {}}
    if args.output is not None and args.output.is_file():
        saved = json.loads(args.output.read_text())
    entry = saved["teachers"].setdefault(label, {"runs": {}})
    entry.update(teacher=args.teacher or "all-MiniLM-L6-v2", work=str(args.work), backend=args.backend)
    entry["corpus"] = args.corpus.name
    entry["settings"] = {"vocab_size": args.vocab_size, "sentences_per_word": args.sentences_per_word}

    def save() -> None:
        common.save_json(args.output, saved)

    entry["extraction"] = {**entry.get("extraction", {}), **extract_once(args)}
    print(f"{label}: stage 1 {entry['extraction']}", flush=True)
    if args.layers:
        layers = [int(x) for x in args.layers.split(",")]
        entry["layer_pass"] = extract_layers(args, layers)
        print(f"{label}: layers {entry['layer_pass']}", flush=True)
    save()

    sentences = json.loads((args.work / "select.json").read_text())["sentences"]
    targets = load_file(str(args.work / "stage1.safetensors"))["embeddings"]
    sts, wordsim = STS(args.data, STS_FILES), WordSimilarity(args.data)

    def scores(encoder: Any) -> dict[str, float]:
        return {**{f"sts:{k}": v for k, v in sts(encoder).items()}, "ws:mean": wordsim(encoder)["mean"]}

    stage1 = stage1_table(args.work, None)
    width = stage1.dim
    if "geometry" not in entry:
        rng = np.random.default_rng(0)
        stage2, abtt = sentence_pca(stage1, sentences, SWESettings.pca_sentences, None, 256)
        top = default_remove_top(width)
        entry["geometry"] = {
            "width": width,
            "default_remove_top": top,
            "stage1": table_scale(stage1.vectors),
            "stage2_default": table_scale(stage2.vectors),
            "top_variance": [round(float(x), 4) for x in abtt.explained[:16]],
            "variance_removed": float(abtt.explained[:top].sum()),
            "variance_kept_256": float(abtt.explained[top : top + 256].sum()),
            "targets": target_geometry(targets, rng),
        }
        save()
    print(f"{label}: geometry {json.dumps(entry['geometry'])}", flush=True)
    if not args.no_teacher_sts and "teacher_scores" not in entry:
        started = time.perf_counter()
        texts = sorted(set(sts.sentences()))
        vectors = teacher_embeddings(texts, args.work / "onnx", args.teacher)
        rows = {t: i for i, t in enumerate(texts)}

        class Fixed:
            def encode(self, batch: list[str]) -> np.ndarray:
                return vectors[[rows[t] for t in batch]]

        entry["teacher_scores"] = {
            **{f"sts:{k}": v for k, v in sts(Fixed()).items()},
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(f"{label}: teacher {entry['teacher_scores']}", flush=True)
        save()

    tables: dict[tuple[Any, ...], Any] = {}
    for spec in (s.strip() for s in args.runs.split(",") if s.strip()):
        options = parse_run(spec)
        layer, dim = options.pop("layer", None), options.pop("dim", 256)
        top, kd = options.pop("remove_top", None), options.pop("kd", True)
        started = time.perf_counter()
        if (layer, dim, top) not in tables:
            tables[(layer, dim, top)] = sentence_pca(
                stage1_table(args.work, layer), sentences, SWESettings.pca_sentences, top, dim
            )
        stage2, abtt = tables[(layer, dim, top)]
        pca_seconds = time.perf_counter() - started
        result: dict[str, Any] = {
            "dim": stage2.dim,
            "remove_top": len(abtt.removed),
            "layer": layer or "last",
            "stage2_rms": table_scale(stage2.vectors)["rms"],
            "pca_seconds": round(pca_seconds, 1),
        }
        model = stage2
        if kd:
            settings = replace(KDSettings(), **options)
            objective = make_recorded(Distillation)(
                stage2, sentences, targets, settings.tau, settings.center_targets
            )
            started = time.perf_counter()
            model, stats = train_table(stage2, [objective], settings, show_progress=False)
            seconds = time.perf_counter() - started
            every = settings.eval_every
            train = [
                float(np.mean(objective.train[i : i + every])) for i in range(0, len(objective.train), every)
            ]
            result.update(
                kd=asdict(settings),
                steps=stats["steps"],
                best_step=int(np.argmin(objective.dev)) * every,
                dev_start=stats["dev_loss_start"],
                dev_best=stats["dev_loss_best"],
                dev_curve=[round(x, 5) for x in objective.dev],
                train_curve=[round(x, 5) for x in train],
                train_sentences=stats["kd_train"],
                dev_sentences=stats["kd_dev"],
                kd_seconds=round(seconds, 1),
            )
        result.update(scores(model))
        entry["runs"][spec] = result
        save()
        steps = f"{result.get('steps', 0)} steps (best {result.get('best_step', 0)})" if kd else "no KD"
        print(
            f"{label} {spec}: STS {result['sts:stsb-dev']:.2f} / {result['sts:sickr-trial']:.2f} / "
            f"{result['sts:sickr-train']:.2f} = {result['sts:mean']:.2f}, word-sim {result['ws:mean']:.2f}, "
            f"{steps}, {result.get('kd_seconds', 0):.0f} s",
            flush=True,
        )
    report(label, entry)


def report(label: str, entry: dict[str, Any]) -> None:
    """One row per run of this teacher."""
    rows = [
        [
            spec,
            *(f"{r['sts:' + f.removesuffix('.tsv')]:.2f}" for f in STS_FILES),
            f"{r['sts:mean']:.2f}",
            f"{r['ws:mean']:.2f}",
            str(r.get("steps", "—")),
            str(r.get("best_step", "—")),
            f"{r.get('kd_seconds', 0):.0f}",
        ]
        for spec, r in entry["runs"].items()
    ]
    columns = [
        "run",
        "STS-B dev",
        "SICK-R trial",
        "SICK-R train",
        "STS mean",
        "word-sim",
        "steps",
        "best",
        "KD s",
    ]
    common.print_table(f"{label}: levers on one stage-1 table", columns, rows)


def markdown(saved: dict[str, Any]) -> None:
    """The tables of studies/README.md: every run of every teacher, then the teachers' geometry."""
    print(
        "| teacher | run | dims | k | STS-B dev | SICK-R trial | SICK-R train | STS mean | word-sim "
        "| KD steps (best) | KD s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, entry in saved["teachers"].items():
        teacher = entry.get("teacher_scores")
        if teacher:
            cells = " | ".join(f"{teacher['sts:' + f.removesuffix('.tsv')]:.2f}" for f in STS_FILES)
            print(
                f"| {label} | the teacher itself (int8) | — | — | {cells} | {teacher['sts:mean']:.2f} "
                "| — | — | — |"
            )
        for spec, r in entry["runs"].items():
            cells = " | ".join(f"{r['sts:' + f.removesuffix('.tsv')]:.2f}" for f in STS_FILES)
            steps = f"{r['steps']:,} ({r['best_step']:,})" if "steps" in r else "no KD"
            print(
                f"| {label} | `{spec}` | {r['dim']} | {r['remove_top']} | {cells} | {r['sts:mean']:.2f} | "
                f"{r['ws:mean']:.2f} | {steps} | {r.get('kd_seconds', 0):.0f} |"
            )
    print()
    print(
        "| teacher | width | k default | stage-1 RMS | stage-2 RMS | top-k variance | target cos (raw) | "
        "centred cos sd | neighbours τ 0.02 / 0.05 / 0.1 | extraction s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, entry in saved["teachers"].items():
        g, t = entry.get("geometry"), entry.get("geometry", {}).get("targets", {})
        if not g:
            continue
        spread = " / ".join(f"{t[f'neighbours_tau{tau}']:.1f}" for tau in TAUS)
        print(
            f"| {label} | {g['width']} | {g['default_remove_top']} | {g['stage1']['rms']:.3f} | "
            f"{g['stage2_default']['rms']:.3f} | {100 * g['variance_removed']:.1f} % | "
            f"{t['cos_raw_mean']:.3f} | {t['cos_centred_std']:.3f} | {spread} | "
            f"{entry['extraction'].get('extract_seconds')} |"
        )


if __name__ == "__main__":
    main()
