"""The package stays a house a newcomer can change: small rooms, no import circles (not even
through type-only imports), and state read and written by the object that owns it."""

from __future__ import annotations

import ast
import tokenize
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "langchain_loop_guard"
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 350
MAX_REACHES = 5
"""Places that may reach into another object's private attributes, each saying why."""

# Known exceptions: none. A module or class that outgrows its limit is split where a reader
# would look for its parts, not added here.
OVERSIZED_MODULES: set[str] = set()
OVERSIZED_CLASSES: set[str] = set()

# Temporary: being removed by the graph-pass redesign, which is changing these modules now.
# Take each entry off as it goes (the tests fail on an entry that no longer holds).
PENDING_ELSEWHERE_REACHES: set[tuple[str, str]] = {
    ("_callback_runs.py", "self.engine.guard._lock"),
    ("_callback_runs.py", "guard._lock"),
    ("_callback_runs.py", "guard._site"),
    ("_engine.py", "self.guard._scope_seen"),
    ("_engine.py", "self.guard._run_config"),
    ("_graph_pass.py", "self.guard._in_context"),
    ("_graph_pass.py", "guard._reported_before"),
    ("_graph_pass.py", "guard._site"),
    ("_novelty.py", "seen._new"),
    ("_novelty.py", "seen._old"),
    ("_novelty.py", "seen._count"),
    ("_runtime.py", "LoopGuardConfig._load"),
}
PENDING_ELSEWHERE_CIRCLES: set[frozenset[str]] = {frozenset({"_graph_guard.py", "_graph_pass.py"})}

# A named tuple's own methods and fields start with "_" so as not to clash with its fields: they
# are its public interface, not its private state.
_NAMED_TUPLE_API = frozenset({"_make", "_replace", "_asdict", "_fields", "_field_defaults"})


def _modules() -> dict[str, ast.Module]:
    return {
        path.name: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for path in sorted(PACKAGE.glob("*.py"))
    }


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.Module, *, type_only: bool = False) -> set[str]:
    """The package modules ``tree`` imports, anywhere but under ``if TYPE_CHECKING:`` (there
    too with ``type_only``)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "langchain_loop_guard":
                found.update(f"{alias.name}.py" for alias in node.names)
            elif node.module.startswith("langchain_loop_guard."):
                found.add(node.module.split(".")[1] + ".py")
        elif isinstance(node, ast.Import):
            found.update(
                alias.name.split(".")[1] + ".py"
                for alias in node.names
                if alias.name.startswith("langchain_loop_guard.")
            )
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of ``graph``, each once (depth-first, by its first module)."""
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> None:
        for target in sorted(graph.get(path[-1], ())):
            if target == path[0]:
                key = tuple(sorted(path))
                if key not in seen:
                    seen.add(key)
                    cycles.append([*path, target])
            elif target not in path and target > path[0]:
                walk([*path, target])

    for start in sorted(graph):
        walk([start])
    return cycles


def _reaches(tree: ast.Module) -> list[ast.Attribute]:
    """Where ``tree`` reads or writes another object's private attribute: ``obj._name`` with
    ``obj`` not ``self`` or ``cls``. ``super()._name`` is the object's own; a module's private
    name read through the module (``module._name``) counts like any other object's."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") or node.attr in _NAMED_TUPLE_API:
            continue  # dunders are protocols, not private state
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        called = owner.func if isinstance(owner, ast.Call) else None
        if isinstance(called, ast.Name) and called.id == "super":
            continue
        found.append(node)
    return found


def _comments(path: Path) -> dict[int, str]:
    """The comments of the module at ``path``, by line."""
    with path.open("rb") as file:
        tokens = tokenize.tokenize(file.readline)
        return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def _all_reaches() -> Counter[tuple[str, str]]:
    """Every reach of the package, as ``(module, expression)``, with its number of places."""
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        name = str(path.relative_to(PACKAGE))
        found.update((name, ast.unparse(node)) for node in _reaches(tree))
    return found


def test_state_is_read_and_written_by_its_owner() -> None:
    """At most 5 places reach into another object's private attributes (``obj._x``), and each
    says why in a comment on its line or the line before (STYLE item 16)."""
    places = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        name = str(path.relative_to(PACKAGE))
        comments = _comments(path)
        for node in _reaches(tree):
            if (name, ast.unparse(node)) in PENDING_ELSEWHERE_REACHES:
                continue
            said = comments.get(node.lineno) or comments.get(node.lineno - 1, "")
            places.append((f"{name}:{node.lineno}: {ast.unparse(node)}", said))
    assert len(places) <= MAX_REACHES, [place for place, _ in places]
    unexplained = [place for place, said in places if len(said.split()) < 4]
    assert not unexplained, f"say why in a comment on the line or the line before: {unexplained}"


def test_pending_reaches_and_circles_still_hold() -> None:
    """Each entry of the temporary allow-lists is still found: one that is gone comes off."""
    gone = PENDING_ELSEWHERE_REACHES - set(_all_reaches())
    assert not gone, f"no longer reached: take {gone} off PENDING_ELSEWHERE_REACHES"
    trees = _modules()
    graph = {
        name: _imported(tree, type_only=True) & set(trees) - {name} for name, tree in trees.items()
    }
    circles = {frozenset(cycle) for cycle in _cycles(graph)}
    gone_circles = PENDING_ELSEWHERE_CIRCLES - circles
    assert not gone_circles, (
        f"no longer a circle: take {gone_circles} off PENDING_ELSEWHERE_CIRCLES"
    )


def test_the_reach_finder_sees_reaches_and_their_comments() -> None:
    """``obj._x`` and ``module._f`` are reaches; ``self._x``, ``cls._x``, ``super()._x``, a
    dunder and a named tuple's ``_replace`` are not."""
    source = (
        "def f(self, cls, other, module, point):\n"
        "    self._a, cls._b, super()._c, other.__class__, point._replace(x=1)\n"
        "    return other._d, module._e()\n"
    )
    found = [ast.unparse(node) for node in _reaches(ast.parse(source))]
    assert sorted(found) == ["module._e", "other._d"]


