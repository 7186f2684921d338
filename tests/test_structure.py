"""The layout of the library: data flows one way, no import cycles, imports at the top.

Read from the source (AST) of every module of ``attnsvm/``: each import, also those inside
functions, must go to a module of its own layer or of a lower one (:data:`LAYERS`, the flow
config -> data and training -> SVMs -> tasks -> stores -> claims -> report -> plan and status
-> CLI);
there is no cycle between modules; and an import inside a function, which only defers a heavy
optional dependency, says so in a comment (on its line, or on the line above its block).
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "attnsvm"

#: the layers of attnsvm, lowest first: a module imports only from its layer and those below
LAYERS: tuple[tuple[str, ...], ...] = (
    ("codes", "failures", "atomic", "logs", "provenance", "images"),
    ("config",),
    ("gd", "variables"),
    ("svm",),
    ("ntp",),
    ("tasks",),
    ("sweep",),
    ("claims",),
    ("report",),
    ("plan", "generate", "results"),
    ("status_cache",),
    ("status", "progress"),
    ("cli", ""),  # "": the package itself (attnsvm/__init__.py)
)


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(module: str) -> list[tuple[str, ast.AST, bool]]:
    """``(imported attnsvm module, node, inside a function)`` of every import of ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    inside = {
        id(sub)
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for sub in ast.walk(fn)
    }
    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # ``from P import x`` runs P's __init__ even when x is a submodule: an edge to the
            # subpackage P, and to P.x where that is a module (the root package, the public
            # facade that every import runs first, is the exception)
            if base != "attnsvm":
                targets.append(base)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:
                    targets.append(full)
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        for target in targets:
            if target == "attnsvm" or target.startswith("attnsvm."):
                out.append((target, node, id(node) in inside))
    return out


def _layer(module: str) -> int:
    area = module.split(".")[1] if "." in module else ""
    for i, names in enumerate(LAYERS):
        if area in names:
            return i
    raise AssertionError(f"{module}: its area {area!r} is in no layer of tests/test_structure.py")


def test_every_import_goes_down_the_layers():
    upward = [
        f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)})"
        for m in MODULES
        for t, _, _ in _imports(m)
        if _layer(t) > _layer(m)
    ]
    assert upward == []


def test_no_import_cycles():
    """No cycle, counting a package's ``__init__`` as a module (``from attnsvm.svm import
    farkas`` inside attnsvm/svm would close one through attnsvm/svm/__init__.py)."""
    graph = {m: {t for t, _, _ in _imports(m) if t in MODULES and t != m} for m in MODULES}
    state: dict[str, int] = collections.defaultdict(int)  # 0 new, 1 on the stack, 2 done
    cycles = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state[t] == 1:
                cycles.append(" -> ".join([*stack[stack.index(t) :], t]))
            elif state[t] == 0:
                visit(t, [*stack, t])
        state[m] = 2

    for m in MODULES:
        if state[m] == 0:
            visit(m, [m])
    assert cycles == []


def test_imports_inside_functions_say_why():
    """An import inside a function only defers a heavy optional dependency, with a comment."""
    silent = []
    for path in MODULES.values():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                k = node.lineno - 1
                while k > 0 and lines[k - 1].lstrip().startswith(("from ", "import ")):
                    k -= 1  # the first import of its block
                block = [lines[k], lines[k - 1] if k else "", lines[node.lineno - 1]]
                if not any("#" in line for line in block):
                    silent.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert silent == []


#: the modules that may compute an attention forward: the kernel and the models
#: (attnsvm/gd/model.py), which training and every evaluation call
ATTENTION_MODULES = ("attnsvm.gd.kernel", "attnsvm.gd.model")
#: solvers of an SVM-like problem that evaluate a loss of their own, with why
ATTENTION_EXEMPT = {
    "attnsvm.ntp.wfin": "W_fin's Newton solve (docs/science.md §8): the reduced loss in the "
    "coordinates of S_fin, with its Hessian, certified by its optimality equations",
}
#: calls that compute attention: softmax and its pieces, the kernel's own functions
ATTENTION_CALLS = {
    "softmax", "log_softmax", "logsumexp", "Attention", "log_softmax_top", "attended_token",
    "next_token_loss",
}  # fmt: skip


def _is_logits_einsum(node: ast.Call) -> bool:
    """``einsum("...td,de,...e->...", X, W, Z)``: the logits ``X_i W z_i``."""
    if not (node.args and isinstance(node.args[0], ast.Constant)):
        return False
    spec = str(node.args[0].value).replace(" ", "").split("->")[0].split(",")
    if len(spec) != 3 or min(len(s) for s in spec) < 2 or len(spec[0]) < 3:
        return False
    x, w, z = spec  # tokens have a token axis the queries lack: (..., t, d) and (..., e)
    return x[-1] == w[-2] and w[-1] == z[-1] and x[:-2] == z[:-1]


def attention_forwards(source: str) -> list[int]:
    """Lines of ``source`` that compute an attention forward (:data:`ATTENTION_CALLS`, the
    logits by einsum)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in ATTENTION_CALLS or (name == "einsum" and _is_logits_einsum(node)):
            out.append(node.lineno)
    return out


def test_no_attention_forward_outside_the_models():
    """Training and every evaluation compute attention through the models of
    attnsvm/gd/model.py (docs/extending.md, "The model"): a forward written anywhere else
    would silently evaluate another model once a field changes the real one."""
    found = [
        f"{MODULES[m].relative_to(ROOT.parent)}:{line}"
        for m in MODULES
        if m not in ATTENTION_MODULES and m not in ATTENTION_EXEMPT
        for line in attention_forwards(MODULES[m].read_text())
    ]
    assert found == []
    # the check sees the numpy forward that generalization.py once had
    old = 'logits = np.einsum("ntd,cde,ne->cnt", X, W, Z)\ns = softmax(logits)\n'
    assert attention_forwards(old) == [1, 2]
    assert attention_forwards('np.einsum("krc,ic->kir", W, Z)') == []  # W z_i: no tokens
    assert attention_forwards('np.einsum("bkd,bde,bke->bk", L, W, R)') == []  # SVM rows
