"""Errors that staticsem raises for bad input; the CLI turns them into one-line messages."""

from __future__ import annotations


class StaticsemError(Exception):
    """Base class: a problem with the user's input, reported without a traceback."""


class ModelFormatError(StaticsemError):
    """A model file or folder is missing, corrupt, truncated or inconsistent."""


class InputError(StaticsemError):
    """Text input (a file of lines, a word, an option) cannot be used."""
