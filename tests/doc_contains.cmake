# Passes when the text of CODE appears verbatim in DOC (so a documented example is the tested one).
file(READ ${DOC} doc)
file(READ ${CODE} code)
string(FIND "${doc}" "${code}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC} does not contain ${CODE} verbatim; paste the file into the doc again")
endif()
