#!/usr/bin/python3
"""Every Catch2 test case is one CTest entry of the same name: catch_discover_tests splits a name
at ';' into entries whose filters match nothing and pass, so a test could vanish from CI unseen.
usage: ctest_matches_catch2.py BUILD_DIR TEST_BINARY..."""
import subprocess, sys

build, binaries = sys.argv[1], sys.argv[2:]
catch = set()
for b in binaries:
    # Catch2 v2 exits with the number of tests it listed.
    out = subprocess.run([b, "--list-test-names-only"], capture_output=True, text=True, encoding="utf-8").stdout
    catch |= {l for l in out.splitlines() if l.strip()}
listed = subprocess.run(["ctest", "--test-dir", build, "-N"], capture_output=True, text=True, check=True, encoding="utf-8").stdout
entries = set()
for l in listed.splitlines():
    if l.strip().startswith("Test") and ":" in l:
        entries.add(l.split(":", 1)[1].strip())
missing = sorted(catch - entries)
split = [e for e in entries if ";" in e]
bad_names = sorted(n for n in catch if ";" in n)
print(f"{len(catch)} Catch2 test cases, {len(entries)} CTest entries")
if missing or bad_names:
    print("Catch2 test cases without a CTest entry of their name:", missing)
    print("test names with ';' (CTest splits them):", bad_names)
    sys.exit(1)
