#!/usr/bin/env bash
# Build the noe image from the root Dockerfile with buildah: no daemon, no engine
# (chroot isolation), from the files git tracks (a clean checkout's content:
# untracked files never reach the image).
#
#   deploy/image/build.sh [--platform OS/ARCH[,OS/ARCH...]] [--base IMAGE] [--name NAME]
#                         [--source URL] [--pull POLICY] [--push REPO] [--tls-verify=false]
#                         [--output DIR]
#   deploy/image/build.sh --print-build-args   # for docker buildx (see Dockerfile)
#   deploy/image/build.sh --print-version
#
# One platform (the default: this machine's) is tagged NAME:VERSION. Several
# (--platform linux/amd64,linux/arm64) are built one after the other, each tagged
# NAME:VERSION-OS-ARCH, into one OCI image index NAME:VERSION; a platform this
# machine cannot run is built under qemu (deploy/image/emulation.sh sets up
# binfmt_misc when it is missing: root, Debian's qemu-user-static). --push REPO
# pushes the index (even of one platform) and its images to REPO:VERSION, as OCI
# media types; --tls-verify=false allows a plain-HTTP or self-signed registry
# for pulls and the push. --base may name a multi-platform index: each build
# takes its platform from it (with several platforms, bases are pulled afresh,
# --pull always, so no platform reuses another's; --pull never for local bases).
#
# Reproducible: building the same commit again, anywhere, gives the same digests.
# SOURCE_DATE_EPOCH (default: the commit's time) sets every file time and the
# created dates (buildah --timestamp, and the Dockerfile's pip and useradd steps);
# the base should be pinned by digest (IMAGE@sha256:...) and Python packages are
# pinned by deploy/image/constraints.txt.
#
# The tag is NAME:VERSION (never `latest`); VERSION is setup.cfg's version (the
# one place it is written) and the OCI labels version, revision (the git commit,
# `-dirty` when tracked files differ from it), created (SOURCE_DATE_EPOCH) and
# source (the git remote `origin`, or --source) come from there. Each platform's
# SBOM (CycloneDX JSON, also in the image at /usr/share/doc/noe/sbom.cdx.json)
# is written to DIR/noe-VERSION-OS-ARCH.sbom.cdx.json (default DIR: build/image).
# Storage and registries: buildah's defaults, or the files that
# CONTAINERS_STORAGE_CONF and CONTAINERS_REGISTRIES_CONF name (the tests use their own).
# Prints the image (or index) reference and its ID, or with --push the pushed
# reference and the index digest, on its last line.
set -euo pipefail

die() { echo "build.sh: $*" >&2; exit 2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

base="" platform="" name="localhost/noe" source="" pull="" print="" push="" tls_verify="" output=""
while [ $# -gt 0 ]; do
    case "$1" in
        --base|--platform|--name|--source|--pull|--push|--output)
            [ $# -ge 2 ] || die "$1 needs a value"
            declare "${1#--}=$2"; shift 2 ;;
        --tls-verify=true|--tls-verify=false) tls_verify="${1#--tls-verify=}"; shift ;;
        --tls-verify=*) die "--tls-verify takes true or false, not '${1#--tls-verify=}'" ;;
        --print-build-args) print=args; shift ;;
        --print-version) print=version; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

# Platforms: OS/ARCH[/VARIANT], comma-separated; none given means this machine's, untagged by platform.
platforms=()
if [ -n "$platform" ]; then
    IFS=, read -r -a platforms <<< "$platform"
    for p in "${platforms[@]}"; do
        [[ "$p" =~ ^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$ ]] || die "--platform: '$p' is not OS/ARCH[/VARIANT]"
    done
fi

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
# The commit's time, not the clock's: two builds of one commit carry the same dates.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}"
case "$epoch" in ''|*[!0-9]*) die "SOURCE_DATE_EPOCH must be seconds since 1970, not '$epoch'" ;; esac
created="$(date -u -d "@${epoch}" +%Y-%m-%dT%H:%M:%SZ)"

build_args=(--build-arg "VERSION=$version" --build-arg "REVISION=$revision"
            --build-arg "CREATED=$created" --build-arg "SOURCE=$source"
            --build-arg "SOURCE_DATE_EPOCH=$epoch")
if [ "$print" = args ]; then printf '%s\n' "${build_args[@]}"; exit 0; fi

command -v buildah > /dev/null || die "buildah not found: apt-get install buildah (or python -m tests.support.system_deps)"

if [ -n "$platform" ]; then
    foreign=()
    for p in "${platforms[@]}"; do arch="${p#*/}"; foreign+=("${arch%%/*}"); done
    "$root/deploy/image/emulation.sh" "${foreign[@]}"
