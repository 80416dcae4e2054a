#!/usr/bin/env python3
"""The values table of charts/mcc/README.md, generated from charts/mcc/values.yaml.

Each key documented with a `# --` comment (continued by the following `#` lines) becomes
one row: key path, type, default, description. Every leaf value must be documented by
itself or by a documented parent; an undocumented one is an error, so the README lists
every value.

    scripts/chart-values-doc.py            # rewrite the table in charts/mcc/README.md
    scripts/chart-values-doc.py --check    # exit 1 when the table is stale or a value lacks docs
"""
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
VALUES = ROOT / "charts/mcc/values.yaml"
README = ROOT / "charts/mcc/README.md"
START, END = "<!-- values:start -->", "<!-- values:end -->"
KEY = re.compile(r"^(\s*)(?:- )?([A-Za-z0-9_.\-/]+):(\s|$)")


def documented_keys(text):
    """(path, description) for each `# --` comment, in file order."""
    out, stack, doc = [], [], None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            doc = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if doc is not None:
                doc.append(stripped[1:].strip())
            continue
        m = KEY.match(line)
        if not m or line.lstrip().startswith("- "):
            if stripped:
                doc = None if not m else doc
            continue
        indent, key = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        if doc is not None:
            out.append((".".join(k for _, k in stack), " ".join(doc)))
            doc = None
    return out


def leaves(node, prefix=""):
    """Paths of the values a user sets: scalars, lists and empty maps."""
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix


def lookup(values, path):
    node = values
    for part in path.split("."):
        node = node[part]
    return node


def type_name(v):
    return {bool: "bool", int: "int", float: "number", str: "string", list: "list",
            dict: "object", type(None): "null"}[type(v)]


def table(text):
    values = yaml.safe_load(text)
    docs = documented_keys(text)
    paths = {p for p, _ in docs}
    missing = [leaf for leaf in leaves(values)
               if not any(leaf == p or leaf.startswith(p + ".") for p in paths)]
    rows = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for path, desc in docs:
        value = lookup(values, path)
        default = json.dumps(value, separators=(", ", ": "))
        if len(default) > 60:
            default = "see values.yaml"
        desc = desc.replace("|", "\\|")
        rows.append(f"| `{path}` | {type_name(value)} | `{default}` | {desc} |")
    return "\n".join(rows) + "\n", missing


def main():
    text = VALUES.read_text()
    rows, missing = table(text)
    for leaf in missing:
        print(f"charts/mcc/values.yaml: {leaf} has no `# --` description (nor has a parent)")
    readme = README.read_text()
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{rows}{END}{tail}"
    if "--check" in sys.argv:
        if new != readme:
            print("charts/mcc/README.md: the values table is stale: run scripts/chart-values-doc.py")
            return 1
        return 1 if missing else 0
    README.write_text(new)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
