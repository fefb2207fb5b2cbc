#!/usr/bin/env bash
# Release one version of noe: the multi-platform image and the Helm chart, both
# as OCI artifacts in one registry, the SBOMs beside them, and the kubectl plugin.
#
#   deploy/release.sh --registry REGISTRY[/PATH] [--platform LIST] [--base IMAGE]
#                     [--source URL] [--tls-verify=false] [--plain-http] [--output DIR]
#                     [--release-url URL]
#
# 0. deploy/plugin/build_zipapp.py builds kubectl noe as one file (kubectl-noe.pyz,
#    and kubectl-noe, executable), its krew archive kubectl-noe-VERSION.tar.gz and
#    the krew manifest krew/noe.yaml, whose archive URL is under --release-url URL
#    (default: the GitHub release of VERSION); first, since it needs no registry.
#    Python is $PYTHON, else python3 (with pip: it downloads the pinned wheels).
# 1. deploy/image/build.sh builds every platform (default linux/amd64,linux/arm64)
#    into one OCI index and pushes it to REGISTRY/PATH/noe:VERSION.
# 2. The chart is packaged with its default image pinned to what was just pushed
#    (image.registry/repository of REGISTRY/PATH/noe, image.digest of the index) and
#    pushed with `helm push` to oci://REGISTRY/PATH/charts: install it with
#      helm install noe oci://REGISTRY/PATH/charts/noe --version VERSION
# VERSION is setup.cfg's; the chart's version and appVersion must be the same
# number (the release is refused otherwise). With REGISTRY_USERNAME and
# REGISTRY_PASSWORD in the environment, buildah and helm log in first, into
# credential files of their own that are removed at the end. --tls-verify=false
# skips certificate checks; --plain-http speaks HTTP to the registry (a local
# one). helm is $HELM, else `helm` on PATH. DIR (default build/release) gets the
# chart package, each platform's SBOM (noe-VERSION-OS-ARCH.sbom.cdx.json), the
# plugin's files and release.txt (image reference, index digest, chart
# reference, the plugin archive's and single file's sha256, the krew manifest).
set -euo pipefail

die() { echo "release.sh: $*" >&2; exit 2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

registry="" platform="linux/amd64,linux/arm64" base="" source="" tls_verify="" plain_http="" output=""
release_url=""
while [ $# -gt 0 ]; do
    case "$1" in
        --registry|--platform|--base|--source|--output)
            [ $# -ge 2 ] || die "$1 needs a value"
            declare "${1#--}=$2"; shift 2 ;;
        --release-url)
            [ $# -ge 2 ] || die "$1 needs a value"
            release_url="$2"; shift 2 ;;
        --tls-verify=true|--tls-verify=false) tls_verify="${1#--tls-verify=}"; shift ;;
        --plain-http) plain_http=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[ -n "$registry" ] || die "--registry REGISTRY[/PATH] is required (e.g. ghcr.io/noe-webhook)"
registry="${registry%/}"
host="${registry%%/*}"
helm="${HELM:-helm}"
command -v "$helm" > /dev/null || die "helm not found: install it or set HELM=/path/to/helm"

version="$(deploy/image/build.sh --print-version)"
chart="deploy/helm/noe/Chart.yaml"
chart_version="$(sed -n 's/^version:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$chart")"
app_version="$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$chart")"
[ "$chart_version" = "$version" ] && [ "$app_version" = "$version" ] \
    || die "$chart: version '$chart_version' and appVersion '$app_version' must both be setup.cfg's '$version'"

output="${output:-$root/build/release}"
mkdir -p "$output"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# 0. The kubectl plugin: one file, its krew archive and manifest (no registry needed, so first).
plugin=("${PYTHON:-python3}" deploy/plugin/build_zipapp.py --output "$output")
[ -z "$release_url" ] || plugin+=(--release-url "$release_url")
plugin_log="$("${plugin[@]}")" || die "deploy/plugin/build_zipapp.py failed (above)"
plugin_archive="$output/kubectl-noe-$version.tar.gz"
[ -f "$plugin_archive" ] && [ -f "$output/kubectl-noe.pyz" ] && [ -f "$output/krew/noe.yaml" ] \
    || die "build_zipapp.py did not write $plugin_archive, kubectl-noe.pyz and krew/noe.yaml"
