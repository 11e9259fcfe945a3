"""The merged ledger held as columns: one small code per line for each field, the distinct values once.

At the end of a large run the controller holds every ledger line (60,000 at 5,000 tasks) from the merge
to the last report; as :class:`~pytest_gauge._internal.records.LedgerRecord` objects, each with its own
call id, usage object and floats, that was about 900 bytes a line. Here a line is a code per field (one
byte for a field with few distinct values: status, role, model, attempt...), its two varying floats
(latency, timestamp) in a flat array and its call id as its work's plus the call number; the records
are made on demand, a block at a time, whenever the ledger is iterated, and are equal to the ones
appended (same field values and types, so every output written from them keeps its bytes).
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import fields
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from . import LedgerRecord, Usage, dumps

__all__ = ["LedgerColumns", "per_ledger"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

_FIELDS = tuple(f.name for f in fields(LedgerRecord))
_FLOATS = ("latency_s", "ts", "cost")
"""Fields that vary from line to line: a float array (values of another type kept aside)."""
_DERIVED = ("call_id",)
"""Stored as its call number when it is ``<work>#<n>``, as it always is when written by the gateway."""
_CODED = tuple(f for f in _FIELDS if f not in _FLOATS and f not in _DERIVED)
_BLOCK = 4096
"""Records made at a time when the columns are iterated."""


class _Codes:
    """A column of hashable values: each line's code (the narrowest array that holds them) into the
    distinct values, kept once. Values are told apart by type too (``1``, ``1.0`` and ``True`` are equal
    in Python, not in JSON), and floats by their repr (``0.0`` and ``-0.0``)."""

    __slots__ = ("codes", "lookup", "values")

    def __init__(self) -> None:
        self.codes = array("B")
        self.values: list[Any] = []
        self.lookup: dict[Hashable, int] = {}

    def add(self, value: Any, key: Hashable) -> None:
        code = self.lookup.get(key)
        if code is None:
            code = self.lookup[key] = len(self.values)
            self.values.append(value)
            if code in (1 << 8, 1 << 16):  # codes count up: one byte, then two, then four
                self.codes = array("H" if code == 1 << 8 else "I", self.codes)
        self.codes.append(code)

    def take(self, order: Iterable[int]) -> _Codes:
        """The column's lines in ``order`` (the distinct values shared, not copied)."""
        out = _Codes()
        out.values = self.values
        out.codes = array(self.codes.typecode, (self.codes[i] for i in order))
        return out

    def block(self, start: int, stop: int) -> list[Any]:
        return list(map(self.values.__getitem__, self.codes[start:stop]))


def _key(value: Any) -> Hashable:
    """What tells two values apart in a column: type and value (a float by its repr, a usage by its
    fields and its raw object's JSON, which equality leaves out)."""
    if value is None or type(value) is str:
        return value  # no other type's value equals a string or None: their own key, no tuple each
    if isinstance(value, float):
        return (float, repr(value))
    if isinstance(value, Usage):
        raw = None if value.raw is None else dumps(value.raw)
        counts = (
            value.input_tokens,
            value.output_tokens,
            value.cached_input_tokens,
            value.cache_write_tokens,
        )
        return (Usage, *counts, value.cache_write_1h_tokens, value.reasoning_tokens, raw)
    return (type(value), value)


class _Floats:
    """A column of mostly-float values: a float array, a flag per line for None (a cost no price gives:
    every line of a run without prices) and the lines of another type (an int) kept aside by line
    number; their float slot unused."""

    __slots__ = ("floats", "none", "other")

    def __init__(self) -> None:
        self.floats = array("d")
        self.none = bytearray()
        self.other: dict[int, Any] = {}

    def add(self, value: Any) -> None:
        if type(value) is float:
            self.floats.append(value)
            self.none.append(0)
            return
        if value is not None:
            self.other[len(self.floats)] = value
        self.floats.append(0.0)
        self.none.append(value is None)

    def take(self, order: Iterable[int]) -> _Floats:
        out = _Floats()
        for i in order:
            out.add(None if self.none[i] else self.other[i] if i in self.other else self.floats[i])
        return out

    def block(self, start: int, stop: int) -> list[Any]:
        values: list[Any] = self.floats[start:stop].tolist()
        flags = self.none[start:stop]
        i = flags.find(1)
        while i >= 0:
            values[i] = None
            i = flags.find(1, i + 1)
        if self.other:
            for i in range(start, stop):
                if i in self.other:
                    values[i - start] = self.other[i]
        return values


