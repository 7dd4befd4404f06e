#!/usr/bin/env python3
"""Charges each sampled allocation to its site: reads `perf script -F ip,sym` (one stack per sample, innermost
frame first, samples separated by blank lines) on stdin and prints the top N sites (argv[1], default 20) as a
Markdown table with their share of the samples.

A sample's site is its first frame outside the C allocator, the Swift runtime's allocation entry points
(`swift_allocObject`, `swift_slowAlloc`, `swift_allocBox`, ...) and the frames that only pass a call on (thunks,
partial applications, protocol witnesses), Swift symbols demangled by `swift demangle --simplified` when the
toolchain is on PATH."""

import collections
import shutil
import subprocess
import sys

# Frames that allocate on someone else's behalf, or only pass the call on (thunks, partial applications, protocol
# witnesses): the site is the first frame after them. Matched on demangled names.
PASS_THROUGH_PREFIXES = (
    "malloc", "calloc", "realloc", "posix_memalign", "__libc_", "_int_", "__GI___libc_", "aligned_alloc",
    "__posix_memalign", "swift_slowAlloc", "swift_allocObject", "_swift_allocObject", "swift_allocBox",
    "swift_allocEmptyBox", "swift_initStackObject", "operator new", "swift_task_alloc", "swift_job_alloc",
    "swift::", "thunk for", "specialized thunk for", "reabstraction thunk", "partial apply for", "protocol witness for",
    "merged ", "outlined ", "[unknown]",
)


def stacks(lines):
    stack = []
    for line in lines:
        line = line.strip()
        if not line:
            if stack:
                yield stack
                stack = []
            continue
        parts = line.split(None, 1)
        stack.append((parts[1] if len(parts) > 1 else "[unknown]").split("+0x")[0])
    if stack:
        yield stack


def site(stack, readable):
    for symbol in stack:
        name = readable.get(symbol, symbol)
        if not name.startswith(PASS_THROUGH_PREFIXES):
            return name
    return readable.get(stack[-1], stack[-1]) if stack else "[unknown]"


def demangle(names):
    names = sorted(names)
    if not shutil.which("swift") or not names:
        return {name: name for name in names}
    result = subprocess.run(
        ["swift", "demangle", "--simplified"], input="\n".join(names), capture_output=True, text=True, check=False)
    out = result.stdout.splitlines()
    if len(out) != len(names):
        return {name: name for name in names}
    return dict(zip(names, out))


def main():
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    sampled = list(stacks(sys.stdin))
    readable = demangle({symbol for stack in sampled for symbol in stack})
    counts = collections.Counter(site(stack, readable) for stack in sampled)
    total = sum(counts.values())
    if total == 0:
        print("(no samples)")
        return
    names = [name for name, _ in counts.most_common(top)]
    print("| share | samples | site |")
    print("|---|---|---|")
    for name in names:
        label = name.replace("|", "\\|")
        if len(label) > 160:
            label = label[:157] + "..."
        print(f"| {100 * counts[name] / total:.1f}% | {counts[name]} | `{label}` |")
    print(f"| 100% | {total} | all sampled allocations |")


if __name__ == "__main__":
    main()
