#!/usr/bin/env bash
# librevc.so exports exactly the functions revc.h declares (driver/librevc.map):
# none of the modules inside, nor runtime/comm.h's revc_comm_* (the JIT binds
# those inside the library), and none of revc.h's is missing.
# Usage: exports.sh LIBREVC.so ROOT
set -u
lib=$1 root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# revc.h's functions: names called or declared outside comments
gcc -fpreprocessed -E -P "$root/driver/revc.h" | grep -oE '\brevc_[a-z0-9_]+ *\(' | sed 's/ *(//' | sort -u >"$tmp/header"
nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Za-z]$/ {print $3}' | sort -u >"$tmp/exported"
[ "$(wc -l <"$tmp/header")" -gt 50 ] || { echo "FAIL: found only $(wc -l <"$tmp/header") functions in revc.h"; exit 1; }
extra=$(comm -13 "$tmp/header" "$tmp/exported") missing=$(comm -23 "$tmp/header" "$tmp/exported")
[ -z "$extra" ] || echo "FAIL: exported but not in revc.h:" $extra
[ -z "$missing" ] || echo "FAIL: in revc.h but not exported:" $missing
[ -z "$extra$missing" ] && echo "exports: $(wc -l <"$tmp/exported") functions, revc.h's: OK"
[ -z "$extra$missing" ]
