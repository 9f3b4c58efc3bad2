# Run at install time (cmake/StratagemPackage.cmake): the installed headers include each other
# as "stratagem/engine/...", "stratagem/sim/..." (include/ is the package's one include
# directory), so a user's project with folders of the same names (engine/, sim/) never
# shadows them. In the source tree they are "engine/...", relative to the repository root.
# DIR: the installed include/stratagem.
file(GLOB_RECURSE _headers "${DIR}/*.hpp")
foreach(_h IN LISTS _headers)
  file(READ "${_h}" _text)
  string(REGEX REPLACE "#include \"(engine|sim|tune|viz)/" "#include \"stratagem/\\1/" _new
                       "${_text}")
  if(NOT _new STREQUAL _text)
    file(WRITE "${_h}" "${_new}")
  endif()
endforeach()
