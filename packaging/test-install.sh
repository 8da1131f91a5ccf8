#!/usr/bin/env bash
# packaging/test-install.sh -- `make install` into a fresh temporary prefix, then everything
# used from there only (make test-install; make test runs it with CARGO_PROFILE=ci):
#   * pkg-config finds atomio.pc, whose prefix/libdir/includedir are the install's;
#   * a C program built with `pkg-config --cflags --libs atomio` runs against the installed
#     libatomio.so (it prints the path it loaded: checked);
#   * the installed libatomio_mpiio.so finds the installed libatomio.so (RUNPATH = libdir,
#     no build-tree path), and an MPI program run with it preloaded (the path from
#     `pkg-config --variable=mpiio_preload atomio`), 2 ranks, writes an `atomio:` file in
#     atomic mode, verified, with ATOMIO_STATS showing atomio served its calls;
#   * the installed atomio binary and man pages; the environment module evaluated (tclsh);
#   * the Spack recipe compiles and its directives are right (stub spack module);
#   * `make uninstall` removes every file.
# Needs what `make install-files` needs already built: target/$CARGO_PROFILE/{atomio,libatomio.so}.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFILE=${CARGO_PROFILE:-release}
MPIEXEC=${MPIEXEC:-mpiexec}
T=$(mktemp -d "${TMPDIR:-/tmp}/atomio-install-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
PREFIX="$T/prefix"
W="$T/work"
mkdir -p "$W"
fail() { echo "test-install: FAILED: $*" >&2; exit 1; }

echo "== install into $PREFIX (CARGO_PROFILE=$PROFILE)"
make -s -C "$ROOT" install-files PREFIX="$PREFIX" CARGO_PROFILE="$PROFILE" > "$W/install.log" 2>&1 ||
  { cat "$W/install.log"; fail "make install-files"; }
for f in bin/atomio lib/libatomio.so lib/libatomio_mpiio.so include/atomio.h \
         lib/pkgconfig/atomio.pc share/man/man1/atomio.1 share/man/man7/atomio-mpiio.7; do
  [ -s "$PREFIX/$f" ] || fail "$PREFIX/$f not installed"
done

echo "== pkg-config"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
pkg-config --exists atomio || fail "pkg-config does not find atomio"
[ "$(pkg-config --variable=prefix atomio)" = "$PREFIX" ] || fail "prefix"
[ "$(pkg-config --variable=libdir atomio)" = "$PREFIX/lib" ] || fail "libdir"
[ "$(pkg-config --variable=includedir atomio)" = "$PREFIX/include" ] || fail "includedir"
PRELOAD=$(pkg-config --variable=mpiio_preload atomio)
[ "$PRELOAD" = "$PREFIX/lib/libatomio_mpiio.so" ] || fail "mpiio_preload is $PRELOAD"
echo "   cflags/libs: $(pkg-config --cflags --libs atomio)"

echo "== a C program built with pkg-config --cflags --libs atomio"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror -o "$W/pc_smoke" "$ROOT/packaging/tests/pc_smoke.c" \
  $(pkg-config --cflags --libs atomio) -ldl
mkdir -p "$W/data"
out=$(LD_LIBRARY_PATH="$PREFIX/lib" timeout 30 "$W/pc_smoke" "$W/data") || fail "pc_smoke: $out"
echo "   $out"
[ "$out" = "pc_smoke ok: $PREFIX/lib/libatomio.so" ] || fail "pc_smoke did not run the installed libatomio.so"

echo "== the installed libatomio_mpiio.so"
runpath=$(readelf -d "$PRELOAD" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[ "$runpath" = "$PREFIX/lib" ] || fail "RUNPATH of libatomio_mpiio.so is '$runpath'"
# Read the whole output before matching: under pipefail, `ldd | grep -q` fails when grep's
# early exit kills ldd with SIGPIPE.
deps=$(ldd "$PRELOAD")
grep -q "libatomio.so => $PREFIX/lib/libatomio.so" <<< "$deps" ||
  { echo "$deps"; fail "libatomio_mpiio.so does not resolve the installed libatomio.so"; }
echo "   RUNPATH $runpath; $(ldd "$PRELOAD" | grep 'libatomio.so' | xargs)"

echo "== an MPI program with the installed library preloaded (2 ranks)"
mpicc -std=c11 -Wall -Wextra -Werror -o "$W/mpi_install" "$ROOT/packaging/tests/mpi_install.c"
env_args=()
if [ "$(basename "$MPIEXEC")" = mpiexec ]; then env_args=(-genv UCX_NET_DEVICES lo); fi
timeout 60 "$MPIEXEC" -n 2 "${env_args[@]}" -genv LD_PRELOAD "$PRELOAD" -genv ATOMIO_STATS 1 \
  -genv ATOMIO_STRATEGY ching:datatype:one-try "$W/mpi_install" "atomio:$W/mpi.dat" \
  > "$W/mpi.out" 2> "$W/mpi.err" || { cat "$W/mpi.out" "$W/mpi.err"; fail "mpi_install"; }
sed 's/^/   /' "$W/mpi.out"
grep -q "^mpi_install ok: 2 ranks" "$W/mpi.out" || fail "mpi_install did not verify"
grep -qx "mapped $PREFIX/lib/libatomio_mpiio.so" "$W/mpi.out" || fail "the installed libatomio_mpiio.so was not mapped"
grep -qx "mapped $PREFIX/lib/libatomio.so" "$W/mpi.out" || fail "the installed libatomio.so was not mapped"
[ "$(grep -c '^mapped ' "$W/mpi.out")" = 2 ] || fail "other libatomio copies were mapped"
stats=$(grep "atomio-stats file=.*mpi.dat" "$W/mpi.err" || true)
echo "   ${stats:-no atomio-stats line}"
calls=$(echo "$stats" | sed -n 's/.* calls=\([0-9]*\).*/\1/p')
# 2 ranks x 8 writes + 8 reads on rank 0
[ "${calls:-0}" = 24 ] || { cat "$W/mpi.err"; fail "atomio served ${calls:-no} calls, expected 24"; }
[ "$(stat -c %s "$W/mpi.dat")" = $((8 * 256 * 1024)) ] || fail "file size"

echo "== the installed atomio and its man pages"
grep -q "^atomio " <<< "$("$PREFIX/bin/atomio" --version)" || fail "atomio --version"
grep -q '^\.TH ATOMIO 1' "$PREFIX/share/man/man1/atomio.1" || fail "atomio.1"
grep -q 'ATOMIO_FILES' "$PREFIX/share/man/man7/atomio-mpiio.7" || fail "atomio-mpiio.7"
if command -v man >/dev/null 2>&1; then
  grep -q "ATOMIO_STRATEGY" <<< "$(MANPATH="$PREFIX/share/man" man -P cat atomio-mpiio 2>/dev/null)" ||
    fail "man atomio-mpiio does not render"
fi

echo "== the environment module (evaluated by tclsh with the module commands stubbed)"
MODFILE="$PREFIX/share/modulefiles/atomio/$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)"
[ -s "$MODFILE" ] || fail "$MODFILE not installed"
grep -q '^#%Module' <<< "$(head -n1 "$MODFILE")" || fail "module file has no #%Module header"
modenv=$(tclsh <<TCL
proc setenv {v x} { puts "setenv \$v \$x" }
proc prepend-path {v x} { puts "prepend \$v \$x" }
proc module-whatis {args} {}
source {$MODFILE}
TCL
) || fail "tclsh could not evaluate $MODFILE"
for want in "setenv ATOMIO_ROOT $PREFIX" "prepend PATH $PREFIX/bin" "prepend LD_LIBRARY_PATH $PREFIX/lib" \
            "prepend PKG_CONFIG_PATH $PREFIX/lib/pkgconfig" "prepend MANPATH $PREFIX/share/man"; do
  grep -qxF "$want" <<< "$modenv" || { echo "$modenv"; fail "module does not $want"; }
done
echo "   $(wc -l <<< "$modenv") settings, all under $PREFIX"
# The module's environment alone finds everything: pkg-config, the binary.
( unset PKG_CONFIG_PATH
  eval "$(sed -n 's/^setenv \([A-Z_]*\) \(.*\)/export \1="\2"/p; s/^prepend \([A-Z_]*\) \(.*\)/export \1="\2${\1:+:$\1}"/p' <<< "$modenv")"
  [ "$(command -v atomio)" = "$PREFIX/bin/atomio" ] && pkg-config --exists atomio ) ||
  fail "the module's environment does not find atomio"

echo "== the Spack recipe (packaging/spack/atomio/package.py; stub spack module, Spack is not installed)"
python3 "$ROOT/packaging/spack/check_recipe.py" | sed 's/^/   /'
[ "${PIPESTATUS[0]}" = 0 ] || fail "spack recipe"

echo "== make uninstall"
make -s -C "$ROOT" uninstall PREFIX="$PREFIX" > /dev/null
left=$(find "$PREFIX" -type f | wc -l)
[ "$left" = 0 ] || { find "$PREFIX" -type f; fail "$left files left after uninstall"; }
echo "install test passed"