fi
if [ ${#platforms[@]} -eq 0 ] && [ -n "$push" ]; then
    # A pushed release is an index, even of this machine's platform alone.
    case "$(uname -m)" in x86_64) platforms=(linux/amd64) ;; aarch64) platforms=(linux/arm64) ;;
        *) die "--push: name the platform (--platform linux/ARCH) of this $(uname -m) machine" ;; esac
fi
several=""
if [ "${#platforms[@]}" -gt 1 ] || [ -n "$push" ]; then several=1; fi
if [ -z "$pull" ] && [ "${#platforms[@]}" -gt 1 ]; then pull=always; fi
case "$base" in
    ''|*@sha256:*|localhost/*) ;;
    *) echo "build.sh: warning: --base $base is not pinned by digest (IMAGE@sha256:...): the image is reproducible only while that tag does not move" >&2 ;;
esac

output="${output:-$root/build/image}"
mkdir -p "$output"
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
git ls-files -z | while IFS= read -r -d '' file; do
    if [ -e "$file" ]; then printf '%s\0' "$file"; fi
done | tar --null --files-from=- -cf - | tar -xf - -C "$context"

opts=(build --isolation chroot --file "$context/Dockerfile" --timestamp "$epoch" --identity-label=false
      "${build_args[@]}")
[ -z "$base" ] || opts+=(--build-arg "BASE_IMAGE=$base")
[ -z "$pull" ] || opts+=("--pull=$pull")
[ -z "$tls_verify" ] || opts+=("--tls-verify=$tls_verify")
# pip in the build trusts what pip here trusts (a TLS-intercepting proxy's CA): a build secret.
ca="${PIP_CERT:-${SSL_CERT_FILE:-}}"
[ -z "$ca" ] || [ ! -s "$ca" ] || opts+=(--secret "id=pip-ca,src=$ca")

# The SBOM the image carries, copied out beside the build's other output.
extract_sbom() {  # IMAGE-ID DEST
    local ctr mnt
    ctr="$(buildah from --pull=never "$1")"
    mnt="$(buildah mount "$ctr")"
    cp "$mnt/usr/share/doc/noe/sbom.cdx.json" "$2"
    buildah umount "$ctr" > /dev/null
    buildah rm "$ctr" > /dev/null
}

image="$name:$version"
ids=()
start=$SECONDS
for p in "${platforms[@]:-}"; do
    tag="$image" label="${p:-this machine}" suffix=""
    if [ -n "$p" ]; then suffix="-${p//\//-}"; fi
    if [ -n "$several" ]; then tag="$image$suffix"; fi
    step=$SECONDS
    buildah "${opts[@]}" ${p:+--platform "$p"} --tag "$tag" --iidfile "$context/.iid" "$context" >&2
    ids+=("$(cat "$context/.iid")")
    if [ "$(id -u)" = 0 ]; then
        extract_sbom "${ids[-1]}" "$output/noe-$version${suffix}.sbom.cdx.json"
    else
        buildah unshare bash -c "$(declare -f extract_sbom); extract_sbom '${ids[-1]}' '$output/noe-$version${suffix}.sbom.cdx.json'"
    fi
    echo "build.sh: built $tag ($label) in $((SECONDS - step)) s" >&2
done

if [ -z "$several" ]; then
    echo "build.sh: built $image in $((SECONDS - start)) s; SBOM in $output" >&2
    echo "$image ${ids[0]}"
    exit 0
fi

# One OCI index of every platform's image, made afresh (a rebuilt list never keeps a stale platform).
buildah manifest rm "$image" > /dev/null 2>&1 || buildah rmi "$image" > /dev/null 2>&1 || true
list="$(buildah manifest create "$image")"
for id in "${ids[@]}"; do
    buildah manifest add "$image" "$id" > /dev/null
done
if [ -z "$push" ]; then
    echo "build.sh: built $image (index of ${#ids[@]}) in $((SECONDS - start)) s; SBOMs in $output" >&2
    echo "$image $list"
    exit 0
fi
target="$push:$version"
buildah manifest push --all --quiet --format oci ${tls_verify:+"--tls-verify=$tls_verify"} \
    --digestfile "$context/.digest" "$image" "docker://$target" >&2
digest="$(cat "$context/.digest")"
echo "$target $digest" > "$output/noe-$version.pushed"
echo "build.sh: built and pushed $target@$digest (${#ids[@]} platforms) in $((SECONDS - start)) s; SBOMs in $output" >&2
echo "$target $digest"