def test_no_module_is_over_the_line_limit() -> None:
    """Every module has at most 600 lines, but the known core exceptions."""
    sizes = {
        path.name: len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.glob("*.py")
    }
    over = {name: size for name, size in sizes.items() if size > MAX_MODULE_LINES}
    assert set(over) <= OVERSIZED_MODULES, over
    fixed = {name for name in OVERSIZED_MODULES if sizes.get(name, 0) <= MAX_MODULE_LINES}
    assert not fixed, f"no longer oversized: take {fixed} off OVERSIZED_MODULES"


def test_no_class_is_over_the_line_limit() -> None:
    """Every class has at most 350 lines (decorators and docstring included)."""
    over = {}
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                size = (node.end_lineno or node.lineno) - first + 1
                if size > MAX_CLASS_LINES:
                    over[f"{name}:{node.name}"] = size
    assert set(over) <= OVERSIZED_CLASSES, over
    fixed = OVERSIZED_CLASSES - set(over)
    assert not fixed, f"no longer oversized: take {fixed} off OVERSIZED_CLASSES"


def test_no_import_circle_between_package_modules() -> None:
    """No module imports, directly or not, one that imports it (``TYPE_CHECKING`` aside)."""
    trees = _modules()
    graph = {name: _imported(tree) & set(trees) - {name} for name, tree in trees.items()}
    assert _cycles(graph) == []


def test_no_import_circle_even_through_type_only_imports() -> None:
    """No module imports, directly or not, one that imports it, counting the imports under
    ``if TYPE_CHECKING:``: a type-only back reference is still two rooms read together."""
    trees = _modules()
    graph = {
        name: _imported(tree, type_only=True) & set(trees) - {name} for name, tree in trees.items()
    }
    circles = [c for c in _cycles(graph) if frozenset(c) not in PENDING_ELSEWHERE_CIRCLES]
    assert circles == []


def test_the_checks_see_a_circle_and_skip_type_checking_imports() -> None:
    """The circle finder finds a circle of three, and the import reader skips
    ``if TYPE_CHECKING:`` blocks but reads imports inside functions."""
    assert _cycles({"a.py": {"b.py"}, "b.py": {"c.py"}, "c.py": {"a.py"}}) == [
        ["a.py", "b.py", "c.py", "a.py"]
    ]
    source = (
        "from typing import TYPE_CHECKING\n"
        "from langchain_loop_guard._integrations._engine import Run\n"
        "if TYPE_CHECKING:\n"
        "    from langchain_loop_guard._integrations._handler import X\n"
        "def f():\n"
        "    from langchain_loop_guard._integrations import _repair as _repair\n"
    )
    assert _imported(ast.parse(source)) == {"_engine.py", "_repair.py"}


def test_the_circle_finder_counts_type_only_imports_when_asked() -> None:
    """With ``type_only``, the import reader reads ``if TYPE_CHECKING:`` blocks too, and a
    circle closed by a type-only import is found."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from langchain_loop_guard._integrations._engine import Run\n"
        "if TYPE_CHECKING:\n"
        "    from langchain_loop_guard._integrations._handler import X\n"
    )
    assert _imported(ast.parse(source), type_only=True) == {"_engine.py", "_handler.py"}
    back = "if TYPE_CHECKING:\n    from langchain_loop_guard._integrations._engine import Run\n"
    graph = {
        "_engine.py": {"_handler.py"},
        "_handler.py": _imported(ast.parse(back), type_only=True),
    }
    assert _cycles(graph) == [["_engine.py", "_handler.py", "_engine.py"]]
