# TSan builds (TANDEM_SANITIZE with "thread"): every executable links tests/sanitizers/
# tsan_absl_sync.cc, which tells ThreadSanitizer about absl::Mutex / CondVar / Notification
# (Debian's abseil is built without TSan's annotations; without them every absl::Mutex-guarded
# access would be reported as a race). Included at the end of the top-level CMakeLists.txt, when
# every target exists.
add_library(tandem_tsan_absl_sync OBJECT ${CMAKE_SOURCE_DIR}/tests/sanitizers/tsan_absl_sync.cc)
target_link_libraries(tandem_tsan_absl_sync PUBLIC absl::synchronization ${CMAKE_DL_LIBS})

function(_tandem_tsan_link_executables dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE")
      target_link_libraries(${t} PRIVATE tandem_tsan_absl_sync)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _tandem_tsan_link_executables(${sub})
  endforeach()
endfunction()
_tandem_tsan_link_executables(${CMAKE_SOURCE_DIR})
