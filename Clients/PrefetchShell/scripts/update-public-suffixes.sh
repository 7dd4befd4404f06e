#!/usr/bin/env bash
# Refreshes the Public Suffix List snapshot the SDK bundles (Sources/PrefetchShell/Resources/public_suffix_list.dat)
# from Debian's `publicsuffix` package: its rules only (comments and blank lines dropped, internationalised labels as punycode), under a header naming the
# package version and the list's date. Run it, review the diff, commit it. The snapshot's date is what the SDK's
# cookie rules know of suffixes (`PublicSuffixList.snapshot`).
set -euo pipefail
cd "$(dirname "$0")/.."
source=/usr/share/publicsuffix/public_suffix_list.dat
if [ ! -f "$source" ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends publicsuffix >/dev/null
fi
version=$(dpkg-query -W -f='${Version}' publicsuffix)
out=Sources/PrefetchShell/Resources/public_suffix_list.dat
{
  echo "// Public Suffix List snapshot: Debian publicsuffix ${version}, rules only."
  echo "// This Source Code Form is subject to the terms of the Mozilla Public License, v. 2.0. If a copy of the MPL"
  echo "// was not distributed with this file, You can obtain one at https://mozilla.org/MPL/2.0/."
  echo "// Refreshed by scripts/update-public-suffixes.sh."
  # Rules in ASCII (internationalised labels as punycode, as host names reach the SDK).
  python3 - "$source" <<'PY'
import sys

for line in open(sys.argv[1], encoding="utf-8"):
    rule = line.split()[0] if line.split() else ""
    if not rule or rule.startswith("//"):
        continue
    prefix = "!" if rule.startswith("!") else ""
    labels = rule.lstrip("!").split(".")
    print(prefix + ".".join(label if label == "*" or label.isascii() else label.encode("idna").decode("ascii") for label in labels))
PY
} >"$out"
echo "wrote $out ($(wc -l <"$out") lines) from publicsuffix $version"
