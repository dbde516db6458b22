#!/usr/bin/env python3
"""sdk-gen/python/generate.py SPEC OUTDIR: writes the Python SDK (package fleetgate_sdk) from the
OpenAPI document. No Python OpenAPI generator can be installed on the project's machines (only
Debian and npm packages are reachable), so sdk-gen owns this one: it reads the same spec as the
TypeScript generator and renders templates/ with Debian's python3-jinja2:

  models.py      a dataclass per object schema (fields in snake_case, the JSON names kept in a
                 table so from_dict/to_dict convert both ways, nested models included)
  client.py      Fleetgate: one method per operation (path parameters positional, query, header
                 and body parameters by keyword), each returning a Result of its response model
  _runtime.py    the hand-written runtime (sdk-gen/python/runtime.py), copied as it is

An operation added to the spec appears here on the next `make sdk` with no hand-written code.
"""
import keyword
import os
import re
import shutil
import sys

import jinja2
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
METHODS = ("get", "put", "post", "patch", "delete", "head", "options")


def snake(name):
    s = re.sub(r"[^0-9A-Za-z]+", "_", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s).lower().strip("_")
    if not s or s[0].isdigit():
        s = "f_" + s
    return s + "_" if keyword.iskeyword(s) or s in ("self", "body") else s


class Spec:
    def __init__(self, doc):
        self.doc = doc
        self.schemas = doc.get("components", {}).get("schemas", {})

    def deref(self, node):
        seen = 0
        while isinstance(node, dict) and "$ref" in node and seen < 20:
            parts = node["$ref"].lstrip("#/").split("/")
            node = self.doc
            for p in parts:
                node = node[p]
            seen += 1
        return node

    def is_model(self, name):
        s = self.schemas.get(name, {})
        return isinstance(s, dict) and s.get("type") == "object" and "properties" in s

    def model_of_allof(self, s):
        """allOf of one model plus constraints only: the model's name."""
        refs = [x["$ref"].split("/")[-1] for x in s.get("allOf", []) if isinstance(x, dict) and "$ref" in x]
        return refs[0] if len(refs) == 1 and self.is_model(refs[0]) else None

    def pytype(self, s, depth=0):
        """(annotation, converter): converter is None, ('model', Name), ('list', conv), ('dict', conv)."""
        if not isinstance(s, dict) or depth > 10:
            return "Any", None
        if "$ref" in s:
            name = s["$ref"].split("/")[-1]
            if self.is_model(name):
                return "'%s'" % name, ("model", name)
            return self.pytype(self.deref(s), depth + 1)
        if "allOf" in s:
            m = self.model_of_allof(s)
            if m:
                return "'%s'" % m, ("model", m)
            return "Dict[str, Any]", None
        t = s.get("type")
        nullable = False
        if isinstance(t, list):
            nullable = "null" in t
            rest = [x for x in t if x != "null"]
            t = rest[0] if len(rest) == 1 else None
        if t == "string":
            ann, conv = "str", None
        elif t == "integer":
            ann, conv = "int", None
        elif t == "number":
            ann, conv = "float", None
        elif t == "boolean":
            ann, conv = "bool", None
        elif t == "array":
            ia, ic = self.pytype(s.get("items", {}), depth + 1)
            ann, conv = "List[%s]" % ia, (("list", ic) if ic else None)
        elif t == "object":
            ap = s.get("additionalProperties")
            if isinstance(ap, dict) and "properties" not in s:
                va, vc = self.pytype(ap, depth + 1)
                ann, conv = "Dict[str, %s]" % va, (("dict", vc) if vc else None)
            else:
                ann, conv = "Dict[str, Any]", None
        else:
            ann, conv = "Any", None
        return ("Optional[%s]" % ann if nullable else ann), conv


def models(spec):
    out = []
    for name, s in spec.schemas.items():
        if not spec.is_model(name):
            continue
        fields = []
        used = set()
        for jname, ps in s["properties"].items():
            ann, conv = spec.pytype(ps)
            py = snake(jname)
            while py in used:
                py += "_"
            used.add(py)
            doc = spec.deref(ps).get("description", "") if isinstance(spec.deref(ps), dict) else ""
            fields.append({"py": py, "json": jname, "ann": ann, "conv": conv,
                           "doc": " ".join(str(doc).split())[:150]})
        out.append({"name": name, "doc": " ".join(str(s.get("description", "")).split())[:300],
                    "fields": fields, "required": s.get("required", [])})
    return out


def json_models(spec, op):
    """{status: model name} of the 2xx JSON answers (createApp: 200 a dry run's result, 201 the app)."""
    out = {}
    for code, r in op.get("responses", {}).items():
        if not str(code).startswith("2"):
            continue
        media = spec.deref(r).get("content", {}).get("application/json")
        sch = (media or {}).get("schema", {})
        name = sch["$ref"].split("/")[-1] if "$ref" in sch else spec.model_of_allof(sch)
        if name and spec.is_model(name):
            out[int(code)] = [name]
        elif "oneOf" in sch:
            # one of several models: the runtime picks the one whose required members are there
            names = [x["$ref"].split("/")[-1] for x in sch["oneOf"] if "$ref" in x]
            names = [n for n in names if spec.is_model(n)]
            if names:
                out[int(code)] = names
    return out


