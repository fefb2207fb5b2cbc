"""Estimate the cost of a CRD's ``x-kubernetes-validations`` rules as the Kubernetes 1.28 API server does.

Why: the API server refuses a CRD whose rules may cost too much, before any
object is judged, and nothing else in the suite runs its estimator
(``crd_schema.problems`` evaluates rules with cel-python, which never
estimates). This module models that estimator so a test can say, offline, what
``kubectl apply -f crds/`` would answer.

What is modelled (read from the sources of Kubernetes 1.28 — apiextensions-apiserver
``pkg/apiserver/schema/cel/compilation.go``, ``pkg/apis/apiextensions/validation``,
apiserver ``pkg/cel/common/schemas.go`` — and of the cel-go release it uses, 0.16,
``checker/cost.go``):

* The schema node's CEL type and sizes: a string's size is ``maxLength x 4`` (bytes:
  OpenAPI counts code points), an enum does *not* bound it; an array's is ``maxItems``, a
  map's ``maxProperties``; without them, the size is derived from the 3 MiB request limit.
* The static cost of each construct, as cel-go charges it: identifiers and field selections
  1 (a selection only on an object or map), constants 0, list literals 10, map literals 30,
  ``has()`` 1, ``&&``/``||`` the sum of both sides, ``?:`` the condition plus the dearer
  branch, equality and string comparison ``0.1 x`` the smaller operand size, ``in`` a list
  its size (a map: 1), most other calls 1, and a comprehension (every macro: ``all``,
  ``exists``, ``exists_one``, ``map``, ``filter``) its range size x (loop condition + step),
  so nested comprehensions multiply.
* Sizes of sub-expressions as cel-go finds them: by the field path from ``self``
  (``@items``, ``@keys``, ``@values``), then literals, then "1" for fixed-size scalars, else
  unbounded (a ``map()`` or ``filter()`` result is unbounded: that is what made the first
  cross-field rule cost ``2^64 - 1``). Its oddities are kept, since the server has them too:
  a map key's size is 0, and a non-string scalar reached by path has size 0.
* The rule's cardinality: the product of the ``maxItems``/``maxProperties`` of the arrays
  and maps above it, or (one of them unbounded) the request limit divided by the node's
  smallest JSON size; the rule's cost is multiplied by it, and the server refuses a product
  above 10,000,000, and a CRD whose products add up to more than 100,000,000.

Anything else (another function, an escape sequence in a literal, ``int-or-string``,
``messageExpression``, …) raises :class:`UnsupportedCel`: an unmodelled construct could be
under-estimated, so the estimator refuses rather than guesses. It does not model cel-go's
slice aliasing between field paths, which no rule here can reach (paths of at most five
elements, each appended once).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from lark import Token, Tree

MAX_UINT64 = 2**64 - 1
MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024
"""The largest request the API server takes: unbounded sizes are derived from it."""
PER_RULE_LIMIT = 10_000_000
"""StaticEstimatedCostLimit: one rule's cost x cardinality above this refuses the CRD."""
PER_CRD_LIMIT = 100_000_000
"""StaticEstimatedCRDCostLimit: the sum over a CRD's rules above this refuses the CRD."""
RUNTIME_PER_CALL_LIMIT = 1_000_000
"""PerCallLimit: one evaluation is cut here at run time (the rule then fails)."""

