# gridwarp_find_opencv(<module>...): the imported target opencv::<module> for each of OpenCV's
# modules named. They are found one by one, header and library, because Debian's
# libopencv-<module>-dev packages hold exactly those, while OpenCVConfig.cmake comes only with
# libopencv-dev and its 19 modules (VTK and Qt among their dependencies).
function(gridwarp_find_opencv)
  find_path(GRIDWARP_OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4
            DOC "The folder holding OpenCV's opencv2/ headers")
  foreach(module IN LISTS ARGN)
    if(TARGET opencv::${module})
      continue()
    endif()
    find_library(GRIDWARP_OPENCV_${module}_LIBRARY opencv_${module} DOC "OpenCV's ${module} module")
    if(NOT GRIDWARP_OPENCV_INCLUDE_DIR OR NOT EXISTS "${GRIDWARP_OPENCV_INCLUDE_DIR}/opencv2/${module}.hpp"
       OR NOT GRIDWARP_OPENCV_${module}_LIBRARY)
      message(FATAL_ERROR "gridwarp: OpenCV's ${module} module was not found (Debian: libopencv-${module}-dev)")
    endif()
    add_library(opencv::${module} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(opencv::${module} PROPERTIES IMPORTED_LOCATION "${GRIDWARP_OPENCV_${module}_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${GRIDWARP_OPENCV_INCLUDE_DIR}")
  endforeach()
endfunction()
