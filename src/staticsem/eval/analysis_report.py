"""``staticsem analyze``: run the two SWE analyses on a model and write plots, JSON and a short summary."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.eval.analysis import (
    DEFAULT_FREQ,
    Inputs,
    component_analysis,
    norm_analysis,
    prepare,
)
from staticsem.eval.base import require
from staticsem.eval.report import save_figure, write_text_file

logger = logging.getLogger(__name__)
_POINTS = 20_000  # points drawn per scatter (a fixed-seed sample of the vocabulary)


def analyze(
    model_path: Path,
    data_dir: Path,
    out_dir: Path,
    *,
    freq_file: Path | None = None,
    components: int = 5,
    top: int = 15,
    min_sentences: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Run both analyses on ``model_path``; write analysis.json, summary.md and the plots to ``out_dir``.

    Sentences come from ``data_dir``'s STS files; ``freq_file`` defaults to ``data_dir/auxiliary/…``.

    :returns: the JSON-ready results (summary text under ``"summary"``).
    """
    from staticsem.eval.sts import STS
    from staticsem.io import load

    require("scipy", "matplotlib")
    model = load(model_path)
    sentences = STS(data_dir).sentences()
    freq = freq_file if freq_file is not None else data_dir / DEFAULT_FREQ
    inputs = prepare(
        model,
        sentences,
        folder=model_path if model_path.is_dir() else None,
        freq_file=freq if freq.is_file() or freq_file is not None else None,
        components=components,
    )
    comps = component_analysis(inputs, top)
    norms = norm_analysis(inputs, model, sentences, min_sentences)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(len(inputs.words), min(_POINTS, len(inputs.words)), replace=False))
    plots = {
        "components": _plot_components(inputs, comps, sample, out_dir / "components.png"),
        "norms": _plot_norms(inputs, norms, sample, out_dir / "norms.png"),
    }
    result: dict[str, Any] = {
        "model": str(model_path),
        "words": len(model),
        "dim": model.dim,
        "sources": {
            **inputs.sources,
            "sentences": f"{len(sentences):,} distinct STS sentences from {data_dir}",
        },
        "components": comps["components"],
        "norms": {k: v for k, v in norms.items() if not isinstance(v, np.ndarray)},
        "plots": {k: p.name for k, p in plots.items()},
    }
    result["summary"] = summary(result)
    write_text_file(out_dir / "analysis.json", json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    images = "\n".join(f"![{k}]({p.name})" for k, p in plots.items())
    write_text_file(
        out_dir / "summary.md", f"# Analysis of `{model_path}`\n\n{result['summary']}\n\n{images}\n"
    )
    return result


def _rho(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:+.2f}"


def _direction(value: float, more: str, less: str) -> str:
    if math.isnan(value):
        return "cannot be measured"
    strength = "strongly" if abs(value) >= 0.5 else "moderately" if abs(value) >= 0.3 else "weakly"
    return f"{strength} {more if value > 0 else less}"


def summary(result: dict[str, Any]) -> str:
    """A short plain-text account of both analyses, naming the sources used."""
    lines = [
        f"Model: {result['model']} ({result['words']:,} words × {result['dim']} dims).",
        f"Components: {result['sources']['components']}.",
        f"Word frequency: {result['sources']['frequency']}.",
        f"Sentences for influence: {result['sources']['sentences']}.",
        "",
        "(a) Principal components (loading = ⟨w − X̄, u⟩; ρ = Spearman with word frequency):",
    ]
    for comp in result["components"]:
        share = comp["explained_variance"]
        share_text = f", {100 * share:.1f}% of sentence variance" if share is not None else ""
        positive = ", ".join(w for w, _ in comp["top_positive"][:8])
        negative = ", ".join(w for w, _ in comp["top_negative"][:8])
        lines.append(
            f"- PC{comp['component']}{share_text}: "
            f"ρ(loading, freq) = {_rho(comp['spearman_loading_frequency'])}, "
            f"ρ(|loading|, freq) = {_rho(comp['spearman_abs_loading_frequency'])}; "
            f"+ {positive}; − {negative}"
        )
    norms = result["norms"]
    lines += [
        "",
        f"(b) Norms ({norms['words_with_frequency']:,} words with a frequency, "
        f"{norms['words_with_influence']:,} seen in ≥ {norms['min_sentences']} sentences):",
        f"- ρ(norm, frequency) = {_rho(norms['spearman_norm_frequency'])}: frequent words have "
        + _direction(norms["spearman_norm_frequency"], "larger norms", "smaller norms")
        + ".",
        f"- ρ(norm, influence) = {_rho(norms['spearman_norm_influence'])}: a larger norm "
        + _direction(norms["spearman_norm_influence"], "means more influence", "means less influence")
        + " on the sentence embedding.",
        f"- ρ(influence, frequency) = {_rho(norms['spearman_influence_frequency'])}.",
    ]
    return "\n".join(lines)


def _log_counts(inputs: Inputs) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(inputs.counts)


def _plot_components(inputs: Inputs, comps: dict[str, Any], sample: np.ndarray, path: Path) -> Path:
    from matplotlib.figure import Figure

    loadings = comps["loadings"]
    shown = min(4, loadings.shape[1])
    fig = Figure(figsize=(4 * shown, 3.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, shown))
    freq = _log_counts(inputs)[sample]
    for i, ax in enumerate(axes):
        column = loadings[sample, i]
        keep = np.isfinite(freq)
        ax.scatter(freq[keep], column[keep], s=2, alpha=0.25, rasterized=True)
        _binned_median(ax, freq[keep], column[keep])
        rho = _rho(comps["components"][i]["spearman_loading_frequency"])
        ax.set_title(f"PC{i + 1} (ρ with frequency = {rho})", fontsize=10)
        ax.set_xlabel("log10 word count")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("loading ⟨w − X̄, u⟩")
    fig.suptitle("loadings on the top principal components against word frequency (red: binned median)")
    save_figure(fig, path)
    return path


def _plot_norms(inputs: Inputs, norms: dict[str, Any], sample: np.ndarray, path: Path) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4), layout="constrained")
    left, right = fig.subplots(1, 2)
    freq, norm, effect = _log_counts(inputs)[sample], norms["norms"][sample], norms["influence"][sample]
    _scatter_panel(
        left,
        freq,
        norm,
        np.isfinite(freq),
        ("log10 word count", "vector norm"),
        f"norm vs frequency (ρ = {_rho(norms['spearman_norm_frequency'])})",
        size=2,
        alpha=0.25,
    )
    _scatter_panel(
        right,
        norm,
        effect,
        np.isfinite(effect),
        ("vector norm", "mean 1 − cos(s, s without the word)"),
        f"influence vs norm (ρ = {_rho(norms['spearman_norm_influence'])})",
        size=3,
        alpha=0.3,
    )
    save_figure(fig, path)
    return path


def _scatter_panel(
    ax: Any,
    x: np.ndarray,
    y: np.ndarray,
    keep: np.ndarray,
    labels: tuple[str, str],
    title: str,
    *,
    size: float,
    alpha: float,
) -> None:
    """One scatter of the kept points with its binned-median line, labels, title and grid."""
    ax.scatter(x[keep], y[keep], s=size, alpha=alpha, rasterized=True)
    _binned_median(ax, x[keep], y[keep])
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)


def _binned_median(ax: Any, x: np.ndarray, y: np.ndarray, bins: int = 20) -> None:
    if len(x) < bins:
        return
    edges = np.quantile(x, np.linspace(0, 1, bins + 1))
    which = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    centers = [float(np.median(x[which == b])) for b in range(bins) if (which == b).any()]
    medians = [float(np.median(y[which == b])) for b in range(bins) if (which == b).any()]
    ax.plot(centers, medians, color="red", linewidth=1.5)
