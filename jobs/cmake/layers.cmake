# One static library per folder of DESIGN.md's layout (shardft_kernels, shardft_comm, ... shardft_tools),
# each linking only the layers it may use and compiled seeing only their folders, so that an include the
# layering forbids fails the build at that line instead of waiting for ../shared/tools/check-layers.sh.
#
# Project includes name their folder ("model/decoder.hpp"). A layer's include root is therefore a folder
# of links made at configure time, <build>/layer_roots/<layer>/, holding one link per folder the layer may
# include (itself among them) and nothing else.

# Who may include whom: DESIGN.md's table, the same one check-layers.sh holds.
set(SHARDFT_LAYERS kernels comm io config jinja tokenizer model data parallel infer train tools)
set(SHARDFT_LAYER_USES_kernels "")
set(SHARDFT_LAYER_USES_comm kernels)
set(SHARDFT_LAYER_USES_io kernels)
set(SHARDFT_LAYER_USES_config io)
set(SHARDFT_LAYER_USES_jinja io)
set(SHARDFT_LAYER_USES_tokenizer kernels config io)
set(SHARDFT_LAYER_USES_model kernels config io)
set(SHARDFT_LAYER_USES_data kernels config io tokenizer jinja)
set(SHARDFT_LAYER_USES_parallel kernels comm model config io)
set(SHARDFT_LAYER_USES_infer kernels comm model data tokenizer jinja parallel config io)
set(SHARDFT_LAYER_USES_train kernels comm model data tokenizer jinja parallel infer config io)
set(SHARDFT_LAYER_USES_tools kernels comm model data tokenizer jinja parallel infer train config io)
set(SHARDFT_LAYER_USES_cli ${SHARDFT_LAYERS})

# shardft_layer_folder(<layer> <out>): kernels/, comm/ and io/ sit at the root, the others under src/.
function(shardft_layer_folder layer out)
  if(layer STREQUAL "kernels" OR layer STREQUAL "comm" OR layer STREQUAL "io")
    set(${out} ${CMAKE_SOURCE_DIR}/${layer} PARENT_SCOPE)
  else()
    set(${out} ${CMAKE_SOURCE_DIR}/src/${layer} PARENT_SCOPE)
  endif()
endfunction()

# shardft_layer_root(<layer> <out>): (re)makes the layer's folder of links and names it. Stale entries are
# removed one by one (file(REMOVE) deletes a link, never what it points to).
function(shardft_layer_root layer out)
  set(root ${CMAKE_BINARY_DIR}/layer_roots/${layer})
  file(MAKE_DIRECTORY ${root})
  file(GLOB stale LIST_DIRECTORIES true ${root}/*)
  foreach(entry ${stale})
    file(REMOVE ${entry})
  endforeach()
  foreach(used ${layer} ${SHARDFT_LAYER_USES_${layer}})
    shardft_layer_folder(${used} folder)
    file(CREATE_LINK ${folder} ${root}/${used} SYMBOLIC)
  endforeach()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# shardft_layer_include(<target> <layer>): compile <target> with <layer>'s view of the project.
function(shardft_layer_include target layer)
  shardft_layer_root(${layer} root)
  target_include_directories(${target} PRIVATE ${root})
endfunction()

# shardft_add_layer(<layer> <external target>): the layer's library from every .cpp of its folder except
# the backend subfolders (kernels/cuda, kernels/host, kernels/cpu, comm/nccl), of which the caller adds those
# the build's toolkit, compiler and Kokkos backend call for.
function(shardft_add_layer layer external)
  shardft_layer_folder(${layer} folder)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${folder}/*.cpp)
  list(FILTER sources EXCLUDE REGEX "/kernels/cuda/|/kernels/host/|/kernels/cpu/|/comm/nccl/")
  add_library(shardft_${layer} STATIC ${sources})
  shardft_layer_include(shardft_${layer} ${layer})
  target_compile_options(shardft_${layer} PRIVATE ${SHARDFT_WARNINGS})
  target_link_libraries(shardft_${layer} PUBLIC ${external})
  foreach(used ${SHARDFT_LAYER_USES_${layer}})
    target_link_libraries(shardft_${layer} PUBLIC shardft_${used})
  endforeach()
endfunction()
