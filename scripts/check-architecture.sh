#!/usr/bin/env bash
# The import graph between the package's own targets, three ways: as docs/ARCHITECTURE.md states it (its
# ```import-graph block), as Package.swift declares it (each target's dependencies that are targets of this
# package), and as the sources make it (the `import` lines under Sources/<Target>/, or the target's own `path:`,
# as for the test-support target Tests/ServiceTestSupport). Fails naming every edge or target on which any two of
# them differ. System modules and third-party products are not counted.
# Offline: bash and python3 only. Usage: scripts/check-architecture.sh [ROOT] (default: the repository).
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
exec python3 - "$root" <<'PY'
import os
import re
import sys

root = sys.argv[1]
doc_path = os.path.join(root, "docs", "ARCHITECTURE.md")
manifest_path = os.path.join(root, "Package.swift")
sources = os.path.join(root, "Sources")
problems = []


def strip_swift_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


# Package.swift: every target, its kind and the package targets among its dependencies.
manifest = strip_swift_comments(open(manifest_path, encoding="utf-8").read())
declared, kinds, paths = {}, {}, {}
starts = [(m.start(), m.group(1)) for m in re.finditer(r"\.(target|executableTarget|systemLibrary|testTarget|plugin|macro|binaryTarget)\(", manifest)]
for index, (start, kind) in enumerate(starts):
    end = starts[index + 1][0] if index + 1 < len(starts) else len(manifest)
    block = manifest[start:end]
    name = re.search(r'name:\s*"([^"]+)"', block)
    if not name:
        continue
    kinds[name.group(1)] = kind
    path = re.search(r'path:\s*"([^"]+)"', block)
    paths[name.group(1)] = path.group(1) if path else os.path.join("Sources", name.group(1))
    deps = set()
    found = re.search(r"dependencies:\s*\[", block)
    if found:
        depth, i = 1, found.end()
        while depth and i < len(block):
            depth += {"[": 1, "]": -1}.get(block[i], 0)
            i += 1
        listed = re.sub(r"\.product\([^)]*\)", "", block[found.end():i - 1])
        deps = set(re.findall(r'"([^"]+)"', listed))
    declared[name.group(1)] = deps
own = {name for name, kind in kinds.items() if kind != "testTarget"}
declared = {name: {d for d in deps if d in own} for name, deps in declared.items() if name in own}

# The sources: module names a target's Swift files import that are targets of this package.
module_of = {name.replace("-", "_"): name for name in own}
import_line = re.compile(
    r"^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?"
    r"import\s+(?:(?:class|struct|enum|protocol|typealias|func|var|let)\s+)?([A-Za-z_][A-Za-z0-9_]*)",
    re.M)
imported = {}
for name in sorted(own):
    directory = os.path.join(root, paths[name])
    if not os.path.isdir(directory):
        problems.append(f"Package.swift declares target {name}, but {paths[name]}/ does not exist")
        continue
    modules = {}
    for folder, _, files in os.walk(directory):
        for file in files:
            if file.endswith(".swift"):
                path = os.path.join(folder, file)
                text = strip_swift_comments(open(path, encoding="utf-8").read())
                for module in import_line.findall(text):
                    if module in module_of and module_of[module] != name:
                        modules.setdefault(module_of[module], os.path.relpath(path, root))
    imported[name] = modules
for entry in sorted(os.listdir(sources)):
    if os.path.isdir(os.path.join(sources, entry)) and entry not in own:
        problems.append(f"Sources/{entry}/ is no target of Package.swift")

# docs/ARCHITECTURE.md: the block fenced as ```import-graph, one "Target -> Dep, Dep" line per target.
doc = open(doc_path, encoding="utf-8").read()
blocks = re.findall(r"^```import-graph\n(.*?)^```", doc, flags=re.S | re.M)
if len(blocks) != 1:
    sys.exit(f"check-architecture: docs/ARCHITECTURE.md must hold exactly one ```import-graph block (found {len(blocks)})")
stated = {}
for number, line in enumerate(blocks[0].splitlines(), 1):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    match = re.fullmatch(r"([A-Za-z0-9_-]+)\s*->\s*(.*)", line)
    if not match:
        problems.append(f"docs/ARCHITECTURE.md import-graph line {number} is not 'Target -> Dep, Dep': {line!r}")
        continue
    target, rest = match.group(1), match.group(2).strip()
    if target in stated:
        problems.append(f"docs/ARCHITECTURE.md states {target} twice")
    stated[target] = {dep.strip() for dep in rest.split(",") if dep.strip()}

# Targets every view must name.
for target in sorted(own - set(stated)):
    problems.append(f"docs/ARCHITECTURE.md does not state target {target} (write '{target} ->' when it imports none)")
for target in sorted(set(stated) - own):
    problems.append(f"docs/ARCHITECTURE.md states {target}, which is no target of Package.swift")
for target, deps in sorted(stated.items()):
    for dep in sorted(deps - own):
        problems.append(f"docs/ARCHITECTURE.md: {target} -> {dep}, which is no target of Package.swift")

# Edge by edge: the three views pairwise.
for target in sorted(own):
    doc_deps = stated.get(target, set()) & own
    package_deps = declared.get(target, set())
    source_deps = imported.get(target, {})
    for dep in sorted(doc_deps | package_deps | set(source_deps)):
        in_doc, in_package, in_sources = dep in doc_deps, dep in package_deps, dep in source_deps
        if in_doc == in_package == in_sources:
            continue
        said = []
        said.append("docs/ARCHITECTURE.md states it" if in_doc else "docs/ARCHITECTURE.md does not state it")
        said.append("Package.swift lists it" if in_package else "Package.swift does not list it")
        said.append(f"the sources import it ({source_deps[dep]})" if in_sources else "no source file imports it")
        problems.append(f"{target} -> {dep}: " + "; ".join(said))

if problems:
    print("check-architecture: the import graph differs between docs/ARCHITECTURE.md, Package.swift and Sources/:", file=sys.stderr)
    for problem in problems:
        print("  " + problem, file=sys.stderr)
    sys.exit(1)
edges = sum(len(deps) for deps in declared.values())
print(f"check-architecture: docs/ARCHITECTURE.md, Package.swift and Sources/ agree ({len(own)} targets, {edges} edges)")
PY
