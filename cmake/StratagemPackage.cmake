# The installable package: `cmake --install build --prefix P` puts
#   P/bin/stratagem, stratagem-runtime                 the tool (launch, sim, ...)
#   P/lib/libstratagem_*.a                             the libraries (stratagem_library())
#   P/include/stratagem/engine/..., sim/...            their headers
#   P/lib/cmake/Stratagem/                             find_package(Stratagem [COMPONENTS nccl])
#   P/lib/pkgconfig/stratagem.pc, stratagem-nccl.pc    pkg-config --cflags --libs stratagem
# A user project then needs `find_package(Stratagem REQUIRED)` and
# `target_link_libraries(app PRIVATE Stratagem::accelerate)`: C++20, LibTorch, Gloo, json and
# yaml-cpp come as usage requirements. Stratagem::nccl (the NCCL backend, with CUDA) is a
# separate component, so a CPU program never needs CUDA libraries.
include(CMakePackageConfigHelpers)

# stratagem_measure (the tools' device benchmarks and calibration, which link the NCCL
# backend where it is built) stays inside the build.
get_property(_libs GLOBAL PROPERTY STRATAGEM_LIBRARIES)
list(REMOVE_ITEM _libs stratagem_measure)
set(_core_libs ${_libs})
list(REMOVE_ITEM _core_libs stratagem_nccl)
set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Stratagem)

install(TARGETS ${_core_libs} EXPORT StratagemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(_exe stratagem stratagem-runtime)
  if(TARGET ${_exe})
    install(TARGETS ${_exe} EXPORT StratagemTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(EXPORT StratagemTargets NAMESPACE Stratagem:: DESTINATION ${_cmake_dir})
if(TARGET stratagem_nccl)
  install(TARGETS stratagem_nccl EXPORT StratagemNcclTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT StratagemNcclTargets NAMESPACE Stratagem:: DESTINATION ${_cmake_dir})
endif()

# Headers of every installed library under include/stratagem/<folder>, the umbrella
# include/stratagem/accelerate.hpp, and their includes of each other made "stratagem/..."
# (cmake/RewriteIncludes.cmake), so users write <stratagem/...> and nothing of theirs collides.
foreach(_lib IN LISTS _libs)
  get_target_property(_dir ${_lib} SOURCE_DIR)
  file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${_dir})
  install(DIRECTORY ${_dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/stratagem/${_rel}
          FILES_MATCHING PATTERN "*.hpp")
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/stratagem/ DESTINATION
        ${CMAKE_INSTALL_INCLUDEDIR}/stratagem FILES_MATCHING PATTERN "*.hpp")
install(CODE "execute_process(COMMAND \${CMAKE_COMMAND}
  \"-DDIR=\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}/stratagem\"
  -P \"${CMAKE_CURRENT_LIST_DIR}/RewriteIncludes.cmake\" COMMAND_ERROR_IS_FATAL ANY)")

set(STRATAGEM_WITH_TORCH_BUILT OFF)
if(TARGET stratagem_accelerate)
  set(STRATAGEM_WITH_TORCH_BUILT ON)
endif()
set(STRATAGEM_GLOO_TARGET OFF)
if(TARGET gloo)
  set(STRATAGEM_GLOO_TARGET ON)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/StratagemConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/StratagemConfig.cmake
                              INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/StratagemConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/StratagemConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/StratagemConfigVersion.cmake DESTINATION ${_cmake_dir})

# ---- pkg-config ---------------------------------------------------------------------------
# The file of an imported library target (any configuration's), or empty.
function(_stratagem_location out target)
  get_target_property(loc ${target} IMPORTED_LOCATION)
  if(NOT loc)
    get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
    foreach(c IN LISTS configs)
      get_target_property(loc ${target} IMPORTED_LOCATION_${c})
      if(loc)
        break()
      endif()
    endforeach()
  endif()
  if(NOT loc)
    set(loc "")
  endif()
  set(${out} "${loc}" PARENT_SCOPE)
endfunction()

