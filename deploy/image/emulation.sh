#!/usr/bin/env bash
# Let this machine run other architectures' binaries, so buildah can build their
# images: qemu-user-static through the kernel's binfmt_misc.
#
#   deploy/image/emulation.sh ARCH...      # OCI names: arm64, amd64, arm, ppc64le, s390x, riscv64, 386
#
# For each ARCH that is not the host's: mounts binfmt_misc when it is not mounted
# (containers and fresh VMs often boot without it), enables the qemu handler that
# Debian's qemu-user-static + binfmt-support installed, and checks it has the F
# flag (the kernel keeps the interpreter open, so it works inside chroots: buildah's
# chroot isolation). Needs root the first time; quiet and quick once set up.
# deploy/image/build.sh calls it for every foreign --platform.
set -euo pipefail

die() { echo "emulation.sh: $*" >&2; exit 2; }

binfmt=/proc/sys/fs/binfmt_misc

qemu_name() {
    case "$1" in
        arm64) echo aarch64 ;; amd64) echo x86_64 ;; 386) echo i386 ;;
        arm|ppc64le|s390x|riscv64|mips64le) echo "$1" ;;
        *) die "no qemu emulator known for architecture '$1'" ;;
    esac
}

host="$(uname -m)"

for arch in "$@"; do
    qemu="$(qemu_name "$arch")"
    [ "$qemu" != "$host" ] || continue
    handler="$binfmt/qemu-$qemu"
    if [ ! -e "$binfmt/register" ]; then
        mount -t binfmt_misc binfmt_misc "$binfmt" 2> /dev/null \
            || die "cannot mount binfmt_misc on $binfmt (needs root): mount -t binfmt_misc binfmt_misc $binfmt"
    fi
    if [ ! -e "$handler" ] || [ "$(head -n 1 "$handler")" != enabled ]; then
        command -v update-binfmts > /dev/null && [ -e "/usr/share/binfmts/qemu-$qemu" ] \
            || die "no qemu-$qemu handler to enable: apt-get install qemu-user-static binfmt-support"
        update-binfmts --enable "qemu-$qemu" > /dev/null 2>&1 \
            || die "update-binfmts --enable qemu-$qemu failed (needs root)"
    fi
    [ "$(head -n 1 "$handler" 2> /dev/null)" = enabled ] || die "$handler is not enabled"
    grep -q '^flags: .*F' "$handler" \
        || die "$handler lacks the F flag: chroot builds cannot find the emulator (reinstall qemu-user-static)"
done
