#!/usr/bin/env bash
# `swift build --static-swift-stdlib "$@"`, the way every script here links a binary as the image ships it.
#
# Why not the bare command: a build directory that already holds a dynamic build (the tests' debug build, a
# `swift build -c release`) keeps its objects, because the Swift driver counts -static-stdlib as a link-only
# option and does not recompile for it. On Linux it is not link-only: an object compiled against the static
# runtime's modules names, in its autolink entries, the archives Foundation's static libraries need
# (CoreFoundation, _FoundationICU, _FoundationCShims, _FoundationCollections, swiftSynchronization); one compiled
# for the dynamic runtime does not, and the static link then fails on ICU's symbols. Which objects the driver
# happens to recompile decides it, so the failure comes and goes. Naming those archives on the link line makes the
# link independent of that; where the objects already name them, naming them again changes nothing.
set -euo pipefail
extra=()
for archive in CoreFoundation _FoundationICU _FoundationCShims _FoundationCollections swiftSynchronization; do
  extra+=(-Xlinker "-l$archive")
done
exec swift build --static-swift-stdlib "${extra[@]}" "$@"
