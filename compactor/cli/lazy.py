"""Subcommands whose modules are imported only when they are parsed (issue 17: cold start).

Building the parser used to import every command module, and through them the engine, the
tokenizer and the benchmarks: 1.75 s before ``compactor --help`` printed a line. A
``LazySubParsers`` knows each command's name, help line and module up front (the tables in
``compactor.cli`` and ``compactor.cli.bench``); the module is imported, and its ``register``
run, when argparse reaches that command. The help and every option are the module's own, so
nothing a user sees changes (``tests/unit/test_cli_lazy.py`` compares the lazy parser with the
eager one, command by command).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any, Sequence


class LazySubParsers(argparse._SubParsersAction):
    """A subparsers action whose parsers are built from their module on first use."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy: dict[str, str] = {}  # command -> module whose register() adds it

    def add_lazy(self, name: str, module: str, help: str) -> None:
        """List ``name`` (with its help line) now; import ``module`` when it is parsed."""
        self._lazy[name] = module
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), help))
        self._name_parser_map[name] = None  # a placeholder: the key is what argparse checks

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name in self._lazy and self._name_parser_map.get(name) is None:
            # the module's register() is filling the placeholder: the command keeps its place
            # in the listing and in the order of choices, with the module's own help line
            listed = next(a for a in self._choices_actions if a.dest == name)
            if "help" in kwargs:
                listed.help = kwargs.pop("help")
            else:
                self._choices_actions.remove(listed)
            order = list(self._name_parser_map)
            del self._name_parser_map[name]
            parser = super().add_parser(name, **kwargs)
            items = sorted(self._name_parser_map.items(),
                           key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
            self._name_parser_map.clear()
            self._name_parser_map.update(items)
            return parser
        return super().add_parser(name, **kwargs)

    def add_modules(self, modules: Sequence[str], table: dict[str, tuple[tuple[str, str], ...]]) -> None:
        """Each module's commands, in order: listed from ``table`` (name, help line) and imported
        when parsed; a module missing from ``table`` imported and registered now (one not
        written yet skipped)."""
        for module in modules:
            if module in table:
                for name, help_ in table[module]:
                    self.add_lazy(name, module, help_)
                continue
            try:
                mod = importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name == module:
                    continue  # not built yet
                raise
            mod.register(self)

    def load(self, name: str) -> argparse.ArgumentParser:
        """The parser of ``name``, its module imported and registered first if need be."""
        if self._name_parser_map.get(name) is None and name in self._lazy:
            importlib.import_module(self._lazy[name]).register(self)
            if self._name_parser_map.get(name) is None:
                raise RuntimeError(f"{self._lazy[name]}.register() did not add the command {name!r}")
        return self._name_parser_map[name]

    def load_all(self) -> None:
        """Every command's parser built, nested lazy commands too (what an eager parser holds)."""
        for name in list(self._lazy):
            load_all(self.load(name))

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Sequence[str], option_string: str | None = None) -> None:
        if values and values[0] in self._lazy:
            self.load(values[0])
        super().__call__(parser, namespace, values, option_string)


def load_all(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with every lazy command under it built; returns it."""
    for action in parser._actions:
        if isinstance(action, LazySubParsers):
            action.load_all()
    return parser