_SELECT_AND_IDENT = 1
_LIST_CREATE = 10
_MAP_CREATE = 30
_STRING_TRAVERSAL = 0.1
_REGEX_STRING_LENGTH = 0.25
_PRESENCE_TEST = 1
_ACCUMULATOR = "__result__"
_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_CEL_RESERVED = frozenset(
    {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import"}
    | {"let", "loop", "package", "namespace", "return", "var", "void", "while"}
)


class UnsupportedCel(Exception):
    """A rule uses something this model does not cost: change the rule, or model it (never guess)."""


# ---------------------------------------------------------------------------------------------------------- types


@dataclass(frozen=True, eq=False)
class CelType:
    """A CEL type as the API server declares it for a schema node (``DeclType``), or as a literal makes it.

    ``max_elements`` is the node's size bound (string bytes, list items, map entries; 0 for
    objects and scalars, as the server has it); ``bounded`` says whether the schema itself
    declared that bound (``None`` where no bound applies); ``where`` names the schema node.
    """

    kind: str  # object list map string bytes int uint double bool null timestamp duration
    elem: CelType | None = None
    key: CelType | None = None
    fields: Mapping[str, CelType] = field(default_factory=dict)
    max_elements: int = 0
    min_size: int = 0
    bounded: bool | None = None
    where: str = ""


_STRING = CelType("string", min_size=2)
_MAP_KEY = CelType("string", min_size=2, bounded=True, where="(map key)")  # the server's StringType: size 0
_BOOL = CelType("bool", min_size=4)
_INT = CelType("int", min_size=1)
_UINT = CelType("uint", min_size=1)
_DOUBLE = CelType("double", min_size=1)
_NULL = CelType("null", min_size=4)
_BYTES = CelType("bytes", min_size=2)


def _unbounded_string() -> int:
    return MAX_REQUEST_SIZE_BYTES - 2


def decl_type(schema: Mapping[str, Any], where: str = "", resource_root: bool = False) -> CelType | None:
    """The type and bounds the API server gives ``schema`` (``None``: not visible to rules)."""
    if schema.get("x-kubernetes-int-or-string"):
        raise UnsupportedCel(f"{where or '<root>'}: x-kubernetes-int-or-string (a dyn value) is not modelled")
    if schema.get("x-kubernetes-embedded-resource"):
        raise UnsupportedCel(f"{where or '<root>'}: x-kubernetes-embedded-resource is not modelled")
    if resource_root:
        schema = _with_type_and_object_meta(schema)
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        elem = decl_type(items, f"{where}[]") if isinstance(items, Mapping) else None
        if elem is None:
            return None
        if "maxItems" in schema:
            size, bounded = max(int(schema["maxItems"]), 0), True
        else:
            size, bounded = (MAX_REQUEST_SIZE_BYTES - 2) // (elem.min_size + 1), False
        return CelType("list", elem=elem, max_elements=size, min_size=2, bounded=bounded, where=where)
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            value = decl_type(extra, f"{where}{{}}")
            if value is None:
                return None
            if "maxProperties" in schema:
                size, bounded = max(int(schema["maxProperties"]), 0), True
            else:
                size, bounded = (MAX_REQUEST_SIZE_BYTES - 2) // (value.min_size + 6), False
            return CelType("map", elem=value, key=_MAP_KEY, max_elements=size, min_size=2, bounded=bounded, where=where)
        fields: dict[str, CelType] = {}
        required = set(schema.get("required", ()))
        min_size = 2
        for name, prop in schema.get("properties", {}).items():
            child = decl_type(prop, f"{where}.{name}")
            if child is None:
                continue
            if _IDENT.fullmatch(name) and name not in _CEL_RESERVED:
                fields[name] = child  # other names are escaped by the server; no rule here uses one
            if name in required and "default" not in prop:
                min_size += len(name) + child.min_size + 4
        return CelType("object", fields=fields, min_size=min_size, where=where)
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "byte":
            return _sized("bytes", schema, where)
        if fmt == "duration":
            return CelType("duration", max_elements=32, min_size=3, bounded=True, where=where)
        if fmt == "date":
            return CelType("timestamp", max_elements=12, min_size=12, bounded=True, where=where)
        if fmt == "date-time":
            return CelType("timestamp", max_elements=32, min_size=21, bounded=True, where=where)
        return _sized("string", schema, where)
    if kind == "boolean":
        return CelType("bool", min_size=4, where=where)
    if kind == "number":
        return CelType("double", min_size=1, where=where)
    if kind == "integer":
        return CelType("int", min_size=1, where=where)
    return None


def _sized(kind: str, schema: Mapping[str, Any], where: str) -> CelType:
    if "maxLength" in schema:
        factor = 4 if kind == "string" else 1  # maxLength counts code points; sizes are bytes
        return CelType(
            kind, max_elements=max(int(schema["maxLength"]), 0) * factor, min_size=2, bounded=True, where=where
        )
    return CelType(kind, max_elements=_unbounded_string(), min_size=2, bounded=False, where=where)


def _with_type_and_object_meta(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """At a resource's root, ``apiVersion``, ``kind`` and ``metadata.name``/``generateName`` are always visible."""
    props = schema.get("properties", {})
    meta = props.get("metadata", {}).get("properties", {})
    if all(props.get(k, {}).get("type") == "string" for k in ("apiVersion", "kind")) and all(
        meta.get(k, {}).get("type") == "string" for k in ("name", "generateName")
    ):
        return schema
    string = {"type": "string"}
    metadata = {"type": "object", "properties": {"name": string, "generateName": string}}
    return {**schema, "properties": {**props, "apiVersion": string, "kind": string, "metadata": metadata}}


# ------------------------------------------------------------------------------------------------------ expressions


@dataclass(eq=False)
class _Expr:
    """A node of the expression as cel-go sees it after macro expansion (identity matters, not equality)."""


@dataclass(eq=False)
class _Const(_Expr):
    kind: str
    size: int  # what cel-go's ComputedSize gives a constant: runes of a string, bytes of bytes, 1 otherwise


@dataclass(eq=False)
class _Ident(_Expr):
    name: str


@dataclass(eq=False)
class _Select(_Expr):
    operand: _Expr
    field: str
    test_only: bool = False


@dataclass(eq=False)
class _Call(_Expr):
    function: str
    args: list[_Expr]
    target: _Expr | None = None


@dataclass(eq=False)
class _ListLit(_Expr):
    elements: list[_Expr]


@dataclass(eq=False)
class _MapLit(_Expr):
    entries: list[tuple[_Expr, _Expr]]


@dataclass(eq=False)
class _Comprehension(_Expr):
    macro: str
    iter_var: str
    iter_range: _Expr
    accu_init: _Expr
    loop_condition: _Expr
    loop_step: _Expr
    result: _Expr
    value: _Expr | None = None  # map(): the mapped expression (its type is the result's element type)


_BINARY = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}


def parse(rule: str) -> _Expr:
    """Parse ``rule`` with cel-python's grammar and expand macros the way cel-go's parser does."""
    try:
        tree = celpy.CELParser().parse(rule)
    except celpy.CELParseError as exc:
        raise UnsupportedCel(f"{rule!r} does not parse: {exc}") from None
    return _Builder().build(tree)


def _children(tree: Tree[Token]) -> list[Any]:
    return [child for child in tree.children if child is not None]


class _Builder:
    def build(self, tree: Any) -> _Expr:
        if not isinstance(tree, Tree):
            raise UnsupportedCel(f"unexpected token {tree!r}")
        kids = _children(tree)
        rule = tree.data
        if rule == "expr":
            if len(kids) == 3:
                return _Call("_?_:_", [self.build(k) for k in kids])
            return self.build(kids[0])
        if rule in ("conditionalor", "conditionaland"):
            if len(kids) == 2:
                return _Call("_||_" if rule == "conditionalor" else "_&&_", [self.build(kids[0]), self.build(kids[1])])
            return self.build(kids[0])
        if rule in ("relation", "addition", "multiplication"):
            if len(kids) == 2:
                operator = kids[0]
                (left,) = _children(operator)
                return _Call(_BINARY[operator.data], [self.build(left), self.build(kids[1])])
            return self.build(kids[0])
        if rule == "unary":
            return self._unary(tree)
        if rule == "member":
            return self.build(kids[0])
        if rule == "member_dot":
            return _Select(self.build(kids[0]), str(kids[1]))
        if rule == "member_dot_arg":
            args = _children(kids[2]) if len(kids) > 2 else []
            return self._call(str(kids[1]), args, kids[0])
        if rule == "member_index":
            return _Call("_[_]", [self.build(kids[0]), self.build(kids[1])])
        if rule == "primary":
            return self.build(kids[0])
        if rule == "ident":
            return _Ident(str(kids[0]))
        if rule == "ident_arg":
            args = _children(kids[1]) if len(kids) > 1 else []
            return self._call(str(kids[0]), args, None)
        if rule == "paren_expr":
            return self.build(kids[0])
        if rule == "list_lit":
            return _ListLit([self.build(k) for k in (_children(kids[0]) if kids else [])])
        if rule == "map_lit":
            flat = [self.build(k) for k in (_children(kids[0]) if kids else [])]
            return _MapLit(list(zip(flat[::2], flat[1::2], strict=True)))
        if rule == "literal":
            return _literal(kids[0])
        raise UnsupportedCel(f"{rule} ({tree}) is not modelled")

    def _unary(self, tree: Tree[Token]) -> _Expr:
        nots = negs = 0
        node: Any = tree
        while isinstance(node, Tree) and node.data == "unary" and len(_children(node)) == 2:
            operator, node = _children(node)
            nots += operator.data == "unary_not"
            negs += operator.data == "unary_neg"
        if nots and negs:
            raise UnsupportedCel("mixed ! and - prefixes are not modelled")
        inner = self.build(_children(node)[0])  # the member under the prefixes
        if nots % 2:  # cel-go drops an even number of prefixes
            return _Call("!_", [inner])
        if negs % 2:
            return _Call("-_", [inner])
        return inner

    def _call(self, name: str, raw_args: Sequence[Any], raw_target: Any) -> _Expr:
        target = self.build(raw_target) if raw_target is not None else None
        if target is None and name == "has" and len(raw_args) == 1:
            operand = self.build(raw_args[0])
            if not isinstance(operand, _Select):
                raise UnsupportedCel("has() takes a field selection")
            return _Select(operand.operand, operand.field, test_only=True)
        if target is not None and name in ("all", "exists", "exists_one", "filter", "map") and len(raw_args) >= 2:
            return self._macro(name, target, [self.build(a) for a in raw_args])
        return _Call(name, [self.build(a) for a in raw_args], target)

    def _macro(self, name: str, target: _Expr, args: list[_Expr]) -> _Expr:
        var = args[0]
        if not isinstance(var, _Ident):
            raise UnsupportedCel(f"{name}(): the first argument must be a simple name")
        accu = lambda: _Ident(_ACCUMULATOR)  # noqa: E731 - one fresh node per use, as cel-go makes them
        true = _Const("bool", 1)
        if name == "all" and len(args) == 2:
            return _Comprehension(
                name,
                var.name,
                target,
                true,
                _Call("@not_strictly_false", [accu()]),
                _Call("_&&_", [accu(), args[1]]),
                accu(),
            )
        if name == "exists" and len(args) == 2:
            condition = _Call("@not_strictly_false", [_Call("!_", [accu()])])
            return _Comprehension(
                name, var.name, target, _Const("bool", 1), condition, _Call("_||_", [accu(), args[1]]), accu()
            )
        if name == "exists_one" and len(args) == 2:
            step = _Call("_?_:_", [args[1], _Call("_+_", [accu(), _Const("int", 1)]), accu()])
            result = _Call("_==_", [accu(), _Const("int", 1)])
            return _Comprehension(name, var.name, target, _Const("int", 1), true, step, result)
        if name == "map" and len(args) in (2, 3):
            value = args[-1]
            step: _Expr = _Call("_+_", [accu(), _ListLit([value])])
            if len(args) == 3:
                step = _Call("_?_:_", [args[1], step, accu()])
            return _Comprehension(name, var.name, target, _ListLit([]), true, step, accu(), value=value)
        if name == "filter" and len(args) == 2:
            step = _Call("_?_:_", [args[1], _Call("_+_", [accu(), _ListLit([_Ident(var.name)])]), accu()])
            return _Comprehension(name, var.name, target, _ListLit([]), true, step, accu())
        raise UnsupportedCel(f"{name}() with {len(args)} arguments is not modelled")


def _literal(token: Token) -> _Const:
    text = str(token)
    if token.type in ("INT_LIT", "UINT_LIT", "FLOAT_LIT"):
        return _Const({"INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double"}[token.type], 1)
    if token.type == "BOOL_LIT":
        return _Const("bool", 1)
    if token.type == "NULL_LIT":
        return _Const("null", 1)
    if token.type in ("STRING_LIT", "MLSTRING_LIT"):
        raw = text[:1] in "rR"
        body = text[1:] if raw else text
        quote = body[:3] if token.type == "MLSTRING_LIT" else body[:1]
        content = body[len(quote) : -len(quote)]
        if not raw and "\\" in content:
            raise UnsupportedCel(f"escape sequences in {text} are not modelled")
        return _Const("string", len(content))  # runes, as cel-go counts them
    raise UnsupportedCel(f"literal {text} is not modelled")


# ------------------------------------------------------------------------------------------------------------ costs


@dataclass(frozen=True)
class Estimate:
    """A [min, max] range of cost or size, saturating at 2^64 - 1 as cel-go's does."""

    min: int
    max: int

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(min(self.min + other.min, MAX_UINT64), min(self.max + other.max, MAX_UINT64))

    def times(self, other: Estimate) -> Estimate:
        return Estimate(min(self.min * other.min, MAX_UINT64), min(self.max * other.max, MAX_UINT64))

    def factor(self, per_unit: float) -> Estimate:
        return Estimate(_by_factor(self.min, per_unit), _by_factor(self.max, per_unit))

    def union(self, other: Estimate) -> Estimate:
        return Estimate(min(self.min, other.min), max(self.max, other.max))


def _by_factor(value: int, per_unit: float) -> int:
    product = math.ceil(float(value) * per_unit)
    return MAX_UINT64 if product >= 2**64 else int(product)


_ZERO = Estimate(0, 0)
_ONE = Estimate(1, 1)
_UNKNOWN_SIZE = Estimate(0, MAX_UINT64)
_FIXED_SIZE_KINDS = frozenset({"bool", "int", "uint", "double", "timestamp", "duration"})


@dataclass(frozen=True)
class Reached:
    """A schema node a rule reads, with its kind and whether the schema bounds its size."""

    where: str
    kind: str
    bounded: bool | None


class _Coster:
    """cel-go's ``coster`` over one parsed rule, with ``self`` of type ``root``."""

    def __init__(self, root: CelType) -> None:
        self.root = root
        self.paths: dict[int, list[str]] = {}
        self.types: dict[int, CelType] = {}
        self.sizes: dict[int, Estimate] = {}  # results of calls whose size cel-go computes
        self.iter_ranges: dict[str, list[_Expr]] = {}
        self.scope: dict[str, list[CelType]] = {}
        self.reached: dict[str, Reached] = {}

    # -- the walk

    def cost(self, e: _Expr) -> Estimate:
        if isinstance(e, _Const):
            self.types[id(e)] = {
                "int": _INT,
                "uint": _UINT,
                "double": _DOUBLE,
                "bool": _BOOL,
                "null": _NULL,
                "string": _STRING,
                "bytes": _BYTES,
            }[e.kind]
            return _ZERO
        if isinstance(e, _Ident):
            return self._ident(e)
        if isinstance(e, _Select):
            return self._select(e)
        if isinstance(e, _Call):
            return self._call(e)
        if isinstance(e, _ListLit):
            total = _ZERO
            for element in e.elements:
                total += self.cost(element)
            kinds = {self.types[id(x)].kind for x in e.elements}
            if len(kinds) > 1:
                raise UnsupportedCel("a list literal mixes types (the server's literals are homogeneous)")
            self.types[id(e)] = CelType("list", elem=self.types[id(e.elements[0])] if e.elements else None)
            return total + Estimate(_LIST_CREATE, _LIST_CREATE)
        if isinstance(e, _MapLit):
            total = _ZERO
            for key, value in e.entries:
                total += self.cost(key)
                total += self.cost(value)
            first = e.entries[0] if e.entries else None
            self.types[id(e)] = CelType(
                "map",
                key=self.types[id(first[0])] if first else None,
                elem=self.types[id(first[1])] if first else None,
            )
            return total + Estimate(_MAP_CREATE, _MAP_CREATE)
        if isinstance(e, _Comprehension):
            return self._comprehension(e)
        raise UnsupportedCel(f"{type(e).__name__} is not modelled")

    def _ident(self, e: _Ident) -> Estimate:
        ranges = self.iter_ranges.get(e.name)
        if ranges:
            iter_range = ranges[-1]
            range_type = self.types[id(iter_range)]
            suffix = "@items" if range_type.kind == "list" else "@keys"
            self.paths[id(e)] = [*self.paths.get(id(iter_range), []), suffix]
        else:
            self.paths[id(e)] = [e.name]
        if self.scope.get(e.name):
            self.types[id(e)] = self.scope[e.name][-1]
        elif e.name in ("self", "oldSelf"):
            self.types[id(e)] = self.root
        else:
            raise UnsupportedCel(f"undeclared reference to {e.name!r}")
        self._reach(self.types[id(e)])
        return Estimate(_SELECT_AND_IDENT, _SELECT_AND_IDENT)

    def _select(self, e: _Select) -> Estimate:
        if e.test_only:
            total = Estimate(_PRESENCE_TEST, _PRESENCE_TEST) + self.cost(e.operand)
            self._field_type(e)  # a presence test reads the field too (for the structural check)
            self.types[id(e)] = _BOOL
            return total
        total = self.cost(e.operand)
        if self.types[id(e.operand)].kind in ("object", "map"):
            total += Estimate(_SELECT_AND_IDENT, _SELECT_AND_IDENT)
        self.paths[id(e)] = [*self.paths.get(id(e.operand), []), e.field]
        self.types[id(e)] = self._field_type(e)
        self._reach(self.types[id(e)])
        return total

    def _field_type(self, e: _Select) -> CelType:
        operand = self.types[id(e.operand)]
        if operand.kind == "object" and e.field in operand.fields:
            return operand.fields[e.field]
        if operand.kind == "map" and operand.elem is not None:
            return operand.elem
        raise UnsupportedCel(f"no field {e.field!r} on {operand.kind} {operand.where or ''}".rstrip())

    def _comprehension(self, e: _Comprehension) -> Estimate:
        total = self.cost(e.iter_range)
        total += self.cost(e.accu_init)
        range_type = self.types[id(e.iter_range)]
        if range_type.kind == "list":
            iter_type = range_type.elem
        elif range_type.kind == "map":
            iter_type = range_type.key
        else:
            raise UnsupportedCel(f"{e.macro}() over a {range_type.kind}")
        if iter_type is None:
            raise UnsupportedCel(f"{e.macro}() over an empty literal")
        accu_type = {"all": _BOOL, "exists": _BOOL, "exists_one": _INT}.get(e.macro, CelType("list"))
        self.scope.setdefault(_ACCUMULATOR, []).append(accu_type)
        self.iter_ranges.setdefault(e.iter_var, []).append(e.iter_range)
        self.scope.setdefault(e.iter_var, []).append(iter_type)
        loop = self.cost(e.loop_condition)
        step = self.cost(e.loop_step)
        self.scope[e.iter_var].pop()
        self.iter_ranges[e.iter_var].pop()
        total += self.cost(e.result)
        self.scope[_ACCUMULATOR].pop()
        count = self._size(e.iter_range)
        total += count.times(step + loop)
        if e.macro in ("all", "exists", "exists_one"):
            self.types[id(e)] = _BOOL
        elif e.macro == "map":
            assert e.value is not None
            self.types[id(e)] = CelType("list", elem=self.types[id(e.value)])
        else:
            self.types[id(e)] = CelType("list", elem=iter_type)
        return total

    def _call(self, e: _Call) -> Estimate:
        arg_costs = [self.cost(arg) for arg in e.args]
        arg_sum = _ZERO
        for c in arg_costs:
            arg_sum += c
        total = _ZERO
        if e.target is not None:
            total += self.cost(e.target)
        kinds = [self.types[id(arg)].kind for arg in e.args]
        fn = e.function
        self.types[id(e)] = _BOOL
        if fn in ("_&&_", "_||_"):
            left, right = arg_costs
            return total + Estimate(left.min, min(left.max + right.max, MAX_UINT64))
        if fn == "_?_:_":
            condition, if_true, if_false = arg_costs
            self.sizes[id(e)] = self._size(e.args[1]).union(self._size(e.args[2]))
            chosen = self.types[id(e.args[1])]
            self.types[id(e)] = self.types[id(e.args[2])] if chosen.kind == "null" else chosen
            return total + condition + if_true.union(if_false)
        if fn in ("_==_", "_!=_") or (fn in ("_<_", "_<=_", "_>_", "_>=_") and kinds[0] in ("string", "bytes")):
            smallest = min(self._size(e.args[0]).max, self._size(e.args[1]).max)
            return total + Estimate(1 if smallest > 0 else 0, smallest).factor(_STRING_TRAVERSAL) + arg_sum
        if fn == "@in":
            if kinds[1] == "list":
                return total + self._size(e.args[1]).factor(1) + arg_sum
            if kinds[1] == "map":
                return total + _ONE + arg_sum
            raise UnsupportedCel(f"'in' on a {kinds[1]}")
        if fn == "_[_]":
            container = self.types[id(e.args[0])]
            suffix = {"list": "@items", "map": "@values"}.get(container.kind)
            if suffix is None or container.elem is None:
                raise UnsupportedCel(f"indexing a {container.kind}")
            self.paths[id(e)] = [*self.paths.get(id(e.args[0]), []), suffix]
            self.types[id(e)] = container.elem
            self._reach(container.elem)
            return total + _ONE + arg_sum
        if fn == "_+_" and kinds[0] in ("string", "bytes", "list"):
            size = self._size(e.args[0]) + self._size(e.args[1])
            self.sizes[id(e)] = size
            left, right = self.types[id(e.args[0])], self.types[id(e.args[1])]
            self.types[id(e)] = left if left.kind != "list" or left.elem is not None else right
            if kinds[0] == "list":
                return total + _ONE + arg_sum
            return total + size.factor(_STRING_TRAVERSAL) + arg_sum
        if fn in ("_+_", "_-_", "_*_", "_/_", "_%_", "-_"):
            if kinds[0] not in ("int", "uint", "double", "timestamp", "duration"):
                raise UnsupportedCel(f"{fn} on a {kinds[0]}")
            self.types[id(e)] = self.types[id(e.args[0])]
            return total + _ONE + arg_sum
        if fn in ("_<_", "_<=_", "_>_", "_>=_", "!_", "@not_strictly_false"):
            return total + _ONE + arg_sum
        if fn == "size" and len(e.args) + (e.target is not None) == 1:
            sized = self.types[id(e.target if e.target is not None else e.args[0])].kind
            if sized not in ("string", "bytes", "list", "map"):
                raise UnsupportedCel(f"size() of a {sized}")
            self.types[id(e)] = _INT
            return total + _ONE + arg_sum
        if fn in ("startsWith", "endsWith") and e.target is not None and len(e.args) == 1:
            return total + self._size(e.args[0]).factor(_STRING_TRAVERSAL) + arg_sum
        if fn == "contains" and e.target is not None and len(e.args) == 1:
            text = self._size(e.target).factor(_STRING_TRAVERSAL)
            return total + text.times(self._size(e.args[0]).factor(_STRING_TRAVERSAL)) + arg_sum
        if fn == "matches" and e.target is not None and len(e.args) == 1:
            text = (self._size(e.target) + _ONE).factor(_STRING_TRAVERSAL)
            return total + text.times(self._size(e.args[0]).factor(_REGEX_STRING_LENGTH)) + arg_sum
        raise UnsupportedCel(f"the function {fn}() is not modelled")

    # -- sizes, as cel-go's coster.sizeEstimate finds them

    def _size(self, e: _Expr) -> Estimate:
        if id(e) in self.sizes:
            return self.sizes[id(e)]
        if isinstance(e, _Const):
            return Estimate(e.size, e.size)
        if isinstance(e, _ListLit):
            return Estimate(len(e.elements), len(e.elements))
        if isinstance(e, _MapLit):
            return Estimate(len(e.entries), len(e.entries))
        path = self.paths.get(id(e))
        if path and path[0] != _ACCUMULATOR:
            found = self._walk(path)
            if found is not None:
                return found
        if self.types[id(e)].kind in _FIXED_SIZE_KINDS:
            return _ONE
        return _UNKNOWN_SIZE

    def _walk(self, path: list[str]) -> Estimate | None:
        """The API server's size estimator: from ``self``'s type along the path (the first element is the variable)."""
        node: CelType | None = self.root
        for name in path[1:]:
            assert node is not None
            if name in ("@items", "@values"):
                node = node.elem
            elif name == "@keys":
                node = node.key
            else:
                node = node.fields.get(name)
            if node is None:
                return None
        assert node is not None
        return Estimate(0, node.max_elements)

    def _reach(self, t: CelType) -> None:
        if t.where or t.bounded is not None:
            self.reached.setdefault(t.where, Reached(t.where, t.kind, t.bounded))


def estimate(rule: str, self_type: CelType, *, rule_only: bool = True) -> tuple[Estimate, tuple[Reached, ...]]:
    """The cost cel-go estimates for ``rule`` with ``self`` of ``self_type``, and the schema nodes it reads.

    ``rule_only=False`` costs any expression (a rule must give a bool, as the API server requires).
    """
    coster = _Coster(self_type)
    expr = parse(rule)
    cost = coster.cost(expr)
    if rule_only and coster.types[id(expr)].kind != "bool":
        raise UnsupportedCel(f"{rule!r} does not evaluate to a bool")
    return cost, tuple(coster.reached.values())


# ------------------------------------------------------------------------------------------------------ whole CRDs


@dataclass(frozen=True)
class RuleCost:
    """One rule's estimate: ``total`` (cost x cardinality) is what the server holds against its limits."""

    crd: str
    where: str
    rule: str
    cost: int
    cardinality: int
    reached: tuple[Reached, ...]

    @property
    def total(self) -> int:
        return 0 if self.cost == 0 else min(self.cost * self.cardinality, MAX_UINT64)

    @property
    def factor(self) -> float:
        """How far over (or under, below 1) the per-rule limit it is."""
        return self.total / PER_RULE_LIMIT


def _max_elements(schema: Mapping[str, Any]) -> int | None:
    """How many times a child of ``schema`` may occur per occurrence of ``schema`` (``None``: unbounded)."""
    kind = schema.get("type")
    if kind == "object" and "additionalProperties" in schema:
        return int(schema["maxProperties"]) if "maxProperties" in schema else None
    if kind == "array":
        return int(schema["maxItems"]) if "maxItems" in schema else None
    return 1


def rule_costs(crd: Mapping[str, Any]) -> list[RuleCost]:
    """Every ``x-kubernetes-validations`` rule of every version of ``crd``, estimated as the API server does."""
    name = crd["metadata"]["name"]
    out: list[RuleCost] = []
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        out.extend(_walk_schema(name, schema, "", 1, root=True))
    return out


def _walk_schema(
    crd: str, schema: Mapping[str, Any], where: str, cardinality: int | None, root: bool
) -> Iterator[RuleCost]:
    rules = schema.get("x-kubernetes-validations", ())
    if rules:
        self_type = decl_type(schema, where, resource_root=root)
        if self_type is None:
            raise UnsupportedCel(f"{where or '<root>'}: rules on a node invisible to CEL")
        times = cardinality if cardinality is not None else MAX_REQUEST_SIZE_BYTES // (self_type.min_size + 1)
        for index, rule in enumerate(rules):
            if rule.get("messageExpression"):
                raise UnsupportedCel(f"{where}: messageExpression is not modelled")
            cost, reached = estimate(rule["rule"], self_type)
            yield RuleCost(crd, f"{where or '<root>'} rule {index}", rule["rule"], cost.max, times, reached)
    per = _max_elements(schema)
    below = None if cardinality is None or per is None else min(cardinality * per, MAX_UINT64)
    for name, child in schema.get("properties", {}).items():
        yield from _walk_schema(crd, child, f"{where}.{name}", below, root=False)
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from _walk_schema(crd, schema["additionalProperties"], f"{where}{{}}", below, root=False)
    if isinstance(schema.get("items"), Mapping):
        yield from _walk_schema(crd, schema["items"], f"{where}[]", below, root=False)


def crd_total(costs: Sequence[RuleCost]) -> int:
    """The sum the server holds against :data:`PER_CRD_LIMIT` (saturating)."""
    return min(sum(c.total for c in costs), MAX_UINT64)


def refusal(cost: RuleCost) -> str | None:
    """The server's message for a rule over its limit (``None`` when it is within), factor worded as it words it."""
    if cost.total <= PER_RULE_LIMIT:
        return None
    factor = cost.factor
    worded = "more than 100x" if factor > 100 else (f"{factor:f}x" if factor < 1.5 else f"{factor:.1f}x")
    return f"estimated rule cost exceeds budget by factor of {worded}"


def main(argv: Sequence[str]) -> int:
    """Print each rule's estimate for the CRDs in the given directories (the table issue #28 asks for)."""
    import pathlib

    import yaml

    print(f"{'crd':<48} {'rule':<44} {'cost':>22} {'cardinality':>11} {'total':>22}")
    for directory in argv:
        for path in sorted(pathlib.Path(directory).glob("*.yaml")):
            costs = rule_costs(yaml.safe_load(path.read_text()))
            for c in costs:
                print(f"{c.crd:<48} {c.where:<44} {c.cost:>22} {c.cardinality:>11} {c.total:>22}")
            print(f"{'':<48} {'CRD total':<44} {'':>22} {'':>11} {crd_total(costs):>22}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
