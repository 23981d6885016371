# tandem_library(NAME <target> [SOURCES ...] [DEPS ...])
# One static library per folder. Without SOURCES it takes every *.cc in the calling folder.
function(tandem_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_SOURCES)
    file(GLOB ARG_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  endif()
  if(ARG_SOURCES)
    add_library(${ARG_NAME} STATIC ${ARG_SOURCES})
    target_include_directories(${ARG_NAME} PUBLIC ${CMAKE_SOURCE_DIR})
    target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
    # Library sources compile in batches too (TANDEM_UNITY_LIBS in CMakeLists.txt): file-local
    # names must be distinct within a library.
    if(TANDEM_UNITY_LIBS)
      set_target_properties(${ARG_NAME} PROPERTIES UNITY_BUILD ON
        UNITY_BUILD_BATCH_SIZE ${TANDEM_UNITY_LIB_BATCH})
    endif()
  else()  # header-only so far
    add_library(${ARG_NAME} INTERFACE)
    target_include_directories(${ARG_NAME} INTERFACE ${CMAKE_SOURCE_DIR})
    target_link_libraries(${ARG_NAME} INTERFACE ${ARG_DEPS})
  endif()
endfunction()

# tandem_test(NAME <target> [SOURCES ...] DEPS ...)
# One test binary per tests/ folder. Without SOURCES it takes every *_test.cc in the calling folder.
function(tandem_test)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_SOURCES)
    file(GLOB ARG_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${ARG_NAME} PRIVATE
    TANDEM_SOURCE_DIR="${CMAKE_SOURCE_DIR}" TANDEM_BINARY_DIR="${CMAKE_BINARY_DIR}")
  # Test files compile in batches that share one parse of their headers (TANDEM_UNITY_TESTS in
  # CMakeLists.txt): a batch is one translation unit, so file-local helpers need distinct names.
  if(TANDEM_UNITY_TESTS)
    set_target_properties(${ARG_NAME} PROPERTIES UNITY_BUILD ON
      UNITY_BUILD_BATCH_SIZE ${TANDEM_UNITY_TEST_BATCH})
  endif()
  # After the directory's -O3 on the command line, so it wins (TANDEM_TEST_OPT in CMakeLists.txt).
  if(TANDEM_TEST_OPT)
    target_compile_options(${ARG_NAME} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${TANDEM_TEST_OPT}>)
  endif()
  # Each test is labelled with its binary's name: `ctest -L tandem_engine_tests` runs one binary's.
  # PROPERTIES are name/value pairs with each value one word: a list (ENVIRONMENT "A=1;B=2") would
  # split. The binary dir is a compile definition above.
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT "TANDEM_SOURCE_DIR=${CMAKE_SOURCE_DIR}" LABELS ${ARG_NAME})
endfunction()

# Adds each listed sub-folder that has a CMakeLists.txt (folders fill in as the project grows).
function(tandem_add_subdirectories)
  foreach(dir IN LISTS ARGN)
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/CMakeLists.txt)
      add_subdirectory(${dir})
    endif()
  endforeach()
endfunction()
