# envsim's AppWorld import helper: stdlib only, run with the interpreter that has `appworld`
# installed (`pip install appworld==0.1.3.post1 && appworld install`).
#
# It reads a JSON request on stdin and answers one JSON object on stdout (progress lines on
# stderr). For every app asked for it:
# - builds worlds of several sizes reproducibly with AppWorld's own record factories (the same
#   people in every app, the apps' notification accounts, every table filled in the order of
#   its references), in AppWorld's in-memory databases, at one frozen AppWorld time;
# - generates call sessions (a login, then every agent-visible API of the app with arguments
#   drawn from the world: ids of existing and missing records, the session's token, values
#   within the documented constraints) and runs them on AppWorld itself, noting which apps'
#   databases each call touched (statements run on that app's connection);
# - generates a class of envsim's class convention whose public attributes are the touched
#   apps' tables (rows keyed by primary key) and whose methods are the app's APIs, and runs
#   every step again through it, each from a fresh instance built from the JSON of the state
#   before it, reporting every place where an answer or the state differs.
# Nothing of AppWorld is copied into the package: the generated code imports the installed
# package at run time, so the executor's interpreter must import `appworld`.

import json
import keyword
import random
import sys
import time
import traceback

FROZEN_TIME = "2023-05-18T12:00:00"
CALL_SEED = 0
WORLD_SEED = 7
APPS = ["amazon", "file_system", "gmail", "phone", "simple_note", "splitwise", "spotify", "todoist", "venmo"]
SIZES = {"small": (3, 2), "medium": (6, 4), "large": (12, 8)}
SESSIONS_PER_STATE = 2


def progress(message):
    sys.stderr.write("progress: " + message + "\n")
    sys.stderr.flush()


# ----------------------------------------------------------------------------------------------
# The generated class. Its text is the package's env.py: the constants first, then this.