# The files a list of link items (imported targets, paths, flags) resolves to, depth first.
function(_stratagem_link_files out)
  set(files "")
  foreach(item IN LISTS ARGN)
    # LibTorch's "-Wl,--no-as-needed,\"$<TARGET_FILE:torch_cpu>\"": the file in the flag.
    while(item MATCHES "\\$<TARGET_FILE:([^>]+)>")
      _stratagem_location(loc ${CMAKE_MATCH_1})
      string(REPLACE "$<TARGET_FILE:${CMAKE_MATCH_1}>" "${loc}" item "${item}")
      string(REPLACE "\"" "" item "${item}")
    endwhile()
    if(item MATCHES "^\\$<LINK_ONLY:(.+)>$")
      set(item ${CMAKE_MATCH_1})
    endif()
    # "$<TARGET_PROPERTY:torch_cpu,INTERFACE_LINK_LIBRARIES>": that target's dependencies.
    if(item MATCHES "^\\$<TARGET_PROPERTY:([^,>]+),INTERFACE_LINK_LIBRARIES>$")
      get_property(seen GLOBAL PROPERTY _STRATAGEM_PC_SEEN)
      if(NOT CMAKE_MATCH_1 IN_LIST seen AND TARGET ${CMAKE_MATCH_1})
        set_property(GLOBAL APPEND PROPERTY _STRATAGEM_PC_SEEN ${CMAKE_MATCH_1})
        get_target_property(deps ${CMAKE_MATCH_1} INTERFACE_LINK_LIBRARIES)
        if(deps)
          _stratagem_link_files(sub ${deps})
          list(APPEND files ${sub})
        endif()
      endif()
      continue()
    endif()
    if(item MATCHES "^\\$<")
      continue()
    elseif(TARGET ${item})
      get_target_property(type ${item} TYPE)
      get_target_property(aliased ${item} ALIASED_TARGET)
      if(aliased)
        set(item ${aliased})
      endif()
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        _stratagem_location(loc ${item})
        if(loc)
          list(APPEND files ${loc})
        endif()
      endif()
      get_target_property(deps ${item} INTERFACE_LINK_LIBRARIES)
      if(deps)
        _stratagem_link_files(sub ${deps})
        list(APPEND files ${sub})
      endif()
    else()
      list(APPEND files ${item})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES files)
  set(${out} ${files} PARENT_SCOPE)
endfunction()

if(STRATAGEM_WITH_TORCH_BUILT)
  # Static archives in dependency order, then what they need (stratagem_measure, the tools'
  # GPU benchmarks, is left to CMake users: it needs the NCCL backend where that is built).
  set(_pc_order accelerate runtime comm launch tune sim result memory plan workload scenario)
  set(_pc_libs "")
  foreach(_n IN LISTS _pc_order)
    if(TARGET stratagem_${_n})
      string(APPEND _pc_libs " -lstratagem_${_n}")
    endif()
  endforeach()
  if(TARGET gloo)
    set(_gloo gloo)
  else()
    set(_gloo ${GLOO_LIBRARY})
  endif()
  _stratagem_link_files(_deps ${TORCH_LIBRARIES} ${_gloo} yaml-cpp Threads::Threads)
  list(JOIN _deps " " _pc_deps)
  set(_pc_cflags "-std=c++20 ${TORCH_CXX_FLAGS}")
  foreach(_d IN LISTS TORCH_INCLUDE_DIRS)
    string(APPEND _pc_cflags " -I${_d}")
  endforeach()
  set(_pc_prefix "\${pcfiledir}/../..")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/stratagem.pc
       "prefix=${_pc_prefix}\n"
       "libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}\n"
       "includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}\n\n"
       "Name: stratagem\n"
       "Description: Stratagem's Accelerator (HuggingFace Accelerate for LibTorch) and engine\n"
       "Version: ${PROJECT_VERSION}\n"
       "Cflags: -I\${includedir} ${_pc_cflags}\n"
       "Libs: -L\${libdir}${_pc_libs} ${_pc_deps} -pthread\n")
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/stratagem.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  if(TARGET stratagem_nccl)
    get_target_property(_cudart CUDA::cudart IMPORTED_LOCATION)
    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/stratagem-nccl.pc
         "prefix=${_pc_prefix}\n"
         "libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}\n\n"
         "Name: stratagem-nccl\n"
         "Description: Stratagem's NCCL communicator (links CUDA)\n"
         "Version: ${PROJECT_VERSION}\n"
         "Requires: stratagem\n"
         "Cflags: -DSTRATAGEM_HAVE_NCCL\n"
         "Libs: -Wl,--undefined=stratagem_nccl_backend_anchor -L\${libdir} -lstratagem_nccl "
         "${_cudart} ${NCCL_LIBRARY}\n")
    install(FILES ${CMAKE_CURRENT_BINARY_DIR}/stratagem-nccl.pc
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  endif()
endif()
