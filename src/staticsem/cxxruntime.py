"""A guard for two C++ runtimes in one process: usearch's static libstdc++ beside the system's.

usearch's compiled module (2.26) links its own libstdc++ (GCC 14) statically. Its template locale facets'
``std::locale::id`` objects are ``STB_GNU_UNIQUE`` symbols, so the dynamic loader binds them to the system
``libstdc++.so.6`` when that is already in the process (numpy loads it). If the system library has not yet
set up its classic locale, usearch's copy numbers those shared ids with *its* counter; when the system
library later sets up its locale (onnxruntime's module init does), its own counter hands out indices that
collide with them, ``std::use_facet`` returns the wrong facet, and a virtual call lands in
``codecvt<char16_t>::do_unshift``: SIGSEGV while onnxruntime loads. Setting up the system locale first
(``std::locale::classic()``; importing tokenizers, torch or onnxruntime does it) numbers every id before
usearch sees them, and then any order works.

``prepare`` does that at ``import staticsem``; ``check_facets`` refuses, in one line, to load onnxruntime
into a process where the ids already collide. Both do nothing where there is no ``libstdc++.so.6``.
"""

from __future__ import annotations

import ctypes
import sys

# Facet ids each libstdc++ copy keeps for itself (explicit specialisations: plain GLOBAL symbols) ...
_OWN = (
    "_ZNSt5ctypeIcE2idE",
    "_ZNSt5ctypeIwE2idE",
    "_ZNSt7codecvtIcc11__mbstate_tE2idE",
    "_ZNSt7codecvtIwc11__mbstate_tE2idE",
    "_ZNSt7codecvtIDsc11__mbstate_tE2idE",
    "_ZNSt7codecvtIDic11__mbstate_tE2idE",
)
# ... and template facets' ids, GNU_UNIQUE: one object per process, whichever copy numbers it first.
_SHARED = (
    "_ZNSt7__cxx118numpunctIcE2idE",
    "_ZNSt7__cxx118numpunctIwE2idE",
    "_ZNSt7__cxx117collateIcE2idE",
    "_ZNSt7__cxx118messagesIcE2idE",
    "_ZNSt7__cxx1110moneypunctIcLb0EE2idE",
    "_ZNSt7__cxx1110moneypunctIcLb1EE2idE",
    "_ZNSt8numpunctIcE2idE",
    "_ZNSt7collateIcE2idE",
    "_ZNSt10moneypunctIcLb0EE2idE",
    "_ZNSt11__timepunctIcE2idE",
    "_ZNSt7num_getIcSt19istreambuf_iteratorIcSt11char_traitsIcEEE2idE",
    "_ZNSt7num_putIcSt19ostreambuf_iteratorIcSt11char_traitsIcEEE2idE",
    "_ZNSt8time_putIcSt19ostreambuf_iteratorIcSt11char_traitsIcEEE2idE",
    "_ZNSt9money_getIcSt19istreambuf_iteratorIcSt11char_traitsIcEEE2idE",
)


def _libstdcxx() -> ctypes.CDLL | None:
    """The process's ``libstdc++.so.6`` (loaded now if no module has loaded it), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libstdc++.so.6")
    except OSError:
        return None


def _ids(lib: ctypes.CDLL, names: tuple[str, ...]) -> list[int]:
    values = []
    for name in names:
        try:
            values.append(ctypes.c_size_t.in_dll(lib, name).value)
        except ValueError:  # not exported by this libstdc++
            continue
    return values


def facets_collide() -> bool:
    """True when the system libstdc++'s locale facet ids were numbered by another C++ runtime: two
    facets already share an index, or the shared ids are numbered while the library's own are not yet."""
    lib = _libstdcxx()
    if lib is None:
        return False
    own, shared = _ids(lib, _OWN), _ids(lib, _SHARED)
    numbered = [v for v in own + shared if v]
    return len(numbered) != len(set(numbered)) or (any(shared) and not all(own))


def prepare() -> None:
    """Set up the system libstdc++'s classic locale now, unless another runtime has numbered it."""
    lib = _libstdcxx()
    if lib is None or facets_collide():
        return
    classic = getattr(lib, "_ZNSt6locale7classicEv", None)
    if classic is not None:
        classic.restype = ctypes.c_void_p
        classic()


def check_facets(what: str) -> None:
    """Raise before ``what`` loads a C++ library into a process whose locale facet ids collide."""
    if not facets_collide():
        return
    from staticsem.errors import StaticsemError  # this module imports nothing of staticsem's at load

    culprit = (
        "usearch (or vicinity)" if "usearch.compiled" in sys.modules else "a library with its own C++ runtime"
    )
    raise StaticsemError(
        f"{culprit} was imported before staticsem and renumbered the C++ runtime's locale facets, so "
        f"loading {what} now would crash Python (SIGSEGV); import staticsem (or tokenizers) before it, "
        "or use --teacher-backend torch"
    )
