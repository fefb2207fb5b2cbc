#!/usr/bin/env bash
# Build the noe image from the root Dockerfile with buildah: no daemon, no engine
# (vfs storage, chroot isolation), from the files git tracks (a clean checkout's
# content: untracked files never reach the image).
#
#   deploy/image/build.sh [--base IMAGE] [--platform OS/ARCH] [--name NAME]
#                         [--source URL] [--pull POLICY]
#   deploy/image/build.sh --print-build-args   # for docker buildx (see Dockerfile)
#   deploy/image/build.sh --print-version
#
# The tag is NAME:VERSION (never `latest`); VERSION is setup.cfg's version (the
# one place it is written) and the OCI labels version, revision (the git commit,
# `-dirty` when tracked files differ from it), created and source (the git remote
# `origin`, or --source) come from there. For several platforms, build once per
# --platform (each with its own --name), then `buildah manifest create LIST`,
# `buildah manifest add LIST IMAGE` for each, and
# `buildah manifest push --all LIST docker://REGISTRY/noe:VERSION`.
# Storage: buildah's defaults, or the containers-storage.conf that
# CONTAINERS_STORAGE_CONF names (the tests use their own).
# Prints the image reference and ID on its last line.
set -euo pipefail

die() { echo "build.sh: $*" >&2; exit 2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

base="" platform="" name="localhost/noe" source="" pull="" print=""
while [ $# -gt 0 ]; do
    case "$1" in
        --base|--platform|--name|--source|--pull)
            [ $# -ge 2 ] || die "$1 needs a value"
            declare "${1#--}=$2"; shift 2 ;;
        --print-build-args) print=args; shift ;;
        --print-version) print=version; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

version="$(sed -n 's/^version[[:space:]]*=[[:space:]]*\([^[:space:]]*\)[[:space:]]*$/\1/p' setup.cfg)"
[ -n "$version" ] && [ "$(printf '%s\n' "$version" | wc -l)" -eq 1 ] \
    || die "setup.cfg: expected exactly one 'version = X' line under [metadata]"
[ "$version" != latest ] || die "setup.cfg: version 'latest' is not a release version"
if [ "$print" = version ]; then echo "$version"; exit 0; fi

git rev-parse --git-dir > /dev/null 2>&1 || die "$root is not a git checkout: the revision label needs the commit"
revision="$(git rev-parse HEAD)"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    revision="${revision}-dirty"
fi
if [ -z "$source" ]; then
    source="$(git config --get remote.origin.url || true)"
    [ -n "$source" ] || die "no git remote 'origin' to name the source: pass --source URL"
fi
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    created="$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"
else
    created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fi

build_args=(--build-arg "VERSION=$version" --build-arg "REVISION=$revision"
            --build-arg "CREATED=$created" --build-arg "SOURCE=$source")
if [ "$print" = args ]; then printf '%s\n' "${build_args[@]}"; exit 0; fi

command -v buildah > /dev/null || die "buildah not found: apt-get install buildah (or python -m tests.support.system_deps)"

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
git ls-files -z | while IFS= read -r -d '' file; do
    if [ -e "$file" ]; then printf '%s\0' "$file"; fi
done | tar --null --files-from=- -cf - | tar -xf - -C "$context"

image="$name:$version"
opts=(--storage-driver vfs build --isolation chroot --file "$context/Dockerfile" --tag "$image"
      --iidfile "$context/.iid" "${build_args[@]}")
[ -z "$base" ] || opts+=(--build-arg "BASE_IMAGE=$base")
[ -z "$platform" ] || opts+=(--platform "$platform")
[ -z "$pull" ] || opts+=("--pull=$pull")
# pip in the build trusts what pip here trusts (a TLS-intercepting proxy's CA): a build secret.
ca="${PIP_CERT:-${SSL_CERT_FILE:-}}"
[ -z "$ca" ] || [ ! -s "$ca" ] || opts+=(--secret "id=pip-ca,src=$ca")

start=$SECONDS
buildah "${opts[@]}" "$context" >&2
echo "build.sh: built $image in $((SECONDS - start)) s" >&2
echo "$image $(cat "$context/.iid")"
