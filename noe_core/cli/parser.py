"""A declared flag becomes an argparse option: :class:`Flag`, :func:`add_flags`, one-line usage errors.

A :class:`Flag` is added to a parser only through :func:`add_flag` /
:func:`add_flags`. Its value parser (:mod:`noe_core.cli.values`) reads the
command line and the flag's ``NOE_*`` variable alike (``--preferred-arch`` →
``NOE_PREFERRED_ARCH``; the command line wins), and a bad value in either is a
usage error of one line that names the flag — and the variable when it came
from there — then exit status 2::

    noe mutate: argument --lookup-timeout: 'abc' is not a number of seconds
    noe mutate: argument --lookup-timeout: NOE_LOOKUP_TIMEOUT='abc' is not a number of seconds

Defaults are written as a user would type them and go through the same parser.
The flags themselves are declared in catalogues: :mod:`noe_core.cli.flags`
(``mutate``, ``inspect``, the policy and registry flags), :mod:`noe_web.flags`
(those the web commands share), :mod:`noe_web.commands.flags`,
:mod:`noe_web.controller.flags` and :mod:`noe_web.report.flags`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from noe_core.cli.options import env_name
from noe_core.cli.values import BadValue, Boolean, ExistingDir, ExistingFile, ValueParser
from noe_core.errors import InvalidSettings

Action = Literal["store", "switch", "negatable", "append"]
"""``switch``: ``--flag`` alone; ``negatable``: also ``--no-flag``; ``append``: repeatable."""

_GIVEN = "_noe_given_on_command_line"


@dataclass(frozen=True)
class Flag:
    """One option: its name, how its value reads, its default as typed, its help and its variable."""

    name: str
    kind: ValueParser
    help: str
    default: str | None = None
    short: str = ""
    env: bool = True
    action: Action = "store"
    required: bool = False
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")

    @property
    def env_name(self) -> str | None:
        return env_name(self.name) if self.env else None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.short, self.name) if self.short else (self.name,)


class EnvText(str):
    """A value read from a ``NOE_*`` variable; remembers the variable so errors can name it."""

    variable: str

    def __new__(cls, text: str, variable: str) -> EnvText:
        obj = super().__new__(cls, text)
        obj.variable = variable
        return obj


def _shown(text: str, kind: ValueParser | None = None) -> str:
    raw = str.__str__(text)
    shown = getattr(kind, "shown", None)  # a parser of secrets masks them (noe_core.cli.values.SecretURL)
    if shown is not None:
        raw = shown(raw)
    return f"{text.variable}={raw!r}" if isinstance(text, EnvText) else repr(raw)


def _problem(flag: Flag, text: str, exc: ValueError) -> str:
    """``'abc' is not a number of seconds``; a reused parser's message loses its own flag prefix."""
    if isinstance(exc, BadValue):
        return f"{_shown(text, flag.kind)} {exc}"
    reason = str(exc).removeprefix(flag.name).lstrip(": ")
    return f"{_shown(text, flag.kind)}: {reason}"


class _Convert:
    """The argparse ``type=`` of one flag: its value parser, with errors phrased for that flag."""

    def __init__(self, flag: Flag) -> None:
        self.flag = flag
        self.__name__ = flag.name  # argparse names the type in some messages

    def __call__(self, text: str) -> Any:
        try:
            return self.flag.kind(str.__str__(text))
        except ValueError as exc:  # BadValue, InvalidSettings from a reused parser
            raise argparse.ArgumentTypeError(_problem(self.flag, text, exc)) from None


def _mark_given(namespace: argparse.Namespace, dest: str) -> None:
    given: set[str] = namespace.__dict__.setdefault(_GIVEN, set())
    given.add(dest)


class _MarksGiven(argparse.Action):
    """Records that the option was given on the command line, then does what its action class does."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        super().__call__(parser, namespace, values, option_string)
        _mark_given(namespace, self.dest)


class _Store(_MarksGiven, argparse._StoreAction):
    pass


class _Append(_MarksGiven, argparse._AppendAction):
    pass


class _Switch(argparse.Action):
    """``--flag`` sets true (``--no-flag`` false when negatable); the default goes through ``type``."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, negatable: bool = False, **kwargs: Any) -> None:
        names = list(option_strings)
        if negatable:
            names += ["--no-" + name[2:] for name in option_strings if name.startswith("--")]
        super().__init__(names, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, not (option_string or "").startswith("--no-"))
        _mark_given(namespace, self.dest)

    def format_usage(self) -> str:
        return " | ".join(self.option_strings)


def _help(flag: Flag) -> str:
    notes = []
    if flag.default not in (None, "") and flag.action == "store":
        notes.append(f"default: {flag.default}")
    elif flag.default == "" and flag.action == "store":
        notes.append("default: none")
    if flag.action == "negatable":
        notes.append(f"default: {'on' if Boolean()(flag.default or 'false') else 'off'}")
    if flag.env_name:
        notes.append(f"env {flag.env_name}")
    text = flag.help + (f" [{'; '.join(notes)}]" if notes else "")
    return text.replace("%", "%%")


