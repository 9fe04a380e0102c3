//===- SanitizerHooks.cpp - ASan settings for programs that use MPI ------===//
//
// Compiled into every program that links moe_comm_mpi (MOE_MPI_PROGRAM_HOOKS
// in runtime/CMakeLists.txt): the sanitizer reads these hooks from the
// executable only.
//
//===----------------------------------------------------------------------===//
#if defined(__SANITIZE_ADDRESS__)
// Open MPI keeps what MPI_Init allocates (its own and its dlopen'ed
// components') past MPI_Finalize, by design. LeakSanitizer can only tell
// those allocations by their full stacks (a closed component's frames are
// unknown to the fast unwinder): unwind slowly in programs that use MPI,
// and suppress MPI's initialisation.
extern "C" const char *__asan_default_options() { return "fast_unwind_on_malloc=0"; }
extern "C" const char *__lsan_default_suppressions() {
  return "leak:MPI_Init_thread\nleak:ompi_mpi_init\nleak:ompi_mpi_finalize\n"
         "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libpmix.so\n"
         "leak:libhwloc.so\nleak:libevent\nleak:_dl_init\n";
}
#endif
