"""envsim's BFCL import helper (Python 3 standard library only; BFCL's own code is imported from
the package being converted).

`envsim env import-bfcl` runs it as `python3 bfcl_import.py ADAPTER.py` with one JSON request on
stdin and reads one JSON reply from stdout:

request: {"source": <the bfcl_eval package folder>, "long_context": bool,
          "tasks": [{"id", "initial_config", "involved_classes",
                     "turns": [[{"text", "name", "args", "kwargs"}, ...], ...]}]}
reply:   {"ok": true, "version", "classes": {name: {"module", "module_file", "func_doc_file",
          "stateless", "description", "adapter_class", "code", "default_state", "third_party"}},
          "tasks": [{"id", "initial_states": {class: state},
                     "steps": [{"turn", "text", "class", "tool", "kwargs", "observation",
                                "observation_json", "raised", "state_after"}]}]}
         or {"ok": false, "error": "..."}

Each task runs as BFCL's own checker runs it: one object per involved class, loaded with
`_load_scenario` from a deep copy of the task's config (stateless classes are not loaded), every
ground-truth call routed to the involved class that has the method (the last one listed, as
BFCL does) and executed on the live object; after each call the object's JSON state is exported
with the same adapter the generated env.py uses. The arguments are Python literals read from the
call text with `ast`; envsim's own parse of the same text (`args`, `kwargs`) must agree.
"""

import ast
import copy
import importlib
import inspect
import json
import os
import random
import sys
import types

ADAPTER = {}


def fail(message):
    sys.stdout.write(json.dumps({"ok": False, "error": message}))
    sys.stdout.write("\n")
    sys.exit(0)


def record_seeds():
    """Remembers the seed of every random.Random created from here on (the adapter writes a
    generator as its seed and the number of words drawn since)."""
    original = random.Random.seed

    def seed(self, a=None, version=2):
        original(self, a, version)
        if a is None or isinstance(a, bool) or not isinstance(a, (int, str)):
            self.__dict__.pop("_envsim_origin", None)
        else:
            self._envsim_origin = (a, 0)

    random.Random.seed = seed


def literal(node, text):
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError("%s: the argument %s is not a Python literal" % (text, ast.unparse(node)))


def parse_call(text):
    """(name, positional, keyword) of a call written as Python, e.g. cd(folder='document')."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError("%s: not a Python call: %s" % (text, exc.msg))
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ValueError("%s: not a call of a plain function name" % text)
    args = [literal(a, text) for a in call.args]
    kwargs = {}
    for k in call.keywords:
        if k.arg is None:
            raise ValueError("%s: **kwargs is not supported" % text)
        kwargs[k.arg] = literal(k.value, text)
    return call.func.id, args, kwargs


def as_json(value):
    """`value` as JSON (tuples as lists), or None when JSON cannot hold it."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return None