def add_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup | argparse._MutuallyExclusiveGroup,
    flag: Flag,
    environ: Mapping[str, str] | None = None,
) -> argparse.Action:
    """Add ``flag`` to ``parser``; its ``NOE_*`` variable, when set, replaces the default."""
    env = os.environ if environ is None else environ
    raw = env.get(flag.env_name) if flag.env_name else None
    default: Any = flag.default
    if flag.action in ("switch", "negatable") and default is None:
        default = "false"
    if flag.action == "append":
        default = [] if raw is None else [EnvText(item, flag.env_name or "") for item in raw.split(os.pathsep) if item]
    elif raw is not None:
        default = EnvText(raw, flag.env_name or "")
    kwargs: dict[str, Any] = {"dest": flag.dest, "type": _Convert(flag), "default": default, "help": _help(flag)}
    if flag.action in ("switch", "negatable"):
        return parser.add_argument(*flag.names, action=_Switch, negatable=flag.action == "negatable", **kwargs)
    metavar = flag.metavar or getattr(flag.kind, "metavar", None)
    action = _Append if flag.action == "append" else _Store
    return parser.add_argument(*flag.names, action=action, metavar=metavar, required=flag.required, **kwargs)


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup | argparse._MutuallyExclusiveGroup,
    flags: Iterable[Flag],
) -> None:
    for flag in flags:
        add_flag(parser, flag)


def flag_of(action: argparse.Action) -> Flag | None:
    """The declaration behind an argparse action (``None`` for argparse's own, e.g. ``--help``)."""
    convert = action.type
    return convert.flag if isinstance(convert, _Convert) else None


class _Subcommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommand parsers that refuse arguments they do not know themselves.

    argparse hands a subcommand's unknown arguments back to the top-level
    parser, whose error then names ``noe`` and its usage; here the subcommand's
    own parser says it (``noe serve: unrecognized arguments: --x``).
    """

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        parser = super().add_parser(name, **kwargs)
        parser.subcommand = True
        return parser


class NoeArgumentParser(argparse.ArgumentParser):
    """argparse with usage errors on one line (``noe mutate: argument --x: …``), exit status 2.

    Values of repeatable flags read from a variable are parsed here, after the
    command line, since argparse converts only string defaults.
    """

    subcommand = False
    """True for a subcommand's parser: it reports its unknown arguments itself."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {' '.join(message.split())}\n")

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("action", _Subcommands)
        return super().add_subparsers(**kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        if rest and self.subcommand:
            self.error(f"unrecognized arguments: {' '.join(rest)}")
        for action in self._actions:
            values = getattr(ns, action.dest, None)
            if isinstance(action, _Append) and isinstance(values, list) and isinstance(action.type, _Convert):
                try:
                    setattr(ns, action.dest, [action.type(v) if isinstance(v, EnvText) else v for v in values])
                except argparse.ArgumentTypeError as exc:
                    self.error(f"argument {'/'.join(action.option_strings)}: {exc}")
        return ns, rest


def _source(ns: argparse.Namespace, flag: Flag, value: object) -> str:
    """How the user gave ``value``: ``'x'`` on the command line or ``NOE_X='x'`` through the variable."""
    given: set[str] = getattr(ns, _GIVEN, set())
    text = str(value)
    variable = flag.env_name
    if variable and flag.dest not in given and variable in os.environ:
        return _shown(EnvText(text, variable), flag.kind)
    return _shown(text, flag.kind)


def given(ns: argparse.Namespace, flag: Flag) -> bool:
    """Whether ``flag`` was given on the command line (not its default, not its variable)."""
    return flag.dest in getattr(ns, _GIVEN, set())


def parse_text(flag: Flag, text: str) -> Any:
    """``flag``'s value parsed from ``text`` outside argparse (a library caller); raises :class:`InvalidSettings`."""
    try:
        return flag.kind(text)
    except ValueError as exc:
        raise InvalidSettings(f"{flag.name}: {_problem(flag, text, exc)}") from None


def usage_error(ns: argparse.Namespace, flag: Flag, problem: str) -> InvalidSettings:
    """A problem found after parsing, phrased like argparse's: ``argument --x: '<value>' <problem>``."""
    return InvalidSettings(f"argument {flag.name}: {_source(ns, flag, getattr(ns, flag.dest, None))} {problem}")


def require(ns: argparse.Namespace, flag: Flag) -> Path | None:
    """The path of an :class:`ExistingFile` / :class:`ExistingDir` flag, checked now; ``None`` when not given.

    Raises :class:`InvalidSettings` phrased as a usage error, so the command
    prints one line and exits 2.
    """
    directory = isinstance(flag.kind, ExistingDir)
    if not directory and not isinstance(flag.kind, ExistingFile):
        raise TypeError(f"{flag.name} does not name an existing file or directory")
    value = getattr(ns, flag.dest, None)
    if value is None:
        return None
    path = Path(value)
    if path.is_dir() if directory else path.is_file():
        return path
    raise usage_error(ns, flag, "is not an existing directory" if directory else "is not an existing file")
