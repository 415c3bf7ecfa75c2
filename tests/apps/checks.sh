# The checks of the command's end-to-end tests (sourced; $work is the test's scratch folder):
#   check NAME EXPECTED_EXIT_CODE COMMAND...   runs it, its output in $work/out.txt
#   expect_text NAME TEXT                      the last check's output holds TEXT
pass=0
fail=0
check() {  # name, expected exit code, command...
  local name=$1 want=$2
  shift 2
  "$@" > "$work/out.txt" 2>&1
  local rc=$?
  cat "$work/out.txt" >> "$work/all.txt"
  if [ "$rc" -eq "$want" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name: exit $rc, expected $want"; cat "$work/out.txt"; fi
}
expect_text() {  # name, text
  if grep -qF -- "$2" "$work/out.txt"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: no '$2' in:"; cat "$work/out.txt"; fi
}