ADAPTER = r'''
import json as _envsim_json
import random as _envsim_random
import warnings as _envsim_warnings

_ENVSIM_ADAPTER = "appworld_adapter_1"
_ENVSIM_RANDOM_NAMES = ("random", "randint", "choice", "choices", "shuffle", "sample", "uniform",
                        "randrange", "getrandbits", "gauss", "seed")


def _envsim_genuine(cls):
    """The class Python's datetime module defines, under any subclass put in its place."""
    for klass in cls.__mro__:
        if klass.__module__ == "datetime":
            return klass
    return cls


class _EnvsimGenuineRuntime:
    """AppWorld runs as on its own: with the datetime classes Python defines (envsim's executor
    puts subclasses with a frozen clock in their place, which AppWorld's date parsing refuses)
    and the random module's own generator, seeded with _ENVSIM_CALL_SEED before each call;
    AppWorld freezes its own clock. The executor's replacements are put back after."""

    def __enter__(self):
        import datetime
        self.saved = (datetime.datetime, datetime.date,
                      {name: getattr(_envsim_random, name) for name in _ENVSIM_RANDOM_NAMES})
        datetime.datetime = _envsim_genuine(datetime.datetime)
        datetime.date = _envsim_genuine(datetime.date)
        for name in _ENVSIM_RANDOM_NAMES:
            setattr(_envsim_random, name, getattr(_envsim_random._inst, name))
        _envsim_random.seed(_ENVSIM_CALL_SEED)
        return self

    def __exit__(self, *exc):
        import datetime
        datetime.datetime, datetime.date, functions = self.saved
        for name, function in functions.items():
            setattr(_envsim_random, name, function)
        return False


class _EnvsimWorld:
    """AppWorld's in-memory databases of the state's apps, with the tables as envsim sees
    them: rows keyed by primary key, booleans as booleans, JSON columns decoded."""

    def __init__(self):
        from appworld.requester import Requester
        from appworld.common.utils import import_models_module, freeze_time

        self.freeze_time = freeze_time
        # As text: envsim's executor freezes its own clock by replacing `datetime`, whose
        # instances freezegun does not take.
        self.frozen = _ENVSIM_FROZEN_TIME
        self.requester = Requester(
            to_db_home_path=":memory:envsim", from_db_home_path=":memory:envsim",
            load_apps=list(_ENVSIM_ALL_APPS), raise_on_failure=False, create_db=True,
            # A worker lives for many calls: AppWorld's guard against an agent's endless loop
            # (2,000 requests per task) does not apply.
            max_num_requests=None)
        self.apps = list(self.requester.apps)
        self.connections = {}
        self.tables = {}
        self.managers = {}
        self.touched = set()
        # Apps whose databases may hold rows: emptied before a call of a package whose state
        # does not hold them, so no call sees what another package's call left.
        self.dirty = set()
        for app in self.apps:
            connection = import_models_module(app).SQLModel.db.connection
            self.connections[app] = connection
            connection.set_trace_callback(self._tracer(app))
            try:
                from appworld.common.utils import import_apis_module
                self.managers[app] = getattr(import_apis_module(app), "logging_manager", None)
            except Exception:
                self.managers[app] = None
            self.tables[app] = self._schema(connection)
        self.live = None

    def _tracer(self, app):
        def trace(statement):
            self.touched.add(app)
        return trace

    @staticmethod
    def _schema(connection):
        """(table, key columns, {column: kind}) of every table whose rows are state: the
        regular tables, each full-text index (`<table>_fts`, keyed by rowid) and
        `sqlite_sequence` (the autoincrement counters), in name order."""
        rows = connection.execute(
            "SELECT name, type, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
        names = [r[0] for r in rows]
        virtual = {r[0] for r in rows if (r[2] or "").upper().startswith("CREATE VIRTUAL TABLE")}
        shadow = {n for n in names for v in virtual if n != v and n.startswith(v + "_")}
        tables = []
        for name in names:
            if name in shadow:
                continue
            if name == "sqlite_sequence":
                tables.append((name, None, {}))
                continue
            info = connection.execute('PRAGMA table_info("%s")' % name).fetchall()
            kinds = {}
            for column in info:
                declared = (column[2] or "").upper()
                kinds[column[1]] = "bool" if declared == "BOOLEAN" else "json" if declared == "JSON" else ""
            keys = [c[1] for c in sorted(info, key=lambda c: c[5]) if c[5]]
            tables.append((name, keys if keys and name not in virtual else ["rowid"], kinds))
        return tables

    def dump_app(self, app):
        connection = self.connections[app]
        out = {}
        for name, keys, kinds in self.tables[app]:
            if keys is None:
                out[name] = {row[0]: row[1] for row in connection.execute("SELECT name, seq FROM sqlite_sequence ORDER BY name")}
                continue
            columns = list(kinds)
            select = ", ".join('"%s"' % c for c in columns)
            if keys == ["rowid"]:
                select = "rowid, " + select
            table = {}
            for row in connection.execute('SELECT %s FROM "%s" ORDER BY %s' % (select, name, ", ".join(keys))):
                offset = 1 if keys == ["rowid"] else 0
                record = {}
                for column, value in zip(columns, row[offset:]):
                    kind = kinds[column]
                    if value is not None and kind == "bool":
                        value = bool(value)
                    elif value is not None and kind == "json" and isinstance(value, str):
                        value = _envsim_json.loads(value)
                    record[column] = value
                key = row[0] if offset else tuple(record[k] for k in keys)
                if isinstance(key, tuple):
                    key = key[0] if len(key) == 1 else "/".join(str(k) for k in key)
                table[str(key)] = record
            out[name] = table
        manager = self.managers.get(app)
        if manager is not None:
            out["logged_out_tokens"] = sorted(manager.blacklisted_tokens)
        return out

    def load_app(self, app, state):
        connection = self.connections[app]
        state = state or {}
        if any(state.values()):
            self.dirty.add(app)
        else:
            self.dirty.discard(app)
        known = {name for name, _, _ in self.tables[app]} | {"logged_out_tokens"}
        unknown = sorted(set(state) - known)
        if unknown:
            raise ValueError("the %s state has tables AppWorld's %s app does not: %s" % (app, app, ", ".join(unknown)))
        connection.commit()
        for name, keys, kinds in self.tables[app]:
            connection.execute('DELETE FROM "%s"' % name)
        for name, keys, kinds in self.tables[app]:
            rows = state.get(name) or {}
            if keys is None:
                continue
            columns = list(kinds)
            names = ", ".join('"%s"' % c for c in columns)
            marks = ", ".join("?" for _ in columns)
            if keys == ["rowid"]:
                statement = 'INSERT INTO "%s" (rowid, %s) VALUES (?, %s)' % (name, names, marks)
            else:
                statement = 'INSERT INTO "%s" (%s) VALUES (%s)' % (name, names, marks)
            values = []
            for key, record in rows.items():
                row = []
                for column in columns:
                    value = record.get(column)
                    if value is not None and kinds[column] == "json":
                        value = _envsim_json.dumps(value)
                    row.append(value)
                values.append(([int(key)] if keys == ["rowid"] else []) + row)
            connection.executemany(statement, values)
        # The counters last: inserting rows with their ids has set each counter to the largest
        # id present, which is less than the state's after the newest record was deleted.
        if any(keys is None for _, keys, _ in self.tables[app]):
            connection.execute("DELETE FROM sqlite_sequence")
            connection.executemany("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)",
                                   sorted((state.get("sqlite_sequence") or {}).items()))
        connection.commit()
        manager = self.managers.get(app)
        if manager is not None:
            manager.blacklisted_tokens = set(state.get("logged_out_tokens") or [])

    def request(self, app, api, arguments):
        """AppWorld's answer to one call: the response's JSON when it succeeded, else the text
        of the exception AppWorld raises for a failed call."""
        with _EnvsimGenuineRuntime(), self.freeze_time(self.frozen), _envsim_warnings.catch_warnings():
            # PyJWT warns about AppWorld's short signing key on every token.
            _envsim_warnings.simplefilter("ignore")
            response = self.requester._request(_app_name=app, _api_name=api, raise_on_failure=False, **arguments)
        text = response.text
        if "Method Not Allowed" in text:
            return "Response status code is %s:\n%s" % (response.status_code, "API not found or some of the passed parameters are invalid.")
        if response.status_code == 200:
            return _envsim_json.loads(text)
        return "Response status code is %s:\n%s" % (response.status_code, text)


def _envsim_world():
    """The process's one AppWorld world, shared by every AppWorld package the process runs:
    AppWorld binds each app's models to one database per process, so two worlds would take
    each other's databases."""
    import sys
    import types
    registry = sys.modules.get("_envsim_appworld_worlds")
    if registry is None:
        registry = sys.modules["_envsim_appworld_worlds"] = types.ModuleType("_envsim_appworld_worlds")
    world = getattr(registry, _ENVSIM_ADAPTER, None)
    if world is None:
        # AppWorld and the libraries it imports capture the datetime classes at import.
        with _EnvsimGenuineRuntime():
            world = _EnvsimWorld()
        setattr(registry, _ENVSIM_ADAPTER, world)
    return world


class _EnvsimAppWorldApp:
    def __init__(self, init_config=None):
        pass

    def _envsim_call(self, api, arguments):
        world = _envsim_world()
        state = vars(self)
        live = world.live
        # The databases the last call left, while this instance still holds exactly the tables
        # that call wrote: loading a world costs more than most calls.
        if not (live is not None and live[0] is self and len(live[1]) == len(state)
                and all(state.get(key) is value for key, value in live[1].items())):
            for app in sorted(world.dirty - set(_ENVSIM_STATE_APPS)):
                world.load_app(app, {})
            for app in _ENVSIM_STATE_APPS:
                world.load_app(app, state.get(app))
        world.live = None
        world.touched = set()
        try:
            answer = world.request(_ENVSIM_APP, api, arguments)
        finally:
            # An exception inside the app propagates as the call's own (AppWorld's test client
            # re-raises it), with whatever the app wrote before it in the state.
            world.dirty |= world.touched
            for app in sorted(world.touched & set(_ENVSIM_STATE_APPS)):
                setattr(self, app, world.dump_app(app))
        outside = sorted(world.touched - set(_ENVSIM_STATE_APPS))
        if outside:
            raise RuntimeError("the call touched AppWorld apps outside the package's state (%s): re-import with them" % ", ".join(outside))
        world.live = (self, dict(vars(self)))
        return answer
'''


