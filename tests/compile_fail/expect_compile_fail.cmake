# Compiles SRC and passes only if compilation fails and the first diagnostic line of the compiler's
# output matches FIRST_LINE (a regex). g++ prints the header include trace ("In file included
# from ...", "                 from ...") before a diagnostic located in a header; that trace is
# skipped. Also reports the size of the whole error output, with the checkout's and the build's
# paths (STRIP, a list) shortened, so that the size does not depend on where the tree lives; the
# compiler speaks English (LC_ALL=C), so the patterns hold in any locale.
set(ENV{LC_ALL} C)
execute_process(
  COMMAND ${CXX} -std=c++20 -fsyntax-only ${FLAGS} ${SRC}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
string(APPEND out "${err}")
foreach(prefix IN LISTS STRIP)
  string(REPLACE "${prefix}" "<dir>" out "${out}")
endforeach()

if(rc EQUAL 0)
  message(FATAL_ERROR "expected a compile error, but ${SRC} compiled")
endif()
string(REPLACE ";" "," lines_text "${out}")
string(REPLACE "\n" ";" lines "${lines_text}")
set(first "")
foreach(line IN LISTS lines)
  if(line MATCHES "^In file included from " OR line MATCHES "^ +from ")
    continue()
  endif()
  set(first "${line}")
  break()
endforeach()
string(LENGTH "${out}" bytes)
message(STATUS "first line: ${first}")
message(STATUS "error output: ${bytes} bytes")
if(NOT first MATCHES "${FIRST_LINE}")
  message(FATAL_ERROR "first line does not match '${FIRST_LINE}':\n${out}")
endif()
if(DEFINED ERROR_LINE)
  string(REGEX MATCH "error: [^\n]*" error_line "${out}")
  if(NOT error_line MATCHES "${ERROR_LINE}")
    message(FATAL_ERROR "first error line '${error_line}' does not match '${ERROR_LINE}'")
  endif()
endif()
if(DEFINED MAX_BYTES AND bytes GREATER MAX_BYTES)
  message(FATAL_ERROR "error output is ${bytes} bytes, more than ${MAX_BYTES}:\n${out}")
endif()
