# Sourced by device_adaptive.sh and device_e2e.sh (bash): a measure call that measured nothing must not stop servers
# that are still starting. On 2026-12-05 (an H100, a fresh box) a measure call ran out of its startup wait while the
# speculative servers were still starting, stopped them, and the next call waited on nothing.

# still_starting SPEC PIDPREFIX: the names of SPEC's servers (an e2e.py spec: servers[].name / .url) whose process group
# (its leader's pid in the file PIDPREFIX<name>) lives but whose /health does not answer 200, space-separated
still_starting() {
  local spec=$1 prefix=$2 n u f
  [ -f "$spec" ] || return 0
  while read -r n u; do
    f="$prefix$n"
    [ -f "$f" ] && kill -0 -- "-$(cat "$f")" 2>/dev/null \
      && ! curl -s -m 3 -o /dev/null -w '%{http_code}' "$u/health" | grep -q 200 && printf '%s ' "$n"
  done < <(python3 -c "import json, sys; [print(s['name'], s['url']) for s in json.load(open(sys.argv[1]))['servers']]" \
             "$spec" 2>/dev/null)
  return 0
}

# measured_rows JSON: true when the e2e.py document JSON holds a measured row
measured_rows() {
  python3 -c "import json, sys; sys.exit(0 if json.load(open(sys.argv[1])).get('rows') else 1)" "$1" 2>/dev/null
}
