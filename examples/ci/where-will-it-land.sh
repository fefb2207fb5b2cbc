#!/bin/sh
# Where would each workload land? Runs `noe mutate --explain` over every
# Kubernetes manifest of a folder, offline, with a platforms file.
#
#   examples/ci/where-will-it-land.sh [MANIFEST_DIR] [PLATFORMS_JSON] [extra noe flags...]
#
# Checked: every kind `noe mutate` places — Pod, DaemonSet, and the workloads
# whose pod template it mutates as the webhook would mutate their Pods
# (Deployment, StatefulSet, ReplicaSet, ReplicationController, Job, CronJob).
# A document of any other kind that carries containers (a CRD with a pod
# template, such as an Argo Rollout) cannot be checked: the script says so and
# fails rather than pass it unseen.
#
# Exit status: 0 when every workload is admitted, 3 when one would be denied
# (no common architecture, or a strict namespace), else 2 on a usage or input
# error or a workload it cannot check.
# NOE overrides the command (default: noe), e.g. NOE="python -m noe_core.cli".
set -eu

noe=${NOE:-noe}
KINDS="Pod DaemonSet Deployment StatefulSet ReplicaSet ReplicationController Job CronJob"

dir=${1:-examples}
platforms=${2:-examples/platforms.json}
[ $# -ge 2 ] && shift 2 || shift $#

# Prints, for one YAML file, each document's kind and "containers" when it has a
# containers (or initContainers) list anywhere.
kinds_of() {
    awk '
        function flush() { if (kind != "") print kind, (containers ? "containers" : "-"); kind = ""; containers = 0 }
        /^---/ { flush(); next }
        /^kind:[ \t]*[A-Za-z0-9]+[ \t]*$/ { kind = $2; next }
        /^[ \t-]*(containers|initContainers):[ \t]*(\[.*)?$/ { containers = 1 }
        END { flush() }
    ' "$1"
}

status=0
found=0
worse() { if [ "$1" -gt "$status" ]; then status=$1; fi; }

for file in $(find "$dir" -type f \( -name '*.yaml' -o -name '*.yml' \) | sort); do
    workload=0
    unknown=""
    for pair in $(kinds_of "$file" | tr ' ' ':'); do
        kind=${pair%%:*}
        case " $KINDS " in
            *" $kind "*) workload=1 ;;
            *) if [ "${pair#*:}" = containers ]; then unknown="$unknown $kind"; fi ;;
        esac
    done
    if [ -n "$unknown" ]; then
        echo "--- $file: cannot check kind(s)$unknown: they carry containers, and noe mutate checks only: $KINDS"
        worse 2
    fi
    [ "$workload" -eq 1 ] || continue
    found=$((found + 1))
    echo "=== $file"
    # shellcheck disable=SC2086 # $noe may be a command with arguments
    if $noe mutate -f "$file" --platforms "$platforms" --explain "$@"; then
        :
    else
        rc=$?
        echo "--- $file: denied or invalid (exit $rc)"
        worse "$rc"
    fi
done
echo "checked $found workload manifest(s) in $dir"
exit "$status"
