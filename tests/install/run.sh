#!/usr/bin/env bash
# An installed revc works from wherever its prefix lies, with no build or
# source tree: `meson install --destdir` into a temporary directory, the
# prefix moved elsewhere, then
# - revc.pc (relocatable) builds examples/embed.c with pkg-config, and it runs;
# - the installed Python module imports (finding librevc.so by its run
#   path) and trains;
# - the installed `revc compile` makes a model library from the prefix's own
#   AOT runtime (the C compiler it runs is logged: no path into the build or
#   source tree), and a program linked against that library trains a step.
# Usage: run.sh BUILDDIR ROOT
set -u
build=$(realpath "$1") root=$(realpath "$2")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
meson install -C "$build" --destdir "$tmp/stage" --no-rebuild --quiet > "$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "meson install --destdir"; }
configured=$(meson introspect "$build" --buildoptions |
  /usr/bin/python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
mv "$tmp/stage$configured" "$tmp/prefix" || fail "moving the prefix"
rm -rf "$tmp/stage"
prefix=$tmp/prefix
libdir=$(dirname "$(find "$prefix" -name 'librevc.so' | head -1)")
[ -n "$libdir" ] || fail "librevc.so not installed"
for f in "$prefix/bin/revc" "$prefix/include/revc.h" "$libdir/pkgconfig/revc.pc" "$libdir/revc/librevc_aot.a" \
  "$libdir/revc/revc_aot.h"; do
  [ -f "$f" ] || fail "not installed: ${f#$prefix/}"
done
version=$("$prefix/bin/revc" --version | awk '{print $2}')
soname=$(readelf -d "$libdir/librevc.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "librevc.so.$(echo "$version" | cut -d. -f1,2)" ] && [ -e "$libdir/$soname" ] || fail "librevc.so's soname is '$soname'"
bad=$(nm -D --defined-only "$libdir/librevc.so" | awk '$2 ~ /^[TDBR]$/ && $3 !~ /^revc_/ {print $3}' | head -3)
[ -z "$bad" ] || fail "librevc.so exports more than revc_*: $bad"

# Everything below runs outside the trees, with the build and source
# directories out of the compiler's and loader's search paths.
unset LD_LIBRARY_PATH
# A sanitizer build's librevc needs its runtimes loaded first in programs
# built without them (embed, Python).
preload=
for rt in asan ubsan; do
  readelf -d "$libdir/librevc.so" | grep -q "lib$rt\.so" && preload="$preload $(cc -print-file-name=lib$rt.so)"
done
preload=${preload# }
mkdir "$tmp/work" && cd "$tmp/work" || exit 1
cp -r "$root/models" .
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --variable=prefix revc | xargs realpath)" = "$(realpath "$prefix")" ] ||
  fail "revc.pc does not follow its prefix: $(pkg-config --variable=prefix revc)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror "$root/examples/embed.c" $(pkg-config --cflags --libs revc) -Wl,-rpath,"$libdir" -o embed ||
  fail "building examples/embed.c with pkg-config"
LD_PRELOAD=$preload ./embed models/fashion.rev units=1,1,1 batch=4 > embed.txt || { cat embed.txt; fail "examples/embed.c"; }
grep -q "^librevc $version$" embed.txt || { cat embed.txt; fail "embed does not print librevc $version"; }
peak=$("$prefix/bin/revc" mem models/fashion.rev --set units=1,1,1 --set batch=4 --json |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["strategies"][0]["peak_bytes"])')
grep -q "^fashion: batch 4, revnet, peak $peak bytes" embed.txt || { cat embed.txt; fail "embed's plan is not revc mem's ($peak)"; }
[ "$(grep -c '^step [123]: loss [0-9]' embed.txt)" = 3 ] || { cat embed.txt; fail "embed did not train 3 steps"; }

pymod=$(find "$prefix" -name 'revc.cpython-*.so' | head -1)
[ -n "$pymod" ] || fail "the Python module is not installed"
# (Python's own memory at exit is not revc's leak.)
PYTHONPATH=$(dirname "$pymod") LD_PRELOAD=$preload ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
  /usr/bin/python3 - "$prefix" > py.txt 2>&1 <<'EOS' || { cat py.txt; fail "the installed Python module"; }
import sys
import numpy as np
import revc
assert revc.__file__.startswith(sys.argv[1]), revc.__file__
m = revc.Model("models/fashion.rev", set={"units": (1, 1, 1), "batch": 4})
x, y = np.random.default_rng(0).random((4, 1, 28, 28), dtype=np.float32), np.arange(4)
print("python: loss", round(m.train_step(x, y), 4))
EOS

# revc compile, with cc logged through a wrapper first in PATH.
mkdir bin
cat > bin/cc <<EOS
#!/bin/sh
echo "\$*" >> "$tmp/work/cc.log"
exec /usr/bin/cc "\$@"
EOS
chmod +x bin/cc
PATH=$tmp/work/bin:$PATH "$prefix/bin/revc" compile models/fashion.rev --set units=1,1,1 --set batch=4 \
  -o libf.so --header f.h 2> compile.err || { cat compile.err; fail "installed revc compile"; }
grep -q -- "-I$libdir/revc " cc.log && grep -q "$libdir/revc/librevc_aot.a" cc.log ||
  { cat cc.log; fail "revc compile did not use the prefix's AOT runtime"; }
! grep -q -e "$build" -e "$root" cc.log || { cat cc.log; fail "revc compile used the build or source tree"; }
cat > use.c <<'EOS'
#include <math.h>
#include <stdio.h>
#include "f.h"
static float x[F_BATCH * F_C * F_H * F_W];
int main(void)
{
	int32_t y[F_BATCH] = {0};
	f_model *m = f_new(1);
	if (!m)
		return 1;
	float loss = f_train_step(m, x, y, 0.1f);
	printf("loss %g\n", loss);
	f_free(m);
	return isfinite(loss) && loss > 0 ? 0 : 1;
}
EOS
/usr/bin/cc -std=c11 use.c -L. -lf -lopenblas -lm -Wl,-rpath,"$tmp/work" -o use || fail "building against libf.so"
./use > use.txt || { cat use.txt; fail "the compiled library does not train"; }
echo "install: $(tr '\n' ' ' < embed.txt); $(cat py.txt); revc compile from the prefix: $(cat use.txt)"