plugin_sum="$(printf '%s\n' "$plugin_log" | sed -n 's/^archive .* \(sha256:[0-9a-f]*\)$/\1/p')"
pyz_sum="$(printf '%s\n' "$plugin_log" | sed -n 's/^pyz .* \(sha256:[0-9a-f]*\) .*$/\1/p')"

helm_tls=()
[ -z "$plain_http" ] || helm_tls+=(--plain-http)
[ "$tls_verify" != false ] || helm_tls+=(--insecure-skip-tls-verify)
buildah_tls=()
if [ -n "$plain_http" ] || [ "$tls_verify" = false ]; then buildah_tls+=(--tls-verify=false); fi

if [ -n "${REGISTRY_USERNAME:-}" ] || [ -n "${REGISTRY_PASSWORD:-}" ]; then
    [ -n "${REGISTRY_USERNAME:-}" ] && [ -n "${REGISTRY_PASSWORD:-}" ] \
        || die "set both REGISTRY_USERNAME and REGISTRY_PASSWORD, or neither"
    export REGISTRY_AUTH_FILE="$work/auth.json" HELM_REGISTRY_CONFIG="$work/helm-registry.json"
    printf '%s' "$REGISTRY_PASSWORD" \
        | buildah login "${buildah_tls[@]}" --username "$REGISTRY_USERNAME" --password-stdin "$host" > /dev/null
    login_tls=()
    [ -z "$plain_http" ] || login_tls+=(--plain-http)
    [ "$tls_verify" != false ] || login_tls+=(--insecure)
    printf '%s' "$REGISTRY_PASSWORD" \
        | "$helm" registry login "${login_tls[@]}" --username "$REGISTRY_USERNAME" --password-stdin "$host" > /dev/null
fi

# 1. The image index.
build=(deploy/image/build.sh --platform "$platform" --push "$registry/noe" --output "$output" "${buildah_tls[@]}")
[ -z "$base" ] || build+=(--base "$base")
[ -z "$source" ] || build+=(--source "$source")
read -r image digest < <("${build[@]}" | tail -n 1)
[ "$image" = "$registry/noe:$version" ] && [[ "$digest" == sha256:* ]] \
    || die "build.sh pushed '$image $digest', expected $registry/noe:$version and a digest"

# 2. The chart, its default image pinned to that index.
cp -r deploy/helm/noe "$work/noe"
values="$work/noe/values.yaml"
repository=noe
[ "$registry" = "$host" ] || repository="${registry#"$host"/}/noe"
# The image block's keys (the first of each name in values.yaml, checked below).
sed -i "0,/^  registry: .*/s||  registry: $host|; 0,/^  repository: .*/s||  repository: $repository|; 0,/^  digest: .*/s||  digest: \"$digest\"|" "$values"
[ "$(grep -c -e "^  registry: $host$" -e "^  repository: $repository$" -e "^  digest: \"$digest\"$" "$values")" = 3 ] \
    || die "could not pin the image in the packaged values.yaml"
"$helm" package "$work/noe" --destination "$output" > /dev/null
package="$output/noe-$version.tgz"
[ -f "$package" ] || die "helm package did not write $package"
"$helm" push "${helm_tls[@]}" "$package" "oci://$registry/charts" >&2

{
    printf 'image %s@%s\nchart oci://%s/charts/noe %s\n' "$image" "$digest" "$registry" "$version"
    printf 'plugin %s %s\npyz kubectl-noe.pyz %s\nkrew krew/noe.yaml\n' \
        "$(basename "$plugin_archive")" "$plugin_sum" "$pyz_sum"
} > "$output/release.txt"
echo "release.sh: released noe $version: image $image@$digest, chart oci://$registry/charts/noe --version $version" >&2
cat "$output/release.txt"
