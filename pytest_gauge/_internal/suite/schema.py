"""The one JSON-Schema validator of a suite: tool arguments (``Tool.parameters``) and the ``tool_args``
rule's ``schema`` are both checked with ``jsonschema``'s Draft 2020-12 validator, built once per schema.

Every keyword of the draft is enforced: types, ``enum``/``const``, numeric bounds, string lengths and
``pattern``, array and object sizes, ``anyOf``/``oneOf``/``allOf``/``not``, ``if``/``then``/``else``,
``dependentRequired``/``dependentSchemas``, ``prefixItems``/``contains``, ``unevaluated*``, and ``format``
(asserted with ``jsonschema``'s format checker where it knows the format). ``$ref`` resolves inside the
schema itself (``#/$defs/...``); nothing is ever fetched over the network, so a ``$ref`` to another
document is an invalid schema. ``pattern`` runs with the same time bound as the
regex rules (:data:`pytest_gauge._internal.suite.regex_bound.REGEX_TIMEOUT`), so an argument cannot hang a
worker.

A schema that is itself invalid raises :class:`SchemaError` naming where it was declared and the path
inside it, e.g. ``tool check_stock.parameters.properties.sku.type: 'strnig' is not a JSON Schema type``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from . import regex_bound

if TYPE_CHECKING:  # jsonschema is imported when the first schema is compiled (:func:`_kit`)
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator
    from referencing import Registry, Resource

__all__ = ["JSON_TYPES", "CompiledSchema", "SchemaError", "compile_schema"]

JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
"""The type names of JSON Schema."""

_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are JSON data, not schemas (a ``$ref`` key inside them is not a reference)."""

_MAX_SHOWN = 60


class SchemaError(ValueError):
    """A JSON Schema that is itself invalid: ``where`` it was declared, the ``path`` inside it (e.g.
    ``.properties.sku.type``, empty for the whole schema) and the ``reason``."""

    def __init__(self, where: str, path: str, reason: str) -> None:
        super().__init__(f"{where}{path}: {reason}")
        self.where = where
        self.path = path
        self.reason = reason


