#!/usr/bin/env bash
# make install DESTDIR=..., then the library as another program meets it:
# exactly the files install names, the shared object's soname links and its
# exports (the header's functions, nothing else), pkg-config's flags building
# tests/install/call.c against the static and the shared libfp8conv (and as
# C++), each run; then make uninstall leaves no file behind.  Part of make
# check-python.
# usage: MAKE=make tests/install/check_install.sh BUILD   (from the repository root)
set -uo pipefail
build=${1:-build}
make=${MAKE:-make}
root=$(pwd)
dest=$(mktemp -d "${TMPDIR:-/tmp}/fp8conv-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT
prefix=/usr/local
libdir=$dest$prefix/lib
version=$(sed -n 's/^#define FP8CONV_VERSION "\([^"]*\)"$/\1/p' lib/fp8conv.h)
soversion=$(echo "$version" | cut -d. -f1-2)
passed=0 failed=0
check() {  # NAME COMMAND...: passes when the command does
    local name=$1 out
    shift
    if out=$("$@" 2>&1); then
        echo "ok       $name"; passed=$((passed + 1))
    else
        echo "FAILED   $name"; echo "$out" | head -20 | sed 's/^/         /'; failed=$((failed + 1))
    fi
}

check "make install DESTDIR=$dest" $make --no-print-directory -s BUILD="$build" DESTDIR="$dest" \
    PREFIX=$prefix install

want=$(printf '%s\n' bin/fp8conv include/fp8conv.h lib/libfp8conv.a lib/libfp8conv.so \
    lib/libfp8conv.so.$soversion lib/libfp8conv.so.$version lib/pkgconfig/fp8conv.pc \
    share/bash-completion/completions/fp8conv share/man/man1/fp8conv.1 share/man/man5/fp8conv-formats.5)
check "it installs the binary, man pages, completion, header, libraries and fp8conv.pc" \
    diff <(echo "$want") <(cd "$dest$prefix" && find . ! -type d | sed 's|^\./||' | sort)
check "libfp8conv.so -> libfp8conv.so.$soversion -> libfp8conv.so.$version, soname libfp8conv.so.$soversion" \
    bash -c "[ \"\$(readlink '$libdir/libfp8conv.so')\" = libfp8conv.so.$soversion ] &&
             [ \"\$(readlink '$libdir/libfp8conv.so.$soversion')\" = libfp8conv.so.$version ] &&
             readelf -d '$libdir/libfp8conv.so.$version' | grep -q 'SONAME.*\[libfp8conv.so.$soversion\]'"
# The exports, against the archive's global symbols that the header names:
# every public function and table, no internal one.
exported=$(nm -D --defined-only "$libdir/libfp8conv.so" | awk '$2 ~ /^[TDRB]$/ { sub(/@.*/, "", $3); print $3 }' | sort -u)
public=$(nm -g --defined-only "$libdir/libfp8conv.a" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDRB]$/ { print $3 }' |
         sort -u | while read -r s; do grep -qw "$s" "$dest$prefix/include/fp8conv.h" && echo "$s"; done)
check "libfp8conv.so exports the $(echo "$public" | wc -l) functions and tables fp8conv.h declares, nothing else" \
    diff <(echo "$public") <(echo "$exported")

pc() { PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --define-variable=prefix="$dest$prefix" "$@" fp8conv; }
check "pkg-config --modversion fp8conv: $version" test "$(pc --modversion)" = "$version"
tensors=$("$build/fp8conv" inspect --json testdata/llama-tiny | jq -r '"\(.summary.tensors) tensors in \(.summary.shards) shards"')
expect="fp8conv $version: $tensors, quant_method none"
work=$dest/work
mkdir -p "$work"
# the shared library: what pkg-config --cflags --libs gives; run with the
# library found through LD_LIBRARY_PATH, as ldconfig would after an install
check "cc call.c \$(pkg-config --cflags --libs fp8conv): linked to libfp8conv.so.$soversion, runs" \
    bash -c "cc -std=c11 -Wall -Werror tests/install/call.c $(pc --cflags --libs) -o '$work/call-shared' &&
             readelf -d '$work/call-shared' | grep -q 'NEEDED.*\[libfp8conv.so.$soversion\]' &&
             [ \"\$(LD_LIBRARY_PATH='$libdir' '$work/call-shared' testdata/llama-tiny)\" = '$expect' ]"
check "the same as C++ (c++ -x c++)" \
    bash -c "c++ -Wall -Werror -x c++ tests/install/call.c $(pc --cflags --libs) -o '$work/call-cxx' &&
             [ \"\$(LD_LIBRARY_PATH='$libdir' '$work/call-cxx' testdata/llama-tiny)\" = '$expect' ]"
# the static library: pkg-config --static's flags, the archive named
# (-l:libfp8conv.a) so that the linker does not take the shared object
static_libs=$(pc --static --libs | sed 's/-lfp8conv\b/-l:libfp8conv.a/')
check "cc call.c \$(pkg-config --cflags --static --libs fp8conv) with libfp8conv.a: no libfp8conv.so needed, runs" \
    bash -c "cc -std=c11 -Wall -Werror tests/install/call.c $(pc --cflags) -o '$work/call-static' $static_libs &&
             ! readelf -d '$work/call-static' | grep -q 'NEEDED.*libfp8conv' &&
             [ \"\$('$work/call-static' testdata/llama-tiny)\" = '$expect' ]"
rm -rf "$work"

check "make uninstall DESTDIR=$dest" $make --no-print-directory -s BUILD="$build" DESTDIR="$dest" \
    PREFIX=$prefix uninstall
check "make uninstall leaves no file (only the directories install made)" \
    bash -c "[ -z \"\$(find '$dest' ! -type d)\" ] || { find '$dest' ! -type d; false; }"
echo "check-install end to end: $passed passed, $failed failed"
[ $failed = 0 ]