def bound_names(tree):
    """Names the top level of a module binds."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def definitions(name, wanted):
    """The top-level statements of module `name` that define the names `wanted` (and what
    they refer to), as source text, with every name they bind; None when the module is not a
    plain list of definitions (imports, other statements, a name bound twice)."""
    module = importlib.import_module(name)
    with open(inspect.getsourcefile(module), encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source)
    defined = {}
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            targets = [t.id for t in node.targets]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            targets = [node.name]
        else:
            return None
        for target in targets:
            if target in defined:
                return None
            defined[target] = i
    chosen, stack = set(), list(wanted)
    while stack:
        target = stack.pop()
        if target not in defined:
            return None
        if defined[target] in chosen:
            continue
        chosen.add(defined[target])
        stack.extend(n.id for n in ast.walk(tree.body[defined[target]]) if isinstance(n, ast.Name) and n.id in defined)
    binds = {t for t, i in defined.items() if i in chosen}
    text = "".join(ast.get_source_segment(source, tree.body[i]) + "\n" for i in sorted(chosen))
    return text, binds


def module_source(name, modules, order):
    """The source of module `name` with every `from bfcl_eval... import` replaced: by the
    imported definitions themselves where the imported module is a plain list of definitions
    and nothing collides, else by assignments from the inlined module (collected in `order`)."""
    module = importlib.import_module(name)
    path = inspect.getsourcefile(module)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source, filename=path)
    lines = source.splitlines(keepends=True)
    own = bound_names(tree)
    replacements = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "bfcl_eval" for a in node.names):
            raise ValueError("%s:%d: `import bfcl_eval...` cannot be inlined" % (path, node.lineno))
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            raise ValueError("%s:%d: a relative import cannot be inlined" % (path, node.lineno))
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bfcl_eval"):
            continue
        if node.col_offset != 0:
            raise ValueError("%s:%d: a nested bfcl_eval import cannot be inlined" % (path, node.lineno))
        if any(alias.name == "*" for alias in node.names):
            raise ValueError("%s:%d: `import *` cannot be inlined" % (path, node.lineno))
        wanted = [alias.name for alias in node.names]
        plain = all(alias.asname in (None, alias.name) for alias in node.names)
        found = definitions(node.module, wanted) if plain else None
        imported = set(wanted)
        if found is not None and not ((found[1] - imported) & own):
            text = "# from %s (inlined by envsim: the definitions of %s)\n%s" % (node.module, ", ".join(wanted), found[0])
        else:
            if node.module not in modules:
                modules[node.module] = None
                modules[node.module] = module_source(node.module, modules, order)
                order.append(node.module)
            text = "".join(
                "%s = _envsim_modules[%r].%s\n" % (alias.asname or alias.name, node.module, alias.name)
                for alias in node.names
            )
        replacements.append((node.lineno, node.end_lineno, text))
    for start, end, text in sorted(replacements, reverse=True):
        lines[start - 1:end] = [text]
    return "".join(lines)


def env_code(module_name, class_name, adapter_class, adapter_text, default_state):
    modules, order = {}, []
    body = module_source(module_name, modules, order)
    head = [
        "# Generated by `envsim env import-bfcl` from the installed bfcl-eval package: the source of\n",
        "# %s (BFCL's code, unchanged but for its bfcl_eval imports, replaced by\n" % module_name,
        "# the definitions they import), then envsim's JSON state adapter and the envsim class.\n",
    ]
    if order:
        head += ["import types as _envsim_types\n", "_envsim_modules = {}\n"]
    for name in order:
        head.append("_envsim_modules[%r] = _envsim_types.ModuleType(%r)\n" % (name, name))
        head.append("exec(compile(%r, %r, 'exec'), _envsim_modules[%r].__dict__)\n" % (modules[name], name, name))
    head.append("# ---- %s ----\n" % module_name)
    tail = [
        "\n\n# envsim: adapter begin\n# ---- envsim JSON state adapter ----\n",
        adapter_text,
        "\n\n%s = envsim_adapter(%s, %r, _envsim_json.loads(%r), globals())\n"
        % (adapter_class, class_name, adapter_class, json.dumps(default_state, sort_keys=True)),
    ]
    return "".join(head) + body + "".join(tail)


def third_party(code):
    """Top-level modules the code imports that are not in the standard library."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return sorted(n for n in names if n not in sys.stdlib_module_names)


