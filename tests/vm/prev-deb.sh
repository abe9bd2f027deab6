#!/usr/bin/env bash
# An earlier release's .deb, for tests/vm/run.sh's upgrade and rollback
# checks: built from git (the commit it was released from), cached by that
# commit. Usage: prev-deb.sh COMMIT ARCH (amd64 | arm64); prints the .deb's
# path on its last line of stdout (the build's output goes to stderr).
#
# The source is `git archive COMMIT` unpacked in target/previous/src-COMMIT
# (not a `git worktree`: nothing is written to the repository's .git, and
# an interrupted build leaves no worktree registered), built with a target
# directory of its own, target/previous/build (the tree's own target/ is
# left alone), in the dev profile (under 3 min on 2 cores, where a release
# build takes several times as long; the packaging is the release's), and
# packaged with that commit's own [package.metadata.deb] by cargo-deb
# (3.8: `--profile dev` maps its target/release/ asset paths to the dev
# profile's directory). Both directories are script/previous-release's:
# when the commit is the one the rolling-upgrade tests run, script/test
# built it there already, and only the packaging remains.
# The .deb is kept in
# $SCANGATE_VM_CACHE/prev-ARCH-COMMIT/ (default /var/cache/scangate-vm/,
# beside the guest image), outside the work tree: a fresh clone (CI) on
# the same machine finds it there.
set -euo pipefail
cd "$(dirname "$0")/../.."
# (A full hash finds a cached .deb without git: also in a clone that lacks
# the commit.)
if [[ $1 =~ ^[0-9a-f]{40}$ ]]; then
    commit=$1
else
    commit=$(git rev-parse --verify "$1^{commit}")
fi
arch=$2
short=${commit:0:12}
cache_root=${SCANGATE_VM_CACHE:-/var/cache/scangate-vm}
cache=$cache_root/prev-$arch-$commit
if [ -e "$cache/complete" ]; then
    echo "previous release $short: $cache (cached)" >&2
    ls "$cache"/scangate_*.deb
    exit 0
fi
case $arch in
amd64) target=() ;;
arm64) target=(--target aarch64-unknown-linux-gnu) ;;
*)
    echo "prev-deb.sh: unknown arch $arch" >&2
    exit 2
    ;;
esac
t0=$(date +%s)
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "prev-deb.sh: commit $commit is not in this clone's history (a shallow clone?)" >&2
    exit 2
fi
src=$PWD/target/previous/src-$commit
echo "building the previous release $short's .deb from $src" >&2
if [ ! -f "$src/Cargo.toml" ]; then
    rm -rf "$src"
    mkdir -p "$src"
    git archive --format=tar "$commit" | tar -x -C "$src"
fi
rm -rf "$cache.tmp"
mkdir -p "$cache.tmp"
# (build.rs names the commit from SCANGATE_COMMIT: the archive has no .git,
# and the repository above it is at another commit.)
export SCANGATE_COMMIT=$short CARGO_TARGET_DIR=$PWD/target/previous/build
nice -n 10 cargo build --locked --manifest-path "$src/Cargo.toml" "${target[@]}" >&2
nice -n 10 cargo deb --locked --manifest-path "$src/Cargo.toml" --no-build --profile dev "${target[@]}" -o "$cache.tmp/" >&2
ls "$cache.tmp"/scangate_*.deb >/dev/null
touch "$cache.tmp/complete"
rm -rf "$cache"
mv "$cache.tmp" "$cache"
# Older commits' packages are not needed any more.
for old in "$cache_root/prev-$arch"-*; do
    [ "$old" = "$cache" ] || rm -rf "$old"
done
echo "previous release $short: built in $(($(date +%s) - t0)) s" >&2
ls "$cache"/scangate_*.deb
