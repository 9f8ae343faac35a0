# Writes OUTPUT (the header `shardft --version` reads) with the project VERSION and the commit of
# SOURCE_DIR (`git describe --always --dirty`; "unknown" outside a git checkout). Run at every build
# (CMakeLists.txt, target shardft_version); the file is rewritten only when its text changes, so an
# unchanged commit recompiles nothing.
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#pragma once\n#define SHARDFT_VERSION \"${VERSION}\"\n#define SHARDFT_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUTPUT}" "${text}")
endif()
