"""Errors that staticsem raises for bad input; the CLI turns them into one-line messages."""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


class StaticsemError(Exception):
    """Base class: a problem with the user's input, reported without a traceback."""


class ModelFormatError(StaticsemError):
    """A model file or folder is missing, corrupt, truncated or inconsistent."""


class InputError(StaticsemError):
    """Text input (a file of lines, a word, an option) cannot be used."""


class MissingExtra(StaticsemError, ImportError):
    """A package of an optional extra is not installed; the message names the ``pip install`` line.

    An ``ImportError`` for callers of the library, one line (exit code 2) in the CLI.
    """


def parse_choice(kind: type[E], value: str | E, what: str) -> E:
    """Convert a user string to the enum ``kind``; an unknown value raises ``InputError`` with the choices."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(str(member.value) for member in kind)
        raise InputError(f"unknown {what} {value!r}; choose one of {choices}") from None
