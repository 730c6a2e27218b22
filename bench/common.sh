# bench/common.sh - what bench/run.sh (make bench) and bench/peers.sh (make
# bench-peers) share: a scratch directory, the report, measuring a command
# against a floor, the generated models, and writing bench/RESULTS.md.
# Sourced with BUILD, BIN and REPS set.
RESULTS=bench/RESULTS.md
work=$(mktemp -d "${TMPDIR:-/tmp}/fp8conv-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
report=$work/report
: >"$report"
out() { printf "$@" | tee -a "$report"; }

# best of N wall-clock runs of a command, in microseconds (inspect's table)
best_us() {
    local n=$1 best=
    shift
    for _ in $(seq "$n"); do
        local t0 t1
        t0=$(date +%s%N)
        "$@" >/dev/null
        t1=$(date +%s%N)
        local us=$(((t1 - t0) / 1000))
        if [ -z "$best" ] || [ "$us" -lt "$best" ]; then best=$us; fi
    done
    echo "$best"
}

# one run of "$@" (sync first, $work/out removed before and after): prints
# "wall_seconds max_rss_kib"
run_once() {
    rm -rf "$work/out"
    sync
    local stat rc=0
    stat=$("$BUILD/bench/runstat" "$@" 2>&1 >/dev/null) || rc=$?
    rm -rf "$work/out"
    if [ "$rc" -gt 1 ]; then # 1: diff found differences, verify findings
        printf 'bench: exit %d from: %s\n%s\n' "$rc" "$*" "$(tail -5 <<<"$stat")" >&2
        exit 1
    fi
    tail -1 <<<"$stat"
}
least() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }

# runs "$@" REPS times; prints "best_wall_seconds max_rss_kib"
measure() {
    local best='' rss=0 wall kib
    for _ in $(seq "$REPS"); do
        read -r wall kib < <(run_once "$@")
        best=$(least "$best" "$wall")
        rss=$((kib > rss ? kib : rss))
    done
    echo "$best $rss"
}

# measure_against FLOOR COMMAND...: as measure, with FLOOR (a command line,
# quoted for eval) run before each run of COMMAND, so that a slow spell of
# this shared machine falls on both; prints "best max_rss_kib floor_best"
measure_against() {
    local f=$1 best='' rss=0 fbest='' wall kib
    shift
    for _ in $(seq "$REPS"); do
        read -r wall kib < <(eval "run_once $f")
        fbest=$(least "$fbest" "$wall")
        read -r wall kib < <(run_once "$@")
        best=$(least "$best" "$wall")
        rss=$((kib > rss ? kib : rss))
    done
    echo "$best $rss $fbest"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
# "ok" or "MISSED" for a ratio against its goal ("-" without one)
verdict() { [ "$2" = - ] && echo - || awk -v r="$1" -v g="$2" 'BEGIN { print r <= g ? "ok" : "MISSED" }'; }

# A table of commands against floors: header, then one row per command.
row_header() {
    out '%-48s %7s %9s  %-24s %7s %6s %5s\n' "" "wall s" "peak RSS" "floor" "floor s" "ratio" "goal"
}
# row NAME FLOOR_NAME FLOOR_S GOAL COMMAND...: measures COMMAND, prints its
# row.  A floor measured by `floor` is run again, interleaved with COMMAND's
# runs (measure_against), and the ratio is of those two bests (FLOOR_S,
# the floor's own first measure, only where FLOOR_NAME was not measured so)
rss_goal_kib=$((64 * 1024))
declare -A floor_cmd=()
row() {
    local name=$1 fname=$2 fs=$3 goal=$4
    shift 4
    local t rss
    if [ -n "${floor_cmd[$fname]:-}" ]; then
        read -r t rss fs < <(measure_against "${floor_cmd[$fname]}" "$@")
    else
        read -r t rss < <(measure "$@")
    fi
    local r
    r=$(ratio "$t" "$fs")
    local v
    v=$(verdict "$r" "$goal")
    # the 64 MiB goal is fp8conv's, not its peers'
    [ "$1" != "$BIN" ] || [ "$rss" -le "$rss_goal_kib" ] || v="$v, RSS MISSED"
    out '%-48s %7.3f %5d MiB  %-24s %7.3f %6s %5s %s\n' "$name" "$t" $((rss / 1024)) "$fname" "$fs" \
        "$r" "$goal" "$([ "$v" = - ] || echo "$v")"
}
floor() { # floor NAME COMMAND...: measures and prints a floor, returns its time in $floor_s
    local name=$1 rss
    shift
    floor_cmd[$name]=$(printf '%q ' "$@")
    read -r floor_s rss < <(measure "$@")
    out '%-48s %7.3f %5d MiB\n' "floor: $name" "$floor_s" $((rss / 1024))
}

model_of() { # the directory of the SIZE-GB model, generated once
    local gb=$1 layers
    case $gb in 1) layers=2 ;; 4) layers=9 ;; 8) layers=19 ;; *) echo "bench: SIZES takes 1, 4 and 8" >&2; exit 2 ;; esac
    local m=$BUILD/bench-model-${gb}g
    if [ ! -f "$m/config.json" ] || ! grep -q "\"num_hidden_layers\": $layers," "$m/config.json"; then
        echo "== generating $m ($layers layers, once)" >&2
        rm -rf "$m"
        "$BUILD/bench/make_model" "$m" "$layers" >&2
    fi
    echo "$m"
}
warm() { cat "$@" >/dev/null; }

describe_machine() {
    out '%s\n' "$("$BIN" --version | head -1); $(git describe --always --dirty 2>/dev/null || echo '?')" \
    "$(date -u +%F), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(free -g | awk '/^Mem/ { print $2 }') GiB, $(uname -r), $(df -T "$work" | awk 'NR == 2 { print $2 }') for outputs; best of $REPS"
}

# write_results NAME: puts the report between "<!-- NAME: begin -->" and
# "<!-- NAME: end -->" in RESULTS.md (BENCH_WRITE=0: leaves it alone)
write_results() {
    [ "${BENCH_WRITE:-1}" = 1 ] || return 0
    python3 - "$RESULTS" "$report" "$1" <<'PY'
import sys
path, report, name = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3]
begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
text = open(path).read()
i, j = text.find(begin), text.find(end)
if i < 0 or j < i:
    sys.exit(f"bench: {path} has no '{begin}' ... '{end}' section to replace")
block = f"{begin}\n```\n{report.rstrip()}\n```\n"
open(path, "w").write(text[:i] + block + text[j:])
PY
    echo "bench: the tables are in $RESULTS (between the $1 markers)"
}
