"""The time bound on a user's regular expression (the regex rules and a tool schema's ``pattern``), in
its own module so the rules and the schema validator share it without importing each other."""

from __future__ import annotations

import re

__all__ = ["REGEX_TIMEOUT", "PatternTimeout", "bounded_search"]


REGEX_TIMEOUT = 1.0
"""Seconds one pattern may spend on one text: a catastrophically backtracking pattern (``(a+)+$``) is a
rule error on that transcript instead of a worker that never returns (the ``regex`` package's timeout)."""


class PatternTimeout(Exception):
    """A pattern ran past :data:`REGEX_TIMEOUT` on a text."""


def bounded_search(pattern: str, text: str, flags: int = 0, *, full: bool = False) -> str | None:
    """The text matched by ``pattern`` in ``text`` (``full``: the whole text), None if none, within
    :data:`REGEX_TIMEOUT` seconds (else :class:`PatternTimeout`). ``flags`` are ``re``'s bits."""
    import regex  # deferred: keeps regex off pytest's start-up

    bits = (
        (regex.IGNORECASE if flags & re.IGNORECASE else 0)
        | (regex.MULTILINE if flags & re.MULTILINE else 0)
        | (regex.DOTALL if flags & re.DOTALL else 0)
    )
    find = regex.fullmatch if full else regex.search
    try:
        match = find(pattern, text, bits, timeout=REGEX_TIMEOUT)
    except TimeoutError:
        raise PatternTimeout(
            f"rule error: the pattern {pattern!r} ran for more than {REGEX_TIMEOUT:g}s on this transcript"
            " (catastrophic backtracking?): simplify it"
        ) from None
    return None if match is None else str(match.group(0))