def main():
    if len(sys.argv) != 2:
        fail("usage: bfcl_import.py ADAPTER.py < request.json")
    with open(sys.argv[1], encoding="utf-8") as f:
        adapter_text = f.read()
    exec(compile(adapter_text, "bfcl_adapter.py", "exec"), ADAPTER)
    request = json.load(sys.stdin)
    source = os.path.abspath(request["source"])
    sys.path.insert(0, os.path.dirname(source))
    try:
        config = importlib.import_module("bfcl_eval.constants.executable_backend_config")
    except ImportError as exc:
        fail("cannot import bfcl_eval from %s: %s (pip install bfcl-eval==2026.3.23 --no-deps; pip install mpmath)" % (source, exc))
    loaded_from = os.path.dirname(os.path.abspath(importlib.import_module("bfcl_eval").__file__))
    if loaded_from != source:
        fail("bfcl_eval was imported from %s, not from %s" % (loaded_from, source))
    record_seeds()
    long_context = bool(request.get("long_context"))
    mapping = config.CLASS_FILE_PATH_MAPPING
    doc_files = config.MULTI_TURN_FUNC_DOC_FILE_MAPPING
    stateless = set(getattr(config, "STATELESS_CLASSES", []))

    classes, objects = {}, {}
    for task in request["tasks"]:
        for name in task["involved_classes"]:
            if name in classes:
                continue
            if name not in mapping:
                fail("task %s: involved class %r is not in bfcl_eval's CLASS_FILE_PATH_MAPPING" % (task["id"], name))
            try:
                module = importlib.import_module(mapping[name])
            except ImportError as exc:
                fail("cannot import %s (for %s): %s (pip install mpmath?)" % (mapping[name], name, exc))
            cls = getattr(module, name)
            objects[name] = (module, cls, ADAPTER["envsim_constants"](cls))
            fresh = cls()
            if name not in stateless:
                fresh._load_scenario({}, long_context=long_context)
            default_state = ADAPTER["envsim_export"](fresh, objects[name][2])
            adapter_class = "Envsim" + name
            classes[name] = {
                "module": mapping[name],
                "module_file": os.path.splitext(os.path.basename(module.__file__))[0],
                "func_doc_file": doc_files.get(name),
                "stateless": name in stateless,
                "description": getattr(fresh, "_api_description", "") or (cls.__doc__ or "").strip(),
                "adapter_class": adapter_class,
                "default_state": default_state,
                "code": env_code(mapping[name], name, adapter_class, adapter_text, default_state),
            }
            classes[name]["third_party"] = third_party(classes[name]["code"])

    out_tasks = []
    for task in request["tasks"]:
        live, initial = {}, {}
        routes = {}
        for name in task["involved_classes"]:
            module, cls, constants = objects[name]
            obj = cls()
            if name not in stateless:
                obj._load_scenario(copy.deepcopy(task["initial_config"].get(name, {})), long_context=long_context)
            live[name] = obj
            initial[name] = ADAPTER["envsim_export"](obj, constants)
            for method in ADAPTER["envsim_public_methods"](cls):
                routes[method] = name
        steps = []
        for t, turn in enumerate(task["turns"]):
            for call in turn:
                text = call["text"]
                try:
                    tool, args, kwargs = parse_call(text)
                except ValueError as exc:
                    fail("task %s, turn %d: %s" % (task["id"], t, exc))
                if [tool, as_json(args), as_json(kwargs)] != [call["name"], call["args"], call["kwargs"]]:
                    fail("task %s, turn %d: %s: envsim read %s" % (task["id"], t, text, json.dumps(call)))
                owner = routes.get(tool)
                step = {"turn": t, "text": text, "class": owner, "tool": tool}
                if owner is None:
                    step.update(kwargs=kwargs, observation=None, observation_json=None,
                                raised="no involved class has the function %r" % tool, state_after=None)
                    steps.append(step)
                    continue
                obj = live[owner]
                method = getattr(obj, tool)
                try:
                    bound = inspect.signature(method).bind(*args, **kwargs)
                    named = dict(bound.arguments)
                except TypeError as exc:
                    named, raised = dict(kwargs), "TypeError: %s" % exc
                    step.update(kwargs=as_json(named), observation=None, observation_json=None, raised=raised,
                                state_after=ADAPTER["envsim_export"](obj, objects[owner][2]))
                    steps.append(step)
                    continue
                raised, result = None, None
                try:
                    result = method(**named)
                except Exception as exc:  # BFCL's checker turns these into "Error during execution"
                    raised = "%s: %s" % (type(exc).__name__, exc)
                step.update(
                    kwargs=as_json(named),
                    observation=None if raised else str(result),
                    observation_json=None if raised else as_json(result),
                    raised=raised,
                    state_after=ADAPTER["envsim_export"](obj, objects[owner][2]),
                )
                steps.append(step)
        out_tasks.append({"id": task["id"], "initial_states": initial, "steps": steps})

    version = None
    try:
        from importlib import metadata

        version = metadata.version("bfcl-eval")
    except Exception:
        version = None
    json.dump({"ok": True, "version": version, "classes": classes, "tasks": out_tasks}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
