"""Storage options of a staticsem model: bytes on disk vs STS-B dev quality.

Takes the 30k-word x 256-dim token-distilled model (built once from the 30,000 most frequent Wikipedia
words with ``staticsem.distill("token", dtype="float32")`` and cached in ``--models``), saves it as float32,
float16, int8 with one scale per row and int8 with one scale for the whole model, and reports for each:
the bytes of ``model.safetensors`` and of the whole folder (vocab.json, tokenizer.json and config.json
included), the bytes of the matrix held in memory, and the STS-B dev Spearman x 100 (``scipy.stats.spearmanr``
of the cosine of the two sentences' embeddings vs the gold score), with its change vs float32 at 256 dims.
Each stored variant is also loaded truncated to 128 and 64 dims (``staticsem.load(path, dim=...)``); those
rows keep the full folder's disk size (truncation happens at load) and show the smaller in-memory matrix.

Run::

    python benchmarks/size_options.py --output benchmarks/results/size_options.json
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

import _common as common

VARIANTS: list[tuple[str, dict[str, str]]] = [
    ("float32", {"dtype": "float32"}),
    ("float16", {"dtype": "float16"}),
    ("int8, per-row scale", {"dtype": "int8", "scale": "row"}),
    ("int8, per-model scale", {"dtype": "int8", "scale": "model"}),
]
DIMS = (256, 128, 64)


def sts_spearman(model: Any, gold: list[float], first: list[str], second: list[str]) -> float:
    """Spearman x 100 of the embeddings' cosines (rows are L2-normalised or zero) vs the gold scores."""
    from scipy.stats import spearmanr

    a, b = model.encode(first), model.encode(second)
    cosine = np.einsum("ij,ij->i", a, b)
    return float(spearmanr(cosine, gold).statistic) * 100


def matrix_bytes(model: Any) -> int:
    """Bytes of the stored matrix plus its int8 scales, as held in memory after loading."""
    return int(model.vectors.nbytes + (0 if model.scales is None else model.scales.nbytes))


def main() -> None:
    args = common.base_parser(__doc__).parse_args()
    common.offline()
    import staticsem

    source, _ = common.build_staticsem(args.models, args.data)
    gold, first, second = common.read_stsb(args.data)
    full = staticsem.load(source)
    print(f"source: {source} ({full!r}); STS-B dev: {len(gold)} pairs", flush=True)

    from staticsem.errors import InputError

    rows: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    for name, options in VARIANTS:
        folder: Path = args.models / "size-options" / "-".join(options.values())
        try:
            full.save(folder, **options)
        except InputError as exc:  # one int8 scale per model where row norms spread (int8_scales.py)
            refused[name] = str(exc)
            print(f"{name}: refused: {exc}", flush=True)
            continue
        for dim in DIMS:
            model = staticsem.load(folder, dim=dim)
            rows.append(
                {
                    "variant": name,
                    "options": options,
                    "dim": dim,
                    "folder": str(folder),
                    "safetensors_bytes": (folder / "model.safetensors").stat().st_size,
                    "folder_bytes": common.folder_bytes(folder),
                    "matrix_bytes": matrix_bytes(model),
                    "stsb_dev_spearman": sts_spearman(model, gold, first, second),
                }
            )
    reference = next(r["stsb_dev_spearman"] for r in rows if r["variant"] == "float32" and r["dim"] == 256)
    for row in rows:
        row["delta_vs_float32"] = row["stsb_dev_spearman"] - reference

    rows.sort(key=lambda r: (-r["dim"], [v for v, _ in VARIANTS].index(r["variant"])))
    table = [
        [
            r["variant"],
            str(r["dim"]),
            f"{r['safetensors_bytes']:,}",
            common.mib(r["safetensors_bytes"]),
            common.mib(r["folder_bytes"]),
            common.mib(r["matrix_bytes"]),
            f"{r['stsb_dev_spearman']:.2f}",
            f"{r['delta_vs_float32']:+.3f}",
        ]
        for r in rows
    ]
    title = f"staticsem {len(full):,} words x {full.dim} dims: storage vs STS-B dev (Spearman x 100)"
    common.print_table(
        title,
        [
            "stored as",
            "dims at load",
            "model.safetensors bytes",
            "model.safetensors",
            "whole folder",
            "matrix in memory",
            "STS-B dev",
            "vs float32@256",
        ],
        table,
    )
    common.save_json(
        args.output,
        {
            "benchmark": "size_options",
            "date": time.strftime("%Y-%m-%d"),
            "source": str(source),
            "words": len(full),
            "dim": full.dim,
            "stsb_pairs": len(gold),
            "rows": rows,
            "refused": refused,
        },
    )


if __name__ == "__main__":
    main()
