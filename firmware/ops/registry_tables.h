/* Every operator table, for registry.c to include twice (declarations, then
 * entries) with its own ET_OP_ defined: no include guard on purpose. The
 * tables are included with <>: found on the include path, not beside this
 * file, so a program's image compiles against its own cut-down copies. */
#include <cortex_m_ops.def>
#include <aten_ops.def>
#include <emlkit_ops.def>
#ifndef ET_REGISTRY_NO_FLOAT_OPS /* boards whose full image leaves them out (CMakeLists.txt) */
#include <aten_float_ops.def>
#endif
