# The checks of the command's end-to-end tests (sourced; $work is the test's scratch folder):
#   check NAME EXPECTED_EXIT_CODE COMMAND...   runs it, its output in $work/out.txt
#   expect_text NAME TEXT                      the last check's output holds TEXT
#   no_text NAME TEXT                          the last check's output does not hold TEXT
#   no_file NAME PATH                          nothing is at PATH
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
no_text() {  # name, text
  if grep -qF -- "$2" "$work/out.txt"; then fail=$((fail + 1)); echo "FAIL $1: '$2' in:"; cat "$work/out.txt"; else pass=$((pass + 1)); fi
}
no_file() {  # name, path
  if [ ! -e "$2" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: $2 exists"; fi
}
