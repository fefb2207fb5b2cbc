#!/bin/sh
# Where would each workload land? Runs `noe mutate --explain` over every
# Pod / DaemonSet manifest of a folder, offline, with a platforms file.
#
#   examples/ci/where-will-it-land.sh [MANIFEST_DIR] [PLATFORMS_JSON] [extra noe flags...]
#
# Exit status: 0 when every workload is admitted, 3 when one would be denied
# (no common architecture, or a strict namespace), 2 on a usage or input error.
# NOE overrides the command (default: noe), e.g. NOE="python -m noe_core.cli".
set -eu

noe=${NOE:-noe}

dir=${1:-examples}
platforms=${2:-examples/platforms.json}
[ $# -ge 2 ] && shift 2 || shift $#

status=0
found=0
for file in $(find "$dir" -type f \( -name '*.yaml' -o -name '*.yml' \) | sort); do
    # Only Pods and DaemonSets are placed by noe; other kinds are skipped.
    if ! grep -Eq '^kind: *(Pod|DaemonSet) *$' "$file"; then
        continue
    fi
    found=$((found + 1))
    echo "=== $file"
    # shellcheck disable=SC2086 # $noe may be a command with arguments
    if $noe mutate -f "$file" --platforms "$platforms" --explain "$@"; then
        :
    else
        rc=$?
        echo "--- $file: denied or invalid (exit $rc)"
        if [ "$rc" -gt "$status" ] || [ "$status" -eq 0 ]; then status=$rc; fi
    fi
done
echo "checked $found workload manifest(s) in $dir"
exit "$status"