def response_of(spec, op):
    """The 2xx answer: ('json', model or None) | ('lines', None) | ('events', None) | ('upgrade', None) | ('empty', None)."""
    for code in sorted(op.get("responses", {}), key=lambda c: (str(c) not in ("201", "200"), str(c) != "201", str(c))):
        if not str(code).startswith("2") and str(code) != "101":
            continue
        if str(code) == "101":
            return "upgrade", None
        r = spec.deref(op["responses"][code])
        content = r.get("content", {})
        if not content:
            return "empty", None
        for ctype, media in content.items():
            if ctype.startswith("application/json"):
                sch = media.get("schema", {})
                if "$ref" in sch and spec.is_model(sch["$ref"].split("/")[-1]):
                    return "json", sch["$ref"].split("/")[-1]
                m = spec.model_of_allof(sch) if isinstance(sch, dict) else None
                return "json", m
            if ctype.startswith("text/event-stream"):
                return "events", None
            if ctype.startswith("text/plain"):
                return ("lines" if "logs" in op.get("operationId", "").lower() else "text"), None
            return "text", None
    return "empty", None


def operations(spec):
    ops = []
    for path, item in spec.doc["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if not op or "operationId" not in op:
                continue
            params = [spec.deref(p) for p in item.get("parameters", []) + op.get("parameters", [])]
            pparams, qparams, hparams = [], [], []
            seen = set()
            for p in params:
                key = (p["in"], p["name"])
                if key in seen:
                    continue
                seen.add(key)
                ann, _ = spec.pytype(p.get("schema", {}))
                entry = {"explode": p.get("explode", p.get("style", "form") == "form"), "name": p["name"], "py": snake(p["name"]), "ann": ann, "required": p.get("required", False),
                         "doc": " ".join(str(p.get("description", "")).split())[:120]}
                if p["in"] == "path":
                    pparams.append(entry)
                elif p["in"] == "query":
                    qparams.append(entry)
                elif p["in"] == "header" and p["name"].lower() not in (
                        "connection", "upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol"):
                    hparams.append(entry)
            kind, model = response_of(spec, op)
            body = op.get("requestBody")
            body_ctype = None
            body_model = None
            if body:
                body = spec.deref(body)
                body_ctype = next(iter(body.get("content", {})), "application/json")
                sch = body["content"][body_ctype].get("schema", {})
                if "$ref" in sch and spec.is_model(sch["$ref"].split("/")[-1]):
                    body_model = sch["$ref"].split("/")[-1]
            ops.append({
                "id": op["operationId"], "py": snake(op["operationId"]), "method": method.upper(), "path": path,
                "summary": " ".join(str(op.get("summary", "")).split()),
                "path_params": pparams, "query": qparams, "headers": hparams,
                "idempotency_key": any(h["name"].lower() == "idempotency-key" for h in hparams),
                "kind": kind, "model": model, "models": json_models(spec, op), "body": bool(body), "body_required": bool(body and body.get("required")),
                "body_ctype": body_ctype, "body_model": body_model,
                "list": bool(model and any(f == "cursor" for f in (spec.schemas[model].get("properties") or {}))),
            })
    return ops


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: generate.py SPEC OUTDIR")
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    spec = Spec(doc)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(HERE, "templates")),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["pyrepr"] = repr
    env.filters["regex_m"] = lambda n: "_m." + n
    env.filters["models_map"] = lambda d: "{" + ", ".join(
        "%d: %s" % (k, ("_m." + v[0]) if len(v) == 1 else "(" + ", ".join("_m." + x for x in v) + ")")
        for k, v in sorted(d.items())) + "}"
    env.filters["models_union"] = lambda d: sorted({"_m." + x for v in d.values() for x in v})
    pkg = os.path.join(sys.argv[2], "fleetgate_sdk")
    tmp = pkg + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    ctx = {"version": str(doc["info"]["version"]), "title": doc["info"].get("title", ""),
           "models": models(spec), "ops": operations(spec), "spec": os.path.basename(sys.argv[1])}
    for name in ("models.py", "client.py", "__init__.py"):
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
            f.write(env.get_template(name + ".j2").render(**ctx))
    shutil.copy(os.path.join(HERE, "runtime.py"), os.path.join(tmp, "_runtime.py"))
    for name in os.listdir(tmp):
        if name.endswith(".py"):
            with open(os.path.join(tmp, name), encoding="utf-8") as f:
                compile(f.read(), name, "exec")
    shutil.rmtree(pkg, ignore_errors=True)
    os.rename(tmp, pkg)
    print("sdk-py: %s (fleetgate_sdk %s, %d operations, %d models)"
          % (os.path.relpath(pkg), ctx["version"], len(ctx["ops"]), len(ctx["models"])))


if __name__ == "__main__":
    main()
