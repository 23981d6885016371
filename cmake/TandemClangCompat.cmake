# Clang builds (TANDEM_FUZZ) of headers that only GCC accepts, without editing them: a patched copy
# of each is generated under build-dir/clang-compat/ and put ahead of the source tree on the include
# path. Each patch applies only while its header still has the construct; once the header is fixed
# in place the copy is not made (and the entry here can go).
#
# common/tokenizer/jinja/value.h: ValueDict::size() is defined in the class, where Value is still
# incomplete; clang instantiates the constexpr std::vector<std::pair<std::string, Value>>::size()
# right there and fails. The copy defines it after Value.
set(_compat_dir ${CMAKE_BINARY_DIR}/clang-compat)
set(_value_h ${CMAKE_SOURCE_DIR}/common/tokenizer/jinja/value.h)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_value_h})
file(READ ${_value_h} _text)
set(_inline "  size_t size() const { return items_.size(); }")
string(FIND "${_text}" "${_inline}" _at)
if(_at GREATER -1)
  string(REPLACE "${_inline}" "  size_t size() const;" _text "${_text}")
  string(REPLACE "#endif  // TANDEM_COMMON_TOKENIZER_JINJA_VALUE_H_"
    "namespace tandem::jinja {\ninline size_t ValueDict::size() const { return items_.size(); }\n}  // namespace tandem::jinja\n\n#endif  // TANDEM_COMMON_TOKENIZER_JINJA_VALUE_H_"
    _text "${_text}")
  file(WRITE ${_compat_dir}/common/tokenizer/jinja/value.h "${_text}")
  include_directories(BEFORE ${_compat_dir})
  message(STATUS "tandem: clang compatibility copy of common/tokenizer/jinja/value.h in ${_compat_dir}")
else()
  file(REMOVE ${_compat_dir}/common/tokenizer/jinja/value.h)
endif()