def _bounded_pattern(
    validator: Validator, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """``pattern`` with the regex rules' time bound (``re.search`` semantics, as the draft asks)."""
    error = _kit().validation_error  # the class of the kit's own import (see _Kit)

    if not validator.is_type(instance, "string"):
        return
    try:
        found = regex_bound.bounded_search(pattern, instance)
    except regex_bound.PatternTimeout:
        yield error(
            f"the pattern {pattern!r} ran for more than {regex_bound.REGEX_TIMEOUT:g}s on {_shown(instance)}"
        )
        return
    if found is None:
        yield error(f"{instance!r} does not match {pattern!r}")


class _Kit(NamedTuple):
    """The draft's validator class with the bounded ``pattern``, an empty registry (the schema itself
    only, and no ``retrieve``: nothing remote), the meta-schema's validator, and the names of the same
    import this module uses: an exception class caught here must be the one the cached validators raise,
    even after ``sys.modules`` lost the packages (pytest's ``pytester`` drops modules a test imported)."""

    draft: type[Validator]
    registry: Registry[Any]
    meta: Validator
    unresolvable: type[Exception]
    validation_error: type[ValidationError]
    best_match: Callable[..., ValidationError | None]
    resource: Callable[[Any], Resource[Any]]


@functools.cache
def _kit() -> _Kit:
    """Built at the first schema, not at import: ``jsonschema`` and ``referencing`` cost about 90 ms of
    imports in every process, and most runs (every xdist worker of a suite without tools) compile none."""
    from jsonschema import Draft202012Validator  # deferred: keeps jsonschema off pytest's start-up
    from jsonschema.exceptions import (  # deferred: keeps jsonschema off pytest's start-up
        ValidationError,
        best_match,
    )
    from jsonschema.validators import extend  # deferred: keeps jsonschema off pytest's start-up
    from referencing import Registry  # deferred: keeps referencing off pytest's start-up
    from referencing.exceptions import Unresolvable  # deferred: keeps referencing off pytest's start-up
    from referencing.jsonschema import DRAFT202012  # deferred: keeps referencing off pytest's start-up

    draft: type[Validator] = extend(  # type: ignore[no-untyped-call]  # untyped in types-jsonschema
        Draft202012Validator, {"pattern": _bounded_pattern}
    )
    meta = Draft202012Validator(
        Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    return _Kit(
        draft, Registry(), meta, Unresolvable, ValidationError, best_match, DRAFT202012.create_resource
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def _dotted(where: str, path: Sequence[str | int]) -> str:
    """``where`` followed by a JSON path: ``.name`` for properties, ``[i]`` for items."""
    return where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _schema_problem(error: ValidationError) -> tuple[list[str | int], str]:
    """Where in the schema a meta-schema error is, and a message that names JSON Schema's own terms."""
    path = list(error.absolute_path)
    value = error.instance
    on_type = (path and path[-1] == "type") or (len(path) >= 2 and path[-2] == "type")
    if on_type and isinstance(value, str) and value not in JSON_TYPES:
        return path, f"{value!r} is not a JSON Schema type ({', '.join(JSON_TYPES)})"
    return path, error.message


def _references(schema: Any) -> Iterator[str]:
    """Every ``$ref`` in schema positions, not below a nested ``$id`` (those resolve against it)."""
    if isinstance(schema, Mapping):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref
        for key, sub in schema.items():
            if key in _DATA_KEYWORDS or (isinstance(sub, Mapping) and "$id" in sub):
                continue
            yield from _references(sub)
    elif isinstance(schema, list):
        for sub in schema:
            yield from _references(sub)


@dataclass(frozen=True)
class CompiledSchema:
    """A checked schema and its validator, built once; :meth:`errors` checks a value against it."""

    schema: Mapping[str, Any]
    validator: Validator = field(repr=False, compare=False)

    def errors(self, value: Any, where: str = "arguments") -> list[str]:
        """Every way ``value`` breaks the schema (the validator's messages, each after its JSON path
        under ``where``); empty when it conforms."""
        try:
            found = list(self.validator.iter_errors(value))
        except _kit().unresolvable as exc:  # a $ref below a nested $id that does not resolve
            return [f"{where}: the schema's reference cannot be resolved ({exc})"]
        return [f"{_dotted(where, list(e.absolute_path))}: {e.message}" for e in found]

    def first_error(self, value: Any, where: str = "arguments") -> str | None:
        """The most relevant way ``value`` breaks the schema (``jsonschema``'s best match), or None."""
        kit = _kit()
        try:
            error = kit.best_match(self.validator.iter_errors(value))
        except kit.unresolvable as exc:
            return f"{where}: the schema's reference cannot be resolved ({exc})"
        return None if error is None else f"{_dotted(where, list(error.absolute_path))}: {error.message}"


def compile_schema(schema: object, where: str) -> CompiledSchema:
    """Check ``schema`` against the Draft 2020-12 meta-schema and resolve its ``$ref``s, then build its
    validator. ``where`` names the declaration for errors (e.g. ``tool lookup_order.parameters``).

    Raises :class:`SchemaError` for a schema that is not an object, breaks the meta-schema, or refers
    to something it does not contain.
    """
    if not isinstance(schema, Mapping):
        raise SchemaError(where, "", f"a JSON Schema must be an object, got {type(schema).__name__}")
    kit = _kit()
    problem = kit.best_match(kit.meta.iter_errors(schema))
    if problem is not None:
        path, message = _schema_problem(problem)
        raise SchemaError(where, _dotted("", path), message)
    resolver = kit.registry.resolver_with_root(kit.resource(schema))
    for ref in _references(schema):
        try:
            resolver.lookup(ref)
        except kit.unresolvable as exc:
            raise SchemaError(
                where,
                "",
                f"$ref {ref!r} does not resolve to a part of this schema ({type(exc).__name__}); use "
                "'#/$defs/NAME' with the definition under $defs (nothing is fetched over the network)",
            ) from None
    validator = kit.draft(schema, registry=kit.registry, format_checker=kit.draft.FORMAT_CHECKER)
    return CompiledSchema(schema, validator)
