# Writes OUT: #define CTGRAD_GIT_COMMIT "<commit>[-dirty]" of the tree at SRC ("" outside a git
# checkout), rewriting it only when the text changes (no rebuild otherwise).
execute_process(COMMAND git describe --always --dirty --abbrev=12 WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(text "#define CTGRAD_GIT_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE ${OUT} "${text}")
