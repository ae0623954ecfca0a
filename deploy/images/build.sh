#!/usr/bin/env bash
# Builds one AstraBox box image without a container engine or a registry:
#
#   1. base layer: a Debian root filesystem made by mmdebstrap from Debian's own
#      packages (deploy/images/debian.env), the image's extra packages, the pinned
#      Agent program copied from the npm install `make deps-agents` made from
#      tools/agents/package-lock.json, and the box account;
#   2. runner layer: the static astrabox-runner, the image's entry point;
#   3. an OCI image layout (umoci, OUT_DIR/oci) holding both layers and the
#      image's config under the tag IMAGE, and the image unpacked as a root
#      filesystem (OUT_DIR/rootfs: what the local backend runs when a
#      RuntimeProfile names it).
#
# Usage: deploy/images/build.sh IMAGE OUT_DIR      IMAGE: claude-code, codex, pi, acp
#
# Environment: RUNNER (the astrabox-runner binary; default: built here from the
# checkout with -trimpath),
# DEBIAN_SNAPSHOT (a snapshot.debian.org timestamp to build from), IMAGES_STRICT=1
# (fail when Debian's packages differ from the committed packages.lock).
#
# Each stage is skipped when its inputs are unchanged: the base layer's key is the
# digest of this script, customize.sh, the settings of debian.env and image.env
# (comments aside), the Debian sources and the npm lockfile;
# the image's key adds the runner's digest. Every timestamp is SOURCE_DATE_EPOCH and
# tar entries are sorted, so equal inputs give equal layer digests (docs/images.md).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
image=${1:?usage: build.sh IMAGE OUT_DIR}
out=${2:?usage: build.sh IMAGE OUT_DIR}
runner=${RUNNER:-}

die() { echo "build.sh: $*" >&2; exit 1; }

[ -d "$here/$image" ] || die "unknown image $image (want one of: $(cd "$here" && ls -d */ | tr -d / | tr '\n' ' '))"
[ "$(id -u)" = 0 ] || die "building a root filesystem needs root (mmdebstrap --mode=root, umoci unpack keeps ownership)"
for tool in mmdebstrap umoci jq node npm flock sha256sum; do
	command -v "$tool" >/dev/null ||
		die "$tool not found: run \`make deps-images deps-agents\` (Debian's mmdebstrap, umoci, jq; Node.js)"
done
if [ -n "$runner" ]; then
	[ -x "$runner" ] || die "runner $runner is not an executable file"
else
	command -v go >/dev/null || die "go not found: install Go to build the runner, or set RUNNER to a static astrabox-runner"
fi

# shellcheck source=debian.env
. "$here/debian.env"
export SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
case "$(dpkg --print-architecture)" in
amd64) NPM_ARCH=x64 MUSL=x86_64-unknown-linux-musl ;;
arm64) NPM_ARCH=arm64 MUSL=aarch64-unknown-linux-musl ;;
*) die "no Agent program builds for $(dpkg --print-architecture)" ;;
esac
# shellcheck source=claude-code/image.env
. "$here/$image/image.env"

# The program's files, as `make deps-agents` / `make deps-acp-agents` installed them
# (npm ci checks every package against the lockfile's integrity digest).
modules=$repo/$PROGRAM_TOOLS/node_modules
lockfile=$repo/$PROGRAM_TOOLS/package-lock.json
[ -d "$modules" ] || die "$modules missing: run \`make deps-agents deps-acp-agents\`"
installed=$(node -p "require('$modules/$PROGRAM_PACKAGE/package.json').version" 2>/dev/null || true)
[ "$installed" = "$PROGRAM_VERSION" ] ||
	die "$PROGRAM_PACKAGE is ${installed:-not installed} under $modules, the image pins $PROGRAM_VERSION: run \`make deps-agents deps-acp-agents\`"

if [ -n "${DEBIAN_SNAPSHOT:-}" ]; then
	sources=("deb [check-valid-until=no] $SNAPSHOT_BASE/debian/$DEBIAN_SNAPSHOT $SUITE main"
		"deb [check-valid-until=no] $SNAPSHOT_BASE/debian/$DEBIAN_SNAPSHOT $SUITE-updates main"
		"deb [check-valid-until=no] $SNAPSHOT_BASE/debian-security/$DEBIAN_SNAPSHOT $SUITE-security main")