class LedgerColumns(Sequence[LedgerRecord]):
    """Ledger records held as columns (see the module docstring): append them, then read them back as
    a sequence of equal records, made anew on each access."""

    __slots__ = ("_coded", "_derived", "_floats", "_number", "_size")

    def __init__(self, records: Iterable[LedgerRecord] = ()) -> None:
        self._coded = {name: _Codes() for name in _CODED}
        self._floats = {name: _Floats() for name in _FLOATS}
        self._number = _Codes()  # the call number n of ``<work>#<n>``, else the call id itself
        self._size = 0
        self._derived: dict[Hashable, Any] = {}  # per_ledger's tables of these lines
        for record in records:
            self.append(record)

    def derived(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()`` (a table of these lines, named by ``key``), computed once for the lines as they
        are now: appending a line forgets it (:func:`per_ledger`)."""
        if key not in self._derived:
            self._derived[key] = compute()
        value: _T = self._derived[key]
        return value

    def append(self, record: LedgerRecord) -> None:
        """One more line at the end."""
        if self._derived:
            self._derived = {}
        for name, column in self._coded.items():
            value = getattr(record, name)
            column.add(value, _key(value))
        for name, floats in self._floats.items():
            floats.add(getattr(record, name))
        number = _call_number(record.call_id, record.work)
        self._number.add(number, _key(number))
        self._size += 1

    def done(self) -> LedgerColumns:
        """These columns, their lookup tables (needed only while appending) let go; returns self."""
        for column in (*self._coded.values(), self._number):
            column.lookup = {}
        return self

    def of_suite(self, suite: str) -> LedgerColumns:
        """The lines of ``suite``, in order (these columns themselves when every line is of it)."""
        column = self._coded["suite"]
        codes = [c for c, v in enumerate(column.values) if v == suite]
        lines = [i for i, c in enumerate(column.codes) if c in codes]
        return self if len(lines) == self._size else self.take(lines)

    def take(self, order: Iterable[int]) -> LedgerColumns:
        """A new ledger of these lines in ``order`` (line numbers; some may be left out or repeated)."""
        order = list(order)
        out = LedgerColumns()
        out._coded = {name: column.take(order) for name, column in self._coded.items()}
        out._floats = {name: column.take(order) for name, column in self._floats.items()}
        out._number = self._number.take(order)
        out._size = len(order)
        return out

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> LedgerRecord: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[LedgerRecord]: ...
    def __getitem__(self, index: int | slice) -> LedgerRecord | Sequence[LedgerRecord]:
        if isinstance(index, slice):
            return self.take(range(*index.indices(self._size)))
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("ledger line out of range")
        return self._records(index, index + 1)[0]

    def __iter__(self) -> Iterator[LedgerRecord]:
        for start in range(0, self._size, _BLOCK):
            yield from self._records(start, min(start + _BLOCK, self._size))

    def _records(self, start: int, stop: int) -> list[LedgerRecord]:
        """Lines ``start`` to ``stop`` as records, made column by column (a list per field, then one
        constructor call per line with the fields in order)."""
        block = {name: column.block(start, stop) for name, column in self._coded.items()}
        block |= {name: column.block(start, stop) for name, column in self._floats.items()}
        works, numbers = block["work"], self._number.block(start, stop)
        block["call_id"] = [f"{w}#{n}" if type(n) is int else n for w, n in zip(works, numbers, strict=True)]
        return list(map(LedgerRecord, *(block[name] for name in _FIELDS)))


def per_ledger(
    table: Callable[Concatenate[Sequence[LedgerRecord], _P], _T],
) -> Callable[Concatenate[Sequence[LedgerRecord], _P], _T]:
    """``table``, a pure function of a ledger (and hashable arguments) whose value nobody changes,
    computed once per :class:`LedgerColumns`: the reports ask for the same tables (per model, per role,
    per key) several times, and each pass over the columns makes every record again (about 2 us a
    line). Any other sequence is passed through."""

    @functools.wraps(table)
    def once(ledger: Sequence[LedgerRecord], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        if not isinstance(ledger, LedgerColumns):
            return table(ledger, *args, **kwargs)
        key = (table, args, tuple(sorted(kwargs.items())))
        return ledger.derived(key, lambda: table(ledger, *args, **kwargs))

    return once


def _call_number(call_id: str, work: str) -> int | str:
    """``n`` when ``call_id`` is exactly ``<work>#<n>`` (``n`` written as Python writes the int), else the
    call id itself (kept whole)."""
    head, sep, tail = call_id.rpartition("#")
    if sep and head == work and tail.isascii() and tail.isdigit() and str(int(tail)) == tail:
        return int(tail)
    return call_id
