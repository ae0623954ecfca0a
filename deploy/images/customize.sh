#!/usr/bin/env bash
# mmdebstrap's customize hook for deploy/images/build.sh: runs on the host, as root,
# once Debian's packages are installed in the chroot at $1. It copies the pinned
# program in, adds the box account, records the package versions and removes what
# would differ between two builds. build.sh exports IMAGE_DIR, MODULES, OUT,
# NPM_ARCH, MUSL and SOURCE_DATE_EPOCH.
set -euo pipefail
root=${1:?usage: customize.sh CHROOT}
# shellcheck source=claude-code/image.env
. "$IMAGE_DIR/image.env"

# The program, from the npm install made from the lockfile: image.env's
# PROGRAM_SOURCE is the folder under node_modules that becomes PROGRAM_DIR, and
# program_files, when defined, names the paths below it to copy (NUL-separated).
mkdir -p "$root$PROGRAM_DIR"
if ! declare -F program_files >/dev/null; then
	program_files() { printf '.\0'; }
fi
program_files | tar -C "$MODULES/$PROGRAM_SOURCE" --null -T - -cf - | tar -C "$root$PROGRAM_DIR" -xf - --no-same-owner
chown -R 0:0 "$root$PROGRAM_DIR"
# PROGRAM_LINKS are name=target pairs; a relative target is below PROGRAM_DIR.
for link in $PROGRAM_LINKS; do
	target=${link#*=}
	[ "${target#/}" != "$target" ] || target=$PROGRAM_DIR/$target
	ln -s "$target" "$root/usr/local/bin/${link%%=*}"
done

# The box account the programs run as (the runner, the image's root, starts every
# program as it) and the workspace it owns. Platforms that run the image give the
# account their own uid (the local backend binds generated passwd and group files).
echo "agent:x:1000:1000:agent:/workspace/.home:/bin/bash" >>"$root/etc/passwd"
echo "agent:x:1000:" >>"$root/etc/group"
echo "agent:!:$((SOURCE_DATE_EPOCH / 86400)):0:99999:7:::" >>"$root/etc/shadow"
mkdir -p "$root/workspace"
chown 1000:1000 "$root/workspace"
chmod 0700 "$root/workspace"

dpkg-query --admindir="$root/var/lib/dpkg" -W -f '${Package} ${Version}\n' >"$OUT/packages.lock"

# mmdebstrap copies the host's resolver and host name in; they would make the
# layer depend on the machine that built it. apt's binary caches differ from build
# to build even from the same packages, and apt remakes them when it needs them.
rm -f "$root/etc/resolv.conf" "$root/etc/hostname" "$root/var/cache/apt/"*.bin
rm -rf "$root/tmp/"* "$root/var/tmp/"*