def method_source(api):
    """A method with the API's own parameters (optional ones default to leaving them out)."""
    parameters = api["parameters"]
    names = [p["name"] for p in parameters]
    plain = all(n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_") for n in names)
    lines = []
    if plain:
        required = [p["name"] for p in parameters if p["required"]]
        optional = [p["name"] for p in parameters if not p["required"]]
        signature = ", ".join(["self"] + required + ["%s=_ENVSIM_ABSENT" % n for n in optional])
        lines.append("    def %s(%s):" % (api["api_name"], signature))
        lines.append("        %s" % json.dumps(api["description"]))
        lines.append("        arguments = {%s}" % ", ".join("%s: %s" % (json.dumps(n), n) for n in names))
        lines.append("        arguments = {k: v for k, v in arguments.items() if v is not _ENVSIM_ABSENT}")
    else:
        lines.append("    def %s(self, **arguments):" % api["api_name"])
        lines.append("        %s" % json.dumps(api["description"]))
    lines.append("        return self._envsim_call(%s, arguments)" % json.dumps(api["api_name"]))
    return "\n".join(lines) + "\n"


def class_name_of(app):
    return "EnvsimAppWorld" + "".join(part.capitalize() for part in app.split("_"))


def generate(app, state_apps, apis):
    head = (
        "# envsim package for AppWorld's %s app (generated by `envsim env import-appworld`).\n"
        "# It runs the installed `appworld` package: the executor's interpreter must import it.\n"
        "_ENVSIM_APP = %s\n_ENVSIM_STATE_APPS = %s\n_ENVSIM_ALL_APPS = %s\n_ENVSIM_FROZEN_TIME = %s\n"
        "_ENVSIM_CALL_SEED = %d\n_ENVSIM_ABSENT = object()\n"
    ) % (app, json.dumps(app), json.dumps(sorted(state_apps)), json.dumps(APPS), json.dumps(FROZEN_TIME), CALL_SEED)
    body = "\n\nclass %s(_EnvsimAppWorldApp):\n    %s\n\n" % (
        class_name_of(app), json.dumps("AppWorld's %s app." % app))
    body += "\n".join(method_source(api) for api in apis)
    # All of it is adapter: AppWorld's own code runs in the installed package, outside the map.
    return head + "# envsim: adapter begin\n" + ADAPTER + body


# ----------------------------------------------------------------------------------------------
# Worlds.

def table_models(models):
    return [m for _, m in models.SQLModel.names_and_models() if getattr(m, "__table__", None) is not None]


def references(model, models):
    """field → (the model it references, whether it holds a list of ids): `*_id` / `*_ids`
    fields named after a model (through the model's own field mapping), or declared foreign
    keys."""
    import inflection
    by_name = {m.__name__: m for m in table_models(models)}
    by_table = {m.__table__.name: m for m in table_models(models)}
    out = {}
    mapping = model.field_mapping()
    for name in model.__fields__:
        if not (name.endswith("_id") or name.endswith("_ids")):
            continue
        look = mapping.get(name, name)
        target = by_name.get(inflection.camelize(look.removesuffix("_ids").removesuffix("_id")))
        if target is None and name in model.__table__.columns:
            for fk in model.__table__.columns[name].foreign_keys:
                target = by_table.get(fk.column.table.name)
        if target is not None:
            out[name] = (target, name.endswith("_ids"))
    return out


def ordered_models(models):
    """Table models, each after the models it references."""
    ms = table_models(models)
    deps = {m: {t for t, _ in references(m, models).values() if t is not m} for m in ms}
    out, seen = [], set()

    def visit(m, trail):
        if m in seen or m in trail:
            return
        for d in sorted(deps[m], key=lambda x: x.__name__):
            visit(d, trail | {m})
        seen.add(m)
        out.append(m)

    for m in ms:
        visit(m, set())
    return out


def settle_times(record, fields, frozen):
    """Moves date-times the factories drew after the world's time (a last login up to a year
    after the account's creation) to a random moment between the record's creation, or a month
    before, and the world's time: a world's records all lie in its past."""
    import datetime as dt
    created = getattr(record, "created_at", None)
    for name in fields:
        value = getattr(record, name, None)
        if not isinstance(value, dt.datetime):
            continue
        try:
            if value <= frozen:
                continue
            start = frozen.subtract(days=30)
            if isinstance(created, dt.datetime) and name != "created_at" and start < created <= frozen:
                start = created
            span = (frozen - start).total_seconds()
            setattr(record, name, start.add(seconds=int(random.random() * span)))
        except TypeError:  # an aware and a naive date-time: left as drawn
            continue


def build_world(apps, persons, per_user, seed, frozen):
    """Fills the apps' databases; returns {app.Model: [rows made, rows wanted, first error]}."""
    import datetime as dt
    from appworld.apps.api_lib import CompanyNotifier
    from appworld.common.random import set_random_seed
    from appworld.common.utils import import_models_module
    from faker import Faker

    set_random_seed(seed, python=True, faker_=True, model_factory=True)
    fake = Faker()
    people = []
    for i in range(persons):
        first, last = fake.first_name(), fake.last_name()
        people.append({
            "first_name": first, "last_name": last,
            "email": "%s.%s%d@example.com" % (first.lower(), last.lower(), i),
            "phone_number": str(2000000000 + random.randrange(10 ** 9)),
            "password": fake.password(length=10),
        })
    for app in apps:
        if app != "admin":
            CompanyNotifier(app).create_accounts(skip_if_exists=True)
    report = {}
    for app in apps:
        models = import_models_module(app)
        for model in ordered_models(models):
            name = model.__name__
            fields = model.__fields__
            refs = references(model, models)
            wanted = persons if name == "User" else persons * per_user
            made, error = 0, None
            try:
                model.factory()
            except Exception as exc:
                report["%s.%s" % (app, name)] = [0, wanted, "AppWorld has no record factory for it (%s)" % exc]
                continue
            for k in range(wanted):
                for attempt in range(12):
                    over = {}
                    if name == "User":
                        over = {f: v for f, v in people[k].items() if f in fields}
                        if "verified" in fields:
                            over["verified"] = True
                    for column, (target, many) in refs.items():
                        if column in over or target is model:
                            continue
                        if attempt > 2 and not fields[column].required and random.random() < 0.5:
                            continue
                        ids = [r.id for r in target.all()]
                        if ids:
                            over[column] = random.sample(ids, min(len(ids), random.randint(1, 3))) if many else random.choice(ids)
                    factory = model.factory()
                    for field_name, field in fields.items():
                        if field_name in over or field_name in vars(factory):
                            continue
                        if "datetime" in str(field.outer_type_).lower():
                            over[field_name] = frozen.subtract(days=random.randint(30, 365), minutes=random.randint(0, 1440))
                    try:
                        record = factory.build(**over)
                        settle_times(record, fields, frozen)
                        model.save_all([record])
                        made += 1
                        break
                    except Exception as exc:
                        error = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")
            report["%s.%s" % (app, name)] = [made, wanted, None if made == wanted else error]
    return people, report


# ----------------------------------------------------------------------------------------------
# Call sessions.

def constraint_choices(parameter):
    for constraint in parameter.get("constraints") or []:
        if constraint.startswith("value in "):
            try:
                return json.loads(constraint[len("value in "):].replace("'", '"'))
            except ValueError:
                return None
    return None


def bound(parameter, op):
    for constraint in parameter.get("constraints") or []:
        parts = constraint.split()
        if len(parts) == 3 and parts[0] in ("value", "length") and parts[1] == op:
            try:
                return float(parts[2])
            except ValueError:
                return None
    return None


class Exerciser:
    """Arguments for an app's APIs drawn from the world as it stands."""

    def __init__(self, app, rng, people, fake, person):
        from appworld.common.utils import import_models_module
        import inflection
        self.app = app
        self.rng = rng
        self.people = people
        self.fake = fake
        self.models = import_models_module(app)
        self.inflection = inflection
        self.by_name = {m.__name__: m for m in table_models(self.models)}
        self.user_id = None
        user = self.by_name.get("User")
        if user is not None:
            for row in user.all():
                if getattr(row, "email", None) == person["email"] or getattr(row, "phone_number", None) == person["phone_number"]:
                    self.user_id = row.id

    def ids(self, noun):
        """(the ids of the session user's own records, all ids) of the model a `<noun>_id`
        argument names, or None."""
        model = self.by_name.get(self.inflection.camelize(self.inflection.singularize(noun)))
        if model is None:
            return None
        rows = model.all()
        own = [r.id for r in rows if self.user_id is not None and getattr(r, "user_id", None) == self.user_id]
        return own, [r.id for r in rows]

    def value(self, parameter, token):
        name = parameter["name"]
        kind = parameter["type"]
        rng = self.rng
        if name == "access_token":
            return token if rng.random() < 0.95 else "not-a-token"
        choices = constraint_choices(parameter)
        if choices:
            return rng.choice(choices)
        person = rng.choice(self.people)
        if name.endswith("_ids") or name.endswith("_id"):
            found = self.ids(name.rsplit("_", 1)[0])
            if found is not None:
                own, ids = found
                missing = (max(ids) if ids else 0) + rng.randint(50, 500)

                def pick():
                    draw = rng.random()
                    if own and draw < 0.6:
                        return rng.choice(own)
                    if ids and draw < 0.88:
                        return rng.choice(ids)
                    return missing
                if name.endswith("_ids"):
                    return sorted({pick() for _ in range(rng.randint(1, 3))})
                return pick()
        if "email" in name and kind == "string":
            return person["email"] if rng.random() < 0.8 else self.fake.email()
        if "phone_number" in name and kind == "string":
            return person["phone_number"] if rng.random() < 0.8 else str(2000000000 + rng.randrange(10 ** 9))
        if name in ("username",):
            return person["email"]
        if name == "password" or name.endswith("_password"):
            return person["password"] if rng.random() < 0.7 else self.fake.password(length=10)
        if name == "page_index":
            return rng.randint(0, 1)
        if name == "page_limit":
            return rng.randint(1, 10)
        if kind == "integer":
            low, high = bound(parameter, ">="), bound(parameter, "<=")
            low = int(low) if low is not None else 1
            high = int(high) if high is not None else low + 9
            return rng.randint(low, max(low, high))
        if kind == "number":
            low = bound(parameter, ">=") or bound(parameter, ">") or 1.0
            return round(rng.uniform(low, low + 99), 2)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind.startswith("list"):
            # AppWorld writes `list[string]`, `list[number]`.
            if "email" in name:
                return sorted({rng.choice(self.people)["email"] for _ in range(rng.randint(1, 2))})
            if "number" in kind or "integer" in kind:
                return [round(rng.uniform(1, 100), 2) for _ in range(rng.randint(1, 2))]
            return [self.fake.word() for _ in range(rng.randint(1, 2))]
        if kind == "dict":
            return {}
        if "date" in name or "time" in name:
            return "2023-0%d-%02dT%02d:00:00" % (rng.randint(1, 9), rng.randint(1, 28), rng.randint(0, 23))
        if name == "query":
            return self.fake.word() if rng.random() < 0.5 else ""
        minimum = bound(parameter, ">=") or 1
        text = self.fake.sentence(nb_words=4).rstrip(".")
        return text if len(text) >= minimum else text + " " + "x" * int(minimum)

    def arguments(self, api, token):
        arguments = {}
        for parameter in api["parameters"]:
            if not parameter["required"] and self.rng.random() < 0.7 and parameter["name"] != "access_token":
                continue
            arguments[parameter["name"]] = self.value(parameter, token)
        return arguments


def login_arguments(app, person, rng):
    from appworld.common.utils import import_apis_module
    login_by = import_apis_module(app).login_by
    username = person["phone_number"] if login_by == "phone_number" else person["email"]
    password = person["password"] if rng.random() < 0.9 else "wrong-password"
    return {"username": username, "password": password}


# ----------------------------------------------------------------------------------------------
# The import.

def escape(token):
    return str(token).replace("~", "~0").replace("/", "~1")


def diff(before, after, pointer, changes, absent):
    if isinstance(before, dict) and isinstance(after, dict):
        for key in after:
            if key not in before:
                changes[pointer + "/" + escape(key)] = after[key]
            elif before[key] != after[key]:
                diff(before[key], after[key], pointer + "/" + escape(key), changes, absent)
        for key in before:
            if key not in after:
                absent.append(pointer + "/" + escape(key))
    elif before != after:
        changes[pointer] = after


def api_docs(app):
    from appworld.api_docs import prepare_api_docs
    standard = prepare_api_docs(app)
    calling = {d["function"]["name"]: d["function"] for d in prepare_api_docs(app, format="function_calling")}
    apis = []
    for doc in standard:
        function = calling.get("%s__%s" % (app, doc["api_name"]))
        schema = dict(function["parameters"]) if function else {"type": "object", "properties": {}}
        schema["type"] = "object"
        required = [p["name"] for p in doc["parameters"] if p["required"]]
        if required:
            schema["required"] = required
        for parameter in doc["parameters"]:
            prop = schema.setdefault("properties", {}).setdefault(parameter["name"], {})
            if parameter.get("default") is not None and "default" not in prop:
                prop["default"] = parameter["default"]
        doc = dict(doc)
        doc["schema"] = {"type": "function", "function": {
            "name": doc["api_name"], "description": doc["description"], "parameters": schema}}
        apis.append(doc)
    return apis


def openapi_document(app, apis, description):
    """An OpenAPI 3.1 description of the app's agent-visible APIs as envsim's tools take them:
    AppWorld's own paths and methods (without the app's prefix, which is the server's path),
    path parameters in the path, the other arguments (the access token among them) as the query
    of GET and DELETE and the JSON body of the rest, and the documented answers."""
    paths = {}
    for api in apis:
        path = api["path"]
        prefix = "/" + app
        if path.startswith(prefix + "/") or path == prefix:
            path = path[len(prefix):] or "/"
        method = api["method"].lower()
        properties = api["schema"]["function"]["parameters"].get("properties", {})
        required = set(api["schema"]["function"]["parameters"].get("required", []))
        parameters, body = [], {}
        for name, schema in properties.items():
            if "{" + name + "}" in path:
                parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
            elif method in ("get", "delete"):
                parameters.append({"name": name, "in": "query", "required": name in required, "schema": schema})
            else:
                body[name] = schema
        operation = {"operationId": api["api_name"], "description": api["description"]}
        if parameters:
            operation["parameters"] = parameters
        if body:
            body_schema = {"type": "object", "properties": body}
            body_required = [n for n in body if n in required]
            if body_required:
                body_schema["required"] = body_required
            operation["requestBody"] = {"required": bool(body_required), "content": {"application/json": {"schema": body_schema}}}
        schemas = api.get("response_schemas") or {}
        operation["responses"] = {
            "200": {"description": "Success.", "content": {"application/json": {"example": schemas.get("success")}}},
            "default": {"description": "Failure (AppWorld answers 401, 404, 409 or 422 with a message).",
                         "content": {"application/json": {"example": schemas.get("failure", {"message": "string"})}}},
        }
        paths.setdefault(path, {})[method] = operation
    return {"openapi": "3.1.0", "info": {"title": "AppWorld %s" % app, "version": "0.1.3", "description": description},
            "servers": [{"url": "/" + app}], "paths": paths}


class Native:
    """AppWorld with every app loaded, in one process: worlds are built here and sessions run
    here first (the truth), then again through the generated class."""

    def __init__(self):
        from appworld.common.datetime import DateTime
        from appworld.common.utils import freeze_time
        self.frozen = DateTime.fromisoformat(FROZEN_TIME)
        self.freeze_time = freeze_time
        namespace = {}
        exec(compile(generate("simple_note", APPS, []), "<envsim adapter>", "exec"), namespace)
        # The process's world, every app loaded: the generated classes run in it too.
        self.world = namespace["_envsim_world"]()

    def reset(self):
        for app in self.world.apps:
            self.world.load_app(app, {})

    def dump(self, apps=None):
        return {app: self.world.dump_app(app) for app in (apps or self.world.apps)}


def companions(app):
    """The apps whose tables the app's code writes or reads besides its own, from what its
    API module calls: the notification app of its logins (sign-up and reset codes are sent
    there), the file system (receipts and downloads are saved there) and the admin app (payment
    cards are charged there)."""
    import inspect
    from appworld.common.utils import import_apis_module
    module = import_apis_module(app)
    source = inspect.getsource(module)
    out = set()
    login_by = getattr(module, "login_by", None)
    if login_by == "email":
        out.add("gmail")
    elif login_by == "phone_number":
        out.add("phone")
    if "create_file" in source:
        out.add("file_system")
    if "request_payment_card" in source:
        out.add("admin")
    return out


def run_app(native, app, worlds, rng):
    """Runs the app's sessions on every world natively, then through the generated class."""
    from faker import Faker
    apis = api_docs(app)
    fake = Faker()
    fake.seed_instance(rng.randrange(10 ** 6))
    touched = {app} | companions(app)
    sessions = []
    for size, (people, state) in worlds.items():
        for session in range(SESSIONS_PER_STATE):
            native.reset()
            for other, tables in state.items():
                native.world.load_app(other, tables)
            person = rng.choice(people)
            exerciser = Exerciser(app, rng, people, fake, person)
            order = [a for a in apis if a["api_name"] not in ("login", "logout", "delete_account")]
            rng.shuffle(order)
            # Ending a session or an account comes last; an account is deleted in one session
            # of each world.
            if session == SESSIONS_PER_STATE - 1:
                order += [a for a in apis if a["api_name"] == "delete_account"]
            order += [a for a in apis if a["api_name"] == "logout"]
            steps = []
            token = None
            calls = [("login", login_arguments(app, person, rng))] if any(a["api_name"] == "login" for a in apis) else []
            calls += [(a["api_name"], None) for a in order]
            by_name = {a["api_name"]: a for a in apis}
            before = native.dump()
            for api_name, arguments in calls:
                if arguments is None:
                    arguments = exerciser.arguments(by_name[api_name], token)
                native.world.touched = set()
                raised = None
                try:
                    answer = native.world.request(app, api_name, arguments)
                except Exception as exc:
                    answer, raised = None, "%s: %s" % (type(exc).__name__, exc)
                if api_name == "login" and isinstance(answer, dict) and "access_token" in answer:
                    token = answer["access_token"]
                after = dict(before)
                for other in native.world.touched:
                    after[other] = native.world.dump_app(other)
                touched |= native.world.touched
                steps.append({"tool": api_name, "args": arguments, "answer": answer, "raised": raised, "after": after})
                before = after
            sessions.append({"size": size, "id": "%s-%s-%d" % (app, size, session + 1), "steps": steps})
    state_apps = sorted(touched)
    return apis, state_apps, sessions


def verify(native, app, state_apps, apis, worlds, sessions):
    """Runs every step through the generated class, each from a fresh instance built from the
    JSON text of the state before it (the databases reloaded), and lists every difference."""
    code = generate(app, state_apps, apis)
    namespace = {"__name__": "envsim_appworld_%s" % app}
    exec(compile(code, "<envsim %s>" % app, "exec"), namespace)
    # AppWorld's databases are per process: the class uses the world the truth ran in, whose
    # apps outside the package's state are empty now.
    native.reset()
    cls = namespace[class_name_of(app)]
    divergences = []
    for session in sessions:
        state = {a: worlds[session["size"]][1][a] for a in state_apps}
        for k, step in enumerate(session["steps"]):
            instance = cls()
            for key, value in json.loads(json.dumps(state)).items():
                setattr(instance, key, value)
            native.world.live = None
            where = "%s step %d %s" % (session["id"], k + 1, step["tool"])
            raised = None
            try:
                answer = getattr(instance, step["tool"])(**step["args"])
            except Exception as exc:
                answer, raised = None, "%s: %s" % (type(exc).__name__, exc)
            answer = json.loads(json.dumps(answer))
            if raised != step["raised"]:
                divergences.append("%s: AppWorld raised %s, envsim's class %s" % (where, step["raised"], raised))
            elif answer != json.loads(json.dumps(step["answer"])):
                divergences.append("%s: AppWorld answered %s, envsim's class %s" % (where, json.dumps(step["answer"])[:200], json.dumps(answer)[:200]))
            ours = {a: json.loads(json.dumps(getattr(instance, a))) for a in state_apps}
            theirs = {a: json.loads(json.dumps(step["after"][a])) for a in state_apps}
            if ours != theirs:
                changes, absent = {}, []
                diff(theirs, ours, "", changes, absent)
                places = sorted(changes)[:3] + absent[:3]
                divergences.append("%s: the state differs at %s" % (where, ", ".join(places)))
            state = theirs
            step["after"] = theirs
    return code, divergences


def package_reply(app, apis, state_apps, worlds, sessions, code, divergences):
    from appworld.apps import APP_TO_DESCRIPTION
    description = APP_TO_DESCRIPTION.get(app, app)
    states = {size: {a: state[a] for a in state_apps} for size, (_, state) in worlds.items()}
    out_sessions = []
    for session in sessions:
        before = states[session["size"]]
        steps = []
        for step in session["steps"]:
            changes, absent = {}, []
            diff(before, step["after"], "", changes, absent)
            steps.append({"tool": step["tool"], "args": step["args"], "answer": step["answer"],
                          "raised": step["raised"], "changes": changes, "absent": absent})
            before = step["after"]
        out_sessions.append({"id": session["id"], "size": session["size"], "steps": steps})
    return {
        "class_name": class_name_of(app),
        "description": description,
        "code": code,
        "state_apps": state_apps,
        "tools": [api["schema"] for api in apis],
        "openapi": openapi_document(app, apis, description),
        "states": states,
        "sessions": out_sessions,
        "divergences": divergences,
    }


def main():
    import warnings
    warnings.simplefilter("ignore")
    request = json.load(sys.stdin)
    apps = request.get("apps") or APPS
    sizes = request.get("sizes") or list(SIZES)
    try:
        import appworld
        from appworld.common.utils import import_models_module  # noqa: F401
    except Exception as exc:
        print(json.dumps({"ok": False, "error": "cannot import appworld (%s: %s)" % (type(exc).__name__, exc)}))
        return
    version = getattr(appworld, "__version__", None)
    started = time.time()
    native = Native()
    worlds = {}
    reports = {}
    for size in sizes:
        persons, per_user = SIZES[size]
        native.reset()
        with native.freeze_time(native.frozen):
            # AppWorld's admin app is the world behind the apps (its people, payment cards, ...):
            # built too, and part of a package's state when the app reads it.
            people, report = build_world(["admin"] + APPS, persons, per_user, WORLD_SEED, native.frozen)
        # A world's managers start with nobody logged out.
        worlds[size] = (people, native.dump())
        reports[size] = report
        progress("world %s: %d people, %d rows" % (size, persons, sum(v[0] for v in report.values())))
    reply = {"ok": True, "version": version, "build_report": reports, "apps": {}}
    rng = random.Random(WORLD_SEED)
    for app in apps:
        apis, state_apps, sessions = run_app(native, app, worlds, rng)
        code, divergences = verify(native, app, state_apps, apis, worlds, sessions)
        reply["apps"][app] = package_reply(app, apis, state_apps, worlds, sessions, code, divergences)
        progress("%s: %d APIs, %d steps, state apps %s, %d differences (%.0f s)" % (
            app, len(apis), sum(len(s["steps"]) for s in sessions), ",".join(state_apps), len(divergences), time.time() - started))
    sys.stdout.write(json.dumps(reply))


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:
        print(json.dumps({"ok": False, "error": "%s: %s" % (type(exc).__name__, exc), "traceback": traceback.format_exc()}))