else
	sources=("deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY_MIRROR $SUITE-security main")
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
# One build per output folder at a time (test packages run in parallel).
exec 9>"$out.lock"
flock 9

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$runner" ]; then
	# Built without paths or version-control stamps, so the same source gives the
	# same binary in any checkout.
	runner=$work/astrabox-runner
	(cd "$repo" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$runner" ./cmd/astrabox-runner) ||
		die "build astrabox-runner"
fi

key() { cat "$@" | sha256sum | cut -d' ' -f1; }
# Comments in the two settings files do not change what is built.
settings() { grep -hv '^[[:space:]]*#' "$@" | sha256sum | cut -d' ' -f1; }
base_key=$(printf '%s\n' "${sources[@]}" "$(key "$here/build.sh" "$here/customize.sh" "$lockfile")" \
	"$(settings "$here/debian.env" "$here/$image/image.env")" | sha256sum | cut -d' ' -f1)

# build_base makes the expensive, cached part: Debian with the program (base.tar,
# deleted once packed), packed as the layout's first layer under the tag "base",
# and unpacked as the root filesystem.
build_base() {
	echo "build.sh: $image: building the base layer with mmdebstrap ($SUITE${DEBIAN_SNAPSHOT:+ @ $DEBIAN_SNAPSHOT})"
	export IMAGE_DIR=$here/$image MODULES=$modules OUT=$out NPM_ARCH MUSL SOURCE_DATE_EPOCH
	local t0=$SECONDS
	rm -rf "$out/base.key" "$out/image.key" "$out/base.tar" "$out/oci" "$out/rootfs"
	# Documentation, manuals and translations are left out, as in Debian's slim
	# images; each package's copyright file stays.
	# Debian's own python3 runs mmdebstrap's tar filter: an interpreter first on PATH from
	# elsewhere (pyenv shims) costs seconds per package.
	PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH mmdebstrap --mode=root --variant=minbase --format=tar \
		--include="$(echo "$PACKAGES" | tr ' ' ',')" \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--customize-hook="$here/customize.sh" \
		"$SUITE" "$out/base.tar" "${sources[@]}"
	echo "build.sh: $image: mmdebstrap took $((SECONDS - t0)) s"
	t0=$SECONDS
	umoci init --layout "$out/oci"
	umoci new --image "$out/oci:base"
	umoci raw add-layer --image "$out/oci:base" --history.created "$created" \
		--history.created_by "mmdebstrap $SUITE minbase + $PACKAGES + $PROGRAM_PACKAGE@$PROGRAM_VERSION" "$out/base.tar"
	echo "build.sh: $image: packing the base layer took $((SECONDS - t0)) s"
	t0=$SECONDS
	umoci unpack --image "$out/oci:base" "$out/bundle" >/dev/null
	# Only the root filesystem is kept: the bundle's runtime config would describe
	# the base, not the finished image.
	mv "$out/bundle/rootfs" "$out/rootfs"
	rm -rf "$out/bundle" "$out/base.tar"
	# Box accounts traverse the folder to reach the root they run on.
	chmod 0755 "$out/rootfs"
	echo "build.sh: $image: unpacking took $((SECONDS - t0)) s"
	echo "$base_key" >"$out/base.key"
}

if [ -d "$out/rootfs" ] && [ "$(cat "$out/base.key" 2>/dev/null)" = "$base_key" ]; then
	echo "build.sh: $image: base layer unchanged, reused"
else
	build_base
fi

# The packages Debian gave are recorded beside the image definition; a change
# means the mirror moved on (a point release or security update).
if ! cmp -s "$out/packages.lock" "$here/$image/packages.lock"; then
	if [ "${IMAGES_STRICT:-}" = 1 ]; then
		diff -u "$here/$image/packages.lock" "$out/packages.lock" >&2 || true
		die "Debian's packages differ from deploy/images/$image/packages.lock (IMAGES_STRICT=1); build from DEBIAN_SNAPSHOT or refresh the lock"
	fi
	echo "build.sh: $image: Debian's packages differ from deploy/images/$image/packages.lock; refresh it with" \
		"\`cp $out/packages.lock $here/$image/packages.lock\` if intended:" >&2
	diff -u "$here/$image/packages.lock" "$out/packages.lock" >&2 || true
fi

image_key=$(printf '%s\n' "$base_key" "$(key "$runner")" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/image.key" 2>/dev/null)" = "$image_key" ]; then
	echo "build.sh: $image: image unchanged, reused"
	echo "rootfs: $out/rootfs"
	exit 0
fi

# The runner layer: one file, with the same fixed ownership and time as the base,
# added on top of "base" under the image's tag; the image's config names it the
# entry point. The same file is written into the unpacked root, which is exactly
# what unpacking the finished image would do.
t0=$SECONDS
rm -f "$out/image.key"
ref="$out/oci:$image"
runner_tar=$work
mkdir -p "$runner_tar/tree/usr/local/bin"
install -m 0755 "$runner" "$runner_tar/tree/usr/local/bin/astrabox-runner"
tar -C "$runner_tar/tree" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
	--format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
	-cf "$runner_tar/runner.tar" usr
umoci rm --image "$ref" 2>/dev/null || true
umoci raw add-layer --image "$out/oci:base" --tag "$image" --history.created "$created" \
	--history.created_by "astrabox-runner" "$runner_tar/runner.tar"
umoci config --image "$ref" --created "$created" --author "AstraBox" --no-history \
	--os linux --architecture "$(dpkg --print-architecture)" \
	--config.user 0:0 --config.workingdir / \
	--config.env PATH=/usr/local/bin:/usr/bin:/bin --config.env LANG=C.UTF-8 \
	--config.entrypoint /usr/local/bin/astrabox-runner --config.entrypoint serve \
	--config.label "org.opencontainers.image.title=astrabox-$image" \
	--config.label "org.opencontainers.image.version=$PROGRAM_VERSION" \
	--config.label "org.opencontainers.image.created=$created" \
	--config.label "io.astrabox.program=$PROGRAM_PACKAGE@$PROGRAM_VERSION" \
	--config.label "io.astrabox.debian=$SUITE${DEBIAN_SNAPSHOT:+@$DEBIAN_SNAPSHOT}"
umoci gc --layout "$out/oci"
tar -C "$out/rootfs" --numeric-owner -xf "$runner_tar/runner.tar"

# digests.txt names what two builds from equal inputs agree on.
manifest=$(jq -r --arg tag "$image" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $tag) | .digest' "$out/oci/index.json")
{
	echo "manifest $manifest"
	jq -r '"config \(.config.digest)", (.layers[] | "layer \(.digest) \(.size)")' "$out/oci/blobs/sha256/${manifest#sha256:}"
} >"$out/digests.txt"
echo "$image_key" >"$out/image.key"
echo "build.sh: $image: runner layer and image config made in $((SECONDS - t0)) s"
echo "rootfs: $out/rootfs"
