#!/usr/bin/env python3
"""
One-off, idempotent codemod: every workspace package's barrel becomes `export * as Module`
(the @effect/sql style), and every import of a name from a package root that is not one
of those namespaces is rewritten to the module's own entry (`@cairn/pkg/Module`).

Run from the repository root: python3 scripts/codemods/namespace-barrels.py
"""
import os
import re
import sys

ROOT = os.getcwd()
PACKAGES = {}  # "@cairn/name" -> directory
for base in ["packages", "apps", "."]:
    for entry in sorted(os.listdir(base)):
        d = os.path.join(base, entry) if base != "." else entry
        pj = os.path.join(d, "package.json")
        if base == "." and entry != "catalog":
            continue
        if os.path.isfile(pj) and os.path.isfile(os.path.join(d, "src", "index.ts")):
            name = re.search(r'"name":\s*"([^"]+)"', open(pj).read()).group(1)
            PACKAGES[name] = d

EXPORT_DECL = re.compile(
    r"^export\s+(?:declare\s+)?(?:abstract\s+)?(?:const|let|var|class|interface|type|function\*?|enum|namespace)\s+([A-Za-z_$][\w$]*)",
    re.M,
)
EXPORT_LIST = re.compile(r"^export\s+(?:type\s+)?\{([^}]*)\}(?:\s+from\s+\"([^\"]+)\")?", re.M)
EXPORT_STAR = re.compile(r"^export\s+\*\s+from\s+\"([^\"]+)\"", re.M)
EXPORT_STAR_AS = re.compile(r"^export\s+\*\s+as\s+(\w+)\s+from\s+\"\./([^\"]+)\.js\"", re.M)


def module_exports(path, seen=None):
    """Names a module exports (following `export *` of siblings)."""
    seen = seen or set()
    if path in seen or not os.path.isfile(path):
        return set()
    seen.add(path)
    text = open(path).read()
    names = set(EXPORT_DECL.findall(text))
    for body, _ in EXPORT_LIST.findall(text):
        for part in body.split(","):
            part = part.strip()
            if not part:
                continue
            part = re.sub(r"^type\s+", "", part)
            names.add(part.split(" as ")[-1].strip())
    for target in EXPORT_STAR.findall(text):
        if target.startswith("."):
            names |= module_exports(os.path.normpath(os.path.join(os.path.dirname(path), target.replace(".js", ".ts"))), seen)
    return names


# name -> (module, original name) per package; namespaces per package
NAMES = {}
NAMESPACES = {}
for pkg, d in PACKAGES.items():
    index_path = os.path.join(d, "src", "index.ts")
    index = open(index_path).read()
    names, namespaces = {}, set(EXPORT_STAR_AS.findall(index) and [n for n, _ in EXPORT_STAR_AS.findall(index)])
    modules = []
    for line in index.splitlines():
        line = line.strip()
        if not line or line.startswith(("/*", "*", "//")):
            continue
        m = re.match(r'export \* from "\./([\w/]+)\.js"', line)
        if m:
            mod = m.group(1)
            modules.append(mod)
            for n in module_exports(os.path.join(d, "src", mod + ".ts")):
                names.setdefault(n, (mod, n))
            continue
        m = re.match(r'export \* as (\w+) from "\./([\w/]+)\.js"', line)
        if m:
            mod = m.group(2)
            modules.append(mod)
            # Idempotence: on a converted barrel, names still resolve to their module, except
            # the module's own name, which from the root is the namespace.
            for n in module_exports(os.path.join(d, "src", mod + ".ts")):
                if n != os.path.basename(mod):
                    names.setdefault(n, (mod, n))
            continue
        m = re.match(r'export (?:type )?\{([^}]*)\} from "\./([\w/]+)\.js"', line)
        if m:
            mod = m.group(2)
            modules.append(mod)
            for part in m.group(1).split(","):
                part = re.sub(r"^type\s+", "", part.strip())
                if not part:
                    continue
                original, _, alias = part.partition(" as ")
                names.setdefault((alias or original).strip(), (mod, original.strip()))
            continue
        print(f"{index_path}: cannot read line {line!r}", file=sys.stderr)
        sys.exit(1)
    # The barrel: one namespace per module, in the order first seen.
    ordered = list(dict.fromkeys(modules))
    barrel = "".join(f'export * as {os.path.basename(m)} from "./{m}.js"\n' for m in ordered)
    head = re.match(r"\s*(/\*\*.*?\*/\n)", index, re.S)
    open(index_path, "w").write((head.group(1) if head else "") + barrel)
    NAMES[pkg] = names
    NAMESPACES[pkg] = {os.path.basename(m) for m in ordered}

IMPORT = re.compile(r'import\s+(type\s+)?\{([^}]*)\}\s+from\s+"(@cairn/[\w-]+)"', re.S)
DYNAMIC = re.compile(r'import\("(@cairn/[\w-]+)"\)\.(\w+)')


def rewrite(text, where):
    def one(m):
        whole_type, body, pkg = m.group(1), m.group(2), m.group(3)
        if pkg not in NAMES:
            return m.group(0)
        keep, moved = [], {}
        for part in [p.strip() for p in body.split(",") if p.strip()]:
            is_type = part.startswith("type ")
            spec = part[5:].strip() if is_type else part
            name, _, local = spec.partition(" as ")
            name, local = name.strip(), local.strip()
            if name in NAMESPACES[pkg] and name not in NAMES[pkg]:
                keep.append(part)
                continue
            if name not in NAMES[pkg]:
                print(f"{where}: {name} is not exported by {pkg}", file=sys.stderr)
                keep.append(part)
                continue
            mod, original = NAMES[pkg][name]
            local = local or name
            spec2 = original if original == local else f"{original} as {local}"
            moved.setdefault(mod, []).append(("type " if is_type else "") + spec2)
        out = []
        prefix = "import " + (whole_type or "")
        if keep:
            out.append(f'{prefix}{{ {", ".join(keep)} }} from "{pkg}"')
        for mod, specs in moved.items():
            out.append(f'{prefix}{{ {", ".join(specs)} }} from "{pkg}/{mod}"')
        return "\n".join(out)

    text = IMPORT.sub(one, text)

    def dyn(m):
        pkg, name = m.group(1), m.group(2)
        if pkg in NAMES and name in NAMES[pkg] and name not in NAMESPACES[pkg]:
            mod, original = NAMES[pkg][name]
            return f'import("{pkg}/{mod}").{original}'
        return m.group(0)

    return DYNAMIC.sub(dyn, text)


for base in ["packages", "apps", "scripts", "catalog"]:
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [x for x in dirnames if x not in ("node_modules", "build", ".tools")]
        for f in filenames:
            if f.endswith(".ts"):
                p = os.path.join(dirpath, f)
                text = open(p).read()
                new = rewrite(text, p)
                if new != text:
                    open(p, "w").write(new)
